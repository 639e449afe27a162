#ifndef DPCURATOR_AUDIT_PLAN_FIXTURE_H_
#define DPCURATOR_AUDIT_PLAN_FIXTURE_H_

// The audit's seam onto the server's plan code (issue 37 items 1-2;
// docs/privacy.md 7.1): a tiny in-memory dataset held the way the server
// holds one (the v1::Dataset record CreateDataset and UploadRows leave in
// the store, its data::Schema, and the rows as LoadRows / LoadEncodedRows
// give them to the engines), and the charge of a plan's event as the
// ledger admits it. A case builds the v1 request, calls the plan function
// (plan/releases.h, plan/partition.h), charges plan.event with
// ChargePlanEvent, and runs the plan's compute function on each side; it
// never calibrates, picks a rate or divisor, or builds an event itself.
// The same pattern as tests/server (wire_test.cc ReleaseGuardTest,
// partition_session_test.cc), without gRPC.

#include <array>
#include <cstdint>
#include <string>

#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "audit/audit_case.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/privacy/events.h"
#include "core/privacy/relation.h"
#include "core/release/encoded_rows.h"
#include "core/release/mechanism_record.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::audit {

// The cap of an audit dataset's budget: the ledger's, never reached (a case
// charges one event on a fresh dataset).
inline constexpr double kAuditBudgetEpsilon = 1000.0;

// The dataset record as the store holds it after CreateDataset: id, schema
// and its fingerprint, budget (cap, delta), relation, and the uploaded row
// count. Not external.
v1::Dataset DatasetRecord(const data::Schema& schema, privacy::NeighbouringRelation relation,
                          double delta, int64_t row_count, const std::string& id = "ds_audit");

// An external dataset's record (docs/scale-out.md "External datasets";
// tests/server/external_dataset_test.cc): no rows stored (row_count 0),
// external set, and the declared public_row_bound (under REPLACE_ONE the
// relation's n, which a submitted statistic must carry).
v1::Dataset ExternalDatasetRecord(const data::Schema& schema,
                                  privacy::NeighbouringRelation relation, double delta,
                                  int64_t public_row_bound, const std::string& id = "ds_audit");

// One side of a game: the record, the schema, the raw rows (what mst, aim
// and marginals read) and the encoded rows (what embeddings and session
// steps read), all of the same rows.
struct PlanDataset {
  v1::Dataset dataset;
  data::Schema schema;
  data::Table table;
  release::EncodedRows rows;
};

// One row's cells in schema column order: numeric values as they are,
// categorical cells as their level (data::Table's representation).
using FixtureRow = std::vector<double>;
// The table of `rows` (each of the schema's width), in the given order.
data::Table TableOfRows(const data::Schema& schema, const std::vector<FixtureRow>& rows);
// `count` copies of `row` (a dataset of null rows, or a batch of them).
std::vector<FixtureRow> Repeated(const FixtureRow& row, int64_t count);

// A stored dataset of `table`'s rows under `schema` (row_count the table's).
PlanDataset InMemoryDataset(const data::Schema& schema, data::Table table,
                            privacy::NeighbouringRelation relation, double delta,
                            const std::string& id = "ds_audit");

// D0 and D1 of a game, each an InMemoryDataset of its own table (the same
// schema, relation and delta; D1's id is "<id>_1"). A plan is made on D0's
// record: under ADD_REMOVE the row count it sees is private and unused by
// the plan, under REPLACE_ONE both sides have the public n.
std::array<PlanDataset, 2> InMemoryPair(const data::Schema& schema, data::Table d0,
                                        data::Table d1, privacy::NeighbouringRelation relation,
                                        double delta, const std::string& id = "ds_audit");

// What the ledger charges for `event` as the first admission on a dataset
// of `relation` at `delta` (privacy::AccountantState, as the ledger's
// admission computes it): sets prepared->accounted_epsilon and ->delta.
// Refuses an event the relation does not define, as the ledger does.
absl::Status ChargePlanEvent(const privacy::PrivacyEvent& event,
                             privacy::NeighbouringRelation relation, double delta,
                             PreparedCase* prepared);

// The GDP mu of the Gaussians a record plans, sqrt(sum 1/s_i^2) (Dong, Roth,
// Su 2019, Cor. 3.3: mu-GDP composes as the root sum of squares): the bar a
// one-shot case's mu_emp is held to.
double GaussianMu(const release::GaussianMechanismRecord& planned);

// The released numbers of a v1::Release, flattened in a fixed order, for a
// distinguisher that reads the artefact as the analyst does:
//  * embedding: class_values, then class_totals;
//  * marginals: every table's counts, in table order;
//  * partitioned: each part's marginals, in part order.
// INVALID_ARGUMENT for any other artefact.
absl::StatusOr<Eigen::VectorXd> ReleasedValues(const v1::Release& release);

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_PLAN_FIXTURE_H_
