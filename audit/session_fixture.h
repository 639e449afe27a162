#ifndef DPCURATOR_AUDIT_SESSION_FIXTURE_H_
#define DPCURATOR_AUDIT_SESSION_FIXTURE_H_

// A tiny in-memory dataset held the way the server holds one (issue 37
// item 2): the v1::Dataset record the plan functions read (id, relation,
// schema, row count, delta; never external) and the rows encoded as
// LoadEncodedRows encodes them (release::EncodeRows of a data::Table), so
// the session cases call plan::PlanSession and plan::ComputeSessionStep
// exactly as server/service.cc does. The pattern of
// tests/server/partition_session_test.cc. (Helper C1's audit/plan_fixture
// may take this over when the two are merged.)

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/data/schema.h"
#include "core/privacy/relation.h"
#include "core/release/encoded_rows.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::audit {

// One row's cells in schema column order: numeric values as they are,
// categorical cells as their level (data::Table's representation).
using FixtureRow = std::vector<double>;

struct InMemoryDataset {
  v1::Dataset dataset;
  release::EncodedRows rows;
};

// `rows` in the given order under `schema`; the record's id is `id` (the
// same on both sides of a game, so no answer differs by it), its budget's
// delta `delta` and its epsilon cap ample (the audit charges through its
// own AccountantState, never a stored ledger).
InMemoryDataset MakeInMemoryDataset(const std::string& id, const data::Schema& schema,
                                    privacy::NeighbouringRelation relation,
                                    const std::vector<FixtureRow>& rows, double delta);

// `count` copies of `row` (a dataset of null rows, or a batch of them).
std::vector<FixtureRow> Repeated(const FixtureRow& row, int64_t count);

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_SESSION_FIXTURE_H_
