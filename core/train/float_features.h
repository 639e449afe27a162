#ifndef DPCURATOR_CORE_TRAIN_FLOAT_FEATURES_H_
#define DPCURATOR_CORE_TRAIN_FLOAT_FEATURES_H_

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/embed/feature_map.h"

namespace dpcurator::train {

// A float32 evaluation, for the trainers, of the feature map a release was
// computed with: DP-MERF's random Fourier features (embed::
// RandomFourierFeatureMap) and PEARL's characteristic-function features
// (embed::CharacteristicFunctionMap) share the form
//   h(x) = [ s cos(x_P W^T) ; s sin(x_P W^T) ; s_c x_Q ]
// where x_P are the first p encoded columns (RFF: the numerics, eq. 13 of
// Harder et al. 2021; charfn: the whole row, Liew et al. 2022 Eq. 4), W
// (k x p) the public frequencies the map drew from the artefact's seed
// (read through its accessor, rounded to float), and x_Q the next q
// columns passed through (RFF's one-hot blocks; none for charfn). The
// trainer is post-processing of the released target: float precision here
// costs no privacy, and the release itself stays in double (core/embed).
// Any other FeatureMap is evaluated through its own double Features.
class FloatFeatureMap {
 public:
  // `map` must outlive the result (the fallback path calls it).
  static absl::StatusOr<FloatFeatureMap> Create(const embed::FeatureMap& map,
                                                const data::FeatureLayout& layout);

  int input_dim() const { return input_dim_; }
  int output_dim() const { return output_dim_; }
  // k: frequencies (0 for the fallback).
  int num_frequencies() const { return static_cast<int>(frequencies_.rows()); }
  // p: the leading encoded columns the phases read.
  int phase_dim() const { return static_cast<int>(frequencies_.cols()); }

  // features = h(encoded), n x output_dim. `scratch` holds the phases.
  void Features(const Eigen::Ref<const Eigen::MatrixXf>& encoded, Eigen::MatrixXf* features,
                Eigen::MatrixXf* scratch) const;

  // dL/d(encoded) (n x input_dim) at rows whose features Features() just
  // returned, when dL/dh of row i is grad_by_class.col(labels(i)) (every
  // trainer's loss is a function of class means, so its gradient is one
  // vector per class). Labels must be grouped by class. The chain rule of
  // rff.cc / charfn.cc: dL/dA = G_sin o h_cos - G_cos o h_sin, dL/dx_P =
  // (dL/dA) W, dL/dx_Q = s_c G_Q.
  void BackwardFromFeatures(const Eigen::Ref<const Eigen::MatrixXf>& features,
                            const Eigen::MatrixXf& grad_by_class,
                            const Eigen::Ref<const Eigen::VectorXi>& labels,
                            Eigen::MatrixXf* grad_encoded, Eigen::MatrixXf* scratch) const;
  // (scratch: dL/dA; the same buffer as Features' may be passed.)

  // Multiply-adds of the GEMMs of Features plus BackwardFromFeatures for n
  // rows (for bench/perf's GFLOP/s).
  double GemmMultiplyAdds(Eigen::Index n) const;

 private:
  FloatFeatureMap() = default;

  const embed::FeatureMap* fallback_ = nullptr;
  int input_dim_ = 0;
  int output_dim_ = 0;
  int passthrough_dim_ = 0;         // q
  float trig_scale_ = 0.0f;         // s
  float passthrough_scale_ = 0.0f;  // s_c
  Eigen::MatrixXf frequencies_;     // W, k x p
};

}  // namespace dpcurator::train

#endif  // DPCURATOR_CORE_TRAIN_FLOAT_FEATURES_H_
