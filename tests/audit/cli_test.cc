// `dpcurator audit` (client/audit_cmd.cc): the quick audit of one session
// kind (registered in audit/registry.cc) prints one JSON object per
// relation with the table's fields and no violation; an unknown --only is
// refused, naming the kinds it accepts.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "client/commands.h"

namespace dpcurator::client {
namespace {

const Command& AuditCommand() {
  static const std::vector<Command> commands = AuditCommands();
  return commands.at(0);
}

TEST(AuditCliTest, QuickJsonOfOneKind) {
  ASSERT_EQ(AuditCommand().name, "audit");
  auto args = ParseArgs(AuditCommand().options, {"--quick", "--only", "dp_sgd_session", "--delta", "1e-5", "--json"});
  ASSERT_TRUE(args.ok()) << args.status();
  ::testing::internal::CaptureStdout();
  const absl::Status status = AuditCommand().run(*args);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status << "\n" << out;
  const nlohmann::json rows = nlohmann::json::parse(out);
  ASSERT_EQ(rows.size(), 2u) << out;
  for (const auto& row : rows) {
    EXPECT_EQ(row["kind"], "dp_sgd_session");
    // The charged event's epsilon (the session calibrated for 1 is charged
    // at most 1, conservatively), not the requested one.
    EXPECT_LE(row["epsilon"].get<double>(), 1.0);
    EXPECT_GT(row["epsilon"].get<double>(), 0.95);
    EXPECT_DOUBLE_EQ(row["delta"].get<double>(), 1e-5);
    EXPECT_LE(row["epsilon_lower_95"].get<double>(), 1.0);
    EXPECT_GT(row["mu_emp"].get<double>(), 0.0);
    EXPECT_GT(row["mu"].get<double>(), 0.0);
    EXPECT_EQ(row["runs_per_side"].get<int64_t>(), 2000);
    EXPECT_FALSE(row["mutant"].get<bool>());
  }
}

TEST(AuditCliTest, UnknownKindIsRefused) {
  auto args = ParseArgs(AuditCommand().options, {"--only", "no_such_kind"});
  ASSERT_TRUE(args.ok()) << args.status();
  const absl::Status status = AuditCommand().run(*args);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("dp_sgd_session"), std::string::npos) << status;
}

}  // namespace
}  // namespace dpcurator::client
