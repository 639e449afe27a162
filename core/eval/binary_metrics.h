#ifndef DPCURATOR_CORE_EVAL_BINARY_METRICS_H_
#define DPCURATOR_CORE_EVAL_BINARY_METRICS_H_

// The two plots DP-auto-GAN judges binary data by (papers/dp-auto-gan.md
// §3.2, after Choi et al. 2017, medGAN): the dimension-wise probability (each
// binary feature's share of ones, real against synthetic) and the
// dimension-wise prediction with ROC-AUC (each feature predicted from all the
// others by logistic regression trained once on real and once on synthetic
// rows, both scored on held-out real rows). Evaluator side only: nothing here
// is released (core/eval/paper_metrics.h says why learning from the real rows
// is allowed here).
//
// A binary column is a categorical column with exactly two levels; its
// "one" is the second declared level.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/data/table.h"

namespace dpcurator::eval {

// One point of a real-against-synthetic scatter plot.
struct FeaturePoint {
  std::string column;
  double real = 0.0;
  double synthetic = 0.0;
};

// The points and a summary of their distance from the diagonal y = x.
struct DiagonalScatter {
  std::vector<FeaturePoint> points;  // Schema order.
  double mean_abs_gap = 0.0;         // mean |synthetic - real|
  double max_abs_gap = 0.0;
  std::string worst_column;
  // Pearson correlation of (real, synthetic) over the points; 0 when either
  // side is constant.
  double correlation = 0.0;
};

// Indices of the schema's binary columns (image columns never count).
std::vector<int> BinaryColumns(const data::Schema& schema);

// Share of level 1 in every binary column of `real` and `synthetic` (each
// with at least one row). Fails when the schema has no binary column.
absl::StatusOr<DiagonalScatter> DimensionWiseProbability(const data::Schema& schema,
                                                         const data::Table& real,
                                                         const data::Table& synthetic);

struct DimensionWiseAurocOptions {
  // Target features: binary columns with at least `min_test_class_rows` rows
  // of each level among the test rows (AUROC needs both), then a seeded
  // uniform subset of at most `max_targets` of them (fits cost
  // O(rows x features) each).
  int max_targets = 100;
  int64_t min_test_class_rows = 20;
  // Rows per fit and per test, subsampled (seeded) when there are more.
  int64_t train_rows = 5000;
  int64_t test_rows = 5000;
  int max_iterations = 100;
  double l2 = 1e-4;
  uint64_t seed = 1;
};

struct DimensionWiseAuroc {
  // real = AUROC of the model trained on real rows, synthetic = trained on
  // synthetic rows; both on the real test rows.
  DiagonalScatter scatter;
  // Targets left out because the synthetic column holds a single level (a
  // constant classifier: the paper drops these from its plot).
  std::vector<std::string> constant_in_synthetic;
  int eligible_targets = 0;  // Before the max_targets subset.
};

// Features: the other binary columns as 0/1 (non-binary columns are not
// used: the experiment is all-binary). Fails when no target is eligible.
absl::StatusOr<DimensionWiseAuroc> DimensionWiseAurocOf(const data::Schema& schema,
                                                        const data::Table& real_train,
                                                        const data::Table& synthetic,
                                                        const data::Table& real_test,
                                                        const DimensionWiseAurocOptions& options);

// An SVG scatter plot of the points with the diagonal, axes from `lo` to
// `hi` on both sides, a title and axis labels (HTML-escaped), self-contained
// so it embeds in the report and renders in a README.
std::string DiagonalScatterSvg(const DiagonalScatter& scatter, const std::string& title,
                               const std::string& x_label, const std::string& y_label,
                               double lo, double hi);

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_BINARY_METRICS_H_
