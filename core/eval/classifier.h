#ifndef DPCURATOR_CORE_EVAL_CLASSIFIER_H_
#define DPCURATOR_CORE_EVAL_CLASSIFIER_H_

#include <string>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpcurator::eval {

// A fitted probabilistic classifier on dense features. Fitted models are made
// only by each class's static Fit(), which validates its inputs and options,
// so an object that exists is usable.
class Classifier {
 public:
  virtual ~Classifier() = default;

  // Short identifier for reports ("logistic_regression").
  virtual std::string name() const = 0;
  virtual int num_classes() const = 0;
  virtual int num_features() const = 0;

  // Class probabilities, n x num_classes(), rows summing to 1. Fails when `x`
  // has the wrong number of columns or a non-finite value.
  virtual absl::StatusOr<Eigen::MatrixXd> PredictProba(
      const Eigen::MatrixXd& x) const = 0;
};

// Checks shared by every Fit(): n > 0 rows, y.size() == n, labels in
// [0, num_classes), num_classes >= 2, all features finite.
absl::Status ValidateTrainingData(const Eigen::MatrixXd& x, const Eigen::VectorXi& y,
                                  int num_classes);

// Checks shared by every PredictProba(): column count and finiteness.
absl::Status ValidatePredictionInput(const Eigen::MatrixXd& x, int num_features);

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_CLASSIFIER_H_
