#ifndef DPCURATOR_SERVER_LEDGER_H_
#define DPCURATOR_SERVER_LEDGER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/privacy/events.h"
#include "dpcurator/v1/dpcurator.pb.h"
#include "server/store.h"

namespace dpcurator::server {

// The budget ledger (PRIVACY.md, "Admission"). One event per release; the
// running RDP total per dataset lives in ledger_totals so that admission is
// O(grid). Events are append-only: a refund is a new row that exactly negates
// an earlier one.
class Ledger {
 public:
  explicit Ledger(Store* store) : store_(store) {}

  struct Admission {
    enum class Outcome {
      kAdmitted,  // charged now; compute, then Complete() or Refund()
      kReplay,    // the key's release is stored: return `artefact`, no charge
      kResume,    // charged earlier but never completed (crash): compute again
    };
    Outcome outcome = Outcome::kAdmitted;
    std::string release_id;
    std::string artefact;  // kReplay only
    double epsilon_alone = 0.0;
    double epsilon_spent = 0.0;  // after this admission
    double epsilon_remaining = 0.0;
  };

  // In one BEGIN IMMEDIATE transaction: replays a known idempotency key (the
  // same request bytes are required), checks the event's relation against
  // the dataset's, computes the composed epsilon with the event added and
  // refuses (RESOURCE_EXHAUSTED, naming spent / requested / cap) above the
  // cap; otherwise writes the release row (PENDING), the event and the new
  // totals, seals the dataset, and commits (synchronous=FULL) before
  // returning. Nothing is computed before this returns.
  absl::StatusOr<Admission> Admit(const std::string& dataset_id,
                                  const std::string& idempotency_key, const std::string& kind,
                                  const std::string& request_bytes,
                                  const privacy::PrivacyEvent& event);

  // Stores the artefact (PENDING -> DONE). If another attempt completed the
  // release first, returns that stored artefact instead: only one artefact
  // per charge is ever delivered.
  absl::StatusOr<std::string> Complete(const std::string& release_id, const std::string& artefact);

  // The computation failed and released nothing: appends a refund event and
  // marks the release FAILED (PRIVACY.md: "A failed computation that
  // released nothing writes a refund event").
  absl::Status Refund(const std::string& release_id, const std::string& reason);

  absl::StatusOr<v1::BudgetReport> Report(const std::string& dataset_id);
  absl::StatusOr<std::string> GetArtefact(const std::string& release_id,
                                          std::string* dataset_id);
  absl::StatusOr<v1::ListReleasesResponse> ListReleases(const std::string& dataset_id);

  // ---- Sessions (iterative releases with a reservation) ----

  struct SessionAdmission {
    bool replayed = false;  // the idempotency key's session already exists
    v1::Session session;
  };
  // Reserves the budget of `steps` repetitions of `step_event` in one
  // admission (same rules as Admit: relation, cap, durable before return).
  // `params` is the resolved SessionParams.
  absl::StatusOr<SessionAdmission> OpenSession(const std::string& dataset_id,
                                               const std::string& idempotency_key,
                                               const std::string& request_bytes,
                                               const v1::SessionParams& params,
                                               const privacy::PrivacyEvent& step_event,
                                               int64_t steps, double noise_multiplier);

  struct StepAdmission {
    v1::Session session;
    std::optional<std::string> stored_batch;  // set: replay this stored step
  };
  // Checks that step `step` may run (session OPEN, index < steps reserved)
  // or returns the stored result of an earlier run of the same index.
  absl::StatusOr<StepAdmission> BeginStep(const std::string& session_id, int64_t step);
  // Stores a computed step; if the index was stored meanwhile, returns that
  // one (only one result per step index is ever delivered).
  absl::StatusOr<std::string> RecordStep(const std::string& session_id, int64_t step,
                                         const std::string& batch);
  // Closes an open session and appends a refund event for the steps not run
  // (exactly SelfCompose(step_event, reserved - used)). Closing a closed
  // session is a no-op that returns it.
  absl::StatusOr<v1::Session> CloseSession(const std::string& session_id,
                                           const std::string& final_state = "CLOSED");
  absl::StatusOr<v1::Session> GetSession(const std::string& session_id);
  // Closes (ABANDONED) every open session idle for at least idle_seconds;
  // returns how many.
  absl::StatusOr<int> CloseIdleSessions(int64_t idle_seconds);

  // Recomputes every dataset's totals from its events and compares them with
  // the stored running totals; returns the mismatches.
  absl::StatusOr<std::vector<std::string>> VerifyTotals();

 private:
  Store* store_;
};

// Text form of an event for the ledger row, and back (for refunds and
// rebuilding totals): "gaussian(s)", "poisson(q,s)", "wor(q,s)",
// "laplace(b)", "rr(k,eps)", "compose(e1;e2;...)", "repeat(T;e)".
std::string EncodeEvent(const privacy::PrivacyEvent& event);
absl::StatusOr<privacy::PrivacyEvent> DecodeEvent(absl::string_view text);

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_LEDGER_H_
