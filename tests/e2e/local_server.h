#ifndef DPCURATOR_TESTS_E2E_LOCAL_SERVER_H_
#define DPCURATOR_TESTS_E2E_LOCAL_SERVER_H_

// The end-to-end tests' harness: a real dpcurator-server (DPC_SERVER) on a
// free loopback port in a fresh directory, plaintext with bootstrap tokens,
// and the real CLI (DPC_CLI) run in that directory with stdout and stderr
// captured apart (neither is a terminal).
//
// The server also serves Prometheus metrics on a free loopback port, and
// TearDown checks that no admitted request or step failed after reading
// rows (issue 23: every mechanism is total once admitted): the counter
// dpcurator_failures_after_rows_read_total must be 0 (absent reads as 0).
// A test that causes such an incident on purpose sets
// expect_no_incidents_ = false.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

namespace dpcurator::e2e {

namespace fs = std::filesystem;

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string ReadAll(const fs::path& path) {
  std::ifstream input(path);
  std::stringstream buffer;
  buffer << input.rdbuf();
  return buffer.str();
}

class LocalServerTest : public ::testing::Test {
 protected:
  // Starts the server in a new directory named `prefix`<pid>_<time> with a
  // --tokens file holding `tokens` ("<role> <token>" lines).
  void StartServer(const std::string& prefix, const std::string& tokens) {
    dir_ = fs::temp_directory_path() /
           (prefix + std::to_string(getpid()) + "_" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "tokens.txt") << tokens;
    const std::string port_file = (dir_ / "port").string();
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      FILE* log = std::freopen((dir_ / "server.log").c_str(), "w", stderr);
      (void)log;
      const std::string db = "--db=" + (dir_ / "curator.db").string();
      const std::string token_file = "--tokens=" + (dir_ / "tokens.txt").string();
      const std::string port = "--port_file=" + port_file;
      execl(DPC_SERVER, DPC_SERVER, db.c_str(), "--listen=127.0.0.1:0", token_file.c_str(),
            "--insecure_dev", port.c_str(), "--metrics_listen=127.0.0.1:0",
            static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    for (int i = 0; i < 600 && address_.empty(); ++i) {
      std::ifstream input(port_file);
      int port = 0;
      if (input >> port && port > 0) address_ = "127.0.0.1:" + std::to_string(port);
      if (address_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_FALSE(address_.empty()) << ReadAll(dir_ / "server.log");
  }

  // The metrics port, from the server's "server_started" log line (written
  // just after the port file, so it may take a moment to appear).
  std::optional<int> MetricsPort() const {
    const std::regex pattern("\"metrics_port\":([0-9]+)");
    for (int i = 0; i < 100; ++i) {
      const std::string log = ReadAll(dir_ / "server.log");
      std::smatch match;
      if (std::regex_search(log, match, pattern)) return std::stoi(match[1].str());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::nullopt;
  }

  // GET /metrics over a loopback socket (HTTP/1.0: the server closes the
  // connection after the body). nullopt if the endpoint cannot be read.
  static std::optional<std::string> FetchMetrics(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return std::nullopt;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string response;
    if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) {
      const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
      if (send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
        char buffer[4096];
        ssize_t got;
        while ((got = recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, got);
      }
    }
    close(fd);
    if (response.rfind("HTTP/1.", 0) != 0 || response.find(" 200 ") == std::string::npos) {
      return std::nullopt;
    }
    return response;
  }

  // The sum over label sets of a counter in a Prometheus text exposition
  // (0 when absent).
  static double CounterTotal(const std::string& exposition, const std::string& name) {
    double total = 0;
    std::istringstream lines(exposition);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind(name, 0) != 0) continue;
      const char next = line.size() > name.size() ? line[name.size()] : '\0';
      if (next != ' ' && next != '{') continue;  // another metric sharing the prefix
      const size_t space = line.rfind(' ');
      total += std::stod(line.substr(space + 1));
    }
    return total;
  }

  // Issue 23: no admitted request or step may end in an error after the
  // rows were read, in any end-to-end test.
  void ExpectNoFailuresAfterRowsRead() {
    const std::optional<int> port = MetricsPort();
    ASSERT_TRUE(port.has_value()) << "no metrics_port in the server log:\n"
                                  << ReadAll(dir_ / "server.log");
    const std::optional<std::string> metrics = FetchMetrics(*port);
    ASSERT_TRUE(metrics.has_value()) << "GET /metrics on port " << *port << " failed";
    ASSERT_NE(metrics->find("# TYPE dpcurator_"), std::string::npos)
        << "GET /metrics on port " << *port << " is not the server's exposition:\n" << *metrics;
    EXPECT_EQ(CounterTotal(*metrics, "dpcurator_failures_after_rows_read_total"), 0)
        << "a request or step failed after reading rows (an incident); server log:\n"
        << ReadAll(dir_ / "server.log");
  }

  void TearDown() override {
    if (pid_ > 0 && expect_no_incidents_ && !address_.empty()) ExpectNoFailuresAfterRowsRead();
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  // Runs `dpcurator arguments` in the directory with `env` (VAR=value ...)
  // prepended.
  CliRun RunCli(const std::string& arguments, const std::string& env) {
    const fs::path out = dir_ / "stdout.txt";
    const fs::path err = dir_ / "stderr.txt";
    const std::string command = "cd '" + dir_.string() + "' && env " + env + " " + DPC_CLI + " " +
                                arguments + " >'" + out.string() + "' 2>'" + err.string() +
                                "' </dev/null";
    const int status = std::system(command.c_str());
    CliRun run;
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.out = ReadAll(out);
    run.err = ReadAll(err);
    return run;
  }

  // The connection to this server, from the environment only.
  std::string Env(const std::string& token) const {
    return "DPCURATOR_SERVER=" + address_ + " DPCURATOR_TOKEN=" + token + " DPCURATOR_INSECURE=1";
  }

  fs::path dir_;
  pid_t pid_ = -1;
  std::string address_;
  // False in a test that causes a failure after rows are read on purpose.
  bool expect_no_incidents_ = true;
};

// A small labelled table for the trainers' CLI tests: s.json declares x in
// [0, 10], a category c of three levels and the label y, which depends on
// both; data.csv holds `rows` rows drawn from `seed`.
inline void WriteLabelledMixedTable(const fs::path& dir, int rows, uint64_t seed) {
  std::ofstream(dir / "s.json") << R"({"columns": [
    {"name": "x", "type": "NUMERIC", "lower": 0, "upper": 10},
    {"name": "c", "type": "CATEGORICAL", "categories": ["a", "b", "c"]},
    {"name": "y", "type": "CATEGORICAL", "categories": ["no", "yes"]}],
    "label": "y"})";
  std::mt19937_64 rng(seed);
  std::ofstream csv(dir / "data.csv");
  csv << "x,c,y\n";
  const char* levels[] = {"a", "b", "c"};
  for (int i = 0; i < rows; ++i) {
    const double x = std::uniform_real_distribution<double>(0, 10)(rng);
    const int c = static_cast<int>(rng() % 3);
    const bool y = x + 2 * c + std::normal_distribution<double>(0, 1)(rng) > 7;
    csv << x << "," << levels[c] << "," << (y ? "yes" : "no") << "\n";
  }
}

}  // namespace dpcurator::e2e

#endif  // DPCURATOR_TESTS_E2E_LOCAL_SERVER_H_
