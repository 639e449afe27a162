#include "core/eval/binary_metrics.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/eval/html_report.h"
#include "core/eval/internal/subsample.h"
#include "core/eval/logistic_regression.h"
#include "core/eval/metrics.h"
#include "core/util/public_rng.h"
#include "core/util/shard_pool.h"

namespace dpcurator::eval {
namespace {

absl::Status CheckTable(const data::Schema& schema, const data::Table& table,
                        absl::string_view what) {
  if (table.num_rows() < 1 || table.cells.cols() != schema.num_columns()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", what, " table must have at least one row and the schema's ",
        schema.num_columns(), " columns (it has ", table.num_rows(), " rows, ",
        table.cells.cols(), " columns)"));
  }
  return absl::OkStatus();
}

// Summary of a scatter's distance from the diagonal, in place.
void Summarize(DiagonalScatter* scatter) {
  const auto& points = scatter->points;
  const double n = static_cast<double>(points.size());
  double sum_gap = 0.0, mean_r = 0.0, mean_s = 0.0;
  for (const auto& p : points) {
    const double gap = std::abs(p.synthetic - p.real);
    sum_gap += gap;
    if (gap > scatter->max_abs_gap || scatter->worst_column.empty()) {
      scatter->max_abs_gap = gap;
      scatter->worst_column = p.column;
    }
    mean_r += p.real / n;
    mean_s += p.synthetic / n;
  }
  scatter->mean_abs_gap = points.empty() ? 0.0 : sum_gap / n;
  double srr = 0.0, sss = 0.0, srs = 0.0;
  for (const auto& p : points) {
    srr += (p.real - mean_r) * (p.real - mean_r);
    sss += (p.synthetic - mean_s) * (p.synthetic - mean_s);
    srs += (p.real - mean_r) * (p.synthetic - mean_s);
  }
  scatter->correlation = srr > 0.0 && sss > 0.0 ? srs / std::sqrt(srr * sss) : 0.0;
}

// The binary columns of the chosen rows as a 0/1 matrix (level index 1 is a one).
Eigen::MatrixXd BinaryMatrix(const data::Table& table, const std::vector<int>& columns,
                             const std::vector<int64_t>& rows) {
  Eigen::MatrixXd x(static_cast<Eigen::Index>(rows.size()),
                    static_cast<Eigen::Index>(columns.size()));
  for (size_t c = 0; c < columns.size(); ++c) {
    for (size_t i = 0; i < rows.size(); ++i) {
      x(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(c)) =
          table.cells(rows[i], columns[c]) >= 0.5 ? 1.0 : 0.0;
    }
  }
  return x;
}

// x without column `skip`.
Eigen::MatrixXd DropColumn(const Eigen::MatrixXd& x, Eigen::Index skip) {
  Eigen::MatrixXd out(x.rows(), x.cols() - 1);
  out.leftCols(skip) = x.leftCols(skip);
  out.rightCols(x.cols() - skip - 1) = x.rightCols(x.cols() - skip - 1);
  return out;
}

}  // namespace

std::vector<int> BinaryColumns(const data::Schema& schema) {
  std::vector<int> binary;
  for (int j = 0; j < schema.num_columns(); ++j) {
    const data::Column& column = schema.column(j);
    if (column.type == data::ColumnType::kCategorical && column.categories.size() == 2 &&
        !column.nullable) {
      binary.push_back(j);
    }
  }
  return binary;
}

absl::StatusOr<DiagonalScatter> DimensionWiseProbability(const data::Schema& schema,
                                                         const data::Table& real,
                                                         const data::Table& synthetic) {
  if (absl::Status s = CheckTable(schema, real, "real"); !s.ok()) return s;
  if (absl::Status s = CheckTable(schema, synthetic, "synthetic"); !s.ok()) return s;
  const std::vector<int> binary = BinaryColumns(schema);
  if (binary.empty()) {
    return absl::InvalidArgumentError(
        "the dimension-wise probability needs binary columns (categorical with two levels)");
  }
  DiagonalScatter scatter;
  for (int j : binary) {
    scatter.points.push_back({schema.column(j).name,
                              (real.cells.col(j).array() >= 0.5).cast<double>().mean(),
                              (synthetic.cells.col(j).array() >= 0.5).cast<double>().mean()});
  }
  Summarize(&scatter);
  return scatter;
}

absl::StatusOr<DimensionWiseAuroc> DimensionWiseAurocOf(const data::Schema& schema,
                                                        const data::Table& real_train,
                                                        const data::Table& synthetic,
                                                        const data::Table& real_test,
                                                        const DimensionWiseAurocOptions& options) {
  if (absl::Status s = CheckTable(schema, real_train, "real training"); !s.ok()) return s;
  if (absl::Status s = CheckTable(schema, synthetic, "synthetic"); !s.ok()) return s;
  if (absl::Status s = CheckTable(schema, real_test, "real test"); !s.ok()) return s;
  if (options.max_targets < 1 || options.train_rows < 2 || options.test_rows < 2 ||
      options.max_iterations < 1 || !(options.l2 >= 0.0) || options.min_test_class_rows < 1) {
    return absl::InvalidArgumentError(
        "dimension-wise AUROC options: max_targets, max_iterations and min_test_class_rows "
        "must be >= 1, train_rows and test_rows >= 2, l2 finite and >= 0");
  }
  const std::vector<int> binary = BinaryColumns(schema);
  if (binary.size() < 2) {
    return absl::InvalidArgumentError(
        "the dimension-wise prediction needs at least two binary columns");
  }
  PublicRng rng(options.seed);
  const std::vector<int64_t> real_rows =
      internal::Subsample(real_train.num_rows(), options.train_rows, &rng);
  const std::vector<int64_t> synthetic_rows =
      internal::Subsample(synthetic.num_rows(), options.train_rows, &rng);
  const std::vector<int64_t> test_rows =
      internal::Subsample(real_test.num_rows(), options.test_rows, &rng);
  const Eigen::MatrixXd x_real = BinaryMatrix(real_train, binary, real_rows);
  const Eigen::MatrixXd x_synthetic = BinaryMatrix(synthetic, binary, synthetic_rows);
  const Eigen::MatrixXd x_test = BinaryMatrix(real_test, binary, test_rows);

  DimensionWiseAuroc result;
  std::vector<int> eligible;  // Positions in `binary`.
  for (size_t c = 0; c < binary.size(); ++c) {
    const auto column = static_cast<Eigen::Index>(c);
    const double ones = x_test.col(column).sum();
    const double zeros = static_cast<double>(x_test.rows()) - ones;
    const double real_ones = x_real.col(column).sum();
    if (ones < options.min_test_class_rows || zeros < options.min_test_class_rows ||
        real_ones < 1 || real_ones > static_cast<double>(x_real.rows()) - 1) {
      continue;
    }
    const double synthetic_ones = x_synthetic.col(column).sum();
    if (synthetic_ones < 1 || synthetic_ones > static_cast<double>(x_synthetic.rows()) - 1) {
      result.constant_in_synthetic.push_back(schema.column(binary[c]).name);
      continue;
    }
    eligible.push_back(static_cast<int>(c));
  }
  result.eligible_targets = static_cast<int>(eligible.size());
  if (eligible.empty()) {
    return absl::FailedPreconditionError(
        "no binary column has both levels in the real test rows, the real training rows and "
        "the synthetic rows: nothing to predict");
  }
  // A seeded uniform subset, kept in schema order.
  for (size_t i = 0; i + 1 < eligible.size(); ++i) {
    const size_t j = i + static_cast<size_t>(rng.UniformInt(eligible.size() - i));
    std::swap(eligible[i], eligible[j]);
  }
  if (eligible.size() > static_cast<size_t>(options.max_targets)) {
    eligible.resize(static_cast<size_t>(options.max_targets));
  }
  std::sort(eligible.begin(), eligible.end());

  LogisticRegressionOptions lr;
  lr.l2 = options.l2;
  lr.max_iterations = options.max_iterations;
  std::vector<FeaturePoint> points(eligible.size());
  std::vector<absl::Status> statuses(eligible.size());
  auto score = [&](int t) {
    const auto target = static_cast<Eigen::Index>(eligible[static_cast<size_t>(t)]);
    const Eigen::VectorXi y_test = (x_test.col(target).array() >= 0.5).cast<int>();
    const Eigen::MatrixXd test_features = DropColumn(x_test, target);
    auto auc_of = [&](const Eigen::MatrixXd& x) -> absl::StatusOr<double> {
      const Eigen::VectorXi y = (x.col(target).array() >= 0.5).cast<int>();
      absl::StatusOr<std::unique_ptr<LogisticRegression>> model =
          LogisticRegression::Fit(DropColumn(x, target), y, 2, lr);
      if (!model.ok()) return model.status();
      absl::StatusOr<Eigen::MatrixXd> proba = (*model)->PredictProba(test_features);
      if (!proba.ok()) return proba.status();
      return RocAuc(proba->col(1), y_test);
    };
    absl::StatusOr<double> real_auc = auc_of(x_real);
    absl::StatusOr<double> synthetic_auc = auc_of(x_synthetic);
    if (!real_auc.ok()) {
      statuses[static_cast<size_t>(t)] = real_auc.status();
    } else if (!synthetic_auc.ok()) {
      statuses[static_cast<size_t>(t)] = synthetic_auc.status();
    } else {
      points[static_cast<size_t>(t)] = {schema.column(binary[static_cast<size_t>(target)]).name,
                                        *real_auc, *synthetic_auc};
    }
  };
  ShardPool pool(0);
  pool.Run(static_cast<int>(eligible.size()), score);
  for (size_t t = 0; t < statuses.size(); ++t) {
    if (!statuses[t].ok()) {
      return absl::Status(statuses[t].code(),
                          absl::StrCat("predicting '", schema.column(binary[eligible[t]]).name,
                                       "' from the other binary columns: ",
                                       statuses[t].message()));
    }
  }
  result.scatter.points = std::move(points);
  Summarize(&result.scatter);
  return result;
}

std::string DiagonalScatterSvg(const DiagonalScatter& scatter, const std::string& title,
                               const std::string& x_label, const std::string& y_label,
                               double lo, double hi) {
  constexpr int kSize = 320;    // Plot square, pixels.
  constexpr int kMargin = 48;   // Left and bottom, for ticks and labels.
  constexpr int kTop = 28;      // For the title.
  const int width = kMargin + kSize + 12;
  const int height = kTop + kSize + kMargin;
  const double span = hi > lo ? hi - lo : 1.0;
  auto px = [&](double v) { return kMargin + kSize * (std::clamp(v, lo, hi) - lo) / span; };
  auto py = [&](double v) { return kTop + kSize * (1.0 - (std::clamp(v, lo, hi) - lo) / span); };
  std::string svg = absl::StrFormat(
      "<svg class=\"scatter\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" role=\"img\" font-family=\"sans-serif\">"
      "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>",
      width, height, width, height, width, height);
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"%d\" y=\"18\" font-size=\"13\">%s</text>",
                                        kMargin, HtmlEscape(title)));
  absl::StrAppend(&svg, absl::StrFormat(
                            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                            "stroke=\"#888\"/>",
                            kMargin, kTop, kSize, kSize));
  for (int tick = 0; tick <= 4; ++tick) {
    const double v = lo + span * tick / 4.0;
    absl::StrAppend(&svg, absl::StrFormat(
                              "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" "
                              "text-anchor=\"middle\">%g</text>"
                              "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" "
                              "text-anchor=\"end\">%g</text>",
                              px(v), kTop + kSize + 14, v, kMargin - 4, py(v) + 3, v));
  }
  absl::StrAppend(&svg, absl::StrFormat(
                            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                            "stroke=\"#aaa\" stroke-dasharray=\"4 3\"/>",
                            px(lo), py(lo), px(hi), py(hi)));
  for (const FeaturePoint& p : scatter.points) {
    absl::StrAppend(&svg, absl::StrFormat(
                              "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.2\" fill=\"#3b6ea8\" "
                              "fill-opacity=\"0.6\"><title>%s: %.4g, %.4g</title></circle>",
                              px(p.real), py(p.synthetic), HtmlEscape(p.column), p.real,
                              p.synthetic));
  }
  absl::StrAppend(&svg, absl::StrFormat(
                            "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s"
                            "</text><text x=\"12\" y=\"%d\" font-size=\"11\" "
                            "text-anchor=\"middle\" transform=\"rotate(-90 12 %d)\">%s</text>",
                            kMargin + kSize / 2, kTop + kSize + 34, HtmlEscape(x_label),
                            kTop + kSize / 2, kTop + kSize / 2, HtmlEscape(y_label)));
  absl::StrAppend(&svg, "</svg>");
  return svg;
}

}  // namespace dpcurator::eval
