#ifndef DPCURATOR_SERVER_LIMITS_H_
#define DPCURATOR_SERVER_LIMITS_H_

// Every resource a caller can make the server hold, bounded in one table
// (issue 36; ../shared/design/limits.md). A limit is named here with its
// default and its meaning, set by one dpcurator-server flag (server/main.cc),
// checked before admission, and listed in docs/limits.md. A refusal names
// the limit and the flag that sets it, charges nothing and stores nothing.
//
// Defaults are chosen so that the honest workloads the project documents
// (the README's quick starts, bench/ and the e2e tests) never meet them.
// Per-message input bounds (string sizes, repeated entries) stay in
// server/input_limits.h: they are properties of the wire format, not of
// the deployment.

#include <cstdint>

namespace dpcurator::server {

struct ServerLimits {
  // ---- Strangers: metric series, log lines, audit rows (items 1, 2, 9).

  // ---- Per-token quotas: calls, streams, sessions, jobs, bytes (5, 7, 8).

  // ---- Memory and response size (items 3, 4).

  // ---- The ledger (item 6).
  //
  // No flag: the ledger's work per call is bounded by construction, not by
  // a setting. Admission reads and updates the dataset's running state
  // (ledger_totals: the RDP sum per order, the plain-Gaussian sum and flag,
  // the grid-Gaussian case) in the event's transaction, O(grid); every
  // other lookup on a release's or session's path is an index seek
  // (migration 11); the metrics' gauges read Ledger::Position, never the
  // report. GetBudget pages its events and sessions with the List calls'
  // bounds (server/paging.h: kMaxPageSize rows, kMaxPageBytes a page).
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_LIMITS_H_
