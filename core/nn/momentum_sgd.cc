#include "core/nn/momentum_sgd.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::nn {

MomentumSgd::MomentumSgd(const MomentumSgdOptions& options, Eigen::Index num_parameters)
    : options_(options), velocity_(Eigen::VectorXd::Zero(num_parameters)) {}

absl::StatusOr<MomentumSgd> MomentumSgd::Create(Eigen::Index num_parameters,
                                                const MomentumSgdOptions& options) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(num_parameters, "Number of parameters"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(options.learning_rate, "Learning rate"));
  if (!std::isfinite(options.momentum) || options.momentum < 0 || options.momentum >= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Momentum must be in [0, 1), got ", options.momentum));
  }
  return MomentumSgd(options, num_parameters);
}

absl::Status MomentumSgd::Step(Eigen::Ref<Eigen::VectorXd> params,
                               const Eigen::Ref<const Eigen::VectorXd>& grads) {
  if (params.size() != velocity_.size() || grads.size() != velocity_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SGD step got ", params.size(), " parameters and ", grads.size(),
        " gradient entries; the optimizer was created for ", velocity_.size()));
  }
  if (!grads.allFinite()) {
    return absl::FailedPreconditionError(
        "Non-finite gradient entry; parameters left unchanged (lower the learning rate?)");
  }
  velocity_ = options_.momentum * velocity_ + grads;
  params -= options_.learning_rate * velocity_;
  return absl::OkStatus();
}

}  // namespace dpcurator::nn
