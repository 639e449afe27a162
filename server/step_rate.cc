#include "server/step_rate.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace dpcurator::server {

absl::Status StepRateLimiter::Take(const std::string& session_id, double now_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (buckets_.size() >= kMaxBuckets && !buckets_.contains(session_id)) {
    // Drop every bucket that has refilled: forgetting it changes nothing.
    absl::erase_if(buckets_, [&](const auto& entry) {
      return entry.second.tokens + (now_seconds - entry.second.updated) * rate_ >= burst_;
    });
  }
  auto [it, inserted] = buckets_.try_emplace(session_id, Bucket{burst_, now_seconds});
  Bucket& bucket = it->second;
  if (!inserted) {
    bucket.tokens =
        std::min(burst_, bucket.tokens + std::max(0.0, now_seconds - bucket.updated) * rate_);
    bucket.updated = std::max(bucket.updated, now_seconds);
  }
  if (bucket.tokens < 1.0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "session '", session_id, "' is over its limit of ", rate_,
        " steps per second; wait briefly and retry the same step index (nothing was charged)"));
  }
  bucket.tokens -= 1.0;
  return absl::OkStatus();
}

}  // namespace dpcurator::server
