#include "client/kernel_oracle.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/dp_sgd_oracle.h"
#include "core/privacy/noise_source.h"

namespace dpcurator::client {
namespace {

// Runs `call` (one RPC with a fresh context) until it succeeds, fails for a
// reason a retry cannot fix (IsRetryable), or max_attempts are used.
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

absl::StatusOr<KernelOracle> KernelOracle::Open(Connection* connection,
                                                const KernelSessionOptions& options) {
  if (options.epsilon.has_value() == options.noise_multiplier.has_value()) {
    return absl::InvalidArgumentError(
        "a kernel_witness session needs exactly one of epsilon (for all steps) or "
        "noise_multiplier");
  }
  v1::OpenSessionRequest request;
  request.set_dataset_id(options.dataset_id);
  // One key for every attempt: a retried open replays the same session.
  request.set_idempotency_key(options.idempotency_key.empty()
                                  ? absl::StrFormat("kernel-%016x", privacy::SecureRandomU64())
                                  : options.idempotency_key);
  v1::SessionParams& params = *request.mutable_params();
  params.set_steps(options.steps);
  params.set_sampling_rate(options.sampling_rate);
  if (options.epsilon.has_value()) params.set_epsilon(*options.epsilon);
  if (options.noise_multiplier.has_value()) {
    params.set_noise_multiplier(*options.noise_multiplier);
  }
  *params.mutable_kernel_witness() = options.kernel;
  v1::Session session;
  const grpc::Status status = WithRetries(options.max_attempts, options.initial_backoff, [&] {
    auto context = connection->NewContext();
    return connection->sessions().OpenSession(context.get(), request, &session);
  });
  if (!status.ok()) return RpcError(status, "open kernel_witness session");
  return KernelOracle(connection, std::move(session), options.max_attempts,
                      options.initial_backoff);
}

absl::StatusOr<KernelOracle> KernelOracle::Resume(Connection* connection,
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
  if (session.params().step_case() != v1::SessionParams::kKernelWitness) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session '", session_id, "' is not a kernel_witness session; open one with "
                                 "`dpcurator train kernel`"));
  }
  return KernelOracle(connection, std::move(session), max_attempts, backoff);
}

absl::StatusOr<train::KernelWitnessAnswer> KernelOracle::Step(const Eigen::MatrixXd& points,
                                                              const Eigen::VectorXi& labels) {
  const int d = kernel().dimension();
  if (points.cols() != d) {
    return absl::InvalidArgumentError(absl::StrCat("kernel_witness points have ", points.cols(),
                                                   " columns; the session's dataset has ", d,
                                                   " encoded feature dimensions"));
  }
  const int64_t index = next_step_;
  v1::SessionStepRequest request;
  request.set_session_id(session_.id());
  request.set_step(index);
  v1::KernelWitnessQuery& query = *request.mutable_kernel_witness();
  query.set_num_points(static_cast<int>(points.rows()));
  query.mutable_points()->Reserve(static_cast<int>(points.size()));
  for (Eigen::Index j = 0; j < points.rows(); ++j) {
    for (Eigen::Index a = 0; a < d; ++a) query.add_points(static_cast<float>(points(j, a)));
  }
  for (Eigen::Index j = 0; j < labels.size(); ++j) query.add_labels(labels(j));
  v1::SessionStepResponse response;
  // Every attempt carries the same index: a retry after a lost answer is
  // replayed by the server, never charged again.
  const grpc::Status status = WithRetries(max_attempts_, backoff_, [&] {
    response.Clear();
    auto context = connection_->NewContext();
    return connection_->sessions().Step(context.get(), request, &response);
  });
  if (!status.ok()) {
    return RpcError(status,
                    absl::StrCat("kernel_witness step ", index, " of session ", session_.id()));
  }
  const int64_t m = points.rows();
  if (response.answer_case() != v1::SessionStepResponse::kWitness ||
      response.witness().values_size() != m || response.witness().gradients_size() != m * d) {
    return absl::DataLossError(absl::StrCat(
        "kernel_witness step ", index, ": the server's answer does not match the query's ", m,
        " points; check that client and server versions match"));
  }
  if (response.has_session()) session_ = response.session();
  next_step_ = index + 1;
  train::KernelWitnessAnswer answer;
  answer.values = Eigen::Map<const Eigen::VectorXf>(response.witness().values().data(), m)
                      .cast<double>();
  answer.gradients =
      Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
          response.witness().gradients().data(), m, d)
          .cast<double>();
  return answer;
}

absl::StatusOr<v1::Session> KernelOracle::Close() {
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
