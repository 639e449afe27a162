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
// Why 4: clipping at 0 alone leaves each empty cell sigma / sqrt(2 pi) = 0.4
// sigma on average, which over ~250 empty grid cells is a floor of ~100
// sigma spread evenly over the bounds: at sigma 5 and 2,000 rows it moved
// the 99.5% quantile from 1e6 to the bound 1e9. At 3 sigma an empty cell
// passes with probability 0.13%, about 0.35 cells of 257 per release: in
// the e2e test (epsilon 0.1, sigma 31.6, 2,000 rows) one release in three
// kept a noise cell near 2.4e8 of ~100 counts, a twentieth of the mass,
// which took an equal share and stretched the top bin to it. At 4 sigma
// (3.2e-5 a cell) that is 0.8% of releases; the bulk's cells at n x share
// >= 4 sigma are kept, and WithTailEdges covers what the threshold drops.
inline constexpr double kFitCellThreshold = 4.0;
FittedBins FitBinsFromNoisyCounts(const data::Column& grid_column,
                                  const Eigen::VectorXd& noisy_counts, double noise_std,
                                  int bins);

// Tail edges (issue 38, post-processing): cells under the noise threshold
// count as empty, so at small n x epsilon the fitted edges cover the bulk
// only (a 2,000-row lognormal at epsilon 0.1: edges 13,000 to 93,000 where
// the real 90% quantile is 104,000), and the outermost bins stretch to the
// declared bounds: a marginal method samples a bin uniformly, so [93000,
// 1e9] holding the top 11% put the sampled 90% quantile near 1e8. The
// fitted edges with geometric edges added beyond them, a factor
// kFitTailRatio (sqrt(10)) apart, up to the declared upper bound and down
// to the lower one (towards 0 no finer than the grid's smallest magnitude,
// M x 10^-kFitGridDecades), rounded to 2 significant digits (whole numbers
// for an integer column), strictly inside the bounds, sorted, distinct.
// A function of the fitted edges and the public bounds only. Empty `edges`
// stay empty (the column keeps the default bins).
inline constexpr double kFitTailRatio = 3.1622776601683795;
std::vector<double> WithTailEdges(const data::Column& column, const std::vector<double>& edges);

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_BIN_FIT_H_
