#ifndef DPCURATOR_CORE_EMBED_RFF_H_
#define DPCURATOR_CORE_EMBED_RFF_H_

#include <cstdint>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/embed/feature_map.h"

namespace dpcurator::embed {

// DP-MERF's heterogeneous feature map (Harder et al. 2021, eq. 13), rescaled
// so that its norm is exactly one (PRIVACY.md, "mixed rows"):
//   h(x) = [ a * sqrt(2/D) [cos(W u); sin(W u)] ; (b / sqrt(V)) onehot(x_cat) ]
// where u in [0,1]^{d_num} are the numeric columns scaled by their declared
// bounds, W (D/2 x d_num) has N(0, 1/l^2) entries drawn from a public seed
// (eq. 3: cos/sin pairs, no random phase, D counts both), V is the number of
// categorical feature columns (each one-hot block has norm 1), and
// a^2 + b^2 = 1. ||h(x)||^2 = a^2 + b^2 = 1 for every row.
struct RffOptions {
  // D/2 frequencies; D = 2 * num_frequencies random features.
  int num_frequencies = 500;
  // Gaussian kernel length-scale l in the scaled [0,1]^{d_num} space. <= 0
  // means DefaultLengthScale(layout), computed from the schema alone.
  double length_scale = 0.0;
  // a^2, the share of the squared norm given to the numeric block. < 0 means
  // DefaultNumericWeight(layout): d_num / (d_num + V), one share per column.
  double numeric_weight = -1.0;
  // Public seed of the frequencies; stored in the artefact.
  uint64_t seed = 0;
};

// sqrt(d_num / 6): the root mean squared distance of two independent uniform
// points of [0,1]^{d_num}, a median-heuristic stand-in that reads only the
// schema (never rows; dp-merf.md pitfall 6). For a layout with an image:
// sqrt(127), the papers' value on raw [0, 1] pixels (rff.cc).
double DefaultLengthScale(const data::FeatureLayout& layout);
double DefaultNumericWeight(const data::FeatureLayout& layout);

class RandomFourierFeatureMap final : public FeatureMap {
 public:
  // Validates options against the layout and draws W from options.seed.
  static absl::StatusOr<RandomFourierFeatureMap> Create(const data::FeatureLayout& layout,
                                                        const RffOptions& options);

  int input_dim() const override { return numeric_dim_ + categorical_dim_; }
  int output_dim() const override { return 2 * num_frequencies_ + categorical_dim_; }
  void Features(const Eigen::MatrixXd& encoded, Eigen::MatrixXd* features) const override;
  void Backward(const Eigen::MatrixXd& encoded, const Eigen::MatrixXd& grad_features,
                Eigen::MatrixXd* grad_encoded) const override;
  void BackwardFromFeatures(const Eigen::MatrixXd& features, const Eigen::MatrixXd& grad_features,
                            Eigen::MatrixXd* grad_encoded) const override;

  double length_scale() const { return length_scale_; }
  double numeric_weight() const { return numeric_weight_; }
  int num_frequencies() const { return num_frequencies_; }
  const Eigen::MatrixXd& frequencies() const { return frequencies_; }

 private:
  int numeric_dim_ = 0;
  int categorical_dim_ = 0;
  int num_categorical_columns_ = 0;
  int num_frequencies_ = 0;
  double length_scale_ = 1.0;
  double numeric_weight_ = 1.0;
  double numeric_scale_ = 0.0;      // a * sqrt(2/D)
  double categorical_scale_ = 0.0;  // b / sqrt(V)
  Eigen::MatrixXd frequencies_;     // W, num_frequencies x numeric_dim
};

}  // namespace dpcurator::embed

#endif  // DPCURATOR_CORE_EMBED_RFF_H_
