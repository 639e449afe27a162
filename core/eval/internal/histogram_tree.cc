#include "core/eval/internal/histogram_tree.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

namespace dpcurator::eval::internal {
namespace {

// Below this many (row, feature) updates a histogram pass runs on one thread.
constexpr int64_t kMinParallelWork = 1 << 20;

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

}  // namespace

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

TreeBuilder::TreeBuilder(const BinnedFeatures& binned, int num_rows, const TreeOptions& options,
                         int num_threads)
    : binned_(binned),
      num_rows_(num_rows),
      num_features_(static_cast<int>(binned.cuts.size())),
      stride_(options.max_bins),
      options_(options),
      sparse_(BuildSparseRows(binned, options.max_bins,
                              std::max(1, std::min(num_threads, num_features_)))),
      rows_(num_rows),
      scratch_(num_rows),
      feature_order_(num_features_) {}

std::vector<TreeNode> TreeBuilder::Build(const std::vector<GradHess>& gh,
                                         std::vector<double>* leaf_value_of_row,
                                         PublicRng* feature_rng) {
  gh_ = &gh;
  for (int i = 0; i < num_rows_; ++i) rows_[i] = i;
  // The feature draws start from the identity each tree, so a tree is a
  // function of its generator alone, not of the trees built before it.
  for (int f = 0; f < num_features_; ++f) feature_order_[f] = f;
  std::vector<TreeNode> tree(1);
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
      if (depth < options_.max_depth && node.end - node.begin >= 2) {
        split = BestSplit(node, feature_rng);
      }
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

int TreeBuilder::AcquireHistogram() {
  if (!free_histograms_.empty()) {
    const int index = free_histograms_.back();
    free_histograms_.pop_back();
    return index;
  }
  histograms_.emplace_back(static_cast<size_t>(num_features_) * stride_);
  return static_cast<int>(histograms_.size()) - 1;
}

void TreeBuilder::ScanFeature(const Pending& node, int f, double parent, Split* best) const {
  const std::vector<GradHess>& hist = histograms_[node.histogram];
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
    if (gain > best->gain) {  // Strict: the first best (feature, bin) wins.
      best->feature = f;
      best->bin = b;
      best->gain = gain;
      best->left = left;
    }
  }
}

TreeBuilder::Split TreeBuilder::BestSplit(const Pending& node, PublicRng* feature_rng) {
  Split best;
  const double parent = LeafObjective(node.sum);
  const int drawn = options_.features_per_split;
  if (drawn <= 0 || drawn >= num_features_ || feature_rng == nullptr) {
    for (int f = 0; f < num_features_; ++f) ScanFeature(node, f, parent, &best);
    return best;
  }
  // A uniform random order of the features, drawn one position at a time
  // (Fisher-Yates): the first `drawn` are the node's candidates; the rest
  // are drawn only while no candidate has split the node.
  for (int k = 0; k < num_features_; ++k) {
    if (k >= drawn && best.feature >= 0) break;
    const int j =
        k + static_cast<int>(feature_rng->UniformInt(static_cast<uint64_t>(num_features_ - k)));
    std::swap(feature_order_[k], feature_order_[j]);
    ScanFeature(node, feature_order_[k], parent, &best);
  }
  return best;
}

// Stable partition of rows_[begin, end): rows with bin <= split.bin first.
int TreeBuilder::Partition(const Pending& node, const Split& split) {
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

void TreeBuilder::MakeLeaf(const Pending& node, std::vector<TreeNode>* tree,
                           std::vector<double>* leaf_value_of_row) {
  const double value = -options_.leaf_scale * node.sum.g / (node.sum.h + options_.l2);
  (*tree)[node.id].value = value;
  for (int i = node.begin; i < node.end; ++i) (*leaf_value_of_row)[rows_[i]] = value;
  if (node.histogram >= 0) free_histograms_.push_back(node.histogram);
}

// Fills the histograms of `nodes`, one thread per feature group; each
// (feature, bin) total is summed by one thread in row order, and each
// default bin is the node total minus the feature's other bins in bin
// order, so the result does not depend on the thread count.
void TreeBuilder::BuildHistograms(const std::vector<Pending*>& nodes) {
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

}  // namespace dpcurator::eval::internal
