#include "core/train/embedding_trainer.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/nn/adam.h"
#include "core/util/public_rng.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::train {
namespace {

// Mixed into the public seed for the generator's input noise, so that the
// noise stream differs from the generator's initialisation stream.
constexpr uint64_t kGeneratorNoiseSalt = 0x5DEECE66DULL;

}  // namespace

Eigen::VectorXi StratifiedLabels(const Eigen::VectorXd& class_weights, int batch_size) {
  const int classes = static_cast<int>(class_weights.size());
  std::vector<int> counts(classes);
  int total = 0;
  for (int c = 0; c < classes; ++c) {
    counts[c] = std::max(1, static_cast<int>(std::lround(class_weights(c) * batch_size)));
    total += counts[c];
  }
  Eigen::VectorXi labels(total);
  int row = 0;
  for (int c = 0; c < classes; ++c) {
    labels.segment(row, counts[c]).setConstant(c);
    row += counts[c];
  }
  return labels;
}

void ForEachClassRun(const Eigen::VectorXi& labels,
                     const std::function<void(int c, Eigen::Index start, Eigen::Index count)>& visit) {
  Eigen::Index start = 0;
  while (start < labels.size()) {
    const int c = labels(start);
    Eigen::Index end = start;
    while (end < labels.size() && labels(end) == c) ++end;
    visit(c, start, end - start);
    start = end;
  }
}

double EmbeddingLoss(const Eigen::MatrixXd& target_means, const Eigen::MatrixXd& features,
                     const Eigen::VectorXi& labels, Eigen::MatrixXd* grad_features) {
  grad_features->resize(features.rows(), features.cols());
  double loss = 0.0;
  ForEachClassRun(labels, [&](int c, Eigen::Index start, Eigen::Index count) {
    const Eigen::RowVectorXd mean = features.middleRows(start, count).colwise().mean();
    const Eigen::RowVectorXd residual = target_means.col(c).transpose() - mean;
    loss += residual.squaredNorm();
    // d/dh_i of ||t - (1/n_c) sum_j h_j||^2 = -2 (t - mean) / n_c.
    grad_features->middleRows(start, count).rowwise() = (-2.0 / count) * residual;
  });
  return loss;
}

absl::StatusOr<GeneratorFit> PrepareGeneratorFit(const data::FeatureLayout& layout,
                                                 const embed::FeatureMap& feature_map,
                                                 const embed::EmbeddingTarget& target,
                                                 const EmbeddingTrainerOptions& options) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.steps, "Steps"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.batch_size, "Batch size"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(options.learning_rate, "Learning rate"));
  DPC_RETURN_IF_ERROR(ValidateInUnitInterval(options.final_learning_rate_fraction,
                                             "Final learning-rate fraction"));
  if (feature_map.input_dim() != layout.total_dim() ||
      target.class_means.rows() != feature_map.output_dim() ||
      target.class_means.cols() != target.class_weights.size()) {
    return absl::InvalidArgumentError(
        "the release does not match the feature map or schema (dimensions differ); fetch the "
        "artefact again or check it belongs to this schema");
  }
  GeneratorOptions generator_options = options.generator;
  generator_options.seed = options.seed;
  DPC_ASSIGN_OR_RETURN(TabularGenerator built,
                       TabularGenerator::Create(layout, static_cast<int>(target.class_weights.size()),
                                                generator_options));
  nn::AdamOptions adam_options;
  adam_options.learning_rate = options.learning_rate;
  DPC_ASSIGN_OR_RETURN(nn::Adam adam, nn::Adam::Create(built.num_parameters(), adam_options));
  Eigen::VectorXi labels = StratifiedLabels(target.class_weights, options.batch_size);
  return GeneratorFit{std::move(built), std::move(adam), std::move(labels)};
}

double ScheduledLearningRate(double learning_rate, double final_fraction, int step, int steps) {
  const double progress = static_cast<double>(step - 1) / steps;
  return learning_rate * (1.0 - (1.0 - final_fraction) * progress);
}

absl::StatusOr<double> RunGeneratorLoop(const embed::FeatureMap& feature_map,
                                        const EmbeddingTrainerOptions& options,
                                        const GeneratorBatchLoss& loss, GeneratorFit* fit,
                                        const AfterGeneratorStep& after_step) {
  TabularGenerator& generator = fit->generator;
  const Eigen::VectorXi& labels = fit->labels;
  PublicRng rng(options.seed ^ kGeneratorNoiseSalt);
  Eigen::MatrixXd z(labels.size(), generator.noise_dim());
  Eigen::MatrixXd features, grad_features, grad_encoded;
  Eigen::VectorXd grad_params(generator.num_parameters());
  GeneratorWorkspace workspace;
  const DrawGeneratedFeatures draw_features = [&]() -> const Eigen::MatrixXd& {
    rng.FillNormal(z);
    feature_map.Features(generator.Forward(z, labels, &workspace), &features);
    return features;
  };
  double step_loss = 0.0;
  for (int step = 1; step <= options.steps; ++step) {
    DPC_RETURN_IF_ERROR(fit->adam.SetLearningRate(ScheduledLearningRate(
        options.learning_rate, options.final_learning_rate_fraction, step, options.steps)));
    draw_features();
    step_loss = loss(features, &grad_features);
    feature_map.BackwardFromFeatures(features, grad_features, &grad_encoded);
    grad_params.setZero();
    generator.Backward(grad_encoded, &workspace, &grad_params);
    if (!grad_params.allFinite()) {
      return absl::InternalError(absl::StrCat("training diverged at step ", step,
                                              " (non-finite gradient); lower --learning-rate"));
    }
    DPC_RETURN_IF_ERROR(fit->adam.Step(generator.parameters(), grad_params));
    if (after_step) DPC_RETURN_IF_ERROR(after_step(step, draw_features));
    if (options.progress &&
        (step % std::max(1, options.progress_every) == 0 || step == options.steps)) {
      options.progress(step, step_loss);
    }
  }
  return step_loss;
}

absl::StatusOr<TrainedGenerator> TrainEmbeddingGenerator(const data::FeatureLayout& layout,
                                                         const embed::FeatureMap& feature_map,
                                                         const embed::EmbeddingTarget& target,
                                                         const EmbeddingTrainerOptions& options) {
  DPC_ASSIGN_OR_RETURN(GeneratorFit fit,
                       PrepareGeneratorFit(layout, feature_map, target, options));
  const GeneratorBatchLoss loss = [&](const Eigen::MatrixXd& features,
                                      Eigen::MatrixXd* grad_features) {
    return EmbeddingLoss(target.class_means, features, fit.labels, grad_features);
  };
  DPC_ASSIGN_OR_RETURN(const double final_loss, RunGeneratorLoop(feature_map, options, loss, &fit));
  return TrainedGenerator{std::move(fit.generator), target.class_weights, final_loss,
                          options.steps};
}

}  // namespace dpcurator::train
