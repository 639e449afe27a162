#ifndef DPCURATOR_SERVER_STEP_RATE_H_
#define DPCURATOR_SERVER_STEP_RATE_H_

#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace dpcurator::server {

// Per-session step rate of dp_sgd sessions, so one analyst cannot starve
// the server (issue 15): a token bucket per session, refilled at
// kDpSgdStepsPerSecond up to kDpSgdStepBurst. Checked before any row is
// read; a refused step costs nothing and may be retried.
inline constexpr double kDpSgdStepsPerSecond = 500.0;
inline constexpr double kDpSgdStepBurst = 100.0;
class StepRateLimiter {
 public:
  StepRateLimiter(double steps_per_second, double burst)
      : rate_(steps_per_second), burst_(burst) {}
  // Takes one token of `session_id`'s bucket at `now_seconds` (a monotonic
  // clock); RESOURCE_EXHAUSTED when the bucket is empty.
  absl::Status Take(const std::string& session_id, double now_seconds);

 private:
  struct Bucket {
    double tokens = 0.0;
    double updated = 0.0;
  };
  // Buckets idle long enough to be full again are dropped past this many,
  // so the map stays bounded (a full bucket and no bucket are the same).
  static constexpr size_t kMaxBuckets = 4096;
  const double rate_;
  const double burst_;
  std::mutex mutex_;
  absl::flat_hash_map<std::string, Bucket> buckets_;  // guarded by mutex_
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_STEP_RATE_H_
