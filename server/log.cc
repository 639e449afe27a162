#include "server/log.h"

#include <cstdio>
#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace dpcurator::server {
namespace {

// The sink and the mutex that serialises lines. Leaked on purpose: events may
// be logged from threads that outlive static destruction (gRPC's).
struct SinkState {
  std::mutex mutex;
  LogSink sink;
};

SinkState& State() {
  static auto* state = new SinkState();
  return *state;
}

}  // namespace

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

LogSink SetLogSink(LogSink sink) {
  SinkState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  std::swap(state.sink, sink);
  return sink;
}

LogEvent::LogEvent(LogLevel level, absl::string_view event) : level_(level) {
  Str("event", event);
}

LogEvent& LogEvent::Set(absl::string_view key, Value value) {
  for (auto& [name, existing] : fields_) {
    if (name == key) {
      existing = std::move(value);
      return *this;
    }
  }
  fields_.emplace_back(std::string(key), std::move(value));
  return *this;
}

LogEvent& LogEvent::Str(absl::string_view key, absl::string_view value) {
  return Set(key, std::string(value));
}
LogEvent& LogEvent::Int(absl::string_view key, int64_t value) { return Set(key, value); }
LogEvent& LogEvent::Num(absl::string_view key, double value) { return Set(key, value); }
LogEvent& LogEvent::Bool(absl::string_view key, bool value) { return Set(key, value); }
LogEvent& LogEvent::Code(absl::StatusCode code) {
  return Str("code", absl::StatusCodeToString(code));
}

LogEvent::~LogEvent() {
  // ordered_json keeps time, level, event first, then the caller's order.
  nlohmann::ordered_json line;
  line["time"] = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  line["level"] = LogLevelName(level_);
  for (const auto& [key, value] : fields_) {
    std::visit([&line, &key](const auto& v) { line[key] = v; }, value);
  }
  // replace, not strict: a byte that is not UTF-8 must not throw from a
  // destructor (dump() throws type_error 316 by default).
  const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  SinkState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.sink) {
    state.sink(text);
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
}

}  // namespace dpcurator::server
