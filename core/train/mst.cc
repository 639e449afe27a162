#include "core/train/mst.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/pgm/graphical_model.h"
#include "core/privacy/calibration.h"
#include "core/privacy/conversion.h"
#include "core/privacy/exponential_mechanism.h"
#include "core/privacy/rdp.h"
#include "core/util/public_rng.h"
#include "core/util/shard_pool.h"
#include "core/util/status_macros.h"
#include "core/util/union_find.h"
#include "core/util/validation.h"

namespace dpcurator::train {
namespace {

using RowMajorMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Mirror-descent iterations of the tree fit: on a tree the fit converges
// fast (noiseless chain marginals are matched to 1e-15 after 1,000; 1e-8
// after 300), and a tree's junction tree is small (Adult's: a few thousand
// cells), so this costs well under a second.
constexpr int kTreeFitIterations = 1000;

std::string PairText(const std::vector<int>& clique) {
  return absl::StrCat("(", clique[0], ", ", clique[1], ")");
}

}  // namespace

absl::StatusOr<MstBudget> MstBudgetForRho(int num_columns, double rho) {
  if (num_columns < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MST needs a schema of at least 2 columns, got ", num_columns));
  }
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(rho, "rho"));
  MstBudget budget;
  budget.num_columns = num_columns;
  budget.rho = rho;
  const double third = rho / 3.0;
  // A grid Gaussian of multiplier s is 1 / (2 s^2)-zCDP (RDP alpha / (2 s^2)).
  budget.one_way_noise_multiplier = std::sqrt(1.0 / (2.0 * third));
  budget.two_way_noise_multiplier = budget.one_way_noise_multiplier;
  // n - 1 mechanisms of eps^2 / 8 each.
  budget.selection_epsilon = std::sqrt(8.0 * third / (num_columns - 1));
  return budget;
}

absl::StatusOr<privacy::PrivacyEvent> MstEvent(const MstBudget& budget) {
  DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent one_way,
                       privacy::PrivacyEvent::GridGaussian(budget.one_way_noise_multiplier));
  DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent step,
                       privacy::PrivacyEvent::ExponentialMechanism(budget.selection_epsilon));
  DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent selection,
                       privacy::PrivacyEvent::SelfCompose(std::move(step), budget.num_columns - 1));
  DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent two_way,
                       privacy::PrivacyEvent::GridGaussian(budget.two_way_noise_multiplier));
  return privacy::PrivacyEvent::Compose(
      {std::move(one_way), std::move(selection), std::move(two_way)});
}

absl::StatusOr<MstBudget> CalibrateMstBudget(int num_columns, double epsilon, double delta) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(epsilon, "Epsilon"));
  DPC_RETURN_IF_ERROR(ValidateInOpenUnitInterval(delta, "Delta"));
  auto epsilon_of = [&](double rho) -> absl::StatusOr<double> {
    DPC_ASSIGN_OR_RETURN(MstBudget budget, MstBudgetForRho(num_columns, rho));
    DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent event, MstEvent(budget));
    const std::vector<double>& orders = privacy::DefaultRdpOrders();
    DPC_ASSIGN_OR_RETURN(std::vector<double> rdp, privacy::ComputeRdp(event, orders));
    DPC_ASSIGN_OR_RETURN(privacy::RdpEpsilon converted,
                         privacy::RdpToEpsilon(orders, rdp, delta));
    return converted.epsilon;
  };
  DPC_ASSIGN_OR_RETURN(const double rho,
                       privacy::LargestRhoWithin(epsilon, delta, epsilon_of, "MST"));
  DPC_ASSIGN_OR_RETURN(MstBudget budget, MstBudgetForRho(num_columns, rho));
  // The selections run after the rows are read, so the exact sampler's
  // public checks (its epsilon in [2^-30, 1e6]) are made here, before
  // admission, with the code the selection runs (issue 23).
  const int pairs = num_columns * (num_columns - 1) / 2;
  absl::Status selectable = privacy::ValidateExponentialMechanism(
      pairs, budget.selection_epsilon,
      MstQualitySensitivity(privacy::NeighbouringRelation::kAddRemove));
  if (selectable.ok()) {
    selectable = privacy::ValidateExponentialMechanism(
        pairs, budget.selection_epsilon,
        MstQualitySensitivity(privacy::NeighbouringRelation::kReplaceOne));
  }
  if (!selectable.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epsilon ", epsilon, " gives MST's tree selections epsilon ", budget.selection_epsilon,
        " each, which the exponential mechanism cannot draw (", selectable.message(),
        "); choose an epsilon between about 1e-6 and 1e4"));
  }
  return budget;
}

Eigen::VectorXd ProjectToSimplex(const Eigen::VectorXd& counts) {
  const Eigen::Index d = counts.size();
  const double total = counts.sum();
  if (!(total > 0.0)) return Eigen::VectorXd::Constant(d, 1.0 / d);
  const Eigen::VectorXd v = counts / total;
  // Duchi, Shalev-Shwartz, Singer, Chandra 2008, Fig. 1: the threshold theta
  // with sum max(v - theta, 0) = 1.
  std::vector<double> sorted(v.data(), v.data() + d);
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  double cumulative = 0.0;
  double theta = 0.0;
  for (Eigen::Index k = 0; k < d; ++k) {
    cumulative += sorted[k];
    const double t = (cumulative - 1.0) / static_cast<double>(k + 1);
    if (sorted[k] - t > 0.0) theta = t;
  }
  return (v.array() - theta).cwiseMax(0.0).matrix();
}

double MstQualitySensitivity(privacy::NeighbouringRelation relation) {
  return relation == privacy::NeighbouringRelation::kReplaceOne ? 2.0 : 1.0;
}

std::vector<std::vector<int>> MstTableCliques(int num_columns) {
  std::vector<std::vector<int>> cliques;
  for (int c = 0; c < num_columns; ++c) cliques.push_back({c});
  for (int i = 0; i < num_columns; ++i) {
    for (int j = i + 1; j < num_columns; ++j) cliques.push_back({i, j});
  }
  return cliques;
}

absl::StatusOr<std::vector<std::pair<int, int>>> SelectMstTree(
    const Eigen::MatrixXi& codes, const std::vector<release::NoisyMarginal>& one_way,
    privacy::NeighbouringRelation relation, double epsilon_per_step,
    privacy::NoiseSource* noise) {
  const release::RowsTableSource tables(&codes);
  return SelectMstTree(tables, one_way, relation, epsilon_per_step, noise);
}

absl::StatusOr<std::vector<std::pair<int, int>>> SelectMstTree(
    const release::ExactTableSource& tables, const std::vector<release::NoisyMarginal>& one_way,
    privacy::NeighbouringRelation relation, double epsilon_per_step,
    privacy::NoiseSource* noise) {
  const Eigen::MatrixXi* codes_or_null = tables.codes();
  const int n = codes_or_null != nullptr ? static_cast<int>(codes_or_null->cols())
                                         : static_cast<int>(one_way.size());
  if (n < 2 || static_cast<int>(one_way.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MST's selection needs one released 1-way marginal per column (", n, " columns, ",
        one_way.size(), " marginals)"));
  }
  // Everything below until the scores is public (the released 1-ways).
  std::vector<Eigen::VectorXd> p(n);
  double n_hat = 0.0;
  for (int c = 0; c < n; ++c) {
    if (one_way[c].clique != std::vector<int>{c} || one_way[c].shape.size() != 1 ||
        one_way[c].counts.size() != one_way[c].shape[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MST's selection: marginal ", c, " must be column ", c, "'s 1-way marginal"));
    }
    p[c] = ProjectToSimplex(one_way[c].counts);
    n_hat += std::max(0.0, one_way[c].counts.sum()) / n;
  }
  // Codes from data::Discretizer::Encode under the released marginals'
  // schema always lie in their domains; anything else is a caller's bug
  // (the message names no row and no value).
  for (int c = 0; c < n && codes_or_null != nullptr; ++c) {
    const Eigen::MatrixXi& codes = *codes_or_null;
    if (codes.rows() > 0 &&
        (codes.col(c).minCoeff() < 0 || codes.col(c).maxCoeff() >= one_way[c].shape[0])) {
      return absl::InternalError(
          "MST's selection: the rows' codes do not match the released marginals' domains; "
          "encode the rows with the schema the marginals were released under");
    }
  }
  // Pairs in the order (0,1), (0,2), ..., (1,2), ...: the candidates'
  // order, so the selection below is the same for any thread count. The
  // exact table of a pair is counted straight from the two code columns
  // (Eigen's column-major layout keeps each contiguous): n (n - 1) / 2 pairs
  // over the rows is this recipe's whole cost (1,071 binary columns: 573,000
  // pairs), so it runs on every core, first columns split between threads.
  std::vector<std::pair<int, int>> candidates;
  std::vector<int64_t> pair_offset(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) candidates.emplace_back(i, j);
    pair_offset[i + 1] = static_cast<int64_t>(candidates.size());
  }
  std::vector<double> quality(candidates.size(), 0.0);
  // The L1 distance of a pair's exact table (row-major, as NoisyMarginal)
  // from the row-major estimate n_hat p_i p_j^T: one expression for both
  // sources, so their scores are the same doubles.
  auto pair_l1 = [&](int i, int j, auto&& table) {
    const int size_i = one_way[i].shape[0];
    const int size_j = one_way[j].shape[0];
    double l1 = 0.0;
    for (int a = 0; a < size_i; ++a) {
      for (int b = 0; b < size_j; ++b) {
        l1 += std::fabs(static_cast<double>(table[static_cast<size_t>(a) * size_j + b]) -
                        n_hat * p[i][a] * p[j][b]);
      }
    }
    return l1;
  };
  if (codes_or_null == nullptr) {
    for (size_t k = 0; k < candidates.size(); ++k) {
      const auto [i, j] = candidates[k];
      DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd table,
                           tables.Table({i, j}, {one_way[i].shape[0], one_way[j].shape[0]}));
      quality[k] = pair_l1(i, j, table);
    }
  } else {
    const Eigen::MatrixXi& codes = *codes_or_null;
    const Eigen::Index rows = codes.rows();
    ShardPool pool(0);
    pool.Run(n - 1, [&](int i) {
      const int size_i = one_way[i].shape[0];
      const int* column_i = codes.col(i).data();
      std::vector<int64_t> table;
      for (int j = i + 1; j < n; ++j) {
        const int size_j = one_way[j].shape[0];
        const int* column_j = codes.col(j).data();
        table.assign(static_cast<size_t>(size_i) * size_j, 0);
        for (Eigen::Index r = 0; r < rows; ++r) {
          ++table[static_cast<size_t>(column_i[r]) * size_j + column_j[r]];
        }
        quality[pair_offset[i] + (j - i - 1)] = pair_l1(i, j, table);
      }
    });
  }
  const double sensitivity = MstQualitySensitivity(relation);
  UnionFind components(n);
  std::vector<std::pair<int, int>> chosen;
  for (int round = 0; round + 1 < n; ++round) {
    std::vector<int> open;
    std::vector<double> scores;
    for (size_t k = 0; k < candidates.size(); ++k) {
      if (components.Find(candidates[k].first) != components.Find(candidates[k].second)) {
        open.push_back(static_cast<int>(k));
        scores.push_back(quality[k]);
      }
    }
    DPC_ASSIGN_OR_RETURN(int pick, privacy::ExponentialMechanismSelect(scores, epsilon_per_step,
                                                                       sensitivity, noise));
    const auto edge = candidates[open[pick]];
    components.Union(edge.first, edge.second);
    chosen.push_back(edge);
  }
  return chosen;
}

absl::StatusOr<TreeModel> FitTreeModel(const std::vector<int>& domain_sizes,
                                       const std::vector<release::NoisyMarginal>& one_way,
                                       const std::vector<release::NoisyMarginal>& two_way) {
  const int n = static_cast<int>(domain_sizes.size());
  std::vector<bool> measured(n, false);
  std::vector<release::NoisyMarginal> all;
  for (const release::NoisyMarginal& m : one_way) {
    if (m.clique.size() != 1 || m.clique[0] < 0 || m.clique[0] >= n ||
        m.counts.size() != domain_sizes[m.clique[0]]) {
      return absl::InvalidArgumentError(
          "FitTreeModel: a 1-way marginal does not match the domain (one column, one count per "
          "cell)");
    }
    measured[m.clique[0]] = true;
    all.push_back(m);
  }
  UnionFind forest(n);
  for (const release::NoisyMarginal& m : two_way) {
    if (m.clique.size() != 2 || m.clique[0] < 0 || m.clique[0] >= n || m.clique[1] < 0 ||
        m.clique[1] >= n || m.clique[0] == m.clique[1] ||
        m.counts.size() != int64_t{domain_sizes[m.clique[0]]} * domain_sizes[m.clique[1]]) {
      return absl::InvalidArgumentError(
          "FitTreeModel: a 2-way marginal does not match the domain (two distinct columns, one "
          "count per cell)");
    }
    if (!forest.Union(m.clique[0], m.clique[1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FitTreeModel: pair ", PairText(m.clique),
          " closes a cycle; a tree model takes pairs that form a forest (a spanning tree)"));
    }
    measured[m.clique[0]] = measured[m.clique[1]] = true;
    all.push_back(m);
  }
  for (int c = 0; c < n; ++c) {
    if (!measured[c]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FitTreeModel: column ", c, " has no measured marginal; measure its 1-way marginal"));
    }
  }
  // The shapes were checked above; a tree's junction tree is its edges and
  // lone columns, so no size limit applies.
  for (release::NoisyMarginal& m : all) {
    m.shape.clear();
    for (int v : m.clique) m.shape.push_back(domain_sizes[v]);
  }
  pgm::EstimateOptions options;
  options.iterations = kTreeFitIterations;
  options.max_cells = std::numeric_limits<int64_t>::max();
  DPC_ASSIGN_OR_RETURN(const pgm::GraphicalModel fitted,
                       pgm::GraphicalModel::Estimate(domain_sizes, all, options));
  TreeModel model;
  model.domain_sizes = domain_sizes;
  model.total = fitted.total();
  for (int c = 0; c < n; ++c) {
    const Eigen::VectorXd counts = fitted.Marginal({c});
    model.nodes.push_back(counts / counts.sum());
  }
  for (const release::NoisyMarginal& m : two_way) {
    const int i = m.clique[0];
    const int j = m.clique[1];
    const Eigen::VectorXd counts = fitted.Marginal({i, j}) / fitted.total();
    model.edges.emplace_back(i, j);
    model.tables.push_back(
        Eigen::Map<const RowMajorMatrix>(counts.data(), domain_sizes[i], domain_sizes[j]));
  }
  return model;
}

Eigen::MatrixXi SampleTreeModel(const TreeModel& model, int64_t num_rows, uint64_t seed) {
  const int n = static_cast<int>(model.domain_sizes.size());
  // Each step samples `child` given `parent` from a cumulative table of
  // d_parent rows (or, for a root, the node marginal as one row).
  struct Step {
    int parent = -1;
    int child = 0;
    RowMajorMatrix cumulative;
  };
  std::vector<std::vector<std::pair<int, int>>> adjacent(n);  // (neighbour, edge)
  for (size_t e = 0; e < model.edges.size(); ++e) {
    adjacent[model.edges[e].first].emplace_back(model.edges[e].second, static_cast<int>(e));
    adjacent[model.edges[e].second].emplace_back(model.edges[e].first, static_cast<int>(e));
  }
  auto cumulate = [](RowMajorMatrix table, const Eigen::VectorXd& fallback) {
    for (Eigen::Index r = 0; r < table.rows(); ++r) {
      if (!(table.row(r).sum() > 0.0)) table.row(r) = fallback.transpose();
      for (Eigen::Index k = 1; k < table.cols(); ++k) table(r, k) += table(r, k - 1);
    }
    return table;
  };
  std::vector<Step> steps;
  std::vector<bool> visited(n, false);
  for (int root = 0; root < n; ++root) {
    if (visited[root]) continue;
    visited[root] = true;
    steps.push_back({-1, root, cumulate(model.nodes[root].transpose(), model.nodes[root])});
    std::vector<int> queue = {root};
    for (size_t head = 0; head < queue.size(); ++head) {
      const int parent = queue[head];
      for (const auto& [child, e] : adjacent[parent]) {
        if (visited[child]) continue;
        visited[child] = true;
        queue.push_back(child);
        RowMajorMatrix conditional = model.edges[e].first == parent
                                         ? RowMajorMatrix(model.tables[e])
                                         : RowMajorMatrix(model.tables[e].transpose());
        steps.push_back({parent, child, cumulate(std::move(conditional), model.nodes[child])});
      }
    }
  }
  PublicRng rng(seed);
  Eigen::MatrixXi codes(num_rows, n);
  for (int64_t r = 0; r < num_rows; ++r) {
    for (const Step& step : steps) {
      const Eigen::Index row = step.parent < 0 ? 0 : codes(r, step.parent);
      const double* begin = step.cumulative.row(row).data();
      const double* end = begin + step.cumulative.cols();
      const double u = rng.Uniform() * end[-1];
      const int code = static_cast<int>(std::upper_bound(begin, end, u) - begin);
      codes(r, step.child) = std::min(code, static_cast<int>(step.cumulative.cols()) - 1);
    }
  }
  return codes;
}

}  // namespace dpcurator::train
