#ifndef DPCURATOR_CORE_EVAL_EVALUATOR_H_
#define DPCURATOR_CORE_EVAL_EVALUATOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/eval/fidelity.h"
#include "core/eval/gradient_boosted_trees.h"
#include "core/eval/logistic_regression.h"
#include "core/eval/naive_bayes.h"
#include "core/eval/paper_metrics.h"
#include "core/eval/random_forest.h"

namespace dpcurator::eval {

enum class ClassifierKind {
  kLogisticRegression,
  kGradientBoostedTrees,
  kNaiveBayes,
  kRandomForest,
};

// "logistic_regression", "gradient_boosted_trees", "naive_bayes",
// "random_forest".
std::string ClassifierKindName(ClassifierKind kind);

struct EvalOptions {
  // Classifiers trained for the utility block, in report order. Naive Bayes
  // and the random forest joined in issue 38: Gaussian naive Bayes is the
  // judge that sees hard zeros (a (level, class) pair real rows hold and the
  // synthetic rows never do), which logistic regression and boosting hardly
  // feel; the forest is the bagged, unboosted tree family users reach for.
  std::vector<ClassifierKind> classifiers = {
      ClassifierKind::kLogisticRegression, ClassifierKind::kGradientBoostedTrees,
      ClassifierKind::kNaiveBayes, ClassifierKind::kRandomForest};
  LogisticRegressionOptions logistic_regression;
  GradientBoostedTreesOptions gradient_boosted_trees;
  NaiveBayesOptions naive_bayes;
  RandomForestOptions random_forest;

  bool compute_utility = true;
  bool compute_fidelity = true;
  FidelityOptions fidelity;
  // DP-auto-GAN's three metrics and issue 17's shape checks
  // (core/eval/paper_metrics.h), for schemas without an image column.
  bool compute_paper_metrics = true;
  PaperMetricsOptions paper_metrics;

  // A training table whose labels hold a single class cannot train a
  // classifier (a collapsed generator produces one).
  enum class SingleClassPolicy {
    // Score the test rows with the constant predictor "always that class":
    // every score ties, so ROC-AUC is exactly 0.5, average precision is the
    // positive prevalence of the test set, and accuracy that class's share.
    // The result is flagged (ClassifierResult::single_class_training) and a
    // warning is added, so the fidelity block is still reported.
    kReportChance,
    // Fail with FailedPrecondition naming the class.
    kFail,
  };
  SingleClassPolicy single_class_policy = SingleClassPolicy::kReportChance;

  absl::Status Validate() const;
};

// One row of the utility table: a classifier trained on one source and
// tested on the real test rows.
struct ClassifierResult {
  std::string classifier;    // ClassifierKindName().
  std::string train_source;  // "synthetic" or "real".
  int64_t train_rows = 0;
  // Binary: ROC-AUC and average precision of the positive class (level 1 of
  // the label). Multiclass: macro one-vs-rest over the classes present in
  // the test set. Both from predicted probabilities, not hard labels.
  double roc_auc = 0.0;
  double pr_auc = 0.0;
  // From the arg-max predictions.
  double accuracy = 0.0;
  double macro_f1 = 0.0;
  double fit_seconds = 0.0;
  // Label classes that occur in the training rows.
  int training_classes = 0;
  // True when the training rows held one class and the constant predictor
  // was scored instead (EvalOptions::SingleClassPolicy::kReportChance).
  bool single_class_training = false;
};

struct EvalReport {
  int num_classes = 0;        // Levels of the label (1 for an unlabelled schema).
  std::string positive_class;  // Binary: the name of label level 1; else "".
  int feature_dim = 0;        // Width of the encoded features.
  int64_t synthetic_rows = 0;
  int64_t real_test_rows = 0;
  int64_t real_train_rows = 0;  // 0 when no real training table was given.
  // Train-on-synthetic-test-on-real rows first, then the "real" baseline
  // rows (DP-MERF Table 2's "Real" column) when a real training table was
  // given; empty for an unlabelled schema or when utility is off.
  std::vector<ClassifierResult> utility;
  // Synthetic vs real test rows.
  std::optional<FidelityReport> fidelity;
  // Real training vs real test rows: the sampling floor the synthetic
  // fidelity numbers should be read against. Set when a real training table
  // was given and fidelity is on.
  std::optional<FidelityReport> real_train_fidelity;
  // ComputePaperMetrics(synthetic vs real test), and the same for the real
  // training rows (the paper's "real" scores: dimension-wise prediction
  // trained on real rows, and the sampling floor of the distances). Unset
  // for an image schema or when the metrics are off; a failure of these
  // metrics is a warning, not an error of the evaluation.
  std::optional<PaperMetrics> paper_metrics;
  std::optional<PaperMetrics> real_train_paper_metrics;
  // Human-readable notes (single-class training, skipped utility, ...).
  std::vector<std::string> warnings;
};

// Evaluates synthetic rows against held-out real rows of the same schema
// (papers/dp-merf.md §3.2 and papers/pearl.md §3.2 protocol, with our own
// classifiers and score-based metrics):
//   - utility: each classifier in options.classifiers is trained on the
//     synthetic rows and tested on real_test (TSTR); features are
//     data::EncodeFeatures over FeatureLayout::ForFeatures(schema), labels
//     data::ExtractLabels. With `real_train`, the same classifiers are also
//     trained on it (the "real" baseline rows).
//   - fidelity: ComputeFidelity(schema, synthetic, real_test).
//   - paper metrics: ComputePaperMetrics(schema, synthetic, real_test), and
//     with `real_train` also ComputePaperMetrics(schema, *real_train,
//     real_test).
// Fails with InvalidArgument when a table does not match the schema (see
// ValidateTableForSchema) or the real test set lacks the classes a metric
// needs (binary: both), and per options.single_class_policy.
absl::StatusOr<EvalReport> Evaluate(const data::Schema& schema, const data::Table& synthetic,
                                    const data::Table& real_test, const EvalOptions& options,
                                    const data::Table* real_train = nullptr);

// Trains one classifier on (train_x, train_y) and scores it on the test
// features: the building block of Evaluate's utility rows. num_classes >= 2.
// train_source and train_rows of the result are left for the caller.
absl::StatusOr<ClassifierResult> TrainAndScore(ClassifierKind kind,
                                               const Eigen::MatrixXd& train_x,
                                               const Eigen::VectorXi& train_y,
                                               const Eigen::MatrixXd& test_x,
                                               const Eigen::VectorXi& test_y, int num_classes,
                                               const EvalOptions& options);

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_EVALUATOR_H_
