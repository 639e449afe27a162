#ifndef DPCURATOR_CORE_EVAL_IMAGE_JUDGE_H_
#define DPCURATOR_CORE_EVAL_IMAGE_JUDGE_H_

// The image judge of issue 14 item 4, in one place for the CLI (`dpcurator
// eval images`) and the benchmarks: train the papers' CNN (cnn_classifier.h)
// on one labelled image set (synthetic, or real for the baseline) and test
// it on real held-out images, over several seeds, plus multinomial logistic
// regression, the first classifier of DP-MERF's image table (dp-merf.md
// Sec. 3.5). Everything it reads is public (synthetic images) or the
// evaluator's own held-out data; it never touches a curator's rows.

#include <functional>
#include <optional>
#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dpcurator::eval {

// Bilinear resize of each row (a height x width grey image, row-major) to
// size x size, with the half-pixel-centre convention of PIL's and
// torchvision's Resize: source coordinate (d + 0.5) * in / out - 0.5,
// clamped to the image.
Eigen::MatrixXf ResizeImages(const Eigen::MatrixXf& images, int height, int width, int size);

struct ImageJudgeOptions {
  // Seeds of the CNN (its initialisation, shuffles and dropout): the
  // result is their mean and standard deviation. 1 to 100.
  int seeds = 5;
  // The CNN sees images resized to resize x resize (0: as they are). 32 is
  // the DP-kernel paper's pipeline (dp-kernel-frdp.md Sec. 3) and the
  // configuration in which our judge reaches 88% on real Fashion-MNIST
  // (bench/fmnist_judge: 88.16 +- 0.22% at 32, 87.82 +- 0.17% at 28).
  int resize = 32;
  // CNN epochs (the papers': 5) and threads (cnn_classifier.h).
  int epochs = 5;
  int threads = 2;
  // Logistic regression on the raw pixels: L-BFGS iterations (0: skip).
  int lr_iterations = 100;
  // Called after each seed with its accuracy (progress for long runs).
  std::function<void(int seed, double accuracy)> progress;
};

struct ImageJudgement {
  std::vector<double> cnn_accuracy;  // one per seed, in [0, 1]
  double cnn_mean = 0.0;
  double cnn_sd = 0.0;  // sample standard deviation; 0 for one seed
  std::optional<double> lr_accuracy;
};

// Trains on (train_images, train_labels) and tests on (test_images,
// test_labels); images are n x (height * width) in [0, 1], labels in
// [0, num_classes). InvalidArgument names a shape or label problem.
absl::StatusOr<ImageJudgement> JudgeImages(const Eigen::MatrixXf& train_images,
                                           absl::Span<const int> train_labels,
                                           const Eigen::MatrixXf& test_images,
                                           absl::Span<const int> test_labels, int height,
                                           int width, int num_classes,
                                           const ImageJudgeOptions& options = {});

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_IMAGE_JUDGE_H_
