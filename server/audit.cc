#include "server/audit.h"

#include "server/log.h"

namespace dpcurator::server {

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

void AuditLog::Write(const CallRecord& call) {
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
  absl::Status status = store_->AppendAudit(record);
  if (!status.ok()) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    // The call's own outcome and the store's error code; the row itself is
    // lost, so what it would have said goes to the log.
    LogEvent(LogLevel::kError, "audit_write_failed")
        .Str("method", call.method)
        .Str("principal", call.principal)
        .Int("call_code", call.code)
        .Num("epsilon", record.epsilon())
        .Str("target", call.target)
        .Code(status.code());
  }
}

}  // namespace dpcurator::server
