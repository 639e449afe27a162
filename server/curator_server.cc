#include "server/curator_server.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "server/input_limits.h"
#include "server/log.h"

namespace dpcurator::server {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream input(path, std::ios::binary);
  if (!input) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::stringstream buffer;
  buffer << input.rdbuf();
  return buffer.str();
}

absl::StatusOr<std::vector<std::string>> IntegrityProblems(Store* store, Ledger* ledger) {
  DPC_ASSIGN_OR_RETURN(std::vector<std::string> problems, store->CheckIntegrity());
  DPC_ASSIGN_OR_RETURN(std::vector<std::string> ledger_problems, ledger->VerifyTotals());
  problems.insert(problems.end(), ledger_problems.begin(), ledger_problems.end());
  return problems;
}

}  // namespace

bool IsLoopbackListenAddress(const std::string& address) {
  std::string host = address;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string::npos) return false;
    host = host.substr(1, close - 1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

absl::StatusOr<std::vector<std::string>> CuratorServer::CheckDatabase(const std::string& db_path) {
  const Clock* clock = &SystemClock::Get();
  DPC_ASSIGN_OR_RETURN(std::unique_ptr<SharedDatabase> database, SharedDatabase::Open(db_path));
  DPC_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(database.get(), clock));
  Ledger ledger(database.get(), clock);
  return IntegrityProblems(store.get(), &ledger);
}

absl::StatusOr<std::unique_ptr<CuratorServer>> CuratorServer::Start(const ServerOptions& options) {
  if (options.db_path.empty()) {
    return absl::InvalidArgumentError("--db is required: the SQLite file for datasets and ledger");
  }
  if (options.clock == nullptr) {
    return absl::InvalidArgumentError("ServerOptions::clock is null (leave the default)");
  }
  if (options.max_reports_per_token < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--max_reports_per_token must be >= 1, got ",
                                                   options.max_reports_per_token));
  }
  DPC_RETURN_IF_ERROR(ValidateQuotaLimits(options.limits));
  if (!options.metrics_listen_address.empty() && !options.metrics_allow_remote &&
      !IsLoopbackListenAddress(options.metrics_listen_address)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-listen ", options.metrics_listen_address,
        " is not a loopback address. /metrics is unauthenticated plaintext, and its release "
        "latencies grow with a dataset's row count, which analysts must not learn: whoever "
        "reads it is trusted as a curator. Listen on 127.0.0.1, or pass --metrics-allow-remote "
        "if only such a reader can reach that address."));
  }
  std::shared_ptr<grpc::ServerCredentials> credentials;
  if (!options.tls_cert_path.empty() || !options.tls_key_path.empty()) {
    DPC_ASSIGN_OR_RETURN(std::string cert, ReadFile(options.tls_cert_path));
    DPC_ASSIGN_OR_RETURN(std::string key, ReadFile(options.tls_key_path));
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({key, cert});
    if (!options.tls_client_ca_path.empty()) {
      DPC_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(options.tls_client_ca_path));
      ssl.client_certificate_request =
          GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    credentials = grpc::SslServerCredentials(ssl);
  } else if (!options.tls_client_ca_path.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs TLS: pass --tls-cert and --tls-key as well");
  } else if (options.insecure_dev) {
    credentials = grpc::InsecureServerCredentials();
  } else {
    return absl::InvalidArgumentError(
        "TLS is required: pass --tls-cert and --tls-key, or --insecure-dev for a plaintext "
        "development server on a trusted host");
  }
  TokenRegistry tokens;
  std::vector<std::pair<int, std::string>> token_lines;
  if (!options.tokens_path.empty()) {
    DPC_ASSIGN_OR_RETURN(tokens, TokenRegistry::FromFile(options.tokens_path, &token_lines));
  }
  DPC_ASSIGN_OR_RETURN(
      std::unique_ptr<Metrics> metrics,
      Metrics::Builder().SetListenAddress(options.metrics_listen_address).Build());

  if (options.limits.memory_budget_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--memory-budget must be positive (0: the default from the machine's "
                     "memory), got ", options.limits.memory_budget_bytes));
  }
  if (options.limits.max_row_readers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-row-readers must be positive (0: the machine's hardware threads), "
                     "got ", options.limits.max_row_readers));
  }
  std::unique_ptr<CuratorServer> server(new CuratorServer());
  server->metrics_ = std::move(metrics);
  server->memory_budget_ = std::make_unique<MemoryBudget>(
      options.limits.memory_budget_bytes > 0 ? options.limits.memory_budget_bytes
                                             : DefaultMemoryBudget(),
      options.limits.max_row_readers > 0 ? options.limits.max_row_readers
                                         : DefaultRowReaders());
  server->clock_ = options.clock;
  // Clamped as the reaper always did: a timeout under a second reaps
  // sessions idle for a second.
  server->session_idle_timeout_seconds_ =
      std::max<int64_t>(options.session_idle_timeout_seconds, 1);
  // One connection, shared: Store migrates it, Ledger uses the same one.
  DPC_ASSIGN_OR_RETURN(server->database_, SharedDatabase::Open(options.db_path));
  DPC_ASSIGN_OR_RETURN(server->store_, Store::Open(server->database_.get(), server->clock_));
  server->ledger_ = std::make_unique<Ledger>(server->database_.get(), server->clock_);
  server->object_quotas_ = std::make_unique<ObjectQuotas>(options.limits);
  server->call_quotas_ = std::make_unique<CallQuotas>(options.limits);
  server->ledger_->SetQuotas(server->object_quotas_.get());
  DPC_ASSIGN_OR_RETURN(server->integrity_problems_,
                       IntegrityProblems(server->store_.get(), server->ledger_.get()));
  if (!server->integrity_problems_.empty()) {
    // Fail closed: a ledger that does not add up cannot promise a cap.
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to serve '", options.db_path, "': the start-up integrity check found ",
        server->integrity_problems_.size(), " problem(s): ",
        absl::StrJoin(server->integrity_problems_, "; "),
        ". Inspect with `dpcurator-server --db ", options.db_path,
        " --check` (lists every problem and serves nothing); restore the database from a "
        "backup or investigate before serving again. Never edit the ledger by hand."));
  }
  // Owners that named a file token by its line are not served (issue 24).
  DPC_RETURN_IF_ERROR(AdminServiceImpl::CheckLegacyOwners(server->database_.get(), token_lines,
                                                          options.adopt_line_owners));
  // The budget gauges start from the ledger, not from zero.
  if (absl::Status loaded = RefreshAllBudgets(*server->store_, *server->ledger_, *server->metrics_);
      !loaded.ok()) {
    LogEvent(LogLevel::kWarning, "metrics_refresh_failed").Code(loaded.code());
  }
  DPC_ASSIGN_OR_RETURN(server->audit_log_,
                       AuditLog::Create(server->store_.get(), server->clock_, options.limits));
  server->authorizer_ =
      std::make_unique<Authorizer>(std::move(tokens), server->audit_log_->Sink());
  server->authorizer_->SetMaxSendMessageBytes(options.max_message_bytes);
  server->authorizer_->SetRefusalBackoffMs(options.limits.refusal_backoff_ms);
  // Tokens made by AdminService.CreateToken and not revoked.
  DPC_RETURN_IF_ERROR(AdminServiceImpl::LoadTokens(server->store_.get(), server->authorizer_.get()));
  if (server->authorizer_->Principals().empty()) {
    return absl::InvalidArgumentError(
        "no tokens: pass --tokens with a file of '<role> <token>' lines (at least one curator "
        "token) to bootstrap; later tokens come from `dpcurator admin token create`");
  }
  server->admin_service_ =
      std::make_unique<AdminServiceImpl>(server->store_.get(), server->authorizer_.get(),
                                         server->clock_);
  server->admin_service_->SetTokenFileLines(token_lines);
  server->dataset_service_ = std::make_unique<DatasetServiceImpl>(
      server->store_.get(), server->ledger_.get(), server->authorizer_.get(),
      server->metrics_.get());
  server->release_service_ = std::make_unique<ReleaseServiceImpl>(
      server->store_.get(), server->ledger_.get(), server->authorizer_.get(),
      server->metrics_.get(),
      EngineSeams{options.failpoint, options.noise_source, server->clock_,
                  server->memory_budget_.get(), options.max_message_bytes});
  server->session_service_ = std::make_unique<SessionServiceImpl>(
      server->store_.get(), server->ledger_.get(), server->authorizer_.get(),
      server->metrics_.get(),
      EngineSeams{options.failpoint, options.noise_source, server->clock_,
                  server->memory_budget_.get(), options.max_message_bytes});
  server->runner_service_ = std::make_unique<RunnerServiceImpl>(
      server->store_.get(), server->ledger_.get(), server->authorizer_.get(),
      server->metrics_.get(),
      EngineSeams{options.failpoint, options.noise_source, server->clock_,
                  server->memory_budget_.get(), options.max_message_bytes});
  server->collection_service_ = std::make_unique<CollectionServiceImpl>(
      server->store_.get(), server->authorizer_.get(), server->metrics_.get(),
      options.max_reports_per_token);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, credentials, &server->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // Process-wide bounds (docs/limits.md "Per-token quotas"): threads of the
  // sync server (past them a call is answered RESOURCE_EXHAUSTED instead of
  // growing the process), calls per connection, idle connections closed,
  // dead peers found by keepalive.
  grpc::ResourceQuota resource_quota("dpcurator-server");
  resource_quota.SetMaxThreads(options.limits.max_server_threads);
  builder.SetResourceQuota(resource_quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             options.limits.max_streams_per_connection);
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_IDLE_MS,
      static_cast<int>(std::min<int64_t>(options.limits.max_connection_idle_seconds * 1000,
                                         std::numeric_limits<int>::max())));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             static_cast<int>(kKeepaliveSeconds * 1000));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             static_cast<int>(kKeepaliveTimeoutSeconds * 1000));
  builder.RegisterService(server->dataset_service_.get());
  builder.RegisterService(server->release_service_.get());
  builder.RegisterService(server->session_service_.get());
  builder.RegisterService(server->collection_service_.get());
  builder.RegisterService(server->admin_service_.get());
  builder.RegisterService(server->runner_service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  // Metrics first (Metrics::MakeInterceptorFactory says why), then auth,
  // then input limits (server/input_limits.h), whose refusals go through the
  // authorizer whatever order gRPC runs the receive hooks in.
  interceptors.push_back(server->metrics_->MakeInterceptorFactory(server->authorizer_.get()));
  interceptors.push_back(server->authorizer_->MakeInterceptorFactory());
  // Per-token calls and streams (server/quotas.h): refusals go through the
  // authorizer too, in whatever order the receive hooks run.
  interceptors.push_back(
      MakeCallQuotaInterceptorFactory(server->authorizer_.get(), server->call_quotas_.get()));
  interceptors.push_back(MakeInputLimitsInterceptorFactory(server->authorizer_.get()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on '", options.listen_address,
                     "' (address in use, or not host:port?)"));
  }
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  // Abandoned sessions: checked at a tenth of the timeout (1 s to 60 s) of
  // real time; whether a session is idle is the clock's call.
  const auto period = std::chrono::seconds(
      std::clamp<int64_t>(server->session_idle_timeout_seconds_ / 10, 1, 60));
  CuratorServer* self = server.get();
  server->reaper_ = std::thread([self, period] {
    std::unique_lock<std::mutex> lock(self->reaper_mutex_);
    while (!self->reaper_wake_.wait_for(lock, period, [self] { return self->stopping_; })) {
      self->ReapIdleSessions().IgnoreError();  // a failed pass is retried next period
      self->MaintainAuditLog().IgnoreError();  // logged; retried next period
    }
  });
  return server;
}

absl::StatusOr<int> CuratorServer::ReapIdleSessions() {
  if (database_ == nullptr) return absl::FailedPreconditionError("the server is shut down");
  DPC_ASSIGN_OR_RETURN(int closed, ledger_->CloseIdleSessions(session_idle_timeout_seconds_));
  if (closed > 0) {
    // Their unused steps were refunded: the gauges follow.
    if (absl::Status refreshed = RefreshAllBudgets(*store_, *ledger_, *metrics_);
        !refreshed.ok()) {
      LogEvent(LogLevel::kWarning, "metrics_refresh_failed").Code(refreshed.code());
    }
    LogEvent(LogLevel::kInfo, "sessions_abandoned").Int("count", closed);
  }
  return closed;
}

absl::StatusOr<int64_t> CuratorServer::MaintainAuditLog() {
  if (database_ == nullptr) return absl::FailedPreconditionError("the server is shut down");
  return audit_log_->Maintain();
}

void CuratorServer::Shutdown(std::chrono::milliseconds grace) {
  if (shut_down_) return;
  shut_down_ = true;
  {
    std::lock_guard<std::mutex> lock(reaper_mutex_);
    stopping_ = true;
  }
  reaper_wake_.notify_all();
  if (reaper_.joinable()) reaper_.join();
  if (server_ == nullptr) {  // Start() failed before the gRPC server existed
    store_.reset();
    database_.reset();
    return;
  }
  server_->GetHealthCheckService()->SetServingStatus(false);
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  // The refusals counted since the last pass, before the database closes.
  audit_log_->Maintain(/*all=*/true).IgnoreError();
  store_.reset();
  database_.reset();  // closes the database after the last RPC
}

void CuratorServer::Wait() { server_->Wait(); }

CuratorServer::~CuratorServer() { Shutdown(std::chrono::milliseconds(100)); }

}  // namespace dpcurator::server
