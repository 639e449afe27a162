#ifndef DPCURATOR_CORE_TRAIN_PEARL_TRAINER_H_
#define DPCURATOR_CORE_TRAIN_PEARL_TRAINER_H_

#include <cstdint>
#include <functional>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/nn/adam.h"
#include "core/data/encoder.h"
#include "core/embed/charfn.h"
#include "core/embed/labelled_embedding.h"
#include "core/train/embedding_trainer.h"
#include "core/train/tabular_generator.h"

namespace dpcurator::train {

// PEARL's critic (Liew et al. 2022, Eq. 1 / Eq. 8; pearl.md 1.2 F, the
// self-normalised form of the authors' code): the frequencies t_i are fixed
// draws from omega_0 = N(0, diag(1/s0)) and the critic reweights them by
// importance weights towards omega = N(0, diag(1/s)),
//   alpha = softmax_i(u_i),  u_i = sum_l (t_il^2 / 2) (s0_l - s_l),
// the log density ratio log omega(t_i)/omega_0(t_i) up to a constant that
// cancels in the softmax. s (length d) is one precision per encoded
// dimension, initialised to s0_l = l^2 (the precision of t_il ~ N(0, 1/l^2);
// the code's sig = D~^2), so the weights start uniform (1/k): training
// starts as PEARL "w/o critic". As in the code, s is not constrained to be
// positive.
class PearlCritic {
 public:
  // `frequencies` is T (k x d) of the CharacteristicFunctionMap and
  // `length_scale` its l.
  static absl::StatusOr<PearlCritic> Create(const Eigen::MatrixXd& frequencies,
                                            double length_scale);

  // alpha (k entries, positive, summing to 1).
  const Eigen::VectorXd& weights() const { return weights_; }
  // s (d entries) and s0.
  const Eigen::VectorXd& precisions() const { return precisions_; }
  const Eigen::VectorXd& base_precisions() const { return base_precisions_; }
  // Sets s and recomputes alpha. Fails on a size mismatch or non-finite entry.
  absl::Status SetPrecisions(const Eigen::VectorXd& precisions);

  // dL/ds for L = sum_i alpha_i f_i (pearl.md 1.2 F):
  //   dL/du_j = alpha_j (f_j - L),  du_j/ds_l = -t_jl^2 / 2,
  //   dL/ds_l = -sum_i alpha_i (f_i - L) t_il^2 / 2.
  Eigen::VectorXd Gradient(const Eigen::VectorXd& per_frequency_loss) const;

  // One critic ascent step (Alg. 1, pearl.md 1.2 H): the loss of the
  // generated class means against the target's under the current weights
  // (PearlMeanLoss), its gradient in s, and one step of `adam` (made with
  // maximize = true) on s. Internal when the gradient is not finite
  // (`step` names the generator step in the message).
  absl::Status AscentStep(const Eigen::MatrixXd& target_means,
                          const Eigen::MatrixXd& generated_means, int step, nn::Adam* adam);

 private:
  void UpdateWeights();

  // AscentStep's buffers, reused across steps.
  Eigen::VectorXd ascent_loss_;
  Eigen::VectorXd ascent_precisions_;

  Eigen::MatrixXd half_squared_frequencies_;  // t_il^2 / 2, k x d
  Eigen::VectorXd base_precisions_;           // s0, d
  Eigen::VectorXd precisions_;                // s, d
  Eigen::VectorXd weights_;                   // alpha, k
};

// PEARL's generator loss (pearl.md 1.2 G, Alg. 1 line 18), class-conditional
// as in EmbeddingLoss: for features h = [cos; sin]/sqrt(k) of the generated
// rows (labels grouped by class, as StratifiedLabels makes them) and target
// class means [Re Phi~_c; Im Phi~_c]/sqrt(k) (embed::ToEmbeddingTarget),
//   f_{c,i} = |Phi~_c(t_i) - Phi^_{Q,c}(t_i)|^2 = k (r_{c,i}^2 + r_{c,k+i}^2),
//   r_c = target_c - mean_{j in c} h(g_j),
//   L = sum_c sum_i alpha_i f_{c,i}.
// With uniform alpha = 1/k, L equals EmbeddingLoss (the "w/o critic"
// ablation; the code's x k tabular scaling, pearl.md 1.2 G). Writes
// per_frequency_loss f_i = sum_c f_{c,i} (k entries, for the critic) and,
// if grad_features is not null, dL/dh per row:
//   dL/dh_{j,i} = -(2 k / n_c) alpha_i r_{c,i},  and the same for k+i.
double PearlLoss(const Eigen::MatrixXd& target_means, const Eigen::MatrixXd& features,
                 const Eigen::VectorXi& labels, const Eigen::VectorXd& frequency_weights,
                 Eigen::VectorXd* per_frequency_loss, Eigen::MatrixXd* grad_features);

// PearlLoss from the generated class means m_c (columns of class_means):
// r_c = target_c - m_c, the same f and L, and dL/dm_c = -2 k [alpha o
// r_cos ; alpha o r_sin] into grad_means (if not null). The trainer's hot
// path (see EmbeddingMeanLoss).
double PearlMeanLoss(const Eigen::MatrixXd& target_means, const Eigen::MatrixXd& class_means,
                     const Eigen::VectorXd& frequency_weights, Eigen::VectorXd* per_frequency_loss,
                     Eigen::MatrixXd* grad_means);

// The generator fields (steps, batch size, learning-rate schedule,
// generator, seed, progress; called with the generator loss of the step)
// are EmbeddingTrainerOptions'; PEARL adds its critic's.
struct PearlTrainerOptions : EmbeddingTrainerOptions {
  // Critic Adam learning rate (gradient ascent on s), constant; 1e-2 in the
  // code (pearl.md 1.2 F, Sec. 4).
  double critic_learning_rate = 1e-2;
  // n_gen: one critic step (on a fresh batch) after every this many
  // generator steps; 10 for tabular data in the code (pearl.md 1.2 H).
  int generator_steps_per_critic_step = 10;
  // false: alpha stays uniform (the "w/o critic" ablation, pearl.md 1.2 G).
  bool use_critic = true;
};

struct TrainedPearlGenerator {
  // Generator, class weights, loss of the last generator step, steps.
  TrainedGenerator trained;
  // Final critic state: s and alpha.
  Eigen::VectorXd critic_precisions;
  Eigen::VectorXd frequency_weights;
  int critic_steps = 0;
};

// PEARL (Liew et al. 2022, Alg. 1 lines 9-20): fits a class-conditional
// generator to the released characteristic-function embedding `target`
// (computed with `feature_map`) by the min-max of Eq. 1, alternating
// n_gen generator steps (Adam descent on L) with one critic step (Adam
// ascent on s). Post-processing only (Thm. 1): reads no private data and
// spends no budget.
absl::StatusOr<TrainedPearlGenerator> TrainPearlGenerator(
    const data::FeatureLayout& layout, const embed::CharacteristicFunctionMap& feature_map,
    const embed::EmbeddingTarget& target, const PearlTrainerOptions& options);

}  // namespace dpcurator::train

#endif  // DPCURATOR_CORE_TRAIN_PEARL_TRAINER_H_
