#include "server/auth.h"

#include <openssl/sha.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/util/status_macros.h"

namespace dpcurator::server {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr absl::string_view kFilePrincipalPrefix = "file:";
// 8 bytes = 16 hex digits of the domain-separated digest (auth.h says why).
constexpr size_t kFileIdBytes = 8;
constexpr absl::string_view kBearerPrefix = "Bearer ";
// The methods of grpc.health.v1.Health (grpc/health/v1/health.proto): the
// only paths a caller without a token may reach.
constexpr absl::string_view kHealthCheck = "/grpc.health.v1.Health/Check";
constexpr absl::string_view kHealthWatch = "/grpc.health.v1.Health/Watch";

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
      {"/dpcurator.v1.DatasetService/DeleteDataset", {Role::kCurator}},
      {"/dpcurator.v1.DatasetService/SetBins", {Role::kCurator}},
      // Issue 38: an open column's list, as SetBins sets bins.
      {"/dpcurator.v1.DatasetService/SetCategories", {Role::kCurator}},
      {"/dpcurator.v1.ReleaseService/RequestRelease", {Role::kAnalyst}},
      {"/dpcurator.v1.ReleaseService/GetRelease", {Role::kAnalyst}},
      {"/dpcurator.v1.ReleaseService/ListReleases", {Role::kAnalyst, Role::kCurator}},
      // The curator's runner (external datasets, docs/scale-out.md): only a
      // curator sees or submits an exact statistic.
      {"/dpcurator.v1.RunnerService/ListPendingJobs", {Role::kCurator}},
      {"/dpcurator.v1.RunnerService/SubmitStatistic", {Role::kCurator}},
      {"/dpcurator.v1.RunnerService/FailJob", {Role::kCurator}},
      {"/dpcurator.v1.SessionService/OpenSession", {Role::kAnalyst}},
      {"/dpcurator.v1.SessionService/OpenPartitionedSessions", {Role::kAnalyst}},
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
      // Tokens and the audit log.
      {"/dpcurator.v1.AdminService/CreateToken", {Role::kCurator}},
      {"/dpcurator.v1.AdminService/RevokeToken", {Role::kCurator}},
      {"/dpcurator.v1.AdminService/ListTokens", {Role::kCurator}},
      {"/dpcurator.v1.AdminService/ListAudit", {Role::kCurator}},
  };
  return *rules;
}

// At most `max_bytes` (Authorizer::kMaxAuditTextBytes) of `text`, cut
// before a UTF-8 continuation byte so that the audit row stays valid proto3
// text.
absl::string_view AuditText(absl::string_view text,
                            size_t max_bytes = Authorizer::kMaxAuditTextBytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

class AuthInterceptor final : public grpc::experimental::Interceptor {
 public:
  AuthInterceptor(Authorizer* authorizer, grpc::experimental::ServerRpcInfo* info)
      : authorizer_(authorizer), info_(info) {}
  ~AuthInterceptor() override {
    // A call that never reached PRE_SEND_STATUS (cancelled) is still audited.
    if (!finished_) {
      authorizer_->Finish(info_->server_context(),
                          grpc::Status(grpc::StatusCode::CANCELLED, "call ended without status"));
    }
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      const auto* metadata = methods->GetRecvInitialMetadata();
      static const std::multimap<grpc::string_ref, grpc::string_ref> kEmpty;
      Authorizer::Decision decision =
          authorizer_->Decide(info_->method(), metadata ? *metadata : kEmpty);
      if (!decision.status.ok()) refused_ = decision.status;
      authorizer_->Record(info_->server_context(), info_->method(), std::move(decision),
                          info_->server_context()->peer());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      authorizer_->CheckSend(info_->server_context(), methods);
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      // A refusal made after the verdict (Authorizer::Refuse, e.g. an
      // oversized field) ends the call the same way.
      if (!refused_.has_value()) refused_ = authorizer_->Refusal(info_->server_context());
      if (refused_.has_value()) methods->ModifySendStatus(*refused_);
      const grpc::Status final_status =
          refused_.has_value() ? *refused_ : methods->GetSendStatus();
      // A handler's refusal that charged nothing waits before it is sent
      // (ServerLimits::refusal_backoff_ms), holding the call's quota slot.
      authorizer_->BackOffAfterRefusal(info_->server_context(), final_status);
      // Audited before the status leaves: a client that has its answer can
      // already read the call's audit row.
      authorizer_->Finish(info_->server_context(), final_status);
      finished_ = true;
    }
    methods->Proceed();
  }

 private:
  Authorizer* authorizer_;
  grpc::experimental::ServerRpcInfo* info_;
  std::optional<grpc::Status> refused_;
  bool finished_ = false;
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

bool RefusalAggregated(const CallRecord& call) {
  // A handler's RESOURCE_EXHAUSTED with nothing charged is a refusal before
  // admission: an authenticated caller can repeat it at will, thousands a
  // second, and one synced audit row and one log line each made such a
  // flood an fsync storm that slowed every honest call (bench/hostile_load
  // phases 5 to 8).
  return call.refused_at_admission ||
         (call.code == static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED) &&
          call.epsilon == 0.0);
}

bool UnauditedLookup(const CallRecord& call) {
  // ListDatasets is the client's name lookup: most commands given a dataset
  // by name make one, so a row per success filled the log with reads of
  // what every token holder may see (issue 38). Its refusals stay audited.
  return call.method == "/dpcurator.v1.DatasetService/ListDatasets" &&
         call.code == static_cast<int>(grpc::StatusCode::OK);
}

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

std::string TokenDigest(absl::string_view token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

std::string FileTokenId(absl::string_view token) {
  // Domain separation: this id must never equal (a prefix of) TokenDigest.
  static constexpr absl::string_view kDomain("dpcurator principal\0", 20);
  const std::string digest = TokenDigest(absl::StrCat(kDomain, token));
  return absl::StrCat(kFilePrincipalPrefix,
                      absl::BytesToHexString(absl::string_view(digest).substr(0, kFileIdBytes)));
}

bool IsLegacyFileTokenId(absl::string_view id) {
  if (!absl::ConsumePrefix(&id, kFilePrincipalPrefix) || id.empty()) return false;
  // New ids are 16 hex digits; old ones are line numbers (a file of 10^15
  // lines is not a thing), so 16 characters cannot be a legacy id.
  if (id.size() >= 2 * kFileIdBytes) return false;
  return std::all_of(id.begin(), id.end(), [](char c) { return absl::ascii_isdigit(c); });
}

absl::StatusOr<TokenRegistry> TokenRegistry::FromFile(
    const std::string& path, std::vector<std::pair<int, std::string>>* line_ids) {
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
    std::string id = FileTokenId(parts[1]);
    auto status = registry.Add(*role, parts[1], id);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": ", status.message()));
    }
    if (line_ids != nullptr) line_ids->emplace_back(line_number, std::move(id));
  }
  return registry;
}

absl::Status TokenRegistry::Add(Role role, absl::string_view token, std::string id) {
  if (token.size() < kMinTokenLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens must be at least ", kMinTokenLength, " characters"));
  }
  if (id.empty()) id = FileTokenId(token);
  return AddDigest(TokenDigest(token), Principal{std::move(id), role});
}

absl::Status TokenRegistry::AddDigest(std::string digest, Principal principal) {
  if (digest.size() != SHA256_DIGEST_LENGTH) {
    return absl::InvalidArgumentError("a token digest is 32 bytes (SHA-256)");
  }
  if (auto it = by_digest_.find(digest); it != by_digest_.end()) {
    return absl::AlreadyExistsError(absl::StrCat("token ", principal.id, " is the same token as ",
                                                 it->second.id, "; give each one its own"));
  }
  // Two tokens with one id would share releases and sessions: refused (for
  // file ids only a 64-bit digest collision could do it).
  for (const auto& [other_digest, other] : by_digest_) {
    if (other.id == principal.id) {
      return absl::AlreadyExistsError(absl::StrCat(
          "two tokens have the principal id ", principal.id, "; replace one of them"));
    }
  }
  by_digest_.emplace(std::move(digest), std::move(principal));
  return absl::OkStatus();
}

bool TokenRegistry::Remove(absl::string_view id) {
  for (auto it = by_digest_.begin(); it != by_digest_.end(); ++it) {
    if (it->second.id == id) {
      by_digest_.erase(it);
      return true;
    }
  }
  return false;
}

bool TokenRegistry::HasPrincipal(absl::string_view id) const {
  for (const auto& [digest, principal] : by_digest_) {
    if (principal.id == id) return true;
  }
  return false;
}

absl::StatusOr<Principal> TokenRegistry::Lookup(absl::string_view token) const {
  auto it = by_digest_.find(TokenDigest(token));
  if (it == by_digest_.end()) return absl::UnauthenticatedError("unknown or revoked token");
  return it->second;
}

std::vector<Principal> TokenRegistry::Principals() const {
  std::vector<Principal> principals;
  principals.reserve(by_digest_.size());
  for (const auto& [digest, principal] : by_digest_) principals.push_back(principal);
  std::sort(principals.begin(), principals.end(),
            [](const Principal& a, const Principal& b) { return a.id < b.id; });
  return principals;
}

bool IsPublicMethod(absl::string_view method) {
  return method == kHealthCheck || method == kHealthWatch;
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

absl::string_view CanonicalMethod(absl::string_view method) {
  // One hash lookup: this runs for every call, hostile ones included.
  static const auto* table = [] {
    auto* names = new absl::flat_hash_map<std::string, absl::string_view>;
    for (absl::string_view name : {kHealthCheck, kHealthWatch}) names->emplace(name, name);
    for (const std::string& name : ProtectedMethods()) names->emplace(name, name);
    return names;
  }();
  auto it = table->find(method);
  return it == table->end() ? kUnknownMethod : it->second;
}

std::string PeerHost(absl::string_view peer) {
  // gRPC writes "ipv4:1.2.3.4:port", "ipv6:[::1]:port" and "unix:path".
  if (absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:")) {
    const size_t colon = peer.rfind(':');
    if (colon > 4) peer = peer.substr(0, colon);
  }
  return std::string(AuditText(peer, kMaxPeerBytes));
}

Authorizer::Decision Authorizer::Decide(
    absl::string_view method,
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  if (IsPublicMethod(method)) return {grpc::Status::OK, std::nullopt};
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return {grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                         "missing bearer token: send 'authorization: Bearer <token>' "
                         "(dpcurator --token or $DPCURATOR_TOKEN)"),
            std::nullopt};
  }
  absl::string_view header(it->second.data(), it->second.size());
  if (!absl::StartsWith(header, kBearerPrefix)) {
    return {grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                         "authorization metadata must be 'Bearer <token>'"),
            std::nullopt};
  }
  absl::StatusOr<Principal> principal;
  uint64_t revocations = 0;
  {
    std::shared_lock<std::shared_mutex> lock(tokens_mutex_);
    principal = tokens_.Lookup(header.substr(kBearerPrefix.size()));
    revocations = revocations_;
  }
  if (!principal.ok()) {
    return {grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                         std::string(principal.status().message())),
            std::nullopt};
  }
  const std::vector<Role> allowed = AllowedRoles(method);
  if (std::find(allowed.begin(), allowed.end(), principal->role) == allowed.end()) {
    std::string names;
    for (Role r : allowed) absl::StrAppend(&names, names.empty() ? "" : " or ", RoleName(r));
    // The method as the server names it: the path a caller sent is not
    // echoed (CanonicalMethod).
    return {grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                         absl::StrCat("role ", RoleName(principal->role), " may not call ",
                                      CanonicalMethod(method),
                                      names.empty() ? "" : absl::StrCat(" (needs ", names, ")"))),
            *std::move(principal), revocations};
  }
  return {grpc::Status::OK, *std::move(principal), revocations};
}

void Authorizer::Record(const void* call, absl::string_view method, Decision decision,
                        absl::string_view peer) {
  Verdict verdict;
  verdict.record.refused_at_admission = !decision.status.ok();
  verdict.status = std::move(decision.status);
  verdict.record.method = std::string(CanonicalMethod(method));
  verdict.record.peer = PeerHost(peer);
  verdict.revocations_seen = decision.revocations;
  if (decision.principal.has_value()) {
    verdict.record.principal = decision.principal->id;
    verdict.record.role = decision.principal->role;
    if (verdict.status.ok()) verdict.role = decision.principal->role;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto early = early_refusals_.find(call); early != early_refusals_.end()) {
    if (verdict.status.ok()) {
      verdict.status = std::move(early->second.status);
      verdict.role.reset();
      verdict.record.refused_at_admission = early->second.before_handler;
    }
    early_refusals_.erase(early);
  }
  verdicts_[call] = std::move(verdict);
}

void Authorizer::Refuse(const void* call, const grpc::Status& status, bool before_handler) {
  if (status.ok()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = verdicts_.find(call);
  if (it == verdicts_.end()) {
    early_refusals_.try_emplace(call, EarlyRefusal{status, before_handler});
    return;
  }
  if (it->second.status.ok()) {
    it->second.status = status;
    it->second.role.reset();  // Check() fails from now on
    // Refused before its handler could do anything (a per-token call
    // quota): a token holder can repeat it at will, so it is audited in
    // bounded space like a refused token (AuditLog).
    it->second.record.refused_at_admission = before_handler;
  }
}

std::optional<grpc::Status> Authorizer::Refusal(const void* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = verdicts_.find(call);
  if (it != verdicts_.end()) {
    if (it->second.status.ok()) return std::nullopt;
    return it->second.status;
  }
  auto early = early_refusals_.find(call);
  if (early != early_refusals_.end()) return early->second.status;
  return std::nullopt;
}

void Authorizer::BackOffAfterRefusal(const void* call, const grpc::Status& status) {
  if (refusal_backoff_ms_ <= 0 || status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = verdicts_.find(call);
    // Refused before the handler (a call-quota refusal holds no slot, so
    // sleeping there would let a flood pile up threads), or charged: no wait.
    if (it == verdicts_.end() || it->second.record.refused_at_admission ||
        it->second.record.epsilon != 0.0) {
      return;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(refusal_backoff_ms_));
}

bool Authorizer::Aggregated(const void* call, absl::StatusCode code) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = verdicts_.find(call);
  if (it == verdicts_.end()) return false;
  CallRecord record;
  record.refused_at_admission = it->second.record.refused_at_admission;
  record.epsilon = it->second.record.epsilon;
  record.code = static_cast<int>(code);
  return RefusalAggregated(record);
}

void Authorizer::Finish(const void* call, const grpc::Status& final_status) {
  CallRecord record;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    early_refusals_.erase(call);
    auto it = verdicts_.find(call);
    if (it == verdicts_.end()) return;
    record = std::move(it->second.record);
    verdicts_.erase(it);
  }
  if (audit_ == nullptr || IsPublicMethod(record.method)) return;
  record.code = static_cast<int>(final_status.error_code());
  if (UnauditedLookup(record)) return;
  audit_(record);
}

void Authorizer::CheckSend(const void* call,
                           grpc::experimental::InterceptorBatchMethods* methods) {
  if (max_send_message_bytes_ <= 0) return;
  // Serializes the response now instead of in the call's batch: it happens
  // once either way, and the serialized form is the only one every method
  // has (the health service sends byte buffers).
  grpc::ByteBuffer* buffer = methods->GetSerializedSendMessage();
  if (buffer == nullptr) return;
  const int64_t bytes = static_cast<int64_t>(buffer->Length());
  if (bytes <= max_send_message_bytes_) return;
  // gRPC itself fails this send with RESOURCE_EXHAUSTED, whatever the
  // handler returns; this makes the call's recorded code that one.
  Refuse(call, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            absl::StrCat("the response is ", bytes,
                                         " bytes, over the server's send limit of ",
                                         max_send_message_bytes_, " bytes")),
         /*before_handler=*/false);
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

absl::StatusOr<Principal> Authorizer::Caller(const grpc::ServerContextBase* context) {
  DPC_ASSIGN_OR_RETURN(Role role, Check(context));
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = verdicts_.find(static_cast<const void*>(context));
  if (it == verdicts_.end()) return absl::PermissionDeniedError("call was not authorised");
  return Principal{it->second.record.principal, role};
}

absl::Status Authorizer::StillAuthorized(const grpc::ServerContextBase* context,
                                         int64_t message) {
  DPC_ASSIGN_OR_RETURN(Principal caller, Caller(context));
  uint64_t seen = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = verdicts_.find(static_cast<const void*>(context));
    if (it == verdicts_.end()) return absl::PermissionDeniedError("call was not authorised");
    seen = it->second.revocations_seen;
  }
  uint64_t now = 0;
  {
    std::shared_lock<std::shared_mutex> lock(tokens_mutex_);
    now = revocations_;
    // No revocation since the principal was last seen registered: still is.
    if (now == seen) return absl::OkStatus();
    if (!tokens_.HasPrincipal(caller.id)) {
      // Each message before this one was committed before the next was
      // read (UploadRows, SubmitReports), so this is exactly what stays.
      return absl::UnauthenticatedError(absl::StrCat(
          "the token was revoked during the stream; ",
          message == 0 ? std::string("nothing of this stream was stored")
                       : absl::StrCat("nothing after message ", message - 1, " was stored")));
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = verdicts_.find(static_cast<const void*>(context));
  if (it != verdicts_.end()) it->second.revocations_seen = now;
  return absl::OkStatus();
}

void Authorizer::NoteTarget(const grpc::ServerContextBase* context, absl::string_view target) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = verdicts_.find(static_cast<const void*>(context));
  if (it != verdicts_.end()) it->second.record.target = std::string(AuditText(target));
}

void Authorizer::NoteEpsilon(const grpc::ServerContextBase* context, double epsilon) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = verdicts_.find(static_cast<const void*>(context));
  if (it != verdicts_.end()) it->second.record.epsilon = epsilon;
}

void Authorizer::NoteDetail(const grpc::ServerContextBase* context, absl::string_view detail) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = verdicts_.find(static_cast<const void*>(context));
  if (it != verdicts_.end()) it->second.record.detail = std::string(AuditText(detail));
}

absl::Status Authorizer::AddToken(std::string digest, Principal principal) {
  std::unique_lock<std::shared_mutex> lock(tokens_mutex_);
  return tokens_.AddDigest(std::move(digest), std::move(principal));
}

bool Authorizer::RevokeToken(absl::string_view id) {
  std::unique_lock<std::shared_mutex> lock(tokens_mutex_);
  if (!tokens_.Remove(id)) return false;
  ++revocations_;
  return true;
}

std::vector<Principal> Authorizer::Principals() const {
  std::shared_lock<std::shared_mutex> lock(tokens_mutex_);
  return tokens_.Principals();
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
