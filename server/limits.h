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
  // Metric labels and the audit's method column come from the server's
  // method table alone (CanonicalMethod), and every caller string is cut
  // before a metric, log line or audit row sees it: those need no setting.
  // What a caller without a valid token can still make the server write is
  // bounded by the four below (server/audit.h, AuditLog).

  // Calls refused for their token or role (no or unknown token, wrong role)
  // are audited as one row per (peer host, method, code, principal) per
  // interval of this many seconds: the first such call writes its row at
  // once (a client that has its answer can read it), repeats add to the
  // row's count when the interval ends (`calls=N` in its detail). An honest
  // client is refused rarely and by mistake: one row per minute of mistakes
  // loses nothing an auditor needs. Flag --audit-refusal-interval.
  int64_t audit_refusal_interval_seconds = 60;
  // At most this many distinct keys per interval; calls of further keys
  // are counted in one overflow row per (method, code) with peer "*". So a
  // flood from many addresses writes at most this many rows (plus ~60) a
  // minute. Honest deployments have a handful of peers, never hundreds
  // refused within one minute. Flag --audit-refusal-max-keys.
  int64_t audit_refusal_max_keys = 256;
  // Audit rows older than this many days are deleted by the server's
  // periodic pass (0: kept forever). A year is the common retention for
  // access logs; raise it if your policy keeps them longer.
  // Flag --audit-retention-days.
  int64_t audit_retention_days = 365;
  // At most this many audit rows are kept: the periodic pass deletes the
  // oldest beyond it (0: no cap). A row is at most ~700 bytes (target and
  // detail cut to 256), typically ~200: 10 million rows are 2 to 7 GB. The
  // README's and bench/'s workloads write thousands. Flag --audit-max-rows.
  int64_t audit_max_rows = 10'000'000;

  // ---- Per-token quotas: calls, streams, sessions, jobs, bytes (5, 7, 8).

  // ---- Memory and response size (items 3, 4).

  // Bytes that running releases and session steps may hold together
  // (--memory-budget; server/memory_budget.h). Every plan projects its peak
  // from public parameters (AIM's model at 73 bytes a cell, a partitioned
  // release's K parts, frequency matrices, step buffers, the rows it reads)
  // and reserves it before admission; past the budget it is refused,
  // nothing charged. 0: DefaultMemoryBudget(), three quarters of the cgroup
  // v2 limit (or physical memory) after a 1.5 GiB baseline for the row
  // cache and gRPC: 16.9 GiB on a 24 GiB machine, where the heaviest
  // documented workloads project under 2 GiB each (Adult AIM at the
  // default 10^7 cells 0.7 GiB; a Fashion-MNIST step 0.6 GiB with its
  // rows; the 10M-row demo release 1.8 GiB; memory_budget_test,
  // HonestWorkloadsTest). This also bounds AIM's max_model_cells: about
  // budget / 73 cells.
  int64_t memory_budget_bytes = 0;
  // Releases and session steps that may read a dataset's rows at once
  // (--max-row-readers; 0: DefaultRowReaders(), the hardware threads, at
  // least 2). Row bytes never decide a refusal (a row count is private
  // under ADD_REMOVE; MemoryBudget::Reserve says why): past this many, a
  // row-reading work waits before admission. Rows in memory are then at
  // most this many working copies of the largest dataset, a bound the
  // curator's uploads set and no analyst can move.
  int max_row_readers = 0;

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
