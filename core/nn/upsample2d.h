#ifndef DPCURATOR_CORE_NN_UPSAMPLE2D_H_
#define DPCURATOR_CORE_NN_UPSAMPLE2D_H_

#include <array>
#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/nn/conv2d.h"

namespace dpcurator::nn {

enum class UpsampleMode {
  // Each output pixel copies the input pixel it falls in (PyTorch's
  // "nearest"): the "upsamp" of PEARL's paper (pearl.md Sec. 4).
  kNearest,
  // Bilinear interpolation with half-pixel centres and edge clamping
  // (PyTorch's "bilinear", align_corners=False): what PEARL's released
  // ConvCondGen uses (pearl.md Sec. 4 [code]).
  kBilinear,
};

struct Upsample2dOptions {
  // Shape of each input image; every dimension required (positive).
  ImageShape input;
  // Integer scale factor on height and width; positive.
  int factor = 2;
  UpsampleMode mode = UpsampleMode::kNearest;
};

// Buffer for Upsample2d: the output of the last Forward. One per thread.
template <typename Scalar>
class BasicUpsample2dWorkspace {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  const Matrix& output() const { return output_; }

 private:
  template <typename>
  friend class BasicUpsample2d;
  Matrix output_;
};

// Spatial upsampling of image batches (layout: conv2d.h, ImageShape) by an
// integer factor, with no parameters. PEARL's image generator (pearl.md
// Sec. 4) is "fc -> bn -> fc -> bn -> upsample -> relu -> conv -> sigmoid";
// upsampling followed by a convolution stands in for a transposed
// convolution without its checkerboard artefacts. The map is linear, so
// Backward is its transpose and needs nothing from Forward.
template <typename Scalar>
class BasicUpsample2d {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  using Workspace = BasicUpsample2dWorkspace<Scalar>;

  // Validates `options` (positive shape and factor; the output must stay
  // under 2^31 values per example).
  static absl::StatusOr<BasicUpsample2d> Create(const Upsample2dOptions& options);

  const Upsample2dOptions& options() const { return options_; }
  const ImageShape& input_shape() const { return options_.input; }
  // Same channels, height and width times the factor.
  const ImageShape& output_shape() const { return output_shape_; }

  // Upsamples `input` (n x input size); returns the n x output size batch, a
  // reference into `workspace` valid until its next use.
  const Matrix& Forward(const Eigen::Ref<const Matrix>& input, Workspace* workspace) const;

  // Sets `grad_input` (n x input size) to dLoss/dInput given `grad_output`
  // (n x output size): each input pixel collects the weighted gradients of
  // the output pixels it contributed to.
  void Backward(const Eigen::Ref<const Matrix>& grad_output, Matrix* grad_input) const;

 private:
  // Contribution of input coordinates to one output coordinate along an
  // axis: out = weight[0] in[index[0]] + weight[1] in[index[1]].
  struct Taps {
    std::array<int, 2> index;
    std::array<Scalar, 2> weight;
  };

  BasicUpsample2d(const Upsample2dOptions& options, const ImageShape& output_shape);
  static std::vector<Taps> AxisTaps(int in_size, int factor, UpsampleMode mode);

  Upsample2dOptions options_;
  ImageShape output_shape_;
  std::vector<Taps> row_taps_;
  std::vector<Taps> col_taps_;
};

using Upsample2d = BasicUpsample2d<double>;
using Upsample2dWorkspace = BasicUpsample2dWorkspace<double>;
using Upsample2dF = BasicUpsample2d<float>;
using Upsample2dWorkspaceF = BasicUpsample2dWorkspace<float>;

extern template class BasicUpsample2d<double>;
extern template class BasicUpsample2d<float>;

}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_UPSAMPLE2D_H_
