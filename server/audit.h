#ifndef DPCURATOR_SERVER_AUDIT_H_
#define DPCURATOR_SERVER_AUDIT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "dpcurator/v1/dpcurator.pb.h"
#include "server/auth.h"
#include "server/clock.h"
#include "server/limits.h"
#include "server/store.h"

namespace dpcurator::server {

// The audit log: one append-only row per protected RPC call (who, role,
// method, target, outcome, epsilon charged), written by the auth
// interceptor through Authorizer's AuditSink. It is the curator's answer to
// "who did what to the data and its budget, and who was refused": so
// successful read-only name lookups (ListDatasets) are left out
// (UnauditedLookup), and refusals a stranger can repeat are counted, not
// written one by one (below).
//
// The row is written AFTER the call's own transaction, in a transaction of
// its own, not inside it: the calls that charge budget commit in the ledger
// (Ledger::Admit, Complete, OpenSession) long before the handler knows its
// outcome, and refused calls have no transaction at all. So a failed audit
// write can never undo a committed release or charge; it is logged to stderr
// and counted (failures()), and the ledger stays the authority on epsilon.
//
// Bounded space (issue 36, item 2). A call refused for its token or role
// (CallRecord::refused_at_admission) is one a stranger can repeat at will,
// so such calls are aggregated: one row per (peer host, method, code,
// principal) per interval (ServerLimits::audit_refusal_interval_seconds).
// The first call of a key writes its row at once, so a client that has its
// answer can read it, as for any call; repeats are counted in memory and
// added to the row's count by the next Maintain() (`calls=N` in the row's
// detail). At most audit_refusal_max_keys keys per interval; calls of more
// keys go to one overflow row per (method, code) with peer "*". Memory and
// rows per interval are thus O(max_keys), whatever the flood. Calls that
// passed the verdict keep one row each (their rate is bounded by per-token
// quotas). Maintain() also applies the retention setting: rows older than
// audit_retention_days and the oldest beyond audit_max_rows are deleted
// (the audit table's triggers allow no other delete, and no update but a
// refused row's count).
class AuditLog {
 public:
  // Rows are dated by `clock` (the server's). INVALID_ARGUMENT, naming the
  // flag, for a limit out of range.
  static absl::StatusOr<std::unique_ptr<AuditLog>> Create(Store* store, const Clock* clock,
                                                          const ServerLimits& limits);
  // With the default limits.
  AuditLog(Store* store, const Clock* clock) : AuditLog(store, clock, ServerLimits()) {}

  // One row of its own, or (RefusalAggregated) a count on its key's row.
  void Write(const CallRecord& call);
  // Adds the repeats counted since the last pass to their rows, forgets
  // the keys of ended intervals (`all`: every key, at shutdown), then
  // deletes the rows past the retention setting. Returns the rows deleted.
  // Called by the server's periodic pass (CuratorServer::MaintainAuditLog).
  absl::StatusOr<int64_t> Maintain(bool all = false);
  // Audit rows that could not be written since start-up.
  int64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  AuditSink Sink() {
    return [this](const CallRecord& call) { Write(call); };
  }

 private:
  AuditLog(Store* store, const Clock* clock, const ServerLimits& limits)
      : store_(store), clock_(clock), limits_(limits) {}

  // One row, as written for every call that passed the verdict; its id, or
  // 0 when it could not be written (logged and counted).
  int64_t WriteRow(const CallRecord& call, int64_t count);
  void WriteRefusal(const CallRecord& call);
  struct Repeats {
    int64_t row_id = 0;
    int64_t count = 0;
    std::string peer;
    std::string method;
    int code = 0;
  };
  void AddRepeats(const std::vector<Repeats>& repeats);

  Store* store_;
  const Clock* clock_;
  ServerLimits limits_;
  std::atomic<int64_t> failures_{0};

  // (peer host, canonical method, principal, code) of a refused call.
  using RefusalKey = std::tuple<std::string, std::string, std::string, int>;
  struct Pending {
    int64_t row_id = 0;   // 0: its row could not be written
    int64_t repeats = 0;  // calls since the row was written or last counted
  };
  std::mutex mutex_;
  int64_t interval_ = -1;  // the interval (unix time / its length) of `pending_`
  absl::flat_hash_map<RefusalKey, Pending> pending_;
  int64_t regular_keys_ = 0;  // keys of `pending_` other than overflow ones
};

v1::Role RoleToProto(Role role);
std::optional<Role> RoleFromProto(v1::Role role);

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_AUDIT_H_
