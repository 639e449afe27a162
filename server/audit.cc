#include "server/audit.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/log.h"

namespace dpcurator::server {
namespace {

constexpr int64_t kSecondsPerDay = 86400;
// The overflow key's peer: calls of keys past audit_refusal_max_keys.
constexpr absl::string_view kOverflowPeer = "*";

}  // namespace

v1::Role RoleToProto(Role role) {
  switch (role) {
    case Role::kCurator:
      return v1::ROLE_CURATOR;
    case Role::kAnalyst:
      return v1::ROLE_ANALYST;
    case Role::kDevice:
      return v1::ROLE_DEVICE;
  }
  return v1::ROLE_UNSPECIFIED;
}

std::optional<Role> RoleFromProto(v1::Role role) {
  switch (role) {
    case v1::ROLE_CURATOR:
      return Role::kCurator;
    case v1::ROLE_ANALYST:
      return Role::kAnalyst;
    case v1::ROLE_DEVICE:
      return Role::kDevice;
    default:
      return std::nullopt;
  }
}

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Create(Store* store, const Clock* clock,
                                                           const ServerLimits& limits) {
  const std::pair<const char*, int64_t> positive[] = {
      {"--audit-refusal-interval", limits.audit_refusal_interval_seconds},
      {"--audit-refusal-max-keys", limits.audit_refusal_max_keys}};
  for (const auto& [flag, value] : positive) {
    if (value < 1) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " must be >= 1, got ", value));
    }
  }
  const std::pair<const char*, int64_t> optional[] = {
      {"--audit-retention-days", limits.audit_retention_days},
      {"--audit-max-rows", limits.audit_max_rows}};
  for (const auto& [flag, value] : optional) {
    if (value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " must be >= 0 (0: no limit), got ", value));
    }
  }
  // A retention in days that overflows seconds is "forever".
  if (limits.audit_retention_days > INT64_MAX / kSecondsPerDay) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--audit-retention-days ", limits.audit_retention_days, " is too large; 0 keeps rows "
        "forever"));
  }
  return std::unique_ptr<AuditLog>(new AuditLog(store, clock, limits));
}

int64_t AuditLog::WriteRow(const CallRecord& call, int64_t count) {
  v1::AuditRecord record;
  record.set_created_unix(clock_->UnixNow());
  record.set_principal(call.principal);
  if (call.role.has_value()) record.set_role(RoleToProto(*call.role));
  record.set_method(call.method);
  record.set_target(call.target);
  record.set_code(call.code);
  // As noted by the handler once the charge was final: a release whose
  // computation failed and was refunded notes 0, one whose artefact could not
  // be stored after the charge keeps it (the ledger kept it too).
  record.set_epsilon(call.epsilon);
  record.set_detail(call.detail);
  absl::StatusOr<int64_t> id = store_->AppendAudit(record, count);
  if (!id.ok()) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    // The call's own outcome and the store's error code; the row itself is
    // lost, so what it would have said goes to the log. Every string here
    // was cut or made by the server (CallRecord).
    LogEvent(LogLevel::kError, "audit_write_failed")
        .Str("method", call.method)
        .Str("principal", call.principal)
        .Int("call_code", call.code)
        .Num("epsilon", record.epsilon())
        .Str("target", call.target)
        .Int("calls", count)
        .Code(id.status().code());
    return 0;
  }
  return *id;
}

void AuditLog::Write(const CallRecord& call) {
  if (RefusalAggregated(call)) {
    WriteRefusal(call);
    return;
  }
  WriteRow(call, 1);
}

void AuditLog::WriteRefusal(const CallRecord& call) {
  const int64_t interval = clock_->UnixNow() / limits_.audit_refusal_interval_seconds;
  std::vector<Repeats> ended;
  std::unique_lock<std::mutex> lock(mutex_);
  if (interval != interval_) {
    // The first refusal of a new interval closes the last one.
    for (auto& [key, pending] : pending_) {
      if (pending.repeats > 0 && pending.row_id > 0) {
        ended.push_back({pending.row_id, pending.repeats, std::get<0>(key), std::get<1>(key),
                         std::get<3>(key)});
      }
    }
    pending_.clear();
    regular_keys_ = 0;
    interval_ = interval;
  }
  CallRecord row = call;
  RefusalKey key{call.peer, call.method, call.principal, call.code};
  auto it = pending_.find(key);
  if (it == pending_.end() && regular_keys_ >= limits_.audit_refusal_max_keys) {
    // Past the key limit: one row per (method, code) for all other peers.
    row.peer = std::string(kOverflowPeer);  // (move: GCC 12 -Wrestrict misfires on = "*")
    row.principal.clear();
    row.role.reset();
    key = RefusalKey{row.peer, row.method, "", row.code};
    it = pending_.find(key);
  }
  if (it != pending_.end()) {
    ++it->second.repeats;
  } else {
    row.detail = absl::StrCat("peer=", row.peer);
    // Under the lock: a repeat arriving meanwhile waits and finds the row.
    // At most audit_refusal_max_keys (+ overflow) such writes per interval.
    const int64_t row_id = WriteRow(row, 1);
    pending_.emplace(key, Pending{row_id, 0});
    if (row.peer != kOverflowPeer) ++regular_keys_;
    LogEvent(LogLevel::kInfo, "call_refused")
        .Str("method", row.method)
        .Str("peer", row.peer)
        .Str("principal", row.principal)
        .Code(static_cast<absl::StatusCode>(row.code))
        .Int("audit_id", row_id)
        .Str("detail", "repeats from this peer with this method and code are counted in this "
                       "audit row until the interval ends");
  }
  lock.unlock();
  AddRepeats(ended);
}

void AuditLog::AddRepeats(const std::vector<Repeats>& repeats) {
  if (repeats.empty()) return;
  std::vector<std::pair<int64_t, int64_t>> counts;
  counts.reserve(repeats.size());
  for (const Repeats& r : repeats) counts.emplace_back(r.row_id, r.count);
  absl::Status status = store_->AddAuditRepeats(counts);
  if (!status.ok()) failures_.fetch_add(1, std::memory_order_relaxed);
  // One line per row per pass, bounded like the rows.
  for (const Repeats& r : repeats) {
    LogEvent(status.ok() ? LogLevel::kInfo : LogLevel::kError, "calls_refused_repeated")
        .Str("method", r.method)
        .Str("peer", r.peer)
        .Int("call_code", r.code)
        .Int("audit_id", r.row_id)
        .Int("calls", r.count)
        .Code(status.code());
  }
}

absl::StatusOr<int64_t> AuditLog::Maintain(bool all) {
  std::vector<Repeats> repeats;
  {
    const int64_t interval = clock_->UnixNow() / limits_.audit_refusal_interval_seconds;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [key, pending] : pending_) {
      if (pending.repeats > 0 && pending.row_id > 0) {
        repeats.push_back({pending.row_id, pending.repeats, std::get<0>(key), std::get<1>(key),
                           std::get<3>(key)});
      }
      pending.repeats = 0;
    }
    if (all || interval != interval_) {
      pending_.clear();
      regular_keys_ = 0;
      interval_ = interval;
    }
  }
  AddRepeats(repeats);
  const int64_t created_before =
      limits_.audit_retention_days == 0
          ? 0
          : clock_->UnixNow() - limits_.audit_retention_days * kSecondsPerDay;
  if (created_before <= 0 && limits_.audit_max_rows == 0) return 0;
  absl::StatusOr<int64_t> deleted = store_->PruneAudit(created_before, limits_.audit_max_rows);
  if (!deleted.ok()) {
    LogEvent(LogLevel::kError, "audit_retention_failed").Code(deleted.status().code());
    return deleted.status();
  }
  if (*deleted > 0) LogEvent(LogLevel::kInfo, "audit_rows_deleted").Int("rows", *deleted);
  return deleted;
}

}  // namespace dpcurator::server
