#ifndef DPCURATOR_CORE_TRAIN_IMAGE_TRAINER_H_
#define DPCURATOR_CORE_TRAIN_IMAGE_TRAINER_H_

#include <cstdint>
#include <functional>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/embed/charfn.h"
#include "core/embed/feature_map.h"
#include "core/embed/labelled_embedding.h"
#include "core/privacy/noise_source.h"
#include "core/release/encoded_rows.h"
#include "core/release/rff_embedding.h"
#include "core/train/image_generator.h"

namespace dpcurator::train {

// Fitting an image generator (image_generator.h) to released embeddings of
// images (issue 14 item 2): the encoded rows are the H*W pixels in [0, 1],
// all numeric, and the label is the class. Post-processing of releases
// only, except ReleasePoissonBatchTarget below, which is the curator's side
// of the minibatch variant.
//
// Labels of the generated batch are balanced (batch_size / C per class, in
// class order): both papers draw generated labels uniformly for images
// (dp-merf.md 1.6 (a), pearl.md Sec. 4 [code]); the target's class weights
// are not used.
struct ImageTrainerOptions {
  ImageGeneratorOptions generator;
  // Generator updates, and generated images per update.
  int steps = 3000;
  int batch_size = 100;
  // Adam (both papers: 1e-2), with PyTorch's StepLR: multiplied by
  // lr_decay every lr_decay_steps steps (DP-MERF: 0.9 per epoch,
  // dp-merf.md Sec. 3); lr_decay_steps 0 keeps it constant.
  double learning_rate = 1e-2;
  double lr_decay = 1.0;
  int lr_decay_steps = 0;
  // Seeds the generator's initialisation (generator.seed is overridden) and
  // its input noise (public randomness).
  uint64_t seed = 1;
  // Threads of the shard pool (0: one per hardware thread). Results do not
  // depend on it beyond float rounding of shard sums.
  int threads = 0;
  // Called every progress_every steps and at the end with the step's loss.
  std::function<void(int step, double loss)> progress;
  int progress_every = 100;

  absl::Status Validate() const;
};

struct TrainedImageGenerator {
  ImageGenerator generator;
  double final_loss = 0.0;
  int steps = 0;
};

// DP-MERF on a one-shot release (the "release once, train offline" design,
// dp-merf.md Alg. 1 step 3, on images): minimises
//   L = sum_c || target_c - mean_{i in c} h(G(z_i, c)) ||^2
// with h the released random-Fourier-feature map (EmbeddingMeanLoss).
absl::StatusOr<TrainedImageGenerator> TrainImageMerf(const data::FeatureLayout& layout,
                                                     const embed::FeatureMap& feature_map,
                                                     const embed::EmbeddingTarget& target,
                                                     const ImageTrainerOptions& options);

// PEARL on a one-shot characteristic-function release (Liew et al. 2022,
// Alg. 1 lines 9-20; pearl.md 1.2 F-H): PearlMeanLoss with the critic's
// frequency weights, and one critic ascent step (Adam, maximize) after
// every generator_steps_per_critic_step generator steps, on a fresh batch
// drawn with BN in eval mode (pearl.md 1.2 H [code]).
struct ImagePearlOptions : ImageTrainerOptions {
  double critic_learning_rate = 1e-2;
  // n_gen: 5 for images in the code (pearl.md Sec. 4).
  int generator_steps_per_critic_step = 5;
  bool use_critic = true;
};
absl::StatusOr<TrainedImageGenerator> TrainImagePearl(
    const data::FeatureLayout& layout, const embed::CharacteristicFunctionMap& feature_map,
    const embed::EmbeddingTarget& target, const ImagePearlOptions& options);

// DP-MERF's image variant (dp-merf.md 1.6 (a), pitfall 8): every step
// fits the generator to a fresh noisy embedding of a fresh subsampled real
// batch. `step_target(step)` returns that step's released target (1-based
// steps); the trainer runs options.steps steps. All targets must come from
// releases under `feature_map` (same frequencies) with num_classes classes.
using StepTarget = std::function<absl::StatusOr<embed::EmbeddingTarget>(int step)>;
absl::StatusOr<TrainedImageGenerator> TrainImageMerfPerStep(const data::FeatureLayout& layout,
                                                            const embed::FeatureMap& feature_map,
                                                            const StepTarget& step_target,
                                                            const ImageTrainerOptions& options);

// The curator's side of one minibatch step, as a session step runs it
// (server/releases.cc ComputeSessionStep under ADD_REMOVE): a Poisson
// sample of `rows` at rate q (each row independently, from `noise`), and
// RffEmbeddingKind::Run on it (noisy per-class sums and counts), turned
// into the trainer's target. Charged as one Poisson-subsampled Gaussian
// step with this multiplier (privacy::CalibrateSampledDiscreteGaussian-
// NoiseMultiplier calibrates it for all planned steps).
absl::StatusOr<embed::EmbeddingTarget> ReleasePoissonBatchTarget(
    const release::EncodedRows& rows, const release::RffEmbeddingKind::Params& resolved,
    double sampling_rate, double noise_multiplier, privacy::NoiseSource* noise);

}  // namespace dpcurator::train

#endif  // DPCURATOR_CORE_TRAIN_IMAGE_TRAINER_H_
