#include "core/nn/conv2d.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/nn/gemm.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::nn {

absl::Status ValidateImageShape(const ImageShape& shape, const char* name) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(shape.channels, absl::StrCat(name, " channels")));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(shape.height, absl::StrCat(name, " height")));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(shape.width, absl::StrCat(name, " width")));
  return absl::OkStatus();
}

namespace internal {

template <typename Scalar>
void Im2Col(const WindowGeometry& g,
            const Eigen::Ref<const Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>>& images,
            Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>* columns) {
  const Eigen::Index n = images.rows();
  const int k = g.kernel;
  const int in_h = g.image.height;
  const int in_w = g.image.width;
  columns->resize(n * g.grid_height * g.grid_width, g.image.channels * Eigen::Index{k} * k);
  // Column (c, ky, kx), row block (gy, gx): the n values of pixel
  // (c, gy s - p + ky, gx s - p + kx), a contiguous run (conv2d.h layout).
  for (int c = 0; c < g.image.channels; ++c) {
    for (int ky = 0; ky < k; ++ky) {
      for (int kx = 0; kx < k; ++kx) {
        Scalar* dst = columns->col((Eigen::Index{c} * k + ky) * k + kx).data();
        for (int gy = 0; gy < g.grid_height; ++gy) {
          const int iy = gy * g.stride - g.padding + ky;
          Scalar* row_dst = dst + Eigen::Index{gy} * g.grid_width * n;
          if (iy < 0 || iy >= in_h) {
            std::fill(row_dst, row_dst + g.grid_width * n, Scalar{0});
            continue;
          }
          for (int gx = 0; gx < g.grid_width; ++gx) {
            const int ix = gx * g.stride - g.padding + kx;
            Scalar* run = row_dst + gx * n;
            if (ix < 0 || ix >= in_w) {
              std::fill(run, run + n, Scalar{0});
            } else {
              const Scalar* src =
                  images.col(Eigen::Index{c} * in_h * in_w + Eigen::Index{iy} * in_w + ix).data();
              std::copy(src, src + n, run);
            }
          }
        }
      }
    }
  }
}

template <typename Scalar>
void Col2Im(const WindowGeometry& g, Eigen::Index n,
            const Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>& columns,
            Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>* images) {
  const int k = g.kernel;
  const int in_h = g.image.height;
  const int in_w = g.image.width;
  eigen_assert(columns.rows() == n * g.grid_height * g.grid_width);
  images->setZero(n, g.image.size());
  for (int c = 0; c < g.image.channels; ++c) {
    for (int ky = 0; ky < k; ++ky) {
      for (int kx = 0; kx < k; ++kx) {
        const Scalar* src = columns.col((Eigen::Index{c} * k + ky) * k + kx).data();
        for (int gy = 0; gy < g.grid_height; ++gy) {
          const int iy = gy * g.stride - g.padding + ky;
          if (iy < 0 || iy >= in_h) continue;
          for (int gx = 0; gx < g.grid_width; ++gx) {
            const int ix = gx * g.stride - g.padding + kx;
            if (ix < 0 || ix >= in_w) continue;
            const Scalar* run = src + (Eigen::Index{gy} * g.grid_width + gx) * n;
            Scalar* dst =
                images->col(Eigen::Index{c} * in_h * in_w + Eigen::Index{iy} * in_w + ix).data();
            for (Eigen::Index i = 0; i < n; ++i) dst[i] += run[i];
          }
        }
      }
    }
  }
}

#define DPC_INSTANTIATE_WINDOW_OPS(Scalar)                                                  \
  template void Im2Col<Scalar>(                                                             \
      const WindowGeometry&,                                                                \
      const Eigen::Ref<const Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>>&,       \
      Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>*);                              \
  template void Col2Im<Scalar>(const WindowGeometry&, Eigen::Index,                         \
                               const Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>&, \
                               Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>*);
DPC_INSTANTIATE_WINDOW_OPS(double)
DPC_INSTANTIATE_WINDOW_OPS(float)
#undef DPC_INSTANTIATE_WINDOW_OPS

}  // namespace internal

template <typename Scalar>
absl::StatusOr<BasicConv2d<Scalar>> BasicConv2d<Scalar>::Create(const Conv2dOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateImageShape(options.input, "Conv2d input"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.out_channels, "Conv2d output channels"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.kernel_size, "Conv2d kernel size"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.stride, "Conv2d stride"));
  if (options.padding < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Conv2d padding must be non-negative, got ", options.padding));
  }
  const int padded_height = options.input.height + 2 * options.padding;
  const int padded_width = options.input.width + 2 * options.padding;
  if (options.kernel_size > padded_height || options.kernel_size > padded_width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Conv2d kernel size ", options.kernel_size, " exceeds the padded input ",
        padded_height, " x ", padded_width));
  }
  const ImageShape output{
      options.out_channels,
      ConvOutputSize(options.input.height, options.kernel_size, options.stride, options.padding),
      ConvOutputSize(options.input.width, options.kernel_size, options.stride, options.padding)};
  return BasicConv2d(options, output);
}

template <typename Scalar>
Eigen::Index BasicConv2d<Scalar>::num_parameters() const {
  return patch_size() * options_.out_channels + (options_.bias ? options_.out_channels : 0);
}

template <typename Scalar>
void BasicConv2d<Scalar>::Initialize(PublicRng* rng, Eigen::Ref<Vector> parameters) const {
  eigen_assert(parameters.size() == num_parameters());
  internal::InitializeUniformFanIn<Scalar>(rng, patch_size(), parameters);
}

template <typename Scalar>
const typename BasicConv2d<Scalar>::Matrix& BasicConv2d<Scalar>::Forward(
    const Eigen::Ref<const Vector>& parameters, const Eigen::Ref<const Matrix>& input,
    Workspace* workspace) const {
  eigen_assert(parameters.size() == num_parameters());
  eigen_assert(input.cols() == input_shape().size());
  const Eigen::Index n = input.rows();
  const Eigen::Index positions = output_shape_.pixels();
  internal::Im2Col<Scalar>(window(), input, &workspace->columns_);
  const Matrix& columns = workspace->columns_;
  // (n * positions) x C_out, which in memory is the n x (C_out * positions)
  // output batch (see ImageShape).
  Matrix& output = workspace->output_;
  output.resize(n, output_shape_.size());
  Eigen::Map<Matrix> product(output.data(), n * positions, options_.out_channels);
  Eigen::Map<const Matrix> weights(parameters.data(), patch_size(), options_.out_channels);
  Gemm(false, columns, false, weights, Scalar{0}, product);
  if (options_.bias) {
    const Scalar* bias = parameters.data() + patch_size() * options_.out_channels;
    for (int co = 0; co < options_.out_channels; ++co) product.col(co).array() += bias[co];
  }
  return output;
}

template <typename Scalar>
void BasicConv2d<Scalar>::Backward(const Eigen::Ref<const Vector>& parameters,
                                   const Eigen::Ref<const Matrix>& grad_output,
                                   Workspace* workspace, Eigen::Ref<Vector> grad_params,
                                   Matrix* grad_input) const {
  eigen_assert(parameters.size() == num_parameters());
  eigen_assert(grad_params.size() == num_parameters());
  eigen_assert(grad_output.cols() == output_shape_.size());
  const Eigen::Index n = grad_output.rows();
  const Eigen::Index positions = output_shape_.pixels();
  const int out_channels = options_.out_channels;
  eigen_assert(workspace->columns_.rows() == n * positions);

  // The reshaped view below needs the batch contiguous; a strided block
  // (rare) is copied into the output buffer, which Backward may overwrite.
  const Scalar* grad_data = grad_output.data();
  if (grad_output.outerStride() != n) {
    workspace->output_ = grad_output;
    grad_data = workspace->output_.data();
  }
  Eigen::Map<const Matrix> grad_product(grad_data, n * positions, out_channels);
  Eigen::Map<const Matrix> weights(parameters.data(), patch_size(), out_channels);

  // dL/dW = columns^T dL/dproduct; dL/db = column sums of dL/dproduct.
  Eigen::Map<Matrix> grad_weights(grad_params.data(), patch_size(), out_channels);
  Gemm(true, workspace->columns_, false, grad_product, Scalar{1}, grad_weights);
  if (options_.bias) {
    Scalar* grad_bias = grad_params.data() + patch_size() * out_channels;
    for (int co = 0; co < out_channels; ++co) grad_bias[co] += grad_product.col(co).sum();
  }
  if (grad_input == nullptr) return;

  // dL/dcolumns = dL/dproduct W^T, then col2im: every column entry adds back
  // into the input pixel it was copied from (padding entries are dropped).
  Matrix& grad_columns = workspace->grad_columns_;
  grad_columns.resize(n * positions, patch_size());
  Gemm(false, grad_product, true, weights, Scalar{0}, grad_columns);
  internal::Col2Im<Scalar>(window(), n, grad_columns, grad_input);
}

template class BasicConv2d<double>;
template class BasicConv2d<float>;

}  // namespace dpcurator::nn
