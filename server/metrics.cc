#include "server/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <exception>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "server/auth.h"
#include "server/ledger.h"
#include "server/log.h"
#include "server/store.h"

namespace dpcurator::server {
namespace {

constexpr absl::string_view kRequestRelease = "/dpcurator.v1.ReleaseService/RequestRelease";
constexpr absl::string_view kOpenSession = "/dpcurator.v1.SessionService/OpenSession";
constexpr absl::string_view kOpenPartitioned =
    "/dpcurator.v1.SessionService/OpenPartitionedSessions";

// Handler wall time, 1 ms to 1 min: metadata calls take milliseconds, a
// release over a large table or a long upload stream takes seconds.
const std::vector<double>& RpcDurationBuckets() {
  static const auto* buckets = new std::vector<double>{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0};
  return *buckets;
}

// "host:port" with a non-empty host and a port in [0, 65535]; "[v6]:port"
// is accepted as civetweb spells IPv6.
absl::Status ValidateListenAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-listen must be host:port (e.g. 127.0.0.1:9464), got '", address, "'"));
  }
  return absl::OkStatus();
}

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(Metrics* metrics, Authorizer* authorizer,
                     grpc::experimental::ServerRpcInfo* info)
      : metrics_(metrics),
        authorizer_(authorizer),
        info_(info),
        start_(std::chrono::steady_clock::now()) {}
  ~MetricsInterceptor() override {
    // A call that ended without a status (client gone) is still counted.
    if (!finished_) Finish(grpc::Status(grpc::StatusCode::CANCELLED, ""));
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      // A response over the send limit: gRPC fails the call with
      // RESOURCE_EXHAUSTED after the handler returned OK. This hook runs
      // before the authorizer's, so it checks too (Authorizer::CheckSend;
      // the first refusal is kept) and the status below is that one.
      authorizer_->CheckSend(info_->server_context(), methods);
    }
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      // Runs before the authorizer's interceptor ends the call (send hooks
      // go in list order and this one is first): its verdict is still there.
      // The status the client gets is the call's refusal when there is one
      // (the authorizer's, or the input-limits interceptor's through
      // Authorizer::Refuse), which the authorizer's interceptor writes over
      // the handler's AFTER this hook: a stream refused for an oversized
      // message has a handler that read cleared messages and may return
      // OK, and was counted OK (issue 24).
      const std::optional<grpc::Status> refused =
          authorizer_->Refusal(info_->server_context());
      Finish(refused.has_value() ? *refused : methods->GetSendStatus());
    }
    methods->Proceed();
  }

 private:
  void Finish(const grpc::Status& status) {
    finished_ = true;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    // The server's name for the method, never the path as sent: label,
    // comparisons and log line all see the table's string or "unknown".
    const absl::string_view method = CanonicalMethod(info_->method());
    // gRPC and Abseil share the canonical code numbering.
    const auto code = static_cast<absl::StatusCode>(status.error_code());
    metrics_->RecordRpc(method, code, seconds);
    if (code != absl::StatusCode::kOk && (method == kRequestRelease || method == kOpenSession ||
                                            method == kOpenPartitioned)) {
      metrics_->RecordRefusal(code);
    }
    // Health probes every few seconds would drown the log; they are counted.
    if (IsPublicMethod(method)) return;
    // A refused call that charged nothing (its token or role, a quota)
    // leaves no line of its own: the audit log aggregates
    // those per peer, method and code and logs each aggregate (AuditLog),
    // so a flood writes O(1) lines per interval, not one per call.
    if (authorizer_->Aggregated(info_->server_context(), code)) return;
    const bool server_fault = code == absl::StatusCode::kInternal ||
                              code == absl::StatusCode::kDataLoss ||
                              code == absl::StatusCode::kUnknown;
    // The principal's id ("file:" + 16 hex digits of the token's SHA-256
    // digest, or "tok_<hex>"; server/auth.h), never its token. Empty for a
    // refused call, whose principal the audit row keeps.
    absl::StatusOr<Principal> caller = authorizer_->Caller(info_->server_context());
    // Only the code: the status message may quote a rejected cell.
    LogEvent(server_fault ? LogLevel::kError : LogLevel::kInfo, "rpc")
        .Str("method", Metrics::MethodLabel(method))
        .Str("principal", caller.ok() ? caller->id : "")
        .Str("role", caller.ok() ? RoleName(caller->role) : "none")
        .Code(code)
        .Num("duration_ms", seconds * 1e3);
  }

  Metrics* metrics_;
  Authorizer* authorizer_;
  grpc::experimental::ServerRpcInfo* info_;
  std::chrono::steady_clock::time_point start_;
  bool finished_ = false;
};

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  MetricsInterceptorFactory(Metrics* metrics, Authorizer* authorizer)
      : metrics_(metrics), authorizer_(authorizer) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(metrics_, authorizer_, info);
  }

 private:
  Metrics* metrics_;
  Authorizer* authorizer_;
};

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  releases_ = &prometheus::BuildCounter()
                   .Name("dpcurator_releases_total")
                   .Help("One-shot releases computed and delivered (replays excluded)")
                   .Register(*registry_);
  refusals_ = &prometheus::BuildCounter()
                   .Name("dpcurator_release_refusals_total")
                   .Help("RequestRelease and OpenSession calls that ended in an error, by reason")
                   .Register(*registry_);
  epsilon_spent_ = &prometheus::BuildGauge()
                        .Name("dpcurator_epsilon_spent")
                        .Help("Epsilon spent per dataset, as the ledger composes it")
                        .Register(*registry_);
  epsilon_remaining_ = &prometheus::BuildGauge()
                            .Name("dpcurator_epsilon_remaining")
                            .Help("Epsilon left under the dataset's cap")
                            .Register(*registry_);
  reports_ = &prometheus::BuildCounter()
                  .Name("dpcurator_ldp_reports_total")
                  .Help("Local-DP reports received, by collection and outcome")
                  .Register(*registry_);
  failures_after_rows_read_ =
      &prometheus::BuildCounter()
           .Name("dpcurator_failures_after_rows_read_total")
           .Help("Releases and session steps that failed after the server read private rows "
                 "(incidents; docs/privacy.md 6.4: zero in a healthy server), by object")
           .Register(*registry_);
  // Both series exist from the start, so a scrape reads 0, not nothing.
  failures_after_rows_read_->Add({{"object", "release"}});
  failures_after_rows_read_->Add({{"object", "session_step"}});
  sessions_open_ = &prometheus::BuildGauge()
                        .Name("dpcurator_sessions_open")
                        .Help("Iterative-release sessions in state OPEN")
                        .Register(*registry_)
                        .Add({});
  rpcs_ = &prometheus::BuildCounter()
               .Name("dpcurator_rpcs_total")
               .Help("Finished RPCs by method and status code")
               .Register(*registry_);
  rpc_duration_ = &prometheus::BuildHistogram()
                       .Name("dpcurator_rpc_duration_seconds")
                       .Help("Wall time of an RPC from its start to its status")
                       .Register(*registry_);
}

Metrics::~Metrics() = default;

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Builder::Build() {
  std::unique_ptr<Metrics> metrics(new Metrics());
  if (listen_address_.empty()) return metrics;
  DPC_RETURN_IF_ERROR(ValidateListenAddress(listen_address_));
  // civetweb reports a failed bind by throwing from the constructor; the
  // exception stops here.
  try {
    metrics->exposer_ = std::make_unique<prometheus::Exposer>(listen_address_, /*num_threads=*/2);
  } catch (const std::exception&) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on '", listen_address_,
                                               "' (address in use, or not host:port?)"));
  }
  metrics->exposer_->RegisterCollectable(metrics->registry_);
  const std::vector<int> ports = metrics->exposer_->GetListeningPorts();
  if (ports.empty() || ports.front() <= 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics endpoint on '", listen_address_, "' reports no bound port"));
  }
  metrics->port_ = ports.front();
  return metrics;
}

std::string Metrics::Scrape() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

void Metrics::RecordRelease(absl::string_view kind, absl::string_view dataset_id) {
  releases_->Add({{"kind", std::string(kind)}, {"dataset", std::string(dataset_id)}})
      .Increment();
}

void Metrics::RecordRefusal(absl::StatusCode code) {
  refusals_->Add({{"reason", RefusalReason(code)}}).Increment();
}

void Metrics::RecordFailureAfterRowsRead(absl::string_view object) {
  failures_after_rows_read_->Add({{"object", std::string(object)}}).Increment();
}

void Metrics::SetEpsilon(absl::string_view dataset_id, double spent, double remaining) {
  const prometheus::Labels labels = {{"dataset", std::string(dataset_id)}};
  epsilon_spent_->Add(labels).Set(spent);
  epsilon_remaining_->Add(labels).Set(remaining);
}

void Metrics::UpdateBudget(absl::string_view dataset_id, double spent, double remaining,
                           int64_t open_sessions) {
  SetEpsilon(dataset_id, spent, remaining);
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  open_sessions_[std::string(dataset_id)] = open_sessions;
  int64_t total = 0;
  for (const auto& [dataset, count] : open_sessions_) total += count;
  sessions_open_->Set(static_cast<double>(total));
}

void Metrics::RecordReports(absl::string_view collection_id, const v1::SubmitReportsAck& ack) {
  const std::string collection(collection_id);
  const std::pair<const char*, int> outcomes[] = {{"accepted", ack.accepted()},
                                                  {"rejected", ack.rejections_size()},
                                                  {"duplicate", ack.duplicates()}};
  for (const auto& [outcome, count] : outcomes) {
    // Add() creates the series at zero, so all three outcomes are exported
    // as soon as the collection has seen a batch.
    prometheus::Counter& counter =
        reports_->Add({{"collection", collection}, {"outcome", outcome}});
    if (count > 0) counter.Increment(count);
  }
}

void Metrics::RecordRpc(absl::string_view method, absl::StatusCode code, double seconds) {
  const std::string label = MethodLabel(method);
  rpcs_->Add({{"method", label}, {"code", absl::StatusCodeToString(code)}}).Increment();
  rpc_duration_->Add({{"method", label}}, RpcDurationBuckets()).Observe(seconds);
}

const char* Metrics::RefusalReason(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kResourceExhausted:
      return "budget";
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:
      return "invalid";
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return "auth";
    case absl::StatusCode::kNotFound:
      return "not_found";
    default:
      return "error";
  }
}

std::string Metrics::MethodLabel(absl::string_view method) {
  // Only the server's own method table makes labels (issue 36, item 1):
  // any other path, under the health prefix or not, is the one "unknown".
  method = CanonicalMethod(method);
  if (method == kUnknownMethod) return std::string(kUnknownMethod);
  // "/dpcurator.v1.ReleaseService/RequestRelease" -> "ReleaseService/RequestRelease",
  // "/grpc.health.v1.Health/Check" -> "Health/Check".
  const size_t slash = method.rfind('/');
  const size_t dot = method.substr(0, slash).rfind('.');
  return std::string(method.substr(dot == absl::string_view::npos ? 1 : dot + 1));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
Metrics::MakeInterceptorFactory(Authorizer* authorizer) {
  return std::make_unique<MetricsInterceptorFactory>(this, authorizer);
}

void RefreshBudget(Ledger& ledger, Metrics& metrics, const std::string& dataset_id) {
  // The position, not the report: O(grid) whatever the ledger's history
  // (issue 36, item 6), and this runs after every charge and refund.
  absl::StatusOr<Ledger::BudgetPosition> position = ledger.Position(dataset_id);
  if (!position.ok()) {
    LogEvent(LogLevel::kWarning, "metrics_refresh_failed")
        .Str("dataset", dataset_id)
        .Code(position.status().code());
    return;
  }
  metrics.UpdateBudget(dataset_id, position->epsilon_spent, position->epsilon_remaining,
                       position->open_sessions);
}

absl::Status RefreshAllBudgets(Store& store, Ledger& ledger, Metrics& metrics) {
  DPC_ASSIGN_OR_RETURN(std::vector<v1::Dataset> datasets, store.ListDatasets());
  for (const v1::Dataset& dataset : datasets) {
    DPC_ASSIGN_OR_RETURN(Ledger::BudgetPosition position, ledger.Position(dataset.id()));
    metrics.UpdateBudget(dataset.id(), position.epsilon_spent, position.epsilon_remaining,
                         position.open_sessions);
  }
  return absl::OkStatus();
}

}  // namespace dpcurator::server
