#ifndef DPCURATOR_SERVER_CLOCK_H_
#define DPCURATOR_SERVER_CLOCK_H_

#include <cstdint>

namespace dpcurator::server {

// Wall-clock time as the server stores it: whole Unix seconds (every
// *_unix column, session idleness, token and audit times). Injected
// (ServerOptions::clock) rather than read from std::chrono at each use, so
// that tests can move time: the idle-session reaper and stored timestamps
// are then checked exactly instead of by sleeping. Implementations are
// thread-safe; the server reads the clock from many RPC threads at once.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t UnixNow() const = 0;
};

// The real clock (std::chrono::system_clock). Stateless, so one shared
// instance serves every server in the process.
class SystemClock final : public Clock {
 public:
  static const SystemClock& Get();
  int64_t UnixNow() const override;

 private:
  SystemClock() = default;
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_CLOCK_H_
