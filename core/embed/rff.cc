#include "core/embed/rff.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/embed/frequency_bounds.h"
#include "core/util/public_rng.h"
#include "core/util/sincos.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::embed {

namespace {

// DP-MERF's MNIST code: omega ~ N(0, I / 127) on the raw 784 pixels in
// [0, 1], i.e. l^2 = 127 (dp-merf.md, "MNIST DP-MERF"); PEARL's code uses
// the same precision on Fashion-MNIST (pearl.md 1.2 B: sig = 127, frequency
// std 1/sqrt(127) = 0.089). A declared constant, never learned from pixels.
constexpr double kImageLengthScaleSquared = 127.0;

}  // namespace

double DefaultLengthScale(const data::FeatureLayout& layout) {
  if (layout.image.has_value()) return std::sqrt(kImageLengthScaleSquared);
  // E||u - u'||^2 = d/6 for u, u' uniform on [0,1]^d (each coordinate
  // contributes Var(u - u') = 2/12).
  return layout.numeric_dim > 0 ? std::sqrt(layout.numeric_dim / 6.0) : 1.0;
}

double DefaultNumericWeight(const data::FeatureLayout& layout) {
  const int columns = layout.numeric_dim + layout.num_categorical_columns();
  return columns > 0 ? static_cast<double>(layout.numeric_dim) / columns : 1.0;
}

absl::StatusOr<RandomFourierFeatureMap> RandomFourierFeatureMap::Create(
    const data::FeatureLayout& layout, const RffOptions& options) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.num_frequencies, "Number of frequencies"));
  if (options.num_frequencies > 1 << 20) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Number of frequencies must be at most 1048576, got ", options.num_frequencies));
  }
  RandomFourierFeatureMap map;
  map.numeric_dim_ = layout.numeric_dim;
  map.categorical_dim_ = layout.categorical_dim;
  map.num_categorical_columns_ = layout.num_categorical_columns();
  map.num_frequencies_ = options.num_frequencies;
  // Only the documented sentinels select the defaults; NaN reaches the
  // validation below and is refused.
  map.length_scale_ =
      options.length_scale <= 0 ? DefaultLengthScale(layout) : options.length_scale;
  DPC_RETURN_IF_ERROR(ValidateLengthScale(map.length_scale_, "Length-scale"));
  double weight =
      options.numeric_weight < 0 ? DefaultNumericWeight(layout) : options.numeric_weight;
  DPC_RETURN_IF_ERROR(ValidateInUnitInterval(weight, "Numeric weight"));
  // A block that does not exist gets no share of the norm.
  if (layout.numeric_dim == 0) weight = 0.0;
  if (layout.num_categorical_columns() == 0) weight = 1.0;
  map.numeric_weight_ = weight;
  const double total_features = 2.0 * map.num_frequencies_;
  map.numeric_scale_ = kFeatureNormShrink * std::sqrt(weight) * std::sqrt(2.0 / total_features);
  map.categorical_scale_ =
      map.num_categorical_columns_ > 0
          ? kFeatureNormShrink * std::sqrt(1.0 - weight) /
                std::sqrt(static_cast<double>(map.num_categorical_columns_))
          : 0.0;
  // W_jl ~ N(0, 1/l^2) (dp-merf.md 1.1: omega ~ N(0, l^-2 I)).
  map.frequencies_.resize(map.num_frequencies_, map.numeric_dim_);
  PublicRng rng(options.seed);
  rng.FillNormal(map.frequencies_);
  map.frequencies_ /= map.length_scale_;
  return map;
}

void RandomFourierFeatureMap::Features(const Eigen::MatrixXd& encoded,
                                       Eigen::MatrixXd* features) const {
  const Eigen::Index n = encoded.rows();
  features->resize(n, output_dim());
  const int f = num_frequencies_;
  if (numeric_dim_ > 0) {
    // Column-major: the cos block is the first n f entries of features, the
    // sin block the next n f. The phases are written where the sines go and
    // replaced in place by one vectorised sincos pass (no buffer per block).
    auto sin_block = features->middleCols(f, f);
    sin_block.noalias() = encoded.leftCols(numeric_dim_) * frequencies_.transpose();
    SinCos(sin_block.data(), n * f, numeric_scale_, sin_block.data(), features->data());
  } else {
    features->leftCols(2 * f).setZero();
  }
  if (categorical_dim_ > 0) {
    features->rightCols(categorical_dim_) =
        categorical_scale_ * encoded.middleCols(numeric_dim_, categorical_dim_);
  }
}

void RandomFourierFeatureMap::Backward(const Eigen::MatrixXd& encoded,
                                       const Eigen::MatrixXd& grad_features,
                                       Eigen::MatrixXd* grad_encoded) const {
  Eigen::MatrixXd features;
  Features(encoded, &features);
  BackwardFromFeatures(features, grad_features, grad_encoded);
}

void RandomFourierFeatureMap::BackwardFromFeatures(const Eigen::MatrixXd& features,
                                                   const Eigen::MatrixXd& grad_features,
                                                   Eigen::MatrixXd* grad_encoded) const {
  const Eigen::Index n = features.rows();
  grad_encoded->resize(n, input_dim());
  const int f = num_frequencies_;
  if (numeric_dim_ > 0) {
    // d/dA of c [cos A, sin A] is c (G_sin o cos A - G_cos o sin A)
    // (dp-merf.md 1.5, "analytic gradient"), and c cos A, c sin A are the
    // features' numeric blocks themselves; then dA/du = W.
    Eigen::MatrixXd grad_phases =
        (grad_features.middleCols(f, f).array() * features.leftCols(f).array() -
         grad_features.leftCols(f).array() * features.middleCols(f, f).array())
            .matrix();
    grad_encoded->leftCols(numeric_dim_).noalias() = grad_phases * frequencies_;
  }
  if (categorical_dim_ > 0) {
    grad_encoded->rightCols(categorical_dim_) =
        categorical_scale_ * grad_features.rightCols(categorical_dim_);
  }
}

}  // namespace dpcurator::embed
