#include "client/oracles/kernel_oracle.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/privacy/noise_source.h"

namespace dpcurator::client {

absl::StatusOr<KernelOracle> KernelOracle::Open(Connection* connection,
                                                const KernelSessionOptions& options) {
  v1::SessionParams step;
  *step.mutable_kernel_witness() = options.kernel;
  auto channel = SessionChannel::Open(connection, options, step, "kernel_witness");
  if (!channel.ok()) return channel.status();
  return KernelOracle(*std::move(channel));
}

absl::StatusOr<std::vector<KernelOracle>> KernelOracle::OpenPartitioned(
    Connection* connection, const KernelSessionOptions& options, const std::string& column,
    std::vector<std::string>* values) {
  if (options.epsilon.has_value() == options.noise_multiplier.has_value()) {
    return absl::InvalidArgumentError(
        "partitioned kernel_witness sessions need exactly one of epsilon or noise_multiplier");
  }
  v1::OpenPartitionedSessionsRequest request;
  request.set_dataset_id(options.dataset_id);
  // One key for every attempt: a retried open replays the same group.
  request.set_idempotency_key(
      options.idempotency_key.empty()
          ? absl::StrFormat("kernel_parallel-%016x", privacy::SecureRandomU64())
          : options.idempotency_key);
  v1::SessionParams& params = *request.mutable_params();
  *params.mutable_kernel_witness() = options.kernel;
  params.mutable_kernel_witness()->set_parallel(true);
  params.set_steps(options.steps);
  params.set_sampling_rate(options.sampling_rate);
  if (options.epsilon.has_value()) params.set_epsilon(*options.epsilon);
  if (options.noise_multiplier.has_value()) {
    params.set_noise_multiplier(*options.noise_multiplier);
  }
  request.mutable_partition()->set_column(column);
  v1::PartitionedSessions opened;
  grpc::Status status;
  std::chrono::milliseconds backoff = options.initial_backoff;
  for (int attempt = 0; attempt < std::max(1, options.max_attempts); ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    }
    opened.Clear();
    auto context = connection->NewContext();
    status = connection->sessions().OpenPartitionedSessions(context.get(), request, &opened);
    if (status.ok() || !IsRetryable(status.error_code())) break;
  }
  if (!status.ok()) return RpcError(status, "open partitioned kernel_witness sessions");
  if (opened.sessions_size() == 0 || opened.values_size() != opened.sessions_size()) {
    return absl::DataLossError(
        "the server's partitioned sessions do not match their parts; check that client and "
        "server versions match");
  }
  std::vector<KernelOracle> oracles;
  values->assign(opened.values().begin(), opened.values().end());
  for (const v1::Session& session : opened.sessions()) {
    auto channel = SessionChannel::Resume(connection, session.id(),
                                          v1::SessionParams::kKernelWitness, "kernel_witness",
                                          "open them with `dpcurator train kernel`",
                                          options.max_attempts);
    if (!channel.ok()) return channel.status();
    oracles.push_back(KernelOracle(*std::move(channel)));
  }
  return oracles;
}

absl::StatusOr<KernelOracle> KernelOracle::Resume(Connection* connection,
                                                  const std::string& session_id,
                                                  int max_attempts) {
  auto channel = SessionChannel::Resume(connection, session_id,
                                        v1::SessionParams::kKernelWitness, "kernel_witness",
                                        "open one with `dpcurator train kernel`", max_attempts);
  if (!channel.ok()) return channel.status();
  return KernelOracle(*std::move(channel));
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
  request.set_step(index);
  v1::KernelWitnessQuery& query = *request.mutable_kernel_witness();
  query.set_num_points(static_cast<int>(points.rows()));
  query.mutable_points()->Reserve(static_cast<int>(points.size()));
  for (Eigen::Index j = 0; j < points.rows(); ++j) {
    for (Eigen::Index a = 0; a < d; ++a) query.add_points(static_cast<float>(points(j, a)));
  }
  for (Eigen::Index j = 0; j < labels.size(); ++j) query.add_labels(labels(j));
  // Every attempt carries the same index: a retry after a lost answer is
  // replayed by the server, never charged again.
  auto stepped = channel_.Step(std::move(request));
  if (!stepped.ok()) return stepped.status();
  const v1::SessionStepResponse& response = *stepped;
  const int64_t m = points.rows();
  if (response.answer_case() != v1::SessionStepResponse::kWitness ||
      response.witness().values_size() != m || response.witness().gradients_size() != m * d) {
    return absl::DataLossError(absl::StrCat(
        "kernel_witness step ", index, ": the server's answer does not match the query's ", m,
        " points; check that client and server versions match"));
  }
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

absl::StatusOr<v1::Session> KernelOracle::Close() { return channel_.Close(); }

}  // namespace dpcurator::client
