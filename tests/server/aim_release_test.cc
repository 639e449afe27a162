// The AIM recipe as one release (issue 26 item 2; docs/privacy.md 2.12): the
// ledger charges ONE zcdp(rho) event for the whole adaptive run, planned
// from the public schema and epsilon; the artefact carries the 1-way tables,
// the rounds in order with their parameters, and stops at rho; bad requests
// (unknown workload column, a model-size limit below the 1-way marginals,
// epsilon too small for the 1-way marginals, too many columns) are refused
// before admission with nothing charged.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/privacy/event_codec.h"
#include "core/train/aim.h"
#include "proto/convert.h"
#include "server/plans.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

class AimReleaseTest : public ServerTest {
 protected:
  v1::BudgetReport Budget(const std::string& dataset_id) {
    v1::BudgetReport report;
    EXPECT_TRUE(GetBudget(dataset_id, &report).ok());
    return report;
  }

  static v1::ReleaseRequest AimRequest(const std::string& dataset_id, double epsilon,
                                       const std::string& key) {
    v1::ReleaseRequest request;
    request.set_dataset_id(dataset_id);
    request.set_idempotency_key(key);
    request.set_epsilon(epsilon);
    request.mutable_aim();
    return request;
  }
};

TEST_F(AimReleaseTest, ChargesOneZcdpEventAndReleasesTheRounds) {
  for (v1::NeighbouringRelation relation : {v1::ADD_REMOVE, v1::REPLACE_ONE}) {
    SCOPED_TRACE(v1::NeighbouringRelation_Name(relation));
    v1::Dataset dataset;
    ASSERT_TRUE(CreateDataset(10.0, 1e-5, relation, &dataset).ok());
    ASSERT_TRUE(UploadDemoRows(dataset.id(), 300, 5).ok());
    const data::Schema schema = SchemaFromProto(dataset.schema()).value();
    const int n = schema.num_columns();
    const double epsilon = 0.7;
    v1::ReleaseRequest request = AimRequest(dataset.id(), epsilon, "aim-1");
    request.mutable_aim()->set_rounds(2 * n);  // a short run
    v1::Release release;
    grpc::Status status = RequestRelease(request, &release);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(release.kind(), v1::AIM);
    ASSERT_TRUE(release.has_aim());
    const v1::AimArtefact& artefact = release.aim();

    // One event, zcdp(rho), rho calibrated to epsilon at the dataset's delta.
    const train::AimBudget budget = train::CalibrateAimBudget(n, 2 * n, epsilon, 1e-5).value();
    const v1::BudgetReport report = Budget(dataset.id());
    ASSERT_EQ(report.events_size(), 1);
    EXPECT_EQ(report.events(0).description(),
              privacy::EncodeEvent(train::AimEvent(budget).value()));
    EXPECT_EQ(report.events(0).description().rfind("zcdp(", 0), 0u);
    EXPECT_EQ(artefact.rho(), budget.rho);
    EXPECT_LE(artefact.epsilon(), epsilon + 1e-9);
    EXPECT_GT(artefact.epsilon(), 0.99 * epsilon);
    EXPECT_EQ(artefact.relation(), relation);
    EXPECT_EQ(artefact.planned_rounds(), 2 * n);
    EXPECT_EQ(artefact.max_model_cells(), train::kDefaultAimMaxModelCells);
    // The default workload: all pairs + the triples with the label (churn).
    EXPECT_EQ(artefact.workload_size(), n * (n - 1) / 2 + (n - 1) * (n - 2) / 2);

    ASSERT_EQ(artefact.domain_sizes_size(), n);
    ASSERT_EQ(artefact.one_way_size(), n);
    for (int c = 0; c < n; ++c) {
      EXPECT_EQ(artefact.one_way(c).clique(0), c);
      EXPECT_EQ(artefact.one_way(c).counts_size(), artefact.domain_sizes(c));
      EXPECT_GT(artefact.one_way(c).noise_std(), 0.0);
    }
    // Rounds: each a measured clique of its domain; the schedule's sum grows
    // and ends at rho, and the real cost of every parameter adds up to at
    // most rho.
    ASSERT_GE(artefact.rounds_size(), 1);
    long double cost = 1.0L / (2.0L * artefact.one_way_noise_multiplier() *
                               artefact.one_way_noise_multiplier());
    double previous = 0.0;
    for (const v1::AimRoundRecord& round : artefact.rounds()) {
      const v1::NoisyMarginalTable& t = round.measurement();
      ASSERT_GE(t.clique_size(), 1);
      int64_t cells = 1;
      for (int c : t.clique()) cells *= artefact.domain_sizes(c);
      EXPECT_EQ(t.counts_size(), cells);
      EXPECT_GT(t.noise_std(), 0.0);
      EXPECT_GT(round.rho_used(), previous);
      previous = round.rho_used();
      const long double s = round.noise_multiplier();
      const long double e = round.selection_epsilon();
      cost += 1.0L / (2.0L * s * s) + e * e / 8.0L;
    }
    EXPECT_LE(previous, artefact.rho());
    EXPECT_LE(cost, static_cast<long double>(artefact.rho()));
    EXPECT_GE(cost, static_cast<long double>(artefact.rho()) * (1 - 1e-9L));

    // A retry with the same key replays, at no further charge.
    v1::Release again;
    ASSERT_TRUE(RequestRelease(request, &again).ok());
    EXPECT_EQ(again.aim().SerializeAsString(), artefact.SerializeAsString());
    EXPECT_EQ(Budget(dataset.id()).events_size(), 1);
  }
}

TEST_F(AimReleaseTest, ANamedWorkloadIsMeasuredFromItsClosure) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 200, 3).ok());
  v1::ReleaseRequest request = AimRequest(dataset.id(), 1.0, "named");
  v1::AimClique& clique = *request.mutable_aim()->add_workload();
  clique.add_columns("region");
  clique.add_columns("plan");
  v1::Release release;
  const grpc::Status status = RequestRelease(request, &release);
  ASSERT_TRUE(status.ok()) << status.error_message();
  // region is column 0, plan column 4: every round measures a subset.
  for (const v1::AimRoundRecord& round : release.aim().rounds()) {
    for (int c : round.measurement().clique()) {
      if (round.measurement().clique_size() > 1) {
        EXPECT_TRUE(c == 0 || c == 4) << c;
      }
    }
  }
  ASSERT_EQ(release.aim().workload_size(), 1);
  EXPECT_EQ(release.aim().workload(0).columns(1), "plan");
}

TEST_F(AimReleaseTest, BadRequestsAreRefusedBeforeAdmission) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 100, 2).ok());
  v1::Release release;
  auto refused = [&](const v1::ReleaseRequest& request, const std::string& says) {
    const grpc::Status status = RequestRelease(request, &release);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
  };
  {
    v1::ReleaseRequest request = AimRequest(dataset.id(), 1.0, "unknown");
    v1::AimClique& clique = *request.mutable_aim()->add_workload();
    clique.add_columns("region");
    clique.add_columns("no_such_column");
    refused(request, "unknown column 'no_such_column'");
  }
  {
    // The demo's 1-way marginals have more than 20 cells.
    v1::ReleaseRequest request = AimRequest(dataset.id(), 1.0, "small");
    request.mutable_aim()->set_max_model_cells(20);
    refused(request, "cannot hold the 1-way marginals");
  }
  // Epsilon too small to measure the 1-way marginals usefully.
  refused(AimRequest(dataset.id(), 1e-4, "tiny"), "1-way marginals with noise");
  {
    v1::ReleaseRequest request = AimRequest(dataset.id(), 1.0, "rounds");
    request.mutable_aim()->set_rounds(3);  // fewer rounds than columns
    refused(request, "rounds");
  }
  {
    v1::ReleaseRequest request = AimRequest(dataset.id(), 1.0, "s");
    request.set_noise_multiplier(3.0);
    refused(request, "epsilon");
  }
  refused(AimRequest(dataset.id(), -1.0, "neg"), "Epsilon");
  {
    // More than the dataset's cap: refused by the ledger, nothing charged.
    const grpc::Status status = RequestRelease(AimRequest(dataset.id(), 20.0, "big"), &release);
    EXPECT_FALSE(status.ok());
  }
  EXPECT_EQ(Budget(dataset.id()).events_size(), 0);
  EXPECT_EQ(Budget(dataset.id()).epsilon_spent(), 0.0);
}

// Issue 41: past kMaxAimColumns the plan admits the recipe's wide form up
// to kMaxAimWideColumns, and refuses beyond by the column count first.
TEST(AimPlanTest, WideSchemasAreRefusedByTheirColumnCountFirst) {
  auto binary_schema = [](int columns) {
    data::Schema::Builder builder;
    for (int c = 0; c < columns; ++c) builder.AddCategorical(absl::StrCat("c", c), {"a", "b"});
    return *builder.Build();
  };
  auto request_for = [](const v1::Dataset& dataset) {
    v1::ReleaseRequest request;
    request.set_dataset_id(dataset.id());
    request.set_epsilon(1.0);
    request.mutable_aim();
    return request;
  };
  v1::Dataset dataset;
  dataset.set_id("ds_wide");
  dataset.set_row_count(10);
  dataset.mutable_budget()->set_epsilon(10.0);
  dataset.mutable_budget()->set_delta(1e-5);
  for (const int columns : {train::kMaxAimWideColumns + 1, 50000}) {
    const absl::StatusOr<ReleasePlan> plan =
        PlanRelease(request_for(dataset), dataset, binary_schema(columns));
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << columns;
    EXPECT_NE(plan.status().message().find(absl::StrCat(train::kMaxAimWideColumns, " columns")),
              std::string::npos)
        << plan.status();
  }
  // At the narrow cap: the paper's T = 16 d and the listed workload.
  {
    const absl::StatusOr<ReleasePlan> plan =
        PlanRelease(request_for(dataset), dataset, binary_schema(train::kMaxAimColumns));
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(plan->aim.has_value());
    EXPECT_EQ(plan->kind_name(), "aim");
    EXPECT_EQ(plan->aim->budget.rounds, 16 * train::kMaxAimColumns);
    EXPECT_EQ(plan->resolved_request.aim().workload_size(),
              train::kMaxAimColumns * (train::kMaxAimColumns - 1) / 2);
  }
  // The binary benchmark's width: planned in the wide form, T = 2 d, every
  // pair a candidate, the default workload implicit in the resolved request,
  // and the footprint counting the exact tables and every pair's model
  // answer (the forest model itself is small) while staying under 1 GiB.
  const int wide = 1071;
  const absl::StatusOr<ReleasePlan> plan =
      PlanRelease(request_for(dataset), dataset, binary_schema(wide));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->aim.has_value());
  EXPECT_EQ(plan->aim->budget.rounds, 2 * wide);
  EXPECT_EQ(plan->aim->candidates.size(), static_cast<size_t>(wide + wide * (wide - 1) / 2));
  EXPECT_EQ(plan->resolved_request.aim().workload_size(), 0);
  EXPECT_EQ(plan->resolved_request.aim().rounds(), 2 * wide);
  const int64_t tables = int64_t{wide} * 2 + int64_t{wide} * (wide - 1) / 2 * 4;
  EXPECT_GE(plan->footprint.public_bytes, 8 * (tables + train::kMaxAimCandidateCells));
  EXPECT_LT(plan->footprint.public_bytes, int64_t{1} << 30);
  // A triple in a wide workload is refused before admission.
  v1::ReleaseRequest triple = request_for(dataset);
  v1::AimClique& clique = *triple.mutable_aim()->add_workload();
  for (const char* name : {"c0", "c1", "c2"}) clique.add_columns(name);
  const absl::StatusOr<ReleasePlan> refused = PlanRelease(triple, dataset, binary_schema(wide));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("1 to 2"), std::string::npos) << refused.status();
}

TEST_F(AimReleaseTest, AFailureAfterRowsAreReadKeepsTheChargeAndSaysNothingOfTheData) {
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
  const grpc::Status status = RequestRelease(AimRequest(dataset.id(), 1.0, "fail"), &release);
  EXPECT_NE(status.error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(status.error_message().find("secret"), std::string::npos);
  EXPECT_EQ(Budget(dataset.id()).events_size(), 1);
  armed = false;
  StopServer();
}

}  // namespace
}  // namespace dpcurator::server::testing
