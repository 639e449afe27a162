// dpcurator-server: the data-curator gRPC server.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/curator_server.h"
#include "server/memory_budget.h"
#include "server/log.h"

ABSL_FLAG(std::string, db, "", "SQLite database file (created if missing). Required.");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "host:port to listen on (port 0 = any free port)");
ABSL_FLAG(std::string, tokens, "",
          "bootstrap token file: one '<curator|analyst|device> <token>' per line. Required until "
          "the database holds a token made by `dpcurator admin token create`.");
ABSL_FLAG(bool, adopt_line_owners, false,
          "once, after upgrading: give releases and sessions owned by an old line-numbered "
          "file principal ('file:N') to the token now on line N of --tokens. Only if the file "
          "is line for line as it was when they were made (docs/architecture.md, Threat model)");
ABSL_FLAG(bool, insecure_dev, false,
          "serve plaintext (no TLS): development on a trusted host only");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain for TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for TLS");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: require client certificates signed by it (mutual TLS)");
// Off by default: the endpoint is unauthenticated plaintext HTTP (Debian's
// civetweb has no TLS) and names datasets and their budgets, so exposing it is
// an operator's decision, like --insecure-dev. 127.0.0.1:9464 keeps it on the
// host; 0.0.0.0 only behind a network policy that admits the scraper alone.
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port for Prometheus metrics at /metrics (e.g. 127.0.0.1:9464); empty = off");
ABSL_FLAG(bool, metrics_allow_remote, false,
          "allow a non-loopback --metrics-listen address: whoever can reach /metrics is then "
          "trusted as a curator (its latencies grow with datasets' row counts)");
ABSL_FLAG(bool, check, false,
          "run the start-up integrity check on --db, print every problem, exit 0 (clean) or 1; "
          "serves nothing");
ABSL_FLAG(std::string, port_file, "", "write the bound port to this file once serving");
ABSL_FLAG(int, shutdown_grace_ms, 5000,
          "time in-flight RPCs get to finish on SIGTERM; the process exits at most 2 s after "
          "it whatever is still running (what was admitted stays charged, as after a crash)");
ABSL_FLAG(std::string, memory_budget, "",
          "bytes running releases and session steps may hold together (8G, 512M, or a byte "
          "count); each projects its peak before admission and is refused past this, nothing "
          "charged. Empty: 3/4 of the cgroup limit or physical memory after 1.5 GiB "
          "(docs/limits.md)");
ABSL_FLAG(int, max_row_readers, 0,
          "releases and session steps that may read a dataset's rows at once; more wait before "
          "admission (row bytes never decide a refusal: a row count is private). 0: the "
          "machine's hardware threads, at least 2 (docs/limits.md)");
ABSL_FLAG(int64_t, max_reports_per_token, 10000,
          "reports one device token may store per local-DP collection; a batch that would go "
          "over is refused (RESOURCE_EXHAUSTED) and nothing of it stored. One token's flood "
          "moves the LDP fit by about its share of the reports: keep this at most 0.5% of "
          "the reports you expect (docs/privacy.md 2.6)");
ABSL_FLAG(int64_t, session_idle_timeout, 3600,
          "seconds without a step after which an open session is closed and its unused budget "
          "returned");
// Strangers: what calls without a valid token may make the server write
// (server/limits.h, docs/limits.md).
ABSL_FLAG(int64_t, audit_refusal_interval, 60,
          "seconds over which calls refused for their token or role are audited as one row "
          "per peer, method and code, counting the repeats");
ABSL_FLAG(int64_t, audit_refusal_max_keys, 256,
          "distinct (peer, method, code) refusal rows per interval; calls past it share one "
          "overflow row per method and code (peer '*')");
ABSL_FLAG(int64_t, audit_retention_days, 365,
          "audit rows older than this many days are deleted by the server (0: kept forever)");
ABSL_FLAG(int64_t, audit_max_rows, 10000000,
          "audit rows kept at most; the server deletes the oldest beyond it (0: no cap)");
// Per-token quotas and gRPC's process-wide bounds (server/limits.h,
// docs/limits.md "Per-token quotas"). The defaults are ServerLimits'.
namespace {
const dpcurator::server::ServerLimits kDefaultLimits;
}  // namespace
ABSL_FLAG(int64_t, max_concurrent_calls_per_token, kDefaultLimits.max_concurrent_calls_per_token,
          "calls one token may have in flight at once; more are refused (RESOURCE_EXHAUSTED)");
ABSL_FLAG(int64_t, max_open_streams_per_token, kDefaultLimits.max_open_streams_per_token,
          "upload, report and download streams one token may hold open at once");
ABSL_FLAG(int64_t, max_open_sessions_per_token, kDefaultLimits.max_open_sessions_per_token,
          "open sessions one token may hold (each member of a partitioned open counts)");
ABSL_FLAG(int64_t, max_reserved_steps_per_token, kDefaultLimits.max_reserved_steps_per_token,
          "steps one token's open sessions may reserve together");
ABSL_FLAG(int64_t, max_stored_bytes_per_token, kDefaultLimits.max_stored_bytes_per_token,
          "bytes of release and session step artefacts one token may store; once reached, its "
          "releases, sessions and steps are refused");
ABSL_FLAG(double, near_free_epsilon, kDefaultLimits.near_free_epsilon,
          "a release or session whose epsilon alone (at the dataset's delta) is below this is "
          "near-free and counts against --max-near-free-objects-per-token (0: none is)");
ABSL_FLAG(int64_t, max_near_free_objects_per_token,
          kDefaultLimits.max_near_free_objects_per_token,
          "near-free releases and sessions one token may hold");
ABSL_FLAG(int64_t, refusal_backoff_ms, kDefaultLimits.refusal_backoff_ms,
          "milliseconds a call refused for a quota or the budget (nothing charged) waits before "
          "its answer, holding its call slot (0: none)");
ABSL_FLAG(int64_t, max_pending_jobs_per_token, kDefaultLimits.max_pending_jobs_per_token,
          "pending jobs one token may have queued on one external dataset");
ABSL_FLAG(int, max_server_threads, kDefaultLimits.max_server_threads,
          "threads of the server's call pool; past them calls are refused (RESOURCE_EXHAUSTED) "
          "instead of growing the process");
ABSL_FLAG(int, max_streams_per_connection, kDefaultLimits.max_streams_per_connection,
          "concurrent calls on one client connection (HTTP/2 streams); more wait client-side");
ABSL_FLAG(int64_t, max_connection_idle_seconds, kDefaultLimits.max_connection_idle_seconds,
          "a client connection with no call for this long is closed (clients reconnect)");

namespace {

// After SIGTERM's grace period, this long for the drained server to close
// its database; then the process exits whatever still runs (issue 36).
constexpr int kShutdownMarginMs = 2000;

// glibc's malloc trims a thread arena's free top back to the kernel
// (madvise) as soon as it passes 128 KiB, and maps each block above its
// dynamic threshold afresh. A session step allocates and frees a few MB on
// a gRPC thread (the batch, the witness's Gram and Cholesky factors, the
// answer), so every step paid for those pages again: page faults were a
// quarter of a kernel_witness step's CPU on Fashion-MNIST. Freed memory up
// to kMallocTrimThreshold now stays with its arena, and blocks below
// kMallocMmapThreshold come from the arenas; blocks above it (a dataset's
// encoded rows) are still mapped and returned on free. The environment's
// MALLOC_TRIM_THRESHOLD_ / MALLOC_MMAP_THRESHOLD_ win where set.
constexpr int kMallocTrimThreshold = 64 << 20;
constexpr int kMallocMmapThreshold = 32 << 20;

void TuneMalloc() {
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) {
    mallopt(M_TRIM_THRESHOLD, kMallocTrimThreshold);
  }
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) {
    mallopt(M_MMAP_THRESHOLD, kMallocMmapThreshold);
  }
}

}  // namespace

int main(int argc, char** argv) {
  TuneMalloc();
  absl::SetProgramUsageMessage(
      "the dpcurator data-curator server: holds datasets, answers only with differentially "
      "private releases charged to a SQLite budget ledger.\n\n"
      "  dpcurator-server --db curator.db --tokens tokens.txt --tls-cert cert.pem --tls-key key.pem\n"
      "  dpcurator-server --db dev.db --tokens tokens.txt --insecure-dev   # plaintext, dev only\n\n"
      "Flags may be written with hyphens or underscores (--insecure-dev, --insecure_dev).");
  // Abseil's --help lists only flags defined in <program>.cc or
  // <program>-main.cc; this binary's are in server/main.cc, so without this
  // --help printed "No flags matched". --helpfull still lists every flag
  // (gRPC's and Abseil's own included).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  // Accept --insecure-dev as well as --insecure_dev: flag names are written
  // with hyphens in the docs, Abseil spells them with underscores.
  std::vector<std::string> normalised(argv, argv + argc);
  for (size_t i = 1; i < normalised.size(); ++i) {
    std::string& arg = normalised[i];
    if (arg.rfind("--", 0) != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    for (size_t j = 2; j < end; ++j) arg[j] = arg[j] == '-' ? '_' : arg[j];
  }
  std::vector<char*> normalised_argv;
  for (auto& arg : normalised) normalised_argv.push_back(arg.data());
  absl::ParseCommandLine(static_cast<int>(normalised_argv.size()), normalised_argv.data());

  // Block SIGTERM/SIGINT in every thread; one thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (absl::GetFlag(FLAGS_check)) {
    auto problems = dpcurator::server::CuratorServer::CheckDatabase(absl::GetFlag(FLAGS_db));
    if (!problems.ok()) {
      std::fprintf(stderr, "dpcurator-server --check: %s\n",
                   std::string(problems.status().message()).c_str());
      return 2;
    }
    for (const auto& problem : *problems) std::printf("problem: %s\n", problem.c_str());
    std::printf("%s: %zu problem(s)\n", absl::GetFlag(FLAGS_db).c_str(), problems->size());
    return problems->empty() ? 0 : 1;
  }

  dpcurator::server::ServerOptions options;
  options.db_path = absl::GetFlag(FLAGS_db);
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.tokens_path = absl::GetFlag(FLAGS_tokens);
  options.adopt_line_owners = absl::GetFlag(FLAGS_adopt_line_owners);
  options.insecure_dev = absl::GetFlag(FLAGS_insecure_dev);
  options.tls_cert_path = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_path = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca_path = absl::GetFlag(FLAGS_tls_client_ca);
  options.session_idle_timeout_seconds = absl::GetFlag(FLAGS_session_idle_timeout);
  options.max_reports_per_token = absl::GetFlag(FLAGS_max_reports_per_token);
  options.metrics_listen_address = absl::GetFlag(FLAGS_metrics_listen);
  options.metrics_allow_remote = absl::GetFlag(FLAGS_metrics_allow_remote);
  if (const std::string budget = absl::GetFlag(FLAGS_memory_budget); !budget.empty()) {
    auto bytes = dpcurator::server::ParseByteSize(budget);
    if (!bytes.ok() || *bytes <= 0) {
      std::fprintf(stderr, "dpcurator-server: --memory-budget: %s\n",
                   bytes.ok() ? "must be positive"
                              : std::string(bytes.status().message()).c_str());
      return 2;
    }
    options.limits.memory_budget_bytes = *bytes;
  }
  options.limits.max_row_readers = absl::GetFlag(FLAGS_max_row_readers);
  options.limits.audit_refusal_interval_seconds = absl::GetFlag(FLAGS_audit_refusal_interval);
  options.limits.audit_refusal_max_keys = absl::GetFlag(FLAGS_audit_refusal_max_keys);
  options.limits.audit_retention_days = absl::GetFlag(FLAGS_audit_retention_days);
  options.limits.audit_max_rows = absl::GetFlag(FLAGS_audit_max_rows);
  dpcurator::server::ServerLimits& limits = options.limits;
  limits.max_concurrent_calls_per_token = absl::GetFlag(FLAGS_max_concurrent_calls_per_token);
  limits.max_open_streams_per_token = absl::GetFlag(FLAGS_max_open_streams_per_token);
  limits.max_open_sessions_per_token = absl::GetFlag(FLAGS_max_open_sessions_per_token);
  limits.max_reserved_steps_per_token = absl::GetFlag(FLAGS_max_reserved_steps_per_token);
  limits.max_stored_bytes_per_token = absl::GetFlag(FLAGS_max_stored_bytes_per_token);
  limits.near_free_epsilon = absl::GetFlag(FLAGS_near_free_epsilon);
  limits.max_near_free_objects_per_token = absl::GetFlag(FLAGS_max_near_free_objects_per_token);
  limits.max_pending_jobs_per_token = absl::GetFlag(FLAGS_max_pending_jobs_per_token);
  limits.refusal_backoff_ms = absl::GetFlag(FLAGS_refusal_backoff_ms);
  limits.max_server_threads = absl::GetFlag(FLAGS_max_server_threads);
  limits.max_streams_per_connection = absl::GetFlag(FLAGS_max_streams_per_connection);
  limits.max_connection_idle_seconds = absl::GetFlag(FLAGS_max_connection_idle_seconds);
  auto server = dpcurator::server::CuratorServer::Start(options);
  using dpcurator::server::LogEvent;
  using dpcurator::server::LogLevel;
  if (!server.ok()) {
    // Start-up errors name flags and files, never data.
    LogEvent(LogLevel::kError, "start_failed")
        .Code(server.status().code())
        .Str("error", server.status().message());
    return 2;
  }
  if (options.insecure_dev && options.tls_cert_path.empty()) {
    LogEvent(LogLevel::kWarning, "plaintext_transport")
        .Str("detail",
             "--insecure-dev: serving PLAINTEXT; bearer tokens travel unencrypted. Use "
             "--tls-cert/--tls-key outside development.");
  }
  const auto& problems = (*server)->integrity_problems();
  LogEvent(problems.empty() ? LogLevel::kInfo : LogLevel::kError, "integrity_check")
      .Int("problems", static_cast<int64_t>(problems.size()));
  for (const auto& problem : problems) {
    LogEvent(LogLevel::kError, "integrity_problem").Str("problem", problem);
  }
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    std::ofstream(port_file) << (*server)->port() << "\n";
  }
  LogEvent(LogLevel::kInfo, "server_started")
      .Int("port", (*server)->port())
      .Int("metrics_port", (*server)->metrics()->port())
      .Int("memory_budget", (*server)->memory_budget()->budget())
      .Str("db", options.db_path);

  int received = 0;
  sigwait(&signals, &received);
  // Health NOT_SERVING, draining, then the database is closed.
  LogEvent(LogLevel::kInfo, "shutdown").Str("signal", received == SIGTERM ? "SIGTERM" : "SIGINT");
  const int grace_ms = std::max(absl::GetFlag(FLAGS_shutdown_grace_ms), 0);
  // gRPC's Shutdown cancels calls at the deadline, but a handler still
  // computing (an AIM fit) keeps Wait() blocked until it returns. So the
  // stop is bounded here: past the grace and a margin the process exits,
  // exactly as after a crash. What was admitted stays charged (a PENDING
  // release keeps its charge; a retry completes or fails it without a
  // second one: docs/privacy.md "Crashes"), and SQLite's journal makes an
  // interrupted transaction as if it never began.
  std::thread([grace_ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(grace_ms + kShutdownMarginMs));
    LogEvent(LogLevel::kError, "shutdown_forced")
        .Int("after_ms", grace_ms + kShutdownMarginMs)
        .Str("detail", "work still running past the grace period was cut short; what it was "
                       "charged stays charged");
    std::_Exit(0);
  }).detach();
  (*server)->Shutdown(std::chrono::milliseconds(grace_ms));
  LogEvent(LogLevel::kInfo, "server_stopped");
  return 0;
}
