#ifndef DPCURATOR_CLIENT_PROGRESS_H_
#define DPCURATOR_CLIENT_PROGRESS_H_

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

namespace dpcurator::client {

// Progress lines of long commands (train, session step, demo, collections
// training). On a terminal each update rewrites one line with '\r'; off a
// terminal (a log, a pipe, CI) an update is printed as a plain line at most
// every `interval`, and Finish always prints the final line, so logs hold a
// few readable lines and never '\r' garbage.
class Progress {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  static constexpr std::chrono::seconds kPlainInterval{5};

  // Writes to stderr; a terminal when isatty(fileno(stderr)).
  Progress();
  // For tests: any stream, terminal or not, and a clock.
  Progress(std::FILE* out, bool terminal, std::chrono::steady_clock::duration interval,
           Clock clock);

  // A new state, e.g. "train merf: step 120 / 1000  loss 0.0123  3.1s".
  void Update(const std::string& line);
  // The last state: always printed, and the terminal line is ended.
  void Finish(const std::string& line);

 private:
  std::FILE* out_;
  bool terminal_;
  std::chrono::steady_clock::duration interval_;
  Clock clock_;
  bool printed_any_ = false;
  std::chrono::steady_clock::time_point last_printed_;
  size_t last_width_ = 0;
};

// A trainer's progress callback: "<label>: step S / N  loss L  Ts", the
// line at step N finished; nothing when `quiet`. The callback refers to
// this object: keep it alive while training.
class StepProgress {
 public:
  StepProgress(std::string label, int total_steps, bool quiet)
      : label_(std::move(label)), total_steps_(total_steps), quiet_(quiet) {}

  std::function<void(int step, double loss)> Callback();

  // Text appended to the next lines (e.g. "eps spent 0.70"), for trainers
  // whose state beyond step and loss changes while they run.
  void set_note(std::string note) { note_ = std::move(note); }

 private:
  std::string label_;
  std::string note_;
  int total_steps_;
  bool quiet_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  Progress progress_;
};

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_PROGRESS_H_
