#include "server/quotas.h"

#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/privacy/conversion.h"
#include "core/util/status_macros.h"
#include "server/auth.h"

namespace dpcurator::server {
namespace {

class CallQuotaInterceptor final : public grpc::experimental::Interceptor {
 public:
  CallQuotaInterceptor(Authorizer* authorizer, CallQuotas* quotas,
                       grpc::experimental::ServerRpcInfo* info)
      : authorizer_(authorizer),
        quotas_(quotas),
        info_(info),
        stream_(info->type() != grpc::experimental::ServerRpcInfo::Type::UNARY) {}
  ~CallQuotaInterceptor() override { GiveBack(); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      static const std::multimap<grpc::string_ref, grpc::string_ref> kNoMetadata;
      const auto* metadata = methods->GetRecvInitialMetadata();
      // The authorizer's own verdict, looked up again so that this does not
      // depend on the order gRPC runs the receive hooks in. A refused token
      // takes no slot: the authorizer refuses the call.
      Authorizer::Decision decision =
          authorizer_->Decide(info_->method(), metadata != nullptr ? *metadata : kNoMetadata);
      if (decision.status.ok() && decision.principal.has_value()) {
        absl::Status taken = quotas_->Acquire(decision.principal->id, stream_);
        if (taken.ok()) {
          principal_ = std::move(decision.principal->id);
        } else {
          // Check() fails from now on, so the handler returns at its first
          // line and gives its thread back; the status is rewritten to this.
          authorizer_->Refuse(info_->server_context(), ToGrpcStatus(taken),
                              /*before_handler=*/true);
        }
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      GiveBack();
    }
    methods->Proceed();
  }

 private:
  void GiveBack() {
    if (!principal_.has_value()) return;
    quotas_->Release(*principal_, stream_);
    principal_.reset();
  }

  Authorizer* authorizer_;
  CallQuotas* quotas_;
  grpc::experimental::ServerRpcInfo* info_;
  const bool stream_;
  // Set while this call holds a slot.
  std::optional<std::string> principal_;
};

class CallQuotaInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  CallQuotaInterceptorFactory(Authorizer* authorizer, CallQuotas* quotas)
      : authorizer_(authorizer), quotas_(quotas) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CallQuotaInterceptor(authorizer_, quotas_, info);
  }

 private:
  Authorizer* authorizer_;
  CallQuotas* quotas_;
};

absl::Status QuotaPositive(int64_t value, const char* flag) {
  if (value >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be >= 1, got ", value));
}

}  // namespace

absl::Status ValidateQuotaLimits(const ServerLimits& limits) {
  DPC_RETURN_IF_ERROR(QuotaPositive(limits.max_concurrent_calls_per_token,
                                    "max-concurrent-calls-per-token"));
  DPC_RETURN_IF_ERROR(
      QuotaPositive(limits.max_open_streams_per_token, "max-open-streams-per-token"));
  DPC_RETURN_IF_ERROR(
      QuotaPositive(limits.max_open_sessions_per_token, "max-open-sessions-per-token"));
  DPC_RETURN_IF_ERROR(
      QuotaPositive(limits.max_reserved_steps_per_token, "max-reserved-steps-per-token"));
  DPC_RETURN_IF_ERROR(
      QuotaPositive(limits.max_stored_bytes_per_token, "max-stored-bytes-per-token"));
  DPC_RETURN_IF_ERROR(QuotaPositive(limits.max_near_free_objects_per_token,
                                    "max-near-free-objects-per-token"));
  DPC_RETURN_IF_ERROR(
      QuotaPositive(limits.max_pending_jobs_per_token, "max-pending-jobs-per-token"));
  DPC_RETURN_IF_ERROR(QuotaPositive(limits.max_server_threads, "max-server-threads"));
  DPC_RETURN_IF_ERROR(
      QuotaPositive(limits.max_streams_per_connection, "max-streams-per-connection"));
  DPC_RETURN_IF_ERROR(
      QuotaPositive(limits.max_connection_idle_seconds, "max-connection-idle-seconds"));
  if (!(limits.near_free_epsilon >= 0.0) || !std::isfinite(limits.near_free_epsilon)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--near-free-epsilon must be finite and >= 0 (0: no object is near-free), got ",
        limits.near_free_epsilon));
  }
  // At most a minute: a longer wait only holds threads.
  if (limits.refusal_backoff_ms < 0 || limits.refusal_backoff_ms > 60000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--refusal-backoff-ms must be in [0, 60000] (0: none), got ", limits.refusal_backoff_ms));
  }
  return absl::OkStatus();
}

absl::Status QuotaExceeded(const std::string& what, const char* flag, int64_t limit) {
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " over the server's --", flag, " limit (", limit,
      "); ask the curator to raise it. Nothing was charged or stored"));
}

absl::Status CallQuotas::Acquire(const std::string& principal, bool stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  InFlight& now = in_flight_[principal];
  absl::Status refused;
  if (now.calls >= limits_.max_concurrent_calls_per_token) {
    refused = QuotaExceeded("this call would take the token's calls in flight",
                            "max-concurrent-calls-per-token",
                            limits_.max_concurrent_calls_per_token);
  } else if (stream && now.streams >= limits_.max_open_streams_per_token) {
    refused = QuotaExceeded("this stream would take the token's open streams",
                            "max-open-streams-per-token", limits_.max_open_streams_per_token);
  }
  if (!refused.ok()) {
    if (now.calls == 0) in_flight_.erase(principal);
    return refused;
  }
  ++now.calls;
  if (stream) ++now.streams;
  return absl::OkStatus();
}

void CallQuotas::Release(const std::string& principal, bool stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_flight_.find(principal);
  if (it == in_flight_.end()) return;
  --it->second.calls;
  if (stream) --it->second.streams;
  if (it->second.calls <= 0) in_flight_.erase(it);
}

int64_t CallQuotas::calls(const std::string& principal) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_flight_.find(principal);
  return it == in_flight_.end() ? 0 : it->second.calls;
}

int64_t CallQuotas::streams(const std::string& principal) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_flight_.find(principal);
  return it == in_flight_.end() ? 0 : it->second.streams;
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeCallQuotaInterceptorFactory(Authorizer* authorizer, CallQuotas* quotas) {
  return std::make_unique<CallQuotaInterceptorFactory>(authorizer, quotas);
}

// ---- Objects. Every query below reads one usage row or counts index
// entries of one token, stopping at the quota: never a scan of the history.

absl::Status ObjectQuotas::CheckStoredBytes(Database* db, const std::string& principal) const {
  DPC_ASSIGN_OR_RETURN(auto query,
                       db->Prepare("SELECT stored_bytes FROM token_usage WHERE principal = ?"));
  query.Bind(1, principal);
  DPC_ASSIGN_OR_RETURN(bool found, query.Step());
  if (found && query.ColumnInt(0) >= limits_.max_stored_bytes_per_token) {
    return QuotaExceeded("the token's stored release and step artefacts are at or",
                         "max-stored-bytes-per-token", limits_.max_stored_bytes_per_token);
  }
  return absl::OkStatus();
}

absl::Status ObjectQuotas::CheckNearFree(Database* db, const std::string& principal,
                                         int64_t count, double delta,
                                         const privacy::PrivacyEvent& event) const {
  const int64_t limit = limits_.max_near_free_objects_per_token;
  // Each side stops counting at the quota (index entries of one token
  // under the floor), so this costs at most 2 x the quota.
  DPC_ASSIGN_OR_RETURN(
      auto query,
      db->Prepare("SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM releases WHERE owner = ?1 AND "
                  "epsilon < ?2 LIMIT ?3)) + (SELECT COUNT(*) FROM (SELECT 1 FROM sessions "
                  "WHERE owner = ?1 AND epsilon_reserved < ?2 LIMIT ?3))"));
  query.Bind(1, principal).Bind(2, limits_.near_free_epsilon).Bind(3, limit);
  DPC_ASSIGN_OR_RETURN(bool row, query.Step());
  const int64_t held = row ? query.ColumnInt(0) : 0;
  if (held + count <= limit) return absl::OkStatus();
  // At the quota: only now is the new object's price worked out.
  DPC_ASSIGN_OR_RETURN(privacy::EpsilonReport alone, privacy::ComputeEpsilonReport(event, delta));
  if (!(alone.epsilon < limits_.near_free_epsilon)) return absl::OkStatus();
  return QuotaExceeded(
      absl::StrCat("this object's epsilon is below the server's --near-free-epsilon (",
                   limits_.near_free_epsilon,
                   "), and it would take the token's near-free releases and sessions"),
      "max-near-free-objects-per-token", limit);
}

absl::Status ObjectQuotas::CheckRelease(Database* db, const std::string& principal,
                                        const std::string& dataset_id, double delta,
                                        const privacy::PrivacyEvent& event, bool job) const {
  DPC_RETURN_IF_ERROR(CheckStoredBytes(db, principal));
  if (job) {
    const int64_t limit = limits_.max_pending_jobs_per_token;
    DPC_ASSIGN_OR_RETURN(auto query,
                         db->Prepare("SELECT COUNT(*) FROM (SELECT 1 FROM releases WHERE owner "
                                     "= ? AND dataset_id = ? AND status = 'PENDING' LIMIT ?)"));
    query.Bind(1, principal).Bind(2, dataset_id).Bind(3, limit);
    DPC_ASSIGN_OR_RETURN(bool row, query.Step());
    if (row && query.ColumnInt(0) >= limit) {
      return QuotaExceeded("this job would take the token's pending jobs on this dataset",
                           "max-pending-jobs-per-token", limit);
    }
  }
  return CheckNearFree(db, principal, 1, delta, event);
}

absl::Status ObjectQuotas::CheckSessions(Database* db, const std::string& principal,
                                         int64_t sessions, int64_t steps, double delta,
                                         const privacy::PrivacyEvent& reserved) const {
  DPC_ASSIGN_OR_RETURN(auto query,
                       db->Prepare("SELECT COUNT(*), COALESCE(SUM(steps_reserved), 0) FROM "
                                   "sessions WHERE owner = ? AND state = 'OPEN'"));
  query.Bind(1, principal);
  DPC_ASSIGN_OR_RETURN(bool row, query.Step());
  const int64_t open = row ? query.ColumnInt(0) : 0;
  const int64_t reserved_steps = row ? query.ColumnInt(1) : 0;
  if (open + sessions > limits_.max_open_sessions_per_token) {
    return QuotaExceeded(
        absl::StrCat("opening ", sessions, sessions == 1 ? " session" : " sessions",
                     " would take the token's open sessions"),
        "max-open-sessions-per-token", limits_.max_open_sessions_per_token);
  }
  // Compared without the sum overflowing: steps is at most int64 max.
  if (steps > limits_.max_reserved_steps_per_token - reserved_steps) {
    return QuotaExceeded(
        absl::StrCat("reserving ", steps, " steps would take the steps reserved by the token's "
                     "open sessions"),
        "max-reserved-steps-per-token", limits_.max_reserved_steps_per_token);
  }
  DPC_RETURN_IF_ERROR(CheckStoredBytes(db, principal));
  return CheckNearFree(db, principal, sessions, delta, reserved);
}

absl::Status ObjectQuotas::CheckStep(Database* db, const std::string& principal) const {
  return CheckStoredBytes(db, principal);
}

}  // namespace dpcurator::server
