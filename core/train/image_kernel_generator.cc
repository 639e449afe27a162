#include "core/train/image_kernel_generator.h"

#include <cstdint>
#include <utility>

namespace dpcurator::train {
namespace {

// Offsets the recalibration's codes from the training's (both public).
constexpr uint64_t kRecalibrationStream = 7919;

}  // namespace

absl::StatusOr<ImageKernelGenerator> ImageKernelGenerator::Create(
    const ImageGeneratorOptions& image_options, double learning_rate,
    ImageKernelGeneratorOptions options) {
  absl::StatusOr<ImageGenerator> generator = ImageGenerator::Create(image_options);
  if (!generator.ok()) return generator.status();
  nn::AdamOptions adam_options;
  adam_options.learning_rate = learning_rate;
  absl::StatusOr<nn::Adam> adam = nn::Adam::Create(generator->num_parameters(), adam_options);
  if (!adam.ok()) return adam.status();
  return ImageKernelGenerator(*std::move(generator), *std::move(adam), options);
}

void ImageKernelGenerator::Sample(int count, PublicRng* rng, Eigen::MatrixXd* points,
                                  Eigen::VectorXi* labels) {
  Eigen::MatrixXd z(count, generator_.code_dim());
  rng->FillNormal(z);
  const auto classes = static_cast<uint64_t>(generator_.num_classes());
  labels->resize(count);
  if (options_.balanced_labels) {
    const int offset = static_cast<int>(rng->UniformInt(classes));
    for (int i = 0; i < count; ++i) {
      (*labels)(i) = static_cast<int>((static_cast<uint64_t>(i + offset)) % classes);
    }
  } else {
    for (int i = 0; i < count; ++i) (*labels)(i) = static_cast<int>(rng->UniformInt(classes));
  }
  const Eigen::MatrixXf z_f = z.cast<float>();
  *points = generator_.Forward(z_f, *labels, /*training=*/true, &workspace_).cast<double>();
  if (generator_.num_classes() == 1) labels->resize(0);
}

void ImageKernelGenerator::Update(const Eigen::MatrixXd& point_gradients) {
  grad_.setZero();
  generator_.Backward(point_gradients.cast<float>(), &workspace_, grad_);
  status_.Update(adam_.Step(master_, grad_.cast<double>()));
  generator_.parameters() = master_.cast<float>();
  if (options_.average_decay > 0.0) {
    average_ = options_.average_decay * average_ + (1.0 - options_.average_decay) * master_;
  }
}

void ImageKernelGenerator::UseAverage(int batch_size) {
  if (options_.average_decay <= 0.0) return;
  master_ = average_;
  generator_.parameters() = master_.cast<float>();
  PublicRng rng(generator_.options().seed + kRecalibrationStream);
  Eigen::MatrixXd points;
  Eigen::VectorXi labels;
  for (int b = 0; b < kRecalibrationBatches; ++b) Sample(batch_size, &rng, &points, &labels);
}

}  // namespace dpcurator::train
