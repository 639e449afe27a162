#include "core/eval/image_judge.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/eval/cnn_classifier.h"
#include "core/eval/logistic_regression.h"
#include "core/util/status_macros.h"

namespace dpcurator::eval {

Eigen::MatrixXf ResizeImages(const Eigen::MatrixXf& images, int height, int width, int size) {
  Eigen::MatrixXf out(images.rows(), Eigen::Index{size} * size);
  auto axis = [size](int in, int d, int* lo, int* hi, float* frac) {
    const float src = std::clamp((static_cast<float>(d) + 0.5f) * static_cast<float>(in) /
                                         static_cast<float>(size) -
                                     0.5f,
                                 0.0f, static_cast<float>(in - 1));
    *lo = static_cast<int>(src);
    *hi = std::min(*lo + 1, in - 1);
    *frac = src - static_cast<float>(*lo);
  };
  for (int y = 0; y < size; ++y) {
    int y0, y1;
    float fy;
    axis(height, y, &y0, &y1, &fy);
    for (int x = 0; x < size; ++x) {
      int x0, x1;
      float fx;
      axis(width, x, &x0, &x1, &fx);
      out.col(y * size + x) =
          (1 - fy) * ((1 - fx) * images.col(y0 * width + x0) + fx * images.col(y0 * width + x1)) +
          fy * ((1 - fx) * images.col(y1 * width + x0) + fx * images.col(y1 * width + x1));
    }
  }
  return out;
}

namespace {

absl::Status CheckSet(const char* what, const Eigen::MatrixXf& images, absl::Span<const int> labels,
                      int pixels, int num_classes) {
  if (images.cols() != pixels) {
    return absl::InvalidArgumentError(absl::StrCat(what, " images have ", images.cols(),
                                                   " pixels; the judge expects ", pixels));
  }
  if (static_cast<size_t>(images.rows()) != labels.size() || labels.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " set: ", images.rows(), " images and ",
                                                   labels.size(), " labels (need one per image)"));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat(what, " label ", labels[i], " of image ", i,
                                                     " is outside [0, ", num_classes, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ImageJudgement> JudgeImages(const Eigen::MatrixXf& train_images,
                                           absl::Span<const int> train_labels,
                                           const Eigen::MatrixXf& test_images,
                                           absl::Span<const int> test_labels, int height,
                                           int width, int num_classes,
                                           const ImageJudgeOptions& options) {
  if (options.seeds < 1 || options.seeds > 100) {
    return absl::InvalidArgumentError("the judge's seeds must be 1 to 100");
  }
  if (options.resize < 0 || options.resize > 1024) {
    return absl::InvalidArgumentError("the judge's resize must be 0 (none) to 1024");
  }
  if (height <= 0 || width <= 0) return absl::InvalidArgumentError("image shape must be positive");
  DPC_RETURN_IF_ERROR(CheckSet("training", train_images, train_labels, height * width,
                               num_classes));
  DPC_RETURN_IF_ERROR(CheckSet("test", test_images, test_labels, height * width, num_classes));
  const bool resized = options.resize > 0;
  const Eigen::MatrixXf cnn_train =
      resized ? ResizeImages(train_images, height, width, options.resize) : Eigen::MatrixXf();
  const Eigen::MatrixXf cnn_test =
      resized ? ResizeImages(test_images, height, width, options.resize) : Eigen::MatrixXf();
  ImageJudgement judgement;
  for (int seed = 0; seed < options.seeds; ++seed) {
    CnnClassifierOptions cnn;
    cnn.height = resized ? options.resize : height;
    cnn.width = resized ? options.resize : width;
    cnn.num_classes = num_classes;
    cnn.epochs = options.epochs;
    cnn.threads = options.threads;
    cnn.seed = static_cast<uint64_t>(seed);
    DPC_ASSIGN_OR_RETURN(CnnClassifier model,
                         CnnClassifier::Train(resized ? cnn_train : train_images, train_labels,
                                              cnn));
    DPC_ASSIGN_OR_RETURN(double accuracy,
                         model.Accuracy(resized ? cnn_test : test_images, test_labels));
    judgement.cnn_accuracy.push_back(accuracy);
    if (options.progress) options.progress(seed, accuracy);
  }
  const double n = static_cast<double>(judgement.cnn_accuracy.size());
  for (double a : judgement.cnn_accuracy) judgement.cnn_mean += a / n;
  if (judgement.cnn_accuracy.size() > 1) {
    double squares = 0;
    for (double a : judgement.cnn_accuracy) {
      squares += (a - judgement.cnn_mean) * (a - judgement.cnn_mean);
    }
    judgement.cnn_sd = std::sqrt(squares / (n - 1));
  }
  if (options.lr_iterations > 0) {
    // scikit-learn's LogisticRegression defaults (C = 1 on the summed loss,
    // i.e. l2 = 1/n on the mean), as DP-MERF's evaluation calls it.
    LogisticRegressionOptions lr;
    lr.l2 = 1.0 / static_cast<double>(train_images.rows());
    lr.max_iterations = options.lr_iterations;
    const Eigen::VectorXi y = Eigen::Map<const Eigen::VectorXi>(
        train_labels.data(), static_cast<Eigen::Index>(train_labels.size()));
    DPC_ASSIGN_OR_RETURN(auto model,
                         LogisticRegression::Fit(train_images.cast<double>(), y, num_classes, lr));
    DPC_ASSIGN_OR_RETURN(Eigen::MatrixXd proba, model->PredictProba(test_images.cast<double>()));
    int64_t correct = 0;
    for (Eigen::Index i = 0; i < proba.rows(); ++i) {
      Eigen::Index best = 0;
      proba.row(i).maxCoeff(&best);
      correct += best == test_labels[static_cast<size_t>(i)];
    }
    judgement.lr_accuracy = static_cast<double>(correct) / static_cast<double>(proba.rows());
  }
  return judgement;
}

}  // namespace dpcurator::eval
