#ifndef DPCURATOR_CORE_TRAIN_IMAGE_KERNEL_GENERATOR_H_
#define DPCURATOR_CORE_TRAIN_IMAGE_KERNEL_GENERATOR_H_

#include <utility>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/nn/adam.h"
#include "core/train/image_generator.h"
#include "core/train/kernel_trainer.h"
#include "core/util/public_rng.h"

namespace dpcurator::train {

// DP-kernel's defaults for images, tuned with bench/fmnist at epsilon 1
// (docs/benchmarks.md, "Fashion-MNIST"; the runs behind each are listed in
// bench/fmnist.cc): `dpcurator train kernel` on image datasets and the
// bench's kernel rows both start from them.
inline constexpr int kImageKernelSteps = 4000;             // T
inline constexpr double kImageKernelBatch = 1200.0;        // m, q = m / n
inline constexpr int kImageKernelPoints = 64;              // M per step
inline constexpr double kImageKernelLearningRate = 1e-3;   // Adam
inline constexpr double kImageKernelAverageDecay = 0.998;  // parameter average
// The latent code's width (the paper's nz = 10; 5 in the one-shot methods).
inline constexpr int kImageKernelCodeDim = 10;
// The parallel variant (issue 27; one unconditional generator per class,
// each on its own part's session): query points per class and step. An
// unconditional step is ONE Gaussian-process factor over all its points,
// whose cost grows fast with M (docs/privacy.md 2.10: 0.023 s at M = 16,
// 0.13 s at 32, seconds at 64 at d = 784), and K classes run K times the
// steps, so 16 keeps a 10-class run inside 30 minutes on 2 cores.
inline constexpr int kImageKernelParallelPoints = 16;

struct ImageKernelGeneratorOptions {
  // Polyak averaging of the parameters (an exponential moving average with
  // this decay per step; 0 turns it off). Every DP-kernel step's gradient
  // carries fresh GP noise (docs/privacy.md 2.10), so the raw parameters
  // keep a noise-driven fluctuation of the size of the learning rate; the
  // average cancels most of it (post-processing of the releases: free).
  // UseAverage() installs it.
  double average_decay = 0.0;
  // Labels of each step's M points: balanced (each class floor(M / C) or
  // one more, the extra ones at a random offset) rather than i.i.d.
  // uniform. The conditional release is one independent GP per class
  // (KernelWitnessKind::Run), so a class with one point in a step gets no
  // generated-generated term and a class with none no signal at all.
  bool balanced_labels = false;
};

// The image generator of issue 14 (fc or conv, float32) as DP-kernel's
// PointGenerator (issue 16): its pixels in [0, 1] are the encoded features
// of an image row (one grey channel, row-major), its labels are drawn
// uniformly or balanced per step (the conditional variant's generated
// labels, dp-kernel-frdp.md sec. 2). Shared by `dpcurator train kernel` and
// bench/fmnist, so the benchmark measures the generator the CLI trains.
// Adam runs on a double copy of the parameters (nn::Adam is double),
// written back each step.
class ImageKernelGenerator final : public PointGenerator {
 public:
  // A freshly initialised generator (ImageGenerator::Create) with Adam at
  // `learning_rate`.
  static absl::StatusOr<ImageKernelGenerator> Create(const ImageGeneratorOptions& image_options,
                                                     double learning_rate,
                                                     ImageKernelGeneratorOptions options);

  ImageKernelGenerator(ImageGenerator generator, nn::Adam adam,
                       ImageKernelGeneratorOptions options = {})
      : generator_(std::move(generator)),
        adam_(std::move(adam)),
        options_(options),
        master_(generator_.parameters().cast<double>()),
        average_(master_),
        grad_(Eigen::VectorXf::Zero(generator_.num_parameters())) {}

  // `count` latent codes and labels; the labels come back empty for a
  // one-class generator (the unconditional variant's query has none).
  void Sample(int count, PublicRng* rng, Eigen::MatrixXd* points,
              Eigen::VectorXi* labels) override;
  void Update(const Eigen::MatrixXd& point_gradients) override;

  // For learning-rate schedules between steps (nn::Adam::SetLearningRate).
  absl::Status SetLearningRate(double learning_rate) {
    return adam_.SetLearningRate(learning_rate);
  }

  // Training-mode passes UseAverage runs: BN's momentum is 0.1, so 64
  // passes forget the raw parameters' statistics to 0.9^64 ~ 1e-3.
  static constexpr int kRecalibrationBatches = 64;

  // After training, with average_decay > 0: installs the averaged
  // parameters and re-estimates the BN running statistics for them
  // (kRecalibrationBatches training-mode passes of `batch_size` codes,
  // public randomness seeded from the generator's seed): the statistics
  // gathered during training belong to the raw parameters. Without
  // averaging it does nothing.
  void UseAverage(int batch_size);

  const ImageGenerator& generator() const { return generator_; }
  // For sampling after training (ImageGenerator::Sample is not const: it
  // reuses its buffers).
  ImageGenerator& mutable_generator() { return generator_; }
  // The first failed Adam step (a non-finite gradient), if any.
  const absl::Status& status() const { return status_; }

 private:
  ImageGenerator generator_;
  nn::Adam adam_;
  ImageKernelGeneratorOptions options_;
  Eigen::VectorXd master_;
  Eigen::VectorXd average_;
  Eigen::VectorXf grad_;
  ImageGeneratorWorkspace workspace_;
  absl::Status status_;
};

}  // namespace dpcurator::train

#endif  // DPCURATOR_CORE_TRAIN_IMAGE_KERNEL_GENERATOR_H_
