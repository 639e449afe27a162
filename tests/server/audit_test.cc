// The audit log: one row per protected call with the principal (a token id,
// never a token), role, method, target, outcome and the epsilon the call
// charged; one row per report stream; append-only; and a failed audit write
// never costs a committed release.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli.h"
#include "client/commands.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kOpenSession[] = "/dpcurator.v1.SessionService/OpenSession";
constexpr char kSubmitReports[] = "/dpcurator.v1.CollectionService/SubmitReports";
constexpr char kListTokens[] = "/dpcurator.v1.AdminService/ListTokens";
constexpr char kListDatasets[] = "/dpcurator.v1.DatasetService/ListDatasets";

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

// Issue 36, item 2: calls refused for their token or role are what a
// stranger can repeat at will, so they are audited in bounded space: one row
// per (peer, method, code, principal) per interval, written at the first
// such call (readable as soon as the client has its answer), its repeats
// counted into it by the server's periodic pass (and at shutdown).
TEST_F(AuditTest, RefusedCallsAreOneRowPerPeerMethodAndCodeWithTheirCount) {
  StopServer();
  clock_ = &fake_clock_;  // the whole test in one interval, then the next
  StartServer();
  v1::Release release;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Release(WithToken(""), RffRequest("ds_x", 0.1, "refused"), &release).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Release(Device(), RffRequest("ds_x", 0.1, "refused"), &release).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  std::vector<v1::AuditRecord> rows = Rows(kRequestRelease);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].code(), static_cast<int>(grpc::StatusCode::UNAUTHENTICATED));
  EXPECT_EQ(rows[0].principal(), "");
  // The peer's host, not its port: a new connection is not a new key.
  EXPECT_EQ(rows[0].detail(), "peer=ipv4:127.0.0.1");
  EXPECT_EQ(rows[1].code(), static_cast<int>(grpc::StatusCode::PERMISSION_DENIED));
  EXPECT_EQ(rows[1].principal(), FileTokenId(kDeviceToken));
  EXPECT_EQ(rows[1].role(), v1::ROLE_DEVICE);
  // The next interval: a row of its own.
  fake_clock_.Advance(3600);
  EXPECT_EQ(Release(WithToken(""), RffRequest("ds_x", 0.1, "refused"), &release).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_EQ(Rows(kRequestRelease).size(), 3u);
  // Authenticated calls keep one row each.
  v1::BudgetReport report;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(GetBudget("ds_missing", &report).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_EQ(Rows(kGetBudget).size(), 3u);
  // The counts, as the pass at shutdown wrote them.
  StopServer();
  auto opened = OpenDatabase(db_path_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto page = opened->store->ListAudit(100, 0);
  ASSERT_TRUE(page.ok()) << page.status();
  std::vector<std::string> details;
  for (int i = page->records_size() - 1; i >= 0; --i) {
    if (page->records(i).method() == kRequestRelease) details.push_back(page->records(i).detail());
  }
  EXPECT_EQ(details, (std::vector<std::string>{"peer=ipv4:127.0.0.1 calls=5",
                                               "peer=ipv4:127.0.0.1 calls=3",
                                               "peer=ipv4:127.0.0.1"}));
}

// Issue 38: the client lists datasets to resolve a dataset's name before
// most commands, and each lookup wrote an audit row. A successful listing
// (public metadata, nothing charged or changed) is not audited; a refused
// one still is.
TEST_F(AuditTest, NameLookupsAreNotAuditedButTheirRefusalsAre) {
  for (client::Connection connection : {Analyst(), Curator(), Analyst()}) {
    auto context = connection.NewContext();
    v1::ListDatasetsResponse response;
    ASSERT_TRUE(
        connection.datasets().ListDatasets(context.get(), v1::ListDatasetsRequest(), &response)
            .ok());
  }
  EXPECT_TRUE(Rows(kListDatasets).empty());
  client::Connection stranger = WithToken("not-a-token");
  auto context = stranger.NewContext();
  v1::ListDatasetsResponse response;
  EXPECT_EQ(stranger.datasets()
                .ListDatasets(context.get(), v1::ListDatasetsRequest(), &response)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  std::vector<v1::AuditRecord> rows = Rows(kListDatasets);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].code(), static_cast<int>(grpc::StatusCode::UNAUTHENTICATED));
}

// Issue 36, item 9: a response over the send limit fails with
// RESOURCE_EXHAUSTED after its handler returned OK. The audit row and the
// metrics record the code the client got, not the handler's 0.
TEST_F(AuditTest, AResponseOverTheSendLimitIsRecordedWithTheCodeTheClientGets) {
  StopServer();
  ServerOptions options = Options();
  options.max_message_bytes = 4096;
  auto started = CuratorServer::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  server_ = std::move(started).value();
  for (int i = 0; i < 24; ++i) {
    v1::CreateTokenResponse token;
    ASSERT_TRUE(CreateToken(v1::ROLE_ANALYST, std::string(150, 'a'), &token).ok());
  }
  auto curator = Curator();
  auto context = curator.NewContext();
  v1::ListTokensResponse tokens;
  grpc::Status status =
      curator.admin().ListTokens(context.get(), v1::ListTokensRequest(), &tokens);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  v1::ListAuditResponse newest;
  ASSERT_TRUE(ListAudit(1, &newest).ok());
  ASSERT_EQ(newest.records_size(), 1);
  EXPECT_EQ(newest.records(0).method(), kListTokens);
  EXPECT_EQ(newest.records(0).code(), static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  int counted = 0;
  for (absl::string_view line : absl::StrSplit(server_->metrics()->Scrape(), '\n')) {
    if (absl::StartsWith(line, "dpcurator_rpcs_total{") &&
        absl::StrContains(line, "\"AdminService/ListTokens\"")) {
      EXPECT_TRUE(absl::StrContains(line, "RESOURCE_EXHAUSTED")) << line;
      ++counted;
    }
  }
  EXPECT_EQ(counted, 1);
}

// Issue 36, item 9: an analyst's crafted dataset id (a terminal escape that
// sets the title and clears the screen, then a newline and a forged curator
// RevokeToken row) is stored as the audit row's target; `admin audit`
// prints it escaped, on its own row.
TEST_F(AuditTest, AdminAuditPrintsCallerTextEscaped) {
  const std::string forged =
      "ds_\x1b]0;owned\x07\x1b[2J\n      99  2026-01-01 00:00:00  file:0000000000000000  "
      "curator   AdminService/RevokeToken  0  0.0000  tok_victim\t\xc2\x9b\xe2\x80\xae";
  auto analyst = Analyst();
  auto context = analyst.NewContext();
  v1::GetBudgetRequest request;
  request.set_dataset_id(forged);
  v1::BudgetReport report;
  ASSERT_EQ(analyst.datasets().GetBudget(context.get(), request, &report).error_code(),
            grpc::StatusCode::NOT_FOUND);
  ASSERT_EQ(Rows(kGetBudget).size(), 1u);
  ASSERT_EQ(Rows(kGetBudget)[0].target(), forged);  // stored as sent (cut to 256 bytes)

  const client::Command* audit = nullptr;
  const std::vector<client::Command> commands = client::AdminCommands();
  for (const auto& command : commands) {
    if (command.name == "admin audit") audit = &command;
  }
  ASSERT_NE(audit, nullptr);
  auto args = client::ParseArgs(audit->options, {"--server", address(), "--token",
                                                 kCuratorToken, "--insecure", "--limit", "50"});
  ASSERT_TRUE(args.ok()) << args.status();
  ::testing::internal::CaptureStdout();
  const absl::Status ran = audit->run(*args);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(ran.ok()) << ran;
  for (const char c : out) {
    EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << static_cast<int>(c);
    EXPECT_NE(c, '\x7f');
  }
  EXPECT_FALSE(absl::StrContains(out, "\xc2\x9b"));      // C1 CSI
  EXPECT_FALSE(absl::StrContains(out, "\xe2\x80\xae"));  // right-to-left override
  // One line per row under the header: the newline did not make a row, and
  // the forged text sits on the GetBudget row.
  const std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  int revoke_lines = 0;
  for (const std::string& line : lines) {
    if (absl::StrContains(line, "RevokeToken")) {
      ++revoke_lines;
      EXPECT_TRUE(absl::StrContains(line, "DatasetService/GetBudget")) << line;
      EXPECT_TRUE(absl::StrContains(line, "ds_\\x1b]0;owned\\x07\\x1b[2J\\x0a")) << line;
      EXPECT_TRUE(absl::StrContains(line, "tok_victim\\x09\\u{009b}\\u{202e}")) << line;
    }
  }
  EXPECT_EQ(revoke_lines, 1) << out;
}

}  // namespace
}  // namespace dpcurator::server::testing
