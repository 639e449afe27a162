// The audit log: one row per protected call with the principal (a token id,
// never a token), role, method, target, outcome and the epsilon the call
// charged; one row per report stream; append-only; and a failed audit write
// never costs a committed release.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kRequestRelease[] = "/dpcurator.v1.ReleaseService/RequestRelease";
constexpr char kOpenSession[] = "/dpcurator.v1.SessionService/OpenSession";
constexpr char kSubmitReports[] = "/dpcurator.v1.CollectionService/SubmitReports";

class AuditTest : public ServerTest {
 protected:
  // Audit rows of `method`, oldest first.
  std::vector<v1::AuditRecord> Rows(const std::string& method) {
    v1::ListAuditResponse response;
    grpc::Status status = ListAudit(10000, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    std::vector<v1::AuditRecord> rows;
    for (int i = response.records_size() - 1; i >= 0; --i) {
      if (response.records(i).method() == method) rows.push_back(response.records(i));
    }
    return rows;
  }

  // A dataset with rows, ready for releases.
  std::string ReadyDataset(double epsilon_cap) {
    v1::Dataset dataset;
    EXPECT_TRUE(CreateDataset(epsilon_cap, 1e-5, v1::ADD_REMOVE, &dataset).ok());
    EXPECT_TRUE(UploadDemoRows(dataset.id(), 200, 7).ok());
    return dataset.id();
  }

  grpc::Status Release(client::Connection connection, const v1::ReleaseRequest& request,
                       v1::Release* release) {
    auto context = connection.NewContext();
    return connection.releases().RequestRelease(context.get(), request, release);
  }

  // The ledger's epsilon for a release, as ListReleases reports it.
  double LedgerEpsilon(const std::string& dataset_id, const std::string& release_id) {
    auto curator = Curator();
    auto context = curator.NewContext();
    v1::ListReleasesRequest request;
    request.set_dataset_id(dataset_id);
    v1::ListReleasesResponse response;
    EXPECT_TRUE(curator.releases().ListReleases(context.get(), request, &response).ok());
    for (const auto& summary : response.releases()) {
      if (summary.id() == release_id) return summary.epsilon();
    }
    ADD_FAILURE() << "release " << release_id << " not listed";
    return -1;
  }
};

TEST_F(AuditTest, ReleaseRowsCarryPrincipalTargetOutcomeAndEpsilon) {
  v1::CreateTokenResponse analyst;
  ASSERT_TRUE(CreateToken(v1::ROLE_ANALYST, "audited analyst", &analyst).ok());
  const std::string dataset_id = ReadyDataset(1.0);

  v1::Release release;
  grpc::Status status = Release(WithToken(analyst.token()),
                                RffRequest(dataset_id, 0.4, "audit-1"), &release);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::string release_id = release.id();
  // The same key again: a replay, charged nothing.
  ASSERT_TRUE(
      Release(WithToken(analyst.token()), RffRequest(dataset_id, 0.4, "audit-1"), &release).ok());
  ASSERT_TRUE(release.replayed());
  // Over the cap: refused by the ledger, charged nothing.
  EXPECT_EQ(Release(WithToken(analyst.token()), RffRequest(dataset_id, 0.9, "audit-2"), &release)
                .error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Wrong role (device) and no token at all.
  EXPECT_EQ(Release(Device(), RffRequest(dataset_id, 0.1, "audit-3"), &release).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Release(WithToken(""), RffRequest(dataset_id, 0.1, "audit-4"), &release).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  const std::vector<v1::AuditRecord> rows = Rows(kRequestRelease);
  ASSERT_EQ(rows.size(), 5u);
  const v1::AuditRecord& charged = rows[0];
  EXPECT_EQ(charged.principal(), analyst.info().token_id());
  EXPECT_EQ(charged.role(), v1::ROLE_ANALYST);
  EXPECT_EQ(charged.target(), dataset_id);
  EXPECT_EQ(charged.code(), 0);
  const double ledger_epsilon = LedgerEpsilon(dataset_id, release_id);
  EXPECT_GT(charged.epsilon(), 0.0);
  EXPECT_LE(charged.epsilon(), 0.4 + 1e-9);
  EXPECT_DOUBLE_EQ(charged.epsilon(), ledger_epsilon);
  EXPECT_THAT(charged.detail(), HasSubstr(release_id));
  EXPECT_GT(charged.created_unix(), 0);

  EXPECT_EQ(rows[1].code(), 0);  // replay
  EXPECT_EQ(rows[1].epsilon(), 0.0);
  EXPECT_EQ(rows[2].code(), static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  EXPECT_EQ(rows[2].epsilon(), 0.0);
  EXPECT_EQ(rows[2].principal(), analyst.info().token_id());
  EXPECT_EQ(rows[3].code(), static_cast<int>(grpc::StatusCode::PERMISSION_DENIED));
  EXPECT_EQ(rows[3].principal(), FileTokenId(kDeviceToken));  // the fixture's device
  EXPECT_EQ(rows[3].role(), v1::ROLE_DEVICE);
  EXPECT_EQ(rows[3].epsilon(), 0.0);
  EXPECT_EQ(rows[4].code(), static_cast<int>(grpc::StatusCode::UNAUTHENTICATED));
  EXPECT_EQ(rows[4].principal(), "");
  EXPECT_EQ(rows[4].role(), v1::ROLE_UNSPECIFIED);

  // Rows are ordered and the token text appears in none of them.
  v1::ListAuditResponse all;
  ASSERT_TRUE(ListAudit(10000, &all).ok());
  EXPECT_EQ(all.SerializeAsString().find(analyst.token()), std::string::npos);
  for (int i = 1; i < all.records_size(); ++i) {
    EXPECT_LT(all.records(i).id(), all.records(i - 1).id());
  }
}

TEST_F(AuditTest, SessionOpenRecordsTheReservedEpsilon) {
  const std::string dataset_id = ReadyDataset(10.0);
  auto analyst = Analyst();
  auto context = analyst.NewContext();
  v1::OpenSessionRequest request;
  request.set_dataset_id(dataset_id);
  request.set_idempotency_key("audit-session");
  request.mutable_params()->set_steps(3);
  request.mutable_params()->set_sampling_rate(0.5);
  request.mutable_params()->set_noise_multiplier(2.0);
  request.mutable_params()->mutable_rff_embedding()->set_num_frequencies(50);
  v1::Session session;
  grpc::Status status = analyst.sessions().OpenSession(context.get(), request, &session);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const auto rows = Rows(kOpenSession);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].principal(), FileTokenId(kAnalystToken));
  EXPECT_EQ(rows[0].target(), dataset_id);
  EXPECT_GT(rows[0].epsilon(), 0.0);
  EXPECT_DOUBLE_EQ(rows[0].epsilon(), session.epsilon_reserved());
  EXPECT_THAT(rows[0].detail(), HasSubstr(session.id()));
}

TEST_F(AuditTest, AReportStreamIsOneRowWithItsCounts) {
  v1::Collection collection;
  ASSERT_TRUE(CreateLdpCollection("audited", &collection).ok());
  auto device = Device();
  auto context = device.NewContext();
  auto stream = device.collections().SubmitReports(context.get());
  int next_id = 0;
  for (int b = 0; b < 3; ++b) {
    v1::SubmitReportsRequest batch;
    if (b == 0) batch.set_collection_id(collection.id());
    for (int r = 0; r < 4; ++r) {
      v1::Report* report = batch.add_reports();
      report->set_report_id(std::string(16, static_cast<char>(++next_id)));
      for (int j = 0; j < LdpCollectionDimension(); ++j) report->add_values(0.25);
    }
    // One bad report per batch: wrong dimension.
    v1::Report* bad = batch.add_reports();
    bad->set_report_id(std::string(16, static_cast<char>(100 + b)));
    bad->add_values(0.5);
    ASSERT_TRUE(stream->Write(batch));
  }
  stream->WritesDone();
  v1::SubmitReportsAck ack;
  int acks = 0;
  while (stream->Read(&ack)) ++acks;
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(acks, 3);
  const auto rows = Rows(kSubmitReports);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].target(), collection.id());
  EXPECT_EQ(rows[0].role(), v1::ROLE_DEVICE);
  EXPECT_EQ(rows[0].detail(), "batches=3 accepted=12 duplicates=0 rejected=3");
}

TEST_F(AuditTest, TheAuditTableIsAppendOnly) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(1.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  v1::CreateTokenResponse token;
  ASSERT_TRUE(CreateToken(v1::ROLE_ANALYST, "", &token).ok());
  auto db = server_->database()->Lock();
  absl::Status update = db->Exec("UPDATE audit_log SET epsilon = 0");
  EXPECT_FALSE(update.ok());
  EXPECT_THAT(std::string(update.message()), HasSubstr("append-only"));
  EXPECT_FALSE(db->Exec("DELETE FROM audit_log").ok());
  // Tokens: never deleted, and a row changes only to record its revocation.
  EXPECT_FALSE(db->Exec("DELETE FROM tokens").ok());
  EXPECT_FALSE(db->Exec("UPDATE tokens SET role = 'curator'").ok());
  EXPECT_TRUE(db->Exec("UPDATE tokens SET revoked_unix = 1, revoked_by = 'test'").ok());
  EXPECT_FALSE(db->Exec("UPDATE tokens SET revoked_unix = NULL").ok());
}

// The audit row is written after the release committed, in its own
// transaction: if it cannot be written the release still stands, and the
// failure is counted.
TEST_F(AuditTest, AFailedAuditWriteDoesNotLoseACommittedRelease) {
  const std::string dataset_id = ReadyDataset(1.0);
  ASSERT_TRUE(server_->database()
                  ->Lock()
                  ->Exec("CREATE TEMP TRIGGER audit_broken BEFORE INSERT ON audit_log "
                         "BEGIN SELECT RAISE(ABORT, 'disk says no'); END")
                  .ok());
  EXPECT_EQ(server_->audit_failures(), 0);
  v1::Release release;
  grpc::Status status = RequestRelease(RffRequest(dataset_id, 0.3, "audit-fail"), &release);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(server_->audit_failures(), 1);
  ASSERT_TRUE(server_->database()->Lock()->Exec("DROP TRIGGER temp.audit_broken").ok());
  EXPECT_GT(LedgerEpsilon(dataset_id, release.id()), 0.0);
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset_id, &report).ok());
  EXPECT_EQ(report.events_size(), 1);
  EXPECT_TRUE(Rows(kRequestRelease).empty());
  EXPECT_EQ(server_->audit_failures(), 1);  // later calls are audited again
}

}  // namespace
}  // namespace dpcurator::server::testing
