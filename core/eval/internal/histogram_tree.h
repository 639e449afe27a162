#ifndef DPCURATOR_CORE_EVAL_INTERNAL_HISTOGRAM_TREE_H_
#define DPCURATOR_CORE_EVAL_INTERNAL_HISTOGRAM_TREE_H_

// The histogram tree shared by GradientBoostedTrees and RandomForest: quantile
// binning of the features, and one depth-limited regression tree grown on
// per-row (gradient, hessian) pairs with XGBoost's second-order split gain
// (Chen & Guestrin 2016, Eq. 7). A random forest grows the same tree on
// g = -w [y = k], h = w (bootstrap weights w, Breiman 2001): its gain is then
// the weighted reduction of the squared error of the class indicator, which
// for a binary label is the Gini impurity decrease (n p (1 - p) = n Gini / 2),
// and its leaf value -G / H the bagged class share.

#include <cstdint>
#include <vector>

#include "Eigen/Core"
#include "core/util/public_rng.h"

namespace dpcurator::eval::internal {

struct GradHess {
  double g = 0.0;
  double h = 0.0;
};

// A node of a fitted tree; a leaf has feature == -1. Rows with
// x[feature] < threshold go left.
struct TreeNode {
  int feature = -1;
  double threshold = 0.0;
  int left = -1;
  int right = -1;
  double value = 0.0;  // Leaf value, leaf_scale included.
};

// The leaf of `x`'s row `i` in `tree`.
inline const TreeNode& FindLeaf(const std::vector<TreeNode>& tree, const Eigen::MatrixXd& x,
                                Eigen::Index i) {
  int node = 0;
  while (tree[node].feature >= 0) {
    node = x(i, tree[node].feature) < tree[node].threshold ? tree[node].left : tree[node].right;
  }
  return tree[node];
}

struct TreeOptions {
  int max_depth = 5;
  int max_bins = 64;  // The binning's; 2..256.
  double min_child_weight = 1.0;
  double l2 = 1.0;
  double min_split_gain = 0.0;
  // Leaf value = -leaf_scale * G / (H + l2): the shrinkage of boosting, 1 for
  // a forest.
  double leaf_scale = 1.0;
  // Features drawn (without replacement) at each node as split candidates,
  // 0 for all. As in Breiman (2001) and scikit-learn, a node none of whose
  // drawn features splits it validly goes on through the rest of its
  // permutation until one does.
  int features_per_split = 0;
};

// Quantile binning of every feature on the training set (LightGBM's
// histogram algorithm, Ke et al. 2017, Algorithm 1). Cut points lie halfway
// between consecutive distinct training values, so bin(x) = #{cuts <= x} and
// "bin(x) <= b" is exactly "x < cuts[b]".
struct BinnedFeatures {
  std::vector<std::vector<double>> cuts;  // Per feature, increasing.
  std::vector<uint8_t> bins;              // Column-major, n x p.
  // Most frequent bin of each feature (lowest on ties). Histograms skip it
  // and recover it as the node total minus the other bins, so the work per
  // row is its number of non-default bins (Ke et al. 2017, §2.1, "only
  // O(#non_zero_data)" for sparse features): one-hot blocks cost one entry.
  std::vector<int> default_bin;
  int num_rows = 0;
};

BinnedFeatures BinFeatures(const Eigen::MatrixXd& x, int max_bins);

// Non-default (feature, bin) cells of each row, for one group of features,
// as histogram indices f * stride + bin (compressed sparse rows).
struct SparseRows {
  int feature_begin = 0;
  int feature_end = 0;
  std::vector<uint32_t> offsets;  // num_rows + 1.
  std::vector<uint32_t> cells;
};

// Grows one depth-limited regression tree on per-row (g, h) pairs, level by
// level; all buffers are allocated once per builder, not per tree or row.
class TreeBuilder {
 public:
  TreeBuilder(const BinnedFeatures& binned, int num_rows, const TreeOptions& options,
              int num_threads);

  // Returns the tree; *leaf_value_of_row receives each training row's leaf
  // value (leaf_scale included). `feature_rng` draws the split candidates
  // when options.features_per_split is below the feature count (then it
  // must not be null).
  std::vector<TreeNode> Build(const std::vector<GradHess>& gh,
                              std::vector<double>* leaf_value_of_row,
                              PublicRng* feature_rng = nullptr);

 private:
  struct Pending {
    int id;
    int begin;
    int end;  // rows_[begin, end) belong to this node.
    GradHess sum;
    int histogram;  // Index into histograms_.
  };
  struct Split {
    int feature = -1;
    int bin = 0;
    double gain = 0.0;
    GradHess left;
  };

  int AcquireHistogram();
  double LeafObjective(const GradHess& s) const { return s.g * s.g / (s.h + options_.l2); }
  void ScanFeature(const Pending& node, int f, double parent, Split* best) const;
  Split BestSplit(const Pending& node, PublicRng* feature_rng);
  int Partition(const Pending& node, const Split& split);
  void MakeLeaf(const Pending& node, std::vector<TreeNode>* tree,
                std::vector<double>* leaf_value_of_row);
  void BuildHistograms(const std::vector<Pending*>& nodes);

  const BinnedFeatures& binned_;
  const int num_rows_;
  const int num_features_;
  const int stride_;
  const TreeOptions options_;
  const std::vector<SparseRows> sparse_;
  const std::vector<GradHess>* gh_ = nullptr;
  std::vector<int> rows_;
  std::vector<int> scratch_;
  std::vector<std::vector<GradHess>> histograms_;
  std::vector<int> free_histograms_;
  // A permutation of the features, reshuffled in part at each node when
  // features_per_split samples them.
  std::vector<int> feature_order_;
};

}  // namespace dpcurator::eval::internal

#endif  // DPCURATOR_CORE_EVAL_INTERNAL_HISTOGRAM_TREE_H_
