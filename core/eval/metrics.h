#ifndef DPCURATOR_CORE_EVAL_METRICS_H_
#define DPCURATOR_CORE_EVAL_METRICS_H_

#include "Eigen/Core"
#include "absl/status/statusor.h"

namespace dpcurator::eval {

// Classification metrics computed from *scores* (probabilities), not hard
// predictions. DP-MERF's and PEARL's code computed ROC/PRC from hard 0/1
// predictions (papers/dp-merf.md §3.2, papers/pearl.md §3.2, "[code]"), which
// makes ROC-AUC equal balanced accuracy; we do not reproduce that.
//
// Binary functions treat row i as positive when labels(i) == positive_label.
// They fail with InvalidArgument when sizes differ, a score is not finite, or
// the metric is undefined (no positive, or for ROC-AUC no negative, rows).

// Area under the ROC curve by the Mann-Whitney U statistic with midranks, so
// tied scores between a positive and a negative count one half (Hanley &
// McNeil 1982; equals sklearn.metrics.roc_auc_score):
//   AUC = (sum of positive ranks - P(P+1)/2) / (P N).
absl::StatusOr<double> RocAuc(const Eigen::VectorXd& scores, const Eigen::VectorXi& labels,
                              int positive_label = 1);

// Average precision, sklearn's step definition (sklearn.metrics.
// average_precision_score): with thresholds at the distinct scores in
// decreasing order, AP = sum_k (R_k - R_{k-1}) P_k, R_0 = 0, where rows with
// equal scores enter together. No interpolation.
absl::StatusOr<double> AveragePrecision(const Eigen::VectorXd& scores,
                                        const Eigen::VectorXi& labels,
                                        int positive_label = 1);

// Multiclass metrics from an n x C score matrix; labels in [0, C).
//
// Macro one-vs-rest ROC-AUC: the mean of RocAuc(scores.col(k), labels, k) over
// the classes k that occur in `labels` (a class absent from the test labels
// has no defined AUC and is skipped; sklearn instead refuses). Fails when
// fewer than two classes occur. For C == 2 it equals the binary RocAuc of
// column 1.
absl::StatusOr<double> MacroRocAuc(const Eigen::MatrixXd& scores, const Eigen::VectorXi& labels);

// Macro one-vs-rest average precision over the classes present in `labels`.
absl::StatusOr<double> MacroAveragePrecision(const Eigen::MatrixXd& scores,
                                             const Eigen::VectorXi& labels);

// Fraction of rows whose arg-max score (lowest index on ties) equals the label.
absl::StatusOr<double> Accuracy(const Eigen::MatrixXd& scores, const Eigen::VectorXi& labels);

// Macro F1 of the arg-max predictions: mean over the classes that occur in the
// labels or the predictions of F1_k = 2 TP / (2 TP + FP + FN) (sklearn's
// f1_score(average="macro") with its default label set).
absl::StatusOr<double> MacroF1(const Eigen::MatrixXd& scores, const Eigen::VectorXi& labels);

// Row-wise arg-max, lowest index on ties.
Eigen::VectorXi ArgMax(const Eigen::MatrixXd& scores);

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_METRICS_H_
