#ifndef DPCURATOR_SERVER_LOG_H_
#define DPCURATOR_SERVER_LOG_H_

// Structured event log of the server: one JSON object per line, on stderr
// unless a sink is installed (tests). Every line carries "time" (RFC 3339,
// UTC, milliseconds), "level" and "event"; the rest are typed fields chosen by
// the caller.
//
// What may be logged (PRIVACY.md, issue 6): identifiers the server made
// (dataset, release, session, collection ids), roles, method names, status
// codes, counts, epsilons and durations. Never record values, row cells,
// report values, tokens, request payloads or error messages that quote them
// (a row-validation message names the offending cell): log the status code
// instead. The API has no "log this message" call on purpose.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dpcurator::server {

enum class LogLevel { kInfo, kWarning, kError };
const char* LogLevelName(LogLevel level);

// Receives one complete line (no trailing newline).
using LogSink = std::function<void(absl::string_view line)>;

// Replaces the process-wide sink; an empty function restores stderr. Returns
// the previous sink. Lines are delivered one at a time (a mutex), so a sink
// needs no locking of its own.
LogSink SetLogSink(LogSink sink);

// One event, written when it goes out of scope:
//   LogEvent(LogLevel::kInfo, "release").Str("dataset", id).Num("epsilon", e);
// Fields appear in the order they were added; adding a key twice keeps the
// last value.
class LogEvent {
 public:
  LogEvent(LogLevel level, absl::string_view event);
  ~LogEvent();
  LogEvent(const LogEvent&) = delete;
  LogEvent& operator=(const LogEvent&) = delete;

  LogEvent& Str(absl::string_view key, absl::string_view value);
  LogEvent& Int(absl::string_view key, int64_t value);
  LogEvent& Num(absl::string_view key, double value);
  LogEvent& Bool(absl::string_view key, bool value);
  // "code": the canonical name of the status code (OK, RESOURCE_EXHAUSTED,
  // ...). Only the code: the message may quote a cell.
  LogEvent& Code(absl::StatusCode code);

 private:
  using Value = std::variant<std::string, int64_t, double, bool>;
  LogEvent& Set(absl::string_view key, Value value);

  LogLevel level_;
  std::vector<std::pair<std::string, Value>> fields_;
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_LOG_H_
