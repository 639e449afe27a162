#ifndef DPCURATOR_CORE_RELEASE_MARGINALS_H_
#define DPCURATOR_CORE_RELEASE_MARGINALS_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "absl/container/flat_hash_map.h"
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

// Where a recipe that reads rows only through count tables (mst, aim) gets
// its exact tables (issue 41): counted from a stored dataset's discretised
// rows, or the tables an external dataset's one pass over the curator's
// cluster computed (docs/scale-out.md). The recipe is the same code over
// either source, so a release from the same tables and noise draws is the
// same artefact (docs/privacy.md 2.13).
class ExactTableSource {
 public:
  virtual ~ExactTableSource() = default;
  // The exact counts of `clique` over the domain shape `shape` (the layout
  // of NoisyMarginal). INTERNAL when the source does not hold the clique: the
  // plan fixed every clique a recipe may ask for before admission, so this
  // is a caller's bug (the message names the clique, never a value).
  virtual absl::StatusOr<Eigen::VectorXd> Table(const std::vector<int>& clique,
                                                const std::vector<int>& shape) const = 0;
  // The discretised rows when the source has them (the fast paths that
  // count straight from code columns: MST's pair scores), else null.
  virtual const Eigen::MatrixXi* codes() const { return nullptr; }
};

// A stored dataset's rows (data::Discretizer::Encode): ExactMarginal of
// each clique asked for.
class RowsTableSource final : public ExactTableSource {
 public:
  explicit RowsTableSource(const Eigen::MatrixXi* codes) : codes_(codes) {}
  absl::StatusOr<Eigen::VectorXd> Table(const std::vector<int>& clique,
                                        const std::vector<int>& shape) const override;
  const Eigen::MatrixXi* codes() const override { return codes_; }

 private:
  const Eigen::MatrixXi* codes_;
};

// Tables computed elsewhere: `counts` is every clique's table concatenated
// in the order of `cliques` (MarginalsKind::Count's layout, the scale-out
// partial's). Create checks the length against the public shapes only.
class ListedTableSource final : public ExactTableSource {
 public:
  // INVALID_ARGUMENT when counts.size() is not the sum of the cliques' cells
  // (names both numbers, no entry).
  static absl::StatusOr<ListedTableSource> Create(std::vector<std::vector<int>> cliques,
                                                  const std::vector<int>& domain_sizes,
                                                  Eigen::VectorXd counts);
  absl::StatusOr<Eigen::VectorXd> Table(const std::vector<int>& clique,
                                        const std::vector<int>& shape) const override;

 private:
  ListedTableSource() = default;
  absl::flat_hash_map<std::vector<int>, size_t> index_;  // clique -> its position
  std::vector<int64_t> offsets_;  // one more than the cliques
  Eigen::VectorXd counts_;
};

// Cells of all the cliques' tables over `domain_sizes` (their product per
// clique, summed), saturating at INT64_MAX.
int64_t TotalCells(const std::vector<std::vector<int>>& cliques,
                   const std::vector<int>& domain_sizes);

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
  // The same statistic from a table source (no limits checked: the
  // recipes' plans bound their cliques), shapes from `domain`.
  static absl::StatusOr<ExactCounts> CountFrom(const Params& resolved,
                                               const data::Discretizer& domain,
                                               const ExactTableSource& tables);

  // Run's noise step alone: one grid discrete Gaussian draw of multiplier s
  // over the exact counts (Count's or CountFrom's), split into the cliques'
  // tables. Run is Count, then this.
  static absl::StatusOr<Result> Noise(const Params& resolved, ExactCounts exact,
                                      privacy::NeighbouringRelation relation,
                                      double noise_multiplier, privacy::NoiseSource* noise);

  // The engine: discretises the rows, counts, adds one grid discrete
  // Gaussian draw of multiplier s over all cells.
  static absl::StatusOr<Result> Run(const Params& resolved, const data::Schema& schema,
                                    const data::Table& rows,
                                    privacy::NeighbouringRelation relation,
                                    double noise_multiplier, privacy::NoiseSource* noise);
};

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_MARGINALS_H_
