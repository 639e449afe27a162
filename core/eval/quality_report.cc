#include "core/eval/quality_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/eval/fidelity.h"

namespace dpcurator::eval {
namespace {

using data::ColumnType;

// A cell's index among `bins` equal-width bins over [lower, upper], the
// upper bound in the last bin (as ColumnHistogram bins them).
int NumericBin(double value, double lower, double upper, int bins) {
  if (!(upper > lower)) return 0;
  const int bin = static_cast<int>(std::floor((value - lower) / (upper - lower) * bins));
  return std::clamp(bin, 0, bins - 1);
}

// Per-row cell codes of one column for a contingency table, and their count.
struct ColumnCodes {
  std::vector<int> codes;
  int cells = 0;
};
ColumnCodes CodesOf(const data::Schema& schema, const data::Table& table, int column,
                    int numeric_bins) {
  const data::Column& c = schema.column(column);
  ColumnCodes out;
  out.codes.resize(table.num_rows());
  if (c.type == ColumnType::kCategorical) {
    out.cells = schema.NumLevels(column);
    for (int64_t r = 0; r < table.num_rows(); ++r) {
      out.codes[r] = static_cast<int>(table.cells(r, column));
    }
  } else {
    // A nullable numeric's missing values (NaN) are one more cell, last.
    out.cells = numeric_bins + (c.nullable ? 1 : 0);
    for (int64_t r = 0; r < table.num_rows(); ++r) {
      const double value = table.cells(r, column);
      out.codes[r] = c.nullable && std::isnan(value)
                         ? numeric_bins
                         : NumericBin(value, c.lower, c.upper, numeric_bins);
    }
  }
  return out;
}

Eigen::MatrixXd Contingency(const ColumnCodes& a, const ColumnCodes& b) {
  Eigen::MatrixXd table = Eigen::MatrixXd::Zero(a.cells, b.cells);
  for (size_t r = 0; r < a.codes.size(); ++r) table(a.codes[r], b.codes[r]) += 1.0;
  return table / static_cast<double>(a.codes.size());
}

// Pearson correlation of two columns; NaN when either is constant.
double Pearson(const Eigen::VectorXd& x, const Eigen::VectorXd& y) {
  const Eigen::ArrayXd dx = x.array() - x.mean();
  const Eigen::ArrayXd dy = y.array() - y.mean();
  const double sxx = (dx * dx).sum();
  const double syy = (dy * dy).sum();
  if (!(sxx > 1e-24) || !(syy > 1e-24)) return std::nan("");
  return std::clamp((dx * dy).sum() / std::sqrt(sxx * syy), -1.0, 1.0);
}

// A column's values for the KS statistic. A missing value (NaN) becomes
// +infinity: the KS distance on the real line extended by one point "missing"
// above every value, so a wrong missing share shows as the CDFs' gap just
// below it (and std::sort never sees a NaN).
std::vector<double> ColumnValues(const data::Table& table, int column) {
  const Eigen::VectorXd values = table.cells.col(column);
  std::vector<double> out(values.data(), values.data() + values.size());
  for (double& v : out) {
    if (std::isnan(v)) v = std::numeric_limits<double>::infinity();
  }
  return out;
}

// The report's histogram bins of a numeric column. An integer column gets
// integer edges: one bin per value when it has at most `bins` values, else
// runs of ceil(values / bins) consecutive values, so no label reads 1.15 or
// 1.3 and no bin holds one value where its neighbour holds two (issue 25).
struct NumericBinning {
  double lower = 0.0;
  double width = 1.0;
  int bins = 1;
  bool integer = false;
  double last_value = 0.0;  // an integer column's largest value
  // A nullable column: one more bin, after the others, for missing values.
  bool missing_bin = false;
};

NumericBinning BinningOf(const data::Column& column, int bins) {
  if (column.integer) {
    const double lower = std::ceil(column.lower);
    const double values = std::floor(column.upper) - lower + 1.0;
    if (values >= 1.0 && values <= 1e15) {
      const double per_bin = std::ceil(values / bins);
      return {lower, per_bin, static_cast<int>(std::ceil(values / per_bin)), true,
              std::floor(column.upper), column.nullable};
    }
  }
  return {column.lower, (column.upper - column.lower) / bins, bins, false, 0.0, column.nullable};
}

Eigen::VectorXd BinnedHistogram(const data::Table& table, int column,
                                const NumericBinning& binning) {
  Eigen::VectorXd histogram = Eigen::VectorXd::Zero(binning.bins + (binning.missing_bin ? 1 : 0));
  for (Eigen::Index i = 0; i < table.num_rows(); ++i) {
    if (binning.missing_bin && std::isnan(table.cells(i, column))) {
      histogram(binning.bins) += 1.0;  // the "missing" bar
      continue;
    }
    const double position = (table.cells(i, column) - binning.lower) / binning.width;
    // NaN and out-of-range values land in the end bins, as ColumnHistogram.
    const int bin = std::isnan(position) ? 0
                                         : static_cast<int>(std::clamp(
                                               std::floor(position), 0.0,
                                               static_cast<double>(binning.bins - 1)));
    histogram(bin) += 1.0;
  }
  return table.num_rows() > 0 ? Eigen::VectorXd(histogram / static_cast<double>(table.num_rows()))
                              : histogram;
}

std::string GroupThousands(const std::string& digits);

// An integer bin's edge: exact, grouped, below a million (neighbouring
// one-value bins must not read alike); rounded above (FormatAxisNumber).
std::string IntegerLabel(double value) {
  if (std::abs(value) >= 1e6) return FormatAxisNumber(value);
  const std::string digits = absl::StrFormat("%.0f", std::abs(value));
  return absl::StrCat(value < 0 ? "-" : "", GroupThousands(digits));
}

std::string BinLabel(const NumericBinning& binning, int b) {
  const double from = binning.lower + b * binning.width;
  if (!binning.integer) return FormatAxisNumber(from);
  if (binning.width == 1.0) return IntegerLabel(from);
  const double to = std::min(from + binning.width - 1.0, binning.last_value);
  return to == from ? IntegerLabel(from)
                    : absl::StrCat(IntegerLabel(from), "-", IntegerLabel(to));
}

// Digits of a whole number in groups of three ("1234567" -> "1,234,567").
std::string GroupThousands(const std::string& digits) {
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

// `value` with at most 3 significant digits in fixed notation, trailing
// zeros after the point removed ("0.125", "2.5", "12").
std::string ThreeSignificant(double value) {
  if (value == 0.0) return "0";
  const int magnitude = static_cast<int>(std::floor(std::log10(std::abs(value))));
  const int decimals = std::clamp(2 - magnitude, 0, 12);
  std::string text = absl::StrFormat("%.*f", decimals, value);
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return text == "-0" ? "0" : text;
}

}  // namespace

std::string FormatAxisNumber(double value) {
  if (!std::isfinite(value)) return absl::StrFormat("%g", value);
  const double magnitude = std::abs(value);
  const std::string sign = value < 0 ? "-" : "";
  if (magnitude >= 1e9) return absl::StrCat(sign, ThreeSignificant(magnitude / 1e9), "B");
  if (magnitude >= 1e6) {
    // 999,999,999 rounds to "1000M": say "1B" instead.
    const std::string millions = ThreeSignificant(magnitude / 1e6);
    return absl::StrCat(sign, millions == "1000" ? "1B" : absl::StrCat(millions, "M"));
  }
  if (magnitude >= 1e3) {
    // Rounded to 3 significant digits, then grouped: 12,345 -> "12,300".
    const double scale = std::pow(10.0, std::floor(std::log10(magnitude)) - 2);
    const double rounded = std::round(magnitude / scale) * scale;
    if (rounded >= 1e6) return absl::StrCat(sign, "1M");
    return absl::StrCat(sign, GroupThousands(absl::StrFormat("%.0f", rounded)));
  }
  return ThreeSignificant(value);
}

absl::Status QualityOptions::Validate() const {
  if (histogram_bins < 2 || histogram_bins > 1000) {
    return absl::InvalidArgumentError("histogram_bins must be in [2, 1000]");
  }
  if (contingency_bins < 2 || contingency_bins > 100) {
    return absl::InvalidArgumentError("contingency_bins must be in [2, 100]");
  }
  return absl::OkStatus();
}

double KolmogorovSmirnovStatistic(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  const double na = static_cast<double>(a.size());
  const double nb = static_cast<double>(b.size());
  size_t i = 0;
  size_t j = 0;
  double statistic = 0.0;
  // Walk the merged order; evaluate the gap only after all copies of a value
  // (ties) have been consumed from both samples, where both CDFs are right-
  // continuous step functions.
  while (i < a.size() && j < b.size()) {
    const double x = std::min(a[i], b[j]);
    while (i < a.size() && a[i] == x) ++i;
    while (j < b.size() && b[j] == x) ++j;
    statistic = std::max(statistic, std::abs(static_cast<double>(i) / na -
                                             static_cast<double>(j) / nb));
  }
  return statistic;
}

double CramersV(const Eigen::MatrixXd& table) {
  const double total = table.sum();
  if (!(total > 0.0)) return 0.0;
  const Eigen::VectorXd rows = table.rowwise().sum();
  const Eigen::RowVectorXd cols = table.colwise().sum();
  int used_rows = 0;
  int used_cols = 0;
  for (Eigen::Index r = 0; r < rows.size(); ++r) used_rows += rows(r) > 0.0;
  for (Eigen::Index c = 0; c < cols.size(); ++c) used_cols += cols(c) > 0.0;
  const int k = std::min(used_rows, used_cols);
  if (k < 2) return 0.0;
  double chi2 = 0.0;
  for (Eigen::Index r = 0; r < table.rows(); ++r) {
    if (rows(r) <= 0.0) continue;
    for (Eigen::Index c = 0; c < table.cols(); ++c) {
      if (cols(c) <= 0.0) continue;
      const double expected = rows(r) * cols(c) / total;
      const double diff = table(r, c) - expected;
      chi2 += diff * diff / expected;
    }
  }
  return std::sqrt(chi2 / (total * (k - 1)));
}

absl::StatusOr<QualityReport> ComputeQualityReport(const data::Schema& schema,
                                                   const data::Table& real,
                                                   const data::Table& synthetic,
                                                   const QualityOptions& options) {
  if (auto s = options.Validate(); !s.ok()) return s;
  if (auto s = ValidateTableForSchema(schema, real, "real table"); !s.ok()) return s;
  if (auto s = ValidateTableForSchema(schema, synthetic, "synthetic table"); !s.ok()) return s;

  std::vector<int> columns;
  for (int c = 0; c < schema.num_columns(); ++c) {
    if (schema.column(c).type != ColumnType::kImage) columns.push_back(c);
  }
  if (columns.empty()) {
    return absl::InvalidArgumentError("the schema has no table column to report on");
  }

  QualityReport report;
  report.contingency_bins = options.contingency_bins;
  for (int c : columns) {
    const data::Column& column = schema.column(c);
    ColumnShape shape;
    shape.column = c;
    shape.name = column.name;
    shape.categorical = column.type == ColumnType::kCategorical;
    if (shape.categorical) {
      shape.real = ColumnHistogram(schema, real, c, options.histogram_bins);
      shape.synthetic = ColumnHistogram(schema, synthetic, c, options.histogram_bins);
    } else {
      const NumericBinning binning = BinningOf(column, options.histogram_bins);
      shape.real = BinnedHistogram(real, c, binning);
      shape.synthetic = BinnedHistogram(synthetic, c, binning);
      for (int b = 0; b < binning.bins; ++b) shape.cell_labels.push_back(BinLabel(binning, b));
      if (binning.missing_bin) shape.cell_labels.push_back("missing");
    }
    if (shape.categorical) {
      shape.metric = "TVComplement";
      shape.score = 1.0 - TotalVariationDistance(shape.real, shape.synthetic);
      for (int level = 0; level < schema.NumLevels(c); ++level) {
        shape.cell_labels.push_back(schema.LevelName(c, level));
      }
    } else {
      shape.metric = "KSComplement";
      shape.score = 1.0 - KolmogorovSmirnovStatistic(ColumnValues(real, c),
                                                      ColumnValues(synthetic, c));
    }
    report.column_shapes += shape.score;
    report.shapes.push_back(std::move(shape));
  }
  report.column_shapes /= static_cast<double>(report.shapes.size());

  std::vector<ColumnCodes> real_codes;
  std::vector<ColumnCodes> synthetic_codes;
  for (int c : columns) {
    real_codes.push_back(CodesOf(schema, real, c, options.contingency_bins));
    synthetic_codes.push_back(CodesOf(schema, synthetic, c, options.contingency_bins));
  }
  for (size_t i = 0; i < columns.size(); ++i) {
    for (size_t j = i + 1; j < columns.size(); ++j) {
      const int a = columns[i];
      const int b = columns[j];
      PairTrend pair;
      pair.column_a = a;
      pair.column_b = b;
      // Pearson needs a value in every row: a pair with a nullable numeric
      // is compared by its contingency table, missing as its own cell.
      const bool both_numeric = schema.column(a).type == ColumnType::kNumeric &&
                                schema.column(b).type == ColumnType::kNumeric &&
                                !schema.column(a).nullable && !schema.column(b).nullable;
      if (both_numeric) {
        pair.metric = "CorrelationSimilarity";
        pair.real_association = Pearson(real.cells.col(a), real.cells.col(b));
        pair.synthetic_association = Pearson(synthetic.cells.col(a), synthetic.cells.col(b));
        if (std::isnan(pair.real_association) || std::isnan(pair.synthetic_association)) {
          ++report.pairs_skipped;
          continue;
        }
        pair.score = 1.0 - std::abs(pair.real_association - pair.synthetic_association) / 2.0;
      } else {
        pair.metric = "ContingencySimilarity";
        const Eigen::MatrixXd p = Contingency(real_codes[i], real_codes[j]);
        const Eigen::MatrixXd q = Contingency(synthetic_codes[i], synthetic_codes[j]);
        pair.score = 1.0 - 0.5 * (p - q).cwiseAbs().sum();
        pair.real_association = CramersV(p);
        pair.synthetic_association = CramersV(q);
      }
      report.column_pair_trends += pair.score;
      report.pairs.push_back(pair);
    }
  }
  // A single column has no pairs: the property is then vacuous (score 1).
  report.column_pair_trends = report.pairs.empty()
                                  ? 1.0
                                  : report.column_pair_trends / static_cast<double>(report.pairs.size());
  report.overall = 0.5 * (report.column_shapes + report.column_pair_trends);
  return report;
}

}  // namespace dpcurator::eval
