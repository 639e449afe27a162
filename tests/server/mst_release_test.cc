// The MST recipe as one release (issue 17; docs/privacy.md 2.11): the
// ledger charges the whole recipe's event, planned from the public schema
// and epsilon (1-way grid Gaussian, n - 1 exponential mechanisms, 2-way grid
// Gaussian); the artefact carries the declared shapes; bad requests are
// refused before admission (nothing charged).
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/privacy/event_codec.h"
#include "core/train/mst.h"
#include "proto/convert.h"
#include "server/plans.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

class MstReleaseTest : public ServerTest {
 protected:
  v1::BudgetReport Budget(const std::string& dataset_id) {
    v1::BudgetReport report;
    EXPECT_TRUE(GetBudget(dataset_id, &report).ok());
    return report;
  }

  static v1::ReleaseRequest MstRequest(const std::string& dataset_id, double epsilon,
                                       const std::string& key) {
    v1::ReleaseRequest request;
    request.set_dataset_id(dataset_id);
    request.set_idempotency_key(key);
    request.set_epsilon(epsilon);
    request.mutable_mst();
    return request;
  }
};

// Union-find root.
int Root(std::vector<int>& parent, int v) {
  while (parent[v] != v) v = parent[v] = parent[parent[v]];
  return v;
}

TEST_F(MstReleaseTest, ChargesTheRecipeAndReleasesTheDeclaredShapes) {
  for (v1::NeighbouringRelation relation : {v1::ADD_REMOVE, v1::REPLACE_ONE}) {
    SCOPED_TRACE(v1::NeighbouringRelation_Name(relation));
    v1::Dataset dataset;
    ASSERT_TRUE(CreateDataset(10.0, 1e-5, relation, &dataset).ok());
    ASSERT_TRUE(UploadDemoRows(dataset.id(), 300, 5).ok());
    const data::Schema schema = SchemaFromProto(dataset.schema()).value();
    const int n = schema.num_columns();
    const double epsilon = 0.7;
    v1::Release release;
    grpc::Status status = RequestRelease(MstRequest(dataset.id(), epsilon, "mst-1"), &release);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(release.kind(), v1::MST);
    ASSERT_TRUE(release.has_mst());
    const v1::MstArtefact& artefact = release.mst();

    // The charge is the composition of the planned events.
    const train::MstBudget budget = train::CalibrateMstBudget(n, epsilon, 1e-5).value();
    const privacy::PrivacyEvent expected = train::MstEvent(budget).value();
    const v1::BudgetReport report = Budget(dataset.id());
    ASSERT_EQ(report.events_size(), 1);
    EXPECT_EQ(report.events(0).description(), privacy::EncodeEvent(expected));
    EXPECT_EQ(artefact.one_way_noise_multiplier(), budget.one_way_noise_multiplier);
    EXPECT_EQ(artefact.selection_epsilon(), budget.selection_epsilon);
    EXPECT_EQ(artefact.two_way_noise_multiplier(), budget.two_way_noise_multiplier);
    EXPECT_LE(artefact.epsilon(), epsilon + 1e-9);
    EXPECT_GT(artefact.epsilon(), 0.99 * epsilon);
    EXPECT_EQ(artefact.delta(), 1e-5);
    EXPECT_EQ(artefact.relation(), relation);
    EXPECT_EQ(artefact.dataset_id(), dataset.id());
    EXPECT_EQ(artefact.release_id(), release.id());

    // Shapes: every column's 1-way table over its domain, a spanning tree,
    // one 2-way table per edge over the pair's domain.
    ASSERT_EQ(artefact.domain_sizes_size(), n);
    ASSERT_EQ(artefact.one_way_size(), n);
    for (int c = 0; c < n; ++c) {
      const v1::NoisyMarginalTable& t = artefact.one_way(c);
      ASSERT_EQ(t.clique_size(), 1);
      EXPECT_EQ(t.clique(0), c);
      EXPECT_EQ(t.counts_size(), artefact.domain_sizes(c));
      EXPECT_GT(t.noise_std(), 0.0);
    }
    ASSERT_EQ(artefact.edges_size(), n - 1);
    ASSERT_EQ(artefact.two_way_size(), n - 1);
    std::vector<int> parent(n);
    std::iota(parent.begin(), parent.end(), 0);
    for (int e = 0; e < n - 1; ++e) {
      const int i = artefact.edges(e).first(), j = artefact.edges(e).second();
      ASSERT_TRUE(i >= 0 && i < n && j >= 0 && j < n && i != j);
      const int ri = Root(parent, i), rj = Root(parent, j);
      EXPECT_NE(ri, rj) << "edge " << e << " closes a cycle";
      parent[ri] = rj;
      const v1::NoisyMarginalTable& t = artefact.two_way(e);
      ASSERT_EQ(t.clique_size(), 2);
      EXPECT_EQ(t.clique(0), i);
      EXPECT_EQ(t.clique(1), j);
      EXPECT_EQ(t.counts_size(), artefact.domain_sizes(i) * artefact.domain_sizes(j));
    }
    // A retry with the same key replays, at no further charge.
    v1::Release again;
    ASSERT_TRUE(RequestRelease(MstRequest(dataset.id(), epsilon, "mst-1"), &again).ok());
    EXPECT_EQ(again.mst().SerializeAsString(), artefact.SerializeAsString());
    EXPECT_EQ(Budget(dataset.id()).events_size(), 1);
  }
}

TEST_F(MstReleaseTest, BadRequestsAreRefusedBeforeAdmission) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 100, 2).ok());
  v1::Release release;
  {
    v1::ReleaseRequest request = MstRequest(dataset.id(), 1.0, "s");
    request.set_noise_multiplier(3.0);
    const grpc::Status status = RequestRelease(request, &release);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("epsilon"), std::string::npos);
  }
  for (double bad : {0.0, -1.0}) {
    const grpc::Status status =
        RequestRelease(MstRequest(dataset.id(), bad, "bad"), &release);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
  }
  {
    // More than the dataset's cap: refused by the ledger, nothing charged.
    const grpc::Status status = RequestRelease(MstRequest(dataset.id(), 20.0, "big"), &release);
    EXPECT_FALSE(status.ok());
  }
  EXPECT_EQ(Budget(dataset.id()).events_size(), 0);
}

// Issue 24, item 4: the plan's own work is bounded by the request before
// anything else. A 50,000-column schema spent 1.6 s in a pair loop before
// it was refused; its binary columns would even have passed the cell
// limits and left an O(n^2) tree selection to run after admission. Now it
// is refused by its column count, first.
TEST(MstPlanTest, WideSchemasAreRefusedByTheirColumnCountFirst) {
  for (const int columns : {kMaxMstColumns + 1, 50000}) {
    data::Schema::Builder builder;
    for (int c = 0; c < columns; ++c) {
      builder.AddCategorical(absl::StrCat("c", c), {"a", "b"});
    }
    const data::Schema schema = *builder.Build();
    v1::Dataset dataset;
    dataset.set_id("ds_wide");
    dataset.set_row_count(10);
    dataset.mutable_budget()->set_epsilon(10.0);
    dataset.mutable_budget()->set_delta(1e-5);
    v1::ReleaseRequest request;
    request.set_dataset_id(dataset.id());
    request.set_epsilon(1.0);
    request.mutable_mst();
    const absl::StatusOr<ReleasePlan> plan = PlanRelease(request, dataset, schema);
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << columns;
    EXPECT_NE(plan.status().message().find(absl::StrCat("at most ", kMaxMstColumns)),
              std::string::npos)
        << plan.status();
  }
}

// The cap itself is accepted: a 256-column binary schema plans (the cap is
// not off by one), with the recipe's event for all its columns.
TEST(MstPlanTest, ASchemaAtTheColumnCapIsPlanned) {
  data::Schema::Builder builder;
  for (int c = 0; c < kMaxMstColumns; ++c) {
    builder.AddCategorical(absl::StrCat("c", c), {"a", "b"});
  }
  const data::Schema schema = *builder.Build();
  v1::Dataset dataset;
  dataset.set_id("ds_at_cap");
  dataset.set_row_count(10);
  dataset.mutable_budget()->set_epsilon(10.0);
  dataset.mutable_budget()->set_delta(1e-5);
  v1::ReleaseRequest request;
  request.set_dataset_id(dataset.id());
  request.set_epsilon(1.0);
  request.mutable_mst();
  const absl::StatusOr<ReleasePlan> plan = PlanRelease(request, dataset, schema);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->mst.has_value());
  EXPECT_EQ(plan->mst->num_columns, kMaxMstColumns);
  EXPECT_TRUE(plan->event.has_value());
}

TEST_F(MstReleaseTest, AFailureAfterRowsAreReadKeepsTheChargeAndSaysNothingOfTheData) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 120, 4).ok());
  std::atomic<bool> armed{true};
  failpoint_ = [&armed](absl::string_view at) {
    return at == "release.after_rows_read" && armed.load()
               ? absl::InternalError("boom 12345 secret")
               : absl::OkStatus();
  };
  StopServer();
  StartServer();
  v1::Release release;
  const grpc::Status status = RequestRelease(MstRequest(dataset.id(), 1.0, "fail"), &release);
  EXPECT_NE(status.error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(status.error_message().find("secret"), std::string::npos);
  EXPECT_EQ(status.error_message().find("12345"), std::string::npos);
  // No refund: the charge stays.
  EXPECT_EQ(Budget(dataset.id()).events_size(), 1);
  EXPECT_GT(Budget(dataset.id()).epsilon_spent(), 0.99);
  armed = false;
  StopServer();  // before `armed` goes out of scope
}

}  // namespace
}  // namespace dpcurator::server::testing
