#ifndef DPCURATOR_SERVER_AUDIT_H_
#define DPCURATOR_SERVER_AUDIT_H_

#include <atomic>
#include <cstdint>
#include <optional>

#include "dpcurator/v1/dpcurator.pb.h"
#include "server/auth.h"
#include "server/clock.h"
#include "server/store.h"

namespace dpcurator::server {

// The audit log: one append-only row per protected RPC call (who, role,
// method, target, outcome, epsilon charged), written by the auth
// interceptor through Authorizer's AuditSink.
//
// The row is written AFTER the call's own transaction, in a transaction of
// its own, not inside it: the calls that charge budget commit in the ledger
// (Ledger::Admit, Complete, OpenSession) long before the handler knows its
// outcome, and refused calls have no transaction at all. So a failed audit
// write can never undo a committed release or charge; it is logged to stderr
// and counted (failures()), and the ledger stays the authority on epsilon.
class AuditLog {
 public:
  // Rows are dated by `clock` (the server's).
  AuditLog(Store* store, const Clock* clock) : store_(store), clock_(clock) {}

  void Write(const CallRecord& call);
  // Audit rows that could not be written since start-up.
  int64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  AuditSink Sink() {
    return [this](const CallRecord& call) { Write(call); };
  }

 private:
  Store* store_;
  const Clock* clock_;
  std::atomic<int64_t> failures_{0};
};

v1::Role RoleToProto(Role role);
std::optional<Role> RoleFromProto(v1::Role role);

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_AUDIT_H_
