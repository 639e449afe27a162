#include "core/nn/batch_norm.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::nn {

template <typename Scalar>
absl::StatusOr<BasicBatchNorm<Scalar>> BasicBatchNorm<Scalar>::Create(
    const BatchNormOptions& options) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.channels, "BatchNorm channels"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.spatial, "BatchNorm spatial size"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(options.epsilon, "BatchNorm epsilon"));
  if (!(options.momentum > 0.0 && options.momentum <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchNorm momentum must be in (0, 1], got ", options.momentum));
  }
  return BasicBatchNorm(options);
}

template <typename Scalar>
void BasicBatchNorm<Scalar>::Initialize(Eigen::Ref<Vector> parameters) const {
  eigen_assert(parameters.size() == num_parameters());
  parameters.head(options_.channels).setOnes();
  parameters.tail(options_.channels).setZero();
}

template <typename Scalar>
void BasicBatchNorm<Scalar>::InitializeRunningStatistics(Eigen::Ref<Vector> running) const {
  eigen_assert(running.size() == num_running_statistics());
  running.head(options_.channels).setZero();
  running.tail(options_.channels).setOnes();
}

// Output = gamma xhat + beta from workspace->normalized_. In memory both are
// (n * spatial) x C matrices whose column c is channel c (conv2d.h layout).
template <typename Scalar>
const typename BasicBatchNorm<Scalar>::Matrix& BasicBatchNorm<Scalar>::Normalize(
    const Eigen::Ref<const Vector>& parameters, Workspace* workspace) const {
  const int channels = options_.channels;
  const Eigen::Index values = workspace->normalized_.rows() * options_.spatial;
  workspace->output_.resize(workspace->normalized_.rows(), feature_size());
  Eigen::Map<const Matrix> xhat(workspace->normalized_.data(), values, channels);
  Eigen::Map<Matrix> out(workspace->output_.data(), values, channels);
  for (int c = 0; c < channels; ++c) {
    out.col(c) = (xhat.col(c) * parameters(c)).array() + parameters(channels + c);
  }
  return workspace->output_;
}

template <typename Scalar>
const typename BasicBatchNorm<Scalar>::Matrix& BasicBatchNorm<Scalar>::ForwardTraining(
    const Eigen::Ref<const Vector>& parameters, const Eigen::Ref<const Matrix>& input,
    Eigen::Ref<Vector> running, Workspace* workspace) const {
  eigen_assert(parameters.size() == num_parameters());
  eigen_assert(running.size() == num_running_statistics());
  eigen_assert(input.cols() == feature_size());
  const int channels = options_.channels;
  const Eigen::Index values = input.rows() * options_.spatial;
  eigen_assert(values >= 2);
  workspace->training_ = true;
  workspace->normalized_ = input;  // contiguous copy, normalised in place
  workspace->inv_std_.resize(channels);
  Eigen::Map<Matrix> xhat(workspace->normalized_.data(), values, channels);
  const Scalar momentum = static_cast<Scalar>(options_.momentum);
  for (int c = 0; c < channels; ++c) {
    const Scalar mean = xhat.col(c).mean();
    xhat.col(c).array() -= mean;
    const Scalar variance = xhat.col(c).squaredNorm() / static_cast<Scalar>(values);
    const Scalar inv_std =
        Scalar{1} / std::sqrt(variance + static_cast<Scalar>(options_.epsilon));
    xhat.col(c) *= inv_std;
    workspace->inv_std_(c) = inv_std;
    running(c) = (Scalar{1} - momentum) * running(c) + momentum * mean;
    const Scalar unbiased =
        variance * static_cast<Scalar>(values) / static_cast<Scalar>(values - 1);
    running(channels + c) = (Scalar{1} - momentum) * running(channels + c) + momentum * unbiased;
  }
  return Normalize(parameters, workspace);
}

template <typename Scalar>
const typename BasicBatchNorm<Scalar>::Matrix& BasicBatchNorm<Scalar>::ForwardInference(
    const Eigen::Ref<const Vector>& parameters, const Eigen::Ref<const Matrix>& input,
    const Eigen::Ref<const Vector>& running, Workspace* workspace) const {
  eigen_assert(parameters.size() == num_parameters());
  eigen_assert(running.size() == num_running_statistics());
  eigen_assert(input.cols() == feature_size());
  const int channels = options_.channels;
  const Eigen::Index values = input.rows() * options_.spatial;
  workspace->training_ = false;
  workspace->normalized_ = input;
  workspace->inv_std_.resize(channels);
  Eigen::Map<Matrix> xhat(workspace->normalized_.data(), values, channels);
  for (int c = 0; c < channels; ++c) {
    const Scalar inv_std = Scalar{1} / std::sqrt(running(channels + c) +
                                                 static_cast<Scalar>(options_.epsilon));
    xhat.col(c) = (xhat.col(c).array() - running(c)) * inv_std;
    workspace->inv_std_(c) = inv_std;
  }
  return Normalize(parameters, workspace);
}

template <typename Scalar>
void BasicBatchNorm<Scalar>::Backward(const Eigen::Ref<const Vector>& parameters,
                                      const Eigen::Ref<const Matrix>& grad_output,
                                      Workspace* workspace, Eigen::Ref<Vector> grad_params,
                                      Matrix* grad_input) const {
  eigen_assert(parameters.size() == num_parameters());
  eigen_assert(grad_params.size() == num_parameters());
  eigen_assert(grad_output.rows() == workspace->normalized_.rows());
  eigen_assert(grad_output.cols() == feature_size());
  const int channels = options_.channels;
  const Eigen::Index n = grad_output.rows();
  const Eigen::Index values = n * options_.spatial;
  Eigen::Map<const Matrix> xhat(workspace->normalized_.data(), values, channels);
  // The output buffer is free after Forward; hold a contiguous dL/dy there.
  workspace->output_ = grad_output;
  Eigen::Map<const Matrix> dy(workspace->output_.data(), values, channels);
  if (grad_input != nullptr) grad_input->resize(n, feature_size());
  for (int c = 0; c < channels; ++c) {
    const Scalar sum_dy = dy.col(c).sum();
    const Scalar sum_dy_xhat = dy.col(c).dot(xhat.col(c));
    grad_params(c) += sum_dy_xhat;
    grad_params(channels + c) += sum_dy;
    if (grad_input == nullptr) continue;
    Eigen::Map<Matrix> dx(grad_input->data(), values, channels);
    const Scalar scale = parameters(c) * workspace->inv_std_(c);
    if (!workspace->training_) {
      dx.col(c) = dy.col(c) * scale;
      continue;
    }
    // Ioffe & Szegedy 2015, Sec. 3, simplified: with dxhat = gamma dy,
    // dx = inv_std (dxhat - mean(dxhat) - xhat mean(dxhat xhat)).
    const Scalar inv_values = Scalar{1} / static_cast<Scalar>(values);
    dx.col(c) = scale * (dy.col(c).array() - sum_dy * inv_values -
                         xhat.col(c).array() * (sum_dy_xhat * inv_values))
                            .matrix();
  }
}

template class BasicBatchNorm<double>;
template class BasicBatchNorm<float>;

}  // namespace dpcurator::nn
