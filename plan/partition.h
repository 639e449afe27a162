#ifndef DPCURATOR_PLAN_PARTITION_H_
#define DPCURATOR_PLAN_PARTITION_H_

// Partitions by a public function of the row (issue 27; docs/privacy.md
// 3.7): the checks made before admission, the rows one part reads, and the
// two forms that use them: partitioned sessions (item 2) and the
// partitioned one-shot marginals release (item 4).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/events.h"
#include "core/release/encoded_rows.h"
#include "core/release/marginals.h"
#include "dpcurator/v1/dpcurator.pb.h"
#include "plan/footprint.h"
#include "plan/session_part.h"

namespace dpcurator::plan {

// Before admission (a refusal charges nothing): the partition is by a
// public function of one row over declared values, and every part is an
// add/remove mechanism of its own rows. Refused unless
//  - the dataset's relation is ADD_REMOVE (FAILED_PRECONDITION): session
//    steps under REPLACE_ONE are fixed-size samples of a public n, and a
//    part's size is not public (a replaced row may change parts);
//  - the schema declares a label column (FAILED_PRECONDITION): its declared
//    categories are the public label set; a schema without one has no
//    declared partition;
//  - `column` is that label column (INVALID_ARGUMENT): it is the one column
//    the schema declares as a partition key (a per-column flag for other
//    columns is not in the schema yet);
//  - every value is one of its declared categories, each named once
//    (INVALID_ARGUMENT); the values are never looked up in the rows.
// Returns each value's level (its index among the declared categories), in
// the order given. Messages name the column and values the caller sent,
// never anything from the rows.
absl::StatusOr<std::vector<int32_t>> ResolvePartition(const data::Schema& schema,
                                                      privacy::NeighbouringRelation relation,
                                                      const std::string& column,
                                                      const std::vector<std::string>& values);

// ResolvePartition's checks that hold under every relation (a label column
// is declared, `column` is it, every value declared and named once), in
// the same order and with the same messages: the partitioned one-shot
// release takes REPLACE_ONE datasets too (its event is derived for them).
absl::StatusOr<std::vector<int32_t>> ResolvePartitionValues(const data::Schema& schema,
                                                            const std::string& column,
                                                            const std::vector<std::string>& values);

// The partition's values as the request names them, or, when it names
// none and `column` is the declared label, every declared category of the
// label in declared order (public: from the schema alone).
std::vector<std::string> PartitionValues(const data::Schema& schema,
                                         const v1::Partition& partition);

// A partitioned open, planned before admission (nothing is charged by a
// refusal): ResolvePartition on the request's partition (empty values:
// every declared category of the label, in their declared order), then
// each part's session planned by PlanSession (plan/releases.h) on the
// request's params, exactly as an ordinary open of those params: every
// part is a Poisson session over its own rows with the same T, q and
// calibrated noise (an epsilon is calibrated for one part's T steps at
// the dataset's delta, which is the whole charge under add/remove:
// docs/privacy.md 3.7). kernel_witness parts must be unconditional (a part
// is one class) and come back with `parallel` set; an ordinary open with
// `parallel` stays refused by PlanSession.
struct PartitionedPlan {
  std::string column;
  std::vector<std::string> values;         // the declared categories, by level
  std::vector<SessionPart> parts;  // one per value, in level order
};
absl::StatusOr<PartitionedPlan> PlanPartitionedSessions(
    const v1::OpenPartitionedSessionsRequest& request, const v1::Dataset& dataset);

// The "marginals" release (ReleaseRequest.marginals; docs/privacy.md 2.11
// and 3.7), planned before admission from the public schema and the
// request only. Ordinary: one grid Gaussian over every clique's table of
// all rows. Partitioned (ReleaseRequest.partition): the same release over
// the rows of each part, K releases charged as ONE PartitionedEvent.
struct MarginalsReleasePlan {
  release::MarginalsKind::Params params;  // resolved cliques
  // s = noise std / L2 sensitivity under the dataset's relation, the same
  // for every part.
  double noise_multiplier = 0.0;
  bool partitioned = false;
  std::string column;               // partitioned only
  std::vector<std::string> values;  // the parts' values, by level
  std::vector<int32_t> levels;      // ascending
  std::optional<privacy::PrivacyEvent> event;  // release::MarginalsEvent
  // Bin fitting (MarginalsParams.fit_grid; docs/privacy.md 2.11.1): the
  // public domain the tables are over, release::FitGridSchema of the
  // dataset's schema for the cliques' columns; the release is run and its
  // artefact written over it. Unset: the dataset's schema.
  std::optional<data::Schema> fit_schema;
  // Issue 36 (item 4): K parts (1 for an ordinary release) of every
  // clique's table, each part a whole MarginalsArtefact with the schema;
  // and the rows read (raw, their codes, a part's copy).
  PlanFootprint footprint;
};

// Before admission (a refusal charges nothing): the partition (when set)
// by ResolvePartitionValues, the cliques by MarginalsKind::Resolve (empty:
// the 1-way marginal of every column but the label), rows uploaded, the
// privacy level (epsilon: calibrated for the charged event on a fresh state
// at the dataset's delta, so a K-part release gets the s of one part under
// ADD_REMOVE), and the grid noise the engine will draw. The event is
// release::MarginalsEvent (core/release/partitioned_marginals.h).
// With fit_grid: no partition, every clique one numeric column (empty: every
// numeric column), and the plan is made over release::FitGridSchema, the
// same function the release runs over, so a request the grid cannot serve
// is refused here, before admission.
absl::StatusOr<MarginalsReleasePlan> PlanMarginalsRelease(const v1::ReleaseRequest& request,
                                                          const v1::Dataset& dataset,
                                                          const data::Schema& schema);

// After admission: MarginalsKind::Run over all rows (ordinary) or
// release::RunMarginalsParts over the planned levels (partitioned), each run checked
// against the plan. A total function of the rows: an empty part gives its
// tables of zero counts plus noise, of the planned shape.
absl::StatusOr<v1::Release> ComputeMarginalsRelease(const MarginalsReleasePlan& plan,
                                                    const v1::Dataset& dataset,
                                                    const data::Schema& schema,
                                                    const data::Table& rows,
                                                    const std::string& release_id,
                                                    const std::string& idempotency_key,
                                                    double epsilon_alone,
                                                    privacy::NoiseSource* noise);

// The indices of part `level`'s rows: those whose label is `level`, in row
// order. A total function of the rows: an empty part is no index, and the
// step proceeds on it (its divisor is public, never the part's size). A
// step samples its batch among these indices and copies only the batch
// (ComputeSessionStep), not the part: a class of Fashion-MNIST is 37 MB.
std::vector<int64_t> RowIndicesOfPart(const release::EncodedRows& rows, int32_t level);

// The rows themselves (tests, and one-shot reads of a whole part).
release::EncodedRows RowsOfPart(const release::EncodedRows& rows, int32_t level);

}  // namespace dpcurator::plan

#endif  // DPCURATOR_PLAN_PARTITION_H_
