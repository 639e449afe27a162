#ifndef DPCURATOR_CORE_TRAIN_EMBEDDING_TRAINER_H_
#define DPCURATOR_CORE_TRAIN_EMBEDDING_TRAINER_H_

#include <cstdint>
#include <functional>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/embed/feature_map.h"
#include "core/embed/labelled_embedding.h"
#include "core/nn/adam.h"
#include "core/train/tabular_generator.h"

namespace dpcurator::train {

struct EmbeddingTrainerOptions {
  // Generator updates (DP-MERF's tabular "epochs" are single steps).
  int steps = 1000;
  // Generated rows per step, split over classes by the released weights.
  int batch_size = 1024;
  double learning_rate = 2e-3;
  // The learning rate decays linearly to this fraction over the run.
  double final_learning_rate_fraction = 0.1;
  GeneratorOptions generator;
  uint64_t seed = 1;
  // Called every `progress_every` steps and at the end.
  std::function<void(int step, double loss)> progress;
  int progress_every = 100;
  // Threads for the generator steps (each batch is split into row shards,
  // one per thread); 0: one per hardware thread. Results do not depend on
  // it beyond float rounding of the shard sums.
  int threads = 0;
};

struct TrainedGenerator {
  TabularGenerator generator;
  Eigen::VectorXd class_weights;
  double final_loss = 0.0;
  int steps = 0;
};

// Stratified labels for a batch: class c gets max(1, round(w_c * n)) rows,
// in class order, so the generated side's class-c column is a plain
// class-conditional mean, as the released target's is (DP-MERF eq. 12 with
// the code's weighting on both sides, dp-merf.md 1.5).
Eigen::VectorXi StratifiedLabels(const Eigen::VectorXd& class_weights, int batch_size);

// Calls visit(c, start, count) for each run of rows labelled c, in order:
// with labels grouped by class (StratifiedLabels), one call per class.
// A template, so the trainers' hot loops call the lambda directly.
template <typename Visit>
void ForEachClassRun(const Eigen::Ref<const Eigen::VectorXi>& labels, Visit visit) {
  Eigen::Index start = 0;
  while (start < labels.size()) {
    const int c = labels(start);
    Eigen::Index end = start;
    while (end < labels.size() && labels(end) == c) ++end;
    visit(c, start, end - start);
    start = end;
  }
}

// Loss of one batch, L = sum_c || target_c - mean_{i in c} h(g_i) ||^2, and
// dL/dh per generated row (n x feature_dim). Labels must be grouped by
// class as StratifiedLabels makes them.
double EmbeddingLoss(const Eigen::MatrixXd& target_means, const Eigen::MatrixXd& features,
                     const Eigen::VectorXi& labels, Eigen::MatrixXd* grad_features);

// The same loss from the generated class means m_c (columns of
// class_means, feature_dim x classes), L = sum_c ||target_c - m_c||^2, and
// dL/dm_c = -2 (target_c - m_c) into grad_means (if not null). The
// trainers' hot path: every row of class c then gets dL/dh = dL/dm_c / n_c.
double EmbeddingMeanLoss(const Eigen::MatrixXd& target_means, const Eigen::MatrixXd& class_means,
                         Eigen::MatrixXd* grad_means);

// What every embedding trainer (DP-MERF, PEARL) starts from: validated
// options, a generator seeded from the public seed, its Adam optimiser and
// the stratified batch labels.
struct GeneratorFit {
  TabularGenerator generator;
  nn::Adam adam;
  Eigen::VectorXi labels;
};
absl::StatusOr<GeneratorFit> PrepareGeneratorFit(const data::FeatureLayout& layout,
                                                 const embed::FeatureMap& feature_map,
                                                 const embed::EmbeddingTarget& target,
                                                 const EmbeddingTrainerOptions& options);

// A trainer's loss of one generated batch as a function of the batch's
// class means of the features, m_c = mean_{i in c} h(g_i) (feature_dim x
// classes; both DP-MERF's and PEARL's losses are): returns L and writes
// dL/dm_c to grad_means.
using ClassMeanLoss =
    std::function<double(const Eigen::MatrixXd& class_means, Eigen::MatrixXd* grad_means)>;
// Draws a fresh batch from the generator (noise from the loop's public RNG)
// and returns its class means.
using DrawClassMeans = std::function<const Eigen::MatrixXd&()>;
// Work after generator step `step` (PEARL's critic step); may draw batches.
using AfterGeneratorStep =
    std::function<absl::Status(int step, const DrawClassMeans& draw_class_means)>;

// The generator loop every embedding trainer runs (DP-MERF Alg. 1 step 3,
// PEARL Alg. 1 line 18): options.steps Adam steps at ScheduledLearningRate,
// each on a fresh batch z ~ N(0, I) from a public RNG seeded by
// options.seed, descending `loss` through the feature map and the generator; then
// `after_step` (if set) and progress. Fails on a non-finite gradient.
// Returns the loss of the last generator step.
//
// Post-processing in float32 (issue 13): the generator runs as a
// FloatGenerator and the feature map as a FloatFeatureMap (the artefact's
// own public frequencies, rounded to float), split over options.threads
// row shards; the class means, the loss, the gradient sum and Adam's
// master parameters stay in double.
absl::StatusOr<double> RunGeneratorLoop(const embed::FeatureMap& feature_map,
                                        const EmbeddingTrainerOptions& options,
                                        const ClassMeanLoss& loss, GeneratorFit* fit,
                                        const AfterGeneratorStep& after_step = nullptr);

// The linear decay both trainers use: learning_rate at step 1, falling to
// final_fraction * learning_rate over the run.
double ScheduledLearningRate(double learning_rate, double final_fraction, int step, int steps);

// DP-MERF (Harder et al. 2021, Alg. 1 step 3): fits a class-conditional
// generator so that its mean embedding under `feature_map` matches the
// released target. Post-processing only: reads no private data.
absl::StatusOr<TrainedGenerator> TrainEmbeddingGenerator(const data::FeatureLayout& layout,
                                                         const embed::FeatureMap& feature_map,
                                                         const embed::EmbeddingTarget& target,
                                                         const EmbeddingTrainerOptions& options);

}  // namespace dpcurator::train

#endif  // DPCURATOR_CORE_TRAIN_EMBEDDING_TRAINER_H_
