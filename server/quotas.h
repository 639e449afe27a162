#ifndef DPCURATOR_SERVER_QUOTAS_H_
#define DPCURATOR_SERVER_QUOTAS_H_

// Per-token quotas (issue 36, items 5, 7, 8; docs/limits.md "Per-token
// quotas"): what one token may make the server hold. Two halves:
//
//  - CallQuotas: calls and streams in flight per token, counted in a
//    server interceptor and refused through Authorizer::Refuse, so the
//    handler stops at its Check() and the thread is free again at once.
//  - ObjectQuotas: open sessions, reserved steps, stored artefact bytes,
//    near-free objects and pending external jobs per token, checked by the
//    ledger inside the admission's own transaction (after an idempotent
//    replay, before anything is written), so concurrent admissions of one
//    token cannot pass together and nothing is charged by a refusal. Each
//    check is O(1) in the history: a usage row kept by triggers in the
//    transaction that stores the artefact, or an indexed count bounded by
//    the quota itself (store.cc, migration 13).
//
// Every refusal is RESOURCE_EXHAUSTED and names the quota and the flag
// that sets it; none quotes a caller string or anything read from rows.

#include <grpcpp/support/server_interceptor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "core/privacy/events.h"
#include "server/limits.h"
#include "server/sqlite.h"

namespace dpcurator::server {

class Authorizer;

// Keepalive pings the server sends on a connection without traffic, and how
// long it waits for the answer before closing it (a peer that vanished
// without a FIN leaves no connection behind).
inline constexpr int64_t kKeepaliveSeconds = 120;
inline constexpr int64_t kKeepaliveTimeoutSeconds = 20;

// OK, or INVALID_ARGUMENT naming the flag of a limit that is not positive.
absl::Status ValidateQuotaLimits(const ServerLimits& limits);

// The text every quota refusal shares: "<what> over the server's --<flag>
// limit (<limit>); ask the curator to raise it".
absl::Status QuotaExceeded(const std::string& what, const char* flag, int64_t limit);

class CallQuotas {
 public:
  explicit CallQuotas(const ServerLimits& limits) : limits_(limits) {}
  CallQuotas(const CallQuotas&) = delete;
  CallQuotas& operator=(const CallQuotas&) = delete;

  // Takes a call slot (and a stream slot when `stream`) for `principal`,
  // or RESOURCE_EXHAUSTED naming the quota, taking nothing.
  absl::Status Acquire(const std::string& principal, bool stream);
  // Gives back what Acquire took.
  void Release(const std::string& principal, bool stream);
  // Calls (streams) `principal` has in flight now.
  int64_t calls(const std::string& principal) const;
  int64_t streams(const std::string& principal) const;

 private:
  struct InFlight {
    int64_t calls = 0;
    int64_t streams = 0;
  };
  const ServerLimits limits_;
  mutable std::mutex mutex_;
  // Only principals with something in flight: O(tokens), not O(calls ever).
  absl::flat_hash_map<std::string, InFlight> in_flight_;
};

// The interceptor: at POST_RECV_INITIAL_METADATA the call's token is looked
// up (Authorizer::Decide, the same verdict the authorizer records) and a
// slot taken; a call over a quota is refused through Authorizer::Refuse.
// The slot is given back when the call sends its status or, cancelled,
// when the call is destroyed. Calls without a valid token are the
// authorizer's to refuse and take no slot.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeCallQuotaInterceptorFactory(Authorizer* authorizer, CallQuotas* quotas);

class ObjectQuotas {
 public:
  explicit ObjectQuotas(const ServerLimits& limits) : limits_(limits) {}

  // A release (`job`: a pending job of an external dataset) about to be
  // charged `event` on `dataset_id` at `delta`, for `principal`. Checks the
  // stored bytes, the near-free count and (jobs) the pending jobs. `db` is
  // the admission's transaction.
  absl::Status CheckRelease(Database* db, const std::string& principal,
                            const std::string& dataset_id, double delta,
                            const privacy::PrivacyEvent& event, bool job) const;
  // `sessions` sessions of `steps` reserved steps in all, charged
  // `reserved` together (each member a near-free object when it is).
  absl::Status CheckSessions(Database* db, const std::string& principal, int64_t sessions,
                             int64_t steps, double delta,
                             const privacy::PrivacyEvent& reserved) const;
  // A session step about to store its artefact.
  absl::Status CheckStep(Database* db, const std::string& principal) const;

  const ServerLimits& limits() const { return limits_; }

 private:
  absl::Status CheckStoredBytes(Database* db, const std::string& principal) const;
  absl::Status CheckNearFree(Database* db, const std::string& principal, int64_t count,
                             double delta, const privacy::PrivacyEvent& event) const;
  const ServerLimits limits_;
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_QUOTAS_H_
