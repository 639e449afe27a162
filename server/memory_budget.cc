#include "server/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dpcurator::server {

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
}  // namespace

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  std::string s = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  const auto refuse = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text.substr(0, 64), "' is not a byte size: write a count of bytes or one with a "
        "suffix K, M, G or T (powers of 1024), e.g. 8G or 512M"));
  };
  if (absl::EndsWith(s, "IB")) {
    s.resize(s.size() - 2);
  } else if (absl::EndsWith(s, "B")) {
    s.resize(s.size() - 1);
  }
  int shift = 0;
  if (!s.empty()) {
    switch (s.back()) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: break;
    }
    if (shift > 0) s.pop_back();
  }
  if (s.empty()) return refuse();
  // Whole numbers and decimals ("1.5G"), never negative.
  double value = 0.0;
  if (!absl::SimpleAtod(s, &value) || !(value >= 0.0) ||
      s.find_first_not_of("0123456789.") != std::string::npos) {
    return refuse();
  }
  const double bytes = value * static_cast<double>(int64_t{1} << shift);
  if (!(bytes < 9.2e18)) return refuse();
  return static_cast<int64_t>(bytes);
}

std::string FormatBytes(int64_t bytes) {
  if (bytes == kMax) return "more than 8 EiB";
  const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " bytes");
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return value < 10.0 ? absl::StrFormat("%.1f %s", value, kUnits[unit])
                      : absl::StrFormat("%.0f %s", value, kUnits[unit]);
}

int64_t DefaultMemoryBudgetFor(int64_t available) {
  const int64_t usable = std::max<int64_t>(available - kMemoryBaselineBytes, 0);
  return std::max<int64_t>(kMinDefaultMemoryBudget,
                           static_cast<int64_t>(static_cast<double>(usable) *
                                                kMemoryBudgetFraction));
}

int64_t AvailableMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  int64_t physical = pages > 0 && page_size > 0 ? plan::SaturatingMul(pages, page_size) : 0;
  // cgroup v2: the container's limit, "max" when none.
  std::ifstream limit_file("/sys/fs/cgroup/memory.max");
  std::string limit;
  if (limit_file >> limit && limit != "max") {
    int64_t cgroup = 0;
    if (absl::SimpleAtoi(limit, &cgroup) && cgroup > 0 &&
        (physical == 0 || cgroup < physical)) {
      return cgroup;
    }
  }
  // Neither known (no sysconf): a small machine's figure, so the default is
  // the minimum rather than unbounded.
  return physical > 0 ? physical : int64_t{4} << 30;
}

int64_t DefaultMemoryBudget() { return DefaultMemoryBudgetFor(AvailableMemory()); }

int DefaultRowReaders() {
  const long threads = sysconf(_SC_NPROCESSORS_ONLN);
  return threads > kMinRowReaders ? static_cast<int>(std::min<long>(threads, 1024))
                                  : kMinRowReaders;
}

MemoryBudget::Reservation::Reservation(Reservation&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      reads_rows_(std::exchange(other.reads_rows_, false)) {}

MemoryBudget::Reservation& MemoryBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    reads_rows_ = std::exchange(other.reads_rows_, false);
  }
  return *this;
}

void MemoryBudget::Reservation::Release() {
  if (budget_ != nullptr) budget_->Return(bytes_, reads_rows_);
  budget_ = nullptr;
  bytes_ = 0;
  reads_rows_ = false;
}

namespace {
std::string Ending(absl::string_view hint) {
  return absl::StrCat(". Nothing was charged", hint.empty() ? "" : "; ", hint,
                      hint.empty() ? "" : ",", " or ask the curator to raise the limit");
}
}  // namespace

absl::Status CheckSendLimit(const plan::PlanFootprint& footprint, int64_t max_message_bytes) {
  if (footprint.submitted_bytes > max_message_bytes) {
    // Issue 41: an external dataset's tables arrive in one message.
    return absl::ResourceExhaustedError(absl::StrCat(
        footprint.what, " needs its runner to submit ", FormatBytes(footprint.submitted_bytes),
        " of exact tables in one message, over the server's ", FormatBytes(max_message_bytes),
        " message limit (max_message_bytes), so it could never be submitted. Nothing was "
        "charged", footprint.hint.empty() ? "" : "; ", footprint.hint));
  }
  if (footprint.artefact_bytes <= max_message_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      footprint.what, "'s answer could reach ", FormatBytes(footprint.artefact_bytes),
      ", over the server's ", FormatBytes(max_message_bytes),
      " message limit (max_message_bytes; the client receives under the same limit), so it "
      "could never be delivered. Nothing was charged",
      footprint.hint.empty() ? "" : "; ", footprint.hint));
}

absl::Status MemoryBudget::CheckAlone(int64_t public_bytes, absl::string_view what,
                                      absl::string_view hint) const {
  if (public_bytes <= budget_) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " projects a peak of ", FormatBytes(public_bytes),
      " from its parameters alone, over the server's --memory-budget limit (",
      FormatBytes(budget_), ")", Ending(hint)));
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::Reserve(
    int64_t public_bytes, int64_t row_bytes, absl::string_view what, absl::string_view hint,
    const std::function<bool()>& cancelled) {
  public_bytes = std::max<int64_t>(public_bytes, 0);
  const std::string ending = Ending(hint);
  // Over the budget on its own: refused whatever else runs.
  if (absl::Status alone = CheckAlone(public_bytes, what, hint); !alone.ok()) return alone;
  std::unique_lock<std::mutex> lock(mutex_);
  const bool reads_rows = row_bytes > 0;
  if (reads_rows) {
    // Wait for a row-reader slot (how long is the other works' business:
    // a latency, like the release's own, never a refusal).
    constexpr auto kPoll = std::chrono::milliseconds(50);
    while (!reader_freed_.wait_for(lock, kPoll, [this] { return readers_ < row_readers_; })) {
      if (cancelled != nullptr && cancelled()) {
        return absl::CancelledError(absl::StrCat(
            "the call was cancelled while ", what,
            " waited for one of the server's --max-row-readers slots (", row_readers_,
            "); nothing was charged"));
      }
    }
  }
  // Public bytes alone decide (Reserve's comment in memory_budget.h): the
  // request's own projection and what others' public projections hold.
  if (public_bytes > budget_ - held_) {
    if (holders_ == 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          what, " projects a peak of ", FormatBytes(public_bytes),
          " from its parameters, over the server's --memory-budget limit (",
          FormatBytes(budget_), ")", ending));
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " projects a peak of ", FormatBytes(public_bytes),
        " from its parameters; with what ", holders_,
        " running release(s) and session step(s) hold, that is over the server's "
        "--memory-budget limit (",
        FormatBytes(budget_), "). Retry when they finish", ending));
  }
  held_ += public_bytes;
  ++holders_;
  if (reads_rows) ++readers_;
  return Reservation(this, public_bytes, reads_rows);
}

int64_t MemoryBudget::held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_;
}

int64_t MemoryBudget::holders() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return holders_;
}

int MemoryBudget::readers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return readers_;
}

void MemoryBudget::Return(int64_t bytes, bool reads_rows) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    held_ -= bytes;
    --holders_;
    if (reads_rows) --readers_;
  }
  if (reads_rows) reader_freed_.notify_one();
}

}  // namespace dpcurator::server
