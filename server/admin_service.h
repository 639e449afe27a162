#ifndef DPCURATOR_SERVER_ADMIN_SERVICE_H_
#define DPCURATOR_SERVER_ADMIN_SERVICE_H_

#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "dpcurator/v1/dpcurator.grpc.pb.h"
#include "server/auth.h"
#include "server/clock.h"
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

  static constexpr int kMaxLabelLength = 200;

 private:
  Store* store_;
  Authorizer* authorizer_;
  const Clock* clock_;
  // Serialises revocations, so that two curators revoking each other's
  // tokens at once cannot both pass the last-curator check.
  std::mutex revoke_mutex_;
};

// A new bearer token: "dpc_" and 48 hex digits (192 bits from RAND_bytes).
absl::StatusOr<std::string> NewBearerToken();

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_ADMIN_SERVICE_H_
