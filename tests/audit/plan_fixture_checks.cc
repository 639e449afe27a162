// The audit's seam onto the server's plan code (audit/plan_fixture.h; issue
// 37): the in-memory dataset is held as the store holds one (its record's
// schema parses back to the same fingerprint, each side has its own id and
// row count, an external record has no rows and the declared public n), the
// charge refuses what the ledger refuses, and the released numbers are read
// from the artefact in the order the distinguisher projects them.

#include <array>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "audit/audit_case.h"
#include "audit/plan_fixture.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/privacy/events.h"
#include "gtest/gtest.h"
#include "proto/convert.h"

namespace dpcurator::audit {
namespace {

using privacy::NeighbouringRelation;

data::Schema TwoColumnSchema() {
  data::Schema::Builder builder;
  builder.AddNumeric("x", 0.0, 1.0).AddCategorical("y", {"a", "b"}).SetLabel("y");
  return builder.Build().value();
}

data::Table Rows(int n) {
  data::Table table;
  table.cells = Eigen::MatrixXd::Zero(n, 2);
  return table;
}

TEST(PlanFixture, ThePairIsHeldAsTheStoreHoldsIt) {
  const data::Schema schema = TwoColumnSchema();
  const std::array<PlanDataset, 2> pair =
      InMemoryPair(schema, Rows(3), Rows(4), NeighbouringRelation::kAddRemove, 1e-5);
  for (const PlanDataset& side : pair) {
    EXPECT_EQ(side.dataset.relation(), v1::ADD_REMOVE);
    EXPECT_DOUBLE_EQ(side.dataset.budget().delta(), 1e-5);
    EXPECT_FALSE(side.dataset.external());
    EXPECT_EQ(side.dataset.row_count(), side.table.num_rows());
    EXPECT_EQ(side.rows.num_rows(), side.table.num_rows());
    const absl::StatusOr<data::Schema> parsed = SchemaFromProto(side.dataset.schema());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->FingerprintHex(), side.dataset.schema_fingerprint());
    EXPECT_EQ(side.dataset.schema_fingerprint(), schema.FingerprintHex());
  }
  EXPECT_EQ(pair[0].dataset.row_count(), 3);
  EXPECT_EQ(pair[1].dataset.row_count(), 4);
  EXPECT_NE(pair[0].dataset.id(), pair[1].dataset.id());

  const v1::Dataset external =
      ExternalDatasetRecord(schema, NeighbouringRelation::kReplaceOne, 1e-5, 3);
  EXPECT_TRUE(external.external());
  EXPECT_EQ(external.relation(), v1::REPLACE_ONE);
  EXPECT_EQ(external.row_count(), 0);
  EXPECT_EQ(external.public_row_bound(), 3);
}

// The ledger refuses an event its dataset's relation does not define; so
// does the audit's charge (a case cannot report a charge the server could
// not make).
TEST(PlanFixture, TheChargeRefusesWhatTheLedgerRefuses) {
  const privacy::PrivacyEvent part = privacy::PrivacyEvent::GridGaussian(2.0).value();
  const privacy::PrivacyEvent add_remove_only =
      privacy::PrivacyEvent::PartitionedAddRemove({part, part}).value();
  PreparedCase prepared;
  EXPECT_FALSE(
      ChargePlanEvent(add_remove_only, NeighbouringRelation::kReplaceOne, 1e-5, &prepared).ok());
  ASSERT_TRUE(
      ChargePlanEvent(add_remove_only, NeighbouringRelation::kAddRemove, 1e-5, &prepared).ok());
  EXPECT_GT(prepared.accounted_epsilon, 0.0);
  EXPECT_DOUBLE_EQ(prepared.delta, 1e-5);
  // Parallel composition of two equal parts under ADD_REMOVE costs one part.
  PreparedCase one;
  ASSERT_TRUE(ChargePlanEvent(part, NeighbouringRelation::kAddRemove, 1e-5, &one).ok());
  EXPECT_NEAR(prepared.accounted_epsilon, one.accounted_epsilon, 1e-9);
  EXPECT_DOUBLE_EQ(GaussianMu(release::GaussianMechanismRecord{{2.0, 2.0}}),
                   std::sqrt(2.0) / 2.0);
}

TEST(PlanFixture, ReleasedValuesReadTheArtefactInOrder) {
  v1::Release embedding;
  for (const double v : {1.0, 2.0, 3.0, 4.0}) embedding.mutable_embedding()->add_class_values(v);
  for (const double v : {5.0, 6.0}) embedding.mutable_embedding()->add_class_totals(v);
  const absl::StatusOr<Eigen::VectorXd> e = ReleasedValues(embedding);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(std::vector<double>(e->begin(), e->end()),
            (std::vector<double>{1, 2, 3, 4, 5, 6}));

  v1::Release partitioned;
  for (int part = 0; part < 2; ++part) {
    v1::MarginalsArtefact& artefact = *partitioned.mutable_partitioned()->add_marginals();
    for (int table = 0; table < 2; ++table) {
      v1::NoisyMarginalTable& t = *artefact.add_tables();
      t.add_counts(10 * part + 2 * table);
      t.add_counts(10 * part + 2 * table + 1);
    }
  }
  const absl::StatusOr<Eigen::VectorXd> p = ReleasedValues(partitioned);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(std::vector<double>(p->begin(), p->end()),
            (std::vector<double>{0, 1, 2, 3, 10, 11, 12, 13}));

  v1::Release mst;
  mst.mutable_mst();
  EXPECT_EQ(ReleasedValues(mst).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dpcurator::audit
