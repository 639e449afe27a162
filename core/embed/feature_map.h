#ifndef DPCURATOR_CORE_EMBED_FEATURE_MAP_H_
#define DPCURATOR_CORE_EMBED_FEATURE_MAP_H_

#include "Eigen/Core"

namespace dpcurator::embed {

// Every map's output scale is multiplied by this, so that the norm bound
// holds for the features as computed, not only in exact arithmetic: the
// scales' own rounding (a few 2^-53), SLEEF's 1-ULP sin/cos and the
// products leave ||h(x)|| <= 1 + 2^-49 at most, and 1 - 2^-45 brings that
// below 1 (docs/privacy.md 2.7). The change to the features is 3e-14
// relative, far below anything a release or a trainer resolves.
inline constexpr double kFeatureNormShrink = 1.0 - 0x1p-45;

// A per-record feature map h over encoded rows (data::FeatureLayout) whose
// norm is bounded by one by construction, ||h(x)||_2 <= 1 for every x in the
// declared domain: every sensitivity of the embedding releases rests on it
// (docs/privacy.md, section 2).
class FeatureMap {
 public:
  virtual ~FeatureMap() = default;
  virtual int input_dim() const = 0;
  virtual int output_dim() const = 0;
  // features = h(encoded), row by row (n x output_dim).
  virtual void Features(const Eigen::MatrixXd& encoded, Eigen::MatrixXd* features) const = 0;
  // Chain rule for trainers: given dL/dh (n x output_dim) at `encoded`,
  // writes dL/d(encoded) (n x input_dim).
  virtual void Backward(const Eigen::MatrixXd& encoded, const Eigen::MatrixXd& grad_features,
                        Eigen::MatrixXd* grad_encoded) const = 0;
  // The same gradient from the features Features() just returned for those
  // rows: the trainers' hot path, which must not recompute the cos/sin
  // (most of a step's cost) that the forward pass already holds.
  virtual void BackwardFromFeatures(const Eigen::MatrixXd& features,
                                    const Eigen::MatrixXd& grad_features,
                                    Eigen::MatrixXd* grad_encoded) const = 0;
};

}  // namespace dpcurator::embed

#endif  // DPCURATOR_CORE_EMBED_FEATURE_MAP_H_
