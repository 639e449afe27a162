#include "tests/server/process_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpcurator::server::testing {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("Spawn needs at least the binary's path");
  // Everything the child touches is prepared before fork: between fork and
  // exec a multi-threaded parent's child may only make async-signal-safe
  // calls (no allocation).
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open '", log_path, "': ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(log_fd);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(error)));
  }
  if (pid == 0) {
    // Killed with the test if the test dies first; the getppid() check
    // closes the race where the parent died before prctl.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, log_path));
}

ChildProcess::~ChildProcess() {
  if (reaped_) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

absl::StatusOr<int> ChildProcess::KillAndWait(int signal) {
  if (reaped_) return absl::FailedPreconditionError("the child has already been reaped");
  if (kill(pid_, signal) != 0) {
    return absl::InternalError(absl::StrCat("kill(", pid_, "): ", std::strerror(errno)));
  }
  int status = 0;
  pid_t waited;
  do {
    waited = waitpid(pid_, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited != pid_) return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
  reaped_ = true;
  return status;
}

bool ChildProcess::Exited(int* status) {
  if (reaped_) return true;
  if (waitpid(pid_, status, WNOHANG) == pid_) {
    reaped_ = true;
    return true;
  }
  return false;
}

absl::StatusOr<int> ChildProcess::WaitForPort(const std::string& port_file,
                                              std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    // The file may be seen empty or half-written; only a positive number
    // followed by the newline counts.
    const std::string text = ReadWholeFile(port_file);
    if (!text.empty() && text.back() == '\n') {
      const int port = std::atoi(text.c_str());
      if (port > 0) return port;
    }
    int status = 0;
    if (Exited(&status)) {
      return absl::UnavailableError(absl::StrCat("the server exited at start-up (wait status ",
                                                 status, "); its log:\n",
                                                 ReadWholeFile(log_path_)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat("no port in '", port_file, "' after ",
                                                  timeout.count(), " ms; server log:\n",
                                                  ReadWholeFile(log_path_)));
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream input(path, std::ios::binary);
  if (!input) return std::string();
  std::stringstream buffer;
  buffer << input.rdbuf();
  return buffer.str();
}

}  // namespace dpcurator::server::testing
