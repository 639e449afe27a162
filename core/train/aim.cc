#include "core/train/aim.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <numbers>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "core/util/shard_pool.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/privacy/calibration.h"
#include "core/privacy/conversion.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/exponential_mechanism.h"
#include "core/privacy/rdp.h"
#include "core/train/mst.h"
#include "core/util/status_macros.h"
#include "core/util/union_find.h"
#include "core/util/validation.h"

namespace dpcurator::train {
namespace {

// sqrt(2 / pi): E|Z| for Z ~ N(0, 1), the expected L1 norm of one cell's
// Gaussian noise per unit sigma (AIM Sec. 4.2, the score's bias term).
const double kExpectedAbsNormal = std::sqrt(2.0 / std::numbers::pi);

// The schedule keeps its running sum below rho (1 - kScheduleMargin): the
// sum of at most kMaxAimRounds + 2 rounded additions errs by less than
// (kMaxAimRounds + 2) 2^-53 rho < 5e-13 rho, so the real total stays <= rho.
constexpr double kScheduleMargin = 1e-12;
// A charge is the double formula times (1 + 2^-45), which exceeds the
// formula's own rounding (a few ulps); the last round's parameters are
// nudged by a relative 2^-40 until its charge fits what is left.
constexpr double kChargeRoundUp = 1.0 + 0x1.0p-45;
constexpr double kNudge = 0x1.0p-40;
constexpr int kMaxNudges = 64;

std::string CliqueText(const std::vector<int>& clique) {
  return absl::StrCat("(", absl::StrJoin(clique, ", "), ")");
}

// The L2 sensitivity of one marginal's counts: 1 (ADD_REMOVE) or sqrt(2)
// (REPLACE_ONE: a cell -1 and a cell +1), docs/privacy.md 2.11.
double MarginalSensitivity(privacy::NeighbouringRelation relation, double tables) {
  return relation == privacy::NeighbouringRelation::kReplaceOne ? std::sqrt(2.0 * tables)
                                                                : std::sqrt(tables);
}

// The margin of a row-major table over `shape` on its position-k column.
Eigen::VectorXd MarginOf(const Eigen::VectorXd& counts, const std::vector<int>& shape, size_t k) {
  Eigen::VectorXd margin = Eigen::VectorXd::Zero(shape[k]);
  int64_t inner = 1;
  for (size_t l = k + 1; l < shape.size(); ++l) inner *= shape[l];
  for (Eigen::Index cell = 0; cell < counts.size(); ++cell) {
    margin[(cell / inner) % shape[k]] += counts[cell];
  }
  return margin;
}

// The label rounds' rho in all (0 without them).
double LabelRoundsRho(const AimBudget& budget) {
  if (budget.label_rounds <= 0) return 0.0;
  const double one_way = budget.rho * budget.measurement_share * budget.num_columns / budget.rounds;
  return std::min(kAimLabelRoundShare * budget.rho, 0.5 * (budget.rho - one_way));
}

// The remaining budget a last round can be left with, at least (see
// AimMinSelectionEpsilon): the label rounds' charges are rounded up by a
// relative 2^-45, well inside the 1e-9 margin.
double MinLastRoundRho(const AimBudget& budget) {
  const double one_way = budget.rho * budget.measurement_share * budget.num_columns / budget.rounds;
  return std::min(budget.rho / budget.rounds, budget.rho - one_way - LabelRoundsRho(budget)) *
         (1.0 - 1e-9);
}

// The label rounds' score sensitivity: their scores have weight 1, so one
// row moves a score by at most 1 (ADD_REMOVE) or 2 (REPLACE_ONE), as
// AimScoreSensitivity with every weight 1.
double LabelScoreSensitivity(privacy::NeighbouringRelation relation) {
  return relation == privacy::NeighbouringRelation::kReplaceOne ? 2.0 : 1.0;
}

// Exact tables of every candidate of a wide schema (at most 2 columns each):
// 1-way ones by release::ExactMarginal; pairs, the bulk (573,000 at 1,071
// columns), from the code columns directly, over both cores. Two binary
// columns by bit counts: with A, B the rows' indicator bit sets of code 1,
// n11 = |A & B|, n10 = |A| - n11, n01 = |B| - n11, n00 = rows - |A| - |B| +
// n11 (inclusion-exclusion); other pairs by one pass over the rows.
void ExactPairTables(const Eigen::MatrixXi& codes, const std::vector<int>& domain_sizes,
                     const std::vector<AimCandidate>& candidates,
                     std::vector<Eigen::VectorXd>* truth) {
  const int d = static_cast<int>(domain_sizes.size());
  const Eigen::Index rows = codes.rows();
  const int64_t words = (rows + 63) / 64;
  std::vector<std::vector<uint64_t>> bits(d);
  std::vector<int64_t> ones(d, 0);
  for (int c = 0; c < d; ++c) {
    if (domain_sizes[c] != 2) continue;
    bits[c].assign(words, 0);
    for (Eigen::Index r = 0; r < rows; ++r) {
      bits[c][r / 64] |= static_cast<uint64_t>(codes(r, c) == 1) << (r % 64);
    }
    for (uint64_t w : bits[c]) ones[c] += std::popcount(w);
  }
  constexpr int kShards = 64;
  ShardPool pool(0);
  pool.Run(kShards, [&](int shard) {
    for (size_t k = shard; k < candidates.size(); k += kShards) {
      const std::vector<int>& clique = candidates[k].clique;
      if (clique.size() != 2) {
        std::vector<int> shape;
        for (int c : clique) shape.push_back(domain_sizes[c]);
        (*truth)[k] = release::ExactMarginal(clique, shape, codes);
        continue;
      }
      const int u = clique[0];
      const int v = clique[1];
      Eigen::VectorXd& table = (*truth)[k];
      table = Eigen::VectorXd::Zero(int64_t{domain_sizes[u]} * domain_sizes[v]);
      if (domain_sizes[u] == 2 && domain_sizes[v] == 2) {
        int64_t n11 = 0;
        for (int64_t w = 0; w < words; ++w) n11 += std::popcount(bits[u][w] & bits[v][w]);
        table << static_cast<double>(rows - ones[u] - ones[v] + n11),
            static_cast<double>(ones[v] - n11), static_cast<double>(ones[u] - n11),
            static_cast<double>(n11);
        continue;
      }
      const int* column_u = codes.col(u).data();
      const int* column_v = codes.col(v).data();
      const int kv = domain_sizes[v];
      for (Eigen::Index r = 0; r < rows; ++r) table[column_u[r] * kv + column_v[r]] += 1.0;
    }
  });
}

}  // namespace

// ------------------------------------------------------------------ model ---

IndependentAimModel::IndependentAimModel(std::vector<int> domain_sizes)
    : domain_sizes_(std::move(domain_sizes)) {
  for (int size : domain_sizes_) {
    columns_.push_back(Eigen::VectorXd::Constant(std::max(size, 1), 1.0 / std::max(size, 1)));
  }
}

void IndependentAimModel::Fit(const std::vector<release::NoisyMarginal>& measurements) {
  const int d = static_cast<int>(domain_sizes_.size());
  // Inverse-variance sums per column and for the total; a noiseless
  // measurement (std 0, tests) gets a large finite weight.
  std::vector<Eigen::VectorXd> sums(d);
  std::vector<double> weights(d, 0.0);
  for (int c = 0; c < d; ++c) sums[c] = Eigen::VectorXd::Zero(columns_[c].size());
  double total_sum = 0.0;
  double total_weight = 0.0;
  for (const release::NoisyMarginal& m : measurements) {
    if (static_cast<int64_t>(m.counts.size()) != CliqueCells(m.clique, domain_sizes_) ||
        !m.counts.allFinite()) {
      continue;  // not of this domain: ignored (a total function)
    }
    const double variance = std::max(m.noise_std * m.noise_std, 1e-12);
    for (size_t k = 0; k < m.clique.size(); ++k) {
      const int c = m.clique[k];
      const double cells_per_margin_cell =
          static_cast<double>(m.counts.size()) / domain_sizes_[c];
      const double w = 1.0 / (variance * cells_per_margin_cell);
      sums[c] += w * MarginOf(m.counts, m.shape, k);
      weights[c] += w;
    }
    const double w = 1.0 / (variance * static_cast<double>(m.counts.size()));
    total_sum += w * m.counts.sum();
    total_weight += w;
  }
  for (int c = 0; c < d; ++c) {
    if (weights[c] > 0.0) columns_[c] = ProjectToSimplex(sums[c] / weights[c]);
  }
  const double total = total_weight > 0.0 ? total_sum / total_weight : 0.0;
  total_ = std::isfinite(total) ? std::max(0.0, total) : 0.0;
}

Eigen::VectorXd IndependentAimModel::Marginal(const std::vector<int>& clique) const {
  Eigen::VectorXd table = Eigen::VectorXd::Constant(1, total_);
  for (int c : clique) {
    if (c < 0 || c >= static_cast<int>(columns_.size())) continue;
    const Eigen::VectorXd& p = columns_[c];
    Eigen::VectorXd next(table.size() * p.size());
    for (Eigen::Index a = 0; a < table.size(); ++a) {
      next.segment(a * p.size(), p.size()) = table[a] * p;
    }
    table = std::move(next);
  }
  return table;
}

int64_t IndependentAimModel::CellsWith(const std::vector<std::vector<int>>& cliques) const {
  absl::flat_hash_set<std::vector<int>> distinct;
  absl::flat_hash_set<std::vector<int>> covered;
  for (std::vector<int> clique : cliques) {
    std::sort(clique.begin(), clique.end());
    if (!distinct.insert(clique).second) continue;
    // Every proper non-empty subset (cliques have at most a few columns).
    const int k = static_cast<int>(clique.size());
    for (int mask = 1; k < 31 && mask + 1 < (1 << k); ++mask) {
      std::vector<int> subset;
      for (int b = 0; b < k; ++b) {
        if (mask & (1 << b)) subset.push_back(clique[b]);
      }
      covered.insert(std::move(subset));
    }
  }
  int64_t cells = 0;
  for (const std::vector<int>& clique : distinct) {
    if (!covered.contains(clique)) cells += CliqueCells(clique, domain_sizes_);
  }
  return cells;
}

PgmAimModel::PgmAimModel(std::vector<int> domain_sizes, int iterations_per_fit,
                         int64_t max_cells)
    : domain_sizes_(domain_sizes),
      iterations_per_fit_(std::max(iterations_per_fit, 1)),
      max_cells_(max_cells),
      fallback_(std::move(domain_sizes)) {}

PgmAimModel::~PgmAimModel() = default;

void PgmAimModel::Fit(const std::vector<release::NoisyMarginal>& measurements) {
  fallback_.Fit(measurements);
  pgm::EstimateOptions options;
  options.iterations = iterations_per_fit_;
  options.max_cells = max_cells_;
  options.warm_start = model_.get();
  absl::StatusOr<pgm::GraphicalModel> fitted =
      pgm::GraphicalModel::Estimate(domain_sizes_, measurements, options);
  // Estimate fails only for public reasons (shapes, max_cells), which the
  // plan and the size filter rule out; should it still, the previous model
  // stays (a total function of the measurements either way).
  if (fitted.ok()) model_ = std::make_unique<pgm::GraphicalModel>(*std::move(fitted));
  ComputeForestPairs();
}

void PgmAimModel::ComputeForestPairs() {
  pair_tables_.clear();
  pair_offset_.clear();
  one_way_.clear();
  const int d = static_cast<int>(domain_sizes_.size());
  if (model_ == nullptr || !IsWideAim(d)) return;
  for (const std::vector<int>& clique : model_->cliques()) {
    if (clique.size() > 2) return;  // not a forest: each pair asks the model
  }
  pair_offset_.assign(static_cast<size_t>(d) * d, 0);
  int64_t cells = 0;
  for (int i = 0; i < d; ++i) {
    for (int j = i + 1; j < d; ++j) {
      pair_offset_[static_cast<size_t>(i) * d + j] = cells;
      cells += int64_t{domain_sizes_[i]} * domain_sizes_[j];
      if (cells > kMaxAimCandidateCells) {
        pair_offset_.clear();
        return;
      }
    }
  }
  // The model's 1-way tables (counts) and, per forest edge, the conditional
  // tables P(to = b | from = a) in both directions (0 where p_from(a) = 0).
  for (int i = 0; i < d; ++i) one_way_.push_back(model_->Marginal({i}));
  struct Edge {
    int to;
    Eigen::MatrixXd conditional;  // rows: from's codes, columns: to's codes
  };
  std::vector<std::vector<Edge>> forest(d);
  const std::vector<std::vector<int>>& cliques = model_->cliques();
  for (size_t c = 0; c < cliques.size(); ++c) {
    if (cliques[c].size() != 2) continue;
    const int u = cliques[c][0];
    const int v = cliques[c][1];
    const Eigen::VectorXd& mu = model_->clique_marginal(static_cast<int>(c));
    Eigen::MatrixXd uv(domain_sizes_[u], domain_sizes_[v]);  // row-major table, v fastest
    for (int a = 0; a < domain_sizes_[u]; ++a) {
      for (int b = 0; b < domain_sizes_[v]; ++b) uv(a, b) = mu[a * domain_sizes_[v] + b];
    }
    Eigen::MatrixXd vu = uv.transpose();
    for (Eigen::Index a = 0; a < uv.rows(); ++a) {
      const double row = uv.row(a).sum();
      uv.row(a) = row > 0.0 ? Eigen::RowVectorXd(uv.row(a) / row)
                            : Eigen::RowVectorXd::Zero(uv.cols());
    }
    for (Eigen::Index b = 0; b < vu.rows(); ++b) {
      const double row = vu.row(b).sum();
      vu.row(b) = row > 0.0 ? Eigen::RowVectorXd(vu.row(b) / row)
                            : Eigen::RowVectorXd::Zero(vu.cols());
    }
    forest[u].push_back({v, std::move(uv)});
    forest[v].push_back({u, std::move(vu)});
  }
  const double total = model_->total();
  pair_tables_.assign(static_cast<size_t>(cells), 0.0);
  std::vector<Eigen::MatrixXd> joint(d);  // joint[j]: counts over (i, j)
  std::vector<int> tree_of(d, -1);
  std::vector<int> order;
  for (int i = 0; i < d; ++i) {
    // Breadth-first from i along the forest: joint[j] = joint[parent] times
    // P(j | parent), starting from diag(p_i).
    order.assign(1, i);
    joint[i] = one_way_[i].asDiagonal();
    tree_of[i] = i;
    for (size_t head = 0; head < order.size(); ++head) {
      const int from = order[head];
      for (const Edge& e : forest[from]) {
        if (tree_of[e.to] == i) continue;
        tree_of[e.to] = i;
        joint[e.to].noalias() = joint[from] * e.conditional;
        order.push_back(e.to);
      }
    }
    for (int j = i + 1; j < d; ++j) {
      double* out = pair_tables_.data() + pair_offset_[static_cast<size_t>(i) * d + j];
      const int kj = domain_sizes_[j];
      for (int a = 0; a < domain_sizes_[i]; ++a) {
        for (int b = 0; b < kj; ++b) {
          // Another tree: independent (the junction tree joins trees by
          // empty separators).
          out[a * kj + b] = tree_of[j] == i
                                ? joint[j](a, b)
                                : (total > 0.0 ? one_way_[i][a] * one_way_[j][b] / total : 0.0);
        }
      }
    }
  }
}

Eigen::VectorXd PgmAimModel::Marginal(const std::vector<int>& clique) const {
  const int d = static_cast<int>(domain_sizes_.size());
  if (!pair_tables_.empty() && clique.size() == 2 && clique[0] != clique[1] &&
      clique[0] >= 0 && clique[1] >= 0 && clique[0] < d && clique[1] < d) {
    const int i = std::min(clique[0], clique[1]);
    const int j = std::max(clique[0], clique[1]);
    const int ki = domain_sizes_[i];
    const int kj = domain_sizes_[j];
    const double* table = pair_tables_.data() + pair_offset_[static_cast<size_t>(i) * d + j];
    Eigen::VectorXd answer(int64_t{ki} * kj);
    for (int a = 0; a < ki; ++a) {
      for (int b = 0; b < kj; ++b) {
        // Asked as (j, i): the transposed layout.
        answer[clique[0] == i ? a * kj + b : b * ki + a] = table[a * kj + b];
      }
    }
    if (answer.allFinite()) return answer;
  }
  if (!one_way_.empty() && clique.size() == 1 && clique[0] >= 0 && clique[0] < d &&
      one_way_[clique[0]].allFinite()) {
    return one_way_[clique[0]];
  }
  if (model_ != nullptr) {
    Eigen::VectorXd answer = model_->Marginal(clique);
    if (answer.size() == CliqueCells(clique, domain_sizes_) && answer.allFinite()) return answer;
  }
  return fallback_.Marginal(clique);
}

int64_t PgmAimModel::CellsWith(const std::vector<std::vector<int>>& cliques) const {
  return pgm::JunctionTreeCells(domain_sizes_, cliques);
}

MeasuredTablesAimModel::MeasuredTablesAimModel(std::vector<int> domain_sizes)
    : independent_(domain_sizes), domain_sizes_(std::move(domain_sizes)) {}

void MeasuredTablesAimModel::Fit(const std::vector<release::NoisyMarginal>& measurements) {
  independent_.Fit(measurements);
  // The total as the independent model estimates it (its 0-way answer).
  total_ = independent_.Marginal({})[0];
  tables_.clear();
  std::vector<std::pair<Eigen::VectorXd, double>> sums;  // weighted sum, weight
  for (const release::NoisyMarginal& m : measurements) {
    if (m.clique.size() < 2 ||
        static_cast<int64_t>(m.counts.size()) != CliqueCells(m.clique, domain_sizes_) ||
        !m.counts.allFinite()) {
      continue;
    }
    const double w = 1.0 / std::max(m.noise_std * m.noise_std, 1e-12);
    size_t k = 0;
    while (k < tables_.size() && tables_[k].first != m.clique) ++k;
    if (k == tables_.size()) {
      tables_.emplace_back(m.clique, Eigen::VectorXd());
      sums.emplace_back(Eigen::VectorXd::Zero(m.counts.size()), 0.0);
    }
    sums[k].first += w * m.counts;
    sums[k].second += w;
  }
  for (size_t k = 0; k < tables_.size(); ++k) {
    tables_[k].second = ProjectToSimplex(sums[k].first / sums[k].second);
  }
}

Eigen::VectorXd MeasuredTablesAimModel::Marginal(const std::vector<int>& clique) const {
  for (const auto& [measured, table] : tables_) {
    if (measured == clique) return total_ * table;
  }
  return independent_.Marginal(clique);
}

int64_t MeasuredTablesAimModel::CellsWith(const std::vector<std::vector<int>>& cliques) const {
  return independent_.CellsWith(cliques);
}

// -------------------------------------------------------- workload, score ---

int64_t CliqueCells(const std::vector<int>& clique, const std::vector<int>& domain_sizes) {
  int64_t cells = 1;
  for (int c : clique) {
    if (c < 0 || c >= static_cast<int>(domain_sizes.size())) return 0;
    cells *= domain_sizes[c];
  }
  return cells;
}

std::vector<std::vector<int>> DefaultAimWorkload(int num_columns, std::optional<int> label) {
  std::vector<std::vector<int>> workload;
  for (int i = 0; i < num_columns; ++i) {
    for (int j = i + 1; j < num_columns; ++j) workload.push_back({i, j});
  }
  if (label.has_value() && *label >= 0 && *label < num_columns && !IsWideAim(num_columns)) {
    for (int i = 0; i < num_columns; ++i) {
      for (int j = i + 1; j < num_columns; ++j) {
        if (i == *label || j == *label) continue;
        std::vector<int> triple = {i, j, *label};
        std::sort(triple.begin(), triple.end());
        workload.push_back(std::move(triple));
      }
    }
  }
  return workload;
}

absl::StatusOr<std::vector<AimCandidate>> AimCandidates(
    const std::vector<std::vector<int>>& workload, const std::vector<int>& domain_sizes) {
  const int d = static_cast<int>(domain_sizes.size());
  if (workload.empty() || workload.size() > static_cast<size_t>(kMaxAimWorkloadCliques)) {
    return absl::InvalidArgumentError(absl::StrCat("an aim workload needs between 1 and ",
                                                   kMaxAimWorkloadCliques, " cliques, got ",
                                                   workload.size()));
  }
  // A wide schema's model is a forest of pairs (aim.h, kMaxAimWideColumns).
  const int max_columns = IsWideAim(d) ? 2 : release::kMaxCliqueColumns;
  std::vector<std::vector<int>> sorted;
  sorted.reserve(workload.size());
  for (std::vector<int> clique : workload) {
    if (clique.empty() || clique.size() > static_cast<size_t>(max_columns)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "workload clique ", CliqueText(clique), " has ", clique.size(),
          " columns; a clique has 1 to ", max_columns,
          IsWideAim(d) ? absl::StrCat(" in a schema of more than ", kMaxAimColumns, " columns")
                       : ""));
    }
    std::sort(clique.begin(), clique.end());
    for (size_t k = 0; k < clique.size(); ++k) {
      if (clique[k] < 0 || clique[k] >= d) {
        return absl::InvalidArgumentError(absl::StrCat("workload clique ", CliqueText(clique),
                                                       " names column index ", clique[k],
                                                       "; the schema has ", d, " columns"));
      }
      if (k > 0 && clique[k] == clique[k - 1]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "workload clique ", CliqueText(clique), " names a column twice; list each once"));
      }
    }
    if (CliqueCells(clique, domain_sizes) > release::kMaxCellsPerClique) {
      return absl::InvalidArgumentError(absl::StrCat(
          "workload clique ", CliqueText(clique), " has ", CliqueCells(clique, domain_sizes),
          " cells; at most ", release::kMaxCellsPerClique,
          " are accepted (declare coarser bins in the schema, or fewer columns)"));
    }
    sorted.push_back(std::move(clique));
  }
  // The downward closure, every 1-way included (they are always measured).
  std::map<std::vector<int>, double> weights;
  for (int c = 0; c < d; ++c) weights[{c}] = 0.0;
  for (const std::vector<int>& clique : sorted) {
    const int k = static_cast<int>(clique.size());
    for (int mask = 1; mask < (1 << k); ++mask) {
      std::vector<int> subset;
      for (int b = 0; b < k; ++b) {
        if (mask & (1 << b)) subset.push_back(clique[b]);
      }
      weights.emplace(std::move(subset), 0.0);
    }
  }
  // w_r = sum_W |r intersect W| (AIM Sec. 4.2) = sum over c in r of the
  // number of workload cliques holding c (exchange the sums): linear in the
  // workload, which has 573,000 pairs at 1,071 columns.
  std::vector<double> holding(d, 0.0);
  for (const std::vector<int>& clique : sorted) {
    for (int c : clique) holding[c] += 1.0;
  }
  for (auto& [r, w] : weights) {
    for (int c : r) w += holding[c];
  }
  std::vector<AimCandidate> candidates;
  int64_t cells = 0;
  for (const auto& [r, w] : weights) {
    candidates.push_back({r, w, CliqueCells(r, domain_sizes)});
    cells += candidates.back().cells;
  }
  if (cells > kMaxAimCandidateCells) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the aim workload's candidate marginals have ", cells, " cells in all; at most ",
        kMaxAimCandidateCells, " are accepted (name fewer or smaller cliques, or coarser bins)"));
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const AimCandidate& a, const AimCandidate& b) {
                     return a.clique.size() < b.clique.size();
                   });
  return candidates;
}

double AimScoreSensitivity(const std::vector<AimCandidate>& candidates,
                           privacy::NeighbouringRelation relation) {
  double max_weight = 0.0;
  for (const AimCandidate& c : candidates) max_weight = std::max(max_weight, c.weight);
  return max_weight * (relation == privacy::NeighbouringRelation::kReplaceOne ? 2.0 : 1.0);
}

double AimScore(const Eigen::VectorXd& truth, const Eigen::VectorXd& estimate, double weight,
                double noise_std) {
  const double l1 = estimate.size() == truth.size() ? (truth - estimate).cwiseAbs().sum()
                                                    : truth.cwiseAbs().sum();
  return weight *
         (l1 - kExpectedAbsNormal * noise_std * static_cast<double>(truth.size()));
}

// ----------------------------------------------------------------- budget ---

absl::StatusOr<AimBudget> AimBudgetForRho(int num_columns, int rounds, double rho,
                                          int label) {
  if (num_columns < 1 || num_columns > kMaxAimWideColumns) {
    return absl::InvalidArgumentError(absl::StrCat("aim takes schemas of 1 to ", kMaxAimWideColumns,
                                                   " columns, got ", num_columns));
  }
  if (rounds < num_columns || rounds > kMaxAimRounds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "aim's rounds must be between the number of columns (", num_columns, ") and ",
        kMaxAimRounds, ", got ", rounds, " (the 1-way marginals take 0.9 d / rounds of rho)"));
  }
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(rho, "rho"));
  AimBudget budget;
  budget.num_columns = num_columns;
  budget.rounds = rounds;
  budget.rho = rho;
  // AIM Alg. 2, line 2: sigma_0 = sqrt(T / (2 * 0.9 rho)),
  // eps_0 = sqrt(8 * 0.1 rho / T).
  // The wide form's split (kAimWideMeasurementShare): more to the selection.
  budget.measurement_share =
      IsWideAim(num_columns) ? kAimWideMeasurementShare : kAimMeasurementShare;
  const double share = budget.measurement_share;
  budget.noise_multiplier = std::sqrt(rounds / (2.0 * share * rho));
  budget.selection_epsilon = std::sqrt(8.0 * (1.0 - share) * rho / rounds);
  // One release of d tables at L2 sensitivity sqrt(d): s1 = s0 / sqrt(d)
  // puts each table's noise std at s0 (per unit sensitivity).
  budget.one_way_noise_multiplier = budget.noise_multiplier / std::sqrt(num_columns);
  if (label >= num_columns) {
    return absl::InvalidArgumentError(absl::StrCat("aim's label column index ", label,
                                                   " is outside the schema's ", num_columns,
                                                   " columns"));
  }
  if (label >= 0 && num_columns >= 2) {
    budget.label = label;
    budget.label_rounds = kAimLabelRounds;
    // Issue 38 (beyond Alg. 2): each label round gets rho_L, 0.9 of it to the
    // measurement and 0.1 to the selection, as a last round splits its rest.
    const double rho_each = LabelRoundsRho(budget) / kAimLabelRounds;
    budget.label_noise_multiplier = std::sqrt(1.0 / (2.0 * share * rho_each));
    budget.label_selection_epsilon = std::sqrt(8.0 * (1.0 - share) * rho_each);
  }
  return budget;
}

int AimLabelForRounds(const std::vector<AimCandidate>& candidates, std::optional<int> label) {
  if (!label.has_value()) return -1;
  for (const AimCandidate& c : candidates) {
    if (c.clique.size() == 2 && (c.clique[0] == *label || c.clique[1] == *label)) return *label;
  }
  return -1;
}

absl::StatusOr<privacy::PrivacyEvent> AimEvent(const AimBudget& budget) {
  return privacy::PrivacyEvent::Zcdp(budget.rho);
}

absl::StatusOr<AimBudget> CalibrateAimBudget(int num_columns, int rounds, double epsilon,
                                             double delta, int label) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(epsilon, "Epsilon"));
  DPC_RETURN_IF_ERROR(ValidateInOpenUnitInterval(delta, "Delta"));
  // Shapes first, at any rho.
  DPC_RETURN_IF_ERROR(AimBudgetForRho(num_columns, rounds, 1.0).status());
  const std::vector<double>& orders = privacy::DefaultRdpOrders();
  auto epsilon_of = [&](double rho) -> absl::StatusOr<double> {
    DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent event, privacy::PrivacyEvent::Zcdp(rho));
    DPC_ASSIGN_OR_RETURN(std::vector<double> rdp, privacy::ComputeRdp(event, orders));
    DPC_ASSIGN_OR_RETURN(privacy::RdpEpsilon converted,
                         privacy::RdpToEpsilon(orders, rdp, delta));
    return converted.epsilon;
  };
  DPC_ASSIGN_OR_RETURN(const double rho,
                       privacy::LargestRhoWithin(epsilon, delta, epsilon_of, "aim"));
  return AimBudgetForRho(num_columns, rounds, rho, label);
}

double AimMinSelectionEpsilon(const AimBudget& budget) {
  return std::sqrt(8.0 * (1.0 - budget.measurement_share) * MinLastRoundRho(budget)) *
         (1.0 - 1e-6);
}

// --------------------------------------------------------------- schedule ---

AimSchedule::AimSchedule(const AimBudget& budget)
    : rho_(budget.rho),
      share_(budget.measurement_share),
      cap_(budget.rounds + 1 + std::max(budget.label_rounds, 0)),
      noise_multiplier_(budget.noise_multiplier),
      selection_epsilon_(budget.selection_epsilon),
      used_(ChargeFor(budget.one_way_noise_multiplier, 0.0)),
      label_rounds_left_(std::max(budget.label_rounds, 0)),
      label_noise_multiplier_(budget.label_noise_multiplier),
      label_selection_epsilon_(budget.label_selection_epsilon) {}

double AimSchedule::ChargeFor(double noise_multiplier, double selection_epsilon) {
  return (1.0 / (2.0 * noise_multiplier * noise_multiplier) +
          selection_epsilon * selection_epsilon / 8.0) *
         kChargeRoundUp;
}

AimSchedule::Round AimSchedule::Next() {
  Round round;
  if (label_rounds_left_ > 0 && !done_) {
    // A label round (issue 38): fixed parameters, at most half of what the
    // 1-way release left in all, so the rounds after it always have budget.
    --label_rounds_left_;
    round.noise_multiplier = label_noise_multiplier_;
    round.selection_epsilon = label_selection_epsilon_;
    round.label = true;
    used_ += ChargeFor(round.noise_multiplier, round.selection_epsilon);
    ++rounds_run_;
    return round;
  }
  const double remaining = rho_ * (1.0 - kScheduleMargin) - used_;
  const double charge = ChargeFor(noise_multiplier_, selection_epsilon_);
  // AIM Alg. 2, line 8: the last round when less than two rounds' worth is
  // left; it takes all of it, 0.9 to the measurement, 0.1 to the selection.
  round.last = done_ || remaining < 2.0 * charge || rounds_run_ + 1 >= cap_;
  if (round.last) {
    double s = std::sqrt(1.0 / (2.0 * share_ * remaining));
    double eps = std::sqrt(8.0 * (1.0 - share_) * remaining);
    for (int i = 0; i < kMaxNudges && ChargeFor(s, eps) > remaining; ++i) {
      s *= 1.0 + kNudge;
      eps *= 1.0 - kNudge;
    }
    round.noise_multiplier = s;
    round.selection_epsilon = eps;
    used_ += ChargeFor(s, eps);
    done_ = true;
  } else {
    round.noise_multiplier = noise_multiplier_;
    round.selection_epsilon = selection_epsilon_;
    used_ += charge;
  }
  ++rounds_run_;
  return round;
}

void AimSchedule::UseRegularLabelRounds() {
  label_noise_multiplier_ = noise_multiplier_;
  label_selection_epsilon_ = selection_epsilon_;
}

void AimSchedule::Anneal() {
  // Alg. 2, line 14: sigma / 2, eps * 2 (exact in binary floating point).
  noise_multiplier_ /= 2.0;
  selection_epsilon_ *= 2.0;
}

// ------------------------------------------------------------------- run ---

absl::Status CheckAimRunnable(const std::vector<int>& domain_sizes,
                              const std::vector<AimCandidate>& candidates,
                              const AimBudget& budget, int64_t max_model_cells,
                              privacy::NeighbouringRelation relation) {
  const int d = static_cast<int>(domain_sizes.size());
  if (d != budget.num_columns || d < 1) {
    return absl::InvalidArgumentError("aim: the budget was made for another schema");
  }
  int64_t one_way_cells = 0;
  int64_t largest = 0;
  for (int size : domain_sizes) {
    if (size < 1) return absl::InvalidArgumentError("aim: a column has an empty domain");
    one_way_cells += size;
  }
  for (const AimCandidate& c : candidates) {
    largest = std::max(largest, c.cells);
    if (IsWideAim(d) && c.clique.size() > 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "aim over more than ", kMaxAimColumns, " columns measures pairs at most; candidate ",
          CliqueText(c.clique), " has ", c.clique.size(), " columns"));
    }
  }
  if (candidates.empty()) return absl::InvalidArgumentError("aim: no candidate marginals");
  if (max_model_cells < one_way_cells) {
    return absl::InvalidArgumentError(absl::StrCat(
        "aim's model-size limit of ", max_model_cells,
        " cells cannot hold the 1-way marginals (", one_way_cells,
        " cells); raise it to at least that"));
  }
  const double sensitivity = MarginalSensitivity(relation, 1.0);
  const double one_way_std = budget.noise_multiplier * sensitivity;
  if (!(one_way_std <= kMaxAimOneWayNoiseStd)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this epsilon measures aim's 1-way marginals with noise of ", one_way_std,
        " rows per cell (std); at most ", kMaxAimOneWayNoiseStd,
        " is accepted (rule: 1-way cells at sigma = sqrt(rounds / (1.8 rho)) must be measured "
        "below that): raise epsilon or lower --rounds"));
  }
  // Every noise multiplier a round can get lies between the all-of-rho one
  // and the last round's at its smallest remainder (>= the first round's).
  const double s_min = std::sqrt(1.0 / (2.0 * budget.rho));
  const double s_max =
      std::sqrt(1.0 / (2.0 * budget.measurement_share * MinLastRoundRho(budget)));
  for (double s : {s_min, s_max}) {
    absl::Status grid = privacy::GridGaussianNoise(s, sensitivity, largest).status();
    if (!grid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "aim: a round's noise multiplier (", s, ") cannot be drawn: ", grid.message()));
    }
  }
  absl::Status grid = privacy::GridGaussianNoise(budget.one_way_noise_multiplier,
                                                 MarginalSensitivity(relation, d), one_way_cells)
                          .status();
  if (!grid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("aim: the 1-way noise multiplier cannot be drawn: ", grid.message()));
  }
  if (budget.label_rounds > 0) {
    if (budget.label < 0 || budget.label >= d) {
      return absl::InvalidArgumentError("aim: the label rounds name no column of the schema");
    }
    // Either parameter pair a label round can run at (the budget's, or the
    // first regular round's: UseRegularLabelRounds).
    absl::Status label_grid =
        privacy::GridGaussianNoise(budget.label_noise_multiplier, sensitivity, largest).status();
    absl::Status label_selection = privacy::ValidateExponentialMechanism(
        static_cast<int>(candidates.size()), budget.label_selection_epsilon,
        LabelScoreSensitivity(relation));
    if (label_selection.ok()) {
      label_selection = privacy::ValidateExponentialMechanism(
          static_cast<int>(candidates.size()), budget.selection_epsilon,
          LabelScoreSensitivity(relation));
    }
    if (!label_grid.ok() || !label_selection.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "aim: the label round's parameters cannot be drawn: ",
          !label_grid.ok() ? label_grid.message() : label_selection.message()));
    }
  }
  const double score_sensitivity = AimScoreSensitivity(candidates, relation);
  for (double eps : {AimMinSelectionEpsilon(budget), std::sqrt(8.0 * budget.rho)}) {
    absl::Status ok = privacy::ValidateExponentialMechanism(static_cast<int>(candidates.size()),
                                                            eps, score_sensitivity);
    if (!ok.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "aim's selections would need epsilon ", eps,
          ", which the exponential mechanism cannot draw (", ok.message(),
          "); choose an epsilon between about 1e-5 and 1e4"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::vector<int>> AimTableCliques(const std::vector<AimCandidate>& candidates) {
  std::vector<std::vector<int>> cliques;
  cliques.reserve(candidates.size());
  for (const AimCandidate& c : candidates) cliques.push_back(c.clique);
  return cliques;
}

absl::StatusOr<AimRun> RunAim(const Eigen::MatrixXi& codes, const std::vector<int>& domain_sizes,
                              const std::vector<AimCandidate>& candidates,
                              const AimBudget& budget, int64_t max_model_cells,
                              privacy::NeighbouringRelation relation, AimModel* model,
                              privacy::NoiseSource* noise, const AimMutation& mutation) {
  if (codes.cols() != static_cast<int>(domain_sizes.size())) {
    return absl::InvalidArgumentError(
        "aim: needs a model, a noise source and one code column per domain column");
  }
  const release::RowsTableSource tables(&codes);
  return RunAim(tables, domain_sizes, candidates, budget, max_model_cells, relation, model, noise,
                mutation);
}

absl::StatusOr<AimRun> RunAim(const release::ExactTableSource& tables,
                              const std::vector<int>& domain_sizes,
                              const std::vector<AimCandidate>& candidates,
                              const AimBudget& budget, int64_t max_model_cells,
                              privacy::NeighbouringRelation relation, AimModel* model,
                              privacy::NoiseSource* noise, const AimMutation& mutation) {
  // Public checks only until the rows' tables are read.
  const int d = static_cast<int>(domain_sizes.size());
  const Eigen::MatrixXi* codes_or_null = tables.codes();
  if (model == nullptr || noise == nullptr ||
      (codes_or_null != nullptr && codes_or_null->cols() != d)) {
    return absl::InvalidArgumentError(
        "aim: needs a model, a noise source and one code column per domain column");
  }
  DPC_RETURN_IF_ERROR(CheckAimRunnable(domain_sizes, candidates, budget, max_model_cells,
                                       relation));
  // Codes from data::Discretizer::Encode always lie in their domains;
  // anything else is a caller's bug (the message names no row or value).
  for (int c = 0; c < d && codes_or_null != nullptr; ++c) {
    const Eigen::MatrixXi& codes = *codes_or_null;
    if (codes.rows() > 0 &&
        (codes.col(c).minCoeff() < 0 || codes.col(c).maxCoeff() >= domain_sizes[c])) {
      return absl::InternalError(
          "aim: the rows' codes do not match the domain; encode the rows with the schema's "
          "discretizer");
    }
  }
  auto shape_of = [&](const std::vector<int>& clique) {
    std::vector<int> shape;
    for (int c : clique) shape.push_back(domain_sizes[c]);
    return shape;
  };
  // Every candidate's exact table, once (kMaxAimCandidateCells bounds them).
  const bool wide = IsWideAim(d);
  std::vector<Eigen::VectorXd> truth(candidates.size());
  if (wide && codes_or_null != nullptr) {
    // Rows at hand: every pair at once (bit counts for binary pairs).
    ExactPairTables(*codes_or_null, domain_sizes, candidates, &truth);
  } else {
    for (size_t k = 0; k < candidates.size(); ++k) {
      DPC_ASSIGN_OR_RETURN(truth[k],
                           tables.Table(candidates[k].clique, shape_of(candidates[k].clique)));
    }
  }
  AimRun run;
  // Alg. 2, line 3: every 1-way marginal, one grid Gaussian release.
  {
    int64_t total = 0;
    for (int c = 0; c < d; ++c) {
      release::NoisyMarginal m;
      m.clique = {c};
      m.shape = {domain_sizes[c]};
      DPC_ASSIGN_OR_RETURN(m.counts, tables.Table(m.clique, m.shape));
      total += m.counts.size();
      run.one_way.push_back(std::move(m));
    }
    Eigen::VectorXd all(total);
    int64_t offset = 0;
    for (const auto& m : run.one_way) {
      all.segment(offset, m.counts.size()) = m.counts;
      offset += m.counts.size();
    }
    DPC_ASSIGN_OR_RETURN(
        privacy::GridNoise drawn,
        privacy::AddGridGaussianNoise(
            all, budget.one_way_noise_multiplier * mutation.one_way_noise_factor,
            MarginalSensitivity(relation, d), noise));
    offset = 0;
    for (auto& m : run.one_way) {
      m.counts = all.segment(offset, m.counts.size());
      m.noise_std = noise->adds_noise() ? drawn.scale() : 0.0;
      offset += m.counts.size();
    }
  }
  std::vector<release::NoisyMarginal> measurements = run.one_way;
  model->Fit(measurements);
  std::vector<std::vector<int>> measured;
  int64_t one_way_cells = 0;
  for (int c = 0; c < d; ++c) {
    measured.push_back({c});
    one_way_cells += domain_sizes[c];
  }
  // Wide schemas: the measured pairs' forest (public: released cliques),
  // its trees, its measured pairs, and its junction tree's cells (a forest's
  // maximal cliques are its pairs and its columns in no pair).
  UnionFind trees(wide ? d : 0);
  absl::flat_hash_set<std::pair<int, int>> measured_pairs;
  std::vector<char> in_pair(wide ? d : 0, 0);
  int64_t forest_cells = one_way_cells;
  const double sensitivity = MarginalSensitivity(relation, 1.0);
  const double score_sensitivity = AimScoreSensitivity(candidates, relation);
  AimSchedule schedule(budget);
  if (budget.label_rounds > 0) {
    // Post-processing of the 1-way release: the rows it estimates (each
    // table's sum is an unbiased estimate; their mean) against the first
    // round's noise std per cell.
    double rows = 0.0;
    for (const release::NoisyMarginal& m : run.one_way) rows += m.counts.sum();
    rows /= static_cast<double>(run.one_way.size());
    if (rows >= kAimLabelRoundRowsPerSigma * budget.noise_multiplier * sensitivity) {
      schedule.UseRegularLabelRounds();
    }
  }
  while (!schedule.done()) {
    const AimSchedule::Round params = schedule.Next();
    const double sigma = params.noise_multiplier * sensitivity;
    // Alg. 2, line 10: the model may grow with the budget spent.
    const double size_limit =
        std::max(static_cast<double>(one_way_cells),
                 static_cast<double>(max_model_cells) * schedule.used() / schedule.rho());
    auto fits = [&](const AimCandidate& c) {
      if (c.clique.size() <= 1) return true;
      if (wide) {
        // The forest rule (aim.h, kMaxAimWideColumns), then the size filter
        // on the forest's cells with this pair.
        const int u = c.clique[0];
        const int v = c.clique[1];
        if (measured_pairs.contains({u, v})) return true;
        if (trees.Find(u) == trees.Find(v)) return false;
        const int64_t with = forest_cells + c.cells - (in_pair[u] ? 0 : domain_sizes[u]) -
                             (in_pair[v] ? 0 : domain_sizes[v]);
        return static_cast<double>(with) <= size_limit;
      }
      std::vector<std::vector<int>> with = measured;
      with.push_back(c.clique);
      return static_cast<double>(model->CellsWith(with)) <= size_limit;
    };
    std::vector<int> eligible;
    std::vector<double> scores;
    double round_sensitivity = score_sensitivity;
    if (params.label) {
      // Issue 38: a label round selects among the label's pairs not yet
      // measured (public: the schema's label, the candidates, the released
      // cliques, the size filter), each scored with weight 1.
      for (size_t k = 0; k < candidates.size(); ++k) {
        const AimCandidate& c = candidates[k];
        if (c.clique.size() != 2 || (c.clique[0] != budget.label && c.clique[1] != budget.label) ||
            std::find(measured.begin(), measured.end(), c.clique) != measured.end() || !fits(c)) {
          continue;
        }
        eligible.push_back(static_cast<int>(k));
        scores.push_back(AimScore(truth[k], model->Marginal(c.clique), 1.0, sigma));
      }
      round_sensitivity = LabelScoreSensitivity(relation);
    }
    if (eligible.empty()) {
      // A regular round (Alg. 2), or a label round with no label pair left:
      // every candidate that passes the size filter, at its weight.
      round_sensitivity = score_sensitivity;
      for (size_t k = 0; k < candidates.size(); ++k) {
        const AimCandidate& c = candidates[k];
        if (!fits(c)) continue;
        eligible.push_back(static_cast<int>(k));
        scores.push_back(AimScore(truth[k], model->Marginal(c.clique), c.weight, sigma));
      }
    }
    DPC_ASSIGN_OR_RETURN(const int pick,
                         privacy::ExponentialMechanismSelect(
                             scores, params.selection_epsilon * mutation.selection_epsilon_factor,
                             round_sensitivity, noise));
    const AimCandidate& chosen = candidates[eligible[pick]];
    AimRound round;
    round.label = params.label;
    round.clique = chosen.clique;
    round.noise_multiplier = params.noise_multiplier;
    round.selection_epsilon = params.selection_epsilon;
    round.measurement.clique = chosen.clique;
    round.measurement.shape = shape_of(chosen.clique);
    round.measurement.counts = truth[eligible[pick]];
    const double noise_factor = mutation.round_noise_factor *
                                (params.label ? mutation.label_round_noise_factor : 1.0);
    DPC_ASSIGN_OR_RETURN(privacy::GridNoise drawn,
                         privacy::AddGridGaussianNoise(round.measurement.counts,
                                                       params.noise_multiplier * noise_factor,
                                                       sensitivity, noise));
    round.measurement.noise_std = noise->adds_noise() ? drawn.scale() : 0.0;
    // Released from here on: the rest of the round is post-processing.
    const Eigen::VectorXd before = model->Marginal(chosen.clique);
    measurements.push_back(round.measurement);
    measured.push_back(chosen.clique);
    if (wide && chosen.clique.size() == 2 &&
        measured_pairs.insert({chosen.clique[0], chosen.clique[1]}).second) {
      const int u = chosen.clique[0];
      const int v = chosen.clique[1];
      forest_cells += chosen.cells - (in_pair[u] ? 0 : domain_sizes[u]) -
                      (in_pair[v] ? 0 : domain_sizes[v]);
      in_pair[u] = in_pair[v] = 1;
      trees.Union(u, v);
    }
    model->Fit(measurements);
    const Eigen::VectorXd after = model->Marginal(chosen.clique);
    // Alg. 2, line 13: anneal when the model moved by at most the
    // measurement's expected noise.
    const double moved = before.size() == after.size() ? (after - before).cwiseAbs().sum() : 0.0;
    // Not after a label round: its parameters are not the schedule's.
    if (!params.last && !params.label &&
        moved <= kExpectedAbsNormal * sigma * static_cast<double>(chosen.cells)) {
      schedule.Anneal();
      round.annealed = true;
    }
    round.rho_used = schedule.used();
    run.rounds.push_back(std::move(round));
  }
  return run;
}

}  // namespace dpcurator::train
