#ifndef DPCURATOR_TESTS_SERVER_PROCESS_UTIL_H_
#define DPCURATOR_TESTS_SERVER_PROCESS_UTIL_H_

// Test-only helper: a child process (the real dpcurator-server binary) that
// a test can SIGKILL, unlike the in-process CuratorServer fixture.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dpcurator::server::testing {

// A child started with fork + execv; its stdout and stderr go to a log file
// (truncated at start). The child gets SIGKILL if the thread that spawned it
// dies (PR_SET_PDEATHSIG), and the destructor SIGKILLs and reaps a child that
// still runs, so a failing test leaves no server behind.
class ChildProcess {
 public:
  // argv[0] is the binary's path.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::vector<std::string>& argv,
                                                             const std::string& log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

  // Sends `signal` and waits for the child to end; returns the wait status
  // (inspect with WIFSIGNALED / WTERMSIG). Fails if the child was already
  // reaped.
  absl::StatusOr<int> KillAndWait(int signal);
  // True (and the wait status in *status) once the child has exited; never
  // blocks.
  bool Exited(int* status);
  // Polls `port_file` (written by dpcurator-server --port_file once serving)
  // until it holds a positive port, the child exits, or `timeout` passes.
  absl::StatusOr<int> WaitForPort(const std::string& port_file, std::chrono::milliseconds timeout);

 private:
  ChildProcess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_;
  std::string log_path_;
  bool reaped_ = false;
};

// The whole file, or empty if it cannot be read.
std::string ReadWholeFile(const std::string& path);

}  // namespace dpcurator::server::testing

#endif  // DPCURATOR_TESTS_SERVER_PROCESS_UTIL_H_
