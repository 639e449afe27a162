#include "client/oracles/kernel_oracle.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dpcurator::client {

absl::StatusOr<KernelOracle> KernelOracle::Open(Connection* connection,
                                                const KernelSessionOptions& options) {
  v1::SessionParams step;
  *step.mutable_kernel_witness() = options.kernel;
  auto channel = SessionChannel::Open(connection, options, step, "kernel_witness");
  if (!channel.ok()) return channel.status();
  return KernelOracle(*std::move(channel));
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
