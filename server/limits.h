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

#include "core/data/schema.h"

namespace dpcurator::server {

// ---- Open categorical columns (issue 38; docs/schema.md "Open columns").
// No flag: the server keeps each distinct value of an open column, so what
// an upload can make it store is bounded by the code. A value is at most
// data::kMaxOpenValueBytes (256) bytes, refused as its cell is parsed; a
// schema declares at most data::kMaxOpenColumns (16) open columns, refused
// when it is built; and one open column of one dataset stores at most
// kMaxOpenValuesPerColumn distinct values, counted inside the upload's
// transaction: an upload that would pass it is refused whole
// (RESOURCE_EXHAUSTED), nothing stored. So a dataset's dictionaries hold at
// most 16 x 100,000 x 256 bytes (410 MB; ~26 MB a column), read whole by
// every load of its rows. A category fit publishes far fewer values (each
// must be shared by tau rows); a column with more distinct values than
// this is an identifier, not a category: code or bucket it before upload.
inline constexpr int64_t kMaxOpenValuesPerColumn = 100'000;
inline constexpr int kMaxOpenValueBytes = data::kMaxOpenValueBytes;
inline constexpr int kMaxOpenColumns = data::kMaxOpenColumns;
// ---- Category fits (issue 38; docs/limits.md "Category fits"). A
// category_fit release publishes at most plan::kMaxFitCategories (10,000)
// values (0 asks for plan::kDefaultFitCategories, 1,000), refused before
// admission. Defined next to the plan that checks it (plan/category_fit.h,
// which this header does not include: it would pull the wire types into
// every user of the limits); named here so that every limit is found in
// one place.

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
  // Counted per principal (token id), every role alike; checked in
  // server/quotas.h. The process-wide bounds after them are gRPC's own.

  // Calls one token may have in flight at once, unary and streaming
  // (--max-concurrent-calls-per-token). A sync server holds a thread per
  // call, so without it one token could hold every thread. Honest peak: 32
  // concurrent releases (tests/server/concurrency_test.cc); DP-kernel's
  // parallel variant steps 10 sessions at once.
  int64_t max_concurrent_calls_per_token = 64;
  // Open streams (UploadRows, SubmitReports, DownloadReports) of one token
  // at once (--max-open-streams-per-token). An idle stream pins a server
  // thread until the client ends it (6,000 idle SubmitReports streams held
  // 6,014 threads and 557 MB). Honest clients hold one stream each; a fleet
  // of devices sharing one token (rather than a token each, as
  // --max-reports-per-token assumes) needs it raised.
  int64_t max_open_streams_per_token = 16;
  // OPEN sessions of one token (--max-open-sessions-per-token); each member
  // of a partitioned open counts. Honest peak: DP-kernel parallel's 10.
  int64_t max_open_sessions_per_token = 64;
  // Steps reserved by one token's OPEN sessions together
  // (--max-reserved-steps-per-token): each reserved step may store an
  // artefact, and a reservation of 2^30 steps cost epsilon 0.0035. Honest
  // peak: DP-kernel parallel on Fashion-MNIST, 10 x 4,000 steps.
  int64_t max_reserved_steps_per_token = 1000000;
  // Bytes of release and session step artefacts one token has stored
  // (--max-stored-bytes-per-token); refused once reached, so one artefact
  // past it at most. Honest peak: a full DP-kernel parallel Fashion-MNIST
  // run stores about 2 GB (40,000 steps of 16 x 784 gradients).
  int64_t max_stored_bytes_per_token = int64_t{16} << 30;
  // A release or session (each partitioned member) whose epsilon alone at
  // the dataset's delta is below this floor is "near-free"
  // (--near-free-epsilon); one token may hold at most
  // max_near_free_objects_per_token of them (--max-near-free-objects-per-token),
  // so objects that cost almost no budget cannot pile up. The floor sits
  // above the accountant's conversion floor: at delta 1e-5 an event of noise
  // multiplier 1e5 (RDP about 5e-11) still reports epsilon 0.0035, and a
  // thousand of them compose to about the same, so a floor under it would
  // count none of them (about 0.007 at delta 1e-12). Honest releases and
  // sessions (README, bench/, tests/e2e) spend epsilon 0.5 to 100.
  double near_free_epsilon = 0.01;
  int64_t max_near_free_objects_per_token = 1000;
  // PENDING jobs of one token on one external dataset
  // (--max-pending-jobs-per-token): the runner lists the oldest
  // 100; an analyst queued 300 near-free jobs in 3.8 s. Honest analysts wait
  // for a job or queue a handful.
  int64_t max_pending_jobs_per_token = 64;
  // How long a call refused by its handler with RESOURCE_EXHAUSTED, having
  // charged nothing (a quota above, the budget, the memory budget), waits
  // before its answer (--refusal-backoff-ms; 0: none). It holds the call's
  // slot meanwhile, so a token looping on refusals makes at most
  // max_concurrent_calls_per_token / 0.1 s of them instead of thousands a
  // second, and leaves the 2 cores and the database to honest callers
  // (bench/hostile_load phases 5 and 6). Honest clients are refused rarely
  // and can wait 0.1 s.
  int64_t refusal_backoff_ms = 100;

  // Process-wide (gRPC's knobs, server/curator_server.cc). Threads of the
  // sync server (--max-server-threads, grpc::ResourceQuota::SetMaxThreads):
  // past it new calls get RESOURCE_EXHAUSTED instead of a new thread.
  int max_server_threads = 1024;
  // Concurrent streams (calls) on one HTTP/2 connection
  // (--max-streams-per-connection, GRPC_ARG_MAX_CONCURRENT_STREAMS); a
  // client past it waits for one to finish.
  int max_streams_per_connection = 256;
  // A connection with no call for this long is closed
  // (--max-connection-idle-seconds, GRPC_ARG_MAX_CONNECTION_IDLE_MS); clients
  // reconnect on their next call. Keepalive pings (every
  // kKeepaliveSeconds, server/quotas.h) close connections whose peer is gone.
  int64_t max_connection_idle_seconds = 600;

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
  // No flag: the threads a row reader computes on are fixed by the code,
  // started for its computation and joined before it returns. A dp_sgd
  // step uses at most kMaxStepThreads (2, core/util/shard_pool.h): its own
  // and one more for its second row shard (issue 39); an rff or charfn
  // embedding's accumulation at most 2 as well; an MST release's pair
  // scores one per hardware thread. So the computing threads are at most
  // max_row_readers x max(2, hardware threads), beside the call threads.

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
