#include "core/eval/paper_metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "Eigen/Cholesky"
#include "Eigen/Core"
#include "Eigen/Eigenvalues"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/eval/fidelity.h"
#include "core/eval/logistic_regression.h"
#include "core/eval/metrics.h"
#include "core/ldp/assignment.h"
#include "core/util/public_rng.h"
#include "core/eval/internal/subsample.h"
#include "core/util/shard_pool.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::eval {
namespace {

bool IsCategorical(const data::Schema& schema, int c) {
  return schema.column(c).type == data::ColumnType::kCategorical;
}

// Every column but an image column, in schema order.
std::vector<int> TabularColumns(const data::Schema& schema) {
  std::vector<int> columns;
  for (int c = 0; c < schema.num_columns(); ++c) {
    if (schema.column(c).type != data::ColumnType::kImage) columns.push_back(c);
  }
  return columns;
}

// Offsets of each tabular column's block in the encoded row: one coordinate
// (numeric, scaled by the declared bounds) or NumLevels (one-hot).
struct Encoding {
  std::vector<int> columns;
  std::vector<int> offset;
  std::vector<int> width;
  int dim = 0;
};

Encoding MakeEncoding(const data::Schema& schema) {
  Encoding e;
  e.columns = TabularColumns(schema);
  for (int c : e.columns) {
    e.offset.push_back(e.dim);
    // A nullable numeric (issue 38): its value (0 when missing) and a
    // missing flag, as the encoder's indicator block says it.
    const int w = IsCategorical(schema, c) ? schema.NumLevels(c)
                                           : (schema.column(c).nullable ? 2 : 1);
    e.width.push_back(w);
    e.dim += w;
  }
  return e;
}

Eigen::MatrixXd Encode(const data::Schema& schema, const Encoding& e, const data::Table& table,
                       const std::vector<int64_t>& rows) {
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(rows.size()), e.dim);
  for (size_t j = 0; j < e.columns.size(); ++j) {
    const int c = e.columns[j];
    const data::Column& column = schema.column(c);
    for (size_t i = 0; i < rows.size(); ++i) {
      const double v = table.cells(rows[i], c);
      if (IsCategorical(schema, c)) {
        x(static_cast<Eigen::Index>(i), e.offset[j] + static_cast<int>(v)) = 1.0;
      } else if (std::isnan(v)) {
        x(static_cast<Eigen::Index>(i), e.offset[j] + 1) = 1.0;  // missing; value slot 0
      } else {
        x(static_cast<Eigen::Index>(i), e.offset[j]) =
            (v - column.lower) / (column.upper - column.lower);
      }
    }
  }
  return x;
}

using internal::AllRows;
using internal::Subsample;

// Columns of `x` outside [skip_begin, skip_begin + skip_width).
Eigen::MatrixXd DropBlock(const Eigen::MatrixXd& x, int skip_begin, int skip_width) {
  Eigen::MatrixXd out(x.rows(), x.cols() - skip_width);
  out.leftCols(skip_begin) = x.leftCols(skip_begin);
  out.rightCols(x.cols() - skip_begin - skip_width) =
      x.rightCols(x.cols() - skip_begin - skip_width);
  return out;
}

// Ridge regression with an unpenalised intercept: centre the training
// features and target, solve (Xc^T Xc / n + lambda I) b = Xc^T yc / n
// (ESL 2nd ed. §3.4.1, Eq. 3.44, with the intercept handled by centring).
Eigen::VectorXd RidgePredict(const Eigen::MatrixXd& train_x, const Eigen::VectorXd& train_y,
                             const Eigen::MatrixXd& test_x, double lambda) {
  const double n = static_cast<double>(train_x.rows());
  const Eigen::RowVectorXd mean = train_x.colwise().mean();
  const double y_mean = train_y.mean();
  const Eigen::MatrixXd xc = train_x.rowwise() - mean;
  Eigen::MatrixXd gram = xc.transpose() * xc / n;
  gram.diagonal().array() += lambda;
  const Eigen::VectorXd b =
      gram.ldlt().solve(xc.transpose() * (train_y.array() - y_mean).matrix() / n);
  return ((test_x.rowwise() - mean) * b).array() + y_mean;
}

// Bin of a value of column c for the 3-way histograms: the level for a
// categorical column, else floor((v - lower) / (upper - lower) * bins) with
// the upper bound in the last bin (papers/dp-auto-gan.md §3.2, with the
// declared bounds in place of the real data's range, as issue 15 asks); a
// nullable numeric's missing value (NaN) is one more bin, `bins`.
int BinOf(const data::Column& column, bool categorical, double v, int bins) {
  if (categorical) return static_cast<int>(v);
  if (std::isnan(v)) return bins;
  const int b =
      static_cast<int>(std::floor((v - column.lower) / (column.upper - column.lower) * bins));
  return std::clamp(b, 0, bins - 1);
}

// Sorted keys of one table's rows over a triple.
std::vector<int64_t> TripleKeys(const std::vector<Eigen::VectorXi>& binned,
                                const std::vector<int>& sizes, int a, int b, int c) {
  const Eigen::Index n = binned[a].size();
  std::vector<int64_t> keys(static_cast<size_t>(n));
  for (Eigen::Index i = 0; i < n; ++i) {
    keys[static_cast<size_t>(i)] =
        binned[a](i) + int64_t{sizes[a]} * (binned[b](i) + int64_t{sizes[b]} * binned[c](i));
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

// sum over cells |p - q| of two histograms given as sorted key lists.
double SortedL1(const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
  const double nx = static_cast<double>(x.size());
  const double ny = static_cast<double>(y.size());
  double l1 = 0.0;
  size_t i = 0, j = 0;
  while (i < x.size() || j < y.size()) {
    int64_t key;
    if (j == y.size() || (i < x.size() && x[i] < y[j])) {
      key = x[i];
    } else {
      key = y[j];
    }
    size_t ci = 0, cj = 0;
    while (i < x.size() && x[i] == key) ++i, ++ci;
    while (j < y.size() && y[j] == key) ++j, ++cj;
    l1 += std::abs(static_cast<double>(ci) / nx - static_cast<double>(cj) / ny);
  }
  return l1;
}

double ShareAt(const data::Table& table, int c, double value, double tolerance) {
  int64_t hits = 0;
  for (Eigen::Index i = 0; i < table.num_rows(); ++i) {
    if (std::abs(table.cells(i, c) - value) <= tolerance) ++hits;
  }
  return static_cast<double>(hits) / static_cast<double>(table.num_rows());
}

std::optional<int> FindLevel(const data::Schema& schema, int c, const std::string& name) {
  const auto& categories = schema.column(c).categories;
  for (size_t k = 0; k < categories.size(); ++k) {
    if (categories[k] == name) return static_cast<int>(k);
  }
  return std::nullopt;
}

uint64_t PairKey(int64_t a, int64_t b) {
  return (static_cast<uint64_t>(a) << 32) ^ static_cast<uint64_t>(b & 0xffffffff);
}

// Share of `table`'s rows whose (a, b) values form one of `pairs`.
double PairAgreement(const data::Table& table, int a, int b,
                     const std::unordered_set<uint64_t>& pairs) {
  int64_t hits = 0;
  for (Eigen::Index i = 0; i < table.num_rows(); ++i) {
    if (pairs.count(PairKey(std::llround(table.cells(i, a)), std::llround(table.cells(i, b))))) {
      ++hits;
    }
  }
  return static_cast<double>(hits) / static_cast<double>(table.num_rows());
}

std::unordered_set<uint64_t> ReferencePairs(const data::Table& table, int a, int b) {
  std::unordered_set<uint64_t> pairs;
  for (Eigen::Index i = 0; i < table.num_rows(); ++i) {
    pairs.insert(PairKey(std::llround(table.cells(i, a)), std::llround(table.cells(i, b))));
  }
  return pairs;
}

}  // namespace

absl::Status PaperMetricsOptions::Validate() const {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(prediction_train_rows, "Prediction training rows"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(prediction_test_rows, "Prediction test rows"));
  DPC_RETURN_IF_ERROR(
      ValidatePositiveInt(prediction_max_iterations, "Prediction maximum iterations"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(ridge_l2, "Ridge L2"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(marginal_triples, "Marginal triples"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(marginal_bins, "Marginal bins"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(wasserstein_sample_rows, "Wasserstein sample rows"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(wasserstein_repetitions, "Wasserstein repetitions"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(max_discrete_values, "Maximum discrete values"));
  return absl::OkStatus();
}

double BinaryF1(const Eigen::VectorXi& predicted, const Eigen::VectorXi& truth, int positive) {
  int64_t tp = 0, fp = 0, fn = 0;
  for (Eigen::Index i = 0; i < truth.size(); ++i) {
    const bool p = predicted(i) == positive;
    const bool t = truth(i) == positive;
    tp += p && t;
    fp += p && !t;
    fn += !p && t;
  }
  const int64_t denominator = 2 * tp + fp + fn;
  return denominator == 0 ? 0.0 : 2.0 * static_cast<double>(tp) / static_cast<double>(denominator);
}

double RSquared(const Eigen::VectorXd& predicted, const Eigen::VectorXd& truth) {
  const double residual = (truth - predicted).squaredNorm();
  const double total = (truth.array() - truth.mean()).matrix().squaredNorm();
  if (total == 0.0) return residual == 0.0 ? 1.0 : 0.0;
  return 1.0 - residual / total;
}

absl::StatusOr<DimensionWisePrediction> DimensionWise(const data::Schema& schema,
                                                      const data::Table& train,
                                                      const data::Table& test,
                                                      const PaperMetricsOptions& options) {
  DPC_RETURN_IF_ERROR(options.Validate());
  const Encoding e = MakeEncoding(schema);
  if (e.columns.size() < 2) {
    return absl::InvalidArgumentError(
        "Dimension-wise prediction needs at least two non-image columns in the "
        "schema");
  }
  PublicRng rng(options.seed);
  const std::vector<int64_t> train_rows =
      Subsample(train.num_rows(), options.prediction_train_rows, &rng);
  const std::vector<int64_t> test_rows =
      Subsample(test.num_rows(), options.prediction_test_rows, &rng);
  const Eigen::MatrixXd train_all = Encode(schema, e, train, train_rows);
  const Eigen::MatrixXd test_all = Encode(schema, e, test, test_rows);

  DimensionWisePrediction result;
  result.train_rows = static_cast<int64_t>(train_rows.size());
  result.test_rows = static_cast<int64_t>(test_rows.size());
  result.columns.resize(e.columns.size());
  std::vector<absl::Status> statuses(e.columns.size());
  LogisticRegressionOptions lr;
  lr.max_iterations = options.prediction_max_iterations;

  auto score_column = [&](int j) {
    const int c = e.columns[static_cast<size_t>(j)];
    DimensionScore& out = result.columns[static_cast<size_t>(j)];
    out.column = schema.column(c).name;
    const Eigen::MatrixXd train_x = DropBlock(train_all, e.offset[j], e.width[j]);
    const Eigen::MatrixXd test_x = DropBlock(test_all, e.offset[j], e.width[j]);
    if (!IsCategorical(schema, c)) {
      out.metric = "r2";
      // Predicted where it is present: a nullable numeric's missing rows
      // (NaN) are left out of both sides (issue 38).
      auto present = [&](const data::Table& t, const std::vector<int64_t>& rows,
                         const Eigen::MatrixXd& x, Eigen::MatrixXd* x_out, Eigen::VectorXd* y) {
        std::vector<Eigen::Index> kept;
        for (size_t i = 0; i < rows.size(); ++i) {
          if (!std::isnan(t.cells(rows[i], c))) kept.push_back(static_cast<Eigen::Index>(i));
        }
        x_out->resize(static_cast<Eigen::Index>(kept.size()), x.cols());
        y->resize(static_cast<Eigen::Index>(kept.size()));
        for (size_t k = 0; k < kept.size(); ++k) {
          x_out->row(static_cast<Eigen::Index>(k)) = x.row(kept[k]);
          (*y)(static_cast<Eigen::Index>(k)) = t.cells(rows[static_cast<size_t>(kept[k])], c);
        }
      };
      Eigen::MatrixXd train_present, test_present;
      Eigen::VectorXd train_y, test_y;
      present(train, train_rows, train_x, &train_present, &train_y);
      present(test, test_rows, test_x, &test_present, &test_y);
      if (train_y.size() < 2 || test_y.size() < 1) {
        out.score = 0.0;  // too few present values to fit or to judge
        return;
      }
      out.score =
          RSquared(RidgePredict(train_present, train_y, test_present, options.ridge_l2), test_y);
      return;
    }
    const int levels = schema.NumLevels(c);
    out.metric = levels == 2 ? "f1" : "micro_f1";
    Eigen::VectorXi train_y(static_cast<Eigen::Index>(train_rows.size()));
    Eigen::VectorXi test_y(static_cast<Eigen::Index>(test_rows.size()));
    for (size_t i = 0; i < train_rows.size(); ++i) {
      train_y(i) = static_cast<int>(train.cells(train_rows[i], c));
    }
    for (size_t i = 0; i < test_rows.size(); ++i) {
      test_y(i) = static_cast<int>(test.cells(test_rows[i], c));
    }
    Eigen::VectorXi predicted;
    const bool one_level = (train_y.array() == train_y(0)).all();
    if (one_level) {
      out.constant_predictor = true;
      predicted = Eigen::VectorXi::Constant(test_y.size(), train_y(0));
    } else {
      auto model = LogisticRegression::Fit(train_x, train_y, levels, lr);
      if (!model.ok()) {
        statuses[static_cast<size_t>(j)] = model.status();
        return;
      }
      auto proba = (*model)->PredictProba(test_x);
      if (!proba.ok()) {
        statuses[static_cast<size_t>(j)] = proba.status();
        return;
      }
      predicted = ArgMax(*proba);
    }
    if (levels == 2) {
      out.score = BinaryF1(predicted, test_y, 1);
    } else {
      // Micro F1 over all classes equals accuracy (every error is one FP and
      // one FN); the paper's code uses f1_score(average='micro').
      out.score = (predicted.array() == test_y.array()).cast<double>().mean();
    }
  };
  ShardPool pool(0);
  pool.Run(static_cast<int>(e.columns.size()), score_column);
  for (size_t j = 0; j < statuses.size(); ++j) {
    if (!statuses[j].ok()) {
      return absl::Status(statuses[j].code(),
                          absl::StrCat("Predicting column '", result.columns[j].column,
                                       "' from the others: ", statuses[j].message()));
    }
  }
  double sum = 0.0;
  for (const auto& column : result.columns) sum += column.score;
  result.mean_score = sum / static_cast<double>(result.columns.size());
  return result;
}

absl::StatusOr<ThreeWayMarginals> ThreeWayMarginalDistance(const data::Schema& schema,
                                                           const data::Table& candidate,
                                                           const data::Table& reference,
                                                           const PaperMetricsOptions& options) {
  DPC_RETURN_IF_ERROR(options.Validate());
  const std::vector<int> columns = TabularColumns(schema);
  const int m = static_cast<int>(columns.size());
  if (m < 3) {
    return absl::InvalidArgumentError("3-way marginals need at least three non-image columns");
  }
  std::vector<Eigen::VectorXi> binned_c(columns.size()), binned_r(columns.size());
  std::vector<int> sizes(columns.size());
  for (int j = 0; j < m; ++j) {
    const int c = columns[static_cast<size_t>(j)];
    const bool categorical = IsCategorical(schema, c);
    sizes[j] = categorical ? schema.NumLevels(c)
                           : options.marginal_bins + (schema.column(c).nullable ? 1 : 0);
    auto bin = [&](const data::Table& t, Eigen::VectorXi* out) {
      out->resize(t.num_rows());
      for (Eigen::Index i = 0; i < t.num_rows(); ++i) {
        (*out)(i) = BinOf(schema.column(c), categorical, t.cells(i, c), options.marginal_bins);
      }
    };
    bin(candidate, &binned_c[j]);
    bin(reference, &binned_r[j]);
  }
  // The triples: all of them when there are at most options.marginal_triples,
  // else that many distinct ones drawn uniformly (seeded).
  std::vector<std::array<int, 3>> triples;
  const int64_t total = int64_t{m} * (m - 1) * (m - 2) / 6;
  if (total <= options.marginal_triples) {
    for (int a = 0; a < m; ++a)
      for (int b = a + 1; b < m; ++b)
        for (int c = b + 1; c < m; ++c) triples.push_back({a, b, c});
  } else {
    PublicRng rng(options.seed);
    std::set<std::array<int, 3>> seen;
    while (static_cast<int>(triples.size()) < options.marginal_triples) {
      std::array<int, 3> t;
      for (int& v : t) v = static_cast<int>(rng.UniformInt(static_cast<uint64_t>(m)));
      std::sort(t.begin(), t.end());
      if (t[0] == t[1] || t[1] == t[2]) continue;
      if (seen.insert(t).second) triples.push_back(t);
    }
  }
  std::vector<double> l1(triples.size());
  ShardPool pool(0);
  pool.Run(static_cast<int>(triples.size()), [&](int s) {
    const auto& t = triples[static_cast<size_t>(s)];
    l1[static_cast<size_t>(s)] = SortedL1(TripleKeys(binned_c, sizes, t[0], t[1], t[2]),
                                          TripleKeys(binned_r, sizes, t[0], t[1], t[2]));
  });
  ThreeWayMarginals result;
  result.triples = static_cast<int>(triples.size());
  double sum = 0.0;
  for (size_t s = 0; s < triples.size(); ++s) {
    sum += l1[s];
    if (s == 0 || l1[s] > result.max_l1) {
      result.max_l1 = l1[s];
      const auto& t = triples[s];
      result.max_triple =
          absl::StrCat(schema.column(columns[t[0]]).name, ", ", schema.column(columns[t[1]]).name,
                       ", ", schema.column(columns[t[2]]).name);
    }
  }
  result.mean_l1 = sum / static_cast<double>(triples.size());
  return result;
}

absl::StatusOr<PcaWasserstein> PcaWassersteinScore(const data::Schema& schema,
                                                   const data::Table& candidate,
                                                   const data::Table& reference,
                                                   const PaperMetricsOptions& options) {
  DPC_RETURN_IF_ERROR(options.Validate());
  const Encoding e = MakeEncoding(schema);
  if (e.dim == 0) return absl::InvalidArgumentError("The schema has no non-image column");
  const Eigen::MatrixXd r = Encode(schema, e, reference, AllRows(reference.num_rows()));
  const Eigen::MatrixXd s = Encode(schema, e, candidate, AllRows(candidate.num_rows()));
  // The principal axes of the reference (papers/dp-auto-gan.md §3.2, "k-way
  // PCA marginal": P holds the top eigenvectors of the centred reference's
  // A^T A). Unlike the paper's code we do not z-score: the declared-bounds
  // encoding gives the universe a data-independent diameter, whereas
  // z-scored one-hot levels have ranges up to 1 / sqrt(p (1 - p)).
  const Eigen::RowVectorXd mean = r.colwise().mean();
  const Eigen::MatrixXd rc = r.rowwise() - mean;
  const Eigen::MatrixXd cov = rc.transpose() * rc / static_cast<double>(r.rows());
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(cov);
  const int k = std::min(2, e.dim);
  const Eigen::MatrixXd axes = eigen.eigenvectors().rightCols(k);  // Ascending order.
  const double trace = eigen.eigenvalues().sum();
  PcaWasserstein result;
  result.explained_variance_ratio =
      trace > 0 ? std::min(1.0, eigen.eigenvalues().tail(k).sum() / trace) : 1.0;
  if (result.explained_variance_ratio <= 0) result.explained_variance_ratio = 1.0;
  const Eigen::MatrixXd rp = rc * axes;
  const Eigen::MatrixXd sp = (s.rowwise() - mean) * axes;
  // Each one-hot block contributes at most sqrt(2) (two levels differ), each
  // numeric coordinate at most 1 (a nullable numeric has two: its value and
  // its missing flag).
  int numerics = 0, categoricals = 0;
  for (int c : e.columns) {
    if (IsCategorical(schema, c)) {
      ++categoricals;
    } else {
      numerics += schema.column(c).nullable ? 2 : 1;
    }
  }
  result.diameter = std::sqrt(static_cast<double>(numerics + 2 * categoricals));
  // W1 with the Euclidean ground cost: the paper writes W2 but its code
  // calls transport::wasserstein with the default p = 1 (notes, pitfall 11),
  // which produced the published Table 3. Exact on equal-size uniform
  // subsamples: the optimal plan is a permutation (Birkhoff), found by
  // ldp::SolveAssignment; averaged over repetitions as the paper's code does.
  const int64_t m =
      std::min<int64_t>({int64_t{options.wasserstein_sample_rows}, rp.rows(), sp.rows()});
  result.sample_rows = static_cast<int>(m);
  result.repetitions = options.wasserstein_repetitions;
  PublicRng rng(options.seed ^ 0x5a5a5a5aULL);
  std::vector<std::vector<int64_t>> rows_r, rows_s;
  for (int rep = 0; rep < options.wasserstein_repetitions; ++rep) {
    rows_r.push_back(Subsample(rp.rows(), m, &rng));
    rows_s.push_back(Subsample(sp.rows(), m, &rng));
  }
  std::vector<double> w(static_cast<size_t>(options.wasserstein_repetitions));
  std::vector<absl::Status> statuses(w.size());
  ShardPool pool(0);
  pool.Run(options.wasserstein_repetitions, [&](int rep) {
    Eigen::MatrixXd cost(m, m);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        cost(i, j) = (rp.row(rows_r[rep][i]) - sp.row(rows_s[rep][j])).norm();
      }
    }
    auto solved = ldp::SolveAssignment(cost);
    if (!solved.ok()) {
      statuses[static_cast<size_t>(rep)] = solved.status();
      return;
    }
    w[static_cast<size_t>(rep)] = solved->total_cost / static_cast<double>(m);
  });
  for (const absl::Status& status : statuses) DPC_RETURN_IF_ERROR(status);
  double sum = 0.0;
  for (double v : w) sum += v;
  result.w1 = sum / static_cast<double>(w.size());
  result.score = 1.0 - result.w1 / (std::sqrt(result.explained_variance_ratio) * result.diameter);
  return result;
}

ShapeChecks ComputeShapeChecks(const data::Schema& schema, const data::Table& candidate,
                               const data::Table& reference, const PaperMetricsOptions& options) {
  ShapeChecks out;
  const std::vector<int> columns = TabularColumns(schema);
  auto tolerance = [&](int c) { return 1e-9 * (schema.column(c).upper - schema.column(c).lower); };
  // (a) Point masses at the reference's most frequent value (ties: the
  // smallest value).
  for (int c : columns) {
    if (IsCategorical(schema, c)) continue;
    // Present values only: a missing value (NaN) is no point mass, and sort
    // must not see it.
    std::vector<double> values;
    for (Eigen::Index i = 0; i < reference.num_rows(); ++i) {
      if (!std::isnan(reference.cells(i, c))) values.push_back(reference.cells(i, c));
    }
    if (values.empty()) continue;
    std::sort(values.begin(), values.end());
    double best = values[0];
    int64_t best_count = 0;
    for (size_t i = 0; i < values.size();) {
      size_t j = i;
      while (j < values.size() && values[j] == values[i]) ++j;
      if (static_cast<int64_t>(j - i) > best_count) {
        best_count = static_cast<int64_t>(j - i);
        best = values[i];
      }
      i = j;
    }
    out.point_masses.push_back(
        {schema.column(c).name, best,
         static_cast<double>(best_count) / static_cast<double>(reference.num_rows()),
         ShareAt(candidate, c, best, tolerance(c))});
  }
  // (b) One-to-one pairs among the discrete columns: categorical, or integer
  // numeric with at most options.max_discrete_values distinct values.
  std::vector<int> discrete;
  for (int c : columns) {
    if (IsCategorical(schema, c)) {
      discrete.push_back(c);
      continue;
    }
    // A nullable numeric's NaN has no integer value to pair: left out.
    if (!schema.column(c).integer || schema.column(c).nullable) continue;
    std::unordered_set<int64_t> distinct;
    for (Eigen::Index i = 0; i < reference.num_rows(); ++i) {
      distinct.insert(std::llround(reference.cells(i, c)));
      if (static_cast<int>(distinct.size()) > options.max_discrete_values) break;
    }
    if (static_cast<int>(distinct.size()) <= options.max_discrete_values) discrete.push_back(c);
  }
  for (size_t x = 0; x < discrete.size(); ++x) {
    for (size_t y = x + 1; y < discrete.size(); ++y) {
      const int a = discrete[x], b = discrete[y];
      std::unordered_map<int64_t, int64_t> forward, backward;
      bool one_to_one = true;
      for (Eigen::Index i = 0; i < reference.num_rows() && one_to_one; ++i) {
        const int64_t va = std::llround(reference.cells(i, a));
        const int64_t vb = std::llround(reference.cells(i, b));
        auto [f, f_new] = forward.emplace(va, vb);
        auto [g, g_new] = backward.emplace(vb, va);
        one_to_one = f->second == vb && g->second == va;
      }
      // A column with one value is trivially determined: not a dependency.
      if (!one_to_one || forward.size() < 2) continue;
      out.dependencies.push_back({schema.column(a).name, schema.column(b).name,
                                  static_cast<int>(forward.size()),
                                  PairAgreement(candidate, a, b, ReferencePairs(reference, a, b))});
    }
  }
  // (c) Level pairs of two categorical columns that no reference row has.
  double impossible_sum = 0.0;
  for (size_t x = 0; x < columns.size(); ++x) {
    for (size_t y = x + 1; y < columns.size(); ++y) {
      const int a = columns[x], b = columns[y];
      if (!IsCategorical(schema, a) || !IsCategorical(schema, b)) continue;
      const int la = schema.NumLevels(a), lb = schema.NumLevels(b);
      std::vector<char> seen(static_cast<size_t>(la) * lb, 0);
      for (Eigen::Index i = 0; i < reference.num_rows(); ++i) {
        seen[static_cast<size_t>(reference.cells(i, a)) * lb +
             static_cast<size_t>(reference.cells(i, b))] = 1;
      }
      const int empty = static_cast<int>(std::count(seen.begin(), seen.end(), 0));
      if (empty == 0) continue;
      int64_t hits = 0;
      for (Eigen::Index i = 0; i < candidate.num_rows(); ++i) {
        hits += seen[static_cast<size_t>(candidate.cells(i, a)) * lb +
                     static_cast<size_t>(candidate.cells(i, b))] == 0;
      }
      const double share = static_cast<double>(hits) / static_cast<double>(candidate.num_rows());
      out.impossible.push_back({schema.column(a).name, schema.column(b).name, empty, share});
      impossible_sum += share;
    }
  }
  if (!out.impossible.empty()) {
    out.impossible_mean_share = impossible_sum / static_cast<double>(out.impossible.size());
  }
  // Issue 17's table, by column name (Adult).
  for (const auto& [name, value] : std::vector<std::pair<std::string, double>>{
           {"hours-per-week", 40.0}, {"capital-gain", 0.0}}) {
    const auto c = schema.FindColumn(name);
    if (!c.has_value() || IsCategorical(schema, *c) ||
        schema.column(*c).type == data::ColumnType::kImage) {
      continue;
    }
    out.named.push_back({absl::StrCat(name, " = ", value),
                         ShareAt(reference, *c, value, tolerance(*c)),
                         ShareAt(candidate, *c, value, tolerance(*c))});
  }
  {
    const auto a = schema.FindColumn("education");
    const auto b = schema.FindColumn("education-num");
    if (a.has_value() && b.has_value() && schema.column(*a).type != data::ColumnType::kImage &&
        schema.column(*b).type != data::ColumnType::kImage) {
      const auto pairs = ReferencePairs(reference, *a, *b);
      out.named.push_back({"education agrees with education-num",
                           PairAgreement(reference, *a, *b, pairs),
                           PairAgreement(candidate, *a, *b, pairs)});
    }
  }
  {
    const auto a = schema.FindColumn("relationship");
    const auto b = schema.FindColumn("sex");
    if (a.has_value() && b.has_value() && IsCategorical(schema, *a) && IsCategorical(schema, *b)) {
      const auto husband = FindLevel(schema, *a, "Husband");
      const auto female = FindLevel(schema, *b, "Female");
      if (husband.has_value() && female.has_value()) {
        auto share = [&](const data::Table& t) {
          int64_t hits = 0;
          for (Eigen::Index i = 0; i < t.num_rows(); ++i) {
            hits += static_cast<int>(t.cells(i, *a)) == *husband &&
                    static_cast<int>(t.cells(i, *b)) == *female;
          }
          return static_cast<double>(hits) / static_cast<double>(t.num_rows());
        };
        out.named.push_back(
            {"relationship = Husband and sex = Female", share(reference), share(candidate)});
      }
    }
  }
  return out;
}

absl::StatusOr<PaperMetrics> ComputePaperMetrics(const data::Schema& schema,
                                                 const data::Table& candidate,
                                                 const data::Table& reference,
                                                 const PaperMetricsOptions& options) {
  DPC_RETURN_IF_ERROR(options.Validate());
  DPC_RETURN_IF_ERROR(ValidateTableForSchema(schema, candidate, "candidate table"));
  DPC_RETURN_IF_ERROR(ValidateTableForSchema(schema, reference, "reference table"));
  PaperMetrics metrics;
  // A schema too narrow for a metric (one column has nothing to predict it
  // from; 3-way marginals need three) leaves that metric out.
  const size_t columns = TabularColumns(schema).size();
  if (options.compute_dimension_wise && columns >= 2) {
    DPC_ASSIGN_OR_RETURN(metrics.dimension_wise,
                         DimensionWise(schema, candidate, reference, options));
  }
  if (columns >= 3) {
    DPC_ASSIGN_OR_RETURN(metrics.three_way,
                         ThreeWayMarginalDistance(schema, candidate, reference, options));
  }
  DPC_ASSIGN_OR_RETURN(metrics.pca_wasserstein,
                       PcaWassersteinScore(schema, candidate, reference, options));
  metrics.shape = ComputeShapeChecks(schema, candidate, reference, options);
  return metrics;
}

std::string FormatPaperMetrics(const PaperMetrics& candidate, const PaperMetrics* real) {
  std::string out;
  auto pct = [](double v) { return absl::StrFormat("%6.2f%%", 100 * v); };
  absl::StrAppend(&out, "paper metrics (DP-auto-GAN §3.2; synthetic vs real test",
                  real != nullptr ? "; real = real train vs real test" : "", "):\n");
  if (candidate.dimension_wise.has_value()) {
    const auto& d = *candidate.dimension_wise;
    const DimensionWisePrediction* r =
        real != nullptr && real->dimension_wise.has_value() ? &*real->dimension_wise : nullptr;
    absl::StrAppend(&out,
                    absl::StrFormat("  dimension-wise prediction (train on %d rows, test on %d "
                                    "real; F1 / micro F1 / R^2):\n",
                                    d.train_rows, d.test_rows));
    absl::StrAppend(&out, absl::StrFormat("    %-20s %-9s %9s%s\n", "column", "metric", "synthetic",
                                          r != nullptr ? "      real" : ""));
    for (size_t j = 0; j < d.columns.size(); ++j) {
      const auto& c = d.columns[j];
      absl::StrAppend(&out, absl::StrFormat("    %-20s %-9s %9.4f", c.column, c.metric, c.score));
      if (r != nullptr && j < r->columns.size()) {
        absl::StrAppend(&out, absl::StrFormat(" %9.4f", r->columns[j].score));
      }
      absl::StrAppend(&out, c.constant_predictor ? "  (one level: constant)\n" : "\n");
    }
    absl::StrAppend(&out, absl::StrFormat("    %-20s %-9s %9.4f", "mean", "", d.mean_score));
    if (r != nullptr) {
      absl::StrAppend(&out, absl::StrFormat(" %9.4f  (gap real - synthetic %.4f)", r->mean_score,
                                            r->mean_score - d.mean_score));
    }
    absl::StrAppend(&out, "\n");
  }
  const auto& t = candidate.three_way;
  if (t.triples > 0) {
    absl::StrAppend(&out, absl::StrFormat("  3-way marginals (2 TV, %d triples): mean %.4f, max "
                                          "%.4f (%s)",
                                          t.triples, t.mean_l1, t.max_l1, t.max_triple));
    if (real != nullptr)
      absl::StrAppend(&out, absl::StrFormat("; real %.4f", real->three_way.mean_l1));
    absl::StrAppend(&out, "\n");
  }
  const auto& w = candidate.pca_wasserstein;
  absl::StrAppend(&out, absl::StrFormat("  2-way PCA Wasserstein score: %.4f (W1 %.4f, explained "
                                        "variance %.3f, diameter %.3f, %d x %d rows)",
                                        w.score, w.w1, w.explained_variance_ratio, w.diameter,
                                        w.repetitions, w.sample_rows));
  if (real != nullptr) {
    absl::StrAppend(&out, absl::StrFormat("; real %.4f", real->pca_wasserstein.score));
  }
  absl::StrAppend(&out, "\n");
  const auto& s = candidate.shape;
  const ShapeChecks* rs = real != nullptr ? &real->shape : nullptr;
  absl::StrAppend(&out, "  shape checks (real test | synthetic",
                  rs != nullptr ? " | real train" : "", "):\n");
  for (size_t j = 0; j < s.named.size(); ++j) {
    absl::StrAppend(&out, absl::StrFormat("    %-42s %s | %s", s.named[j].name,
                                          pct(s.named[j].reference), pct(s.named[j].value)));
    if (rs != nullptr && j < rs->named.size()) {
      absl::StrAppend(&out, " | ", pct(rs->named[j].value));
    }
    absl::StrAppend(&out, "\n");
  }
  for (size_t j = 0; j < s.point_masses.size(); ++j) {
    const auto& p = s.point_masses[j];
    absl::StrAppend(&out, absl::StrFormat("    %-42s %s | %s",
                                          absl::StrCat("point mass ", p.column, " = ", p.value),
                                          pct(p.reference_share), pct(p.share)));
    if (rs != nullptr && j < rs->point_masses.size()) {
      absl::StrAppend(&out, " | ", pct(rs->point_masses[j].share));
    }
    absl::StrAppend(&out, "\n");
  }
  for (size_t j = 0; j < s.dependencies.size(); ++j) {
    const auto& f = s.dependencies[j];
    absl::StrAppend(
        &out, absl::StrFormat("    %-42s %s | %s", absl::StrCat(f.column_a, " <-> ", f.column_b),
                              pct(1.0), pct(f.agreement)));
    if (rs != nullptr && j < rs->dependencies.size()) {
      absl::StrAppend(&out, " | ", pct(rs->dependencies[j].agreement));
    }
    absl::StrAppend(&out, "\n");
  }
  if (!s.impossible.empty()) {
    const auto worst =
        std::max_element(s.impossible.begin(), s.impossible.end(),
                         [](const auto& x, const auto& y) { return x.share < y.share; });
    absl::StrAppend(
        &out, absl::StrFormat("    %-42s %s | %s", "rows in level pairs absent from real", pct(0.0),
                              pct(s.impossible_mean_share)));
    if (rs != nullptr) absl::StrAppend(&out, " | ", pct(rs->impossible_mean_share));
    absl::StrAppend(&out, absl::StrFormat("  (mean over %d column pairs; worst %s x %s %.2f%%)\n",
                                          s.impossible.size(), worst->column_a, worst->column_b,
                                          100 * worst->share));
  }
  return out;
}

}  // namespace dpcurator::eval
