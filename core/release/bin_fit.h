#ifndef DPCURATOR_CORE_RELEASE_BIN_FIT_H_
#define DPCURATOR_CORE_RELEASE_BIN_FIT_H_

#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/data/schema.h"

namespace dpcurator::release {

// Bin fitting (issue 38; docs/privacy.md 2.11.1): a steward without public
// ranges gets bin edges from a small marginals release instead of guessing.
// The release is the marginals release (core/release/marginals.h),
// unchanged, with the 1-way cliques of the chosen numeric columns measured
// over FitGridSchema: the schema with those columns' bins replaced by a fine
// grid fixed by their declared bounds only. The sensitivity depends on the number of tables,
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

#endif  // DPCURATOR_CORE_RELEASE_BIN_FIT_H_
