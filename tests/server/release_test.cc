// End-to-end release path over gRPC: admission and refusal, idempotent
// retries, restart durability, relation-dependent visibility and artefacts,
// and the refund of a release whose computation failed.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>

#include "core/data/demo.h"
#include "server/ledger.h"
#include "core/privacy/calibration.h"
#include "core/privacy/conversion.h"
#include "core/privacy/events.h"
#include "absl/strings/str_format.h"
#include "proto/convert.h"
#include "server/store.h"
#include "core/privacy/noise_source.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;


class ReleaseTest : public ServerTest {};

// Cap 1.5 at delta 1e-5. Releases draw discrete Gaussian noise and are
// charged by the RDP conversion (docs/privacy.md 3.2), which composes the
// curves, not the epsilons: two releases of epsilon 1 (s = 4.04539 each) cost
// 1.45999 together and fit under 1.5, which linear composition would refuse.
// So the refusal after the first release is for epsilon 1.2 (composed
// 1.61241), and a third epsilon-1 release is refused after the second.
TEST_F(ReleaseTest, ReleaseOverCapIsRefusedWithSpentRequestedCap) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(1.7, kDelta, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 500, 7).ok());

  v1::Release first;
  grpc::Status status = RequestRelease(RffRequest(dataset.id(), 1.0, "budget-key-1"), &first);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(first.replayed());
  // One grid discrete Gaussian calibrated to epsilon 1 by its own privacy
  // profile (docs/privacy.md 4.6), the bound the ledger reports for a
  // dataset whose history is that one release.
  EXPECT_NEAR(first.epsilon_spent_total(), 1.0, 1e-6);
  EXPECT_NEAR(first.epsilon_remaining(), 0.7, 1e-6);
  EXPECT_LE(first.embedding().epsilon(), 1.0 + 1e-12);
  // 3.7442823 at (1, 1e-5), solved independently (Python, math.erfc):
  // between the continuous Gaussian's 3.73063 and the RDP route's 4.04539.
  const double s1 = first.embedding().noise_multiplier();
  EXPECT_NEAR(s1, 3.7442823, 1e-6);

  v1::BudgetReport before;
  ASSERT_TRUE(GetBudget(dataset.id(), &before).ok());
  EXPECT_NEAR(before.epsilon_spent(), 1.0, 1e-6);
  EXPECT_GT(before.epsilon_rdp(), before.epsilon_spent() + 0.05);  // the profile beats RDP
  ASSERT_TRUE(before.has_epsilon_discrete_exact());
  EXPECT_EQ(before.epsilon_discrete_exact(), before.epsilon_spent());
  EXPECT_DOUBLE_EQ(before.budget().epsilon(), 1.7);
  EXPECT_DOUBLE_EQ(before.budget().delta(), kDelta);
  ASSERT_EQ(before.events_size(), 1);
  EXPECT_EQ(before.events(0).release_id(), first.id());
  EXPECT_THAT(before.events(0).description(), HasSubstr("grid_gaussian("));

  // Two releases compose by RDP only (the profile covers one release).
  auto rdp_of_two = [&](double s2) {
    auto a = privacy::PrivacyEvent::GridGaussian(s1);
    auto b = privacy::PrivacyEvent::GridGaussian(s2);
    auto both = privacy::PrivacyEvent::Compose({*a, *b});
    return privacy::ComputeEpsilonReport(*both, kDelta)->epsilon_rdp;
  };
  v1::Release refused;
  status = RequestRelease(RffRequest(dataset.id(), 1.2, "budget-key-2"), &refused);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("spent epsilon 1,"));
  EXPECT_THAT(status.error_message(), HasSubstr("requested 1.2 "));
  auto s_for_1_2 = privacy::CalibrateGridGaussianNoiseMultiplier(1, 1.2, kDelta);
  ASSERT_TRUE(s_for_1_2.ok());
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrFormat("%.6g composed", rdp_of_two(*s_for_1_2))));
  EXPECT_THAT(status.error_message(), HasSubstr("cap 1.7 "));

  v1::BudgetReport after;
  ASSERT_TRUE(GetBudget(dataset.id(), &after).ok());
  ASSERT_EQ(after.events_size(), 1);
  EXPECT_EQ(after.events(0).id(), before.events(0).id());
  EXPECT_DOUBLE_EQ(after.epsilon_spent(), before.epsilon_spent());

  // A second epsilon-1 release fits: RDP composition, 1.58966 < 1.7.
  v1::Release second;
  status = RequestRelease(RffRequest(dataset.id(), 1.0, "budget-key-3"), &second);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_NEAR(second.epsilon_spent_total(), 1.58966, 1e-4);
  EXPECT_NEAR(second.epsilon_spent_total(), rdp_of_two(s1), 1e-9);
  v1::BudgetReport two;
  ASSERT_TRUE(GetBudget(dataset.id(), &two).ok());
  EXPECT_NEAR(two.epsilon_spent(), 1.58966, 1e-4);
  EXPECT_FALSE(two.has_epsilon_exact());
  EXPECT_FALSE(two.has_epsilon_discrete_exact());  // two releases: RDP only
  EXPECT_EQ(two.events_size(), 2);

  // A third does not.
  status = RequestRelease(RffRequest(dataset.id(), 1.0, "budget-key-4"), &refused);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("spent epsilon 1.58966"));
  EXPECT_THAT(status.error_message(), HasSubstr("requested 1 "));
  EXPECT_THAT(status.error_message(), HasSubstr("cap 1.7 "));
  v1::BudgetReport three;
  ASSERT_TRUE(GetBudget(dataset.id(), &three).ok());
  EXPECT_EQ(three.events_size(), 2);
  EXPECT_DOUBLE_EQ(three.epsilon_spent(), two.epsilon_spent());

  // The refused requests left no release behind.
  auto analyst = Analyst();
  auto context = analyst.NewContext();
  v1::ListReleasesRequest list_request;
  list_request.set_dataset_id(dataset.id());
  v1::ListReleasesResponse list;
  ASSERT_TRUE(analyst.releases().ListReleases(context.get(), list_request, &list).ok());
  ASSERT_EQ(list.releases_size(), 2);
  for (const auto& release : list.releases()) {
    EXPECT_EQ(release.status(), "DONE");
    EXPECT_TRUE(release.id() == first.id() || release.id() == second.id()) << release.id();
  }
}

TEST_F(ReleaseTest, SameIdempotencyKeyReplaysWithoutCharge) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(3.0, kDelta, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 500, 11).ok());
  v1::ReleaseRequest request = RffRequest(dataset.id(), 1.0, "idem-key");
  // Leave the seed to the server: the replay must still be byte-identical.
  request.mutable_rff_embedding()->clear_seed();

  v1::Release first;
  grpc::Status status = RequestRelease(request, &first);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(first.replayed());
  EXPECT_NE(first.embedding().seed(), 0u);
  v1::BudgetReport after_first;
  ASSERT_TRUE(GetBudget(dataset.id(), &after_first).ok());

  v1::Release second;
  status = RequestRelease(request, &second);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(second.replayed());
  EXPECT_EQ(second.id(), first.id());
  ASSERT_GT(first.embedding().class_values_size(), 0);
  EXPECT_THAT(second.embedding().class_values(),
              ::testing::ElementsAreArray(first.embedding().class_values()));
  EXPECT_EQ(second.embedding().SerializeAsString(), first.embedding().SerializeAsString());
  EXPECT_DOUBLE_EQ(second.epsilon_spent_total(), first.epsilon_spent_total());

  v1::BudgetReport after_second;
  ASSERT_TRUE(GetBudget(dataset.id(), &after_second).ok());
  EXPECT_EQ(after_second.events_size(), 1);
  EXPECT_DOUBLE_EQ(after_second.epsilon_spent(), after_first.epsilon_spent());

  // The same key for a different request is a client bug, not a replay.
  v1::ReleaseRequest different = request;
  different.set_epsilon(0.5);
  v1::Release third;
  status = RequestRelease(different, &third);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("idem-key"));
  v1::BudgetReport after_third;
  ASSERT_TRUE(GetBudget(dataset.id(), &after_third).ok());
  EXPECT_EQ(after_third.events_size(), 1);
  EXPECT_DOUBLE_EQ(after_third.epsilon_spent(), after_first.epsilon_spent());
}

TEST_F(ReleaseTest, LedgerAndArtefactSurviveRestart) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(1.5, kDelta, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 500, 3).ok());
  v1::Release release;
  const v1::ReleaseRequest request = RffRequest(dataset.id(), 1.0, "restart-key");
  grpc::Status status = RequestRelease(request, &release);
  ASSERT_TRUE(status.ok()) << status.error_message();
  v1::BudgetReport before;
  ASSERT_TRUE(GetBudget(dataset.id(), &before).ok());
  ASSERT_EQ(before.events_size(), 1);

  StopServer();
  StartServer();
  ASSERT_NE(server_, nullptr);
  EXPECT_TRUE(server_->integrity_problems().empty())
      << ::testing::PrintToString(server_->integrity_problems());

  v1::BudgetReport after;
  ASSERT_TRUE(GetBudget(dataset.id(), &after).ok());
  EXPECT_EQ(after.epsilon_spent(), before.epsilon_spent());
  EXPECT_EQ(after.epsilon_rdp(), before.epsilon_rdp());
  ASSERT_EQ(after.events_size(), before.events_size());
  for (int i = 0; i < after.events_size(); ++i) {
    EXPECT_EQ(after.events(i).SerializeAsString(), before.events(i).SerializeAsString());
  }

  auto analyst = Analyst();
  auto context = analyst.NewContext();
  v1::GetReleaseRequest get;
  get.set_release_id(release.id());
  v1::Release fetched;
  status = analyst.releases().GetRelease(context.get(), get, &fetched);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(fetched.embedding().SerializeAsString(), release.embedding().SerializeAsString());

  // A retry of the original request after the restart is still a free replay.
  v1::Release replay;
  status = RequestRelease(request, &replay);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(replay.embedding().SerializeAsString(), release.embedding().SerializeAsString());

  // The dataset is still sealed and the cap still binds.
  v1::Dataset listed;
  ASSERT_TRUE(FindDataset(Curator(), dataset.id(), &listed).ok());
  EXPECT_TRUE(listed.sealed());
  EXPECT_EQ(listed.row_count(), 500);
  v1::Release refused;
  // (epsilon 1.2 on top of 1 composes to 1.61833 > 1.5; epsilon 1 would fit.)
  status = RequestRelease(RffRequest(dataset.id(), 1.2, "restart-key-2"), &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  v1::BudgetReport final_report;
  ASSERT_TRUE(GetBudget(dataset.id(), &final_report).ok());
  EXPECT_EQ(final_report.events_size(), 1);
}

TEST_F(ReleaseTest, AddRemoveHidesRowCountFromAnalysts) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(2.0, kDelta, v1::ADD_REMOVE, &dataset).ok());
  EXPECT_EQ(dataset.relation(), v1::ADD_REMOVE);
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 500, 5).ok());

  v1::Dataset as_curator;
  ASSERT_TRUE(FindDataset(Curator(), dataset.id(), &as_curator).ok());
  EXPECT_EQ(as_curator.row_count(), 500);
  v1::Dataset as_analyst;
  ASSERT_TRUE(FindDataset(Analyst(), dataset.id(), &as_analyst).ok());
  EXPECT_EQ(as_analyst.row_count(), 0);

  // The release publishes noisy per-class counts, not a public n.
  v1::Release release;
  grpc::Status status = RequestRelease(RffRequest(dataset.id(), 1.0, "ar-key"), &release);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const auto& artefact = release.embedding();
  EXPECT_EQ(artefact.relation(), v1::ADD_REMOVE);
  EXPECT_EQ(artefact.public_n(), 0);
  EXPECT_DOUBLE_EQ(artefact.sensitivity(), std::sqrt(2.0));
  ASSERT_EQ(artefact.class_totals_size(), 2);
  const data::Table table = data::GenerateDemoTable(500, 5);
  const double yes = table.cells.col(7).sum();
  // noise std = s * sqrt(2) ~ 5.3 at epsilon 1: 40 is more than 7 sigma.
  EXPECT_NEAR(artefact.class_totals(0), 500 - yes, 40.0);
  EXPECT_NEAR(artefact.class_totals(1), yes, 40.0);
  // Still hidden after the release.
  ASSERT_TRUE(FindDataset(Analyst(), dataset.id(), &as_analyst).ok());
  EXPECT_EQ(as_analyst.row_count(), 0);
  EXPECT_TRUE(as_analyst.sealed());
}

TEST_F(ReleaseTest, ReplaceOneArtefactHasPublicNAndProportions) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(2.0, kDelta, v1::REPLACE_ONE, &dataset).ok());
  EXPECT_EQ(dataset.relation(), v1::REPLACE_ONE);
  constexpr int64_t kRows = 500;
  ASSERT_TRUE(UploadDemoRows(dataset.id(), kRows, 9).ok());

  // The size is public under REPLACE_ONE.
  v1::Dataset as_analyst;
  ASSERT_TRUE(FindDataset(Analyst(), dataset.id(), &as_analyst).ok());
  EXPECT_EQ(as_analyst.row_count(), kRows);

  v1::Release release;
  grpc::Status status = RequestRelease(RffRequest(dataset.id(), 1.0, "ro-key"), &release);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const auto& artefact = release.embedding();
  EXPECT_EQ(artefact.relation(), v1::REPLACE_ONE);
  EXPECT_EQ(artefact.public_n(), kRows);
  EXPECT_DOUBLE_EQ(artefact.sensitivity(), 2.0 / kRows);
  EXPECT_DOUBLE_EQ(artefact.noise_stddev(), artefact.noise_multiplier() * artefact.sensitivity());
  EXPECT_EQ(artefact.num_frequencies(), 50);
  EXPECT_EQ(artefact.feature_dim() * artefact.num_classes(), artefact.class_values_size());
  ASSERT_EQ(artefact.class_totals_size(), 2);
  const data::Table table = data::GenerateDemoTable(kRows, 9);
  const double yes = table.cells.col(7).sum() / kRows;
  // noise std = s * 2/n ~ 0.015 at epsilon 1: 0.1 is more than 6 sigma.
  EXPECT_NEAR(artefact.class_totals(0), 1.0 - yes, 0.1);
  EXPECT_NEAR(artefact.class_totals(1), yes, 0.1);
}

// A computation that fails after admission, once rows are being read (here:
// a row chunk corrupted on disk, so LoadRows fails), keeps its charge: no
// refund row, the release is FAILED, the client gets an incident id and
// nothing of the cause (docs/privacy.md 6.1). Before issue 11 it was
// refunded, and the refund's reason reached GetBudget.
TEST_F(ReleaseTest, FailureWhileReadingRowsKeepsItsCharge) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(1.5, kDelta, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 500, 13).ok());
  ASSERT_TRUE(server_->database()->Lock()->Exec("UPDATE row_chunks SET cells = X'00'").ok());
  const v1::ReleaseRequest request = RffRequest(dataset.id(), 1.0, "refund-key");
  v1::Release release;
  grpc::Status status = RequestRelease(request, &release);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INTERNAL) << status.error_message();
  EXPECT_NE(status.error_message().find("incident inc_"), std::string::npos);
  EXPECT_EQ(status.error_message().find("wrong size"), std::string::npos);

  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  EXPECT_GT(report.epsilon_spent(), 0.9);
  ASSERT_EQ(report.events_size(), 1);
  EXPECT_EQ(report.events(0).refund_of(), 0);

  // The release is FAILED, not fetchable; a retry with the same key is told
  // the charge stands, and is not charged again.
  auto analyst = Analyst();
  {
    auto context = analyst.NewContext();
    v1::ListReleasesRequest list_request;
    list_request.set_dataset_id(dataset.id());
    v1::ListReleasesResponse list;
    ASSERT_TRUE(analyst.releases().ListReleases(context.get(), list_request, &list).ok());
    ASSERT_EQ(list.releases_size(), 1);
    EXPECT_EQ(list.releases(0).status(), "FAILED");
    auto get_context = analyst.NewContext();
    v1::GetReleaseRequest get;
    get.set_release_id(list.releases(0).id());
    v1::Release fetched;
    EXPECT_EQ(analyst.releases().GetRelease(get_context.get(), get, &fetched).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
  status = RequestRelease(request, &release);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_NE(status.error_message().find("charge stands"), std::string::npos);
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  ASSERT_EQ(report.events_size(), 1);

  Ledger ledger(server_->database(), &SystemClock::Get());
  auto problems = ledger.VerifyTotals();
  ASSERT_TRUE(problems.ok()) << problems.status();
  EXPECT_TRUE(problems->empty()) << ::testing::PrintToString(*problems);
}

// Sealed rows are read from SQLite and encoded once, then shared by every
// later release and session step (issue 12, item 4); unsealed ones are read
// afresh, so an upload is never hidden by a stale copy.
TEST_F(ReleaseTest, SealedRowsAreReadAndEncodedOnce) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, kDelta, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 200, 5).ok());
  auto schema = SchemaFromProto(dataset.schema());
  ASSERT_TRUE(schema.ok());
  Store* store = server_->store();
  const int64_t start = store->row_loads();
  auto unsealed = store->LoadEncodedRows(dataset.id(), *schema);
  ASSERT_TRUE(unsealed.ok());
  EXPECT_EQ((*unsealed)->num_rows(), 200);
  auto again = store->LoadEncodedRows(dataset.id(), *schema);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->get(), unsealed->get());
  EXPECT_EQ(store->row_loads(), start + 2);  // not sealed: no cache
  v1::Release release;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.5, "a"), &release).ok());
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.5, "b"), &release).ok());
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.5, "c"), &release).ok());
  EXPECT_EQ(store->row_loads(), start + 3);  // sealed at the first release
  auto shared = store->LoadEncodedRows(dataset.id(), *schema);
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ((*shared)->features, (*unsealed)->features);
  EXPECT_EQ((*shared)->labels, (*unsealed)->labels);
  auto shared_again = store->LoadEncodedRows(dataset.id(), *schema);
  ASSERT_TRUE(shared_again.ok());
  EXPECT_EQ(shared_again->get(), shared->get());  // one copy, not re-encoded
  EXPECT_EQ(store->row_loads(), start + 3);
}

// A release is dated by the server's clock (ServerOptions::clock), once:
// the artefact, its row in ListReleases and its charge carry the time it
// was made, and fetching it later does not re-date it. So do the dataset
// and the audit row.
TEST_F(ReleaseTest, ReleaseIsDatedByTheServersClock) {
  StopServer();
  constexpr int64_t kCreated = 1800000000;
  fake_clock_.Set(kCreated);
  clock_ = &fake_clock_;
  StartServer();
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, kDelta, v1::ADD_REMOVE, &dataset).ok());
  EXPECT_EQ(dataset.created_unix(), kCreated);
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 200, 21).ok());
  fake_clock_.Advance(42);
  v1::Release release;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.5, "dated"), &release).ok());
  EXPECT_EQ(release.created_unix(), kCreated + 42);

  fake_clock_.Advance(1000);
  auto analyst = Analyst();
  auto get_context = analyst.NewContext();
  v1::GetReleaseRequest get;
  get.set_release_id(release.id());
  v1::Release fetched;
  ASSERT_TRUE(analyst.releases().GetRelease(get_context.get(), get, &fetched).ok());
  EXPECT_EQ(fetched.created_unix(), kCreated + 42);
  auto list_context = analyst.NewContext();
  v1::ListReleasesRequest list_request;
  list_request.set_dataset_id(dataset.id());
  v1::ListReleasesResponse list;
  ASSERT_TRUE(analyst.releases().ListReleases(list_context.get(), list_request, &list).ok());
  ASSERT_EQ(list.releases_size(), 1);
  EXPECT_EQ(list.releases(0).created_unix(), kCreated + 42);
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  ASSERT_EQ(report.events_size(), 1);
  EXPECT_EQ(report.events(0).created_unix(), kCreated + 42);
  v1::ListAuditResponse audit;
  ASSERT_TRUE(ListAudit(100, &audit).ok());
  bool saw_release = false;
  for (const auto& row : audit.records()) {
    if (row.method() != "/dpcurator.v1.ReleaseService/RequestRelease") continue;
    saw_release = true;
    EXPECT_EQ(row.created_unix(), kCreated + 42);
  }
  EXPECT_TRUE(saw_release);
}

// The noise source is injected (ServerOptions::noise_source): with a
// zero-noise source a release is the exact statistic, so the release logic
// is tested without randomness; with a seeded one two servers agree.
TEST_F(ReleaseTest, InjectedNoiseSourceDrivesTheEngine) {
  StopServer();
  noise_source_ = []() -> absl::StatusOr<std::unique_ptr<privacy::NoiseSource>> {
    return std::unique_ptr<privacy::NoiseSource>(new privacy::ZeroNoiseSource());
  };
  StartServer();
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, kDelta, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 321, 9).ok());
  v1::Release release;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 1.0, "exact"), &release).ok());
  double total = 0;
  for (double count : release.embedding().class_totals()) total += count;
  EXPECT_EQ(total, 321.0);  // the exact count: no noise, no snapping
  // Still charged in full: the source changes the noise, not the ledger.
  EXPECT_NEAR(release.epsilon_spent_total(), 1.0, 1e-6);
}

}  // namespace
}  // namespace dpcurator::server::testing
