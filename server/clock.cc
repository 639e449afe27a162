#include "server/clock.h"

#include <chrono>

namespace dpcurator::server {

const SystemClock& SystemClock::Get() {
  // Never destroyed: servers and their threads may outlive static
  // destruction order (trivially destructible anyway; no cost).
  static const SystemClock* const clock = new SystemClock();
  return *clock;
}

int64_t SystemClock::UnixNow() const {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace dpcurator::server
