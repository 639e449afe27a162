#ifndef DPCURATOR_CORE_TRAIN_MST_H_
#define DPCURATOR_CORE_TRAIN_MST_H_

// MST (McKenna, Miklau, Sheldon 2021, "Winning the NIST Contest: A scalable
// and general approach to differentially private synthetic data", Sec. 4):
// measure every 1-way marginal, select a maximum spanning tree of pairs with
// one exponential mechanism per edge, measure the selected 2-way marginals,
// fit a tree-structured graphical model to the noisy measurements and sample
// from it. The budget is split in thirds (rho / 3 each), as in the paper.
//
// Here, in core (docs/privacy.md 2.11):
//   * the budget: CalibrateMstBudget / MstEvent, the ledger's events;
//   * the private selection the server runs: SelectMstTree;
//   * the client's fit and sampler: FitTreeModel, SampleTreeModel.

#include <cstdint>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/data/discretize.h"
#include "core/data/table.h"
#include "core/privacy/events.h"
#include "core/privacy/noise_source.h"
#include "core/release/marginals.h"

namespace dpcurator::train {

// MST's three mechanisms for a schema of num_columns columns and a total
// zCDP budget rho: rho / 3 to the 1-way marginals (one grid Gaussian release
// of noise multiplier s1 = sqrt(3 / (2 rho))), rho / 3 to the n - 1
// exponential mechanisms (eps_step = sqrt(8 (rho / 3) / (n - 1)), since each
// is eps^2 / 8-zCDP), rho / 3 to the 2-way marginals (s2 = s1).
struct MstBudget {
  int num_columns = 0;
  double rho = 0.0;
  double one_way_noise_multiplier = 0.0;
  double selection_epsilon = 0.0;  // per exponential mechanism
  double two_way_noise_multiplier = 0.0;
};

// num_columns >= 2, rho finite and > 0.
absl::StatusOr<MstBudget> MstBudgetForRho(int num_columns, double rho);

// The ledger's event of a whole MST run: grid_gaussian(s1),
// repeat(n - 1; exponential(eps_step)), grid_gaussian(s2), composed.
absl::StatusOr<privacy::PrivacyEvent> MstEvent(const MstBudget& budget);

// The largest rho (to a relative 1e-6) whose MstEvent converts, by the
// ledger's RDP conversion (conversion.h, kImproved), to at most `epsilon` at
// `delta`. epsilon > 0, delta in (0, 1).
absl::StatusOr<MstBudget> CalibrateMstBudget(int num_columns, double epsilon, double delta);

// A noisy count vector made a probability vector: the Euclidean projection
// of counts / total onto the simplex (clipping small and negative cells to
// 0 and shifting the rest by one constant), total = the counts' sum if
// positive. Uniform when nothing is left.
Eigen::VectorXd ProjectToSimplex(const Eigen::VectorXd& counts);

// The quality of a candidate pair (MST Sec. 4, "select"): the L1 distance
// between the pair's true count table and the estimate the noisy 1-way
// marginals give under independence, n_hat p_i p_j^T (p the projected 1-way
// estimates, n_hat their mean total). Only the true table depends on the
// rows, and a row moves one of its cells by 1 (ADD_REMOVE) or one cell
// down and one up (REPLACE_ONE): sensitivity 1 or 2.
double MstQualitySensitivity(privacy::NeighbouringRelation relation);

// The private step the server runs after the 1-way release: scores every
// pair of columns on the discretised rows `codes` (num_rows x num_columns,
// data::Discretizer::Encode) against the released 1-way marginals (one per
// column, in column order), then grows a spanning tree Kruskal-style: n - 1
// rounds, each an exponential mechanism of `epsilon_per_step` over the pairs
// that join two different components (MST Alg. 1). Returns the chosen
// edges, in the order chosen. Charges nothing itself: the caller's ledger
// holds n - 1 ExponentialMechanism(epsilon_per_step) events (MstEvent).
absl::StatusOr<std::vector<std::pair<int, int>>> SelectMstTree(
    const Eigen::MatrixXi& codes, const std::vector<release::NoisyMarginal>& one_way,
    privacy::NeighbouringRelation relation, double epsilon_per_step,
    privacy::NoiseSource* noise);
// The same selection over any table source (release::ExactTableSource):
// the rows' codes when it has them (the threaded count above), else each
// pair's exact table as the source holds it (an external dataset's
// submitted tables, issue 41). The scores are the same numbers either way
// (integer counts in doubles, summed in the same order), so the same noise
// draws choose the same tree.
absl::StatusOr<std::vector<std::pair<int, int>>> SelectMstTree(
    const release::ExactTableSource& tables, const std::vector<release::NoisyMarginal>& one_way,
    privacy::NeighbouringRelation relation, double epsilon_per_step,
    privacy::NoiseSource* noise);

// Every clique whose exact table MST may read on a schema of num_columns
// columns, a function of the column count alone: each 1-way (column order),
// then each pair (i, j), i < j, in the selection's order (0,1), (0,2), ...,
// (1,2), .... The external path's plan (issue 41): one pass over the
// curator's cluster counts them all before the recipe runs.
std::vector<std::vector<int>> MstTableCliques(int num_columns);

// A tree-structured model over the discrete domain: node marginals and the
// joint table of each tree edge, all probabilities, mutually consistent
// (each edge table's margins are its nodes' marginals), so the joint
// p(x) = prod_edges p(x_i, x_j) / prod_nodes p(x_v)^(deg(v) - 1) has exactly
// these marginals (a tree's junction tree is itself; Koller & Friedman 2009,
// Thm. 10.4).
struct TreeModel {
  std::vector<int> domain_sizes;
  std::vector<Eigen::VectorXd> nodes;
  std::vector<std::pair<int, int>> edges;
  // edges[e].first's codes index rows, edges[e].second's columns.
  std::vector<Eigen::MatrixXd> tables;
  double total = 0.0;  // the estimated row count (public: from noisy counts)
};

// Fits a TreeModel to noisy marginals (MST's "generate" step, as the paper:
// Private-PGM, core/pgm, whose junction tree for a forest of pairs is the
// forest itself): the model minimising sum_i ||mu_i - y_i||^2 / sigma_i^2 over
// all measurements at once, so each column's marginal and each pair's table
// are its least-squares estimates under the constraint that they be one
// consistent, non-negative distribution. Noiseless marginals are reproduced
// (to about 1e-15). nodes and tables are the fitted model's marginals.
// one_way: 1-column NoisyMarginals (any subset of columns; a column without
// one uses its pairs' margins only); two_way: 2-column ones whose pairs form
// a forest over the columns (INVALID_ARGUMENT otherwise, naming the pair). A
// column in no pair is independent of the rest.
absl::StatusOr<TreeModel> FitTreeModel(const std::vector<int>& domain_sizes,
                                       const std::vector<release::NoisyMarginal>& one_way,
                                       const std::vector<release::NoisyMarginal>& two_way);

// num_rows draws of the model's codes (ancestral sampling from each tree's
// first column along its edges), from PublicRng(seed).
Eigen::MatrixXi SampleTreeModel(const TreeModel& model, int64_t num_rows, uint64_t seed);

}  // namespace dpcurator::train

#endif  // DPCURATOR_CORE_TRAIN_MST_H_
