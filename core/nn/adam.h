#ifndef DPCURATOR_CORE_NN_ADAM_H_
#define DPCURATOR_CORE_NN_ADAM_H_

#include <cstdint>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpcurator::nn {

// Hyperparameters of Adam. Defaults are those of Kingma & Ba 2015, Sec. 2;
// the DP-MERF and PEARL trainers use learning_rate 0.01 (dp-merf.md Sec. 4,
// pearl.md Sec. 4).
struct AdamOptions {
  double learning_rate = 1e-3;  // alpha, finite and positive
  double beta1 = 0.9;           // first-moment decay, in [0, 1)
  double beta2 = 0.999;         // second-moment decay, in [0, 1)
  double epsilon = 1e-8;        // finite and positive
  // Gradient ascent: step along +m/sqrt(v) instead of -m/sqrt(v). For
  // critics that maximise their objective (PEARL Eq. 1, pearl.md Sec. 1.2 F).
  bool maximize = false;
};

// Adam (Kingma & Ba 2015, Algorithm 1, with bias correction) over a flat
// parameter vector, such as Mlp::parameters().
class Adam {
 public:
  static absl::StatusOr<Adam> Create(Eigen::Index num_parameters,
                                     const AdamOptions& options);

  // One update, Algorithm 1 of Kingma & Ba 2015:
  //   t <- t + 1
  //   m <- beta1 m + (1 - beta1) g
  //   v <- beta2 v + (1 - beta2) g^2
  //   theta <- theta -/+ alpha (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
  // Fails, leaving everything unchanged, on a size mismatch or a non-finite
  // gradient entry.
  absl::Status Step(Eigen::Ref<Eigen::VectorXd> params,
                    const Eigen::Ref<const Eigen::VectorXd>& grads);

  // For learning-rate schedules (e.g. DP-MERF's StepLR, dp-merf.md Sec. 4).
  absl::Status SetLearningRate(double learning_rate);

  // Checkpointing: the moments and step count t, and their restoration.
  const Eigen::VectorXd& first_moment() const { return m_; }
  const Eigen::VectorXd& second_moment() const { return v_; }
  int64_t step_count() const { return step_count_; }
  absl::Status RestoreState(const Eigen::VectorXd& first_moment,
                            const Eigen::VectorXd& second_moment,
                            int64_t step_count);

  const AdamOptions& options() const { return options_; }
  Eigen::Index num_parameters() const { return m_.size(); }

 private:
  Adam(const AdamOptions& options, Eigen::Index num_parameters);

  AdamOptions options_;
  Eigen::VectorXd m_;
  Eigen::VectorXd v_;
  int64_t step_count_ = 0;
};

}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_ADAM_H_
