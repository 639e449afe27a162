#ifndef DPCURATOR_CORE_EVAL_PAPER_METRICS_H_
#define DPCURATOR_CORE_EVAL_PAPER_METRICS_H_

// The evaluation metrics of DP-auto-GAN (papers/dp-auto-gan.md §3.2; issue 15
// item 5) and the shape checks of issue 17, for any tabular schema. Each
// compares a `candidate` table (synthetic rows, or the real training rows for
// the reference row) with a `reference` table of real held-out rows.
//
// These run on the evaluator's side, on real rows the user already holds;
// nothing here is released, so learning modes, mappings and principal axes
// from the reference rows is allowed (PRIVACY.md restricts the server's
// releases, not the user's own evaluation).
//
// Columns: every column except an image column, the label included (the
// paper's Adult evaluation treats salary as one more feature). Encoding, where
// one is needed: numerics scaled to [0, 1] by the declared bounds, categorical
// columns one-hot (data::FeatureLayout's convention).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/data/table.h"

namespace dpcurator::eval {

struct PaperMetricsOptions {
  // Seed of the public randomness (subsamples, random triples).
  uint64_t seed = 1;

  // Dimension-wise prediction. Training and test rows are subsampled (seeded,
  // without replacement) to at most these many, so 15 Adult columns x 2
  // sources fit in a few seconds on 2 cores; 5000 test rows put the standard
  // error of an F1 or R^2 near 0.01.
  bool compute_dimension_wise = true;
  int64_t prediction_train_rows = 5000;
  int64_t prediction_test_rows = 5000;
  // L-BFGS / Newton iterations of the logistic regressions.
  int prediction_max_iterations = 100;
  // Ridge penalty lambda in  (1/n) ||y - Xb - b0||^2 + lambda ||b||^2  on the
  // [0,1]/one-hot features (numeric targets).
  double ridge_l2 = 1e-4;

  // 3-way marginals: this many distinct random column triples (all of them
  // when the schema has fewer), numerics in `marginal_bins` equal-width bins
  // over the declared bounds.
  int marginal_triples = 100;
  int marginal_bins = 100;

  // 2-way PCA Wasserstein: exact W1 between `wasserstein_sample_rows`-row
  // subsamples of each side, averaged over `wasserstein_repetitions` draws.
  // Two independent subsamples of the same distribution are not at distance
  // 0: on Adult the floor is W1 0.12 at 500 rows and 0.06 at 2000 (about 3 s
  // for 10 draws on 2 cores), hence 2000; the report's real row shows it.
  int wasserstein_sample_rows = 2000;
  int wasserstein_repetitions = 10;

  // Shape checks: an integer numeric column counts as discrete (for the
  // functional-dependency check) when the reference holds at most this many
  // distinct values.
  int max_discrete_values = 100;

  absl::Status Validate() const;
};

// One column as the target of the dimension-wise prediction.
struct DimensionScore {
  std::string column;
  // "f1" (binary categorical: F1 of level 1, the second declared level),
  // "micro_f1" (categorical with more levels: micro F1, which equals
  // accuracy, as the paper's code), or "r2" (numeric).
  std::string metric;
  double score = 0.0;
  // True when the training rows held a single level of the target, so the
  // constant predictor was scored.
  bool constant_predictor = false;
};

struct DimensionWisePrediction {
  std::vector<DimensionScore> columns;  // Schema order.
  double mean_score = 0.0;              // Over the columns.
  int64_t train_rows = 0;               // After subsampling.
  int64_t test_rows = 0;
};

struct ThreeWayMarginals {
  int triples = 0;  // 0: not computed (fewer than three columns).
  // L1 distance of the normalised 3-way histograms, i.e. 2 TV, in [0, 2]:
  // mean and worst over the triples.
  double mean_l1 = 0.0;
  double max_l1 = 0.0;
  std::string max_triple;  // "a, b, c"
};

struct PcaWasserstein {
  // Mean over repetitions of the exact W1 (Euclidean ground cost) between the
  // two subsamples projected on the reference's first two principal axes.
  double w1 = 0.0;
  // v: share of the reference's total variance on the two axes, in (0, 1].
  double explained_variance_ratio = 0.0;
  // max ||x - y|| over the encoded universe: sqrt(numerics + 2 categoricals).
  double diameter = 0.0;
  // 1 - w1 / (sqrt(v) * diameter) (papers/dp-auto-gan.md §3.2, Wscore with a
  // projection); 1 for identical distributions.
  double score = 0.0;
  int sample_rows = 0;
  int repetitions = 0;
};

// (a) The reference's most frequent value of a numeric column.
struct PointMass {
  std::string column;
  double value = 0.0;
  double reference_share = 0.0;
  double share = 0.0;  // Candidate rows at exactly `value`.
};

// (b) A pair of discrete columns in one-to-one correspondence in the
// reference (each value of one determines the value of the other).
struct FunctionalDependency {
  std::string column_a;
  std::string column_b;
  int pairs = 0;           // Distinct (a, b) pairs of the reference.
  double agreement = 0.0;  // Candidate rows whose (a, b) is one of them.
};

// (c) A pair of categorical columns: candidate rows in level pairs that no
// reference row has.
struct ImpossibleCombination {
  std::string column_a;
  std::string column_b;
  int empty_cells = 0;  // Level pairs absent from the reference.
  double share = 0.0;
};

// The checks of issue 17's table, when the columns exist (Adult).
struct NamedCheck {
  std::string name;  // "hours-per-week = 40", ...
  double reference = 0.0;
  double value = 0.0;
};

struct ShapeChecks {
  std::vector<PointMass> point_masses;             // Numeric columns, schema order.
  std::vector<FunctionalDependency> dependencies;  // One-to-one pairs.
  std::vector<ImpossibleCombination> impossible;   // Pairs with an empty cell.
  double impossible_mean_share = 0.0;              // Over `impossible`.
  std::vector<NamedCheck> named;
};

struct PaperMetrics {
  std::optional<DimensionWisePrediction> dimension_wise;
  ThreeWayMarginals three_way;
  PcaWasserstein pca_wasserstein;
  ShapeChecks shape;
};

// All of the above for `candidate` against `reference` (both tables of
// `schema`, validated; at least two rows each). The dimension-wise prediction
// trains on the candidate and tests on the reference; run it again with the
// real training rows as the candidate for the paper's "real" scores.
absl::StatusOr<PaperMetrics> ComputePaperMetrics(const data::Schema& schema,
                                                 const data::Table& candidate,
                                                 const data::Table& reference,
                                                 const PaperMetricsOptions& options = {});

// The parts, for tests and other callers.
absl::StatusOr<DimensionWisePrediction> DimensionWise(const data::Schema& schema,
                                                      const data::Table& train,
                                                      const data::Table& test,
                                                      const PaperMetricsOptions& options);
absl::StatusOr<ThreeWayMarginals> ThreeWayMarginalDistance(const data::Schema& schema,
                                                           const data::Table& candidate,
                                                           const data::Table& reference,
                                                           const PaperMetricsOptions& options);
absl::StatusOr<PcaWasserstein> PcaWassersteinScore(const data::Schema& schema,
                                                   const data::Table& candidate,
                                                   const data::Table& reference,
                                                   const PaperMetricsOptions& options);
ShapeChecks ComputeShapeChecks(const data::Schema& schema, const data::Table& candidate,
                               const data::Table& reference, const PaperMetricsOptions& options);

// F1 of class `positive`: 2 TP / (2 TP + FP + FN); 0 when the class is never
// predicted nor present. Sizes must match.
double BinaryF1(const Eigen::VectorXi& predicted, const Eigen::VectorXi& truth, int positive);
// R^2 = 1 - sum (y - yhat)^2 / sum (y - mean y)^2 over the test rows (the
// test mean, as sklearn's r2_score). Undefined for a constant y: 1 when the
// prediction is exact, else 0 (sklearn's convention).
double RSquared(const Eigen::VectorXd& predicted, const Eigen::VectorXd& truth);

// Text block (one section per metric) for the CLI: `real` is the real
// training rows' metrics (the reference row), or null.
std::string FormatPaperMetrics(const PaperMetrics& candidate, const PaperMetrics* real);

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_PAPER_METRICS_H_
