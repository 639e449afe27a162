// Store methods for bearer tokens and the audit log (migrations 4 and 11 in
// store.cc).
#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "server/store.h"

namespace dpcurator::server {
namespace {

constexpr const char* kTokenColumns =
    "id, role, digest, label, created_unix, created_by, revoked_unix, revoked_by";
constexpr const char* kAuditColumns =
    "id, created_unix, principal, role, method, target, code, epsilon, detail, count";
// ListAudit's page size when none is asked for, and its ceiling.
constexpr int kDefaultAuditLimit = 100;
constexpr int kMaxAuditLimit = 10000;
// Rows one retention transaction deletes at most: the database lock is
// released between batches, so a first pass over a large table does not
// stall the calls waiting for it.
constexpr int64_t kPruneBatchRows = 20000;

Store::StoredToken TokenFromRow(const Statement& row) {
  Store::StoredToken token;
  token.info.set_token_id(row.ColumnText(0));
  token.info.set_role(RoleProtoFromName(row.ColumnText(1)));
  token.digest = row.ColumnBlob(2);
  token.info.set_label(row.ColumnText(3));
  token.info.set_created_unix(row.ColumnInt(4));
  token.info.set_created_by(row.ColumnText(5));
  if (!row.ColumnIsNull(6)) token.info.set_revoked_unix(row.ColumnInt(6));
  if (!row.ColumnIsNull(7)) token.info.set_revoked_by(row.ColumnText(7));
  return token;
}

}  // namespace

absl::Status Store::InsertToken(const v1::TokenInfo& info, const std::string& digest) {
  if (RoleProtoName(info.role())[0] == '\0') {
    return absl::InvalidArgumentError("a token needs a role: curator, analyst or device");
  }
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto insert,
                       db->Prepare(absl::StrCat("INSERT INTO tokens (", kTokenColumns,
                                                 ") VALUES (?, ?, ?, ?, ?, ?, NULL, NULL)")));
  return insert.Bind(1, info.token_id())
      .Bind(2, RoleProtoName(info.role()))
      .BindBlob(3, digest)
      .Bind(4, info.label())
      .Bind(5, info.created_unix())
      .Bind(6, info.created_by())
      .Run();
}

absl::StatusOr<std::vector<Store::StoredToken>> Store::ListTokens(bool include_revoked) {
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(
      auto query, db->Prepare(absl::StrCat("SELECT ", kTokenColumns, " FROM tokens",
                                            include_revoked ? "" : " WHERE revoked_unix IS NULL",
                                            " ORDER BY created_unix, id")));
  std::vector<StoredToken> tokens;
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    tokens.push_back(TokenFromRow(query));
  }
  return tokens;
}

absl::StatusOr<v1::TokenInfo> Store::RevokeToken(const std::string& token_id,
                                                 const std::string& revoked_by) {
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db.get()));
  DPC_ASSIGN_OR_RETURN(auto query, db->Prepare(absl::StrCat("SELECT ", kTokenColumns,
                                                             " FROM tokens WHERE id = ?")));
  query.Bind(1, token_id);
  DPC_ASSIGN_OR_RETURN(bool found, query.Step());
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("no token '", token_id, "' (list them with `dpcurator admin token list`)"));
  }
  StoredToken token = TokenFromRow(query);
  if (token.info.revoked_unix() != 0) {
    return absl::FailedPreconditionError(absl::StrCat("token ", token_id,
                                                      " is already revoked (at unix time ",
                                                      token.info.revoked_unix(), ")"));
  }
  const int64_t now = clock_->UnixNow();
  DPC_ASSIGN_OR_RETURN(auto update, db->Prepare("UPDATE tokens SET revoked_unix = ?, "
                                                 "revoked_by = ? WHERE id = ?"));
  DPC_RETURN_IF_ERROR(update.Bind(1, now).Bind(2, revoked_by).Bind(3, token_id).Run());
  DPC_RETURN_IF_ERROR(transaction.Commit());
  token.info.set_revoked_unix(now);
  token.info.set_revoked_by(revoked_by);
  return token.info;
}

absl::StatusOr<int64_t> Store::AppendAudit(const v1::AuditRecord& record, int64_t count) {
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto insert,
                       db->Prepare("INSERT INTO audit_log (created_unix, principal, role, "
                                    "method, target, code, epsilon, detail, count) VALUES (?, ?, "
                                    "?, ?, ?, ?, ?, ?, ?)"));
  DPC_RETURN_IF_ERROR(insert.Bind(1, record.created_unix())
                          .Bind(2, record.principal())
                          .Bind(3, RoleProtoName(record.role()))
                          .Bind(4, record.method())
                          .Bind(5, record.target())
                          .Bind(6, int64_t{record.code()})
                          .Bind(7, record.epsilon())
                          .Bind(8, record.detail())
                          .Bind(9, count)
                          .Run());
  return db->LastInsertRowId();
}

absl::Status Store::AddAuditRepeats(const std::vector<std::pair<int64_t, int64_t>>& counts) {
  if (counts.empty()) return absl::OkStatus();
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db.get()));
  DPC_ASSIGN_OR_RETURN(auto update,
                       db->Prepare("UPDATE audit_log SET count = count + ? WHERE id = ?"));
  for (const auto& [id, repeats] : counts) {
    if (repeats <= 0) continue;
    update.Reset();
    DPC_RETURN_IF_ERROR(update.Bind(1, repeats).Bind(2, id).Run());
  }
  return transaction.Commit();
}

absl::StatusOr<int64_t> Store::PruneAudit(int64_t created_before_unix, int64_t max_rows) {
  int64_t deleted = 0;
  while (true) {
    auto db = database_->Lock();
    DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db.get()));
    DPC_ASSIGN_OR_RETURN(auto bounds,
                         db->Prepare("SELECT COALESCE(MIN(id), 0), COALESCE(MAX(id), 0) FROM "
                                     "audit_log"));
    DPC_ASSIGN_OR_RETURN(bool has_row, bounds.Step());
    if (!has_row || bounds.ColumnInt(1) == 0) return deleted;
    const int64_t min_id = bounds.ColumnInt(0);
    const int64_t max_id = bounds.ColumnInt(1);
    // Rows below `below` go: ids grow with time, so the rows older than
    // the cutoff are those up to the newest of them, and the newest
    // max_rows rows are those from max_id - max_rows + 1 on.
    int64_t below = 0;
    if (created_before_unix > 0) {
      DPC_ASSIGN_OR_RETURN(auto old_rows,
                           db->Prepare("SELECT COALESCE(MAX(id), 0) FROM audit_log WHERE "
                                       "created_unix < ?"));
      old_rows.Bind(1, created_before_unix);
      DPC_ASSIGN_OR_RETURN(bool row, old_rows.Step());
      if (row && old_rows.ColumnInt(0) > 0) below = old_rows.ColumnInt(0) + 1;
    }
    if (max_rows > 0 && max_id - max_rows + 1 > below) below = max_id - max_rows + 1;
    if (below <= min_id) return deleted;
    below = std::min(below, min_id + kPruneBatchRows);
    DPC_ASSIGN_OR_RETURN(auto mark,
                         db->Prepare("UPDATE audit_retention SET below_id = max(below_id, ?) "
                                     "WHERE id = 1"));
    DPC_RETURN_IF_ERROR(mark.Bind(1, below).Run());
    DPC_ASSIGN_OR_RETURN(auto prune, db->Prepare("DELETE FROM audit_log WHERE id < ?"));
    DPC_RETURN_IF_ERROR(prune.Bind(1, below).Run());
    deleted += db->Changes();
    DPC_RETURN_IF_ERROR(transaction.Commit());
  }
}

absl::StatusOr<v1::ListAuditResponse> Store::ListAudit(int limit, int64_t before_id,
                                                       size_t max_bytes) {
  if (limit < 0) return absl::InvalidArgumentError("limit must be >= 0");
  if (limit == 0) limit = kDefaultAuditLimit;
  limit = std::min(limit, kMaxAuditLimit);
  auto db = database_->Lock();
  // One row more than the limit: whether older rows follow.
  DPC_ASSIGN_OR_RETURN(auto query,
                       db->Prepare(absl::StrCat("SELECT ", kAuditColumns,
                                                 " FROM audit_log WHERE (? = 0 OR id < ?) ORDER "
                                                 "BY id DESC LIMIT ?")));
  query.Bind(1, before_id).Bind(2, before_id).Bind(3, int64_t{limit} + 1);
  v1::ListAuditResponse response;
  // 10,000 rows of 256-byte targets and details are about 6 MiB: the page
  // also stops at max_bytes (issue 24: `admin audit` failed with "Sent
  // message larger than max").
  PageBudget budget(limit, max_bytes);
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    v1::AuditRecord record;
    record.set_id(query.ColumnInt(0));
    record.set_created_unix(query.ColumnInt(1));
    record.set_principal(query.ColumnText(2));
    record.set_role(RoleProtoFromName(query.ColumnText(3)));
    record.set_method(query.ColumnText(4));
    record.set_target(query.ColumnText(5));
    record.set_code(static_cast<int32_t>(query.ColumnInt(6)));
    record.set_epsilon(query.ColumnDouble(7));
    record.set_detail(query.ColumnText(8));
    // A refused call's row stands for its repeats too (migration 12).
    if (const int64_t count = query.ColumnInt(9); count > 1) {
      record.set_detail(absl::StrCat(record.detail(), record.detail().empty() ? "" : " ",
                                     "calls=", count));
    }
    const size_t bytes = record.ByteSizeLong();
    if (!budget.Fits(bytes)) {
      response.set_next_before_id(response.records(response.records_size() - 1).id());
      break;
    }
    budget.Add(bytes);
    *response.add_records() = std::move(record);
  }
  return response;
}

}  // namespace dpcurator::server
