// The audit log in bounded space (issue 36, item 2): the key limit of the
// refused-call aggregation, the retention setting (age and row cap), the
// triggers that allow only the retention pass to delete and only a refused
// row's count to change, and the validation of the settings. Method names
// recorded are the server's own (item 1).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/auth.h"
#include "server/limits.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;


class AuditBoundsTest : public ServerTest {
 protected:
  // Restarts the server on the fake clock with these limits.
  void Restart(const ServerLimits& limits) {
    StopServer();
    clock_ = &fake_clock_;
    ServerOptions options = Options();
    options.limits = limits;
    auto started = CuratorServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(started).value();
  }
  // Every audit row, oldest first, read from the store (no call of ours
  // adds one).
  std::vector<v1::AuditRecord> AllRows() {
    auto page = server_->store()->ListAudit(10000, 0);
    EXPECT_TRUE(page.ok()) << page.status();
    std::vector<v1::AuditRecord> rows;
    if (!page.ok()) return rows;
    for (int i = page->records_size() - 1; i >= 0; --i) rows.push_back(page->records(i));
    return rows;
  }
  grpc::Status Refused(const std::string& method_kind) {
    auto stranger = WithToken("");
    auto context = stranger.NewContext();
    if (method_kind == "release") {
      v1::Release release;
      return stranger.releases().RequestRelease(context.get(), RffRequest("ds_x", 0.1, "k"),
                                                &release);
    }
    v1::GetBudgetRequest request;
    request.set_dataset_id("ds_x");
    v1::BudgetReport report;
    return stranger.datasets().GetBudget(context.get(), request, &report);
  }
};

TEST(CanonicalMethodTest, OnlyTheServersOwnMethodsHaveNames) {
  EXPECT_EQ(CanonicalMethod("/grpc.health.v1.Health/Check"), "/grpc.health.v1.Health/Check");
  EXPECT_EQ(CanonicalMethod("/grpc.health.v1.Health/Watch"), "/grpc.health.v1.Health/Watch");
  for (const std::string& method : ProtectedMethods()) EXPECT_EQ(CanonicalMethod(method), method);
  for (const std::string& path :
       {std::string("/grpc.health.v1.Health/x"), std::string(8000, 'x'), std::string(),
        absl::StrCat(kRequestRelease, "/")}) {
    EXPECT_EQ(CanonicalMethod(path), kUnknownMethod) << path.substr(0, 60);
  }
  EXPECT_EQ(PeerHost("ipv4:127.0.0.1:54321"), "ipv4:127.0.0.1");
  EXPECT_EQ(PeerHost("ipv6:[::1]:54321"), "ipv6:[::1]");
  EXPECT_EQ(PeerHost("unix:/tmp/socket"), "unix:/tmp/socket");
  EXPECT_EQ(PeerHost(std::string(500, 'u')).size(), kMaxPeerBytes);
}

// Past the key limit, refusals of further keys share one overflow row per
// (method, code), whose peer is "*".
TEST_F(AuditBoundsTest, KeysPastTheLimitShareAnOverflowRow) {
  ServerLimits limits;
  limits.audit_refusal_max_keys = 1;
  Restart(limits);
  EXPECT_EQ(Refused("release").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Refused("budget").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Refused("budget").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Refused("release").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(server_->MaintainAuditLog().ok());
  const std::vector<v1::AuditRecord> rows = AllRows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].method(), kRequestRelease);
  EXPECT_EQ(rows[0].detail(), "peer=ipv4:127.0.0.1 calls=2");
  EXPECT_EQ(rows[1].method(), kGetBudget);
  EXPECT_EQ(rows[1].detail(), "peer=* calls=2");
  EXPECT_EQ(rows[1].principal(), "");
}

// Rows older than the retention go; then the oldest beyond the row cap.
// Nothing else can delete a row or change one, but a refused row's count.
TEST_F(AuditBoundsTest, RetentionDeletesOldRowsAndKeepsTheNewestUnderTheCap) {
  ServerLimits limits;
  limits.audit_retention_days = 1;
  limits.audit_max_rows = 0;
  Restart(limits);
  v1::BudgetReport report;
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(GetBudget("ds_old", &report).ok());
  fake_clock_.Advance(2 * 86400);
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(GetBudget("ds_new", &report).ok());
  auto deleted = server_->MaintainAuditLog();
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 3);
  std::vector<v1::AuditRecord> rows = AllRows();
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) EXPECT_EQ(row.target(), "ds_new");

  limits.audit_retention_days = 0;
  limits.audit_max_rows = 5;
  Restart(limits);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(GetBudget(absl::StrCat("ds_", i), &report).ok());
  deleted = server_->MaintainAuditLog();
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 7);
  rows = AllRows();
  ASSERT_EQ(rows.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(rows[i].target(), absl::StrCat("ds_", 5 + i));
  // A second pass finds nothing to do.
  deleted = server_->MaintainAuditLog();
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 0);

  // The triggers: no delete but the pass's, no update but a refused row's
  // count, upwards; the retention mark only moves forward.
  EXPECT_EQ(Refused("budget").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  auto db = server_->database()->Lock();
  absl::Status removed = db->Exec("DELETE FROM audit_log");
  EXPECT_THAT(std::string(removed.message()), HasSubstr("append-only"));
  EXPECT_FALSE(db->Exec("UPDATE audit_log SET count = count + 1 WHERE code = 5").ok());
  EXPECT_FALSE(db->Exec("UPDATE audit_log SET detail = 'x', count = count + 1 WHERE code = 16")
                   .ok());
  EXPECT_FALSE(db->Exec("UPDATE audit_log SET count = 1 WHERE code = 16").ok());
  EXPECT_TRUE(db->Exec("UPDATE audit_log SET count = count + 1 WHERE code = 16").ok());
  EXPECT_FALSE(db->Exec("UPDATE audit_retention SET below_id = 0").ok());
  EXPECT_FALSE(db->Exec("DELETE FROM audit_retention").ok());
}

TEST_F(AuditBoundsTest, SettingsOutOfRangeAreRefusedNamingTheirFlag) {
  StopServer();
  const std::pair<void (*)(ServerLimits*), const char*> cases[] = {
      {[](ServerLimits* l) { l->audit_refusal_interval_seconds = 0; },
       "--audit-refusal-interval"},
      {[](ServerLimits* l) { l->audit_refusal_max_keys = 0; }, "--audit-refusal-max-keys"},
      {[](ServerLimits* l) { l->audit_retention_days = -1; }, "--audit-retention-days"},
      {[](ServerLimits* l) { l->audit_max_rows = -1; }, "--audit-max-rows"},
  };
  for (const auto& [set, flag] : cases) {
    ServerOptions options = Options();
    set(&options.limits);
    auto started = CuratorServer::Start(options);
    ASSERT_FALSE(started.ok()) << flag;
    EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(started.status().message()), HasSubstr(flag));
  }
}

}  // namespace
}  // namespace dpcurator::server::testing
