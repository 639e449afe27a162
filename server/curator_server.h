#ifndef DPCURATOR_SERVER_CURATOR_SERVER_H_
#define DPCURATOR_SERVER_CURATOR_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/admin_service.h"
#include "server/audit.h"
#include "server/auth.h"
#include "server/clock.h"
#include "server/collection_service.h"
#include "server/ledger.h"
#include "server/limits.h"
#include "server/memory_budget.h"
#include "server/metrics.h"
#include "server/quotas.h"
#include "server/runner_service.h"
#include "server/service.h"
#include "server/shared_database.h"
#include "server/store.h"

namespace dpcurator::server {

struct ServerOptions {
  std::string db_path;
  std::string listen_address = "127.0.0.1:50051";
  // Bootstrap tokens ("<role> <token>" lines, principals FileTokenId).
  // Optional once the database holds a valid token (AdminService).
  std::string tokens_path;
  // Rewrite ledger owners of the old "file:<line>" form to the token now on
  // that line (AdminServiceImpl::CheckLegacyOwners); without it a ledger
  // holding such owners is not served.
  bool adopt_line_owners = false;
  // Plaintext transport; only for development on a trusted host.
  bool insecure_dev = false;
  std::string tls_cert_path;
  std::string tls_key_path;
  // PEM CA bundle: when set, every client must present a certificate signed
  // by it (mutual TLS), in addition to its bearer token.
  std::string tls_client_ca_path;
  // Largest message received or sent, in bytes; gRPC refuses a larger one
  // with RESOURCE_EXHAUSTED before any handler runs. Deliberately 64 MiB: it
  // bounds the memory one message can pin while holding a full batch
  // (10 000 reports of dimension up to about 800, or 100 000 upload rows of
  // about 600 bytes). fuzz/README.md lists every input limit.
  int max_message_bytes = 64 << 20;
  // An open session with no step for this long is closed and its unused
  // budget returned (ABANDONED).
  int64_t session_idle_timeout_seconds = 3600;
  // Reports one device token may store per LDP collection (>= 1); a batch
  // that would go over is refused with RESOURCE_EXHAUSTED, nothing of it
  // stored (docs/privacy.md 2.6 "Report bounds and quotas").
  int64_t max_reports_per_token = CollectionServiceImpl::kDefaultMaxReportsPerToken;
  // What callers may make the server hold (server/limits.h, docs/limits.md).
  ServerLimits limits;
  // Where every stored time comes from (created_unix, session idleness,
  // token and audit times). Never null; must outlive the server. Tests pass
  // a fake clock (tests/server/fake_clock.h) to move time without sleeping.
  const Clock* clock = &SystemClock::Get();
  // host:port of the Prometheus /metrics endpoint; empty (the default): no
  // endpoint. Unauthenticated plaintext HTTP, so opt-in and never 0.0.0.0
  // unless asked for.
  std::string metrics_listen_address;
  // A non-loopback metrics address is refused unless this acknowledges that
  // whoever can reach it is trusted as a curator: /metrics is
  // unauthenticated, and its release latencies grow with a dataset's row
  // count, which analysts must not learn under add/remove.
  bool metrics_allow_remote = false;
  // Tests only (server/service.h): failure injection on the release path,
  // and the source of release noise (null: OpenSSL's CSPRNG).
  Failpoint failpoint;
  NoiseSourceFactory noise_source;
};

// True for 127.0.0.0/8, [::1] and localhost (host:port form).
bool IsLoopbackListenAddress(const std::string& address);

// The curator server: store, ledger, services, health, interceptor, wired
// together. Used by dpcurator-server's main and by in-process tests.
class CuratorServer {
 public:
  // Fails closed: a database whose start-up integrity check finds a problem
  // (ledger totals that differ from the events, a delivered release with no
  // charge, ...) is not served; the error says what and how to inspect it.
  static absl::StatusOr<std::unique_ptr<CuratorServer>> Start(const ServerOptions& options);
  // The start-up integrity check alone (`dpcurator-server --check`): the
  // problems found, empty when the database is sound. Applies migrations.
  static absl::StatusOr<std::vector<std::string>> CheckDatabase(const std::string& db_path);
  ~CuratorServer();

  // The bound port (useful with port 0).
  int port() const { return port_; }
  // Health NOT_SERVING, Shutdown(deadline), then close the database.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::seconds(5));
  void Wait();
  Store* store() { return store_.get(); }
  // The connection Store and Ledger share; tests use it to inspect or
  // damage the database directly (always under its lock).
  SharedDatabase* database() { return database_.get(); }
  // One pass of the idle-session reaper, as its thread runs it every tenth
  // of the timeout: closes sessions idle for session_idle_timeout_seconds
  // by the server's clock and refreshes the budget gauges. Returns how many
  // were closed. Public so that tests with a fake clock need not wait for
  // the thread.
  absl::StatusOr<int> ReapIdleSessions();
  // One pass of the audit log's upkeep, as the reaper thread runs it each
  // period: repeats of refused calls added to their rows, then the
  // retention setting applied (AuditLog::Maintain). Returns the rows
  // deleted. Public so that tests need not wait for the thread.
  absl::StatusOr<int64_t> MaintainAuditLog();
  // Audit rows that could not be written since start (logged, not fatal).
  int64_t audit_failures() const { return audit_log_->failures(); }
  // What running releases and steps hold (ServerLimits::memory_budget_bytes).
  MemoryBudget* memory_budget() { return memory_budget_.get(); }
  // Always present; serving /metrics only with a metrics_listen_address.
  Metrics* metrics() { return metrics_.get(); }
  // Problems found by the start-up integrity check: always empty on a
  // server that started (Start refuses otherwise).
  const std::vector<std::string>& integrity_problems() const { return integrity_problems_; }

 private:
  CuratorServer() = default;
  const Clock* clock_ = nullptr;
  int64_t session_idle_timeout_seconds_ = 0;
  // Before store_ and ledger_, which point at it: destroyed after them.
  std::unique_ptr<SharedDatabase> database_;
  std::unique_ptr<Store> store_;
  // Per-token quotas (server/quotas.h): the ledger and the gRPC server's
  // interceptor point at them, so they are declared before both.
  std::unique_ptr<ObjectQuotas> object_quotas_;
  std::unique_ptr<CallQuotas> call_quotas_;
  std::unique_ptr<Ledger> ledger_;
  std::unique_ptr<AuditLog> audit_log_;
  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  // Before the services and the gRPC server: destroyed after them.
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<MemoryBudget> memory_budget_;
  std::unique_ptr<DatasetServiceImpl> dataset_service_;
  std::unique_ptr<ReleaseServiceImpl> release_service_;
  std::unique_ptr<SessionServiceImpl> session_service_;
  std::unique_ptr<CollectionServiceImpl> collection_service_;
  std::unique_ptr<RunnerServiceImpl> runner_service_;
  // Closes idle sessions; stopped by Shutdown().
  std::thread reaper_;
  std::mutex reaper_mutex_;
  std::condition_variable reaper_wake_;
  bool stopping_ = false;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::string> integrity_problems_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_CURATOR_SERVER_H_
