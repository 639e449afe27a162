#ifndef DPCURATOR_CORE_PGM_GRAPHICAL_MODEL_H_
#define DPCURATOR_CORE_PGM_GRAPHICAL_MODEL_H_

// Private-PGM (McKenna, Sheldon, Miklau, "Graphical-model based estimation
// and inference for differential privacy", ICML 2019): a distribution over a
// discrete domain fitted to noisy marginal measurements, represented as a
// junction-tree graphical model. Post-processing only: it reads released
// NoisyMarginals, never rows, so nothing here is a privacy channel.
//
// Tables are row-major with the LAST attribute fastest (release::NoisyMarginal's
// layout); inside the model every junction-tree clique lists its attributes in
// ascending order.

#include <cstdint>
#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/release/marginals.h"

namespace dpcurator::pgm {

// Cells of the junction tree (sum over its maximal cliques of the product of
// their domain sizes, saturating at INT64_MAX) that Estimate builds for a model
// measuring these attribute sets (every attribute is in the model even when
// no set names it). Triangulation by greedy min-fill (ties: the smaller
// clique table, then the lower attribute index), so deterministic. Cheap: no
// table is allocated (O(n^2 + n * deg^2) per eliminated attribute). Cliques
// must name attributes in [0, domain_sizes.size()); others are ignored.
int64_t JunctionTreeCells(const std::vector<int>& domain_sizes,
                          const std::vector<std::vector<int>>& cliques);

class GraphicalModel;

struct EstimateOptions {
  // Mirror-descent iterations (each is one or more belief propagations).
  int iterations = 300;
  // Upper bound on cells(). Memory: the fit holds 7 tables of cells()
  // doubles (theta, mu, the gradient, their copies from the previous
  // iteration, one belief buffer), 56 bytes a cell, and one byte a cell
  // when zero_below_sigmas > 0: 10M cells is about 570 MB; the fitted model
  // keeps theta and mu (16 bytes a cell).
  int64_t max_cells = 10'000'000;
  // A model fitted earlier to a subset of these measurements: the fit starts
  // from its distribution (and step size) when each of its cliques lies
  // inside one clique of the new junction tree, else from the uniform one.
  // Must outlive the call.
  const GraphicalModel* warm_start = nullptr;
  // Empty cells, after the fit (post-processing of released values only).
  // The least-squares fit keeps the positive part of every empty cell's
  // noise, about 0.4 sigma a cell (E max(0, sigma Z) = sigma / sqrt(2 pi)):
  // on Adult at epsilon 1, 2 points of the education x education-num mass
  // lie off its 16 real pairs. With zero_below_sigmas > 0, for every
  // measured set of two or more attributes and every pair of attributes in
  // it, the pair's cells whose fitted count is below zero_below_sigmas times
  // the SMALLEST noise std of all measurements are taken for empty (no
  // measurement resolves a count that small; a pair table whose every cell
  // is below keeps them all), every cell over them is fixed at 0, and the
  // fit runs zero_refit_iterations more under that constraint, so the
  // cliques stay consistent. Pairs, not the measured sets' own cells, and
  // the smallest sigma, not each set's: a 3-way table of many rare real
  // cells measured at 4x the last rounds' sigma lost its tails under the
  // rule "below k times the set's sigma" (mean 2-way TV up by a quarter on
  // Adult at k = 2, bench/aim_fit_bench), while this one leaves the TV of
  // the 2-way and 3-way marginals as it was or lower.
  double zero_below_sigmas = 0.0;
  // An attribute whose pairs zero_below_sigmas never judges, -1 for none:
  // AIM passes the label (issue 38). A (feature level, label) cell fitted
  // below the threshold may still hold real rows (education 9th with >50K
  // on Adult: about 27 of 32,561 rows, under 2 x 16.5), and rows that never
  // hold it make a classifier certain it cannot happen: Gaussian naive Bayes
  // trained on such rows scored ROC-AUC 0.533 on one seed.
  int zero_exempt_attribute = -1;
  int zero_refit_iterations = 200;
};

class GraphicalModel {
 public:
  // Fits by mirror descent on sum_i ||mu_Ci - y_i||^2 / sigma_i^2 (Private-PGM,
  // Alg. 1, with the Armijo backtracking of the public implementation), mu the
  // clique marginals (counts: probabilities times total()) from exact log-space
  // belief propagation on the junction tree (Koller & Friedman 2009, Alg.
  // 10.2, Hugin-style messages). Measurements of the same attribute set are
  // first merged by inverse-variance averaging (an exact rewrite of the loss).
  //
  // Errors only for data-independent reasons: INVALID_ARGUMENT for an empty
  // domain, a domain size < 1, a measurement whose clique is empty, repeats or
  // leaves the domain, or whose shape / counts size does not match;
  // RESOURCE_EXHAUSTED when the junction tree has more than max_cells cells.
  // Non-finite or huge counts (clipped to +-1e15, NaN read as 0), negative
  // counts and non-positive or non-finite sigmas (read as the smallest valid
  // sigma, or 1) still give a finite model.
  static absl::StatusOr<GraphicalModel> Estimate(
      const std::vector<int>& domain_sizes,
      const std::vector<release::NoisyMarginal>& measurements, const EstimateOptions& options);

  // A fitted model rebuilt from its junction tree and clique marginals (what
  // a model file keeps: cliques(), parents(), clique_marginal(c)), for
  // Marginal and Sample; it cannot warm-start a fit. INVALID_ARGUMENT unless
  // the cliques are non-empty, ascending and inside the domain, parents
  // precede their children (the root, -1, first and only), every attribute
  // is in some clique, and each marginal has its clique's cells, all finite.
  static absl::StatusOr<GraphicalModel> FromParts(std::vector<int> domain_sizes,
                                                  std::vector<std::vector<int>> cliques,
                                                  std::vector<int> parents,
                                                  std::vector<Eigen::VectorXd> clique_marginals);

  // The model's marginal counts over `clique` (sum = total()), in the given
  // attribute order with the last fastest. Exact for any attribute set: a
  // subset of one junction-tree clique is summed out of it (O(its cells));
  // otherwise variable elimination along the smallest subtree joining the
  // attributes, whose cost is each subtree clique's cells times the domain of
  // the query attributes carried through it. Returns an empty vector for an
  // empty clique, a repeated attribute or one outside the domain.
  Eigen::VectorXd Marginal(const std::vector<int>& clique) const;

  // The estimated record count: the inverse-variance average of the
  // measurements' sums (clipped to [1, 1e15]).
  double total() const { return total_; }

  // num_rows draws of all attributes' codes (num_rows x domain_sizes.size()),
  // by forward sampling along the junction tree from its root clique, from
  // PublicRng(seed). num_rows <= 0 gives no rows.
  Eigen::MatrixXi Sample(int64_t num_rows, uint64_t seed) const;

  // Cells of the junction tree: == JunctionTreeCells of the measured sets.
  int64_t cells() const { return cells_; }

  // The junction tree (for tests and callers that inspect it): its cliques
  // (ascending attributes) and each clique's parent (-1 for the root); the
  // root is clique 0 and parents precede their children.
  const std::vector<std::vector<int>>& cliques() const { return cliques_; }
  const std::vector<int>& parents() const { return parents_; }
  const std::vector<int>& domain_sizes() const { return domain_sizes_; }

  // The clique marginal (counts) of junction-tree clique c, layout as cliques()[c].
  const Eigen::VectorXd& clique_marginal(int c) const { return mu_[c]; }

 private:
  friend class Estimator;
  GraphicalModel() = default;

  std::vector<int> domain_sizes_;
  std::vector<std::vector<int>> cliques_;
  std::vector<int> parents_;
  std::vector<Eigen::VectorXd> theta_;  // log-potentials per clique
  std::vector<Eigen::VectorXd> mu_;     // calibrated clique marginals, counts
  double total_ = 1.0;
  double step_size_ = 0.0;  // the last accepted mirror-descent step (warm starts)
  int64_t cells_ = 0;
};

}  // namespace dpcurator::pgm

#endif  // DPCURATOR_CORE_PGM_GRAPHICAL_MODEL_H_
