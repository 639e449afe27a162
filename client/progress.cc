#include "client/progress.h"

#include <unistd.h>

#include "absl/strings/str_format.h"

namespace dpcurator::client {

Progress::Progress()
    : Progress(stderr, isatty(fileno(stderr)) == 1, kPlainInterval,
               [] { return std::chrono::steady_clock::now(); }) {}

Progress::Progress(std::FILE* out, bool terminal, std::chrono::steady_clock::duration interval,
                   Clock clock)
    : out_(out), terminal_(terminal), interval_(interval), clock_(std::move(clock)) {}

void Progress::Update(const std::string& line) {
  if (terminal_) {
    // Pad over the rest of a longer previous line.
    const size_t pad = last_width_ > line.size() ? last_width_ - line.size() : 0;
    std::fprintf(out_, "\r%s%*s", line.c_str(), static_cast<int>(pad), "");
    std::fflush(out_);
    last_width_ = line.size();
    printed_any_ = true;
    return;
  }
  const auto now = clock_();
  if (printed_any_ && now - last_printed_ < interval_) return;
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  printed_any_ = true;
  last_printed_ = now;
}

void Progress::Finish(const std::string& line) {
  if (terminal_) {
    Update(line);
    std::fprintf(out_, "\n");
    std::fflush(out_);
    last_width_ = 0;
    return;
  }
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  printed_any_ = true;
  last_printed_ = clock_();
}

std::function<void(int step, double loss)> StepProgress::Callback() {
  return [this](int step, double loss) {
    if (quiet_) return;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string line =
        absl::StrFormat("%s: step %6d / %d  loss %.6f  %.1fs%s%s", label_, step, total_steps_,
                        loss, seconds, note_.empty() ? "" : "  ", note_);
    if (step == total_steps_) {
      progress_.Finish(line);
    } else {
      progress_.Update(line);
    }
  };
}

}  // namespace dpcurator::client
