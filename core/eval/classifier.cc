#include "core/eval/classifier.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace dpcurator::eval {

absl::Status ValidateTrainingData(const Eigen::MatrixXd& x, const Eigen::VectorXi& y,
                                  int num_classes) {
  if (num_classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_classes must be at least 2, got ", num_classes));
  }
  if (x.rows() == 0) {
    return absl::InvalidArgumentError("Training data must have at least one row");
  }
  if (y.size() != x.rows()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Training labels have ", y.size(), " entries but features have ", x.rows(), " rows"));
  }
  for (Eigen::Index i = 0; i < y.size(); ++i) {
    if (y(i) < 0 || y(i) >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Training label of row ", i, " is ", y(i), ", outside [0, ", num_classes, ")"));
    }
  }
  if (!x.allFinite()) {
    return absl::InvalidArgumentError("Training features must be finite (found NaN or inf)");
  }
  return absl::OkStatus();
}

absl::Status ValidatePredictionInput(const Eigen::MatrixXd& x, int num_features) {
  if (x.cols() != num_features) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Model was fitted on ", num_features, " features but input has ", x.cols()));
  }
  if (!x.allFinite()) {
    return absl::InvalidArgumentError("Features must be finite (found NaN or inf)");
  }
  return absl::OkStatus();
}

}  // namespace dpcurator::eval
