#include "core/eval/naive_bayes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"

namespace dpcurator::eval {

absl::Status NaiveBayesOptions::Validate() const {
  if (!std::isfinite(var_smoothing) || var_smoothing <= 0.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Variance smoothing must be finite and positive, got ", var_smoothing));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NaiveBayes>> NaiveBayes::Fit(const Eigen::MatrixXd& x,
                                                            const Eigen::VectorXi& y,
                                                            int num_classes,
                                                            const NaiveBayesOptions& options) {
  DPC_RETURN_IF_ERROR(options.Validate());
  DPC_RETURN_IF_ERROR(ValidateTrainingData(x, y, num_classes));
  std::unique_ptr<NaiveBayes> model(new NaiveBayes());
  const Eigen::Index n = x.rows();
  const Eigen::Index p = x.cols();
  model->num_classes_ = num_classes;
  model->num_features_ = static_cast<int>(p);

  // Two passes (means, then squared deviations) rather than E[x^2] - E[x]^2,
  // which cancels badly for a feature with a large mean and small spread.
  Eigen::VectorXd counts = Eigen::VectorXd::Zero(num_classes);
  Eigen::MatrixXd means = Eigen::MatrixXd::Zero(num_classes, p);
  for (Eigen::Index i = 0; i < n; ++i) {
    counts(y(i)) += 1.0;
    means.row(y(i)) += x.row(i);
  }
  for (int k = 0; k < num_classes; ++k) {
    if (counts(k) > 0) means.row(k) /= counts(k);
  }
  Eigen::MatrixXd variances = Eigen::MatrixXd::Zero(num_classes, p);
  for (Eigen::Index i = 0; i < n; ++i) {
    variances.row(y(i)) += (x.row(i) - means.row(y(i))).array().square().matrix();
  }
  // eps: var_smoothing times the largest feature variance over all rows
  // (scikit-learn's GaussianNB.epsilon_); var_smoothing itself when every
  // feature is constant, so that every variance stays positive.
  const Eigen::RowVectorXd overall_mean = x.colwise().mean();
  const double max_variance =
      p > 0 ? ((x.rowwise() - overall_mean).array().square().colwise().sum() / n).maxCoeff()
            : 0.0;
  const double epsilon =
      options.var_smoothing * (max_variance > 0.0 ? max_variance : 1.0);

  model->log_constant_.resize(num_classes);
  for (int k = 0; k < num_classes; ++k) {
    if (counts(k) == 0) {
      means.row(k).setZero();
      variances.row(k).setOnes();
      model->log_constant_(k) = -std::numeric_limits<double>::infinity();
      continue;
    }
    variances.row(k) = (variances.row(k) / counts(k)).array() + epsilon;
    model->log_constant_(k) =
        std::log(counts(k) / static_cast<double>(n)) -
        0.5 * (2.0 * std::numbers::pi * variances.row(k).array()).log().sum();
  }
  model->inverse_variances_ = variances.cwiseInverse();
  model->means_ = std::move(means);
  model->variances_ = std::move(variances);
  return model;
}

absl::StatusOr<Eigen::MatrixXd> NaiveBayes::PredictProba(const Eigen::MatrixXd& x) const {
  DPC_RETURN_IF_ERROR(ValidatePredictionInput(x, num_features_));
  // Joint log likelihoods, then a softmax over the classes seen in training.
  Eigen::MatrixXd proba(x.rows(), num_classes_);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    double max_log = -std::numeric_limits<double>::infinity();
    for (int k = 0; k < num_classes_; ++k) {
      double log_joint = log_constant_(k);
      if (std::isfinite(log_joint)) {
        double squares = 0.0;
        for (int j = 0; j < num_features_; ++j) {
          const double d = x(i, j) - means_(k, j);
          squares += d * d * inverse_variances_(k, j);
        }
        log_joint -= 0.5 * squares;
        max_log = std::max(max_log, log_joint);
      }
      proba(i, k) = log_joint;
    }
    double total = 0.0;
    for (int k = 0; k < num_classes_; ++k) {
      proba(i, k) = std::isfinite(proba(i, k)) ? std::exp(proba(i, k) - max_log) : 0.0;
      total += proba(i, k);
    }
    proba.row(i) /= total;
  }
  return proba;
}

}  // namespace dpcurator::eval
