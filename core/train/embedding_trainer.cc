#include "core/train/embedding_trainer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/nn/adam.h"
#include "core/train/float_features.h"
#include "core/train/normal_draws.h"
#include "core/util/shard_pool.h"
#include "core/util/public_rng.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::train {
namespace {

// Mixed into the public seed for the generator's input noise, so that the
// noise stream differs from the generator's initialisation stream.
constexpr uint64_t kGeneratorNoiseSalt = 0x5DEECE66DULL;

// Fewest rows worth a shard of their own: below that, waking a thread costs
// more than the shard's work.
constexpr Eigen::Index kMinShardRows = 128;

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

double EmbeddingMeanLoss(const Eigen::MatrixXd& target_means, const Eigen::MatrixXd& class_means,
                         Eigen::MatrixXd* grad_means) {
  const Eigen::MatrixXd residual = target_means - class_means;
  // d/dm_c of ||t_c - m_c||^2 = -2 (t_c - m_c).
  if (grad_means != nullptr) *grad_means = -2.0 * residual;
  return residual.squaredNorm();
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
                                        const ClassMeanLoss& loss, GeneratorFit* fit,
                                        const AfterGeneratorStep& after_step) {
  TabularGenerator& generator = fit->generator;
  const Eigen::VectorXi& labels = fit->labels;
  const Eigen::Index n = labels.size();
  const int classes = generator.num_classes();
  DPC_ASSIGN_OR_RETURN(const FloatFeatureMap features,
                       FloatFeatureMap::Create(feature_map, generator.layout()));
  DPC_ASSIGN_OR_RETURN(FloatGenerator replica, FloatGenerator::Create(generator));
  const int feature_dim = features.output_dim();

  // Row shards, one per thread (fewer for small batches): contiguous row
  // ranges, each with its own buffers.
  ShardPool pool(options.threads);
  const int shards =
      static_cast<int>(std::clamp<Eigen::Index>(n / kMinShardRows, 1, pool.threads()));
  struct Shard {
    Eigen::Index start = 0;
    Eigen::Index rows = 0;
    FloatGeneratorWorkspace workspace;
    Eigen::MatrixXf features, grad_encoded, scratch, class_sums;
    Eigen::VectorXf grad_params;
  };
  std::vector<Shard> shard(shards);
  for (int s = 0; s < shards; ++s) {
    shard[s].start = n * s / shards;
    shard[s].rows = n * (s + 1) / shards - shard[s].start;
  }
  Eigen::VectorXd counts = Eigen::VectorXd::Zero(classes);
  for (Eigen::Index i = 0; i < n; ++i) counts(labels(i)) += 1.0;
  // A class without rows (not from StratifiedLabels) has mean 0, not 0/0.
  counts = counts.cwiseMax(1.0);

  PublicRng rng(options.seed ^ kGeneratorNoiseSalt);
  Eigen::MatrixXf z_float(n, generator.noise_dim());
  Eigen::MatrixXd class_means(feature_dim, classes), grad_means;
  Eigen::MatrixXf grad_by_class;
  Eigen::VectorXd grad_params(generator.num_parameters());
  const DrawClassMeans draw_class_means = [&]() -> const Eigen::MatrixXd& {
    FillStandardNormal(&rng, z_float);
    pool.Run(shards, [&](int s) {
      Shard& sh = shard[s];
      const auto shard_labels = labels.segment(sh.start, sh.rows);
      features.Features(replica.Forward(z_float.middleRows(sh.start, sh.rows), shard_labels,
                                        &sh.workspace),
                        &sh.features, &sh.scratch);
      sh.class_sums.setZero(feature_dim, classes);
      ForEachClassRun(shard_labels, [&](int c, Eigen::Index start, Eigen::Index count) {
        sh.class_sums.col(c) += sh.features.middleRows(start, count).colwise().sum().transpose();
      });
    });
    // Shard sums in shard order, in double.
    class_means.setZero();
    for (const Shard& sh : shard) class_means += sh.class_sums.cast<double>();
    class_means.array().rowwise() /= counts.transpose().array();
    return class_means;
  };
  double step_loss = 0.0;
  for (int step = 1; step <= options.steps; ++step) {
    DPC_RETURN_IF_ERROR(fit->adam.SetLearningRate(ScheduledLearningRate(
        options.learning_rate, options.final_learning_rate_fraction, step, options.steps)));
    draw_class_means();
    step_loss = loss(class_means, &grad_means);
    // dL/dh_i = dL/dm_c / n_c for every row i of class c.
    grad_by_class = (grad_means.array().rowwise() / counts.transpose().array()).cast<float>();
    pool.Run(shards, [&](int s) {
      Shard& sh = shard[s];
      sh.grad_params.setZero(replica.num_parameters());
      features.BackwardFromFeatures(sh.features, grad_by_class, labels.segment(sh.start, sh.rows),
                                    &sh.grad_encoded, &sh.scratch);
      replica.Backward(sh.grad_encoded, &sh.workspace, &sh.grad_params);
    });
    grad_params.setZero();
    for (const Shard& sh : shard) grad_params += sh.grad_params.cast<double>();
    if (!grad_params.allFinite()) {
      return absl::InternalError(absl::StrCat("training diverged at step ", step,
                                              " (non-finite gradient); lower --learning-rate"));
    }
    DPC_RETURN_IF_ERROR(fit->adam.Step(generator.parameters(), grad_params));
    replica.SyncFrom(generator);
    if (after_step) DPC_RETURN_IF_ERROR(after_step(step, draw_class_means));
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
  const ClassMeanLoss loss = [&](const Eigen::MatrixXd& class_means,
                                 Eigen::MatrixXd* grad_means) {
    return EmbeddingMeanLoss(target.class_means, class_means, grad_means);
  };
  DPC_ASSIGN_OR_RETURN(const double final_loss, RunGeneratorLoop(feature_map, options, loss, &fit));
  return TrainedGenerator{std::move(fit.generator), target.class_weights, final_loss,
                          options.steps};
}

}  // namespace dpcurator::train
