#include "core/eval/random_forest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/util/public_rng.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::eval {
namespace {

// The seed of tree t's generator: SplitMix64's increment (the golden ratio,
// Steele et al. 2014) times t + 1 added to the forest's seed; PublicRng's
// SplitMix64 seeding then spreads neighbouring seeds apart.
uint64_t TreeSeed(uint64_t seed, int tree) {
  return seed + 0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(tree) + 1);
}

}  // namespace

absl::Status RandomForestOptions::Validate() const {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(num_trees, "Number of trees"));
  if (max_depth < 1 || max_depth > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("Max depth must be in [1, 16], got ", max_depth));
  }
  if (max_bins < 2 || max_bins > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("Max bins must be in [2, 256], got ", max_bins));
  }
  if (features_per_split < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Features per split must be non-negative (0 for sqrt), got ", features_per_split));
  }
  DPC_RETURN_IF_ERROR(ValidateFiniteNonNegative(min_child_weight, "Min child weight"));
  if (num_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Number of threads must be non-negative, got ", num_threads));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RandomForest>> RandomForest::Fit(
    const Eigen::MatrixXd& x, const Eigen::VectorXi& y, int num_classes,
    const RandomForestOptions& options) {
  DPC_RETURN_IF_ERROR(options.Validate());
  DPC_RETURN_IF_ERROR(ValidateTrainingData(x, y, num_classes));
  // Row indices are int and sparse offsets uint32_t (as GradientBoostedTrees).
  if (x.rows() > INT32_MAX || x.size() > static_cast<Eigen::Index>(UINT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Random forests support at most 2^32 - 1 feature cells and 2^31 - 1 rows, got ",
        x.rows(), " x ", x.cols()));
  }
  std::unique_ptr<RandomForest> model(new RandomForest());
  const int n = static_cast<int>(x.rows());
  const int p = static_cast<int>(x.cols());
  const int k_outputs = num_classes == 2 ? 1 : num_classes;
  model->num_classes_ = num_classes;
  model->num_features_ = p;
  model->num_outputs_ = k_outputs;

  internal::TreeOptions tree_options;
  tree_options.max_depth = options.max_depth;
  tree_options.max_bins = options.max_bins;
  tree_options.min_child_weight = options.min_child_weight;
  tree_options.l2 = 0.0;
  tree_options.min_split_gain = 0.0;
  tree_options.leaf_scale = 1.0;
  tree_options.features_per_split =
      options.features_per_split > 0
          ? std::min(options.features_per_split, p)
          : std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(p)))));

  const internal::BinnedFeatures binned = internal::BinFeatures(x, options.max_bins);
  model->trees_.resize(static_cast<size_t>(options.num_trees) * k_outputs);
  const int requested = options.num_threads > 0
                            ? options.num_threads
                            : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int threads = std::min(requested, options.num_trees);
  // Worker w grows trees w, w + threads, ...; every buffer is allocated once
  // per worker, none per tree or row.
  auto grow = [&](int worker) {
    internal::TreeBuilder builder(binned, n, tree_options, 1);
    std::vector<int> counts(n);
    std::vector<internal::GradHess> gh(n);
    std::vector<double> leaf_value(n);
    for (int t = worker; t < options.num_trees; t += threads) {
      PublicRng rng(TreeSeed(options.seed, t));
      std::fill(counts.begin(), counts.end(), 0);
      for (int draw = 0; draw < n; ++draw) ++counts[rng.UniformInt(static_cast<uint64_t>(n))];
      for (int k = 0; k < k_outputs; ++k) {
        const int positive = k_outputs == 1 ? 1 : k;
        for (int i = 0; i < n; ++i) {
          const double w = counts[i];
          gh[i].g = y(i) == positive ? -w : 0.0;
          gh[i].h = w;
        }
        model->trees_[static_cast<size_t>(t) * k_outputs + k] =
            builder.Build(gh, &leaf_value, &rng);
      }
    }
  };
  std::vector<std::thread> workers;
  for (int w = 1; w < threads; ++w) workers.emplace_back(grow, w);
  grow(0);
  for (std::thread& worker : workers) worker.join();
  return model;
}

absl::StatusOr<Eigen::MatrixXd> RandomForest::PredictProba(const Eigen::MatrixXd& x) const {
  DPC_RETURN_IF_ERROR(ValidatePredictionInput(x, num_features_));
  Eigen::MatrixXd share = Eigen::MatrixXd::Zero(x.rows(), num_outputs_);
  for (size_t t = 0; t < trees_.size(); ++t) {
    const int k = static_cast<int>(t % num_outputs_);
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      share(i, k) += internal::FindLeaf(trees_[t], x, i).value;
    }
  }
  const double samples = static_cast<double>(trees_.size() / num_outputs_);
  Eigen::MatrixXd proba(x.rows(), num_classes_);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    if (num_outputs_ == 1) {
      const double positive = std::clamp(share(i, 0) / samples, 0.0, 1.0);
      proba(i, 0) = 1.0 - positive;
      proba(i, 1) = positive;
      continue;
    }
    const double total = share.row(i).sum();
    if (total > 0.0) {
      proba.row(i) = share.row(i) / total;
    } else {
      proba.row(i).setConstant(1.0 / num_classes_);
    }
  }
  return proba;
}

}  // namespace dpcurator::eval
