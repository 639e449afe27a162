#include "core/train/float_features.h"

#include <cmath>

#include "absl/status/status.h"
#include "core/embed/charfn.h"
#include "core/embed/rff.h"
#include "core/nn/gemm.h"
#include "core/train/embedding_trainer.h"
#include "core/util/sincos.h"

namespace dpcurator::train {

absl::StatusOr<FloatFeatureMap> FloatFeatureMap::Create(const embed::FeatureMap& map,
                                                        const data::FeatureLayout& layout) {
  if (map.input_dim() != layout.total_dim()) {
    return absl::InvalidArgumentError("the feature map does not match the schema's layout");
  }
  FloatFeatureMap result;
  result.input_dim_ = map.input_dim();
  result.output_dim_ = map.output_dim();
  if (const auto* rff = dynamic_cast<const embed::RandomFourierFeatureMap*>(&map)) {
    // The scales of rff.cc: s = a sqrt(2/D) with a^2 = numeric_weight and
    // D = 2 num_frequencies; s_c = b / sqrt(V), b^2 = 1 - a^2, V one-hot
    // blocks (Harder et al. 2021 eq. 13 at unit norm), each times the
    // release's kFeatureNormShrink. tests/train checks them against the
    // double map.
    const double weight = rff->numeric_weight();
    const int blocks = layout.num_categorical_columns();
    result.frequencies_ = rff->frequencies().cast<float>();
    result.trig_scale_ = static_cast<float>(embed::kFeatureNormShrink *
                                            std::sqrt(weight / rff->num_frequencies()));
    result.passthrough_dim_ = layout.categorical_dim;
    result.passthrough_scale_ =
        blocks > 0
            ? static_cast<float>(embed::kFeatureNormShrink * std::sqrt((1.0 - weight) / blocks))
            : 0.0f;
  } else if (const auto* charfn = dynamic_cast<const embed::CharacteristicFunctionMap*>(&map)) {
    // h = [cos(T x); sin(T x)] / sqrt(k) over the whole row (charfn.h).
    result.frequencies_ = charfn->frequencies().cast<float>();
    result.trig_scale_ = static_cast<float>(embed::kFeatureNormShrink /
                                            std::sqrt(charfn->num_frequencies()));
  } else {
    result.fallback_ = &map;
  }
  if (result.fallback_ == nullptr &&
      (2 * result.num_frequencies() + result.passthrough_dim_ != result.output_dim_ ||
       result.phase_dim() + result.passthrough_dim_ > result.input_dim_)) {
    return absl::InternalError("feature map dimensions are inconsistent");
  }
  return result;
}

void FloatFeatureMap::Features(const Eigen::Ref<const Eigen::MatrixXf>& encoded,
                               Eigen::MatrixXf* features, Eigen::MatrixXf* scratch) const {
  const Eigen::Index n = encoded.rows();
  features->resize(n, output_dim_);
  if (fallback_ != nullptr) {
    Eigen::MatrixXd double_features;
    fallback_->Features(encoded.cast<double>(), &double_features);
    *features = double_features.cast<float>();
    return;
  }
  const int k = num_frequencies();
  const int p = phase_dim();
  // Phases A = x_P W^T, then s [cos A, sin A] straight into the two blocks
  // (column-major: the cos block is the first n k values, the sin block the
  // next n k).
  Eigen::MatrixXf& phases = *scratch;
  phases.resize(n, k);
  nn::Gemm(false, encoded.leftCols(p), true, frequencies_, 0.0f, phases);
  SinCos(phases.data(), n * k, trig_scale_, features->data() + n * k, features->data());
  if (passthrough_dim_ > 0) {
    features->rightCols(passthrough_dim_) =
        passthrough_scale_ * encoded.middleCols(p, passthrough_dim_);
  }
}

void FloatFeatureMap::BackwardFromFeatures(const Eigen::Ref<const Eigen::MatrixXf>& features,
                                           const Eigen::MatrixXf& grad_by_class,
                                           const Eigen::Ref<const Eigen::VectorXi>& labels,
                                           Eigen::MatrixXf* grad_encoded,
                                           Eigen::MatrixXf* scratch) const {
  const Eigen::Index n = features.rows();
  grad_encoded->resize(n, input_dim_);
  if (fallback_ != nullptr) {
    Eigen::MatrixXd grad_features(n, output_dim_);
    ForEachClassRun(labels, [&](int c, Eigen::Index start, Eigen::Index count) {
      grad_features.middleRows(start, count).rowwise() =
          grad_by_class.col(c).transpose().cast<double>();
    });
    Eigen::MatrixXd double_grad;
    fallback_->BackwardFromFeatures(features.cast<double>(), grad_features, &double_grad);
    *grad_encoded = double_grad.cast<float>();
    return;
  }
  const int k = num_frequencies();
  const int p = phase_dim();
  Eigen::MatrixXf& grad_phases = *scratch;
  grad_phases.resize(n, k);
  ForEachClassRun(labels, [&](int c, Eigen::Index start, Eigen::Index count) {
    // dL/dA = G_sin o h_cos - G_cos o h_sin, G one row per class.
    // Column by column (contiguous runs of the class's rows, which Eigen
    // vectorises; a rowwise broadcast over the block it does not).
    for (int j = 0; j < k; ++j) {
      const float g_cos = grad_by_class(j, c);
      const float g_sin = grad_by_class(k + j, c);
      grad_phases.col(j).segment(start, count) = g_sin * features.col(j).segment(start, count) -
                                                 g_cos * features.col(k + j).segment(start, count);
    }
    if (passthrough_dim_ > 0) {
      grad_encoded->middleRows(start, count).middleCols(p, passthrough_dim_).rowwise() =
          passthrough_scale_ * grad_by_class.col(c).tail(passthrough_dim_).transpose();
    }
  });
  nn::Gemm(false, grad_phases, false, frequencies_, 0.0f, grad_encoded->leftCols(p));
  // Columns that feed no feature (none for the two maps) get no gradient.
  const int rest = input_dim_ - p - passthrough_dim_;
  if (rest > 0) grad_encoded->rightCols(rest).setZero();
}

double FloatFeatureMap::GemmMultiplyAdds(Eigen::Index n) const {
  return 2.0 * static_cast<double>(n) * num_frequencies() * phase_dim();
}

}  // namespace dpcurator::train
