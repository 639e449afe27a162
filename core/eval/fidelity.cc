#include "core/eval/fidelity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/data/encoder.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::eval {
namespace {
constexpr double kConstantFeatureStd = 1e-12;
}  // namespace

absl::Status FidelityOptions::Validate() const {
  return ValidatePositiveInt(numeric_bins, "Numeric bins");
}

absl::Status ValidateTableForSchema(const data::Schema& schema, const data::Table& table,
                                    absl::string_view what) {
  if (table.num_rows() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("The ", what, " has no rows"));
  }
  if (table.cells.cols() != schema.num_columns()) {
    return absl::InvalidArgumentError(absl::StrCat("The ", what, " has ", table.cells.cols(),
                                                   " columns but the schema declares ",
                                                   schema.num_columns()));
  }
  for (int c = 0; c < schema.num_columns(); ++c) {
    const data::Column& column = schema.column(c);
    const bool categorical = column.type == data::ColumnType::kCategorical;
    const int levels = categorical ? schema.NumLevels(c) : 0;
    for (Eigen::Index i = 0; i < table.num_rows(); ++i) {
      const double v = table.cells(i, c);
      // A nullable numeric's missing cell (core/data/table.h).
      if (!categorical && column.nullable && std::isnan(v)) continue;
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "The ", what, " has a non-finite value in row ", i, ", column '", column.name, "'"));
      }
      if (categorical) {
        if (v != std::floor(v) || v < 0 || v >= levels) {
          return absl::InvalidArgumentError(
              absl::StrCat("The ", what, " has level ", v, " in row ", i, ", column '",
                           column.name, "', which has levels 0..", levels - 1));
        }
      } else if (v < column.lower || v > column.upper) {
        return absl::InvalidArgumentError(absl::StrCat(
            "The ", what, " has value ", v, " in row ", i, ", column '", column.name,
            "', outside the declared bounds [", column.lower, ", ", column.upper, "]"));
      }
    }
  }
  return absl::OkStatus();
}

Eigen::VectorXd ColumnHistogram(const data::Schema& schema, const data::Table& table, int column,
                                int numeric_bins) {
  const data::Column& spec = schema.column(column);
  const bool categorical = spec.type == data::ColumnType::kCategorical;
  // A nullable numeric's missing values get their own bin, last (as a
  // nullable categorical's missing level).
  const bool missing_bin = !categorical && spec.nullable;
  const int bins = categorical ? schema.NumLevels(column) : numeric_bins + (missing_bin ? 1 : 0);
  Eigen::VectorXd histogram = Eigen::VectorXd::Zero(bins);
  const double width = (spec.upper - spec.lower) / numeric_bins;
  for (Eigen::Index i = 0; i < table.num_rows(); ++i) {
    const double v = table.cells(i, column);
    int bin = 0;
    if (missing_bin && std::isnan(v)) {
      bin = bins - 1;
    } else if (categorical) {
      bin = static_cast<int>(v);
    } else {
      bin = std::clamp(static_cast<int>(std::floor((v - spec.lower) / width)), 0,
                       numeric_bins - 1);
    }
    histogram(std::clamp(bin, 0, bins - 1)) += 1.0;
  }
  return histogram / static_cast<double>(table.num_rows());
}

double TotalVariationDistance(const Eigen::VectorXd& p, const Eigen::VectorXd& q) {
  return 0.5 * (p - q).cwiseAbs().sum();
}

absl::StatusOr<CorrelationDifference> CorrelationMeanAbsDifference(const Eigen::MatrixXd& a,
                                                                   const Eigen::MatrixXd& b) {
  if (a.cols() != b.cols()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Correlation difference needs the same columns, got ", a.cols(), " and ", b.cols()));
  }
  if (a.rows() == 0 || b.rows() == 0) {
    return absl::InvalidArgumentError("Correlation difference needs at least one row per table");
  }
  // Standardised copies of the columns kept; corr = Z'Z / n.
  auto standardize = [](const Eigen::MatrixXd& m, Eigen::RowVectorXd* std_dev) {
    const Eigen::RowVectorXd mean = m.colwise().mean();
    Eigen::MatrixXd centered = m.rowwise() - mean;
    *std_dev = (centered.colwise().squaredNorm() / static_cast<double>(m.rows())).cwiseSqrt();
    return centered;
  };
  Eigen::RowVectorXd std_a, std_b;
  const Eigen::MatrixXd centered_a = standardize(a, &std_a);
  const Eigen::MatrixXd centered_b = standardize(b, &std_b);
  std::vector<Eigen::Index> kept;
  for (Eigen::Index j = 0; j < a.cols(); ++j) {
    if (std_a(j) > kConstantFeatureStd && std_b(j) > kConstantFeatureStd) kept.push_back(j);
  }
  CorrelationDifference result;
  result.constant_features_dropped = static_cast<int>(a.cols() - kept.size());
  const Eigen::Index k = static_cast<Eigen::Index>(kept.size());
  if (k < 2) return result;
  Eigen::MatrixXd za(a.rows(), k), zb(b.rows(), k);
  for (Eigen::Index j = 0; j < k; ++j) {
    za.col(j) = centered_a.col(kept[j]) / (std_a(kept[j]) * std::sqrt(double(a.rows())));
    zb.col(j) = centered_b.col(kept[j]) / (std_b(kept[j]) * std::sqrt(double(b.rows())));
  }
  Eigen::MatrixXd corr_a(k, k), corr_b(k, k);
  corr_a.setZero();
  corr_b.setZero();
  corr_a.selfadjointView<Eigen::Lower>().rankUpdate(za.transpose());
  corr_b.selfadjointView<Eigen::Lower>().rankUpdate(zb.transpose());
  double sum = 0.0;
  for (Eigen::Index j = 0; j < k; ++j) {
    for (Eigen::Index i = j + 1; i < k; ++i) {
      const double ca = std::clamp(corr_a(i, j), -1.0, 1.0);
      const double cb = std::clamp(corr_b(i, j), -1.0, 1.0);
      sum += std::abs(ca - cb);
    }
  }
  result.pairs = static_cast<int>(k * (k - 1) / 2);
  result.mean_abs_difference = sum / result.pairs;
  return result;
}

absl::StatusOr<FidelityReport> ComputeFidelity(const data::Schema& schema,
                                               const data::Table& synthetic,
                                               const data::Table& real,
                                               const FidelityOptions& options) {
  DPC_RETURN_IF_ERROR(options.Validate());
  DPC_RETURN_IF_ERROR(ValidateTableForSchema(schema, synthetic, "synthetic table"));
  DPC_RETURN_IF_ERROR(ValidateTableForSchema(schema, real, "real table"));
  FidelityReport report;
  for (int c = 0; c < schema.num_columns(); ++c) {
    if (!options.include_label && schema.label_index() == c) continue;
    ColumnFidelity column;
    column.column = schema.column(c).name;
    column.categorical = schema.column(c).type == data::ColumnType::kCategorical;
    column.tv_distance =
        TotalVariationDistance(ColumnHistogram(schema, synthetic, c, options.numeric_bins),
                               ColumnHistogram(schema, real, c, options.numeric_bins));
    if (report.columns.empty() || column.tv_distance > report.max_tv_distance) {
      report.max_tv_distance = column.tv_distance;
      report.max_tv_column = column.column;
    }
    report.mean_tv_distance += column.tv_distance;
    report.columns.push_back(std::move(column));
  }
  if (!report.columns.empty()) report.mean_tv_distance /= report.columns.size();

  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  DPC_ASSIGN_OR_RETURN(
      const CorrelationDifference correlation,
      CorrelationMeanAbsDifference(data::EncodeFeatures(schema, layout, synthetic),
                                   data::EncodeFeatures(schema, layout, real)));
  report.correlation_mean_abs_difference = correlation.mean_abs_difference;
  report.correlation_pairs = correlation.pairs;
  report.constant_features_dropped = correlation.constant_features_dropped;
  return report;
}

}  // namespace dpcurator::eval
