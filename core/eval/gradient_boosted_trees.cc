#include "core/eval/gradient_boosted_trees.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/eval/internal/histogram_tree.h"
#include "core/util/sigmoid.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::eval {
namespace {

// Hessians are floored here so that confident rows keep a usable weight.
constexpr double kMinHessian = 1e-16;
// Floor on class frequencies for the initial logits.
constexpr double kMinPrior = 1e-6;

using internal::GradHess;

// Row-wise softmax in place.
void Softmax(Eigen::MatrixXd* logits) {
  for (Eigen::Index i = 0; i < logits->rows(); ++i) {
    const double max_logit = logits->row(i).maxCoeff();
    logits->row(i) = (logits->row(i).array() - max_logit).exp();
    logits->row(i) /= logits->row(i).sum();
  }
}

}  // namespace

absl::Status GradientBoostedTreesOptions::Validate() const {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(num_rounds, "Number of rounds"));
  if (max_depth < 1 || max_depth > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("Max depth must be in [1, 16], got ", max_depth));
  }
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(learning_rate, "Learning rate"));
  if (max_bins < 2 || max_bins > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("Max bins must be in [2, 256], got ", max_bins));
  }
  DPC_RETURN_IF_ERROR(ValidateFiniteNonNegative(min_child_weight, "Min child weight"));
  DPC_RETURN_IF_ERROR(ValidateFiniteNonNegative(l2, "L2"));
  DPC_RETURN_IF_ERROR(ValidateFiniteNonNegative(min_split_gain, "Min split gain"));
  if (num_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Number of threads must be non-negative, got ", num_threads));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GradientBoostedTrees>> GradientBoostedTrees::Fit(
    const Eigen::MatrixXd& x, const Eigen::VectorXi& y, int num_classes,
    const GradientBoostedTreesOptions& options) {
  DPC_RETURN_IF_ERROR(options.Validate());
  DPC_RETURN_IF_ERROR(ValidateTrainingData(x, y, num_classes));
  // Row indices are int and sparse offsets uint32_t.
  if (x.rows() > INT32_MAX || x.size() > static_cast<Eigen::Index>(UINT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Gradient-boosted trees support at most 2^32 - 1 feature cells and 2^31 - 1 rows, got ",
        x.rows(), " x ", x.cols()));
  }
  std::unique_ptr<GradientBoostedTrees> model(new GradientBoostedTrees());
  const int n = static_cast<int>(x.rows());
  const int k_outputs = num_classes == 2 ? 1 : num_classes;
  model->num_classes_ = num_classes;
  model->num_features_ = static_cast<int>(x.cols());
  model->num_outputs_ = k_outputs;

  // Initial logits: the log-odds (binary) or log-priors (multiclass).
  Eigen::VectorXd counts = Eigen::VectorXd::Zero(num_classes);
  for (int i = 0; i < n; ++i) counts(y(i)) += 1.0;
  const Eigen::VectorXd priors = (counts / n).cwiseMax(kMinPrior).cwiseMin(1 - kMinPrior);
  model->base_score_.resize(k_outputs);
  if (k_outputs == 1) {
    model->base_score_(0) = std::log(priors(1) / priors(0));
  } else {
    model->base_score_ = priors.array().log().matrix().transpose();
  }

  const int threads = options.num_threads > 0
                          ? options.num_threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const internal::BinnedFeatures binned = internal::BinFeatures(x, options.max_bins);
  internal::TreeOptions tree_options;
  tree_options.max_depth = options.max_depth;
  tree_options.max_bins = options.max_bins;
  tree_options.min_child_weight = options.min_child_weight;
  tree_options.l2 = options.l2;
  tree_options.min_split_gain = options.min_split_gain;
  tree_options.leaf_scale = options.learning_rate;
  internal::TreeBuilder builder(binned, n, tree_options, threads);
  Eigen::MatrixXd scores = model->base_score_.replicate(n, 1);  // n x K logits.
  Eigen::MatrixXd proba(n, k_outputs);
  std::vector<GradHess> gh(n);
  std::vector<double> leaf_value(n);
  model->trees_.reserve(static_cast<size_t>(options.num_rounds) * k_outputs);
  for (int round = 0; round < options.num_rounds; ++round) {
    if (k_outputs == 1) {
      for (int i = 0; i < n; ++i) proba(i, 0) = Sigmoid(scores(i, 0));
    } else {
      proba = scores;
      Softmax(&proba);
    }
    for (int k = 0; k < k_outputs; ++k) {
      const int positive = k_outputs == 1 ? 1 : k;
      for (int i = 0; i < n; ++i) {
        const double prob = proba(i, k);
        gh[i].g = prob - (y(i) == positive ? 1.0 : 0.0);
        gh[i].h = std::max(prob * (1 - prob), kMinHessian);
      }
      model->trees_.push_back(builder.Build(gh, &leaf_value));
      for (int i = 0; i < n; ++i) scores(i, k) += leaf_value[i];
    }
  }
  return model;
}

int GradientBoostedTrees::num_leaves() const {
  int leaves = 0;
  for (const std::vector<Node>& tree : trees_) {
    for (const Node& node : tree) leaves += node.feature < 0 ? 1 : 0;
  }
  return leaves;
}

absl::StatusOr<Eigen::MatrixXd> GradientBoostedTrees::PredictProba(const Eigen::MatrixXd& x) const {
  DPC_RETURN_IF_ERROR(ValidatePredictionInput(x, num_features_));
  Eigen::MatrixXd scores = base_score_.replicate(x.rows(), 1);
  for (size_t t = 0; t < trees_.size(); ++t) {
    const std::vector<Node>& tree = trees_[t];
    const int k = static_cast<int>(t % num_outputs_);
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      scores(i, k) += internal::FindLeaf(tree, x, i).value;
    }
  }
  Eigen::MatrixXd proba(x.rows(), num_classes_);
  if (num_outputs_ == 1) {
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      proba(i, 1) = Sigmoid(scores(i, 0));
      proba(i, 0) = Sigmoid(-scores(i, 0));
    }
  } else {
    proba = scores;
    Softmax(&proba);
  }
  return proba;
}

}  // namespace dpcurator::eval
