#ifndef DPCURATOR_CORE_NN_CONV_TRANSPOSE2D_H_
#define DPCURATOR_CORE_NN_CONV_TRANSPOSE2D_H_

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/nn/conv2d.h"
#include "core/util/public_rng.h"

namespace dpcurator::nn {

// Geometry of a transposed 2-D convolution (PyTorch's ConvTranspose2d).
struct ConvTranspose2dOptions {
  // Shape of each input image; every dimension required (positive).
  ImageShape input;
  // Number of output channels; required (positive).
  int out_channels = 0;
  // Square kernel side k; positive.
  int kernel_size = 0;
  // Stride s (the upsampling factor); positive.
  int stride = 1;
  // Rows and columns p cropped from each side of the full output;
  // non-negative.
  int padding = 0;
  // Extra rows and columns added at the bottom and right, in [0, stride),
  // to pick among the output sizes that a stride-s convolution maps to the
  // same input size.
  int output_padding = 0;
  bool bias = true;
};

// Buffers for one Forward/Backward pair. One per thread.
template <typename Scalar>
class BasicConvTranspose2dWorkspace {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  const Matrix& output() const { return output_; }

 private:
  template <typename>
  friend class BasicConvTranspose2d;
  Matrix input_;    // contiguous copy of the last input, for dL/dW
  Matrix columns_;  // (n * H_in * W_in) x (C_out k k)
  Matrix output_;
};

// The transpose (adjoint) of a Conv2d with the same kernel, stride and
// padding, mapping C_in x H x W to C_out x H_out x W_out with
//   H_out = (H - 1) s - 2 p + k + output_padding:
// each input pixel scatters a k x k kernel, scaled by its value, into the
// output. The learned upsampling ("upconv") of PEARL's image generator
// (pearl.md Sec. 4); Upsample2d + Conv2d is the alternative the released
// code takes. Forward is one GEMM and a col2im; Backward an im2col and two
// GEMMs (conv2d.cc's shared window operations).
// Parameters (caller's flat vector): weights in PyTorch's layout
// weight[c_in][c_out][ky][kx] flattened, i.e. a (C_out k k) x C_in
// column-major matrix, then C_out biases (if any). Layout of batches:
// conv2d.h (ImageShape).
template <typename Scalar>
class BasicConvTranspose2d {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;
  using Workspace = BasicConvTranspose2dWorkspace<Scalar>;

  // Validates `options`: positive shape, channels, kernel and stride;
  // non-negative padding; 0 <= output_padding < stride; a positive output.
  static absl::StatusOr<BasicConvTranspose2d> Create(const ConvTranspose2dOptions& options);

  const ConvTranspose2dOptions& options() const { return options_; }
  const ImageShape& input_shape() const { return options_.input; }
  const ImageShape& output_shape() const { return output_shape_; }
  Eigen::Index num_parameters() const;

  // PyTorch's default: U(-1/sqrt(fan), 1/sqrt(fan)) for weights and biases,
  // where PyTorch takes fan = C_out k k for a transposed convolution.
  void Initialize(PublicRng* rng, Eigen::Ref<Vector> parameters) const;

  // Input n x input size; returns n x output size, a reference into
  // `workspace` valid until its next use.
  const Matrix& Forward(const Eigen::Ref<const Vector>& parameters,
                        const Eigen::Ref<const Matrix>& input, Workspace* workspace) const;

  // As Conv2d::Backward: adds dLoss/dParameters to `grad_params`, sets
  // `grad_input` (if not null).
  void Backward(const Eigen::Ref<const Vector>& parameters,
                const Eigen::Ref<const Matrix>& grad_output, Workspace* workspace,
                Eigen::Ref<Vector> grad_params, Matrix* grad_input = nullptr) const;

 private:
  BasicConvTranspose2d(const ConvTranspose2dOptions& options, const ImageShape& output_shape)
      : options_(options), output_shape_(output_shape) {}

  Eigen::Index patch_size() const {
    return Eigen::Index{options_.out_channels} * options_.kernel_size * options_.kernel_size;
  }
  // The output image seen through the windows of the equivalent Conv2d,
  // whose window grid is the input image.
  internal::WindowGeometry window() const {
    return {output_shape_,    options_.kernel_size, options_.stride,
            options_.padding, options_.input.height, options_.input.width};
  }

  ConvTranspose2dOptions options_;
  ImageShape output_shape_;
};

using ConvTranspose2d = BasicConvTranspose2d<double>;
using ConvTranspose2dWorkspace = BasicConvTranspose2dWorkspace<double>;
using ConvTranspose2dF = BasicConvTranspose2d<float>;
using ConvTranspose2dWorkspaceF = BasicConvTranspose2dWorkspace<float>;

extern template class BasicConvTranspose2d<double>;
extern template class BasicConvTranspose2d<float>;

}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_CONV_TRANSPOSE2D_H_
