#include "client/dp_sgd_oracle.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/privacy/noise_source.h"

namespace dpcurator::client {
namespace {

// Runs `call` (which makes one RPC with a fresh context) until it succeeds,
// fails for a reason a retry cannot fix, or max_attempts are used.
template <typename Call>
grpc::Status WithRetries(int max_attempts, std::chrono::milliseconds backoff, Call call) {
  grpc::Status status;
  for (int attempt = 0; attempt < std::max(1, max_attempts); ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    }
    status = call();
    if (status.ok() || !IsRetryable(status.error_code())) return status;
  }
  return status;
}

}  // namespace

bool IsRetryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

absl::StatusOr<DpSgdOracle> DpSgdOracle::Open(Connection* connection,
                                              const DpSgdSessionOptions& options) {
  if (options.epsilon.has_value() == options.noise_multiplier.has_value()) {
    return absl::InvalidArgumentError(
        "a dp_sgd session needs exactly one of epsilon (for all steps) or noise_multiplier");
  }
  v1::OpenSessionRequest request;
  request.set_dataset_id(options.dataset_id);
  // One key for every attempt: a retried open replays the same session.
  request.set_idempotency_key(
      options.idempotency_key.empty()
          ? absl::StrFormat("dp_sgd-%016x", privacy::SecureRandomU64())
          : options.idempotency_key);
  v1::SessionParams& params = *request.mutable_params();
  params.set_steps(options.steps);
  params.set_sampling_rate(options.sampling_rate);
  if (options.epsilon.has_value()) params.set_epsilon(*options.epsilon);
  if (options.noise_multiplier.has_value()) {
    params.set_noise_multiplier(*options.noise_multiplier);
  }
  *params.mutable_dp_sgd() = options.network;
  v1::Session session;
  const grpc::Status status =
      WithRetries(options.max_attempts, options.initial_backoff, [&] {
        auto context = connection->NewContext();
        return connection->sessions().OpenSession(context.get(), request, &session);
      });
  if (!status.ok()) return RpcError(status, "open dp_sgd session");
  return DpSgdOracle(connection, std::move(session), options.max_attempts,
                     options.initial_backoff);
}

absl::StatusOr<DpSgdOracle> DpSgdOracle::Resume(Connection* connection,
                                                const std::string& session_id,
                                                int max_attempts) {
  v1::GetSessionRequest request;
  request.set_session_id(session_id);
  v1::Session session;
  const std::chrono::milliseconds backoff{50};
  const grpc::Status status = WithRetries(max_attempts, backoff, [&] {
    auto context = connection->NewContext();
    return connection->sessions().GetSession(context.get(), request, &session);
  });
  if (!status.ok()) return RpcError(status, absl::StrCat("get session ", session_id));
  if (session.params().step_case() != v1::SessionParams::kDpSgd) {
    return absl::FailedPreconditionError(
        absl::StrCat("session '", session_id, "' is not a dp_sgd session; open one with a "
                                              "dp_sgd network"));
  }
  return DpSgdOracle(connection, std::move(session), max_attempts, backoff);
}

absl::StatusOr<Eigen::VectorXf> DpSgdOracle::Step(int64_t index,
                                                  const Eigen::VectorXf& parameters) {
  if (parameters.size() != num_parameters()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dp_sgd step parameters have length ", parameters.size(), "; the session's network has ",
        num_parameters()));
  }
  v1::SessionStepRequest request;
  request.set_session_id(session_.id());
  request.set_step(index);
  request.mutable_dp_sgd()->mutable_parameters()->Add(parameters.data(),
                                                      parameters.data() + parameters.size());
  v1::SessionStepResponse response;
  const grpc::Status status = WithRetries(max_attempts_, backoff_, [&] {
    response.Clear();
    auto context = connection_->NewContext();
    return connection_->sessions().Step(context.get(), request, &response);
  });
  if (!status.ok()) {
    return RpcError(status, absl::StrCat("dp_sgd step ", index, " of session ", session_.id()));
  }
  if (response.answer_case() != v1::SessionStepResponse::kGradient ||
      response.gradient().gradient_size() != num_parameters()) {
    return absl::DataLossError(
        absl::StrCat("dp_sgd step ", index, ": the server's answer is not a gradient of the "
                     "session's network; check that client and server versions match"));
  }
  if (response.has_session()) session_ = response.session();
  const auto& gradient = response.gradient().gradient();
  return Eigen::Map<const Eigen::VectorXf>(gradient.data(), gradient.size());
}

absl::StatusOr<v1::Session> DpSgdOracle::Close() {
  v1::CloseSessionRequest request;
  request.set_session_id(session_.id());
  v1::Session session;
  const grpc::Status status = WithRetries(max_attempts_, backoff_, [&] {
    auto context = connection_->NewContext();
    return connection_->sessions().CloseSession(context.get(), request, &session);
  });
  if (!status.ok()) return RpcError(status, absl::StrCat("close session ", session_.id()));
  session_ = session;
  return session;
}

}  // namespace dpcurator::client
