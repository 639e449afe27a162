#ifndef DPCURATOR_SERVER_AUTH_H_
#define DPCURATOR_SERVER_AUTH_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpcurator::server {

enum class Role { kCurator, kAnalyst, kDevice };
const char* RoleName(Role role);
std::optional<Role> ParseRole(absl::string_view name);

// Bearer tokens and their roles. Only SHA-256 digests of tokens are kept in
// memory; comparison is on digests with CRYPTO_memcmp.
class TokenRegistry {
 public:
  // Reads a token file: one "<role> <token>" per line, '#' comments. Tokens
  // must be at least 16 characters.
  static absl::StatusOr<TokenRegistry> FromFile(const std::string& path);
  absl::Status Add(Role role, absl::string_view token);
  // The role of a presented token, or UNAUTHENTICATED.
  absl::StatusOr<Role> Lookup(absl::string_view token) const;
  size_t size() const { return digests_.size(); }

 private:
  std::vector<std::pair<std::string, Role>> digests_;
};

// Which roles may call which RPC (full method name, e.g.
// "/dpcurator.v1.DatasetService/CreateDataset"). A method not listed is
// refused for everyone; the health service needs no token.
bool IsPublicMethod(absl::string_view method);
std::vector<Role> AllowedRoles(absl::string_view method);
const std::vector<std::string>& ProtectedMethods();

// The interceptor decides, once per call, whether the caller may run the
// method, and records the verdict for the handler. gRPC 1.51's server
// interceptors cannot end a call early, so (1) every handler starts with
// Authorizer::Check(context), which fails closed when no verdict exists, and
// (2) the interceptor rewrites the final status of a refused call, so the
// client sees UNAUTHENTICATED / PERMISSION_DENIED whatever the handler did.
class Authorizer {
 public:
  explicit Authorizer(TokenRegistry tokens) : tokens_(std::move(tokens)) {}

  // Called by the interceptor.
  grpc::Status Decide(absl::string_view method, const std::multimap<grpc::string_ref,
                                                                    grpc::string_ref>& metadata);
  void Record(const void* call, grpc::Status verdict, std::optional<Role> role);
  std::optional<grpc::Status> VerdictFor(const void* call);
  void Forget(const void* call);

  // Called first by every handler: OK with the caller's role, or the refusal.
  absl::StatusOr<Role> Check(const grpc::ServerContextBase* context);

  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeInterceptorFactory();

 private:
  struct Verdict {
    grpc::Status status;
    std::optional<Role> role;
  };
  TokenRegistry tokens_;
  std::mutex mutex_;
  absl::flat_hash_map<const void*, Verdict> verdicts_;
};

// gRPC status <-> absl::Status.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_AUTH_H_
