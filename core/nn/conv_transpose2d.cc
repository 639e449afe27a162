#include "core/nn/conv_transpose2d.h"

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/nn/gemm.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::nn {
namespace {

// Keeps output sizes inside int, as the window operations index with int.
constexpr int64_t kMaxOutputSide = int64_t{1} << 20;

}  // namespace

template <typename Scalar>
absl::StatusOr<BasicConvTranspose2d<Scalar>> BasicConvTranspose2d<Scalar>::Create(
    const ConvTranspose2dOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateImageShape(options.input, "ConvTranspose2d input"));
  DPC_RETURN_IF_ERROR(
      ValidatePositiveInt(options.out_channels, "ConvTranspose2d output channels"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.kernel_size, "ConvTranspose2d kernel size"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.stride, "ConvTranspose2d stride"));
  if (options.padding < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConvTranspose2d padding must be non-negative, got ", options.padding));
  }
  if (options.output_padding < 0 || options.output_padding >= options.stride) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConvTranspose2d output padding must be in [0, stride = ", options.stride,
                     "), got ", options.output_padding));
  }
  const auto side = [&](int size) {
    return (int64_t{size} - 1) * options.stride - 2 * int64_t{options.padding} +
           options.kernel_size + options.output_padding;
  };
  const int64_t height = side(options.input.height);
  const int64_t width = side(options.input.width);
  if (height <= 0 || width <= 0 || height > kMaxOutputSide || width > kMaxOutputSide) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ConvTranspose2d output would be ", height, " x ", width,
        "; each side must be in [1, ", kMaxOutputSide, "] (padding too large?)"));
  }
  return BasicConvTranspose2d(
      options, ImageShape{options.out_channels, static_cast<int>(height), static_cast<int>(width)});
}

template <typename Scalar>
Eigen::Index BasicConvTranspose2d<Scalar>::num_parameters() const {
  return patch_size() * options_.input.channels + (options_.bias ? options_.out_channels : 0);
}

template <typename Scalar>
void BasicConvTranspose2d<Scalar>::Initialize(PublicRng* rng,
                                              Eigen::Ref<Vector> parameters) const {
  eigen_assert(parameters.size() == num_parameters());
  internal::InitializeUniformFanIn<Scalar>(rng, patch_size(), parameters);
}

template <typename Scalar>
const typename BasicConvTranspose2d<Scalar>::Matrix& BasicConvTranspose2d<Scalar>::Forward(
    const Eigen::Ref<const Vector>& parameters, const Eigen::Ref<const Matrix>& input,
    Workspace* workspace) const {
  eigen_assert(parameters.size() == num_parameters());
  eigen_assert(input.cols() == input_shape().size());
  const Eigen::Index n = input.rows();
  const int in_channels = options_.input.channels;
  // In memory the batch is (n * H W) x C_in (conv2d.h); kept for Backward.
  workspace->input_ = input;
  Eigen::Map<const Matrix> pixels(workspace->input_.data(), n * options_.input.pixels(),
                                  in_channels);
  Eigen::Map<const Matrix> weights(parameters.data(), patch_size(), in_channels);
  // Each input pixel's kernel contributions, then summed into the output.
  workspace->columns_.resize(n * options_.input.pixels(), patch_size());
  Gemm(false, pixels, true, weights, Scalar{0}, workspace->columns_);
  internal::Col2Im<Scalar>(window(), n, workspace->columns_, &workspace->output_);
  if (options_.bias) {
    const Scalar* bias = parameters.data() + patch_size() * in_channels;
    Eigen::Map<Matrix> out(workspace->output_.data(), n * output_shape_.pixels(),
                           options_.out_channels);
    for (int co = 0; co < options_.out_channels; ++co) out.col(co).array() += bias[co];
  }
  return workspace->output_;
}

template <typename Scalar>
void BasicConvTranspose2d<Scalar>::Backward(const Eigen::Ref<const Vector>& parameters,
                                            const Eigen::Ref<const Matrix>& grad_output,
                                            Workspace* workspace, Eigen::Ref<Vector> grad_params,
                                            Matrix* grad_input) const {
  eigen_assert(parameters.size() == num_parameters());
  eigen_assert(grad_params.size() == num_parameters());
  eigen_assert(grad_output.cols() == output_shape_.size());
  const Eigen::Index n = grad_output.rows();
  eigen_assert(workspace->input_.rows() == n);
  const int in_channels = options_.input.channels;
  // dL/dcolumns: the windows of dL/dY that each input pixel wrote to.
  internal::Im2Col<Scalar>(window(), grad_output, &workspace->columns_);
  Eigen::Map<const Matrix> pixels(workspace->input_.data(), n * options_.input.pixels(),
                                  in_channels);
  Eigen::Map<const Matrix> weights(parameters.data(), patch_size(), in_channels);
  Eigen::Map<Matrix> grad_weights(grad_params.data(), patch_size(), in_channels);
  Gemm(true, workspace->columns_, false, pixels, Scalar{1}, grad_weights);
  if (options_.bias) {
    Scalar* grad_bias = grad_params.data() + patch_size() * in_channels;
    const Eigen::Index positions = output_shape_.pixels();
    for (int co = 0; co < options_.out_channels; ++co) {
      grad_bias[co] += grad_output.middleCols(co * positions, positions).sum();
    }
  }
  if (grad_input == nullptr) return;
  grad_input->resize(n, input_shape().size());
  Eigen::Map<Matrix> grad_pixels(grad_input->data(), n * options_.input.pixels(), in_channels);
  Gemm(false, workspace->columns_, false, weights, Scalar{0}, grad_pixels);
}

template class BasicConvTranspose2d<double>;
template class BasicConvTranspose2d<float>;

}  // namespace dpcurator::nn
