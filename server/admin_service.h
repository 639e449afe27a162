#ifndef DPCURATOR_SERVER_ADMIN_SERVICE_H_
#define DPCURATOR_SERVER_ADMIN_SERVICE_H_

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "dpcurator/v1/dpcurator.grpc.pb.h"
#include "server/auth.h"
#include "server/clock.h"
#include "server/shared_database.h"
#include "server/store.h"

namespace dpcurator::server {

// Token administration and the audit log (curator only). A token is made
// from 192 bits of OpenSSL randomness, returned once, and stored as its
// SHA-256 digest; the in-memory registry is updated under Authorizer's
// mutex after the database commits, so a revocation holds from the next
// call on.
class AdminServiceImpl final : public v1::AdminService::Service {
 public:
  // Token times come from `clock` (the server's).
  AdminServiceImpl(Store* store, Authorizer* authorizer, const Clock* clock)
      : store_(store), authorizer_(authorizer), clock_(clock) {}

  grpc::Status CreateToken(grpc::ServerContext* context, const v1::CreateTokenRequest* request,
                           v1::CreateTokenResponse* response) override;
  grpc::Status RevokeToken(grpc::ServerContext* context, const v1::RevokeTokenRequest* request,
                           v1::TokenInfo* response) override;
  grpc::Status ListTokens(grpc::ServerContext* context, const v1::ListTokensRequest* request,
                          v1::ListTokensResponse* response) override;
  grpc::Status ListAudit(grpc::ServerContext* context, const v1::ListAuditRequest* request,
                         v1::ListAuditResponse* response) override;

  // Loads the database's valid tokens into the authorizer (start-up).
  static absl::Status LoadTokens(Store* store, Authorizer* authorizer);

  // Start-up check of ownership ids (issue 24, item 1). Releases and
  // sessions made before file-token ids became digests are owned by
  // "file:<line>", which named a token by its position in --tokens: after a
  // line is deleted, another token would sit on that line. Such owners are
  // never honoured silently. Without `adopt`: FAILED_PRECONDITION naming
  // them and the way out. With `adopt` (--adopt_line_owners): each
  // "file:N" owner, and the "file:N" scope of its idempotency keys, is
  // rewritten in one transaction to the id of the token now on line N of
  // `line_ids` (TokenRegistry::FromFile); refused when some line N holds no
  // token, since the file has then certainly changed. Adopting is right only
  // when the file has not been reordered, nor lines added or removed above
  // a token, since those releases were made: the operator's promise.
  // Audit rows and token created_by/revoked_by keep the old ids: history.
  static absl::Status CheckLegacyOwners(SharedDatabase* database,
                                        const std::vector<std::pair<int, std::string>>& line_ids,
                                        bool adopt);

  // Token labels: at most this many bytes (UTF-8), no control characters.
  static constexpr int kMaxLabelBytes = 200;

  // Where each --tokens file token was read (TokenRegistry::FromFile's
  // line numbers by principal id), so that revoking one can name its line.
  void SetTokenFileLines(const std::vector<std::pair<int, std::string>>& line_ids) {
    for (const auto& [line, id] : line_ids) token_file_lines_[id] = line;
  }

 private:
  Store* store_;
  Authorizer* authorizer_;
  const Clock* clock_;
  // Serialises revocations, so that two curators revoking each other's
  // tokens at once cannot both pass the last-curator check.
  std::mutex revoke_mutex_;
  absl::flat_hash_map<std::string, int> token_file_lines_;
};

// A new bearer token: "dpc_" and 48 hex digits (192 bits from RAND_bytes).
absl::StatusOr<std::string> NewBearerToken();

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_ADMIN_SERVICE_H_
