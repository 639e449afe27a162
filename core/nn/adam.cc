#include "core/nn/adam.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::nn {
namespace {

absl::Status ValidateDecay(double value, const std::string& name) {
  if (!std::isfinite(value) || value < 0 || value >= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be in [0, 1), got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

Adam::Adam(const AdamOptions& options, Eigen::Index num_parameters)
    : options_(options),
      m_(Eigen::VectorXd::Zero(num_parameters)),
      v_(Eigen::VectorXd::Zero(num_parameters)) {}

absl::StatusOr<Adam> Adam::Create(Eigen::Index num_parameters,
                                  const AdamOptions& options) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(num_parameters, "Number of parameters"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(options.learning_rate, "Learning rate"));
  DPC_RETURN_IF_ERROR(ValidateDecay(options.beta1, "Beta1"));
  DPC_RETURN_IF_ERROR(ValidateDecay(options.beta2, "Beta2"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(options.epsilon, "Adam epsilon"));
  return Adam(options, num_parameters);
}

absl::Status Adam::SetLearningRate(double learning_rate) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(learning_rate, "Learning rate"));
  options_.learning_rate = learning_rate;
  return absl::OkStatus();
}

absl::Status Adam::RestoreState(const Eigen::VectorXd& first_moment,
                                const Eigen::VectorXd& second_moment,
                                int64_t step_count) {
  if (first_moment.size() != m_.size() || second_moment.size() != v_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Adam state has ", first_moment.size(), " and ", second_moment.size(),
        " entries; the optimizer has ", m_.size(), " parameters"));
  }
  DPC_RETURN_IF_ERROR(ValidateFiniteNonNegative(static_cast<double>(step_count),
                                                "Adam step count"));
  if (!first_moment.allFinite() || !second_moment.allFinite() ||
      (second_moment.array() < 0).any()) {
    return absl::InvalidArgumentError(
        "Adam moments must be finite and the second moment non-negative");
  }
  m_ = first_moment;
  v_ = second_moment;
  step_count_ = step_count;
  return absl::OkStatus();
}

absl::Status Adam::Step(Eigen::Ref<Eigen::VectorXd> params,
                        const Eigen::Ref<const Eigen::VectorXd>& grads) {
  if (params.size() != m_.size() || grads.size() != m_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Adam step got ", params.size(), " parameters and ", grads.size(),
        " gradient entries; the optimizer was created for ", m_.size()));
  }
  if (!grads.allFinite()) {
    for (Eigen::Index i = 0; i < grads.size(); ++i) {
      if (!std::isfinite(grads(i))) {
        return absl::FailedPreconditionError(absl::StrCat(
            "Gradient entry ", i, " is ", grads(i),
            "; parameters left unchanged (lower the learning rate?)"));
      }
    }
  }
  const double beta1 = options_.beta1;
  const double beta2 = options_.beta2;
  ++step_count_;
  const double t = static_cast<double>(step_count_);
  // Bias corrections 1 - beta^t (Kingma & Ba 2015, Sec. 3).
  const double correction1 = 1.0 - std::pow(beta1, t);
  const double correction2 = 1.0 - std::pow(beta2, t);
  m_.array() = beta1 * m_.array() + (1.0 - beta1) * grads.array();
  v_.array() = beta2 * v_.array() + (1.0 - beta2) * grads.array().square();
  const double step_size =
      (options_.maximize ? 1.0 : -1.0) * options_.learning_rate / correction1;
  params.array() += step_size * m_.array() /
                    ((v_.array() / correction2).sqrt() + options_.epsilon);
  return absl::OkStatus();
}

}  // namespace dpcurator::nn
