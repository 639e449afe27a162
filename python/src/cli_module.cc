// dpcurator._core.run_command: one `dpcurator` command run in this process
// (issue 40; docs/python.md). The Python client (dpcurator/client.py) is a
// set of typed wrappers over it, so every option, check, retry rule, message
// and exit status is the CLI's own: the command is looked up in the CLI's
// table (client/command_table.h), its options parsed by the CLI's parser
// (with the DPCURATOR_* variables), run, and its status turned into the
// CLI's exit status by client::ExitCode. What the command writes to stdout
// and stderr (its --json document, progress, warnings, the error line) is
// captured at the file-descriptor level, since the commands write with
// printf and std::cout.

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/cli.h"
#include "client/command_table.h"
#include "client/connection.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"

namespace dpcurator::python {
namespace {

namespace py = pybind11;

const std::vector<client::Command>& Commands() {
  static const auto* const commands = new std::vector<client::Command>(client::AllCommands());
  return *commands;
}

const client::Command& FindCommand(const std::string& name) {
  for (const client::Command& command : Commands()) {
    if (command.name == name) return command;
  }
  throw py::value_error(absl::StrCat("no dpcurator command named '", name, "'"));
}

// The text written to a memory file since it was made.
std::string ReadAll(int fd) {
  std::string text;
  if (lseek(fd, 0, SEEK_SET) < 0) return text;
  char buffer[65536];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

// stdout and stderr sent to two memory files while it lives, restored when
// it goes (also when the command throws). Process-wide, like the streams
// themselves: run_command holds RunMutex(), so one command runs at a time.
class CapturedOutput {
 public:
  CapturedOutput() {
    Flush();
    out_ = memfd_create("dpcurator-stdout", 0);
    err_ = memfd_create("dpcurator-stderr", 0);
    saved_out_ = dup(STDOUT_FILENO);
    saved_err_ = dup(STDERR_FILENO);
    if (out_ < 0 || err_ < 0 || saved_out_ < 0 || saved_err_ < 0 ||
        dup2(out_, STDOUT_FILENO) < 0 || dup2(err_, STDERR_FILENO) < 0) {
      Restore();
      for (int fd : {out_, err_}) {
        if (fd >= 0) close(fd);
      }
      throw std::runtime_error("cannot capture the command's output (memfd_create or dup2)");
    }
  }
  CapturedOutput(const CapturedOutput&) = delete;
  CapturedOutput& operator=(const CapturedOutput&) = delete;
  ~CapturedOutput() {
    Restore();
    for (int fd : {out_, err_}) {
      if (fd >= 0) close(fd);
    }
  }

  // Restores the streams and returns (stdout, stderr).
  std::pair<std::string, std::string> Finish() {
    Flush();
    Restore();
    return {ReadAll(out_), ReadAll(err_)};
  }

 private:
  static void Flush() {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(stdout);
    std::fflush(stderr);
  }
  void Restore() {
    if (restored_) return;
    restored_ = true;
    Flush();
    if (saved_out_ >= 0) dup2(saved_out_, STDOUT_FILENO);
    if (saved_err_ >= 0) dup2(saved_err_, STDERR_FILENO);
    for (int fd : {saved_out_, saved_err_}) {
      if (fd >= 0) close(fd);
    }
    saved_out_ = saved_err_ = -1;
  }

  int out_ = -1;
  int err_ = -1;
  int saved_out_ = -1;
  int saved_err_ = -1;
  bool restored_ = false;
};

// One command at a time: the captured streams are the process's.
std::mutex& RunMutex() {
  static std::mutex* const mutex = new std::mutex;
  return *mutex;
}

// What run_command returns: the CLI's exit status, what the command wrote,
// and its status (code name, message, and whether a failed request of that
// code may have been admitted and so charged: client::MayHaveCharged, the
// rule `release` applies; the wrappers use it only for calls that charge).
py::dict RunCommand(const std::string& name, const std::vector<std::string>& arguments) {
  const client::Command& command = FindCommand(name);
  absl::Status status;
  int exit_code = 0;
  std::pair<std::string, std::string> written;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(RunMutex());
    CapturedOutput captured;
    absl::StatusOr<client::ParsedArgs> parsed = client::ParseArgs(command.options, arguments);
    if (!parsed.ok()) {
      status = parsed.status();
    } else if (!parsed->positional().empty()) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "dpcurator ", name, ": unexpected argument '", parsed->positional()[0], "'"));
    } else {
      status = command.run(*parsed);
    }
    exit_code = client::ExitCode(status);
    written = captured.Finish();
  }
  py::dict result;
  result["exit_code"] = exit_code;
  result["stdout"] = py::bytes(written.first);
  result["stderr"] = written.second;
  result["code"] = absl::StatusCodeToString(status.code());
  result["message"] = std::string(status.message());
  result["may_have_charged"] =
      !status.ok() && client::MayHaveCharged(static_cast<grpc::StatusCode>(status.code()));
  return result;
}

}  // namespace
}  // namespace dpcurator::python

void BindCli(pybind11::module_& m) {
  namespace py = pybind11;
  using dpcurator::python::Commands;
  using dpcurator::python::FindCommand;
  m.def("run_command", &dpcurator::python::RunCommand, py::arg("name"), py::arg("arguments"),
        "Runs the dpcurator command `name` (e.g. 'release', 'train aim') with `arguments` (the "
        "CLI's options as a list) in this process, its stdout and stderr captured. Returns a "
        "dict: exit_code (the CLI's exit status, docs/json.md), stdout (bytes), stderr (str), "
        "code and message (the command's status), may_have_charged (the CLI's rule for a "
        "failed request of that code).");
  m.def(
      "command_names",
      [] {
        std::vector<std::string> names;
        for (const auto& command : Commands()) names.push_back(command.name);
        return names;
      },
      "The names of the CLI's commands, in the order `dpcurator` lists them.");
  m.def(
      "command_help",
      [](const std::string& name) {
        const auto& command = FindCommand(name);
        return dpcurator::client::FormatHelp(
            absl::StrCat("dpcurator ", command.name, " [options]"),
            command.description.empty() ? command.summary : command.description,
            command.options);
      },
      py::arg("name"), "What `dpcurator NAME --help` prints.");
  m.def(
      "command_options",
      [](const std::string& name) {
        std::vector<std::string> options;
        for (const auto& option : FindCommand(name).options) options.push_back(option.name);
        return options;
      },
      py::arg("name"), "The option names (without --) the command accepts.");
}
