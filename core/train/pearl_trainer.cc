#include "core/train/pearl_trainer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/nn/adam.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::train {

absl::StatusOr<PearlCritic> PearlCritic::Create(const Eigen::MatrixXd& frequencies,
                                                double length_scale) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(length_scale, "Length-scale"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(frequencies.rows(), "Number of frequencies"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(frequencies.cols(), "Frequency dimension"));
  if (!frequencies.allFinite()) {
    return absl::InvalidArgumentError("frequencies must be finite");
  }
  PearlCritic critic;
  critic.half_squared_frequencies_ = 0.5 * frequencies.array().square().matrix();
  // s0 = l^2: t_il ~ N(0, 1/l^2) has precision l^2 (pearl.md 1.2 F: s0 = sig
  // = D~^2).
  critic.base_precisions_ =
      Eigen::VectorXd::Constant(frequencies.cols(), length_scale * length_scale);
  critic.precisions_ = critic.base_precisions_;
  critic.UpdateWeights();
  return critic;
}

absl::Status PearlCritic::SetPrecisions(const Eigen::VectorXd& precisions) {
  if (precisions.size() != precisions_.size() || !precisions.allFinite()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "critic precisions must be ", precisions_.size(), " finite values"));
  }
  precisions_ = precisions;
  UpdateWeights();
  return absl::OkStatus();
}

void PearlCritic::UpdateWeights() {
  // u_i = sum_l (t_il^2 / 2)(s0_l - s_l); alpha = softmax(u) (pearl.md 1.2 F),
  // shifted by max u for stability (log-space, pearl.md pitfall 6).
  const Eigen::VectorXd u = half_squared_frequencies_ * (base_precisions_ - precisions_);
  weights_ = (u.array() - u.maxCoeff()).exp().matrix();
  weights_ /= weights_.sum();
}

absl::Status PearlCritic::AscentStep(const Eigen::MatrixXd& target_means,
                                     const Eigen::MatrixXd& generated_means, int step,
                                     nn::Adam* adam) {
  PearlMeanLoss(target_means, generated_means, weights_, &ascent_loss_, /*grad_means=*/nullptr);
  const Eigen::VectorXd gradient = Gradient(ascent_loss_);
  if (!gradient.allFinite()) {
    return absl::InternalError(
        absl::StrCat("critic diverged at step ", step, " (non-finite gradient)"));
  }
  ascent_precisions_ = precisions_;
  DPC_RETURN_IF_ERROR(adam->Step(ascent_precisions_, gradient));
  return SetPrecisions(ascent_precisions_);
}

Eigen::VectorXd PearlCritic::Gradient(const Eigen::VectorXd& per_frequency_loss) const {
  // dL/ds_l = -sum_i alpha_i (f_i - L) t_il^2 / 2 (pearl.md 1.2 F).
  const double loss = weights_.dot(per_frequency_loss);
  const Eigen::VectorXd centred =
      (weights_.array() * (per_frequency_loss.array() - loss)).matrix();
  return -(half_squared_frequencies_.transpose() * centred);
}

double PearlLoss(const Eigen::MatrixXd& target_means, const Eigen::MatrixXd& features,
                 const Eigen::VectorXi& labels, const Eigen::VectorXd& frequency_weights,
                 Eigen::VectorXd* per_frequency_loss, Eigen::MatrixXd* grad_features) {
  const Eigen::Index k = frequency_weights.size();
  const double kd = static_cast<double>(k);
  per_frequency_loss->setZero(k);
  if (grad_features != nullptr) grad_features->resize(features.rows(), features.cols());
  ForEachClassRun(labels, [&](int c, Eigen::Index start, Eigen::Index count) {
    // r_c = target_c - mean_{j in c} h(g_j): [Re; Im](Phi~_c - Phi^_{Q,c}) / sqrt(k).
    const Eigen::RowVectorXd residual =
        target_means.col(c).transpose() - features.middleRows(start, count).colwise().mean();
    // f_{c,i} = |Phi~_c(t_i) - Phi^_{Q,c}(t_i)|^2 = k (r_i^2 + r_{k+i}^2) (pearl.md 1.2 G).
    per_frequency_loss->array() +=
        kd * (residual.head(k).array().square() + residual.tail(k).array().square()).transpose();
    if (grad_features != nullptr) {
      // dL/dh_j = -(2 k / n_c) [alpha o r_cos ; alpha o r_sin] for j in class c.
      Eigen::RowVectorXd grad(2 * k);
      grad.head(k) = residual.head(k).cwiseProduct(frequency_weights.transpose());
      grad.tail(k) = residual.tail(k).cwiseProduct(frequency_weights.transpose());
      grad *= -2.0 * kd / static_cast<double>(count);
      grad_features->middleRows(start, count).rowwise() = grad;
    }
  });
  // L = sum_i alpha_i f_i (Eq. 1 with self-normalised weights, pearl.md 1.2 F).
  return frequency_weights.dot(*per_frequency_loss);
}

double PearlMeanLoss(const Eigen::MatrixXd& target_means, const Eigen::MatrixXd& class_means,
                     const Eigen::VectorXd& frequency_weights, Eigen::VectorXd* per_frequency_loss,
                     Eigen::MatrixXd* grad_means) {
  const Eigen::Index k = frequency_weights.size();
  const double kd = static_cast<double>(k);
  // r_c = target_c - m_c: [Re; Im](Phi~_c - Phi^_{Q,c}) / sqrt(k).
  const Eigen::MatrixXd residual = target_means - class_means;
  // f_i = sum_c k (r_{c,i}^2 + r_{c,k+i}^2) (pearl.md 1.2 G).
  *per_frequency_loss =
      kd * (residual.topRows(k).array().square() + residual.bottomRows(k).array().square())
               .rowwise()
               .sum()
               .matrix();
  if (grad_means != nullptr) {
    // dL/dm_c = -2 k [alpha o r_cos ; alpha o r_sin].
    grad_means->resize(residual.rows(), residual.cols());
    grad_means->topRows(k) = (-2.0 * kd) * (residual.topRows(k).array().colwise() *
                                             frequency_weights.array());
    grad_means->bottomRows(k) = (-2.0 * kd) * (residual.bottomRows(k).array().colwise() *
                                                frequency_weights.array());
  }
  // L = sum_i alpha_i f_i (Eq. 1 with self-normalised weights, pearl.md 1.2 F).
  return frequency_weights.dot(*per_frequency_loss);
}

absl::StatusOr<TrainedPearlGenerator> TrainPearlGenerator(
    const data::FeatureLayout& layout, const embed::CharacteristicFunctionMap& feature_map,
    const embed::EmbeddingTarget& target, const PearlTrainerOptions& options) {
  DPC_RETURN_IF_ERROR(
      ValidateFinitePositive(options.critic_learning_rate, "Critic learning rate"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.generator_steps_per_critic_step,
                                          "Generator steps per critic step"));
  DPC_ASSIGN_OR_RETURN(GeneratorFit fit,
                       PrepareGeneratorFit(layout, feature_map, target, options));
  DPC_ASSIGN_OR_RETURN(PearlCritic critic, PearlCritic::Create(feature_map.frequencies(),
                                                               feature_map.length_scale()));
  nn::AdamOptions critic_adam_options;
  critic_adam_options.learning_rate = options.critic_learning_rate;
  critic_adam_options.maximize = true;  // sup over omega (Eq. 1)
  DPC_ASSIGN_OR_RETURN(nn::Adam critic_adam,
                       nn::Adam::Create(critic.precisions().size(), critic_adam_options));

  Eigen::VectorXd per_frequency_loss;
  int critic_steps = 0;
  // Generator step: descent on L(theta) at fixed alpha (Alg. 1 line 18).
  const ClassMeanLoss loss = [&](const Eigen::MatrixXd& class_means,
                                 Eigen::MatrixXd* grad_means) {
    return PearlMeanLoss(target.class_means, class_means, critic.weights(), &per_frequency_loss,
                         grad_means);
  };
  // Critic step every n_gen generator steps, on a fresh batch: ascent on
  // L(s) at fixed theta (Alg. 1, pearl.md 1.2 H).
  const AfterGeneratorStep critic_step =
      [&](int step, const DrawClassMeans& draw_class_means) -> absl::Status {
    if (!options.use_critic || step % options.generator_steps_per_critic_step != 0) {
      return absl::OkStatus();
    }
    DPC_RETURN_IF_ERROR(
        critic.AscentStep(target.class_means, draw_class_means(), step, &critic_adam));
    ++critic_steps;
    return absl::OkStatus();
  };
  DPC_ASSIGN_OR_RETURN(const double final_loss,
                       RunGeneratorLoop(feature_map, options, loss, &fit, critic_step));
  TrainedPearlGenerator result{
      TrainedGenerator{std::move(fit.generator), target.class_weights, final_loss, options.steps},
      critic.precisions(), critic.weights(), critic_steps};
  return result;
}

}  // namespace dpcurator::train
