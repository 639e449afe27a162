#ifndef DPCURATOR_CORE_RELEASE_PARTITIONED_MARGINALS_H_
#define DPCURATOR_CORE_RELEASE_PARTITIONED_MARGINALS_H_

// The marginals release over a public partition (issue 27 item 4;
// docs/privacy.md 3.7): the ordinary MarginalsKind release over the rows of
// each part of a partition by the label's declared values, and the one
// event the K releases are charged as. The server (plan/partition.h) and
// the empirical audit (audit/partition_cases.h) both run this code.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/privacy/events.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/marginals.h"

namespace dpcurator::release {

// The release's coordinates: every clique's cells over the schema's
// discrete domain (the grid's dimension d).
absl::StatusOr<int64_t> MarginalsCells(const MarginalsKind::Params& resolved,
                                       const data::Schema& schema);

// The event of a marginals release at multiplier s (noise std / L2
// sensitivity under `relation`), the one place it is built. parts == 0: the
// ordinary release, OneShotEvent(MarginalsKind::Plan(resolved, s)), one grid
// Gaussian. parts = K >= 1, one such release per part:
//  * ADD_REMOVE: PartitionedAddRemove of K copies (a row is in one part);
//  * REPLACE_ONE: PartitionedReplaceOne with K copies of that event (a row
//    replaced inside its part: sensitivity sqrt(2k), multiplier s) and K
//    copies of the same noise as a row entering or leaving a part sees it
//    (sensitivity sqrt(k)): sigma = s (sqrt(2k) + sqrt(d) g) over
//    sqrt(k) + sqrt(d) g, the grid's rounding distance added to both
//    (core/privacy/discrete_noise.h GridGaussianNoise), rounded down; at
//    least s, below s sqrt 2, so the move term 2 alpha / (2 s_ar^2) is at
//    least the inside term and the event is about one part's alpha / (2 s^2).
absl::StatusOr<privacy::PrivacyEvent> MarginalsEvent(const MarginalsKind::Params& resolved,
                                                     int64_t cells, double noise_multiplier,
                                                     privacy::NeighbouringRelation relation,
                                                     int64_t parts);

// The rows whose label (column `label_index`, a level as a double) is
// `level`, in row order, with their pixels; zero rows when none is.
data::Table TableOfPart(const data::Table& rows, int label_index, int32_t level);

// MarginalsKind::Run over TableOfPart(rows, label_index, levels[k]) for
// every k, in order, each with its own draw of the noise source. Total: every
// part runs whatever it holds (an empty part is zero counts plus noise, of
// the planned shape); nothing branches on a row count.
absl::StatusOr<std::vector<MarginalsKind::Result>> RunMarginalsParts(
    const MarginalsKind::Params& resolved, const data::Schema& schema, const data::Table& rows,
    int label_index, const std::vector<int32_t>& levels, privacy::NeighbouringRelation relation,
    double noise_multiplier, privacy::NoiseSource* noise);

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_PARTITIONED_MARGINALS_H_
