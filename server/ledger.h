#ifndef DPCURATOR_SERVER_LEDGER_H_
#define DPCURATOR_SERVER_LEDGER_H_

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"

#include "absl/status/statusor.h"
#include "core/privacy/accounting.h"
#include "core/privacy/events.h"
#include "dpcurator/v1/dpcurator.pb.h"
#include "plan/session_part.h"
#include "server/clock.h"
#include "server/paging.h"
#include "server/shared_database.h"
#include "server/store.h"

namespace dpcurator::server {

class ObjectQuotas;

// Whom an object is looked up for. A release or session belongs to the
// principal (token id) that created it; an analyst sees only its own (and
// rows from before ownership existed, owner ''), the curator sees all.
// Anything else answers NOT_FOUND with the same text as an unknown id.
struct Caller {
  std::string principal_id;
  bool is_curator = false;
  // The server itself, or a curator: sees everything.
  static Caller Curator() { return Caller{"", true}; }
  bool Sees(const std::string& owner) const {
    return is_curator || owner.empty() || owner == principal_id;
  }
};

// The budget ledger (PRIVACY.md, "Admission"). One event per release; the
// running RDP total per dataset lives in ledger_totals so that admission is
// O(grid). Events are append-only: a refund is a new row that exactly negates
// an earlier one. The ledger's tables live in the same SQLite file as
// Store's (the schema is Store's migrations) and are reached through the
// same SharedDatabase, so a ledger call and a store call are serialised.
class Ledger {
 public:
  // `database` (migrated by Store::Open) and `clock` must outlive the ledger.
  Ledger(SharedDatabase* database, const Clock* clock) : database_(database), clock_(clock) {}

  // Per-token quotas (server/quotas.h), checked inside Admit, OpenSession,
  // OpenPartitionedSessions and BeginStep after an idempotent replay and
  // before anything is written; null (the default): none. Must outlive the
  // ledger.
  void SetQuotas(const ObjectQuotas* quotas) { quotas_ = quotas; }

  struct Admission {
    enum class Outcome {
      kAdmitted,  // charged now; compute, then Complete() or a failure call
      kReplay,    // the key's release is stored: return `artefact`, no charge
      kResume,    // charged earlier but never completed (crash): compute again
      kWaiting,   // an external dataset's job, charged earlier, still pending
    };
    Outcome outcome = Outcome::kAdmitted;
    std::string release_id;
    std::string artefact;  // kReplay only
    double epsilon_alone = 0.0;
    double epsilon_spent = 0.0;  // after this admission
    double epsilon_remaining = 0.0;
  };

  // In one BEGIN IMMEDIATE transaction: replays a known idempotency key of
  // this caller (the same request bytes are required; keys are scoped by
  // principal), checks the event's relation against the dataset's, computes
  // the composed epsilon with the event added and refuses
  // (RESOURCE_EXHAUSTED, naming spent / requested / cap) above the cap;
  // otherwise writes the release row (PENDING, owned by the caller), the
  // event and the new totals, seals the dataset, and commits
  // (synchronous=FULL) before returning. Nothing is computed before this
  // returns.
  //
  // kAdmitted and kResume hand the caller the release's attempt lease: one
  // attempt per release at a time, so a retry while an attempt runs is
  // refused (ABORTED) instead of racing it. The lease lives in this
  // process's memory, so a crash releases it; EndAttempt() releases it
  // otherwise (ReleaseAttempt below does that on scope exit). A key whose
  // release failed after reading rows answers FAILED_PRECONDITION: the
  // charge stands, and a new request needs a new key. So does a PENDING
  // release whose earlier attempt may have read rows (MarkRowsRead, then a
  // crash or a lost failure record): it is made FAILED with its incident,
  // charge kept, in this transaction, and never recomputed for free
  // (docs/privacy.md 6.3).
  //
  // With `job` (an external dataset, docs/scale-out.md): the job row holding
  // the plan is written in the same transaction as the charge, so a charged
  // release always has its plan; no attempt lease is taken (the curator's
  // runner computes it), and a retry of a key whose job is still pending is
  // kWaiting (never a resume: the server has no rows to compute from).
  struct JobPlan {
    v1::ReleaseKind kind = v1::RELEASE_KIND_UNSPECIFIED;
    std::string schema;   // serialized TableSchema
    std::string request;  // serialized resolved ReleaseRequest
    std::string digest;   // SHA-256(schema || request), 32 bytes
  };
  absl::StatusOr<Admission> Admit(const std::string& dataset_id, const Caller& caller,
                                  const std::string& idempotency_key, const std::string& kind,
                                  const std::string& request_bytes,
                                  const privacy::PrivacyEvent& event,
                                  const JobPlan* job = nullptr);
  void EndAttempt(const std::string& release_id);

  // Stores the artefact (PENDING -> DONE). If another attempt completed the
  // release first, returns that stored artefact instead: only one artefact
  // per charge is ever delivered.
  absl::StatusOr<std::string> Complete(const std::string& release_id, const std::string& artefact);

  // Only for a failure before any private row was read: compare-and-set
  // PENDING -> FAILED and a refund event, in one transaction. A release that
  // is not PENDING (delivered, or already failed) is refused with
  // FAILED_PRECONDITION and nothing is written. `reason` is stored in the
  // ledger: callers pass fixed text, never anything derived from rows.
  absl::Status Refund(const std::string& release_id, const std::string& reason);

  // Durably, BEFORE the attempt loads any row: records `incident` (drawn by
  // the caller) on the PENDING release, so that if this attempt never
  // completes (crash, lost failure record) a resume answers that incident
  // instead of reading the rows again. FAILED_PRECONDITION when not PENDING.
  absl::Status MarkRowsRead(const std::string& release_id, const std::string& incident);

  // A failure after private rows were read (docs/privacy.md 6.1): PENDING ->
  // FAILED with the charge kept (no refund event, ever) and the incident id
  // that names the curator's log entry.
  absl::Status FailAfterRowsRead(const std::string& release_id, const std::string& incident);

  // One page of the dataset's budget report (GetBudget). The totals
  // (spent, remaining, the conversions) come from the running state on
  // every page; the ledger's events (by id) and then the sessions (by
  // created_unix, id) come a page at a time under one row and byte budget
  // (server/paging.h), with next_page_token while more follow. Work per
  // page is O(grid + page), never O(history). Event descriptions carry no
  // refund reasons; an analyst's report lists only its own sessions.
  absl::StatusOr<v1::BudgetReport> Report(const std::string& dataset_id, const Caller& caller,
                                          const PageRequest& page = {});

  // The dataset's ledger position for the metrics' gauges, from the running
  // state and an index count of its OPEN sessions: O(grid + open sessions),
  // independent of how many events the ledger holds (issue 36, item 6).
  struct BudgetPosition {
    double epsilon_spent = 0.0;
    double epsilon_remaining = 0.0;
    int64_t open_sessions = 0;
  };
  absl::StatusOr<BudgetPosition> Position(const std::string& dataset_id);

  // The dataset's running state as stored (ledger_totals), and the same
  // state rebuilt from every one of its events in id order: O(history), for
  // VerifyTotals and tests only, never on a request's path.
  absl::StatusOr<privacy::AccountantState> StoredTotals(const std::string& dataset_id);
  absl::StatusOr<privacy::AccountantState> RebuildTotals(const std::string& dataset_id);
  absl::StatusOr<std::string> GetArtefact(const std::string& release_id, const Caller& caller,
                                          std::string* dataset_id);
  // One page of the releases the caller sees, in (created_unix, id) order,
  // bounded by rows and bytes (server/paging.h).
  absl::StatusOr<v1::ListReleasesResponse> ListReleases(const std::string& dataset_id,
                                                        const Caller& caller,
                                                        const PageRequest& page = {});

  // ---- Sessions (iterative releases with a reservation) ----

  struct SessionAdmission {
    bool replayed = false;  // the idempotency key's session already exists
    v1::Session session;
  };
  // Reserves the budget of `steps` repetitions of `step_event` in one
  // admission (same rules as Admit: relation, cap, durable before return).
  // `params` is the resolved SessionParams.
  absl::StatusOr<SessionAdmission> OpenSession(const std::string& dataset_id,
                                               const Caller& caller,
                                               const std::string& idempotency_key,
                                               const std::string& request_bytes,
                                               const v1::SessionParams& params,
                                               const privacy::PrivacyEvent& step_event,
                                               int64_t steps, double noise_multiplier);

  // ---- Partitioned sessions (parallel composition; docs/privacy.md 3.7) ----

  // One part of a partitioned open (plan/partition.h).
  using SessionPart = plan::SessionPart;
  struct PartitionedAdmission {
    bool replayed = false;
    std::vector<v1::Session> sessions;  // one per part, in level order
  };
  // Opens one session per part (levels distinct) as ONE admission: one
  // charge of PartitionedAddRemove(SelfCompose(step_k, T_k) for each k), in
  // one transaction with the same rules as OpenSession (relation, cap,
  // durable before return, idempotency key scoped by principal; a retry
  // with the same key and request bytes returns the same K sessions, with
  // other bytes FAILED_PRECONDITION). The members share the reservation:
  // each closes on its own, and when the last one closes the reservation
  // is refunded whole and the partitioned event of the steps the members
  // ran is charged (sec. 3.4's rule, applied to the group).
  absl::StatusOr<PartitionedAdmission> OpenPartitionedSessions(
      const std::string& dataset_id, const Caller& caller, const std::string& idempotency_key,
      const std::string& request_bytes, std::vector<SessionPart> parts);
  // The label level whose rows the session's steps read, or nullopt for an
  // ordinary session (which reads every row).
  absl::StatusOr<std::optional<int32_t>> SessionPartLevel(const std::string& session_id);

  // The outcome stored for one step index: the artefact, or (non-empty
  // incident) a failure after rows were read, which counts as a used step.
  struct StoredStep {
    std::string artefact;
    std::string incident;
    bool failed() const { return !incident.empty(); }
  };
  struct StepAdmission {
    v1::Session session;
    std::optional<StoredStep> stored;  // set: replay this stored outcome
  };
  // Checks that step `step` may run (session OPEN, index < steps reserved)
  // or returns the stored outcome of an earlier run of the same index.
  absl::StatusOr<StepAdmission> BeginStep(const std::string& session_id, const Caller& caller,
                                          int64_t step);
  // Stores a step's outcome: `outcome.failed()` records a failure after rows
  // were read (the step is used; its reservation is never returned). If the
  // index was stored meanwhile, returns that one (only one outcome per step
  // index is ever delivered). drop_previous_answer (dp_sgd, whose steps run
  // in order and whose answers can be megabytes): the stored answer of step
  // `step - 1` is blanked in the same transaction, so a session keeps one
  // answer; its row stays, so steps_used and the refund at close do not
  // change (docs/privacy.md 2.9).
  absl::StatusOr<StoredStep> RecordStep(const std::string& session_id, int64_t step,
                                        const StoredStep& outcome,
                                        bool drop_previous_answer = false);
  // Closes an open session and appends a refund event for the steps not run
  // (exactly SelfCompose(step_event, reserved - used); failed steps count as
  // used). Closing a closed session is a no-op that returns it.
  absl::StatusOr<v1::Session> CloseSession(const std::string& session_id, const Caller& caller,
                                           const std::string& final_state = "CLOSED");
  absl::StatusOr<v1::Session> GetSession(const std::string& session_id, const Caller& caller);
  // Closes (ABANDONED) every open session idle for at least idle_seconds
  // by the ledger's clock; returns how many.
  absl::StatusOr<int> CloseIdleSessions(int64_t idle_seconds);

  // Recomputes every dataset's totals from its events and compares them with
  // the stored running totals (the state bytes, which fix every order's
  // RDP sum, the plain-Gaussian sum and flag and the grid-Gaussian case,
  // and the event_count column beside them); returns the mismatches. The
  // server refuses to start on any (CuratorServer::Start).
  absl::StatusOr<std::vector<std::string>> VerifyTotals();

  // ---- Jobs of external datasets (issue 28; docs/scale-out.md) ----

  struct Job {
    std::string release_id;  // the job's id
    std::string dataset_id;
    std::string idempotency_key;  // as the analyst sent it
    std::string status;           // the release's: PENDING, DONE or FAILED
    JobPlan plan;
    int64_t created_unix = 0;
    double epsilon_alone = 0.0;
    // privacy::EncodeEvent of the charge the release stands on, so that a
    // submission is noised only under the mechanism that was charged.
    std::string charged_event;
  };
  // The dataset's pending jobs, oldest first, at most `limit`.
  absl::StatusOr<std::vector<Job>> ListPendingJobs(const std::string& dataset_id, int limit);
  // NOT_FOUND (the same text for an unknown id and for a release that is
  // no job) unless `release_id` is a job of `dataset_id`.
  absl::StatusOr<Job> LoadJob(const std::string& release_id, const std::string& dataset_id);
  // In one transaction, compare-and-set: the job is still PENDING, of
  // `dataset_id`, with plan digest `digest`; then the artefact is stored and
  // the release is DONE. FAILED_PRECONDITION (nothing written) otherwise,
  // so a job is completed once, by the first submission that gets here.
  absl::Status CompleteJob(const std::string& release_id, const std::string& dataset_id,
                           const std::string& digest, const std::string& artefact);
  // PENDING -> FAILED with the charge kept (no refund event, ever: the
  // curator's cluster may have read rows). FAILED_PRECONDITION when the job
  // is not pending.
  absl::Status FailJob(const std::string& release_id, const std::string& dataset_id);

 private:
  SharedDatabase* database_;
  const Clock* clock_;
  const ObjectQuotas* quotas_ = nullptr;
  // Release ids with an attempt running in this process (the attempt
  // lease). Taken inside Admit's transaction, under the database lock.
  std::mutex attempts_mutex_;
  absl::flat_hash_set<std::string> attempts_;
};

// FAILED_PRECONDITION for a job that is DONE or FAILED (Ledger::Job::status):
// a submission or FailJob for it changes nothing.
absl::Status JobNotPendingError(const std::string& release_id, const std::string& status);

// Scope guard for an attempt lease: EndAttempt on destruction.
class ReleaseAttempt {
 public:
  ReleaseAttempt(Ledger* ledger, std::string release_id)
      : ledger_(ledger), release_id_(std::move(release_id)) {}
  ~ReleaseAttempt() {
    if (ledger_ != nullptr) ledger_->EndAttempt(release_id_);
  }
  ReleaseAttempt(const ReleaseAttempt&) = delete;
  ReleaseAttempt& operator=(const ReleaseAttempt&) = delete;

 private:
  Ledger* ledger_;
  std::string release_id_;
};


}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_LEDGER_H_
