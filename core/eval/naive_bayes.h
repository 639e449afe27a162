#ifndef DPCURATOR_CORE_EVAL_NAIVE_BAYES_H_
#define DPCURATOR_CORE_EVAL_NAIVE_BAYES_H_

#include <memory>
#include <string>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/eval/classifier.h"

namespace dpcurator::eval {

struct NaiveBayesOptions {
  // Added to every per-class variance, as a fraction of the largest variance
  // of a feature over all training rows (scikit-learn's GaussianNB
  // var_smoothing, default 1e-9).
  double var_smoothing = 1e-9;

  absl::Status Validate() const;
};

// Gaussian naive Bayes on the encoded features (as scikit-learn's
// GaussianNB): each feature is Gaussian given the class, with the class's
// maximum-likelihood mean and variance plus eps = var_smoothing *
// max_j Var(x_j), and
//   log P(y = k | x) = log pi_k - 1/2 sum_j [log(2 pi s2_kj) + (x_j - mu_kj)^2 / s2_kj] - log Z
// (Hastie et al., Elements of Statistical Learning, §6.6.3), pi_k the class
// share of the training rows; classes absent from them get probability 0.
//
// Why the encoded features and not per-column categorical likelihoods: this
// is the model the users' scikit-learn judges fit on one-hot rows, and it is
// the one that sees hard zeros. A one-hot feature that is always 0 in a
// class's training rows has variance eps (about 1e-10 here), so one real row
// with that (level, class) combination costs the class about 1 / eps in log
// likelihood: synthetic rows that never hold a combination real rows hold
// show up as a collapsed ROC-AUC (issue 38: 0.533 on one AIM seed), which a
// Laplace-smoothed categorical likelihood would smooth away.
class NaiveBayes : public Classifier {
 public:
  static absl::StatusOr<std::unique_ptr<NaiveBayes>> Fit(const Eigen::MatrixXd& x,
                                                         const Eigen::VectorXi& y,
                                                         int num_classes,
                                                         const NaiveBayesOptions& options = {});

  std::string name() const override { return "naive_bayes"; }
  int num_classes() const override { return num_classes_; }
  int num_features() const override { return num_features_; }
  absl::StatusOr<Eigen::MatrixXd> PredictProba(const Eigen::MatrixXd& x) const override;

  // Per class (rows) and feature (columns): the mean and the smoothed
  // variance; a class absent from the training rows has mean 0, variance 1.
  const Eigen::MatrixXd& means() const { return means_; }
  const Eigen::MatrixXd& variances() const { return variances_; }

 private:
  NaiveBayes() = default;

  int num_classes_ = 0;
  int num_features_ = 0;
  Eigen::MatrixXd means_;
  Eigen::MatrixXd variances_;
  Eigen::MatrixXd inverse_variances_;
  // log pi_k - 1/2 sum_j log(2 pi s2_kj); -inf for a class absent from the
  // training rows.
  Eigen::VectorXd log_constant_;
};

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_NAIVE_BAYES_H_
