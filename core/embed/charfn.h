#ifndef DPCURATOR_CORE_EMBED_CHARFN_H_
#define DPCURATOR_CORE_EMBED_CHARFN_H_

#include <cstdint>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/embed/feature_map.h"

namespace dpcurator::embed {

// PEARL's characteristic-function features (Liew et al. 2022, Eq. 4 and the
// empirical CF below it; pearl.md 1.1), in the unit-norm form of the
// authors' code (pearl.md 1.2 D, PRIVACY.md "characteristic-function
// features"):
//   h(x) = [cos(T x); sin(T x)] / sqrt(k),       ||h(x)||^2 = 1 exactly,
// over the WHOLE encoded row x in R^d (d = layout.total_dim(): numerics
// scaled to [0,1] and the one-hot blocks), with k frequencies t_i (rows of
// T, k x d) drawn from a public seed, t_il ~ N(0, 1/l^2): the base
// frequency distribution omega_0 with std(t) = 1/D~ (pearl.md 1.2 B/C, where
// l = D~ is the DP mean pairwise distance, pairwise_distance.h).
// The mean of h over a class is [Re Phi_c(t_i); Im Phi_c(t_i)]/sqrt(k), so
// the labelled release (labelled_embedding.h) applies unchanged with the
// sensitivities of a unit-norm map.
struct CharfnOptions {
  // k complex frequencies: 2k real features. (The reference code counts the
  // real features; its "1000" is k = 500, pearl.md pitfall 2.)
  int num_frequencies = 500;
  // l > 0, in the encoded space: the (DP) mean pairwise distance of the rows
  // (LengthScaleFromMeanDistance) or DefaultCharfnLengthScale(layout). No
  // sentinel: the caller must choose, so 0 is refused.
  double length_scale = 0.0;
  // Public seed of the frequencies; stored in the artefact.
  uint64_t seed = 0;
  // > 0: the numeric block's dimensions use this length-scale instead (an ARD
  // Gaussian kernel, frequencies N(0, 1/l_num^2) there). 0: l everywhere.
  double numeric_length_scale = 0.0;
};

// Schema-only length-scale: the root mean squared distance of two
// independent rows with uniform numerics and uniform independent categories,
//   l^2 = E||x - x'||^2 = d_num / 6 + sum_B 2 (1 - 1/L_B),
// since Var(u - u') = 2/12 per uniform numeric, and two one-hot vectors of a
// block with L_B levels differ (squared distance 2) with probability
// 1 - 1/L_B. 1.0 when that is 0 (no numerics, single-level blocks only).
// It reads no rows (a stand-in for the median heuristic; pearl.md 1.2 A).
// For a layout with an image: sqrt(127), PEARL's code's value (charfn.cc).
double DefaultCharfnLengthScale(const data::FeatureLayout& layout);

class CharacteristicFunctionMap final : public FeatureMap {
 public:
  // Validates the options and draws T from options.seed.
  static absl::StatusOr<CharacteristicFunctionMap> Create(const data::FeatureLayout& layout,
                                                          const CharfnOptions& options);

  // Create in two halves, for a length-scale known only later (a private
  // one, released from the rows): CreateUnscaled allocates and draws T from
  // the public seed (options.length_scale and numeric_length_scale are not
  // used yet), before any row is read; SetLengthScale then scales T exactly
  // as Create does, so the map equals Create(layout, options with these
  // scales) bit for bit. Features() must not be called in between.
  static absl::StatusOr<CharacteristicFunctionMap> CreateUnscaled(
      const data::FeatureLayout& layout, const CharfnOptions& options);
  absl::Status SetLengthScale(double length_scale, double numeric_length_scale);

  int input_dim() const override { return input_dim_; }
  int output_dim() const override { return 2 * num_frequencies_; }
  void Features(const Eigen::MatrixXd& encoded, Eigen::MatrixXd* features) const override;
  void Backward(const Eigen::MatrixXd& encoded, const Eigen::MatrixXd& grad_features,
                Eigen::MatrixXd* grad_encoded) const override;

  // Backward from the features already computed at `encoded` (they hold
  // cos and sin of the phases), saving the recomputation of T x and of the
  // trigonometric functions. Same result as Backward.
  void BackwardFromFeatures(const Eigen::MatrixXd& features, const Eigen::MatrixXd& grad_features,
                            Eigen::MatrixXd* grad_encoded) const override;

  double length_scale() const { return length_scale_; }
  // 0 when the numeric block uses length_scale().
  double numeric_length_scale() const { return numeric_length_scale_; }
  int num_frequencies() const { return num_frequencies_; }
  // T, num_frequencies x input_dim (the critic reweights its rows).
  const Eigen::MatrixXd& frequencies() const { return frequencies_; }

 private:
  int input_dim_ = 0;
  int numeric_dim_ = 0;
  bool scaled_ = false;
  int num_frequencies_ = 0;
  double length_scale_ = 1.0;
  double numeric_length_scale_ = 0.0;
  double scale_ = 1.0;           // 1/sqrt(k)
  Eigen::MatrixXd frequencies_;  // T, k x d
};

}  // namespace dpcurator::embed

#endif  // DPCURATOR_CORE_EMBED_CHARFN_H_
