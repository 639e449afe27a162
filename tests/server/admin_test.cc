// Token administration through AdminService: made tokens work at once and
// are stored only as digests, revocation holds from the next call and
// across restarts, the last curator token cannot be revoked, and the tokens
// file stays a working bootstrap source.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/auth.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;

// Everything SQLite may hold for the database: the main file and its WAL.
std::string DatabaseBytes(const std::string& db_path) {
  std::string bytes;
  for (const std::string& path : {db_path, db_path + "-wal"}) {
    std::ifstream input(path, std::ios::binary);
    std::stringstream buffer;
    buffer << input.rdbuf();
    bytes += buffer.str();
  }
  return bytes;
}

grpc::Status ListDatasetsWith(const client::Connection& connection) {
  client::Connection copy = connection;
  auto context = copy.NewContext();
  v1::ListDatasetsResponse response;
  return copy.datasets().ListDatasets(context.get(), v1::ListDatasetsRequest(), &response);
}

grpc::Status ListTokens(client::Connection connection, bool include_revoked,
                        v1::ListTokensResponse* response) {
  auto context = connection.NewContext();
  v1::ListTokensRequest request;
  request.set_include_revoked(include_revoked);
  return connection.admin().ListTokens(context.get(), request, response);
}

const v1::TokenInfo* FindToken(const v1::ListTokensResponse& list, const std::string& id) {
  for (const auto& token : list.tokens()) {
    if (token.token_id() == id) return &token;
  }
  return nullptr;
}

class AdminTest : public ServerTest {};

TEST_F(AdminTest, CreatedTokenWorksAtOnceAndIsStoredOnlyAsADigest) {
  v1::CreateTokenResponse created;
  grpc::Status status = CreateToken(v1::ROLE_ANALYST, "alice laptop", &created);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::string& token = created.token();
  // "dpc_" + 48 hex digits = 192 random bits.
  ASSERT_EQ(token.size(), 4u + 48u) << token;
  EXPECT_TRUE(absl::StartsWith(token, "dpc_"));
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef", 4), std::string::npos) << token;
  EXPECT_TRUE(absl::StartsWith(created.info().token_id(), "tok_"));
  EXPECT_EQ(created.info().role(), v1::ROLE_ANALYST);
  EXPECT_EQ(created.info().label(), "alice laptop");
  EXPECT_EQ(created.info().created_by(), FileTokenId(kCuratorToken));  // the fixture's curator

  // The new token carries its role: analyst RPCs pass, curator ones do not.
  EXPECT_TRUE(ListDatasetsWith(WithToken(token)).ok());
  v1::Dataset dataset;
  auto as_new = WithToken(token);
  auto context = as_new.NewContext();
  v1::CreateDatasetRequest request;
  request.set_name("x");
  EXPECT_EQ(as_new.datasets().CreateDataset(context.get(), request, &dataset).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // Two tokens are never equal.
  v1::CreateTokenResponse second;
  ASSERT_TRUE(CreateToken(v1::ROLE_ANALYST, "", &second).ok());
  EXPECT_NE(second.token(), token);
  EXPECT_NE(second.info().token_id(), created.info().token_id());

  // Listed by id, role and label; the response has no field for the token.
  v1::ListTokensResponse list;
  ASSERT_TRUE(ListTokens(Curator(), false, &list).ok());
  const v1::TokenInfo* listed = FindToken(list, created.info().token_id());
  ASSERT_NE(listed, nullptr);
  EXPECT_EQ(listed->label(), "alice laptop");
  EXPECT_EQ(listed->role(), v1::ROLE_ANALYST);
  EXPECT_NE(FindToken(list, FileTokenId(kCuratorToken)), nullptr);  // file tokens are listed too
  EXPECT_EQ(list.SerializeAsString().find(token), std::string::npos);

  // On disk: the digest is there (so the scan reads the right bytes), the
  // token text is not, and neither is the file tokens' text.
  StopServer();
  const std::string bytes = DatabaseBytes(db_path_);
  EXPECT_NE(bytes.find(TokenDigest(token)), std::string::npos)
      << "the token's digest should be stored";
  EXPECT_EQ(bytes.find(token), std::string::npos) << "the token itself is in the database";
  EXPECT_EQ(bytes.find(token.substr(4)), std::string::npos);
  EXPECT_EQ(bytes.find(kCuratorToken), std::string::npos);
  EXPECT_EQ(bytes.find(kAnalystToken), std::string::npos);
  StartServer();
}

TEST_F(AdminTest, RevocationHoldsFromTheNextCallAndAcrossRestarts) {
  v1::CreateTokenResponse kept;
  v1::CreateTokenResponse revoked;
  ASSERT_TRUE(CreateToken(v1::ROLE_ANALYST, "kept", &kept).ok());
  ASSERT_TRUE(CreateToken(v1::ROLE_ANALYST, "revoked", &revoked).ok());
  ASSERT_TRUE(ListDatasetsWith(WithToken(revoked.token())).ok());

  v1::TokenInfo info;
  grpc::Status status = RevokeToken(revoked.info().token_id(), &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GT(info.revoked_unix(), 0);
  EXPECT_EQ(info.revoked_by(), FileTokenId(kCuratorToken));
  EXPECT_EQ(ListDatasetsWith(WithToken(revoked.token())).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(ListDatasetsWith(WithToken(kept.token())).ok());

  StopServer();
  StartServer();
  EXPECT_EQ(ListDatasetsWith(WithToken(revoked.token())).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(ListDatasetsWith(WithToken(kept.token())).ok());
  EXPECT_TRUE(ListDatasetsWith(Analyst()).ok());  // the file still bootstraps

  v1::ListTokensResponse valid;
  ASSERT_TRUE(ListTokens(Curator(), false, &valid).ok());
  EXPECT_EQ(FindToken(valid, revoked.info().token_id()), nullptr);
  v1::ListTokensResponse all;
  ASSERT_TRUE(ListTokens(Curator(), true, &all).ok());
  const v1::TokenInfo* listed = FindToken(all, revoked.info().token_id());
  ASSERT_NE(listed, nullptr);
  EXPECT_EQ(listed->revoked_unix(), info.revoked_unix());
  EXPECT_EQ(listed->revoked_by(), FileTokenId(kCuratorToken));
}

TEST_F(AdminTest, RevokeRefusesUnknownRepeatedAndFileTokens) {
  EXPECT_EQ(RevokeToken("tok_doesnotexist").error_code(), grpc::StatusCode::NOT_FOUND);
  v1::CreateTokenResponse created;
  ASSERT_TRUE(CreateToken(v1::ROLE_DEVICE, "", &created).ok());
  ASSERT_TRUE(RevokeToken(created.info().token_id()).ok());
  grpc::Status again = RevokeToken(created.info().token_id());
  EXPECT_EQ(again.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(again.error_message(), HasSubstr("already revoked"));
  grpc::Status file = RevokeToken(FileTokenId(kAnalystToken));
  EXPECT_EQ(file.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(file.error_message(), HasSubstr("--tokens file"));
  EXPECT_TRUE(ListDatasetsWith(Analyst()).ok());  // the file analyst still works
}

TEST_F(AdminTest, CreateValidatesRoleAndLabel) {
  v1::CreateTokenResponse response;
  EXPECT_EQ(CreateToken(v1::ROLE_UNSPECIFIED, "", &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(CreateToken(v1::ROLE_ANALYST, std::string(201, 'x'), &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(CreateToken(v1::ROLE_ANALYST, "line\nbreak", &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::ListTokensResponse list;
  ASSERT_TRUE(ListTokens(Curator(), true, &list).ok());
  EXPECT_EQ(list.tokens_size(), 3);  // the three file tokens only
}

// Issue 36, item 9: a file token's id is a digest of the token, not a line
// number, so "delete line <id>" pointed nowhere. The refusal names the line
// the token was on when the server read the file, and how to recognise its
// line from the id if the file changed since.
TEST_F(AdminTest, RevokingAFileTokenSaysWhichLineAndHowToFindIt) {
  grpc::Status file = RevokeToken(FileTokenId(kAnalystToken));
  ASSERT_EQ(file.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  // The fixture's file: a comment, then curator, analyst, device.
  EXPECT_THAT(file.error_message(), HasSubstr("(line 3 when the server started)"));
  EXPECT_THAT(file.error_message(), HasSubstr("remove the line holding that token"));
  EXPECT_THAT(file.error_message(), HasSubstr("sha256sum | cut -c1-16"));
  EXPECT_THAT(file.error_message(), ::testing::Not(HasSubstr("delete line")));
  EXPECT_TRUE(ListDatasetsWith(Analyst()).ok());
}

// Issue 36, item 9: the label limit counts bytes; its message says bytes.
TEST_F(AdminTest, TheLabelLimitIsInBytesAndSaysSo) {
  std::string two_byte_letters;
  for (int i = 0; i < 100; ++i) two_byte_letters += "\xc3\xa9";  // e acute, 2 bytes
  v1::CreateTokenResponse response;
  EXPECT_TRUE(CreateToken(v1::ROLE_ANALYST, two_byte_letters, &response).ok());  // 200 bytes
  grpc::Status status = CreateToken(v1::ROLE_ANALYST, two_byte_letters + "x", &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("at most 200 bytes"));
  EXPECT_THAT(status.error_message(), ::testing::Not(HasSubstr("characters")));
}

// With no curator in the tokens file, a database curator token cannot
// revoke itself while it is the last one; with a second one it can.
TEST_F(AdminTest, TheLastCuratorTokenCannotBeRevoked) {
  v1::CreateTokenResponse first;
  ASSERT_TRUE(CreateToken(v1::ROLE_CURATOR, "first", &first).ok());
  StopServer();
  tokens_path_ = "";  // the database alone holds the tokens now
  StartServer();
  EXPECT_EQ(ListDatasetsWith(Curator()).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  auto curator = WithToken(first.token());
  auto revoke = [&](const std::string& id) {
    auto context = curator.NewContext();
    v1::RevokeTokenRequest request;
    request.set_token_id(id);
    v1::TokenInfo info;
    return curator.admin().RevokeToken(context.get(), request, &info);
  };
  grpc::Status refused = revoke(first.info().token_id());
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("last valid curator token"));
  EXPECT_THAT(refused.error_message(), HasSubstr("the one this call uses"));
  EXPECT_TRUE(ListDatasetsWith(curator).ok());

  v1::CreateTokenResponse second;
  {
    auto context = curator.NewContext();
    v1::CreateTokenRequest request;
    request.set_role(v1::ROLE_CURATOR);
    ASSERT_TRUE(curator.admin().CreateToken(context.get(), request, &second).ok());
  }
  EXPECT_EQ(second.info().created_by(), first.info().token_id());
  grpc::Status status = revoke(first.info().token_id());
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(ListDatasetsWith(curator).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(ListDatasetsWith(WithToken(second.token())).ok());
}

TEST_F(AdminTest, AServerWithNoTokenAnywhereDoesNotStart) {
  StopServer();
  ServerOptions options;
  options.db_path = dir_->File("empty.db");
  options.listen_address = "127.0.0.1:0";
  options.insecure_dev = true;
  auto started = CuratorServer::Start(options);
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(std::string(started.status().message()), HasSubstr("--tokens"));
  StartServer();
}

}  // namespace
}  // namespace dpcurator::server::testing
