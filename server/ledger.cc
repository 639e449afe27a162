#include "server/ledger.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/privacy/accounting.h"
#include "core/privacy/conversion.h"
#include "core/privacy/event_codec.h"
#include "core/privacy/rdp.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "server/quotas.h"

namespace dpcurator::server {
namespace {


constexpr absl::string_view kRefundSeparator = " refunded: ";

// Idempotency keys are scoped by principal, so one analyst's key can never
// replay (or reveal) another's release. Stored as "<principal>\x1f<key>";
// rows from before ownership existed hold the bare key.
constexpr char kKeyScopeSeparator = '\x1f';
std::string ScopedKey(const Caller& caller, const std::string& key) {
  return absl::StrCat(caller.principal_id, std::string(1, kKeyScopeSeparator), key);
}
std::string UnscopedKey(const std::string& stored) {
  const size_t separator = stored.rfind(kKeyScopeSeparator);
  return separator == std::string::npos ? stored : stored.substr(separator + 1);
}

constexpr const char* kSessionColumns =
    "id, dataset_id, params, state, steps_reserved, noise_multiplier, epsilon_reserved, "
    "created_unix, last_activity_unix, (SELECT COUNT(*) FROM session_steps s WHERE "
    "s.session_id = sessions.id), step_event, reserve_event_id, owner, partition_id, "
    "part_level";

v1::Session SessionFromRow(const Statement& row) {
  v1::Session session;
  session.set_id(row.ColumnText(0));
  session.set_dataset_id(row.ColumnText(1));
  session.mutable_params()->ParseFromString(row.ColumnBlob(2));
  session.set_state(row.ColumnText(3));
  session.set_steps_reserved(row.ColumnInt(4));
  session.set_noise_multiplier(row.ColumnDouble(5));
  session.set_epsilon_reserved(row.ColumnDouble(6));
  session.set_created_unix(row.ColumnInt(7));
  session.set_last_activity_unix(row.ColumnInt(8));
  session.set_steps_used(row.ColumnInt(9));
  return session;
}


struct LoadedDataset {
  double epsilon_cap;
  double delta;
  privacy::NeighbouringRelation relation;
};

absl::StatusOr<LoadedDataset> LoadDatasetBudget(Database* db, const std::string& dataset_id) {
  DPC_ASSIGN_OR_RETURN(auto query,
                       db->Prepare("SELECT epsilon_cap, delta, relation FROM datasets WHERE id = ?"));
  query.Bind(1, dataset_id);
  DPC_ASSIGN_OR_RETURN(bool found, query.Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no dataset '", dataset_id, "'"));
  return LoadedDataset{query.ColumnDouble(0), query.ColumnDouble(1),
                       RelationFromProto(static_cast<v1::NeighbouringRelation>(query.ColumnInt(2)))};
}

absl::StatusOr<privacy::AccountantState> LoadTotals(Database* db, const std::string& dataset_id,
                                                    privacy::NeighbouringRelation relation) {
  DPC_ASSIGN_OR_RETURN(auto query,
                       db->Prepare("SELECT state FROM ledger_totals WHERE dataset_id = ?"));
  query.Bind(1, dataset_id);
  DPC_ASSIGN_OR_RETURN(bool found, query.Step());
  if (!found) return privacy::AccountantState(relation);
  return privacy::AccountantState::Deserialize(query.ColumnBlob(0));
}

// A dataset's cap and what its running totals have spent at its delta: how
// every report of its position (GetBudget's pages, the metrics' gauges)
// starts, O(grid) whatever its history.
struct SpentBudget {
  LoadedDataset dataset;
  privacy::EpsilonReport spent;
};
absl::StatusOr<SpentBudget> LoadSpentBudget(Database* db, const std::string& dataset_id) {
  DPC_ASSIGN_OR_RETURN(LoadedDataset dataset, LoadDatasetBudget(db, dataset_id));
  DPC_ASSIGN_OR_RETURN(privacy::AccountantState state,
                       LoadTotals(db, dataset_id, dataset.relation));
  DPC_ASSIGN_OR_RETURN(privacy::EpsilonReport spent, state.Epsilon(dataset.delta));
  return SpentBudget{dataset, std::move(spent)};
}

absl::Status SaveTotals(Database* db, const std::string& dataset_id,
                        const privacy::AccountantState& state) {
  DPC_ASSIGN_OR_RETURN(auto upsert,
                       db->Prepare("INSERT INTO ledger_totals (dataset_id, state, event_count) "
                                   "VALUES (?, ?, ?) ON CONFLICT(dataset_id) DO UPDATE SET "
                                   "state = excluded.state, event_count = excluded.event_count"));
  return upsert.Bind(1, dataset_id)
      .BindBlob(2, state.Serialize())
      .Bind(3, state.event_count())
      .Run();
}

std::string EncodeCurve(const std::vector<double>& values) {
  std::string bytes(values.size() * sizeof(double), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}




struct Charge {
  int64_t event_id = 0;
  double epsilon_alone = 0.0;
  double epsilon_after = 0.0;
};

// The admission rule (PRIVACY.md, "Admission"), inside the caller's BEGIN
// IMMEDIATE transaction: relation check, composed epsilon with the event
// added, refusal above the cap naming spent / requested / cap; otherwise the
// event row and the new running totals are written.
absl::StatusOr<Charge> ChargeLocked(Database* db, const Clock& clock,
                                    const std::string& dataset_id,
                                    const LoadedDataset& dataset,
                                    privacy::AccountantState* state,
                                    const privacy::PrivacyEvent& event, const std::string& kind,
                                    const std::string& owner_id) {
  DPC_RETURN_IF_ERROR(privacy::CheckRelation(event, dataset.relation));
  DPC_ASSIGN_OR_RETURN(privacy::EventCharge charge, privacy::EventCharge::Of(event));
  DPC_ASSIGN_OR_RETURN(privacy::EpsilonReport before, state->Epsilon(dataset.delta));
  DPC_ASSIGN_OR_RETURN(privacy::EpsilonReport after,
                       state->EpsilonIfAdded(charge, dataset.delta));
  DPC_ASSIGN_OR_RETURN(privacy::EpsilonReport alone,
                       privacy::ComputeEpsilonReport(event, dataset.delta));
  // Approximate events (a thresholded category list, docs/privacy.md
  // 2.11.2) hold except with probability delta_0 each; their sum comes off
  // the dataset's delta before the conversion, and once it would reach it no
  // epsilon holds at all, whatever the cap. Public parameters only.
  if (!(after.approximate_delta < dataset.delta)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "privacy budget exceeded for dataset '%s': this %s's failure probability would "
        "bring the dataset's summed delta_0 to %.6g, at or above its delta %g, where no "
        "epsilon holds. Ask for a smaller delta_0, or have the curator create the "
        "dataset with a larger delta.",
        dataset_id, kind, after.approximate_delta, dataset.delta));
  }
  if (!(after.epsilon <= dataset.epsilon_cap)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "privacy budget exceeded for dataset '%s': spent epsilon %.6g, requested %.6g "
        "(this %s alone; %.6g composed), cap %.6g at delta %g. Ask for a smaller "
        "epsilon or a larger noise multiplier, or have the curator raise the cap.",
        dataset_id, before.epsilon, alone.epsilon, kind, after.epsilon, dataset.epsilon_cap,
        dataset.delta));
  }
  DPC_ASSIGN_OR_RETURN(std::vector<double> curve,
                       privacy::ComputeRdp(event, privacy::DefaultRdpOrders()));
  DPC_ASSIGN_OR_RETURN(auto record,
                       db->Prepare("INSERT INTO ledger_events (dataset_id, release_id, kind, "
                                   "description, relation, rdp, plain_gaussian, "
                                   "inverse_variance_sum, epsilon_alone, refund_of, created_unix) "
                                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)"));
  const auto inverse_variance = privacy::PlainGaussianInverseVarianceSum(event);
  DPC_RETURN_IF_ERROR(record.Bind(1, dataset_id)
                          .Bind(2, owner_id)
                          .Bind(3, kind)
                          .Bind(4, privacy::EncodeEvent(event))
                          .Bind(5, int64_t{RelationToProto(dataset.relation)})
                          .BindBlob(6, EncodeCurve(curve))
                          .Bind(7, int64_t{inverse_variance.has_value() ? 1 : 0})
                          .Bind(8, inverse_variance.value_or(0.0))
                          .Bind(9, alone.epsilon)
                          .Bind(10, clock.UnixNow())
                          .Run());
  Charge result;
  result.event_id = db->LastInsertRowId();
  DPC_RETURN_IF_ERROR(state->Add(charge));
  DPC_RETURN_IF_ERROR(SaveTotals(db, dataset_id, *state));
  DPC_ASSIGN_OR_RETURN(auto seal, db->Prepare("UPDATE datasets SET sealed = 1 WHERE id = ?"));
  DPC_RETURN_IF_ERROR(seal.Bind(1, dataset_id).Run());
  result.epsilon_alone = alone.epsilon;
  result.epsilon_after = after.epsilon;
  return result;
}

// Appends a refund of `event` (all or part of the charge `refund_of`) and
// updates the running totals. The refund row's description starts with the
// encoded refunded event, so VerifyTotals can rebuild the totals.
absl::Status RefundLocked(Database* db, const Clock& clock, const std::string& dataset_id,
                          const LoadedDataset& dataset, const std::string& owner_id,
                          const privacy::PrivacyEvent& event, int64_t refund_of,
                          const std::string& reason) {
  DPC_ASSIGN_OR_RETURN(privacy::AccountantState state,
                       LoadTotals(db, dataset_id, dataset.relation));
  DPC_RETURN_IF_ERROR(state.Subtract(event));
  DPC_ASSIGN_OR_RETURN(std::vector<double> curve,
                       privacy::ComputeRdp(event, privacy::DefaultRdpOrders()));
  DPC_ASSIGN_OR_RETURN(privacy::EpsilonReport alone,
                       privacy::ComputeEpsilonReport(event, dataset.delta));
  const auto inverse_variance = privacy::PlainGaussianInverseVarianceSum(event);
  DPC_ASSIGN_OR_RETURN(auto record,
                       db->Prepare("INSERT INTO ledger_events (dataset_id, release_id, kind, "
                                   "description, relation, rdp, plain_gaussian, "
                                   "inverse_variance_sum, epsilon_alone, refund_of, created_unix) "
                                   "VALUES (?, ?, 'refund', ?, ?, ?, ?, ?, ?, ?, ?)"));
  DPC_RETURN_IF_ERROR(record.Bind(1, dataset_id)
                          .Bind(2, owner_id)
                          .Bind(3, absl::StrCat(privacy::EncodeEvent(event), kRefundSeparator, reason))
                          .Bind(4, int64_t{RelationToProto(dataset.relation)})
                          .BindBlob(5, EncodeCurve(curve))
                          .Bind(6, int64_t{inverse_variance.has_value() ? 1 : 0})
                          .Bind(7, inverse_variance.value_or(0.0))
                          .Bind(8, -alone.epsilon)
                          .Bind(9, refund_of)
                          .Bind(10, clock.UnixNow())
                          .Run());
  return SaveTotals(db, dataset_id, state);
}

}  // namespace



namespace {

// The answer to a key whose release failed, or may have failed, after the
// rows were read: final, charge kept, the incident names the log entry.
absl::Status FailedAfterRowsReadError(const std::string& release_id,
                                      const std::string& incident) {
  return absl::FailedPreconditionError(absl::StrCat(
      "release '", release_id, "' failed after the server read the dataset (incident ",
      incident, "); its charge stands. Request it again with a new idempotency key"));
}

// The answer to a key (or an id) whose external job failed: no reason, ever
// (the curator's runner read the rows; docs/privacy.md 6.1), and the charge
// stands.
absl::Status JobFailedError(const std::string& release_id) {
  return absl::FailedPreconditionError(absl::StrCat(
      "release '", release_id, "' failed in the curator's cluster; its charge stands. Request "
      "it again with a new idempotency key"));
}

}  // namespace

absl::StatusOr<Ledger::Admission> Ledger::Admit(const std::string& dataset_id,
                                                const Caller& caller,
                                                const std::string& key,
                                                const std::string& kind,
                                                const std::string& request_bytes,
                                                const privacy::PrivacyEvent& event,
                                                const JobPlan* job) {
  if (key.empty()) {
    return absl::InvalidArgumentError(
        "a release request needs an idempotency key (the client generates one per request)");
  }
  const std::string idempotency_key = ScopedKey(caller, key);
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db));
  DPC_ASSIGN_OR_RETURN(LoadedDataset dataset, LoadDatasetBudget(db, dataset_id));
  DPC_ASSIGN_OR_RETURN(privacy::AccountantState state,
                       LoadTotals(db, dataset_id, dataset.relation));
  Admission admission;

  // 1. A known key: replay or resume, never a second charge.
  DPC_ASSIGN_OR_RETURN(auto existing,
                       db->Prepare("SELECT id, status, request, artefact, epsilon, "
                                   "charged_failure, incident, EXISTS (SELECT 1 FROM "
                                   "release_jobs j WHERE j.release_id = releases.id) FROM "
                                   "releases WHERE dataset_id = ? AND idempotency_key = ?"));
  existing.Bind(1, dataset_id).Bind(2, idempotency_key);
  DPC_ASSIGN_OR_RETURN(bool known, existing.Step());
  std::string retry_release_id;
  if (known) {
    if (existing.ColumnBlob(2) != request_bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "idempotency key '", key,
          "' was already used for a different request; use a new key for a new release"));
    }
    const std::string status = existing.ColumnText(1);
    admission.release_id = existing.ColumnText(0);
    admission.epsilon_alone = existing.ColumnDouble(4);
    const bool is_job = existing.ColumnInt(7) != 0;
    if (is_job && status == "FAILED") return JobFailedError(admission.release_id);
    if (status == "DONE" || status == "PENDING") {
      DPC_ASSIGN_OR_RETURN(privacy::EpsilonReport spent, state.Epsilon(dataset.delta));
      admission.epsilon_spent = spent.epsilon;
      admission.epsilon_remaining = std::max(0.0, dataset.epsilon_cap - spent.epsilon);
      if (status == "DONE") {
        admission.outcome = Admission::Outcome::kReplay;
        admission.artefact = existing.ColumnBlob(3);
        return admission;
      }
      if (is_job) {
        // The curator's runner computes it; nothing runs here.
        admission.outcome = Admission::Outcome::kWaiting;
        return admission;
      }
      // PENDING: resume a crashed attempt, never race a live one (the
      // live one may deliver while this one fails, or the reverse).
      std::lock_guard<std::mutex> attempts(attempts_mutex_);
      if (attempts_.contains(admission.release_id)) {
        return absl::AbortedError(absl::StrCat(
            "release '", admission.release_id,
            "' is being computed by an earlier attempt with this idempotency key; retry "
            "after it finishes and the retry returns its result"));
      }
      const std::string incident = existing.ColumnText(6);
      if (!incident.empty()) {
        // The earlier attempt marked the rows read and never finished: it
        // may have read them, so this release is final (docs/privacy.md
        // 6.3): FAILED with that incident, the charge kept, never a free
        // recomputation.
        DPC_ASSIGN_OR_RETURN(auto fail,
                             db->Prepare("UPDATE releases SET status = 'FAILED', "
                                         "charged_failure = 1 WHERE id = ? AND status = "
                                         "'PENDING'"));
        DPC_RETURN_IF_ERROR(fail.Bind(1, admission.release_id).Run());
        DPC_RETURN_IF_ERROR(transaction.Commit());
        return FailedAfterRowsReadError(admission.release_id, incident);
      }
      attempts_.insert(admission.release_id);
      admission.outcome = Admission::Outcome::kResume;
      return admission;
    }
    if (existing.ColumnInt(5) != 0) {
      return FailedAfterRowsReadError(admission.release_id, existing.ColumnText(6));
    }
    retry_release_id = admission.release_id;  // FAILED and refunded: charge anew
  }

  if (quotas_ != nullptr) {
    DPC_RETURN_IF_ERROR(quotas_->CheckRelease(db, caller.principal_id, dataset_id, dataset.delta,
                                              event, job != nullptr));
  }
  // 2. Release row, then the charge (refused above the cap; nothing is
  // written then, the transaction rolls back).
  const int64_t now = clock_->UnixNow();
  if (retry_release_id.empty()) {
    admission.release_id = NewId("rel");
    DPC_ASSIGN_OR_RETURN(auto insert,
                         db->Prepare("INSERT INTO releases (id, dataset_id, idempotency_key, kind, "
                                     "request, status, epsilon, created_unix, owner) VALUES (?, ?, "
                                     "?, ?, ?, 'PENDING', 0, ?, ?)"));
    DPC_RETURN_IF_ERROR(insert.Bind(1, admission.release_id)
                            .Bind(2, dataset_id)
                            .Bind(3, idempotency_key)
                            .Bind(4, kind)
                            .BindBlob(5, request_bytes)
                            .Bind(6, now)
                            .Bind(7, caller.principal_id)
                            .Run());
  } else {
    admission.release_id = retry_release_id;
    DPC_ASSIGN_OR_RETURN(auto update,
                         db->Prepare("UPDATE releases SET status = 'PENDING' WHERE id = ?"));
    DPC_RETURN_IF_ERROR(update.Bind(1, admission.release_id).Run());
  }
  DPC_ASSIGN_OR_RETURN(Charge charge, ChargeLocked(db, *clock_, dataset_id, dataset, &state,
                                                   event, kind, admission.release_id));
  DPC_ASSIGN_OR_RETURN(auto price, db->Prepare("UPDATE releases SET epsilon = ? WHERE id = ?"));
  DPC_RETURN_IF_ERROR(price.Bind(1, charge.epsilon_alone).Bind(2, admission.release_id).Run());
  if (job != nullptr) {
    // The plan, with the charge: a charged job always has it.
    DPC_ASSIGN_OR_RETURN(auto plan,
                         db->Prepare("INSERT INTO release_jobs (release_id, dataset_id, kind, "
                                     "schema, request, plan_digest, created_unix) VALUES (?, ?, "
                                     "?, ?, ?, ?, ?)"));
    DPC_RETURN_IF_ERROR(plan.Bind(1, admission.release_id)
                            .Bind(2, dataset_id)
                            .Bind(3, int64_t{job->kind})
                            .BindBlob(4, job->schema)
                            .BindBlob(5, job->request)
                            .BindBlob(6, job->digest)
                            .Bind(7, now)
                            .Run());
  }
  // 3. Durable (synchronous=FULL) before anything is computed; the attempt
  // lease is taken under the same database lock, so no retry can slip between.
  DPC_RETURN_IF_ERROR(transaction.Commit());
  if (job == nullptr) {
    std::lock_guard<std::mutex> attempts(attempts_mutex_);
    attempts_.insert(admission.release_id);
  }

  admission.outcome = Admission::Outcome::kAdmitted;
  admission.epsilon_alone = charge.epsilon_alone;
  admission.epsilon_spent = charge.epsilon_after;
  admission.epsilon_remaining = std::max(0.0, dataset.epsilon_cap - charge.epsilon_after);
  return admission;
}

absl::StatusOr<std::string> Ledger::Complete(const std::string& release_id,
                                             const std::string& artefact) {
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db));
  DPC_ASSIGN_OR_RETURN(auto update,
                       db->Prepare("UPDATE releases SET status = 'DONE', artefact = ? WHERE id = ? "
                                   "AND status = 'PENDING'"));
  DPC_RETURN_IF_ERROR(update.BindBlob(1, artefact).Bind(2, release_id).Run());
  std::string delivered = artefact;
  if (db->Changes() == 0) {
    DPC_ASSIGN_OR_RETURN(auto stored,
                         db->Prepare("SELECT status, artefact FROM releases WHERE id = ?"));
    stored.Bind(1, release_id);
    DPC_ASSIGN_OR_RETURN(bool found, stored.Step());
    if (!found || stored.ColumnText(0) != "DONE") {
      return absl::FailedPreconditionError(
          absl::StrCat("release '", release_id, "' is not pending; request it again"));
    }
    delivered = stored.ColumnBlob(1);
  }
  DPC_RETURN_IF_ERROR(transaction.Commit());
  return delivered;
}

void Ledger::EndAttempt(const std::string& release_id) {
  std::lock_guard<std::mutex> attempts(attempts_mutex_);
  attempts_.erase(release_id);
}

namespace {

// One UPDATE of a PENDING release, in its own transaction: `set` is the SET
// clause, with `?` for the incident id. FAILED_PRECONDITION when the release
// is no longer pending.
absl::Status UpdatePendingRelease(Database* db, const std::string& release_id,
                                  const std::string& incident, absl::string_view set) {
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db));
  DPC_ASSIGN_OR_RETURN(auto update, db->Prepare(absl::StrCat("UPDATE releases SET ", set,
                                                            " WHERE id = ? AND status = "
                                                            "'PENDING'")));
  DPC_RETURN_IF_ERROR(update.Bind(1, incident).Bind(2, release_id).Run());
  if (db->Changes() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("release '", release_id, "' is not pending"));
  }
  return transaction.Commit();
}

}  // namespace

absl::Status Ledger::MarkRowsRead(const std::string& release_id, const std::string& incident) {
  auto locked = database_->Lock();
  return UpdatePendingRelease(locked.get(), release_id, incident, "incident = ?");
}

absl::Status Ledger::FailAfterRowsRead(const std::string& release_id,
                                       const std::string& incident) {
  auto locked = database_->Lock();
  return UpdatePendingRelease(locked.get(), release_id, incident,
                              "status = 'FAILED', charged_failure = 1, incident = ?");
}

absl::Status Ledger::Refund(const std::string& release_id, const std::string& reason) {
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db));
  // Compare-and-set first: only a PENDING release that nothing delivered is
  // refunded. A DONE release (delivered by another attempt) or a FAILED one
  // is refused, and the transaction rolls back with nothing written.
  DPC_ASSIGN_OR_RETURN(auto claim,
                       db->Prepare("UPDATE releases SET status = 'FAILED' WHERE id = ? AND "
                                   "status = 'PENDING'"));
  DPC_RETURN_IF_ERROR(claim.Bind(1, release_id).Run());
  if (db->Changes() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "release '", release_id, "' is not pending (delivered or already failed): not refunded"));
  }
  // The latest charge of this release that has not been refunded yet.
  DPC_ASSIGN_OR_RETURN(
      auto charge_query,
      db->Prepare("SELECT e.id, e.dataset_id, e.kind, e.description, e.relation, e.rdp, "
                  "e.plain_gaussian, e.inverse_variance_sum, e.epsilon_alone FROM ledger_events e "
                  "WHERE e.release_id = ? AND e.refund_of IS NULL AND NOT EXISTS (SELECT 1 FROM "
                  "ledger_events r WHERE r.refund_of = e.id) ORDER BY e.id DESC LIMIT 1"));
  charge_query.Bind(1, release_id);
  DPC_ASSIGN_OR_RETURN(bool found, charge_query.Step());
  if (!found) {
    return absl::FailedPreconditionError(
        absl::StrCat("release '", release_id, "' has no charge to refund"));
  }
  const int64_t event_id = charge_query.ColumnInt(0);
  const std::string dataset_id = charge_query.ColumnText(1);
  DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent event, privacy::DecodeEvent(charge_query.ColumnText(3)));
  DPC_ASSIGN_OR_RETURN(LoadedDataset dataset, LoadDatasetBudget(db, dataset_id));
  DPC_RETURN_IF_ERROR(
      RefundLocked(db, *clock_, dataset_id, dataset, release_id, event, event_id, reason));
  return transaction.Commit();
}

absl::StatusOr<v1::BudgetReport> Ledger::Report(const std::string& dataset_id,
                                                 const Caller& caller, const PageRequest& page) {
  DPC_ASSIGN_OR_RETURN(const int page_size, ResolvePageSize(page.page_size));
  DPC_ASSIGN_OR_RETURN(const std::optional<BudgetPageCursor> after,
                       DecodeBudgetPageToken(page.page_token));
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(const SpentBudget loaded, LoadSpentBudget(db, dataset_id));
  const LoadedDataset& dataset = loaded.dataset;
  const privacy::EpsilonReport& spent = loaded.spent;
  v1::BudgetReport report;
  report.set_dataset_id(dataset_id);
  report.mutable_budget()->set_epsilon(dataset.epsilon_cap);
  report.mutable_budget()->set_delta(dataset.delta);
  report.set_epsilon_spent(spent.epsilon);
  report.set_epsilon_remaining(std::max(0.0, dataset.epsilon_cap - spent.epsilon));
  report.set_epsilon_rdp(spent.epsilon_rdp);
  if (spent.epsilon_exact.has_value()) report.set_epsilon_exact(*spent.epsilon_exact);
  if (spent.epsilon_grid_exact.has_value()) {
    report.set_epsilon_discrete_exact(*spent.epsilon_grid_exact);
  }
  report.set_optimal_order(spent.optimal_order);
  // One budget for both lists: the events first, then the sessions. Each
  // query reads at most one row past the page (LIMIT), by index.
  PageBudget budget(page_size, page.max_bytes);
  if (!after.has_value() || !after->sessions) {
    DPC_ASSIGN_OR_RETURN(auto events,
                         db->Prepare("SELECT id, COALESCE(release_id, ''), kind, description, "
                                     "relation, epsilon_alone, created_unix, "
                                     "COALESCE(refund_of, 0) FROM ledger_events WHERE "
                                     "dataset_id = ? AND id > ? ORDER BY id LIMIT ?"));
    events.Bind(1, dataset_id)
        .Bind(2, after.has_value() ? after->event_id : int64_t{0})
        .Bind(3, int64_t{page_size} + 1);
    while (true) {
      DPC_ASSIGN_OR_RETURN(bool row, events.Step());
      if (!row) break;
      v1::LedgerEvent event;
      event.set_id(events.ColumnInt(0));
      event.set_release_id(events.ColumnText(1));
      event.set_kind(events.ColumnText(2));
      // The event alone: a refund row's free-text reason stays in the
      // database (rows written before docs/privacy.md 6.1 may hold text
      // that depends on the data).
      const std::string description = events.ColumnText(3);
      event.set_description(
          description.substr(0, description.find(std::string(kRefundSeparator))));
      event.set_relation(static_cast<v1::NeighbouringRelation>(events.ColumnInt(4)));
      event.set_epsilon_alone(events.ColumnDouble(5));
      event.set_created_unix(events.ColumnInt(6));
      event.set_refund_of(events.ColumnInt(7));
      const size_t bytes = event.ByteSizeLong();
      if (!budget.Fits(bytes)) {
        BudgetPageCursor next;
        next.event_id = report.events(report.events_size() - 1).id();
        report.set_next_page_token(EncodeBudgetPageToken(next));
        return report;
      }
      budget.Add(bytes);
      *report.add_events() = std::move(event);
    }
  }
  // A row-value range, so the (dataset_id, created_unix, id) index seeks
  // to the cursor instead of reading every earlier session.
  const bool after_session = after.has_value() && after->session.has_value();
  const PageCursor session_cursor =
      after_session ? *after->session
                    : PageCursor{std::numeric_limits<int64_t>::min(), std::string()};
  DPC_ASSIGN_OR_RETURN(
      auto sessions,
      db->Prepare(absl::StrCat("SELECT ", kSessionColumns, " FROM sessions WHERE dataset_id = ? "
                               "AND (created_unix, id) > (?, ?) "
                               "AND (? = 1 OR owner = '' OR owner = ?) "
                               "ORDER BY created_unix, id LIMIT ?")));
  sessions.Bind(1, dataset_id)
      .Bind(2, session_cursor.created_unix)
      .Bind(3, session_cursor.id)
      .Bind(4, int64_t{caller.is_curator})
      .Bind(5, caller.principal_id)
      .Bind(6, int64_t{page_size} + 1);
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, sessions.Step());
    if (!row) break;
    if (!caller.Sees(sessions.ColumnText(12))) continue;
    v1::Session session = SessionFromRow(sessions);
    const size_t bytes = session.ByteSizeLong();
    if (!budget.Fits(bytes)) {
      // More follow: after this page's last session, or (the events filled
      // the page) from the first session.
      BudgetPageCursor next;
      next.sessions = true;
      if (report.sessions_size() > 0) {
        const v1::Session& last = report.sessions(report.sessions_size() - 1);
        next.session = PageCursor{last.created_unix(), last.id()};
      }
      report.set_next_page_token(EncodeBudgetPageToken(next));
      return report;
    }
    budget.Add(bytes);
    *report.add_sessions() = std::move(session);
  }
  return report;
}

absl::StatusOr<Ledger::BudgetPosition> Ledger::Position(const std::string& dataset_id) {
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(const SpentBudget loaded, LoadSpentBudget(db, dataset_id));
  const LoadedDataset& dataset = loaded.dataset;
  const privacy::EpsilonReport& spent = loaded.spent;
  DPC_ASSIGN_OR_RETURN(auto open, db->Prepare("SELECT COUNT(*) FROM sessions WHERE "
                                              "dataset_id = ? AND state = 'OPEN'"));
  open.Bind(1, dataset_id);
  DPC_ASSIGN_OR_RETURN(bool counted, open.Step());
  BudgetPosition position;
  position.epsilon_spent = spent.epsilon;
  position.epsilon_remaining = std::max(0.0, dataset.epsilon_cap - spent.epsilon);
  position.open_sessions = counted ? open.ColumnInt(0) : 0;
  return position;
}

absl::StatusOr<std::string> Ledger::GetArtefact(const std::string& release_id,
                                                const Caller& caller,
                                                std::string* dataset_id) {
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto query,
                       db->Prepare("SELECT r.status, r.artefact, r.dataset_id, r.owner, "
                                   "j.kind IS NOT NULL, COALESCE(j.kind, 0), r.idempotency_key, "
                                   "r.created_unix FROM releases r LEFT JOIN release_jobs j ON "
                                   "j.release_id = r.id WHERE r.id = ?"));
  query.Bind(1, release_id);
  DPC_ASSIGN_OR_RETURN(bool found, query.Step());
  // Another principal's release reads exactly like one that does not exist.
  if (!found || !caller.Sees(query.ColumnText(3))) {
    return absl::NotFoundError(absl::StrCat("no release '", release_id, "'"));
  }
  if (query.ColumnInt(4) != 0 && query.ColumnText(0) == "PENDING") {
    // An external dataset's job: the release as it stands, no artefact yet.
    v1::Release pending;
    pending.set_id(release_id);
    pending.set_dataset_id(query.ColumnText(2));
    pending.set_idempotency_key(UnscopedKey(query.ColumnText(6)));
    pending.set_kind(static_cast<v1::ReleaseKind>(query.ColumnInt(5)));
    pending.set_created_unix(query.ColumnInt(7));
    pending.set_state(v1::RELEASE_STATE_PENDING);
    if (dataset_id != nullptr) *dataset_id = query.ColumnText(2);
    return pending.SerializeAsString();
  }
  if (query.ColumnInt(4) != 0 && query.ColumnText(0) == "FAILED") {
    return JobFailedError(release_id);
  }
  if (query.ColumnText(0) != "DONE") {
    return absl::FailedPreconditionError(absl::StrCat(
        "release '", release_id, "' is ", query.ColumnText(0),
        "; retry the original request with its idempotency key"));
  }
  if (dataset_id != nullptr) *dataset_id = query.ColumnText(2);
  return query.ColumnBlob(1);
}

absl::StatusOr<v1::ListReleasesResponse> Ledger::ListReleases(const std::string& dataset_id,
                                                              const Caller& caller,
                                                              const PageRequest& page) {
  DPC_ASSIGN_OR_RETURN(const int page_size, ResolvePageSize(page.page_size));
  DPC_ASSIGN_OR_RETURN(const std::optional<PageCursor> after, DecodePageToken(page.page_token));
  auto db = database_->Lock();
  // Keyset order: the page after the token's (created_unix, id), as a
  // row-value range that the (dataset_id, created_unix, id) index seeks
  // to; the caller's own releases only, at most one row past the page.
  DPC_ASSIGN_OR_RETURN(auto query,
                       db->Prepare("SELECT id, kind, idempotency_key, status, epsilon, "
                                   "created_unix, owner FROM releases WHERE dataset_id = ? AND "
                                   "(created_unix, id) > (?, ?) AND "
                                   "(? = 1 OR owner = '' OR owner = ?) "
                                   "ORDER BY created_unix, id LIMIT ?"));
  query.Bind(1, dataset_id)
      .Bind(2, after.has_value() ? after->created_unix : std::numeric_limits<int64_t>::min())
      .Bind(3, after.has_value() ? after->id : std::string())
      .Bind(4, int64_t{caller.is_curator})
      .Bind(5, caller.principal_id)
      .Bind(6, int64_t{page_size} + 1);
  v1::ListReleasesResponse response;
  PageBudget budget(page_size, page.max_bytes);
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    if (!caller.Sees(query.ColumnText(6))) continue;
    v1::ReleaseSummary release;
    release.set_id(query.ColumnText(0));
    release.set_kind(query.ColumnText(1));
    release.set_idempotency_key(UnscopedKey(query.ColumnText(2)));
    release.set_status(query.ColumnText(3));
    release.set_epsilon(query.ColumnDouble(4));
    release.set_created_unix(query.ColumnInt(5));
    const size_t bytes = release.ByteSizeLong();
    if (!budget.Fits(bytes)) {
      // Another visible release exists: the next page starts after the
      // last one on this page.
      const v1::ReleaseSummary& last = response.releases(response.releases_size() - 1);
      response.set_next_page_token(EncodePageToken({last.created_unix(), last.id()}));
      break;
    }
    budget.Add(bytes);
    *response.add_releases() = std::move(release);
  }
  return response;
}


// ------------------------------------------------------------- sessions ---

namespace {

struct LoadedSession {
  v1::Session session;
  std::string step_event;
  int64_t reserve_event_id = 0;
  std::string owner;
  std::string partition_id;  // '' for an ordinary session
  int64_t part_level = -1;
};

absl::StatusOr<LoadedSession> LoadSession(Database* db, const std::string& session_id) {
  DPC_ASSIGN_OR_RETURN(auto query, db->Prepare(absl::StrCat("SELECT ", kSessionColumns,
                                                            " FROM sessions WHERE id = ?")));
  query.Bind(1, session_id);
  DPC_ASSIGN_OR_RETURN(bool found, query.Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no session '", session_id, "'"));
  LoadedSession loaded;
  loaded.session = SessionFromRow(query);
  loaded.step_event = query.ColumnText(10);
  loaded.reserve_event_id = query.ColumnInt(11);
  loaded.owner = query.ColumnText(12);
  loaded.partition_id = query.ColumnText(13);
  loaded.part_level = query.ColumnInt(14);
  return loaded;
}

// LoadSession for a caller: another principal's session reads exactly like
// one that does not exist.
absl::StatusOr<LoadedSession> LoadSessionFor(Database* db, const std::string& session_id,
                                             const Caller& caller) {
  DPC_ASSIGN_OR_RETURN(LoadedSession loaded, LoadSession(db, session_id));
  if (!caller.Sees(loaded.owner)) {
    return absl::NotFoundError(absl::StrCat("no session '", session_id, "'"));
  }
  return loaded;
}

// Spent and remaining epsilon of the session's dataset, for responses.
absl::Status FillBudget(Database* db, v1::Session* session) {
  DPC_ASSIGN_OR_RETURN(LoadedDataset dataset, LoadDatasetBudget(db, session->dataset_id()));
  DPC_ASSIGN_OR_RETURN(privacy::AccountantState state,
                       LoadTotals(db, session->dataset_id(), dataset.relation));
  DPC_ASSIGN_OR_RETURN(privacy::EpsilonReport spent, state.Epsilon(dataset.delta));
  session->set_epsilon_spent_total(spent.epsilon);
  session->set_epsilon_remaining(std::max(0.0, dataset.epsilon_cap - spent.epsilon));
  return absl::OkStatus();
}

absl::Status MarkClosed(Database* db, const Clock& clock, const std::string& session_id,
                        const std::string& final_state) {
  DPC_ASSIGN_OR_RETURN(auto update,
                       db->Prepare("UPDATE sessions SET state = ?, last_activity_unix = ? "
                                   "WHERE id = ?"));
  return update.Bind(1, final_state).Bind(2, clock.UnixNow()).Bind(3, session_id).Run();
}

// The members of a partition, in level order (the order their parts have in
// the reserved event).
absl::StatusOr<std::vector<LoadedSession>> LoadPartition(Database* db,
                                                         const std::string& partition_id) {
  DPC_ASSIGN_OR_RETURN(auto members,
                       db->Prepare("SELECT id FROM sessions WHERE partition_id = ? "
                                   "ORDER BY part_level"));
  members.Bind(1, partition_id);
  std::vector<std::string> ids;
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, members.Step());
    if (!row) break;
    ids.push_back(members.ColumnText(0));
  }
  std::vector<LoadedSession> loaded;
  for (const std::string& id : ids) {
    DPC_ASSIGN_OR_RETURN(LoadedSession member, LoadSession(db, id));
    loaded.push_back(std::move(member));
  }
  return loaded;
}

// plan::PartitionedSessionsEvent of each member's step event repeated
// count(member) times.
template <typename Count>
absl::StatusOr<privacy::PrivacyEvent> PartitionEvent(const std::vector<LoadedSession>& members,
                                                     Count count) {
  std::vector<privacy::PrivacyEvent> step_events;
  std::vector<int64_t> steps;
  for (const LoadedSession& member : members) {
    DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent step, privacy::DecodeEvent(member.step_event));
    step_events.push_back(std::move(step));
    steps.push_back(count(member));
  }
  return plan::PartitionedSessionsEvent(step_events, steps);
}

// A member of a partition closes: its state changes now; the group's charge
// is one event, so it is settled when the last member closes: the
// reservation refunded whole (an exact negation) and the partitioned event
// of the steps every member ran charged, as CloseSessionLocked does for one
// session.
absl::StatusOr<v1::Session> ClosePartitionMemberLocked(Database* db, const Clock& clock,
                                                       LoadedSession closing,
                                                       const std::string& final_state) {
  DPC_RETURN_IF_ERROR(MarkClosed(db, clock, closing.session.id(), final_state));
  closing.session.set_state(final_state);
  DPC_ASSIGN_OR_RETURN(std::vector<LoadedSession> members,
                       LoadPartition(db, closing.partition_id));
  int64_t reserved_total = 0;
  int64_t used_total = 0;
  for (const LoadedSession& member : members) {
    if (member.session.state() == "OPEN") return closing.session;
    reserved_total += member.session.steps_reserved();
    used_total += member.session.steps_used();
  }
  if (used_total == reserved_total) return closing.session;
  DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent reserved,
                       PartitionEvent(members, [](const LoadedSession& m) {
                         return m.session.steps_reserved();
                       }));
  DPC_ASSIGN_OR_RETURN(LoadedDataset dataset, LoadDatasetBudget(db, closing.session.dataset_id()));
  DPC_RETURN_IF_ERROR(RefundLocked(
      db, clock, closing.session.dataset_id(), dataset, closing.partition_id, reserved,
      closing.reserve_event_id,
      absl::StrCat("partitioned sessions closed after ", used_total, " of ", reserved_total,
                   " reserved steps")));
  if (used_total > 0) {
    DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent ran,
                         PartitionEvent(members, [](const LoadedSession& m) {
                           return m.session.steps_used();
                         }));
    DPC_ASSIGN_OR_RETURN(privacy::AccountantState state,
                         LoadTotals(db, closing.session.dataset_id(), dataset.relation));
    // Cannot be refused: each part ran at most its reservation.
    DPC_RETURN_IF_ERROR(ChargeLocked(db, clock, closing.session.dataset_id(), dataset, &state,
                                     ran, "session_steps", closing.partition_id)
                            .status());
  }
  return closing.session;
}

absl::StatusOr<v1::Session> CloseSessionLocked(Database* db, const Clock& clock,
                                               const std::string& session_id,
                                               const std::string& final_state) {
  DPC_ASSIGN_OR_RETURN(LoadedSession loaded, LoadSession(db, session_id));
  v1::Session& session = loaded.session;
  if (session.state() != "OPEN") return session;
  if (!loaded.partition_id.empty()) {
    return ClosePartitionMemberLocked(db, clock, std::move(loaded), final_state);
  }
  // The reservation is refunded whole (an exact negation of the reserve
  // event) and the steps actually run are charged as one new event: the
  // totals then equal a direct charge of those steps, bit for bit, and the
  // accountant never sees a partial negation.
  const int64_t used = session.steps_used();
  if (used < session.steps_reserved()) {
    DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent step_event, privacy::DecodeEvent(loaded.step_event));
    DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent reserved,
                         plan::SessionEvent(step_event, session.steps_reserved()));
    DPC_ASSIGN_OR_RETURN(LoadedDataset dataset, LoadDatasetBudget(db, session.dataset_id()));
    DPC_RETURN_IF_ERROR(RefundLocked(
        db, clock, session.dataset_id(), dataset, session_id, reserved, loaded.reserve_event_id,
        absl::StrCat("session ", final_state == "ABANDONED" ? "abandoned" : "closed", " after ",
                     used, " of ", session.steps_reserved(), " reserved steps")));
    if (used > 0) {
      DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent ran,
                           plan::SessionEvent(step_event, used));
      DPC_ASSIGN_OR_RETURN(privacy::AccountantState state,
                           LoadTotals(db, session.dataset_id(), dataset.relation));
      // Cannot be refused: `used` steps cost no more than the reservation
      // the state held a moment ago.
      DPC_RETURN_IF_ERROR(ChargeLocked(db, clock, session.dataset_id(), dataset, &state, ran,
                                       "session_steps", session_id)
                              .status());
    }
  }
  DPC_ASSIGN_OR_RETURN(auto update,
                       db->Prepare("UPDATE sessions SET state = ?, last_activity_unix = ? "
                                   "WHERE id = ?"));
  DPC_RETURN_IF_ERROR(
      update.Bind(1, final_state).Bind(2, clock.UnixNow()).Bind(3, session_id).Run());
  session.set_state(final_state);
  return session;
}

}  // namespace

absl::StatusOr<Ledger::SessionAdmission> Ledger::OpenSession(
    const std::string& dataset_id, const Caller& caller, const std::string& key,
    const std::string& request_bytes, const v1::SessionParams& params,
    const privacy::PrivacyEvent& step_event, int64_t steps, double noise_multiplier) {
  if (key.empty()) {
    return absl::InvalidArgumentError("opening a session needs an idempotency key");
  }
  const std::string idempotency_key = ScopedKey(caller, key);
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db));
  DPC_ASSIGN_OR_RETURN(LoadedDataset dataset, LoadDatasetBudget(db, dataset_id));
  SessionAdmission admission;
  DPC_ASSIGN_OR_RETURN(auto existing, db->Prepare("SELECT id, request FROM sessions WHERE "
                                                  "dataset_id = ? AND idempotency_key = ?"));
  existing.Bind(1, dataset_id).Bind(2, idempotency_key);
  DPC_ASSIGN_OR_RETURN(bool known, existing.Step());
  if (known) {
    if (existing.ColumnBlob(1) != request_bytes) {
      return absl::FailedPreconditionError(
          absl::StrCat("idempotency key '", key, "' was already used for a different session"));
    }
    DPC_ASSIGN_OR_RETURN(LoadedSession loaded, LoadSession(db, existing.ColumnText(0)));
    admission.replayed = true;
    admission.session = loaded.session;
    DPC_RETURN_IF_ERROR(FillBudget(db, &admission.session));
    return admission;
  }
  DPC_ASSIGN_OR_RETURN(privacy::AccountantState state,
                       LoadTotals(db, dataset_id, dataset.relation));
  DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent reserved,
                       plan::SessionEvent(step_event, steps));
  if (quotas_ != nullptr) {
    DPC_RETURN_IF_ERROR(
        quotas_->CheckSessions(db, caller.principal_id, 1, steps, dataset.delta, reserved));
  }
  const std::string session_id = NewId("ses");
  DPC_ASSIGN_OR_RETURN(Charge charge, ChargeLocked(db, *clock_, dataset_id, dataset, &state,
                                                   reserved, "session_reserve", session_id));
  const int64_t now = clock_->UnixNow();
  DPC_ASSIGN_OR_RETURN(
      auto insert,
      db->Prepare("INSERT INTO sessions (id, dataset_id, idempotency_key, request, params, state, "
                  "steps_reserved, noise_multiplier, step_event, reserve_event_id, "
                  "epsilon_reserved, created_unix, last_activity_unix, owner) VALUES (?, ?, ?, ?, "
                  "?, 'OPEN', ?, ?, ?, ?, ?, ?, ?, ?)"));
  DPC_RETURN_IF_ERROR(insert.Bind(1, session_id)
                          .Bind(2, dataset_id)
                          .Bind(3, idempotency_key)
                          .BindBlob(4, request_bytes)
                          .BindBlob(5, params.SerializeAsString())
                          .Bind(6, steps)
                          .Bind(7, noise_multiplier)
                          .Bind(8, privacy::EncodeEvent(step_event))
                          .Bind(9, charge.event_id)
                          .Bind(10, charge.epsilon_alone)
                          .Bind(11, now)
                          .Bind(12, now)
                          .Bind(13, caller.principal_id)
                          .Run());
  DPC_RETURN_IF_ERROR(transaction.Commit());
  DPC_ASSIGN_OR_RETURN(LoadedSession loaded, LoadSession(db, session_id));
  admission.session = loaded.session;
  admission.session.set_epsilon_spent_total(charge.epsilon_after);
  admission.session.set_epsilon_remaining(std::max(0.0, dataset.epsilon_cap - charge.epsilon_after));
  return admission;
}

absl::StatusOr<Ledger::PartitionedAdmission> Ledger::OpenPartitionedSessions(
    const std::string& dataset_id, const Caller& caller, const std::string& key,
    const std::string& request_bytes, std::vector<SessionPart> parts) {
  if (key.empty()) {
    return absl::InvalidArgumentError("opening partitioned sessions needs an idempotency key");
  }
  if (parts.empty() || parts.size() > static_cast<size_t>(privacy::kMaxPartitionParts)) {
    return absl::InvalidArgumentError(absl::StrCat("a partition needs 1 to ",
                                                   privacy::kMaxPartitionParts, " parts"));
  }
  std::sort(parts.begin(), parts.end(),
            [](const SessionPart& a, const SessionPart& b) { return a.level < b.level; });
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k > 0 && parts[k].level == parts[k - 1].level) {
      return absl::InvalidArgumentError(
          absl::StrCat("part ", parts[k].level, " is named twice; each part is opened once"));
    }
    if (!parts[k].step_event.has_value() || parts[k].steps < 1) {
      return absl::InvalidArgumentError("each part needs a step event and at least one step");
    }
  }
  // Each member's own key: the scoped key and its part's level, so the
  // sessions table's (dataset, key) uniqueness holds per member.
  const std::string scoped = ScopedKey(caller, key);
  auto member_key = [&scoped](int32_t level) {
    return absl::StrCat(scoped, "\x1epart", level);
  };
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db));
  DPC_ASSIGN_OR_RETURN(LoadedDataset dataset, LoadDatasetBudget(db, dataset_id));
  PartitionedAdmission admission;
  // The group's key is the caller's key whatever parts it names, so a key
  // reused for other parts is refused, never admitted a second time.
  DPC_ASSIGN_OR_RETURN(auto existing,
                       db->Prepare("SELECT id, request FROM session_partitions WHERE "
                                   "dataset_id = ? AND idempotency_key = ?"));
  existing.Bind(1, dataset_id).Bind(2, scoped);
  DPC_ASSIGN_OR_RETURN(bool known, existing.Step());
  if (known) {
    if (existing.ColumnBlob(1) != request_bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "idempotency key '", key, "' was already used for different sessions"));
    }
    DPC_ASSIGN_OR_RETURN(std::vector<LoadedSession> members,
                         LoadPartition(db, existing.ColumnText(0)));
    admission.replayed = true;
    for (LoadedSession& member : members) {
      DPC_RETURN_IF_ERROR(FillBudget(db, &member.session));
      admission.sessions.push_back(std::move(member.session));
    }
    return admission;
  }
  std::vector<privacy::PrivacyEvent> step_events;
  std::vector<int64_t> reserved_steps;
  for (const SessionPart& part : parts) {
    step_events.push_back(*part.step_event);
    reserved_steps.push_back(part.steps);
  }
  DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent reserved,
                       plan::PartitionedSessionsEvent(step_events, reserved_steps));
  if (quotas_ != nullptr) {
    int64_t steps = 0;
    for (const SessionPart& part : parts) steps += part.steps;
    DPC_RETURN_IF_ERROR(quotas_->CheckSessions(db, caller.principal_id,
                                               static_cast<int64_t>(parts.size()), steps,
                                               dataset.delta, reserved));
  }
  DPC_ASSIGN_OR_RETURN(privacy::AccountantState state,
                       LoadTotals(db, dataset_id, dataset.relation));
  const std::string partition_id = NewId("par");
  DPC_ASSIGN_OR_RETURN(Charge charge, ChargeLocked(db, *clock_, dataset_id, dataset, &state,
                                                   reserved, "session_reserve", partition_id));
  const int64_t now = clock_->UnixNow();
  DPC_ASSIGN_OR_RETURN(auto group,
                       db->Prepare("INSERT INTO session_partitions (id, dataset_id, "
                                   "idempotency_key, request, reserve_event_id, created_unix) "
                                   "VALUES (?, ?, ?, ?, ?, ?)"));
  DPC_RETURN_IF_ERROR(group.Bind(1, partition_id)
                          .Bind(2, dataset_id)
                          .Bind(3, scoped)
                          .BindBlob(4, request_bytes)
                          .Bind(5, charge.event_id)
                          .Bind(6, now)
                          .Run());
  std::vector<std::string> ids;
  for (const SessionPart& part : parts) {
    const std::string session_id = NewId("ses");
    DPC_ASSIGN_OR_RETURN(
        auto insert,
        db->Prepare("INSERT INTO sessions (id, dataset_id, idempotency_key, request, params, "
                    "state, steps_reserved, noise_multiplier, step_event, reserve_event_id, "
                    "epsilon_reserved, created_unix, last_activity_unix, owner, partition_id, "
                    "part_level) VALUES (?, ?, ?, ?, ?, 'OPEN', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    DPC_RETURN_IF_ERROR(insert.Bind(1, session_id)
                            .Bind(2, dataset_id)
                            .Bind(3, member_key(part.level))
                            .BindBlob(4, request_bytes)
                            .BindBlob(5, part.params.SerializeAsString())
                            .Bind(6, part.steps)
                            .Bind(7, part.noise_multiplier)
                            .Bind(8, privacy::EncodeEvent(*part.step_event))
                            .Bind(9, charge.event_id)
                            .Bind(10, charge.epsilon_alone)
                            .Bind(11, now)
                            .Bind(12, now)
                            .Bind(13, caller.principal_id)
                            .Bind(14, partition_id)
                            .Bind(15, int64_t{part.level})
                            .Run());
    ids.push_back(session_id);
  }
  DPC_RETURN_IF_ERROR(transaction.Commit());
  for (const std::string& id : ids) {
    DPC_ASSIGN_OR_RETURN(LoadedSession loaded, LoadSession(db, id));
    loaded.session.set_epsilon_spent_total(charge.epsilon_after);
    loaded.session.set_epsilon_remaining(
        std::max(0.0, dataset.epsilon_cap - charge.epsilon_after));
    admission.sessions.push_back(std::move(loaded.session));
  }
  return admission;
}

absl::StatusOr<std::optional<int32_t>> Ledger::SessionPartLevel(const std::string& session_id) {
  auto locked = database_->Lock();
  DPC_ASSIGN_OR_RETURN(LoadedSession loaded, LoadSession(locked.get(), session_id));
  if (loaded.partition_id.empty()) return std::optional<int32_t>();
  return std::optional<int32_t>(static_cast<int32_t>(loaded.part_level));
}

absl::StatusOr<Ledger::StepAdmission> Ledger::BeginStep(const std::string& session_id,
                                                         const Caller& caller, int64_t step) {
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(LoadedSession loaded, LoadSessionFor(db, session_id, caller));
  StepAdmission admission;
  admission.session = loaded.session;
  DPC_ASSIGN_OR_RETURN(auto stored, db->Prepare("SELECT artefact, incident FROM session_steps "
                                                "WHERE session_id = ? AND step = ?"));
  stored.Bind(1, session_id).Bind(2, step);
  DPC_ASSIGN_OR_RETURN(bool found, stored.Step());
  if (found) {
    admission.stored = StoredStep{stored.ColumnBlob(0), stored.ColumnText(1)};
    return admission;
  }
  if (loaded.session.state() != "OPEN") {
    if (!loaded.partition_id.empty()) {
      // A partitioned group is settled as one (docs/privacy.md 3.7): the
      // reservation is returned when its last member closes, not before.
      DPC_ASSIGN_OR_RETURN(const std::vector<LoadedSession> members,
                           LoadPartition(db, loaded.partition_id));
      int64_t open = 0;
      for (const LoadedSession& member : members) open += member.session.state() == "OPEN";
      if (open > 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "session '", session_id, "' is ", loaded.session.state(),
            "; it is one of a partitioned group of ", members.size(), " sessions, ", open,
            " still open. The group's unused budget is returned when its last session "
            "closes. Open a new session to continue"));
      }
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "session '", session_id, "' is ", loaded.session.state(),
        "; its unused budget was returned. Open a new session to continue"));
  }
  if (step < 0 || step >= loaded.session.steps_reserved()) {
    return absl::OutOfRangeError(absl::StrCat("step ", step, " is outside the ",
                                              loaded.session.steps_reserved(),
                                              " steps this session reserved (0-based)"));
  }
  // The step's artefact is stored under the session's owner.
  if (quotas_ != nullptr) DPC_RETURN_IF_ERROR(quotas_->CheckStep(db, loaded.owner));
  return admission;
}

absl::StatusOr<Ledger::StoredStep> Ledger::RecordStep(const std::string& session_id,
                                                      int64_t step, const StoredStep& outcome,
                                                      bool drop_previous_answer) {
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db));
  DPC_ASSIGN_OR_RETURN(LoadedSession loaded, LoadSession(db, session_id));
  DPC_ASSIGN_OR_RETURN(auto stored, db->Prepare("SELECT artefact, incident FROM session_steps "
                                                "WHERE session_id = ? AND step = ?"));
  stored.Bind(1, session_id).Bind(2, step);
  DPC_ASSIGN_OR_RETURN(bool found, stored.Step());
  if (found) return StoredStep{stored.ColumnBlob(0), stored.ColumnText(1)};
  if (loaded.session.state() != "OPEN") {
    // Closed while this step was computing: its reservation was refunded,
    // so the result must not be delivered. (A failed step closed under it
    // reads the same: the analyst learns nothing from which it was.)
    return absl::FailedPreconditionError(
        absl::StrCat("session '", session_id, "' was closed while the step ran; not released"));
  }
  const int64_t now = clock_->UnixNow();
  DPC_ASSIGN_OR_RETURN(auto insert,
                       db->Prepare("INSERT INTO session_steps (session_id, step, artefact, "
                                   "created_unix, incident) VALUES (?, ?, ?, ?, ?)"));
  DPC_RETURN_IF_ERROR(insert.Bind(1, session_id)
                          .Bind(2, step)
                          .BindBlob(3, outcome.artefact)
                          .Bind(4, now)
                          .Bind(5, outcome.incident)
                          .Run());
  if (drop_previous_answer && step > 0) {
    DPC_ASSIGN_OR_RETURN(auto blank,
                         db->Prepare("UPDATE session_steps SET artefact = zeroblob(0) "
                                     "WHERE session_id = ? AND step = ?"));
    DPC_RETURN_IF_ERROR(blank.Bind(1, session_id).Bind(2, step - 1).Run());
  }
  DPC_ASSIGN_OR_RETURN(auto touch,
                       db->Prepare("UPDATE sessions SET last_activity_unix = ? WHERE id = ?"));
  DPC_RETURN_IF_ERROR(touch.Bind(1, now).Bind(2, session_id).Run());
  DPC_RETURN_IF_ERROR(transaction.Commit());
  return outcome;
}

absl::StatusOr<v1::Session> Ledger::CloseSession(const std::string& session_id,
                                                 const Caller& caller,
                                                 const std::string& final_state) {
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db));
  DPC_RETURN_IF_ERROR(LoadSessionFor(db, session_id, caller).status());
  DPC_ASSIGN_OR_RETURN(v1::Session session,
                       CloseSessionLocked(db, *clock_, session_id, final_state));
  DPC_RETURN_IF_ERROR(transaction.Commit());
  DPC_RETURN_IF_ERROR(FillBudget(db, &session));
  return session;
}

absl::StatusOr<v1::Session> Ledger::GetSession(const std::string& session_id,
                                               const Caller& caller) {
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(LoadedSession loaded, LoadSessionFor(db, session_id, caller));
  DPC_RETURN_IF_ERROR(FillBudget(db, &loaded.session));
  return loaded.session;
}

absl::StatusOr<int> Ledger::CloseIdleSessions(int64_t idle_seconds) {
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db));
  DPC_ASSIGN_OR_RETURN(auto idle, db->Prepare("SELECT id FROM sessions WHERE state = 'OPEN' AND "
                                              "last_activity_unix <= ?"));
  idle.Bind(1, clock_->UnixNow() - idle_seconds);
  std::vector<std::string> ids;
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, idle.Step());
    if (!row) break;
    ids.push_back(idle.ColumnText(0));
  }
  for (const std::string& id : ids) {
    DPC_RETURN_IF_ERROR(CloseSessionLocked(db, *clock_, id, "ABANDONED").status());
  }
  DPC_RETURN_IF_ERROR(transaction.Commit());
  return static_cast<int>(ids.size());
}

namespace {

// Every event of the dataset in id order, added (or, for a refund,
// subtracted) into a fresh state: what the running totals must equal.
// Problems with single events (one that does not apply) go to `problems`.
absl::StatusOr<privacy::AccountantState> RebuildTotalsLocked(
    Database* db, const std::string& dataset_id, privacy::NeighbouringRelation relation,
    std::vector<std::string>* problems) {
  privacy::AccountantState rebuilt(relation);
  DPC_ASSIGN_OR_RETURN(auto events, db->Prepare("SELECT description, refund_of, kind FROM "
                                                "ledger_events WHERE dataset_id = ? ORDER BY id"));
  events.Bind(1, dataset_id);
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool event_row, events.Step());
    if (!event_row) break;
    std::string text = events.ColumnText(0);
    const bool refund = !events.ColumnIsNull(1);
    if (refund) text = text.substr(0, text.find(std::string(kRefundSeparator)));
    DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent event, privacy::DecodeEvent(text));
    absl::Status status = refund ? rebuilt.Subtract(event) : rebuilt.Add(event);
    if (!status.ok()) {
      if (problems == nullptr) return status;
      problems->push_back(absl::StrCat("dataset ", dataset_id, ": ", status.message()));
    }
  }
  return rebuilt;
}

}  // namespace

absl::StatusOr<privacy::AccountantState> Ledger::StoredTotals(const std::string& dataset_id) {
  auto locked = database_->Lock();
  DPC_ASSIGN_OR_RETURN(LoadedDataset dataset, LoadDatasetBudget(locked.get(), dataset_id));
  return LoadTotals(locked.get(), dataset_id, dataset.relation);
}

absl::StatusOr<privacy::AccountantState> Ledger::RebuildTotals(const std::string& dataset_id) {
  auto locked = database_->Lock();
  DPC_ASSIGN_OR_RETURN(LoadedDataset dataset, LoadDatasetBudget(locked.get(), dataset_id));
  return RebuildTotalsLocked(locked.get(), dataset_id, dataset.relation, nullptr);
}

absl::StatusOr<std::vector<std::string>> Ledger::VerifyTotals() {
  auto locked = database_->Lock();
  Database* db = locked.get();
  std::vector<std::string> problems;
  DPC_ASSIGN_OR_RETURN(auto datasets, db->Prepare("SELECT id, relation FROM datasets"));
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, datasets.Step());
    if (!row) break;
    const std::string dataset_id = datasets.ColumnText(0);
    const auto relation =
        RelationFromProto(static_cast<v1::NeighbouringRelation>(datasets.ColumnInt(1)));
    DPC_ASSIGN_OR_RETURN(privacy::AccountantState rebuilt,
                         RebuildTotalsLocked(db, dataset_id, relation, &problems));
    DPC_ASSIGN_OR_RETURN(privacy::AccountantState stored, LoadTotals(db, dataset_id, relation));
    if (!(stored == rebuilt)) {
      problems.push_back(absl::StrCat("dataset ", dataset_id,
                                      ": running totals differ from the sum of its events"));
    }
    // The count stored beside the state (a dataset with no totals row has
    // no events, which the comparison above already holds).
    DPC_ASSIGN_OR_RETURN(auto count,
                         db->Prepare("SELECT event_count FROM ledger_totals WHERE dataset_id = ?"));
    count.Bind(1, dataset_id);
    DPC_ASSIGN_OR_RETURN(bool has_totals, count.Step());
    if (has_totals && count.ColumnInt(0) != rebuilt.event_count()) {
      problems.push_back(absl::StrCat("dataset ", dataset_id, ": running event count ",
                                      count.ColumnInt(0), " differs from its events' ",
                                      rebuilt.event_count()));
    }
  }
  return problems;
}

// ------------------------------------------- jobs of external datasets ---

namespace {

constexpr const char* kJobColumns =
    "j.release_id, j.dataset_id, r.idempotency_key, r.status, j.kind, j.schema, j.request, "
    "j.plan_digest, j.created_unix, r.epsilon, COALESCE((SELECT e.description FROM "
    "ledger_events e WHERE e.release_id = j.release_id AND e.refund_of IS NULL ORDER BY e.id "
    "DESC LIMIT 1), '')";

Ledger::Job JobFromRow(const Statement& row) {
  Ledger::Job job;
  job.release_id = row.ColumnText(0);
  job.dataset_id = row.ColumnText(1);
  job.idempotency_key = UnscopedKey(row.ColumnText(2));
  job.status = row.ColumnText(3);
  job.plan.kind = static_cast<v1::ReleaseKind>(row.ColumnInt(4));
  job.plan.schema = row.ColumnBlob(5);
  job.plan.request = row.ColumnBlob(6);
  job.plan.digest = row.ColumnBlob(7);
  job.created_unix = row.ColumnInt(8);
  job.epsilon_alone = row.ColumnDouble(9);
  job.charged_event = row.ColumnText(10);
  return job;
}

// A job id the caller may not act on reads like an unknown one: the same
// text whether the id is unknown, no job, or another dataset's.
absl::Status NoSuchJob(const std::string& release_id, const std::string& dataset_id) {
  return absl::NotFoundError(absl::StrCat("no job '", release_id, "' on dataset '", dataset_id,
                                          "' (list them with ListPendingJobs)"));
}

}  // namespace

absl::Status JobNotPendingError(const std::string& release_id, const std::string& status) {
  return absl::FailedPreconditionError(absl::StrCat(
      "job '", release_id, "' is not pending (", status == "DONE" ? "done" : "failed",
      "); nothing was changed"));
}

absl::StatusOr<std::vector<Ledger::Job>> Ledger::ListPendingJobs(const std::string& dataset_id,
                                                                 int limit) {
  auto db = database_->Lock();
  // From the pending releases' partial index (migration 13): the oldest
  // `limit` pending jobs, never the finished ones, so the work does not grow
  // with the dataset's history (a job's row has its release's created_unix).
  DPC_ASSIGN_OR_RETURN(auto query,
                       db->Prepare(absl::StrCat("SELECT ", kJobColumns,
                                                " FROM releases r JOIN release_jobs j ON "
                                                "j.release_id = r.id WHERE r.dataset_id = ? AND "
                                                "r.status = 'PENDING' ORDER BY r.created_unix, "
                                                "r.id LIMIT ?")));
  query.Bind(1, dataset_id).Bind(2, int64_t{limit});
  std::vector<Job> jobs;
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    jobs.push_back(JobFromRow(query));
  }
  return jobs;
}

absl::StatusOr<Ledger::Job> Ledger::LoadJob(const std::string& release_id,
                                            const std::string& dataset_id) {
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto query,
                       db->Prepare(absl::StrCat("SELECT ", kJobColumns,
                                                " FROM release_jobs j JOIN releases r ON r.id = "
                                                "j.release_id WHERE j.release_id = ?")));
  query.Bind(1, release_id);
  DPC_ASSIGN_OR_RETURN(bool found, query.Step());
  if (!found) return NoSuchJob(release_id, dataset_id);
  Job job = JobFromRow(query);
  if (job.dataset_id != dataset_id) return NoSuchJob(release_id, dataset_id);
  return job;
}

absl::Status Ledger::CompleteJob(const std::string& release_id, const std::string& dataset_id,
                                 const std::string& digest, const std::string& artefact) {
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db));
  DPC_ASSIGN_OR_RETURN(auto update,
                       db->Prepare("UPDATE releases SET status = 'DONE', artefact = ? WHERE id = "
                                   "? AND status = 'PENDING' AND EXISTS (SELECT 1 FROM "
                                   "release_jobs j WHERE j.release_id = releases.id AND "
                                   "j.dataset_id = ? AND j.plan_digest = ?)"));
  DPC_RETURN_IF_ERROR(update.BindBlob(1, artefact)
                          .Bind(2, release_id)
                          .Bind(3, dataset_id)
                          .BindBlob(4, digest)
                          .Run());
  if (db->Changes() == 0) {
    // Another submission or a FailJob got here first.
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", release_id, "' is no longer pending with this plan; nothing was changed"));
  }
  return transaction.Commit();
}

absl::Status Ledger::FailJob(const std::string& release_id, const std::string& dataset_id) {
  auto locked = database_->Lock();
  Database* db = locked.get();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db));
  DPC_ASSIGN_OR_RETURN(auto query,
                       db->Prepare("SELECT r.status FROM release_jobs j JOIN releases r ON r.id "
                                   "= j.release_id WHERE j.release_id = ? AND j.dataset_id = ?"));
  query.Bind(1, release_id).Bind(2, dataset_id);
  DPC_ASSIGN_OR_RETURN(bool found, query.Step());
  if (!found) return NoSuchJob(release_id, dataset_id);
  const std::string status = query.ColumnText(0);
  if (status != "PENDING") return JobNotPendingError(release_id, status);
  DPC_ASSIGN_OR_RETURN(auto fail,
                       db->Prepare("UPDATE releases SET status = 'FAILED', charged_failure = 1 "
                                   "WHERE id = ? AND status = 'PENDING'"));
  DPC_RETURN_IF_ERROR(fail.Bind(1, release_id).Run());
  return transaction.Commit();
}

}  // namespace dpcurator::server
