#include "core/eval/gradient_boosted_trees.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::eval {
namespace {

// Hessians are floored here so that confident rows keep a usable weight.
constexpr double kMinHessian = 1e-16;
// Below this many (row, feature) updates a histogram pass runs on one thread.
constexpr int64_t kMinParallelWork = 1 << 20;
// Floor on class frequencies for the initial logits.
constexpr double kMinPrior = 1e-6;

struct GradHess {
  double g = 0.0;
  double h = 0.0;
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

// Non-default (feature, bin) cells of each row, for one group of features,
// as histogram indices f * stride + bin (compressed sparse rows).
struct SparseRows {
  int feature_begin = 0;
  int feature_end = 0;
  std::vector<uint32_t> offsets;  // num_rows + 1.
  std::vector<uint32_t> cells;
};

std::vector<double> QuantileCuts(const Eigen::VectorXd& column, int max_bins) {
  std::vector<double> sorted(column.data(), column.data() + column.size());
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> distinct;
  for (double v : sorted) {
    if (distinct.empty() || v != distinct.back()) distinct.push_back(v);
  }
  std::vector<double> cuts;
  if (static_cast<int>(distinct.size()) <= max_bins) {
    for (size_t i = 0; i + 1 < distinct.size(); ++i) {
      cuts.push_back(0.5 * (distinct[i] + distinct[i + 1]));
    }
    return cuts;
  }
  // Cut k sits just below the (k / max_bins)-quantile, i.e. between that
  // value and the largest distinct value beneath it; duplicates are dropped,
  // so heavy ties yield fewer bins.
  const size_t n = sorted.size();
  for (int k = 1; k < max_bins; ++k) {
    const double q = sorted[k * n / max_bins];
    const auto it = std::lower_bound(distinct.begin(), distinct.end(), q);
    if (it == distinct.begin()) continue;
    const double cut = 0.5 * (*(it - 1) + *it);
    if (cuts.empty() || cut > cuts.back()) cuts.push_back(cut);
  }
  return cuts;
}

BinnedFeatures BinFeatures(const Eigen::MatrixXd& x, int max_bins) {
  const Eigen::Index n = x.rows();
  const Eigen::Index p = x.cols();
  BinnedFeatures binned;
  binned.num_rows = static_cast<int>(n);
  binned.cuts.resize(p);
  binned.default_bin.resize(p);
  binned.bins.resize(static_cast<size_t>(n * p));
  std::vector<int64_t> counts;
  for (Eigen::Index f = 0; f < p; ++f) {
    binned.cuts[f] = QuantileCuts(x.col(f), max_bins);
    const std::vector<double>& cuts = binned.cuts[f];
    uint8_t* column = binned.bins.data() + f * n;
    counts.assign(cuts.size() + 1, 0);
    for (Eigen::Index i = 0; i < n; ++i) {
      column[i] = static_cast<uint8_t>(std::upper_bound(cuts.begin(), cuts.end(), x(i, f)) -
                                       cuts.begin());
      ++counts[column[i]];
    }
    binned.default_bin[f] =
        static_cast<int>(std::max_element(counts.begin(), counts.end()) - counts.begin());
  }
  return binned;
}

// Splits the features into at most `groups` contiguous groups with about
// equal numbers of non-default cells, one per histogram thread.
std::vector<SparseRows> BuildSparseRows(const BinnedFeatures& binned, int stride, int groups) {
  const int n = binned.num_rows;
  const int p = static_cast<int>(binned.cuts.size());
  std::vector<int64_t> feature_cells(p, 0);
  int64_t total = 0;
  for (int f = 0; f < p; ++f) {
    const uint8_t* column = binned.bins.data() + static_cast<size_t>(f) * n;
    for (int i = 0; i < n; ++i) feature_cells[f] += column[i] != binned.default_bin[f];
    total += feature_cells[f];
  }
  std::vector<SparseRows> result;
  int f = 0;
  for (int g = 0; g < groups && f < p; ++g) {
    SparseRows rows;
    rows.feature_begin = f;
    const int64_t target = total * (g + 1) / groups;
    int64_t cumulative = 0;
    for (const SparseRows& r : result) {
      for (int k = r.feature_begin; k < r.feature_end; ++k) cumulative += feature_cells[k];
    }
    do {
      cumulative += feature_cells[f];
      ++f;
    } while (f < p && (g == groups - 1 || cumulative + feature_cells[f] <= target));
    rows.feature_end = f;
    rows.offsets.assign(static_cast<size_t>(n) + 1, 0);
    for (int k = rows.feature_begin; k < rows.feature_end; ++k) {
      const uint8_t* column = binned.bins.data() + static_cast<size_t>(k) * n;
      for (int i = 0; i < n; ++i) rows.offsets[i + 1] += column[i] != binned.default_bin[k];
    }
    for (int i = 0; i < n; ++i) rows.offsets[i + 1] += rows.offsets[i];
    rows.cells.resize(rows.offsets[n]);
    std::vector<uint32_t> next(rows.offsets.begin(), rows.offsets.end() - 1);
    for (int k = rows.feature_begin; k < rows.feature_end; ++k) {
      const uint8_t* column = binned.bins.data() + static_cast<size_t>(k) * n;
      for (int i = 0; i < n; ++i) {
        if (column[i] != binned.default_bin[k]) {
          rows.cells[next[i]++] = static_cast<uint32_t>(k) * stride + column[i];
        }
      }
    }
    result.push_back(std::move(rows));
  }
  return result;
}

using Node = GradientBoostedTrees::Node;

// Grows one depth-limited regression tree on per-row (g, h) pairs.
class TreeBuilder {
 public:
  TreeBuilder(const BinnedFeatures& binned, int num_rows, const GradientBoostedTreesOptions& options,
              int num_threads)
      : binned_(binned),
        num_rows_(num_rows),
        num_features_(static_cast<int>(binned.cuts.size())),
        stride_(options.max_bins),
        options_(options),
        sparse_(BuildSparseRows(binned, options.max_bins,
                                std::max(1, std::min(num_threads, num_features_)))),
        rows_(num_rows),
        scratch_(num_rows) {}

  // Returns the tree; *leaf_value_of_row receives each training row's leaf
  // value (shrinkage included).
  std::vector<Node> Build(const std::vector<GradHess>& gh, std::vector<double>* leaf_value_of_row) {
    gh_ = &gh;
    for (int i = 0; i < num_rows_; ++i) rows_[i] = i;
    std::vector<Node> tree(1);
    GradHess total;
    for (const GradHess& e : gh) {
      total.g += e.g;
      total.h += e.h;
    }
    std::vector<Pending> level = {{0, 0, num_rows_, total, AcquireHistogram()}};
    BuildHistograms({&level[0]});
    for (int depth = 0; !level.empty(); ++depth) {
      std::vector<Pending> next;
      std::vector<std::pair<size_t, size_t>> built_and_sibling;  // Indices into next.
      for (Pending& node : level) {
        Split split;
        if (depth < options_.max_depth && node.end - node.begin >= 2) split = BestSplit(node);
        if (split.feature < 0) {
          MakeLeaf(node, &tree, leaf_value_of_row);
          continue;
        }
        const int middle = Partition(node, split);
        const int left = static_cast<int>(tree.size());
        tree[node.id].feature = split.feature;
        tree[node.id].threshold = binned_.cuts[split.feature][split.bin];
        tree[node.id].left = left;
        tree[node.id].right = left + 1;
        tree.resize(tree.size() + 2);
        const GradHess right_sum = {node.sum.g - split.left.g, node.sum.h - split.left.h};
        Pending left_node = {left, node.begin, middle, split.left, -1};
        Pending right_node = {left + 1, middle, node.end, right_sum, -1};
        if (depth + 1 >= options_.max_depth) {
          // The children will be leaves: they need no histograms.
          free_histograms_.push_back(node.histogram);
          next.push_back(left_node);
          next.push_back(right_node);
          continue;
        }
        // The smaller child's histogram is built from its rows; the larger
        // one's is the parent's minus it (Ke et al. 2017, §2.1), in place.
        const bool left_smaller = (middle - node.begin) <= (node.end - middle);
        (left_smaller ? left_node : right_node).histogram = AcquireHistogram();
        (left_smaller ? right_node : left_node).histogram = node.histogram;
        next.push_back(left_node);
        next.push_back(right_node);
        const size_t small = next.size() - (left_smaller ? 2 : 1);
        const size_t large = next.size() - (left_smaller ? 1 : 2);
        built_and_sibling.emplace_back(small, large);
      }
      std::vector<Pending*> to_build;
      for (const auto& [small, large] : built_and_sibling) to_build.push_back(&next[small]);
      BuildHistograms(to_build);
      for (const auto& [small, large] : built_and_sibling) {
        std::vector<GradHess>& large_hist = histograms_[next[large].histogram];
        const std::vector<GradHess>& small_hist = histograms_[next[small].histogram];
        for (size_t i = 0; i < large_hist.size(); ++i) {
          large_hist[i].g -= small_hist[i].g;
          large_hist[i].h -= small_hist[i].h;
        }
      }
      level = std::move(next);
    }
    return tree;
  }

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

  int AcquireHistogram() {
    if (!free_histograms_.empty()) {
      const int index = free_histograms_.back();
      free_histograms_.pop_back();
      return index;
    }
    histograms_.emplace_back(static_cast<size_t>(num_features_) * stride_);
    return static_cast<int>(histograms_.size()) - 1;
  }

  double LeafObjective(const GradHess& s) const { return s.g * s.g / (s.h + options_.l2); }

  Split BestSplit(const Pending& node) const {
    Split best;
    const double parent = LeafObjective(node.sum);
    const std::vector<GradHess>& hist = histograms_[node.histogram];
    for (int f = 0; f < num_features_; ++f) {
      const int num_cuts = static_cast<int>(binned_.cuts[f].size());
      GradHess left;
      for (int b = 0; b < num_cuts; ++b) {
        const GradHess& e = hist[static_cast<size_t>(f) * stride_ + b];
        left.g += e.g;
        left.h += e.h;
        if (left.h < options_.min_child_weight) continue;
        const GradHess right = {node.sum.g - left.g, node.sum.h - left.h};
        if (right.h < options_.min_child_weight) break;
        const double gain =
            0.5 * (LeafObjective(left) + LeafObjective(right) - parent) - options_.min_split_gain;
        if (gain > best.gain) {  // Strict: the first best (feature, bin) wins.
          best.feature = f;
          best.bin = b;
          best.gain = gain;
          best.left = left;
        }
      }
    }
    return best;
  }

  // Stable partition of rows_[begin, end): rows with bin <= split.bin first.
  int Partition(const Pending& node, const Split& split) {
    const uint8_t* bins = binned_.bins.data() + static_cast<size_t>(split.feature) * num_rows_;
    int write = node.begin;
    int spill = 0;
    for (int i = node.begin; i < node.end; ++i) {
      const int row = rows_[i];
      if (bins[row] <= split.bin) {
        rows_[write++] = row;
      } else {
        scratch_[spill++] = row;
      }
    }
    std::copy(scratch_.begin(), scratch_.begin() + spill, rows_.begin() + write);
    return write;
  }

  void MakeLeaf(const Pending& node, std::vector<Node>* tree,
                std::vector<double>* leaf_value_of_row) {
    const double value = -options_.learning_rate * node.sum.g / (node.sum.h + options_.l2);
    (*tree)[node.id].value = value;
    for (int i = node.begin; i < node.end; ++i) (*leaf_value_of_row)[rows_[i]] = value;
    if (node.histogram >= 0) free_histograms_.push_back(node.histogram);
  }

  // Fills the histograms of `nodes`, one thread per feature group; each
  // (feature, bin) total is summed by one thread in row order, and each
  // default bin is the node total minus the feature's other bins in bin
  // order, so the result does not depend on the thread count.
  void BuildHistograms(const std::vector<Pending*>& nodes) {
    if (nodes.empty()) return;
    int64_t work = 0;
    for (const Pending* node : nodes) work += static_cast<int64_t>(node->end - node->begin);
    work *= num_features_;
    auto fill = [&](const SparseRows& group) {
      const std::vector<GradHess>& gh = *gh_;
      const uint32_t* offsets = group.offsets.data();
      const uint32_t* cells = group.cells.data();
      for (const Pending* node : nodes) {
        std::vector<GradHess>& hist = histograms_[node->histogram];
        GradHess* base = hist.data();
        std::fill(base + static_cast<size_t>(group.feature_begin) * stride_,
                  base + static_cast<size_t>(group.feature_end) * stride_, GradHess{});
        for (int i = node->begin; i < node->end; ++i) {
          const int row = rows_[i];
          const GradHess e = gh[row];
          for (uint32_t k = offsets[row]; k < offsets[row + 1]; ++k) {
            GradHess& cell = base[cells[k]];
            cell.g += e.g;
            cell.h += e.h;
          }
        }
        for (int f = group.feature_begin; f < group.feature_end; ++f) {
          GradHess rest;
          GradHess* feature_hist = base + static_cast<size_t>(f) * stride_;
          const int num_bins = static_cast<int>(binned_.cuts[f].size()) + 1;
          for (int b = 0; b < num_bins; ++b) {
            rest.g += feature_hist[b].g;
            rest.h += feature_hist[b].h;
          }
          feature_hist[binned_.default_bin[f]] = {node->sum.g - rest.g, node->sum.h - rest.h};
        }
      }
    };
    if (work < kMinParallelWork || sparse_.size() == 1) {
      for (const SparseRows& group : sparse_) fill(group);
      return;
    }
    std::vector<std::thread> workers;
    for (size_t t = 1; t < sparse_.size(); ++t) workers.emplace_back(fill, std::cref(sparse_[t]));
    fill(sparse_[0]);
    for (std::thread& worker : workers) worker.join();
  }

  const BinnedFeatures& binned_;
  const int num_rows_;
  const int num_features_;
  const int stride_;
  const GradientBoostedTreesOptions& options_;
  const std::vector<SparseRows> sparse_;
  const std::vector<GradHess>* gh_ = nullptr;
  std::vector<int> rows_;
  std::vector<int> scratch_;
  std::vector<std::vector<GradHess>> histograms_;
  std::vector<int> free_histograms_;
};

double Sigmoid(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}

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
  const BinnedFeatures binned = BinFeatures(x, options.max_bins);
  TreeBuilder builder(binned, n, options, threads);
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
      int node = 0;
      while (tree[node].feature >= 0) {
        node = x(i, tree[node].feature) < tree[node].threshold ? tree[node].left : tree[node].right;
      }
      scores(i, k) += tree[node].value;
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
