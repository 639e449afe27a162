#ifndef DPCURATOR_SERVER_AUTH_H_
#define DPCURATOR_SERVER_AUTH_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpcurator::server {

enum class Role { kCurator, kAnalyst, kDevice };
const char* RoleName(Role role);
std::optional<Role> ParseRole(absl::string_view name);

// Who made a call: the token's id (never the token) and its role. Ids are
// "tok_<hex>" for tokens made by AdminService.CreateToken and "file:<16 hex>"
// (FileTokenId) for tokens read from the --tokens file.
struct Principal {
  std::string id;
  Role role = Role::kAnalyst;
};

// SHA-256 of a token, 32 raw bytes: the only form in which the server keeps
// a token, in memory and in the database.
std::string TokenDigest(absl::string_view token);

// The principal id of a --tokens file token: "file:" and the first 16 hex
// digits (64 bits) of SHA-256("dpcurator principal\0" + token).
//
// Why a digest and not the line number: release and session ownership and
// idempotency scope key on this id, and a line number moves when a line is
// deleted, so revoking analyst A (delete A's line, restart) used to hand A's
// releases and sessions to whoever moved onto A's line (issue 24, item 1).
// The id is a function of the token alone, so it follows the token wherever
// it sits in the file and dies with it.
//
// Why showing it to curators (ListTokens, audit rows, created_by) is safe:
// the domain-separation prefix makes it differ from TokenDigest (the stored
// form), and recovering a token from 64 bits of its SHA-256 needs a brute
// force over the token space; tokens are at least 16 characters and should
// be random (NewBearerToken makes 192-bit ones), which puts that out of
// reach. 64 bits make an accidental collision between two file tokens
// negligible (about n^2 / 2^65), and FromFile refuses one anyway.
std::string FileTokenId(absl::string_view token);
// True for an id of the old line-number form "file:<digits>" (before issue
// 24), as releases.owner, sessions.owner and idempotency scopes may hold.
bool IsLegacyFileTokenId(absl::string_view id);

// Bearer tokens and their principals, indexed by digest. Not thread-safe;
// Authorizer guards its registry with a mutex.
class TokenRegistry {
 public:
  // Reads a token file: one "<role> <token>" per line, '#' comments. Tokens
  // must be at least 16 characters. Principal ids are FileTokenId(token),
  // never the line. An empty file (no tokens) is allowed: the database may
  // hold the tokens. When `line_ids` is given, it receives each token line's
  // number (1-based, as the old "file:<line>" ids counted) and its new id:
  // what --adopt_line_owners needs to migrate a ledger (AdoptLineOwners).
  static absl::StatusOr<TokenRegistry> FromFile(
      const std::string& path, std::vector<std::pair<int, std::string>>* line_ids = nullptr);
  // A token in clear (file tokens, tests); `id` defaults to FileTokenId.
  absl::Status Add(Role role, absl::string_view token, std::string id = "");
  // A token known by its digest only (from the database).
  absl::Status AddDigest(std::string digest, Principal principal);
  // Forgets the token with this principal id; false when none had it.
  bool Remove(absl::string_view id);
  // Whether a token with this principal id is registered (a scan).
  bool HasPrincipal(absl::string_view id) const;
  // The principal of a presented token, or UNAUTHENTICATED.
  absl::StatusOr<Principal> Lookup(absl::string_view token) const;
  std::vector<Principal> Principals() const;
  size_t size() const { return by_digest_.size(); }

 private:
  // Keyed by SHA-256 digest. A hash lookup's timing can only tell an
  // attacker about digests, which are preimage-resistant: it reveals nothing
  // usable about any token.
  absl::flat_hash_map<std::string, Principal> by_digest_;
};

// Which roles may call which RPC (full method name, e.g.
// "/dpcurator.v1.DatasetService/CreateDataset"). A method not listed is
// refused for everyone. Only the two methods the health service has
// (/grpc.health.v1.Health/Check and /Watch) need no token: any other path,
// under the health prefix or not, is refused before gRPC answers
// UNIMPLEMENTED, since the interceptors run first (issue 36, item 1).
bool IsPublicMethod(absl::string_view method);
std::vector<Role> AllowedRoles(absl::string_view method);
const std::vector<std::string>& ProtectedMethods();
// The server's own name for a method path: the full name from its method
// table (the health methods and ProtectedMethods()), or "unknown" for any
// other path. Static storage. What metrics, log lines and audit rows keep
// instead of the path a caller sent, which is caller text of up to the
// metadata limit (8 KiB) and unbounded in variety (issue 36, items 1-2).
absl::string_view CanonicalMethod(absl::string_view method);
inline constexpr absl::string_view kUnknownMethod = "unknown";
// "ipv4:127.0.0.1" for "ipv4:127.0.0.1:54321": the peer's host without its
// port (a new connection has a new port), cut to kMaxPeerBytes.
std::string PeerHost(absl::string_view peer);
inline constexpr size_t kMaxPeerBytes = 64;

// What the audit log records about one protected call. The interceptor
// fills the caller, method and outcome; the handler adds the object it acted
// on and the epsilon it charged (Authorizer::Note*).
struct CallRecord {
  std::string method;     // CanonicalMethod: never the path as sent
  std::string peer;       // PeerHost of the connection
  // Refused before any handler ran: by the authorizer's verdict (no or
  // unknown token, wrong role) or by the call-quota interceptor through
  // Authorizer::Refuse. Audited in
  // bounded space (AuditLog), as are calls whose handler refused them with
  // RESOURCE_EXHAUSTED and charged nothing (a quota, the budget, the memory
  // budget): AuditLog::Aggregated.
  bool refused_at_admission = false;
  std::string principal;  // empty: not authenticated
  std::optional<Role> role;
  std::string target;
  double epsilon = 0.0;
  std::string detail;
  int code = 0;  // grpc::StatusCode of the final status
};
// Whether a finished call (its record's code set) is audited in bounded
// space, one row per key and interval with a count (AuditLog), and logged
// once per such row rather than once per call: refused before any handler
// ran (CallRecord::refused_at_admission), or refused by its handler with
// RESOURCE_EXHAUSTED having charged nothing (a per-token quota, the budget
// cap, the memory budget). A charged call keeps its own row and line.
bool RefusalAggregated(const CallRecord& call);

// Calls that get no audit row: a successful ListDatasets, the read-only
// listing that the client's dataset name lookup makes. The audit log is the
// curator's record of who acted on the data and its budget (uploads,
// releases, sessions, deletions, tokens) and of every refusal; listing the
// public metadata (schemas, budget totals) that any token holder may read
// changes nothing and costs no epsilon, and a row per lookup buried the rows
// that matter (issue 38).
bool UnauditedLookup(const CallRecord& call);

// Called once per protected call, after the handler returned and before the
// status is sent (so a client that sees the status can read the row).
using AuditSink = std::function<void(const CallRecord&)>;

// The interceptor decides, once per call, whether the caller may run the
// method, and records the verdict for the handler. gRPC 1.51's server
// interceptors cannot end a call early, so (1) every handler starts with
// Authorizer::Check(context), which fails closed when no verdict exists, and
// (2) the interceptor rewrites the final status of a refused call, so the
// client sees UNAUTHENTICATED / PERMISSION_DENIED whatever the handler did.
class Authorizer {
 public:
  explicit Authorizer(TokenRegistry tokens, AuditSink audit = nullptr)
      : tokens_(std::move(tokens)), audit_(std::move(audit)) {}

  struct Decision {
    grpc::Status status;
    // Set whenever the token is valid, also when its role is refused.
    std::optional<Principal> principal;
    // Revocations counted when the token was looked up (StillAuthorized).
    uint64_t revocations = 0;
  };
  // Called by the interceptor.
  Decision Decide(absl::string_view method,
                  const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;
  // `method` is the path as received: only CanonicalMethod(method) is kept.
  void Record(const void* call, absl::string_view method, Decision decision,
              absl::string_view peer = "");
  // Ends a call: hands its record, with `final_status`, to the audit sink
  // (protected methods only) and forgets it.
  void Finish(const void* call, const grpc::Status& final_status);

  // Called first by every handler: OK with the caller's role, or the refusal.
  absl::StatusOr<Role> Check(const grpc::ServerContextBase* context);
  // The authorised caller of a call that passed Check().
  absl::StatusOr<Principal> Caller(const grpc::ServerContextBase* context);
  // Whether the call's token is still valid now. The verdict is taken once,
  // when the call starts; a stream (UploadRows, SubmitReports) asks this
  // before each message it receives, so that a token revoked meanwhile
  // (RevokeToken) stops the stream at its next message (issue 24, item 4).
  // `message` is the 0-based index of the message about to be handled, so
  // that the refusal can say what the stream stored: OK, or
  // UNAUTHENTICATED "the token was revoked during the stream; nothing after
  // message <message - 1> was stored" ("nothing of this stream" for 0), or
  // Check()'s refusal. O(1) unless a token was revoked since the call's
  // verdict (a revocation counter), then one scan of the registry.
  absl::Status StillAuthorized(const grpc::ServerContextBase* context, int64_t message);

  // Audit annotations by handlers (no-ops for unknown calls). Target and
  // detail are cut to kMaxAuditTextBytes: the input-limits interceptor
  // already bounds caller text, this is defence in depth so that no caller
  // string can grow the audit log without bound.
  static constexpr size_t kMaxAuditTextBytes = 256;
  void NoteTarget(const grpc::ServerContextBase* context, absl::string_view target);
  void NoteEpsilon(const grpc::ServerContextBase* context, double epsilon);
  void NoteDetail(const grpc::ServerContextBase* context, absl::string_view detail);

  // Refuses a call after the fact (the input-limits interceptor, whose
  // checks run on received messages): Check() returns `status` from now on
  // and the final status of the call is rewritten to it. An earlier
  // refusal (e.g. UNAUTHENTICATED) is kept. Order-independent: a refusal
  // that arrives before the authorizer's verdict is merged into it.
  // `before_handler`: refused when the call arrives, before its handler
  // could do anything (the call-quota interceptor), so the call is audited
  // and logged in aggregate (RefusalAggregated).
  void Refuse(const void* call, const grpc::Status& status, bool before_handler);
  // The call's refusal, if any (the authorizer's or a Refuse()).
  std::optional<grpc::Status> Refusal(const void* call);
  // Whether the call, ending with `code`, is audited and logged in
  // aggregate (RefusalAggregated): refused before any handler ran (the
  // verdict, or a Refuse() by the call-quota interceptor),
  // or refused by its handler with RESOURCE_EXHAUSTED having charged
  // nothing. Such calls are the ones a caller can repeat at will.
  bool Aggregated(const void* call, absl::StatusCode code);

  // The server's send limit (ServerOptions::max_message_bytes; 0: none
  // known). gRPC fails a response over it with RESOURCE_EXHAUSTED after the
  // handler returned, so the handler's OK is not what the client gets: the
  // interceptors check each serialized response against it (CheckSend) and
  // refuse the call, so that the audit row and the metrics record the code
  // the client gets (issue 36, item 9).
  void SetMaxSendMessageBytes(int64_t bytes) { max_send_message_bytes_ = bytes; }
  // ServerLimits::refusal_backoff_ms (0: none).
  void SetRefusalBackoffMs(int64_t ms) { refusal_backoff_ms_ = ms; }
  // Sleeps refusal_backoff_ms when the call's handler refused it with
  // RESOURCE_EXHAUSTED having charged nothing (a per-token quota, the
  // budget, the memory budget): a token that loops on refused calls then
  // makes a few a second per call slot instead of thousands, and leaves the
  // CPU and the database to honest callers. The call still holds its quota
  // slot, so at most max_concurrent_calls_per_token such waits per token.
  // The wait is a constant: it tells nothing the refusal did not.
  void BackOffAfterRefusal(const void* call, const grpc::Status& status);
  int64_t max_send_message_bytes() const { return max_send_message_bytes_; }
  // Called at PRE_SEND_MESSAGE by the interceptors: refuses the call
  // (Refuse) when the serialized response is over the send limit.
  void CheckSend(const void* call, grpc::experimental::InterceptorBatchMethods* methods);

  // Token changes by the admin service; effective from the next call.
  absl::Status AddToken(std::string digest, Principal principal);
  bool RevokeToken(absl::string_view id);
  std::vector<Principal> Principals() const;

  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeInterceptorFactory();

 private:
  struct Verdict {
    grpc::Status status;
    std::optional<Role> role;
    CallRecord record;
    // revocations_ when the principal was last known to be registered.
    uint64_t revocations_seen = 0;
  };
  mutable std::shared_mutex tokens_mutex_;
  TokenRegistry tokens_;
  // Tokens revoked since start; changed under tokens_mutex_ held uniquely,
  // read under it shared (so a lookup and this count are consistent).
  uint64_t revocations_ = 0;
  AuditSink audit_;
  int64_t max_send_message_bytes_ = 0;
  int64_t refusal_backoff_ms_ = 0;
  std::mutex mutex_;
  absl::flat_hash_map<const void*, Verdict> verdicts_;
  // Refuse() calls that came before Record() for their call.
  struct EarlyRefusal {
    grpc::Status status;
    bool before_handler = false;  // Refuse()'s argument
  };
  absl::flat_hash_map<const void*, EarlyRefusal> early_refusals_;
};

// gRPC status <-> absl::Status.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_AUTH_H_
