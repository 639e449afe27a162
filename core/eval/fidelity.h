#ifndef DPCURATOR_CORE_EVAL_FIDELITY_H_
#define DPCURATOR_CORE_EVAL_FIDELITY_H_

#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/schema.h"
#include "core/data/table.h"

namespace dpcurator::eval {

struct FidelityOptions {
  // Equal-width bins over a numeric column's declared [lower, upper].
  int numeric_bins = 20;
  // Also report the label column's marginal.
  bool include_label = true;

  absl::Status Validate() const;
};

struct ColumnFidelity {
  std::string column;
  bool categorical = false;
  // Total-variation distance of the two marginals, in [0, 1].
  double tv_distance = 0.0;
};

struct FidelityReport {
  // One entry per evaluated column, in schema order.
  std::vector<ColumnFidelity> columns;
  double mean_tv_distance = 0.0;
  double max_tv_distance = 0.0;
  std::string max_tv_column;
  // Mean over pairs i < j of |corr_a(i, j) - corr_b(i, j)| (Pearson), over the
  // encoded features that are non-constant in both tables.
  double correlation_mean_abs_difference = 0.0;
  int correlation_pairs = 0;
  // Encoded features left out of the correlation comparison because they are
  // constant in at least one table (their correlation is undefined).
  int constant_features_dropped = 0;
};

// Checks that `table` is a table of `schema`: at least one row, one matrix
// column per schema column, numeric cells finite and within the declared
// bounds, categorical cells integral level indices in [0, NumLevels). Errors
// name `what` ("synthetic table"), the row and the column.
absl::Status ValidateTableForSchema(const data::Schema& schema, const data::Table& table,
                                    absl::string_view what);

// Normalised histogram of one column: level frequencies (categorical) or
// frequencies of `numeric_bins` equal-width bins over [lower, upper], the
// upper bound falling in the last bin (numeric). Assumes a validated table.
Eigen::VectorXd ColumnHistogram(const data::Schema& schema, const data::Table& table, int column,
                                int numeric_bins);

// TV(p, q) = 1/2 sum_k |p_k - q_k| for probability vectors of equal length
// (Levin, Peres & Wilmer, "Markov Chains and Mixing Times", Prop. 4.2).
double TotalVariationDistance(const Eigen::VectorXd& p, const Eigen::VectorXd& q);

struct CorrelationDifference {
  double mean_abs_difference = 0.0;
  int pairs = 0;
  int constant_features_dropped = 0;
};

// Mean absolute difference of the Pearson correlation matrices of a and b
// (same columns, at least one row each) over the pairs i < j of columns whose
// standard deviation exceeds 1e-12 in both. Fewer than two such columns give
// pairs = 0 and a difference of 0.
absl::StatusOr<CorrelationDifference> CorrelationMeanAbsDifference(const Eigen::MatrixXd& a,
                                                                   const Eigen::MatrixXd& b);

// Marginal total-variation distances per column and the correlation
// difference of the encoded features (data::EncodeFeatures), between a
// synthetic and a real table of the same schema. Both tables are validated.
absl::StatusOr<FidelityReport> ComputeFidelity(const data::Schema& schema,
                                               const data::Table& synthetic,
                                               const data::Table& real,
                                               const FidelityOptions& options = {});

}  // namespace dpcurator::eval

#endif  // DPCURATOR_CORE_EVAL_FIDELITY_H_
