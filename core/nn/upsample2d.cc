#include "core/nn/upsample2d.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::nn {
namespace {

// Keeps every column index of an output batch inside int (Eigen::Index is
// wider, but the layers index pixels with int).
constexpr int64_t kMaxOutputSize = int64_t{1} << 31;

}  // namespace

template <typename Scalar>
BasicUpsample2d<Scalar>::BasicUpsample2d(const Upsample2dOptions& options,
                                         const ImageShape& output_shape)
    : options_(options),
      output_shape_(output_shape),
      row_taps_(AxisTaps(options.input.height, options.factor, options.mode)),
      col_taps_(AxisTaps(options.input.width, options.factor, options.mode)) {}

template <typename Scalar>
absl::StatusOr<BasicUpsample2d<Scalar>> BasicUpsample2d<Scalar>::Create(
    const Upsample2dOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateImageShape(options.input, "Upsample2d input"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.factor, "Upsample2d factor"));
  const int64_t size = int64_t{options.input.channels} * options.input.height *
                       options.input.width * options.factor * options.factor;
  if (size >= kMaxOutputSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("Upsample2d output has ", size, " values per example; at most ",
                     kMaxOutputSize - 1, " are supported"));
  }
  const ImageShape output{options.input.channels, options.input.height * options.factor,
                          options.input.width * options.factor};
  return BasicUpsample2d(options, output);
}

template <typename Scalar>
std::vector<typename BasicUpsample2d<Scalar>::Taps> BasicUpsample2d<Scalar>::AxisTaps(
    int in_size, int factor, UpsampleMode mode) {
  std::vector<Taps> taps(static_cast<size_t>(in_size) * factor);
  for (int o = 0; o < in_size * factor; ++o) {
    Taps& t = taps[o];
    if (mode == UpsampleMode::kNearest) {
      t.index = {o / factor, o / factor};
      t.weight = {Scalar{1}, Scalar{0}};
      continue;
    }
    // PyTorch's area_pixel_compute_source_index, align_corners=False:
    // src = (o + 0.5) / factor - 0.5, clamped at 0; the upper neighbour is
    // clamped at the last pixel.
    const double src = std::max(0.0, (o + 0.5) / factor - 0.5);
    const int lo = std::min(static_cast<int>(std::floor(src)), in_size - 1);
    const int hi = std::min(lo + 1, in_size - 1);
    const double lambda = src - lo;
    t.index = {lo, hi};
    t.weight = {static_cast<Scalar>(1.0 - lambda), static_cast<Scalar>(lambda)};
  }
  return taps;
}

template <typename Scalar>
const typename BasicUpsample2d<Scalar>::Matrix& BasicUpsample2d<Scalar>::Forward(
    const Eigen::Ref<const Matrix>& input, Workspace* workspace) const {
  eigen_assert(input.cols() == input_shape().size());
  const Eigen::Index n = input.rows();
  const int in_h = options_.input.height;
  const int in_w = options_.input.width;
  Matrix& output = workspace->output_;
  output.resize(n, output_shape_.size());
  for (int c = 0; c < output_shape_.channels; ++c) {
    const Eigen::Index in_base = Eigen::Index{c} * in_h * in_w;
    Eigen::Index out_col = Eigen::Index{c} * output_shape_.pixels();
    for (const Taps& ty : row_taps_) {
      for (const Taps& tx : col_taps_) {
        auto dst = output.col(out_col++);
        if (options_.mode == UpsampleMode::kNearest) {
          dst = input.col(in_base + Eigen::Index{ty.index[0]} * in_w + tx.index[0]);
          continue;
        }
        dst.setZero();
        for (int a = 0; a < 2; ++a) {
          for (int b = 0; b < 2; ++b) {
            const Scalar w = ty.weight[a] * tx.weight[b];
            if (w == Scalar{0}) continue;
            dst += w * input.col(in_base + Eigen::Index{ty.index[a]} * in_w + tx.index[b]);
          }
        }
      }
    }
  }
  return output;
}

template <typename Scalar>
void BasicUpsample2d<Scalar>::Backward(const Eigen::Ref<const Matrix>& grad_output,
                                       Matrix* grad_input) const {
  eigen_assert(grad_output.cols() == output_shape_.size());
  const Eigen::Index n = grad_output.rows();
  const int in_h = options_.input.height;
  const int in_w = options_.input.width;
  grad_input->setZero(n, input_shape().size());
  for (int c = 0; c < output_shape_.channels; ++c) {
    const Eigen::Index in_base = Eigen::Index{c} * in_h * in_w;
    Eigen::Index out_col = Eigen::Index{c} * output_shape_.pixels();
    for (const Taps& ty : row_taps_) {
      for (const Taps& tx : col_taps_) {
        const auto src = grad_output.col(out_col++);
        for (int a = 0; a < 2; ++a) {
          for (int b = 0; b < 2; ++b) {
            const Scalar w = ty.weight[a] * tx.weight[b];
            if (w == Scalar{0}) continue;
            grad_input->col(in_base + Eigen::Index{ty.index[a]} * in_w + tx.index[b]) += w * src;
          }
        }
      }
    }
  }
}

template class BasicUpsample2d<double>;
template class BasicUpsample2d<float>;

}  // namespace dpcurator::nn
