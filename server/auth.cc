#include "server/auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dpcurator::server {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr absl::string_view kBearerPrefix = "Bearer ";

std::string Sha256(absl::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

struct MethodRule {
  const char* method;
  std::vector<Role> roles;
};

const std::vector<MethodRule>& Rules() {
  static const auto* rules = new std::vector<MethodRule>{
      {"/dpcurator.v1.DatasetService/CreateDataset", {Role::kCurator}},
      {"/dpcurator.v1.DatasetService/UploadRows", {Role::kCurator}},
      {"/dpcurator.v1.DatasetService/ListDatasets", {Role::kCurator, Role::kAnalyst}},
      {"/dpcurator.v1.DatasetService/GetBudget", {Role::kCurator, Role::kAnalyst}},
      {"/dpcurator.v1.ReleaseService/RequestRelease", {Role::kAnalyst}},
      {"/dpcurator.v1.ReleaseService/GetRelease", {Role::kAnalyst}},
      {"/dpcurator.v1.ReleaseService/ListReleases", {Role::kAnalyst, Role::kCurator}},
      {"/dpcurator.v1.SessionService/OpenSession", {Role::kAnalyst}},
      {"/dpcurator.v1.SessionService/Step", {Role::kAnalyst}},
      {"/dpcurator.v1.SessionService/CloseSession", {Role::kAnalyst}},
      {"/dpcurator.v1.SessionService/GetSession", {Role::kAnalyst}},
      // Local-DP collections: the mechanism parameters are public.
      {"/dpcurator.v1.CollectionService/CreateCollection", {Role::kCurator}},
      {"/dpcurator.v1.CollectionService/GetCollection",
       {Role::kCurator, Role::kAnalyst, Role::kDevice}},
      {"/dpcurator.v1.CollectionService/CloseCollection", {Role::kCurator}},
      {"/dpcurator.v1.CollectionService/SubmitReports", {Role::kDevice}},
      {"/dpcurator.v1.CollectionService/DownloadReports", {Role::kAnalyst}},
  };
  return *rules;
}

class AuthInterceptor final : public grpc::experimental::Interceptor {
 public:
  AuthInterceptor(Authorizer* authorizer, grpc::experimental::ServerRpcInfo* info)
      : authorizer_(authorizer), info_(info) {}
  ~AuthInterceptor() override { authorizer_->Forget(info_->server_context()); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      const auto* metadata = methods->GetRecvInitialMetadata();
      static const std::multimap<grpc::string_ref, grpc::string_ref> kEmpty;
      grpc::Status verdict = authorizer_->Decide(info_->method(), metadata ? *metadata : kEmpty);
      std::optional<Role> role;
      if (verdict.ok() && metadata != nullptr) {
        // Decide() put the role in the message of an OK status.
        role = ParseRole(verdict.error_message());
      }
      authorizer_->Record(info_->server_context(), verdict.ok() ? grpc::Status::OK : verdict,
                          role);
      if (!verdict.ok()) refused_ = verdict;
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        refused_.has_value()) {
      methods->ModifySendStatus(*refused_);
    }
    methods->Proceed();
  }

 private:
  Authorizer* authorizer_;
  grpc::experimental::ServerRpcInfo* info_;
  std::optional<grpc::Status> refused_;
};

class AuthInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit AuthInterceptorFactory(Authorizer* authorizer) : authorizer_(authorizer) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new AuthInterceptor(authorizer_, info);
  }

 private:
  Authorizer* authorizer_;
};

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kCurator:
      return "curator";
    case Role::kAnalyst:
      return "analyst";
    case Role::kDevice:
      return "device";
  }
  return "unknown";
}

std::optional<Role> ParseRole(absl::string_view name) {
  if (name == "curator") return Role::kCurator;
  if (name == "analyst") return Role::kAnalyst;
  if (name == "device") return Role::kDevice;
  return std::nullopt;
}

absl::StatusOr<TokenRegistry> TokenRegistry::FromFile(const std::string& path) {
  std::ifstream input(path);
  if (!input) {
    return absl::NotFoundError(absl::StrCat("cannot open token file '", path, "'"));
  }
  TokenRegistry registry;
  std::string line;
  int line_number = 0;
  while (std::getline(input, line)) {
    ++line_number;
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    std::vector<absl::string_view> parts = absl::StrSplit(text, ' ', absl::SkipEmpty());
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line_number, ": expected '<curator|analyst|device> <token>'"));
    }
    auto role = ParseRole(parts[0]);
    if (!role.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": unknown role '",
                                                     parts[0], "' (curator, analyst, device)"));
    }
    auto status = registry.Add(*role, parts[1]);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": ", status.message()));
    }
  }
  if (registry.size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("token file '", path, "' has no tokens"));
  }
  return registry;
}

absl::Status TokenRegistry::Add(Role role, absl::string_view token) {
  if (token.size() < kMinTokenLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens must be at least ", kMinTokenLength, " characters"));
  }
  digests_.emplace_back(Sha256(token), role);
  return absl::OkStatus();
}

absl::StatusOr<Role> TokenRegistry::Lookup(absl::string_view token) const {
  const std::string digest = Sha256(token);
  std::optional<Role> found;
  for (const auto& [known, role] : digests_) {
    if (CRYPTO_memcmp(known.data(), digest.data(), digest.size()) == 0) found = role;
  }
  if (!found.has_value()) return absl::UnauthenticatedError("unknown or revoked token");
  return *found;
}

bool IsPublicMethod(absl::string_view method) {
  return absl::StartsWith(method, "/grpc.health.v1.Health/");
}

std::vector<Role> AllowedRoles(absl::string_view method) {
  for (const auto& rule : Rules()) {
    if (method == rule.method) return rule.roles;
  }
  return {};
}

const std::vector<std::string>& ProtectedMethods() {
  static const auto* methods = [] {
    auto* list = new std::vector<std::string>;
    for (const auto& rule : Rules()) list->push_back(rule.method);
    return list;
  }();
  return *methods;
}

grpc::Status Authorizer::Decide(
    absl::string_view method,
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) {
  if (IsPublicMethod(method)) return grpc::Status::OK;
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing bearer token: send 'authorization: Bearer <token>' "
                        "(dpcurator --token or $DPCURATOR_TOKEN)");
  }
  absl::string_view header(it->second.data(), it->second.size());
  if (!absl::StartsWith(header, kBearerPrefix)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "authorization metadata must be 'Bearer <token>'");
  }
  auto role = tokens_.Lookup(header.substr(kBearerPrefix.size()));
  if (!role.ok()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(role.status().message()));
  }
  const std::vector<Role> allowed = AllowedRoles(method);
  if (std::find(allowed.begin(), allowed.end(), *role) == allowed.end()) {
    std::string names;
    for (Role r : allowed) absl::StrAppend(&names, names.empty() ? "" : " or ", RoleName(r));
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("role ", RoleName(*role), " may not call ", method,
                                     names.empty() ? "" : absl::StrCat(" (needs ", names, ")")));
  }
  // OK; the role travels in the message to the interceptor.
  return grpc::Status(grpc::StatusCode::OK, RoleName(*role));
}

void Authorizer::Record(const void* call, grpc::Status verdict, std::optional<Role> role) {
  std::lock_guard<std::mutex> lock(mutex_);
  verdicts_[call] = Verdict{std::move(verdict), role};
}

std::optional<grpc::Status> Authorizer::VerdictFor(const void* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = verdicts_.find(call);
  if (it == verdicts_.end()) return std::nullopt;
  return it->second.status;
}

void Authorizer::Forget(const void* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  verdicts_.erase(call);
}

absl::StatusOr<Role> Authorizer::Check(const grpc::ServerContextBase* context) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = verdicts_.find(static_cast<const void*>(context));
  if (it == verdicts_.end()) {
    // Fail closed: no interceptor verdict means no access.
    return absl::PermissionDeniedError("call was not authorised");
  }
  if (!it->second.status.ok()) return FromGrpcStatus(it->second.status);
  if (!it->second.role.has_value()) return absl::PermissionDeniedError("call has no role");
  return *it->second.role;
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
Authorizer::MakeInterceptorFactory() {
  return std::make_unique<AuthInterceptorFactory>(this);
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace dpcurator::server
