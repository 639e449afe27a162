#include "server/admin_service.h"

#include <openssl/rand.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "server/audit.h"
#include "server/log.h"
#include "server/sqlite.h"

namespace dpcurator::server {
namespace {

// 192 bits: far beyond guessing, and the "dpc_" prefix lets secret scanners
// and people recognise a leaked token.
constexpr int kTokenRandomBytes = 24;
constexpr char kTokenPrefix[] = "dpc_";
constexpr char kFilePrincipalPrefix[] = "file:";

absl::Status ValidateLabel(const std::string& label) {
  // Bytes, as counted: a character outside ASCII takes 2 to 4 of them in
  // UTF-8 (issue 36, item 9: the message used to say characters).
  if (label.size() > AdminServiceImpl::kMaxLabelBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token label must be at most ", AdminServiceImpl::kMaxLabelBytes,
        " bytes of UTF-8 (got ", label.size(), "; a character outside ASCII takes 2 to 4)"));
  }
  for (unsigned char c : label) {
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError("token label must not contain control characters");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> NewBearerToken() {
  unsigned char bytes[kTokenRandomBytes];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return absl::InternalError("OpenSSL RAND_bytes failed: cannot make a token");
  }
  return absl::StrCat(kTokenPrefix,
                      absl::BytesToHexString(absl::string_view(
                          reinterpret_cast<const char*>(bytes), sizeof(bytes))));
}

absl::Status AdminServiceImpl::LoadTokens(Store* store, Authorizer* authorizer) {
  DPC_ASSIGN_OR_RETURN(auto tokens, store->ListTokens(/*include_revoked=*/false));
  for (auto& token : tokens) {
    auto role = RoleFromProto(token.info.role());
    if (!role.has_value()) {
      return absl::DataLossError(
          absl::StrCat("token ", token.info.token_id(), " has no valid role in the database"));
    }
    DPC_RETURN_IF_ERROR(
        authorizer->AddToken(std::move(token.digest), Principal{token.info.token_id(), *role}));
  }
  return absl::OkStatus();
}

absl::Status AdminServiceImpl::CheckLegacyOwners(
    SharedDatabase* database, const std::vector<std::pair<int, std::string>>& line_ids,
    bool adopt) {
  auto db = database->Lock();
  // Read-only: which owners still have the line-number form.
  std::vector<std::string> legacy;
  {
    DPC_ASSIGN_OR_RETURN(
        Statement query,
        db->Prepare("SELECT owner FROM releases WHERE owner GLOB 'file:[0-9]*' UNION "
                    "SELECT owner FROM sessions WHERE owner GLOB 'file:[0-9]*' ORDER BY 1"));
    while (true) {
      DPC_ASSIGN_OR_RETURN(bool row, query.Step());
      if (!row) break;
      std::string owner = query.ColumnText(0);
      if (IsLegacyFileTokenId(owner)) legacy.push_back(std::move(owner));
    }
  }
  if (legacy.empty()) return absl::OkStatus();
  const std::string listed = absl::StrJoin(legacy, ", ");
  if (!adopt) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the ledger has releases or sessions owned by ", listed,
        ": ids from before issue 24 that name a --tokens file token by its LINE NUMBER. File "
        "tokens are now identified by a digest of the token, so those owners match no token, "
        "and honouring them by line would give them to whatever token sits on that line now "
        "(a deleted line moves every later token up). If the token file is line for line as "
        "it was when they were made, restart once with --adopt_line_owners: each file:N "
        "owner and its idempotency keys move to the token now on line N. If lines were "
        "deleted or moved since, first restore the file as it was, adopt, then revoke by "
        "deleting lines (safe from now on). docs/architecture.md, Threat model."));
  }
  absl::flat_hash_map<std::string, std::string> new_ids;
  for (const auto& [line, id] : line_ids) new_ids[absl::StrCat("file:", line)] = id;
  for (const std::string& owner : legacy) {
    if (!new_ids.contains(owner)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--adopt_line_owners: the ledger has owner ", owner, " but line ", owner.substr(5),
          " of --tokens holds no token: the file changed since. Restore it as it was when ",
          "those releases and sessions were made, adopt, then revoke."));
    }
  }
  DPC_ASSIGN_OR_RETURN(Transaction transaction, Transaction::BeginImmediate(db.get()));
  for (const std::string& owner : legacy) {
    const std::string& id = new_ids[owner];
    const std::string old_scope = absl::StrCat(owner, "\x1f");
    const std::string new_scope = absl::StrCat(id, "\x1f");
    for (const char* table : {"releases", "sessions"}) {
      DPC_ASSIGN_OR_RETURN(
          Statement update,
          db->Prepare(absl::StrCat("UPDATE ", table, " SET owner = ?1 WHERE owner = ?2")));
      DPC_RETURN_IF_ERROR(update.Bind(1, id).Bind(2, owner).Run());
      // The ledger scopes idempotency keys as "<principal>\x1f<key>".
      DPC_ASSIGN_OR_RETURN(
          Statement rescope,
          db->Prepare(absl::StrCat("UPDATE ", table,
                                   " SET idempotency_key = ?1 || substr(idempotency_key, "
                                   "length(?2) + 1) WHERE substr(idempotency_key, 1, "
                                   "length(?2)) = ?2")));
      DPC_RETURN_IF_ERROR(rescope.Bind(1, new_scope).Bind(2, old_scope).Run());
    }
  }
  DPC_RETURN_IF_ERROR(transaction.Commit());
  LogEvent(LogLevel::kWarning, "line_owners_adopted").Str("owners", listed);
  return absl::OkStatus();
}

grpc::Status AdminServiceImpl::CreateToken(grpc::ServerContext* context,
                                           const v1::CreateTokenRequest* request,
                                           v1::CreateTokenResponse* response) {
  auto caller = authorizer_->Caller(context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  const std::optional<Role> role = RoleFromProto(request->role());
  if (!role.has_value()) {
    return ToGrpcStatus(
        absl::InvalidArgumentError("a token needs a role: curator, analyst or device"));
  }
  if (auto status = ValidateLabel(request->label()); !status.ok()) return ToGrpcStatus(status);
  auto token = NewBearerToken();
  if (!token.ok()) return ToGrpcStatus(token.status());
  const std::string digest = TokenDigest(*token);
  v1::TokenInfo info;
  info.set_token_id(NewId("tok"));
  info.set_role(request->role());
  info.set_label(request->label());
  info.set_created_unix(clock_->UnixNow());
  info.set_created_by(caller->id);
  authorizer_->NoteTarget(context, info.token_id());
  authorizer_->NoteDetail(context, absl::StrCat("role=", RoleName(*role)));
  // Durable first: a token that works is a token the database knows.
  if (auto status = store_->InsertToken(info, digest); !status.ok()) {
    return ToGrpcStatus(status);
  }
  if (auto status = authorizer_->AddToken(digest, Principal{info.token_id(), *role});
      !status.ok()) {
    return ToGrpcStatus(status);
  }
  *response->mutable_info() = info;
  response->set_token(*std::move(token));
  // The token id only: never the token.
  LogEvent(LogLevel::kInfo, "token_created")
      .Str("token_id", info.token_id())
      .Str("token_role", RoleName(*role))
      .Str("by", caller->id);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::RevokeToken(grpc::ServerContext* context,
                                           const v1::RevokeTokenRequest* request,
                                           v1::TokenInfo* response) {
  auto caller = authorizer_->Caller(context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  const std::string& id = request->token_id();
  authorizer_->NoteTarget(context, id);
  std::lock_guard<std::mutex> lock(revoke_mutex_);
  const std::vector<Principal> valid = authorizer_->Principals();
  auto found = std::find_if(valid.begin(), valid.end(),
                            [&](const Principal& p) { return p.id == id; });
  if (absl::StartsWith(id, kFilePrincipalPrefix)) {
    if (found == valid.end()) {
      return ToGrpcStatus(absl::NotFoundError(absl::StrCat(
          "no token '", id, "' (list them with `dpcurator admin token list`)")));
    }
    // The id is a digest of the token, not a line (FileTokenId): say which
    // line held it when the server read the file, and how to find it if
    // the file changed since (issue 36, item 9).
    auto line = token_file_lines_.find(id);
    return ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
        "token ", id, " comes from the server's --tokens file",
        line == token_file_lines_.end()
            ? std::string()
            : absl::StrCat(" (line ", line->second, " when the server started)"),
        ": remove the line holding that token from the file and restart the server to "
        "revoke it. The id is 'file:' and the first 16 hex digits of the SHA-256 of "
        "\"dpcurator principal\", a zero byte and the token: printf 'dpcurator "
        "principal\\0%s' \"$TOKEN\" | sha256sum | cut -c1-16")));
  }
  if (found != valid.end() && found->role == Role::kCurator) {
    const auto curators = std::count_if(valid.begin(), valid.end(), [](const Principal& p) {
      return p.role == Role::kCurator;
    });
    if (curators <= 1) {
      return ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
          "token ", id, " is the last valid curator token",
          id == caller->id ? " (the one this call uses)" : "",
          ": revoking it would leave nobody able to administer this server. Create another "
          "curator token first (dpcurator admin token create --role curator)")));
    }
  }
  auto revoked = store_->RevokeToken(id, caller->id);
  if (!revoked.ok()) return ToGrpcStatus(revoked.status());
  authorizer_->RevokeToken(id);
  *response = *std::move(revoked);
  LogEvent(LogLevel::kInfo, "token_revoked").Str("token_id", id).Str("by", caller->id);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ListTokens(grpc::ServerContext* context,
                                          const v1::ListTokensRequest* request,
                                          v1::ListTokensResponse* response) {
  if (auto role = authorizer_->Check(context); !role.ok()) return ToGrpcStatus(role.status());
  // Tokens from the --tokens file first (they have no database row).
  for (const Principal& principal : authorizer_->Principals()) {
    if (!absl::StartsWith(principal.id, kFilePrincipalPrefix)) continue;
    v1::TokenInfo* info = response->add_tokens();
    info->set_token_id(principal.id);
    info->set_role(RoleToProto(principal.role));
    info->set_label("from the --tokens file");
  }
  auto stored = store_->ListTokens(request->include_revoked());
  if (!stored.ok()) return ToGrpcStatus(stored.status());
  for (auto& token : *stored) *response->add_tokens() = std::move(token.info);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ListAudit(grpc::ServerContext* context,
                                         const v1::ListAuditRequest* request,
                                         v1::ListAuditResponse* response) {
  if (auto role = authorizer_->Check(context); !role.ok()) return ToGrpcStatus(role.status());
  auto page = store_->ListAudit(request->limit(), request->before_id());
  if (!page.ok()) return ToGrpcStatus(page.status());
  *response = *std::move(page);
  return grpc::Status::OK;
}

}  // namespace dpcurator::server
