#ifndef DPCURATOR_PLAN_RELEASES_H_
#define DPCURATOR_PLAN_RELEASES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/data/schema.h"
#include "core/privacy/events.h"
#include "core/privacy/noise_source.h"
#include "core/release/encoded_rows.h"
#include "core/release/mechanism_record.h"
#include "core/release/step_batch.h"
#include "core/train/aim.h"
#include "core/train/mst.h"
#include "dpcurator/v1/dpcurator.pb.h"
#include "plan/category_fit.h"
#include "plan/footprint.h"
#include "plan/partition.h"
#include "plan/release_kinds.h"

namespace dpcurator::plan {

// What a release request will cost, decided before any row is read.
struct ReleasePlan {
  const ReleaseKindBinding* binding = nullptr;
  // The kind's one name (ReleaseKindName), as the ledger, log and metrics
  // record it.
  std::string kind_name() const;
  // The kind as the wire names it (a recipe's too: MST, AIM, MARGINALS).
  v1::ReleaseKind kind() const;
  double noise_multiplier = 0.0;
  // The mechanism the kind's unit will run, and the event charged for it:
  // release::OneShotEvent(planned), built nowhere else.
  release::GaussianMechanismRecord planned;
  std::optional<privacy::PrivacyEvent> event;
  // The request with server-chosen defaults filled in (public seed, ...):
  // stored with the release, so a replay is exact.
  v1::ReleaseRequest resolved_request;
  // The MST recipe (ReleaseRequest.mst), which is no one-shot Gaussian kind
  // (binding is null): its budget in thirds, from the public schema and
  // epsilon; `event` is train::MstEvent(*mst), every mechanism it will run.
  std::optional<train::MstBudget> mst;
  // The AIM recipe (ReleaseRequest.aim; docs/privacy.md 2.12), likewise no
  // one-shot kind: everything RunAim takes besides the rows, from the public
  // schema and the request; `event` is train::AimEvent(aim->budget), the
  // one zcdp(rho) event of the whole adaptive run.
  struct Aim {
    train::AimBudget budget;
    std::vector<std::vector<int>> workload;
    std::vector<train::AimCandidate> candidates;
    int64_t max_model_cells = 0;
    // Planted bugs for the audit's power tests (audit/mutants.cc): PlanRelease
    // always leaves it identity, and no request field sets it.
    train::AimMutation mutation;
  };
  std::optional<Aim> aim;
  // The marginals release (ReleaseRequest.marginals), ordinary or
  // partitioned (plan/partition.h, PlanMarginalsRelease); `event` is its
  // release::MarginalsEvent.
  std::optional<MarginalsReleasePlan> marginals;
  // The category fit (ReleaseRequest.category_fit; plan/category_fit.h,
  // PlanCategoryFitRelease): `event` is its release::CategoryFitEvent.
  std::optional<CategoryFitPlan> category_fit;
  // An external dataset's mst or aim release (issue 41; docs/scale-out.md):
  // every clique whose exact table the recipe may read
  // (train::MstTableCliques, train::AimTableCliques), a function of the
  // public schema and request fixed before admission, in the order the
  // submitted statistic concatenates their tables, and their cells (the
  // statistic's length). Empty for any other release.
  std::vector<std::vector<int>> external_tables;
  int64_t external_table_cells = 0;
  // Its projected peak and answer size (issue 36), from the same public
  // parameters the plan resolved: checked before admission against
  // --memory-budget and the send limit.
  PlanFootprint footprint;
};

// Bytes a cell of AIM's model takes on the server while a round re-fits it:
// the fit's 7 tables of doubles and the zero rule's byte (57 bytes a cell,
// core/pgm/graphical_model.h EstimateOptions::max_cells) beside the
// previous round's model, the warm start, which keeps theta and mu (16).
// docs/benchmarks.md "Model-size limit": about 730 MB at the default 10^7 cells.
inline constexpr int64_t kAimServerBytesPerModelCell = 57 + 16;
// What an artefact carries besides its tables (ids, the relation, doubles,
// field tags), bounded generously; the schema is counted on its own.
inline constexpr int64_t kArtefactOverheadBytes = 1024;
// One noisy table's framing (clique, shape, noise std, tags).
inline constexpr int64_t kTableOverheadBytes = 64;

// The dataset's rows as the work reads them: the raw table LoadRows builds
// (8 bytes a cell, the pixels), and the encoded rows LoadEncodedRows keeps
// (total_dim doubles and a label a row) with the raw table it encodes from.
// 0 for an external dataset (its rows are never here). Private under
// ADD_REMOVE: PlanFootprint::row_bytes only.
int64_t RawRowBytes(const v1::Dataset& dataset, const data::Schema& schema);
int64_t EncodedRowBytes(const v1::Dataset& dataset, const data::Schema& schema);

// The most columns an mst release takes: its tree selection scores all
// n (n - 1) / 2 pairs over the rows (604,450 at 1,100 columns, which admits
// the seed's 1,071-feature binary experiment: measured about 1 ns per pair
// and row on one core, each pair's table counted straight from two code
// columns; core/train/mst.cc SelectMstTree).
inline constexpr int kMaxMstColumns = 1100;

// Validates the request against the dataset, resolves defaults and
// calibrates the noise multiplier for a target epsilon (conservatively, at
// the dataset's delta, for this release alone).
absl::StatusOr<ReleasePlan> PlanRelease(const v1::ReleaseRequest& request,
                                        const v1::Dataset& dataset, const data::Schema& schema);

// The kind's engine with its public allocations made (the frequency
// matrix): called after admission and BEFORE any row is read, so that an
// allocation failure is a failure before the read (docs/privacy.md 6.4).
absl::StatusOr<std::unique_ptr<PreparedEngine>> PrepareRelease(const ReleasePlan& plan,
                                                               const data::Schema& schema);

// Runs the prepared engine for the planned release over the dataset's
// encoded rows and wraps the noised statistic in an artefact. Refuses
// (INTERNAL, nothing released) when the engine's record of its mechanism
// differs from the plan the ledger charged. Pure computation: no ledger.
absl::StatusOr<v1::Release> ComputeRelease(const ReleasePlan& plan, PreparedEngine& engine,
                                           const v1::Dataset& dataset,
                                           const release::EncodedRows& rows,
                                           const std::string& release_id, double epsilon_alone,
                                           privacy::NoiseSource* noise);
// The public row count a plan uses: the stored rows' count, or an external
// dataset's declared public_row_bound (REPLACE_ONE's n; unused otherwise).
int64_t PublicRowCount(const v1::Dataset& dataset);

// The column indices of each clique a request names (aim's workload,
// marginals' cliques), checked before admission against data-independent
// bounds: at most release::kMaxCliques cliques of 1 to
// release::kMaxCliqueColumns columns, each a column of the schema. `what`
// names the list in the messages ("aim workload").
absl::StatusOr<std::vector<std::vector<int>>> ResolveCliqueColumns(
    const google::protobuf::RepeatedPtrField<v1::AimClique>& cliques, const data::Schema& schema,
    const v1::Dataset& dataset, const std::string& what);

// The multiplier a one-shot request asks for, before admission: its
// epsilon (finite, > 0) calibrated by `calibrate`, or its noise_multiplier
// (finite, > 0) as given; INVALID_ARGUMENT when it names neither. The one
// reading of ReleaseRequest.privacy for PlanRelease and PlanMarginalsRelease,
// so both refuse the same requests with the same words.
absl::StatusOr<double> ResolveRequestedNoiseMultiplier(
    const v1::ReleaseRequest& request,
    absl::FunctionRef<absl::StatusOr<double>(double epsilon)> calibrate);

// Before admission, first of PlanRelease's checks: on an external dataset
// (docs/scale-out.md) only what one pass over the rows computes in the
// curator's cluster: the one-phase sums over rows (rff_embedding,
// charfn_embedding with a declared length-scale) and the recipes that read
// rows only through count tables (mst, aim: issue 41, every table they may
// read counted in that pass); anything else is FAILED_PRECONDITION, nothing
// charged.
absl::Status CheckExternalRelease(const v1::ReleaseRequest& request, const v1::Dataset& dataset);

// A statistic submitted for an external dataset's job, against its plan:
// the length the engine takes (ExactEmbeddingLength for the public schema),
// every entry finite, rows >= 0, and under REPLACE_ONE rows equal to the
// public n. INVALID_ARGUMENT saying which, "Nothing was changed". Shape
// checks only, of values the curator sent: the message names no entry.
absl::Status CheckSubmittedShape(const ReleasePlan& plan, const PreparedEngine& engine,
                                 const v1::Dataset& dataset, const data::Schema& schema,
                                 absl::Span<const double> statistic, int64_t rows);

// The external path's ComputeRelease (RunnerService.SubmitStatistic):
// CheckSubmittedShape, then the kind's noise step over the submitted exact
// statistic (PreparedEngine::RunOnStatistic, the step the engine's Run ends
// with), the same check of the mechanism against the plan, and the same
// artefact. Pure computation: no ledger.
absl::StatusOr<v1::Release> ComputeReleaseFromStatistic(
    const ReleasePlan& plan, PreparedEngine& engine, const v1::Dataset& dataset,
    const data::Schema& schema, absl::Span<const double> statistic, int64_t rows,
    const std::string& release_id, double epsilon_alone, privacy::NoiseSource* noise);

// The cliques whose exact tables an external mst or aim job submits, in
// the order the statistic concatenates them, from the public schema and the
// resolved request alone: train::MstTableCliques, or train::AimTableCliques
// of the candidates of the request's workload (the default one when it
// names none). PlanRelease stores them in external_tables; the scale-out
// module (python/src/partials.cc) calls this same function to build the
// job's partial, so the two lists cannot drift apart.
absl::StatusOr<std::vector<std::vector<int>>> ExternalRecipeTables(
    const v1::ReleaseRequest& resolved, const data::Schema& schema);

// The external path of an mst or aim plan (RunnerService.SubmitStatistic,
// issue 41): `statistic` is the exact count tables of plan.external_tables,
// concatenated in that order (the marginals partial's layout). Checks its
// shape (length plan.external_table_cells, every entry finite, rows >= 0,
// REPLACE_ONE's rows = n: INVALID_ARGUMENT, "Nothing was changed", no entry
// named), then runs the very recipe ComputeMstRelease / ComputeAimRelease
// run, over those tables instead of the rows: the same artefact for the
// same tables and noise draws. `rows` is only checked, never used: the
// recipe uses what a stored dataset's does (its noisy counts).
absl::Status CheckSubmittedTablesShape(const ReleasePlan& plan, const v1::Dataset& dataset,
                                       absl::Span<const double> statistic, int64_t rows);
absl::StatusOr<v1::Release> ComputeRecipeReleaseFromTables(
    const ReleasePlan& plan, const v1::Dataset& dataset, const data::Schema& schema,
    absl::Span<const double> statistic, int64_t rows, const std::string& release_id,
    double epsilon_alone, privacy::NoiseSource* noise);

// PrepareRelease, then ComputeRelease (tests).
absl::StatusOr<v1::Release> ComputeRelease(const ReleasePlan& plan, const v1::Dataset& dataset,
                                           const release::EncodedRows& rows,
                                           const std::string& release_id, double epsilon_alone,
                                           privacy::NoiseSource* noise);

// The MST recipe for a plan with `mst` set (docs/privacy.md 2.11): noisy
// 1-way marginals of every column, SelectMstTree on the discretised rows
// (n - 1 exponential mechanisms), noisy 2-way marginals of the chosen
// pairs, each Gaussian checked against the plan. Reads the raw rows (the
// discretisation needs the stored values, not the encoded features).
absl::StatusOr<v1::Release> ComputeMstRelease(const ReleasePlan& plan, const v1::Dataset& dataset,
                                              const data::Schema& schema,
                                              const data::Table& rows,
                                              const std::string& release_id,
                                              double epsilon_alone, privacy::NoiseSource* noise);

// The AIM recipe for a plan with `aim` set (docs/privacy.md 2.12):
// train::RunAim on the discretised rows (noisy 1-way marginals, then the
// adaptive rounds until rho is spent), with the server's estimator behind
// train::AimModel. Reads the raw rows, as mst.
absl::StatusOr<v1::Release> ComputeAimRelease(const ReleasePlan& plan, const v1::Dataset& dataset,
                                              const data::Schema& schema,
                                              const data::Table& rows,
                                              const std::string& release_id,
                                              double epsilon_alone, privacy::NoiseSource* noise);

// A session's per-step mechanism, decided at open: Poisson-subsampled
// Gaussian (ADD_REMOVE) or fixed-size sampling without replacement
// (REPLACE_ONE), T of them reserved.
struct SessionPlan {
  std::optional<privacy::PrivacyEvent> step_event;
  double noise_multiplier = 0.0;
  int64_t steps = 0;
  v1::SessionParams resolved_params;
};
// The one expression for a REPLACE_ONE step's fixed batch size lives in
// core (release::FixedBatchSize, core/release/step_batch.h), shared with
// the empirical audit; PlanSession resolves the rate and the kernel_witness
// divisor with it and checks the round trip before admission.
using release::FixedBatchSize;

absl::StatusOr<SessionPlan> PlanSession(const v1::OpenSessionRequest& request,
                                        const v1::Dataset& dataset);

// Before any row is read: the step request's query fits the session's step
// kind (INVALID_ARGUMENT otherwise).
// One step of a session with these resolved params on `dataset`: what it
// holds at its peak (the batch, the step kind's buffers: frequencies,
// network, Gram matrices) and its answer's size. OpenSession checks it
// (the answer against the send limit, the public part against the whole
// budget) so no step that could never run is reserved; Step reserves it.
PlanFootprint SessionStepFootprint(const v1::SessionParams& params, const v1::Dataset& dataset,
                                   const data::Schema& schema);

absl::Status CheckStepQuery(const v1::SessionParams& params,
                            const v1::SessionStepRequest& request);

// One step: draws the subsample with the noise source's randomness (it is
// part of the mechanism), then computes the step kind's noisy statistic of
// the batch (rff_embedding: the batch's labelled embedding with the
// Gaussian noise of the plan). Returns the answer's bytes, as stored.
// dp_sgd: the noisy clipped gradient of the declared network at the
// request's parameters (CheckStepQuery has checked them).
// kernel_witness: the noisy witness's values and gradients at the
// request's points (docs/privacy.md 2.10).
// `part_rows`: a partitioned member's rows (RowIndicesOfPart, docs/privacy.md
// 3.7), the only ones it samples from; null for an ordinary session.
absl::StatusOr<std::string> ComputeSessionStep(const v1::Session& session,
                                               const v1::Dataset& dataset,
                                               const release::EncodedRows& rows,
                                               const std::string& step_id,
                                               const v1::SessionStepRequest& request,
                                               privacy::NoiseSource* noise,
                                               const std::vector<int64_t>* part_rows = nullptr);


// Puts a stored answer into the response's case for the session's kind.
// dp_sgd and kernel_witness keep only the latest step's answer
// (docs/privacy.md 2.9, 2.10): an
// older index's blanked answer is FAILED_PRECONDITION.
absl::Status SetStepAnswer(const v1::SessionParams& params, const std::string& answer,
                           v1::SessionStepResponse* response);

// dp_sgd steps run in order, so the ledger keeps one answer per session
// (docs/privacy.md 2.9): before any row is read, a new index must be the
// session's next one (FAILED_PRECONDITION saying which). Other kinds: OK.
absl::Status CheckStepOrder(const v1::Session& session, int64_t step);
// Whether the session's kind keeps only its latest step's answer.
bool KeepsOnlyLatestAnswer(const v1::SessionParams& params);

}  // namespace dpcurator::plan

#endif  // DPCURATOR_PLAN_RELEASES_H_
