#include "core/release/partitioned_marginals.h"

#include <cmath>
#include <cstddef>
#include <utility>

#include "Eigen/Core"
#include "core/data/discretize.h"
#include "core/privacy/discrete_noise.h"
#include "core/release/mechanism_record.h"
#include "core/util/status_macros.h"

namespace dpcurator::release {

absl::StatusOr<int64_t> MarginalsCells(const MarginalsKind::Params& resolved,
                                       const data::Schema& schema) {
  DPC_ASSIGN_OR_RETURN(const data::Discretizer domain, data::Discretizer::Create(schema));
  int64_t cells = 0;
  for (const std::vector<int>& clique : resolved.cliques) {
    int64_t clique_cells = 1;
    for (int c : clique) clique_cells *= domain.domain_size(c);
    cells += clique_cells;
  }
  return cells;
}

absl::StatusOr<privacy::PrivacyEvent> MarginalsEvent(const MarginalsKind::Params& resolved,
                                                     int64_t cells, double noise_multiplier,
                                                     privacy::NeighbouringRelation relation,
                                                     int64_t parts) {
  DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent part,
                       OneShotEvent(MarginalsKind::Plan(resolved, noise_multiplier)));
  if (parts == 0) return part;
  const auto k = static_cast<size_t>(parts);
  if (relation == privacy::NeighbouringRelation::kAddRemove) {
    return privacy::PrivacyEvent::PartitionedAddRemove(std::vector<privacy::PrivacyEvent>(k, part));
  }
  const double inside = MarginalsKind::L2Sensitivity(resolved, relation);
  const double moved =
      MarginalsKind::L2Sensitivity(resolved, privacy::NeighbouringRelation::kAddRemove);
  DPC_ASSIGN_OR_RETURN(const privacy::GridNoise grid,
                       privacy::GridGaussianNoise(noise_multiplier, inside, cells));
  const double rounding = std::sqrt(static_cast<double>(cells)) * grid.grid;
  // Rounded down: never more noise claimed than drawn.
  const double moved_multiplier =
      std::nextafter(noise_multiplier * (inside + rounding) / (moved + rounding), 0.0);
  DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent entered,
                       OneShotEvent(MarginalsKind::Plan(resolved, moved_multiplier)));
  return privacy::PrivacyEvent::PartitionedReplaceOne(
      std::vector<privacy::PrivacyEvent>(k, entered), std::vector<privacy::PrivacyEvent>(k, part));
}

data::Table TableOfPart(const data::Table& rows, int label_index, int32_t level) {
  std::vector<Eigen::Index> indices;
  for (Eigen::Index i = 0; i < rows.cells.rows(); ++i) {
    if (std::lround(rows.cells(i, label_index)) == level) indices.push_back(i);
  }
  data::Table part;
  part.cells.resize(static_cast<Eigen::Index>(indices.size()), rows.cells.cols());
  const size_t per_row =
      rows.num_rows() > 0 ? rows.pixels.size() / static_cast<size_t>(rows.num_rows()) : 0;
  part.pixels.reserve(indices.size() * per_row);
  for (size_t k = 0; k < indices.size(); ++k) {
    part.cells.row(static_cast<Eigen::Index>(k)) = rows.cells.row(indices[k]);
    const size_t first = static_cast<size_t>(indices[k]) * per_row;
    part.pixels.insert(part.pixels.end(),
                       rows.pixels.begin() + static_cast<std::ptrdiff_t>(first),
                       rows.pixels.begin() + static_cast<std::ptrdiff_t>(first + per_row));
  }
  return part;
}

absl::StatusOr<std::vector<MarginalsKind::Result>> RunMarginalsParts(
    const MarginalsKind::Params& resolved, const data::Schema& schema, const data::Table& rows,
    int label_index, const std::vector<int32_t>& levels, privacy::NeighbouringRelation relation,
    double noise_multiplier, privacy::NoiseSource* noise) {
  std::vector<MarginalsKind::Result> results;
  results.reserve(levels.size());
  for (const int32_t level : levels) {
    DPC_ASSIGN_OR_RETURN(MarginalsKind::Result result,
                         MarginalsKind::Run(resolved, schema, TableOfPart(rows, label_index, level),
                                            relation, noise_multiplier, noise));
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace dpcurator::release
