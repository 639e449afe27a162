#ifndef DPCURATOR_CORE_EVAL_RANDOM_FOREST_H_
#define DPCURATOR_CORE_EVAL_RANDOM_FOREST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/eval/classifier.h"
#include "core/eval/internal/histogram_tree.h"

namespace dpcurator::eval {

struct RandomForestOptions {
  // Bootstrap samples; a multiclass model grows one tree per class on each.
  int num_trees = 50;
  // Depth of every tree, 1..16. Deeper trees cost more histogram memory
  // (one p x max_bins histogram per node of a level).
  int max_depth = 10;
  // Quantile bins per feature, 2..256 (as GradientBoostedTreesOptions).
  int max_bins = 32;
  // Split candidates drawn at each node; 0 = round(sqrt(p)), scikit-learn's
  // max_features = "sqrt" for classifiers (Breiman 2001, §4, "Forest-RI").
  int features_per_split = 0;
  // Least bootstrap count in a child (scikit-learn's min_samples_leaf).
  double min_child_weight = 1.0;
  // Seed of the bootstrap samples and the split candidates (public
  // randomness): the fit is a function of the data, the options and it.
  uint64_t seed = 1;
  // Threads, each growing whole trees; 0 = std::thread::hardware_concurrency().
  // Tree t draws from its own generator, seeded by (seed, t), so the fitted
  // model does not depend on it.
  int num_threads = 0;

  absl::Status Validate() const;
};

// Random forest for classification (Breiman 2001): every tree is grown on a
// bootstrap sample of the rows (n draws with replacement, kept as per-row
// counts w, not copies) with a random subset of the features as candidates
// at each node, to max_depth; the predicted probability of a class is the
// mean over the trees of its bootstrap share in the row's leaf (scikit-learn's
// predict_proba). The trees are the histogram trees of GradientBoostedTrees
// (core/eval/internal/histogram_tree.h) grown on g = -w [y = k], h = w with
// no L2 penalty: the split gain G_L^2/H_L + G_R^2/H_R - G^2/H is then the
// decrease of the weighted squared error of the indicator [y = k], which for
// a binary label is the Gini decrease (Breiman et al. 1984) times n / 2, and
// the leaf value -G/H is the class share. A binary problem grows one tree per
// sample (class 1); a K-class one grows K one-vs-rest trees per sample, whose
// mean shares are normalised to sum to 1.
class RandomForest : public Classifier {
 public:
  static absl::StatusOr<std::unique_ptr<RandomForest>> Fit(
      const Eigen::MatrixXd& x, const Eigen::VectorXi& y, int num_classes,
      const RandomForestOptions& options = {});

  std::string name() const override { return "random_forest"; }
  int num_classes() const override { return num_classes_; }
  int num_features() const override { return num_features_; }
  absl::StatusOr<Eigen::MatrixXd> PredictProba(const Eigen::MatrixXd& x) const override;

  int num_trees() const { return static_cast<int>(trees_.size()); }

 private:
  RandomForest() = default;

  int num_classes_ = 0;
  int num_features_ = 0;
  // Trees per bootstrap sample: 1 (binary, class 1's share) or num_classes_.
  int num_outputs_ = 0;
  // Tree t belongs to output t % num_outputs_.
  std::vector<std::vector<internal::TreeNode>> trees_;
};

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_RANDOM_FOREST_H_
