#ifndef DPCURATOR_CORE_RELEASE_MARGINALS_H_
#define DPCURATOR_CORE_RELEASE_MARGINALS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/data/discretize.h"
#include "core/data/schema.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/mechanism_record.h"

namespace dpcurator::release {

// Data-independent limits on a marginals release (from the schema and the
// request only): cells of one clique's table, cells of the whole release
// (the grid Gaussian's proof covers up to kMaxGridGaussianDimension
// coordinates), cliques per release, columns per clique.
inline constexpr int64_t kMaxCellsPerClique = int64_t{1} << 16;
inline constexpr int64_t kMaxMarginalCells = int64_t{1} << 20;
inline constexpr int kMaxCliques = 4096;
inline constexpr int kMaxCliqueColumns = 3;

// One released count table over a clique's domain (data::Discretizer),
// row-major in the clique's column order: cell index
// sum_k code_k * prod_{l > k} domain_size(column_l).
struct NoisyMarginal {
  std::vector<int> clique;
  std::vector<int> shape;     // domain size of each clique column
  Eigen::VectorXd counts;     // prod(shape) noisy counts
  double noise_std = 0.0;     // per cell, as drawn (grid scale)
};

// Cell index of one row's codes in a clique's table (the layout above).
int64_t MarginalCellIndex(const std::vector<int>& clique, const std::vector<int>& shape,
                          const Eigen::MatrixXi& codes, Eigen::Index row);

// The exact (noiseless) counts of a clique over discretised rows.
Eigen::VectorXd ExactMarginal(const std::vector<int>& clique, const std::vector<int>& shape,
                              const Eigen::MatrixXi& codes);

// The "marginals" release (issue 17; docs/privacy.md 2.11): noisy counts of
// each clique's table over the schema's discrete domain, all of them one
// grid discrete Gaussian release (one accounting event). Each row adds 1 to
// exactly one cell of each of the k tables, so the L2 sensitivity of the
// concatenated counts is sqrt(k) under ADD_REMOVE and sqrt(2k) under
// REPLACE_ONE (a replaced row leaves one cell and enters one per table).
// Noise per cell: s x sensitivity, as in every one-shot release.
//
// The unit follows release_kind.h's shape; Run reads the rows as a
// data::Table (the discretisation needs the raw values, not the encoder's
// scaled features), so the server binds it beside, not through,
// OneShotReleaseKind.
class MarginalsKind {
 public:
  static constexpr std::string_view kName = "marginals";

  struct Params {
    // Column indices of each clique (distinct within a clique).
    std::vector<std::vector<int>> cliques;
  };

  struct Result {
    std::vector<NoisyMarginal> marginals;
    GaussianMechanismRecord ran;
  };

  // Checks the cliques against bounds from the public schema only
  // (INVALID_ARGUMENT naming the clique and the limit): 1..kMaxCliques
  // cliques, each 1..kMaxCliqueColumns distinct non-image columns, at most
  // kMaxCellsPerClique cells each and kMaxMarginalCells in all.
  static absl::StatusOr<Params> Resolve(Params params, const data::Schema& schema);

  // One grid Gaussian release of noise multiplier s.
  static GaussianMechanismRecord Plan(const Params& resolved, double noise_multiplier);

  // L2 sensitivity of the concatenated counts: sqrt(k) or sqrt(2k).
  static double L2Sensitivity(const Params& resolved, privacy::NeighbouringRelation relation);

  // The exact (noiseless) statistic: each clique's table shape and the
  // concatenated counts of every clique, in Params order. The one place
  // both the engine (Run) and the scale-out partials (python/) count, so
  // shard partials sum to the engine's counts exactly (integers in double).
  struct ExactCounts {
    std::vector<std::vector<int>> shapes;
    Eigen::VectorXd counts;
  };
  static absl::StatusOr<ExactCounts> Count(const Params& resolved, const data::Schema& schema,
                                           const data::Table& rows);

  // The engine: discretises the rows, counts, adds one grid discrete
  // Gaussian draw of multiplier s over all cells.
  static absl::StatusOr<Result> Run(const Params& resolved, const data::Schema& schema,
                                    const data::Table& rows,
                                    privacy::NeighbouringRelation relation,
                                    double noise_multiplier, privacy::NoiseSource* noise);
};

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_MARGINALS_H_
