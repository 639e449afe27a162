#ifndef DPCURATOR_CORE_EVAL_QUALITY_REPORT_H_
#define DPCURATOR_CORE_EVAL_QUALITY_REPORT_H_

#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/data/table.h"

namespace dpcurator::eval {

// The two properties of SDMetrics' single-table Quality Report
// (docs.sdv.dev/sdmetrics, "Quality Report"), which users of synthetic data
// check first:
//   Column Shapes: per column, KSComplement = 1 - KS statistic (numeric) or
//     TVComplement = 1 - TV distance of the level frequencies (categorical).
//   Column Pair Trends: per column pair, CorrelationSimilarity
//     = 1 - |rho_real - rho_synthetic| / 2 (Pearson; both numeric) or
//     ContingencySimilarity = 1 - TV distance of the normalised contingency
//     tables (otherwise; numerics binned).
// Each property's score is the mean over its columns / pairs, the overall
// score the mean of the two. Every score lies in [0, 1], 1 = identical.
struct QualityOptions {
  // Equal-width bins over a numeric column's declared [lower, upper] for the
  // histograms shown (the KS statistic itself uses the exact values).
  int histogram_bins = 20;
  // Bins of a numeric column inside a contingency table.
  int contingency_bins = 10;

  absl::Status Validate() const;
};

struct ColumnShape {
  int column = 0;
  std::string name;
  bool categorical = false;
  // "KSComplement" or "TVComplement".
  std::string metric;
  double score = 0.0;
  // For the plot: labels of the histogram cells and both normalised
  // histograms (categorical: per level; numeric: histogram_bins bins, an
  // integer column at integer edges, one per value when it has fewer).
  std::vector<std::string> cell_labels;
  Eigen::VectorXd real;
  Eigen::VectorXd synthetic;
};

struct PairTrend {
  int column_a = 0;
  int column_b = 0;
  // "CorrelationSimilarity" or "ContingencySimilarity".
  std::string metric;
  double score = 0.0;
  // CorrelationSimilarity: both Pearson correlations; otherwise the
  // Cramér's V of both contingency tables (shown, not scored).
  double real_association = 0.0;
  double synthetic_association = 0.0;
};

struct QualityReport {
  std::vector<ColumnShape> shapes;  // schema order, image columns left out
  std::vector<PairTrend> pairs;     // i < j in schema order
  // Pairs left out: a numeric column constant in either table (its
  // correlation is undefined), as SDMetrics does.
  int pairs_skipped = 0;
  // QualityOptions::contingency_bins the pairs were scored with.
  int contingency_bins = 0;
  double column_shapes = 0.0;
  double column_pair_trends = 0.0;
  double overall = 0.0;
};

// A number as a chart label shows it (issue 38: numeric bin labels printed
// up to 17 digits): rounded to 3 significant digits, thousands separated by
// commas below a million ("12,300"), "1.25M" and "3B" from a million up,
// no trailing zeros after a decimal point ("0.125", "2.5").
std::string FormatAxisNumber(double value);

// Two-sample Kolmogorov-Smirnov statistic sup_x |F_a(x) - F_b(x)| of the
// empirical distribution functions (exact, ties handled; both non-empty).
double KolmogorovSmirnovStatistic(std::vector<double> a, std::vector<double> b);

// Cramér's V of a contingency table of counts or frequencies:
// sqrt(chi^2 / (N (min(r, c) - 1))) over its non-empty rows and columns;
// 0 when either has fewer than two.
double CramersV(const Eigen::MatrixXd& table);

// The report of `synthetic` against `real` (tables of `schema`, validated:
// ValidateTableForSchema). Pure computation on the analyst's own tables.
absl::StatusOr<QualityReport> ComputeQualityReport(const data::Schema& schema,
                                                   const data::Table& real,
                                                   const data::Table& synthetic,
                                                   const QualityOptions& options = {});

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_QUALITY_REPORT_H_
