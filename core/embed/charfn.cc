#include "core/embed/charfn.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/embed/frequency_bounds.h"
#include "core/embed/rff.h"
#include "core/util/public_rng.h"
#include "core/util/sincos.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::embed {

double DefaultCharfnLengthScale(const data::FeatureLayout& layout) {
  // Frequencies are t ~ N(0, I / l^2) (Create below), so PEARL's code's
  // w = randn / sqrt(sig) with sig = 127 on Fashion-MNIST (pearl.md 1.2 B,
  // std 0.089) is l = sqrt(127): DP-MERF's image default (rff.cc).
  if (layout.image.has_value()) return DefaultLengthScale(layout);
  // E||x - x'||^2 = sum over coordinates/blocks of the expected squared
  // difference: 2 Var(U[0,1]) = 1/6 per numeric; 2 P(levels differ) =
  // 2 (1 - 1/L) per one-hot block of L uniform independent levels.
  double squared = layout.numeric_dim / 6.0;
  for (const auto& slot : layout.categorical) {
    if (slot.levels > 0) squared += 2.0 * (1.0 - 1.0 / slot.levels);
  }
  return squared > 0 ? std::sqrt(squared) : 1.0;
}

absl::StatusOr<CharacteristicFunctionMap> CharacteristicFunctionMap::Create(
    const data::FeatureLayout& layout, const CharfnOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateLengthScale(options.length_scale, "Length-scale"));
  DPC_ASSIGN_OR_RETURN(CharacteristicFunctionMap map, CreateUnscaled(layout, options));
  DPC_RETURN_IF_ERROR(map.SetLengthScale(options.length_scale, options.numeric_length_scale));
  return map;
}

absl::StatusOr<CharacteristicFunctionMap> CharacteristicFunctionMap::CreateUnscaled(
    const data::FeatureLayout& layout, const CharfnOptions& options) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.num_frequencies, "Number of frequencies"));
  if (options.num_frequencies > 1 << 20) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Number of frequencies must be at most 1048576, got ", options.num_frequencies));
  }
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(layout.total_dim(), "Encoded dimension"));
  CharacteristicFunctionMap map;
  map.input_dim_ = layout.total_dim();
  map.numeric_dim_ = layout.numeric_dim;
  map.num_frequencies_ = options.num_frequencies;
  // Unit norm (pearl.md 1.2 D [code]: [cos, sin]/sqrt(k)).
  map.scale_ = kFeatureNormShrink / std::sqrt(static_cast<double>(map.num_frequencies_));
  // The standard normal draws; SetLengthScale divides by l.
  map.frequencies_.resize(map.num_frequencies_, map.input_dim_);
  PublicRng rng(options.seed);
  rng.FillNormal(map.frequencies_);
  return map;
}

absl::Status CharacteristicFunctionMap::SetLengthScale(double length_scale,
                                                       double numeric_length_scale) {
  if (scaled_) return absl::FailedPreconditionError("the frequencies are already scaled");
  DPC_RETURN_IF_ERROR(ValidateLengthScale(length_scale, "Length-scale"));
  const bool numeric_own = numeric_length_scale > 0 && numeric_dim_ > 0;
  if (numeric_own) {
    DPC_RETURN_IF_ERROR(ValidateLengthScale(numeric_length_scale, "Numeric length-scale"));
  }
  length_scale_ = length_scale;
  // t_il ~ N(0, 1/l^2): std(t) = 1/D~ (pearl.md 1.2 B, Alg. 1 line 3).
  frequencies_ /= length_scale_;
  // Optional separate length-scale for the numeric block (an ARD product
  // kernel: the same Bochner sampling with per-dimension scales). The
  // features keep norm 1 whatever the frequencies, so no sensitivity moves.
  if (numeric_own) {
    frequencies_.leftCols(numeric_dim_) *= length_scale_ / numeric_length_scale;
    numeric_length_scale_ = numeric_length_scale;
  }
  scaled_ = true;
  return absl::OkStatus();
}

void CharacteristicFunctionMap::Features(const Eigen::MatrixXd& encoded,
                                         Eigen::MatrixXd* features) const {
  const Eigen::Index n = encoded.rows();
  const int k = num_frequencies_;
  // Phases t_i . x_j (n x k); the empirical CF's summands e^{i t.x}
  // (pearl.md 1.1) stored as real and imaginary parts.
  // Column-major: the cos block is the first n k entries, the sin block the
  // next n k. The phases are written where the sines go and replaced in
  // place by one vectorised sincos pass (the features' cost is mostly here;
  // no buffer per block).
  features->resize(n, 2 * k);
  auto sin_block = features->rightCols(k);
  sin_block.noalias() = encoded * frequencies_.transpose();
  SinCos(sin_block.data(), n * k, scale_, sin_block.data(), features->data());
}

void CharacteristicFunctionMap::Backward(const Eigen::MatrixXd& encoded,
                                         const Eigen::MatrixXd& grad_features,
                                         Eigen::MatrixXd* grad_encoded) const {
  Eigen::MatrixXd features;
  Features(encoded, &features);
  BackwardFromFeatures(features, grad_features, grad_encoded);
}

void CharacteristicFunctionMap::BackwardFromFeatures(const Eigen::MatrixXd& features,
                                                     const Eigen::MatrixXd& grad_features,
                                                     Eigen::MatrixXd* grad_encoded) const {
  const int k = num_frequencies_;
  // h = c [cos A; sin A] with A = X T^T, c = 1/sqrt(k):
  //   dL/dA = G_sin o (c cos A) - G_cos o (c sin A) = G_sin o h_cos - G_cos o h_sin,
  //   dL/dX = (dL/dA) T.
  // With the PEARL loss this is pearl.md 1.2 G,
  //   dL/dY = (2/B) (S diag(alpha o a) - C diag(alpha o b)) T.
  Eigen::MatrixXd grad_phases =
      (grad_features.rightCols(k).array() * features.leftCols(k).array() -
       grad_features.leftCols(k).array() * features.rightCols(k).array())
          .matrix();
  grad_encoded->resize(features.rows(), input_dim_);
  grad_encoded->noalias() = grad_phases * frequencies_;
}

}  // namespace dpcurator::embed
