#ifndef DPCURATOR_TESTS_SERVER_FAKE_CLOCK_H_
#define DPCURATOR_TESTS_SERVER_FAKE_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "server/clock.h"

namespace dpcurator::server::testing {

// A clock that moves only when told to (server/clock.h). Kept under tests/
// rather than in the server library: a settable clock has no business in a
// production binary (moving time would reap every open session and date
// ledger events arbitrarily), and only tests construct one. Atomic, because
// the server reads it from RPC and reaper threads while the test advances it.
class FakeClock final : public Clock {
 public:
  // An arbitrary fixed start (2026-01-01T00:00:00Z), far from 0 so that
  // "now - timeout" never goes negative in the code under test.
  static constexpr int64_t kStartUnix = 1767225600;

  explicit FakeClock(int64_t now_unix = kStartUnix) : now_(now_unix) {}

  int64_t UnixNow() const override { return now_.load(std::memory_order_relaxed); }
  void Set(int64_t now_unix) { now_.store(now_unix, std::memory_order_relaxed); }
  void Advance(int64_t seconds) { now_.fetch_add(seconds, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace dpcurator::server::testing

#endif  // DPCURATOR_TESTS_SERVER_FAKE_CLOCK_H_
