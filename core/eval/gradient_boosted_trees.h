#ifndef DPCURATOR_CORE_EVAL_GRADIENT_BOOSTED_TREES_H_
#define DPCURATOR_CORE_EVAL_GRADIENT_BOOSTED_TREES_H_

#include <memory>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/eval/classifier.h"
#include "core/eval/internal/histogram_tree.h"

namespace dpcurator::eval {

struct GradientBoostedTreesOptions {
  // Boosting rounds; a multiclass model grows one tree per class per round.
  int num_rounds = 200;
  // Depth of every tree (a depth-d tree has at most 2^d leaves), 1..16.
  int max_depth = 5;
  // Shrinkage nu applied to every leaf value (Friedman 2001, §5).
  double learning_rate = 0.1;
  // Quantile bins per feature, 2..256, cut points computed on the training set.
  int max_bins = 64;
  // Least hessian sum in a child (XGBoost's min_child_weight).
  double min_child_weight = 1.0;
  // L2 penalty lambda on leaf values (Chen & Guestrin 2016, Eq. 2).
  double l2 = 1.0;
  // Least loss reduction for a split (gamma in Chen & Guestrin 2016, Eq. 7).
  double min_split_gain = 0.0;
  // Threads for histogram building; 0 = std::thread::hardware_concurrency().
  // The fitted model does not depend on it. Default 1: threads are forked
  // and joined per tree level, which pays on an idle machine with large n
  // but loses badly when the cores are shared (bench/eval_bench.cc:
  // 30000 x 110 fits in about 1 s on one thread).
  int num_threads = 1;

  absl::Status Validate() const;
};

// Histogram-based gradient-boosted decision trees for classification, in the
// manner of LightGBM (Ke et al. 2017, §2: histogram split finding, and the
// sibling histogram by subtraction from the parent) with XGBoost's
// second-order leaf values and split gain (Chen & Guestrin 2016, Eq. 5-7):
//   w* = -G / (H + lambda),
//   gain = 1/2 [G_L^2/(H_L+lambda) + G_R^2/(H_R+lambda) - G^2/(H+lambda)] - gamma.
// Binary problems boost the log-odds under the logistic loss; multiclass ones
// boost one logit per class under the softmax cross-entropy, with the diagonal
// of the softmax Hessian p_k(1 - p_k) (Friedman 2001, Algorithm 6, without
// its (K-1)/K factor). Trees grow level by level to max_depth. There is no
// sampling: the fit is deterministic and independent of num_threads.
class GradientBoostedTrees : public Classifier {
 public:
  static absl::StatusOr<std::unique_ptr<GradientBoostedTrees>> Fit(
      const Eigen::MatrixXd& x, const Eigen::VectorXi& y, int num_classes,
      const GradientBoostedTreesOptions& options = {});

  std::string name() const override { return "gradient_boosted_trees"; }
  int num_classes() const override { return num_classes_; }
  int num_features() const override { return num_features_; }
  absl::StatusOr<Eigen::MatrixXd> PredictProba(const Eigen::MatrixXd& x) const override;

  int num_trees() const { return static_cast<int>(trees_.size()); }
  // Total number of leaves over all trees.
  int num_leaves() const;

  // A node of a fitted tree (core/eval/internal/histogram_tree.h); leaf
  // values include the shrinkage.
  using Node = internal::TreeNode;

 private:
  GradientBoostedTrees() = default;

  int num_classes_ = 0;
  int num_features_ = 0;
  // Number of logits boosted: 1 (binary) or num_classes_.
  int num_outputs_ = 0;
  Eigen::RowVectorXd base_score_;  // Initial logits.
  // Tree t belongs to output t % num_outputs_.
  std::vector<std::vector<Node>> trees_;
};

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_GRADIENT_BOOSTED_TREES_H_
