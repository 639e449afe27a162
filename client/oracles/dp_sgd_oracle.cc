#include "client/oracles/dp_sgd_oracle.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dpcurator::client {

absl::StatusOr<DpSgdOracle> DpSgdOracle::Open(Connection* connection,
                                              const DpSgdSessionOptions& options) {
  v1::SessionParams step;
  *step.mutable_dp_sgd() = options.network;
  auto channel = SessionChannel::Open(connection, options, step, "dp_sgd");
  if (!channel.ok()) return channel.status();
  return DpSgdOracle(*std::move(channel));
}

absl::StatusOr<DpSgdOracle> DpSgdOracle::Resume(Connection* connection,
                                                const std::string& session_id,
                                                int max_attempts) {
  auto channel = SessionChannel::Resume(connection, session_id, v1::SessionParams::kDpSgd,
                                        "dp_sgd", "open one with a dp_sgd network",
                                        max_attempts);
  if (!channel.ok()) return channel.status();
  return DpSgdOracle(*std::move(channel));
}

absl::StatusOr<Eigen::VectorXf> DpSgdOracle::Step(int64_t index,
                                                  const Eigen::VectorXf& parameters) {
  if (parameters.size() != num_parameters()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dp_sgd step parameters have length ", parameters.size(), "; the session's network has ",
        num_parameters()));
  }
  v1::SessionStepRequest request;
  request.set_step(index);
  request.mutable_dp_sgd()->mutable_parameters()->Add(parameters.data(),
                                                      parameters.data() + parameters.size());
  auto response = channel_.Step(std::move(request));
  if (!response.ok()) return response.status();
  if (response->answer_case() != v1::SessionStepResponse::kGradient ||
      response->gradient().gradient_size() != num_parameters()) {
    return absl::DataLossError(
        absl::StrCat("dp_sgd step ", index, ": the server's answer is not a gradient of the "
                     "session's network; check that client and server versions match"));
  }
  const auto& gradient = response->gradient().gradient();
  return Eigen::Map<const Eigen::VectorXf>(gradient.data(), gradient.size());
}

absl::StatusOr<v1::Session> DpSgdOracle::Close() { return channel_.Close(); }

}  // namespace dpcurator::client
