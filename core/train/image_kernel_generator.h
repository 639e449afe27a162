#ifndef DPCURATOR_CORE_TRAIN_IMAGE_KERNEL_GENERATOR_H_
#define DPCURATOR_CORE_TRAIN_IMAGE_KERNEL_GENERATOR_H_

#include <utility>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "core/nn/adam.h"
#include "core/train/image_generator.h"
#include "core/train/kernel_trainer.h"
#include "core/util/public_rng.h"

namespace dpcurator::train {

// The image generator of issue 14 (fc or conv, float32) as DP-kernel's
// PointGenerator (issue 16): its pixels in [0, 1] are the encoded features
// of an image row (one grey channel, row-major), its labels are drawn
// uniformly (the conditional variant's generated labels, dp-kernel-frdp.md
// sec. 2). Shared by `dpcurator train kernel` and bench/fmnist, so the
// benchmark measures the generator the CLI trains. Adam runs on a double
// copy of the parameters (nn::Adam is double), written back each step.
class ImageKernelGenerator final : public PointGenerator {
 public:
  ImageKernelGenerator(ImageGenerator generator, nn::Adam adam)
      : generator_(std::move(generator)),
        adam_(std::move(adam)),
        master_(generator_.parameters().cast<double>()),
        grad_(Eigen::VectorXf::Zero(generator_.num_parameters())) {}

  // `count` latent codes and uniform labels; the labels come back empty for
  // a one-class generator (the unconditional variant's query has none).
  void Sample(int count, PublicRng* rng, Eigen::MatrixXd* points,
              Eigen::VectorXi* labels) override;
  void Update(const Eigen::MatrixXd& point_gradients) override;

  // For learning-rate schedules between steps (nn::Adam::SetLearningRate).
  absl::Status SetLearningRate(double learning_rate) {
    return adam_.SetLearningRate(learning_rate);
  }

  const ImageGenerator& generator() const { return generator_; }
  // For sampling after training (ImageGenerator::Sample is not const: it
  // reuses its buffers).
  ImageGenerator& mutable_generator() { return generator_; }
  // The first failed Adam step (a non-finite gradient), if any.
  const absl::Status& status() const { return status_; }

 private:
  ImageGenerator generator_;
  nn::Adam adam_;
  Eigen::VectorXd master_;
  Eigen::VectorXf grad_;
  ImageGeneratorWorkspace workspace_;
  absl::Status status_;
};

}  // namespace dpcurator::train

#endif  // DPCURATOR_CORE_TRAIN_IMAGE_KERNEL_GENERATOR_H_
