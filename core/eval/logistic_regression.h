#ifndef DPCURATOR_CORE_EVAL_LOGISTIC_REGRESSION_H_
#define DPCURATOR_CORE_EVAL_LOGISTIC_REGRESSION_H_

#include <memory>
#include <string>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/eval/classifier.h"

namespace dpcurator::eval {

struct LogisticRegressionOptions {
  enum class Multiclass {
    kMultinomial,  // One softmax model (cross-entropy), fitted by L-BFGS.
    kOneVsRest,    // One binary model per class; probabilities renormalised.
  };

  // L2 penalty lambda in  mean_i loss_i + (lambda / 2) ||W||^2  on the
  // standardised features; the intercepts are not penalised. 1e-4 is weak
  // (sklearn's default C = 1 is lambda = 1 / n, i.e. 3e-5 at n = 30000) but
  // keeps the optimum finite on separable data and on one-hot blocks, which
  // are collinear with the intercept.
  double l2 = 1e-4;
  Multiclass multiclass = Multiclass::kMultinomial;
  // Newton iterations (binary) or L-BFGS iterations (multinomial, or binary
  // with more than kMaxNewtonFeatures features).
  int max_iterations = 500;
  // Converged when max |gradient_i| of the objective is at most this.
  double gradient_tolerance = 1e-7;

  // "L2 must be finite and non-negative", ... (core/util/validation.h).
  absl::Status Validate() const;
};

// L2-regularised logistic regression on internally standardised features
// (mean and standard deviation fitted on the training set; a constant column
// is only centred). Binary problems are fitted by Newton's method (IRLS,
// Hastie, Tibshirani & Friedman, ESL 2nd ed. §4.4.1) with a backtracking
// line search; multinomial ones by L-BFGS on the softmax cross-entropy
// (ESL §4.4, Eq. 4.17-4.18). Deterministic.
class LogisticRegression : public Classifier {
 public:
  // Above this many features a binary problem uses L-BFGS instead of Newton
  // (the Newton step solves a (p+1) x (p+1) system).
  static constexpr int kMaxNewtonFeatures = 500;

  // Fits on x (n x p) and y (labels in [0, num_classes), num_classes >= 2).
  // Classes absent from y get vanishing (but positive) probability.
  static absl::StatusOr<std::unique_ptr<LogisticRegression>> Fit(
      const Eigen::MatrixXd& x, const Eigen::VectorXi& y, int num_classes,
      const LogisticRegressionOptions& options = {});

  std::string name() const override { return "logistic_regression"; }
  int num_classes() const override { return num_classes_; }
  int num_features() const override { return static_cast<int>(mean_.size()); }
  absl::StatusOr<Eigen::MatrixXd> PredictProba(const Eigen::MatrixXd& x) const override;

  // Coefficients in the original (unstandardised) feature units, p x K, and
  // intercepts (K), where K = 1 for a binary model (the log-odds of class 1)
  // and K = num_classes otherwise (softmax logits, or per-class log-odds for
  // one-vs-rest).
  Eigen::MatrixXd coefficients() const;
  Eigen::VectorXd intercepts() const;

  // Optimiser iterations (summed over one-vs-rest models) and whether every
  // fit met the gradient tolerance.
  int iterations() const { return iterations_; }
  bool converged() const { return converged_; }

 private:
  LogisticRegression() = default;
  Eigen::MatrixXd Logits(const Eigen::MatrixXd& x) const;

  int num_classes_ = 0;
  LogisticRegressionOptions::Multiclass multiclass_ =
      LogisticRegressionOptions::Multiclass::kMultinomial;
  Eigen::RowVectorXd mean_;
  Eigen::RowVectorXd scale_;
  Eigen::MatrixXd weights_;  // On standardised features, p x K.
  Eigen::RowVectorXd bias_;  // K.
  int iterations_ = 0;
  bool converged_ = false;
};

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_LOGISTIC_REGRESSION_H_
