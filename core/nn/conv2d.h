#ifndef DPCURATOR_CORE_NN_CONV2D_H_
#define DPCURATOR_CORE_NN_CONV2D_H_

#include <cmath>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/util/public_rng.h"

namespace dpcurator::nn {

// Image batches: the layout shared by the image layers of core/nn (Conv2d,
// Upsample2d, BatchNorm with spatial size > 1, Dropout).
//
// A batch is a matrix with one example per row, as for Mlp (mlp.h): n rows,
// channels * height * width columns, the columns of a row ordered CHW
// (column c * H * W + y * W + x holds channel c, row y, column x of the
// image). Hence a dense layer's output of width 16 * 7 * 7 *is* a 16 x 7 x 7
// image batch (the reshape of PEARL's ConvCondGen, pearl.md Sec. 4, costs
// nothing), and a 784-pixel Fashion-MNIST row is a 1 x 28 x 28 image.
//
// Eigen matrices are column-major, so in memory the batch is an
// (n * H * W) x C column-major matrix whose row index is (y * W + x) * n + i:
// the example index runs fastest. The layers exploit this: the n values of
// one (channel, pixel) are contiguous, so im2col copies runs of n, and a
// GEMM result of shape (n * H_out * W_out) x C_out *is* the output batch
// (no scatter).
struct ImageShape {
  int channels = 0;
  int height = 0;
  int width = 0;

  Eigen::Index pixels() const { return Eigen::Index{height} * width; }
  Eigen::Index size() const { return Eigen::Index{channels} * height * width; }
  friend bool operator==(const ImageShape&, const ImageShape&) = default;
};

// Validates that every dimension of `shape` is positive; `name` names the
// shape in the message ("Conv2d input").
absl::Status ValidateImageShape(const ImageShape& shape, const char* name);

// Output length of a convolution along one axis: (size + 2 padding -
// kernel) / stride + 1, rounded down (the formula of PyTorch's Conv2d, which
// the papers' models use). Assumes a validated geometry.
inline int ConvOutputSize(int size, int kernel, int stride, int padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

// Geometry of a 2-D convolution (cross-correlation, as in PyTorch).
struct Conv2dOptions {
  // Shape of each input image; every dimension required (positive).
  ImageShape input;
  // Number of output channels (feature maps); required (positive).
  int out_channels = 0;
  // Square kernel side k; required (positive), at most the padded input.
  int kernel_size = 0;
  // Step s between kernel positions; positive.
  int stride = 1;
  // Zero padding p on every side; non-negative.
  int padding = 0;
  // Whether each output channel has a learned bias.
  bool bias = true;
};

namespace internal {

// The sliding-window geometry shared by Conv2d and ConvTranspose2d: an image
// of `image` shape seen through k x k windows with stride and padding, giving
// `grid_height` x `grid_width` window positions.
struct WindowGeometry {
  ImageShape image;
  int kernel = 0;
  int stride = 1;
  int padding = 0;
  int grid_height = 0;
  int grid_width = 0;
};

// im2col: `columns` ((n * grid pixels) x (C k k), row (gy * grid_width + gx)
// * n + i, column (c * k + ky) * k + kx) gets the window values of the n x
// (C H W) batch `images` (zeros in the padding). `columns` is resized.
template <typename Scalar>
void Im2Col(const WindowGeometry& g,
            const Eigen::Ref<const Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>>& images,
            Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>* columns);

// col2im, the transpose of Im2Col: `images` (n x C H W, resized and zeroed)
// receives the sum of every column entry at the pixel it would be read
// from; entries in the padding are dropped.
template <typename Scalar>
void Col2Im(const WindowGeometry& g, Eigen::Index n,
            const Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>& columns,
            Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>* images);

// PyTorch's default initialisation of a convolution's weights and biases:
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = the patch size.
template <typename Scalar>
void InitializeUniformFanIn(PublicRng* rng, Eigen::Index fan_in,
                            Eigen::Ref<Eigen::Matrix<Scalar, Eigen::Dynamic, 1>> parameters) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  for (Eigen::Index i = 0; i < parameters.size(); ++i) {
    parameters(i) = static_cast<Scalar>(bound * (2.0 * rng->Uniform() - 1.0));
  }
}

}  // namespace internal

// Buffers for one Forward/Backward pair of a BasicConv2d<Scalar>. Reusing a
// workspace for batches of the same size performs no allocation. One
// workspace per thread.
template <typename Scalar>
class BasicConv2dWorkspace {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;

  // Output of the last Forward (n x output_shape().size()).
  const Matrix& output() const { return output_; }

 private:
  template <typename>
  friend class BasicConv2d;

  // im2col of the last input: (n * H_out * W_out) x (C_in * k * k), row
  // (oy * W_out + ox) * n + i, column (c * k + ky) * k + kx.
  Matrix columns_;
  Matrix output_;
  // dLoss/dcolumns, folded back by col2im into the input gradient.
  Matrix grad_columns_;
};

// A 2-D convolution over image batches (layout above): for every example,
//   out[co, oy, ox] = b[co] + sum_{c, ky, kx} W[co, c, ky, kx]
//                             * in_padded[c, oy * s + ky, ox * s + kx].
// The building block of PEARL's ConvCondGen (pearl.md Sec. 4: conv 5x5 after
// each upsampling) and of the papers' evaluation CNN (issue 14 item 4:
// Conv 32 k3 s2 p1, Conv 64 k3 s2 p1).
//
// Computed as im2col followed by one GEMM (nn::Gemm: OpenBLAS sgemm for
// float) over the whole batch; the backward pass is two more GEMMs and a
// col2im. Like the layers of an Mlp, the layer holds its geometry only; its
// parameters live in a flat vector owned by the caller (a generator or CNN
// concatenates the vectors of all its layers, so Adam, model files and
// gradient checks see one vector). Parameter layout: the weights W as a
// (C_in * k * k) x C_out column-major matrix, i.e. PyTorch's
// weight[co][c][ky][kx] flattened in that order, then C_out biases (if any).
//
// BasicConv2d<double> (Conv2d) serves gradient checks to 1e-6 and the
// reference of float results; BasicConv2d<float> (Conv2dF) the trainers.
template <typename Scalar>
class BasicConv2d {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;
  using Workspace = BasicConv2dWorkspace<Scalar>;

  // Validates `options`: positive shape, channels, kernel and stride;
  // non-negative padding; kernel no larger than the padded input.
  static absl::StatusOr<BasicConv2d> Create(const Conv2dOptions& options);

  const Conv2dOptions& options() const { return options_; }
  const ImageShape& input_shape() const { return options_.input; }
  const ImageShape& output_shape() const { return output_shape_; }
  // C_in * k * k * C_out weights plus C_out biases if bias.
  Eigen::Index num_parameters() const;

  // Writes initial parameters into `parameters` (size num_parameters()):
  // PyTorch's default for Conv2d (Kaiming-uniform with a = sqrt(5), i.e.
  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases, fan_in =
  // C_in k k), so a port of the papers' models starts where theirs did.
  void Initialize(PublicRng* rng, Eigen::Ref<Vector> parameters) const;

  // Runs the convolution on `input` (n x input_shape().size()) with
  // `parameters` (num_parameters()) and returns the output batch
  // (n x output_shape().size()), a reference into `workspace` valid until
  // its next use. Keeps the im2col of `input` for Backward.
  const Matrix& Forward(const Eigen::Ref<const Vector>& parameters,
                        const Eigen::Ref<const Matrix>& input, Workspace* workspace) const;

  // Backpropagation for the last Forward on `workspace` (with the same
  // `parameters`). `grad_output` is dLoss/dOutput (n x output size). Adds
  // dLoss/dParameters to `grad_params` (the caller zeroes it). If
  // `grad_input` is not null it is set to dLoss/dInput (n x input size).
  void Backward(const Eigen::Ref<const Vector>& parameters,
                const Eigen::Ref<const Matrix>& grad_output, Workspace* workspace,
                Eigen::Ref<Vector> grad_params, Matrix* grad_input = nullptr) const;

 private:
  BasicConv2d(const Conv2dOptions& options, const ImageShape& output_shape)
      : options_(options), output_shape_(output_shape) {}

  Eigen::Index patch_size() const {
    return Eigen::Index{options_.input.channels} * options_.kernel_size * options_.kernel_size;
  }
  internal::WindowGeometry window() const {
    return {options_.input,          options_.kernel_size,  options_.stride,
            options_.padding,        output_shape_.height, output_shape_.width};
  }

  Conv2dOptions options_;
  ImageShape output_shape_;
};

using Conv2d = BasicConv2d<double>;
using Conv2dWorkspace = BasicConv2dWorkspace<double>;
using Conv2dF = BasicConv2d<float>;
using Conv2dWorkspaceF = BasicConv2dWorkspace<float>;

extern template class BasicConv2d<double>;
extern template class BasicConv2d<float>;

}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_CONV2D_H_
