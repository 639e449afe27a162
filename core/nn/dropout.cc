#include "core/nn/dropout.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpcurator::nn {

template <typename Scalar>
absl::StatusOr<BasicDropout<Scalar>> BasicDropout<Scalar>::Create(double rate) {
  if (!std::isfinite(rate) || rate < 0.0 || rate >= 1.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Dropout rate must be in [0, 1), got ", rate));
  }
  return BasicDropout(rate);
}

template <typename Scalar>
const typename BasicDropout<Scalar>::Matrix& BasicDropout<Scalar>::ForwardTraining(
    const Eigen::Ref<const Matrix>& input, PublicRng* rng, Workspace* workspace) const {
  const Scalar keep_scale = static_cast<Scalar>(1.0 / (1.0 - rate_));
  Matrix& mask = workspace->mask_;
  mask.resize(input.rows(), input.cols());
  for (Eigen::Index j = 0; j < mask.cols(); ++j) {
    for (Eigen::Index i = 0; i < mask.rows(); ++i) {
      mask(i, j) = rng->Uniform() < rate_ ? Scalar{0} : keep_scale;
    }
  }
  workspace->output_ = input.cwiseProduct(mask);
  return workspace->output_;
}

template <typename Scalar>
void BasicDropout<Scalar>::Backward(const Eigen::Ref<const Matrix>& grad_output,
                                    const Workspace& workspace, Matrix* grad_input) const {
  eigen_assert(grad_output.rows() == workspace.mask_.rows());
  eigen_assert(grad_output.cols() == workspace.mask_.cols());
  *grad_input = grad_output.cwiseProduct(workspace.mask_);
}

template class BasicDropout<double>;
template class BasicDropout<float>;

}  // namespace dpcurator::nn
