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

// Bin fitting (issue 38; docs/privacy.md 2.11.1): a steward without public
// ranges gets bin edges from a small marginals release instead of guessing.
// The release is the marginals release above, unchanged, with the 1-way
// cliques of the chosen numeric columns measured over FitGridSchema: the
// schema with those columns' bins replaced by a fine grid fixed by their
// declared bounds only. The sensitivity depends on the number of tables,
// not on their cells, so the derivation, the noise and the accounting are
// the marginals release's; the edges are post-processing of its output
// (FitBinsFromNoisyCounts), done by the client.
//
// The grid is the union of kFitGridEqualCells equal-width cells over the
// bounds (enough for a column the default bins would suit) and
// kFitGridLogEdges log-spaced magnitudes from M x 10^-kFitGridDecades to M,
// M the larger bound's magnitude, on each side of 0 the bounds reach, and 0
// itself when inside (heavy tails: a factor 10^(6/64) = 1.24 per cell, finer
// than the 2 significant digits the edges are rounded to). At most 256
// interior edges, 257 cells, far under kMaxCellsPerClique.
inline constexpr int kFitGridEqualCells = 128;
inline constexpr int kFitGridLogEdges = 64;
inline constexpr double kFitGridDecades = 6.0;

// The fine grid's interior edges for a numeric column (its bounds only):
// sorted, distinct, strictly inside (lower, upper).
std::vector<double> FitGridEdges(const data::Column& column);

// `schema` with every column in `columns` (numeric, non-image) given
// FitGridEdges as its bins; atoms, categories, aliases, label and missing
// tokens kept. INVALID_ARGUMENT naming a column that is not numeric.
absl::StatusOr<data::Schema> FitGridSchema(const data::Schema& schema,
                                           const std::vector<int>& columns);

// Edges and narrower bounds read from one column's noisy 1-way marginal over
// FitGridSchema (atoms' cells first, then the grid's bins, as
// data::Discretizer lays them out). Post-processing only: a cell below
// kFitCellThreshold x `noise_std` (the release's public per-cell noise) is
// taken as empty, the cumulative sum (monotone by construction) is
// interpolated linearly inside each cell, and the `bins` - 1 equal-share
// quantiles become edges rounded to 2 significant digits (whole numbers for
// an integer column), kept strictly inside the bounds and deduplicated. The
// bounds are the 0.5% and 99.5% quantiles rounded outwards to 2 significant
// digits, never past the declared ones. All counts at or below 0: no edges,
// the declared bounds.
struct FittedBins {
  std::vector<double> edges;
  double lower = 0.0;
  double upper = 1.0;
};
inline constexpr double kFitBoundQuantile = 0.005;
// Why 3: clipping at 0 alone leaves each empty cell sigma / sqrt(2 pi) = 0.4
// sigma on average, which over ~250 empty grid cells is a floor of ~100
// sigma spread evenly over the bounds: at sigma 5 and 2,000 rows it moved
// the 99.5% quantile from 1e6 to the bound 1e9. An empty cell passes
// 3 sigma with probability 0.13% (about 0.35 cells of 257), and any cell of
// the bulk at n x share >= 3 sigma is kept.
inline constexpr double kFitCellThreshold = 3.0;
FittedBins FitBinsFromNoisyCounts(const data::Column& grid_column,
                                  const Eigen::VectorXd& noisy_counts, double noise_std,
                                  int bins);

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_MARGINALS_H_
