#include "core/eval/metrics.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"

namespace dpcurator::eval {
namespace {

absl::Status ValidateBinaryInput(const Eigen::VectorXd& scores, const Eigen::VectorXi& labels,
                                 int positive_label, const char* metric) {
  if (scores.size() != labels.size()) {
    return absl::InvalidArgumentError(absl::StrCat(metric, ": ", scores.size(),
                                                   " scores but ", labels.size(), " labels"));
  }
  if (!scores.allFinite()) {
    return absl::InvalidArgumentError(absl::StrCat(metric, ": scores must be finite"));
  }
  const Eigen::Index positives = (labels.array() == positive_label).count();
  if (positives == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        metric, " is undefined: no row has the positive label ", positive_label));
  }
  return absl::OkStatus();
}

absl::Status ValidateMulticlassInput(const Eigen::MatrixXd& scores, const Eigen::VectorXi& labels,
                                     const char* metric) {
  if (scores.rows() != labels.size()) {
    return absl::InvalidArgumentError(absl::StrCat(metric, ": ", scores.rows(),
                                                   " score rows but ", labels.size(), " labels"));
  }
  if (labels.size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(metric, " is undefined on zero rows"));
  }
  if (!scores.allFinite()) {
    return absl::InvalidArgumentError(absl::StrCat(metric, ": scores must be finite"));
  }
  for (Eigen::Index i = 0; i < labels.size(); ++i) {
    if (labels(i) < 0 || labels(i) >= scores.cols()) {
      return absl::InvalidArgumentError(absl::StrCat(metric, ": label of row ", i, " is ",
                                                     labels(i), ", outside [0, ",
                                                     scores.cols(), ")"));
    }
  }
  return absl::OkStatus();
}

// Indices sorted by decreasing score; ties keep index order (irrelevant to
// the results, which treat tied groups as one).
std::vector<Eigen::Index> OrderByDecreasingScore(const Eigen::VectorXd& scores) {
  std::vector<Eigen::Index> order(scores.size());
  std::iota(order.begin(), order.end(), Eigen::Index{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](Eigen::Index a, Eigen::Index b) { return scores(a) > scores(b); });
  return order;
}

// Mean of a binary metric over the classes present in `labels`.
template <typename Metric>
absl::StatusOr<double> MacroOverPresentClasses(const Eigen::MatrixXd& scores,
                                               const Eigen::VectorXi& labels,
                                               const char* name, Metric metric) {
  DPC_RETURN_IF_ERROR(ValidateMulticlassInput(scores, labels, name));
  int present = 0;
  for (int k = 0; k < scores.cols(); ++k) present += (labels.array() == k).any() ? 1 : 0;
  if (present < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " is undefined: the labels contain ", present, " class(es), need at least 2"));
  }
  double sum = 0.0;
  for (int k = 0; k < scores.cols(); ++k) {
    if (!(labels.array() == k).any()) continue;
    DPC_ASSIGN_OR_RETURN(const double value,
                         metric(Eigen::VectorXd(scores.col(k)), labels, k));
    sum += value;
  }
  return sum / present;
}

}  // namespace

absl::StatusOr<double> RocAuc(const Eigen::VectorXd& scores, const Eigen::VectorXi& labels,
                              int positive_label) {
  DPC_RETURN_IF_ERROR(ValidateBinaryInput(scores, labels, positive_label, "ROC-AUC"));
  const double positives = static_cast<double>((labels.array() == positive_label).count());
  const double negatives = static_cast<double>(labels.size()) - positives;
  if (negatives == 0) {
    return absl::InvalidArgumentError("ROC-AUC is undefined: every row is positive");
  }
  // Ascending ranks 1..n; a tied group of size m starting at rank r gets the
  // midrank r + (m - 1) / 2.
  std::vector<Eigen::Index> order = OrderByDecreasingScore(scores);
  std::reverse(order.begin(), order.end());
  double positive_rank_sum = 0.0;
  size_t i = 0;
  while (i < order.size()) {
    size_t j = i;
    int group_positives = 0;
    while (j < order.size() && scores(order[j]) == scores(order[i])) {
      if (labels(order[j]) == positive_label) ++group_positives;
      ++j;
    }
    const double midrank = 0.5 * (static_cast<double>(i + 1) + static_cast<double>(j));
    positive_rank_sum += group_positives * midrank;
    i = j;
  }
  return (positive_rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

absl::StatusOr<double> AveragePrecision(const Eigen::VectorXd& scores,
                                        const Eigen::VectorXi& labels, int positive_label) {
  DPC_RETURN_IF_ERROR(ValidateBinaryInput(scores, labels, positive_label, "Average precision"));
  const double positives = static_cast<double>((labels.array() == positive_label).count());
  const std::vector<Eigen::Index> order = OrderByDecreasingScore(scores);
  double true_positives = 0.0;
  double predicted = 0.0;
  double previous_recall = 0.0;
  double ap = 0.0;
  size_t i = 0;
  while (i < order.size()) {
    size_t j = i;
    while (j < order.size() && scores(order[j]) == scores(order[i])) {
      if (labels(order[j]) == positive_label) true_positives += 1.0;
      predicted += 1.0;
      ++j;
    }
    const double recall = true_positives / positives;
    const double precision = true_positives / predicted;
    ap += (recall - previous_recall) * precision;
    previous_recall = recall;
    i = j;
  }
  return ap;
}

absl::StatusOr<double> MacroRocAuc(const Eigen::MatrixXd& scores, const Eigen::VectorXi& labels) {
  return MacroOverPresentClasses(
      scores, labels, "Macro ROC-AUC",
      [](const Eigen::VectorXd& s, const Eigen::VectorXi& l, int k) { return RocAuc(s, l, k); });
}

absl::StatusOr<double> MacroAveragePrecision(const Eigen::MatrixXd& scores,
                                             const Eigen::VectorXi& labels) {
  return MacroOverPresentClasses(scores, labels, "Macro average precision",
                                 [](const Eigen::VectorXd& s, const Eigen::VectorXi& l, int k) {
                                   return AveragePrecision(s, l, k);
                                 });
}

Eigen::VectorXi ArgMax(const Eigen::MatrixXd& scores) {
  Eigen::VectorXi predicted = Eigen::VectorXi::Zero(scores.rows());
  for (Eigen::Index i = 0; i < scores.rows(); ++i) {
    int best = 0;
    for (int k = 1; k < scores.cols(); ++k) {
      if (scores(i, k) > scores(i, best)) best = k;
    }
    predicted(i) = best;
  }
  return predicted;
}

absl::StatusOr<double> Accuracy(const Eigen::MatrixXd& scores, const Eigen::VectorXi& labels) {
  DPC_RETURN_IF_ERROR(ValidateMulticlassInput(scores, labels, "Accuracy"));
  const Eigen::VectorXi predicted = ArgMax(scores);
  return static_cast<double>((predicted.array() == labels.array()).count()) /
         static_cast<double>(labels.size());
}

absl::StatusOr<double> MacroF1(const Eigen::MatrixXd& scores, const Eigen::VectorXi& labels) {
  DPC_RETURN_IF_ERROR(ValidateMulticlassInput(scores, labels, "Macro F1"));
  const Eigen::VectorXi predicted = ArgMax(scores);
  const Eigen::Index num_classes = scores.cols();
  std::vector<double> tp(num_classes, 0.0), fp(num_classes, 0.0), fn(num_classes, 0.0);
  for (Eigen::Index i = 0; i < labels.size(); ++i) {
    if (predicted(i) == labels(i)) {
      tp[labels(i)] += 1.0;
    } else {
      fp[predicted(i)] += 1.0;
      fn[labels(i)] += 1.0;
    }
  }
  double sum = 0.0;
  int counted = 0;
  for (Eigen::Index k = 0; k < num_classes; ++k) {
    const double denominator = 2.0 * tp[k] + fp[k] + fn[k];
    if (denominator == 0.0) continue;  // Class neither true nor predicted.
    sum += 2.0 * tp[k] / denominator;
    ++counted;
  }
  return sum / counted;  // counted >= 1 since labels is non-empty.
}

}  // namespace dpcurator::eval
