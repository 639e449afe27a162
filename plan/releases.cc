#include "plan/releases.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/privacy/calibration.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/sampled_gaussian.h"
#include "core/release/dp_sgd.h"
#include "core/release/kernel_witness.h"
#include "core/release/marginals.h"
#include "core/release/rff_embedding.h"
#include "core/release/step_batch.h"
#include "core/embed/labelled_embedding.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"

namespace dpcurator::plan {
namespace {

constexpr int64_t kMaxSessionSteps = int64_t{1} << 30;

// Issue 36's projections, all in saturating arithmetic (SaturatingMul,
// SaturatingAdd): a hostile parameter gives a number over any limit, never
// a wrapped one.
int64_t Mul(int64_t a, int64_t b) { return SaturatingMul(a, b); }
int64_t Add(std::initializer_list<int64_t> terms) {
  int64_t sum = 0;
  for (const int64_t term : terms) sum = SaturatingAdd(sum, term);
  return sum;
}
int64_t StoredRows(const v1::Dataset& dataset) {
  return dataset.external() ? 0 : std::max<int64_t>(dataset.row_count(), 0);
}
int64_t SchemaBytes(const v1::Dataset& dataset) {
  return static_cast<int64_t>(dataset.schema().ByteSizeLong());
}
// An answer is built as a message, serialized for the ledger, and parsed
// back into the response: three copies at once, at most.
constexpr int64_t kAnswerCopies = 3;

// The fields of an embedding artefact that describe the dataset and the
// format rather than the kind.
void SetDatasetFields(const v1::Dataset& dataset, v1::EmbeddingArtefact* artefact) {
  artefact->set_format_version(kEmbeddingArtefactFormatVersion);
  artefact->set_dataset_id(dataset.id());
  *artefact->mutable_schema() = dataset.schema();
  artefact->set_schema_fingerprint(dataset.schema_fingerprint());
  artefact->set_relation(dataset.relation() == v1::REPLACE_ONE ? v1::REPLACE_ONE
                                                               : v1::ADD_REMOVE);
  artefact->set_delta(dataset.budget().delta());
}

// A dp_sgd session's declaration as the core unit takes it. Unknown
// activation or loss names are refused here, before admission.
absl::StatusOr<release::DpSgdKind::Params> DpSgdParamsFromProto(const v1::DpSgdParams& proto) {
  release::DpSgdKind::Params params;
  if (proto.hidden_size() > release::kMaxDpSgdHiddenLayers) {
    return absl::InvalidArgumentError(
        absl::StrCat("dp_sgd network has ", proto.hidden_size(), " hidden layers; at most ",
                     release::kMaxDpSgdHiddenLayers, " are accepted"));
  }
  params.hidden.assign(proto.hidden().begin(), proto.hidden().end());
  // Empty: relu, the reference's hidden activation.
  const std::string activation = proto.activation().empty() ? "relu" : proto.activation();
  const absl::StatusOr<nn::Activation> parsed = nn::ParseActivation(activation);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dp_sgd activation '", activation, "' is not supported; use relu, leaky_relu or tanh"));
  }
  params.activation = *parsed;
  params.leaky_relu_slope = proto.leaky_relu_slope();
  switch (proto.loss()) {
    case v1::RECONSTRUCTION_BCE:
      params.loss = release::DpSgdLoss::kReconstructionBce;
      break;
    case v1::WGAN_CRITIC_REAL:
      params.loss = release::DpSgdLoss::kWganCriticReal;
      break;
    default:
      return absl::InvalidArgumentError(
          "dp_sgd loss must be RECONSTRUCTION_BCE (autoencoder) or WGAN_CRITIC_REAL (critic on "
          "real rows)");
  }
  params.clip_norm = proto.clip_norm();
  params.expected_batch_size = proto.expected_batch_size();
  return params;
}

// A kernel_witness session's declaration as the core unit takes it.
release::KernelWitnessKind::Params KernelWitnessParamsFromProto(
    const v1::KernelWitnessParams& proto) {
  release::KernelWitnessKind::Params params;
  params.bandwidths.assign(proto.bandwidths().begin(), proto.bandwidths().end());
  params.conditional = proto.conditional();
  params.batch_divisor = proto.expected_batch_size();
  return params;
}

// A plan-time noise check's refusal as the analyst gets it: always
// INVALID_ARGUMENT (the request's parameters are at fault), with the check's
// own message, which names public values only.
absl::Status RefusedAtPlan(const absl::Status& status, double noise_multiplier) {
  if (status.ok()) return status;
  return absl::InvalidArgumentError(absl::StrCat(
      "noise multiplier ", noise_multiplier,
      " cannot be used for this request (checked before any charge): ", status.message(),
      ". Choose a noise multiplier or epsilon in the supported range"));
}

// Issue 41: on an external dataset the recipe reads the exact tables of
// `cliques` (every one it may ask for), which the curator's runner counts in
// one pass and submits as one message. While the recipe runs the server
// holds that message and the tables made from it (two copies of the cells),
// so both count in the public peak checked before admission, and the
// message must fit the server's message limit (CheckSendLimit).
void PlanExternalTables(std::vector<std::vector<int>> cliques,
                        const std::vector<int>& domain_sizes, ReleasePlan* plan) {
  plan->external_table_cells = release::TotalCells(cliques, domain_sizes);
  plan->external_tables = std::move(cliques);
  const int64_t table_bytes = Mul(plan->external_table_cells, 8);
  PlanFootprint& footprint = plan->footprint;
  footprint.submitted_bytes = Add({table_bytes, kArtefactOverheadBytes});
  footprint.public_bytes = Add({footprint.public_bytes, Mul(table_bytes, 2)});
  footprint.what = absl::StrCat(footprint.what, " on an external dataset (",
                                plan->external_tables.size(), " exact tables of ",
                                plan->external_table_cells, " cells in all, submitted once)");
}

// MST's plan (docs/privacy.md 2.11): everything from the public schema and
// the request, before admission. The event is the whole recipe's:
// train::MstEvent, the 1-way grid Gaussian, n - 1 exponential mechanisms
// and the 2-way grid Gaussian, composed.
absl::StatusOr<ReleasePlan> PlanMstRelease(const v1::ReleaseRequest& request,
                                           const v1::Dataset& dataset,
                                           const data::Schema& schema) {
  ReleasePlan plan;
  plan.resolved_request = request;
  const int n = schema.num_columns();
  if (n < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mst needs a schema of at least 2 columns; dataset '", dataset.id(), "' has ", n));
  }
  // The tree selection scores every pair of columns over the rows after
  // admission: bounded here by the column count, first, so neither the plan
  // nor the admitted recipe does work quadratic in an unbounded schema
  // (issue 24, item 4).
  if (n > kMaxMstColumns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mst takes schemas of at most ", kMaxMstColumns, " columns (it scores every pair); "
        "dataset '", dataset.id(), "' has ", n, ". Release marginals of fewer columns"));
  }
  absl::StatusOr<data::Discretizer> domain = data::Discretizer::Create(schema);
  if (!domain.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mst needs a discrete domain for every column of dataset '", dataset.id(),
        "' (numeric columns need bins in the schema file; image columns are not supported): ",
        domain.status().message()));
  }
  // The 2-way marginals' cliques are chosen privately later, so every pair
  // must fit the marginals' limits, and n - 1 of the largest together.
  // The largest pair is the product of the two largest domains: O(n), so
  // the plan's own work stays linear in the schema (issue 24: a pair loop
  // over a 50,000-column schema spent 1.6 s before refusing it).
  int64_t largest = 0;
  int64_t second = 0;
  for (int c = 0; c < n; ++c) {
    const int64_t size = domain->domain_size(c);
    if (size > largest) {
      second = largest;
      largest = size;
    } else if (size > second) {
      second = size;
    }
  }
  const int64_t largest_pair = largest * second;
  if (largest_pair > release::kMaxCellsPerClique ||
      largest_pair * (n - 1) > release::kMaxMarginalCells) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mst: the schema's domain is too large (a pair of columns has ", largest_pair,
        " cells; at most ", release::kMaxCellsPerClique, " per pair and ",
        release::kMaxMarginalCells,
        " for n - 1 pairs are accepted); declare fewer bins or levels in the schema file"));
  }
  // An external dataset's rows are not here to count (issue 41).
  if (!dataset.external() && dataset.row_count() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset '", dataset.id(), "' has no rows; upload rows first"));
  }
  if (request.privacy_case() != v1::ReleaseRequest::kEpsilon) {
    return absl::InvalidArgumentError(
        "mst release needs a target epsilon (--epsilon); a noise multiplier is not accepted, "
        "since the budget is split over three mechanisms");
  }
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(request.epsilon(), "Epsilon"));
  DPC_ASSIGN_OR_RETURN(const train::MstBudget budget,
                       train::CalibrateMstBudget(n, request.epsilon(), dataset.budget().delta()));
  // The two Gaussians' grid noise, with the call MarginalsKind::Run makes
  // (issue 23: an epsilon of 5e-143 at delta 1e-12 was admitted and failed
  // after the read). The 2-way cliques are chosen later, privately: their
  // count n - 1 fixes the sensitivity, and the grid's units grow with the
  // dimension, so the largest possible one, (n - 1) times the largest pair,
  // bounds every choice.
  const auto relation = RelationFromProto(dataset.relation());
  release::MarginalsKind::Params one_way;
  int64_t one_way_cells = 0;
  for (int c = 0; c < n; ++c) {
    one_way.cliques.push_back({c});
    one_way_cells += domain->domain_size(c);
  }
  release::MarginalsKind::Params two_way;
  two_way.cliques.assign(n - 1, {0, 1});
  DPC_RETURN_IF_ERROR(RefusedAtPlan(
      privacy::GridGaussianNoise(budget.one_way_noise_multiplier,
                                 release::MarginalsKind::L2Sensitivity(one_way, relation),
                                 one_way_cells)
          .status(),
      budget.one_way_noise_multiplier));
  DPC_RETURN_IF_ERROR(RefusedAtPlan(
      privacy::GridGaussianNoise(budget.two_way_noise_multiplier,
                                 release::MarginalsKind::L2Sensitivity(two_way, relation),
                                 largest_pair * (n - 1))
          .status(),
      budget.two_way_noise_multiplier));
  plan.noise_multiplier = budget.one_way_noise_multiplier;
  DPC_ASSIGN_OR_RETURN(plan.event, train::MstEvent(budget));
  plan.mst = budget;
  // Issue 36: the 1-way tables and n - 1 of the largest pair (the bound
  // the noise check above used), the pair scores of the tree selection,
  // and the rows: the raw table, its codes for the selection, and the
  // marginals' own discretisation.
  const int64_t cells = Add({one_way_cells, Mul(largest_pair, n - 1)});
  PlanFootprint& footprint = plan.footprint;
  footprint.what = "mst release";
  footprint.hint = "declare fewer bins or levels in the schema file";
  footprint.artefact_bytes =
      Add({Mul(cells, 8), Mul(2 * int64_t{n}, kTableOverheadBytes + 16), SchemaBytes(dataset),
           kArtefactOverheadBytes});
  footprint.public_bytes = Add({Mul(kAnswerCopies, footprint.artefact_bytes), Mul(cells, 8),
                                Mul(Mul(n, n), 8)});
  footprint.row_bytes =
      Add({RawRowBytes(dataset, schema), Mul(Mul(StoredRows(dataset), n), 2 * 4)});
  if (dataset.external()) {
    std::vector<int> domain_sizes;
    for (int c = 0; c < n; ++c) domain_sizes.push_back(domain->domain_size(c));
    DPC_ASSIGN_OR_RETURN(std::vector<std::vector<int>> tables,
                         ExternalRecipeTables(plan.resolved_request, schema));
    PlanExternalTables(std::move(tables), domain_sizes, &plan);
  }
  return plan;
}

// AIM's plan (docs/privacy.md 2.12): every check RunAim relies on, with the
// code it runs (train::AimCandidates, train::CheckAimRunnable), before
// admission; the event is the whole run's zcdp(rho).
absl::StatusOr<ReleasePlan> PlanAimRelease(const v1::ReleaseRequest& request,
                                           const v1::Dataset& dataset,
                                           const data::Schema& schema) {
  ReleasePlan plan;
  plan.resolved_request = request;
  const int n = schema.num_columns();
  // First, so no work below grows with an unbounded schema.
  // Past kMaxAimColumns the recipe's wide form (issue 41, core/train/aim.h):
  // pairs only, a forest model, T = 2 d by default.
  if (n < 2 || n > train::kMaxAimWideColumns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "aim takes schemas of 2 to ", train::kMaxAimWideColumns, " columns (it scores every "
        "workload marginal each round; past ", train::kMaxAimColumns,
        " columns it measures pairs only); dataset '", dataset.id(), "' has ", n));
  }
  const bool wide = train::IsWideAim(n);
  absl::StatusOr<data::Discretizer> domain = data::Discretizer::Create(schema);
  if (!domain.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "aim needs a discrete domain for every column of dataset '", dataset.id(),
        "' (numeric columns need bins in the schema file; image columns are not supported): ",
        domain.status().message()));
  }
  std::vector<int> domain_sizes;
  for (int c = 0; c < n; ++c) domain_sizes.push_back(domain->domain_size(c));
  const v1::AimParams& params = request.aim();
  DPC_ASSIGN_OR_RETURN(std::vector<std::vector<int>> workload,
                       ResolveCliqueColumns(params.workload(), schema, dataset, "aim workload"));
  const bool default_workload = workload.empty();
  if (default_workload) workload = train::DefaultAimWorkload(n, schema.label_index());
  DPC_ASSIGN_OR_RETURN(std::vector<train::AimCandidate> candidates,
                       train::AimCandidates(workload, domain_sizes));
  if (params.max_model_cells() < 0 || params.rounds() < 0) {
    return absl::InvalidArgumentError(
        "aim's max_model_cells and rounds must be positive (or 0 for the defaults)");
  }
  const int64_t max_model_cells =
      params.max_model_cells() > 0 ? params.max_model_cells() : train::kDefaultAimMaxModelCells;
  const int rounds =
      params.rounds() > 0
          ? params.rounds()
          : (wide ? train::kDefaultAimWideRoundsPerColumn : train::kDefaultAimRoundsPerColumn) * n;
  // An external dataset's rows are not here to count (issue 41).
  if (!dataset.external() && dataset.row_count() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset '", dataset.id(), "' has no rows; upload rows first"));
  }
  if (request.privacy_case() != v1::ReleaseRequest::kEpsilon) {
    return absl::InvalidArgumentError(
        "aim release needs a target epsilon (--epsilon); a noise multiplier is not accepted, "
        "since the budget is spread over adaptive rounds");
  }
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(request.epsilon(), "Epsilon"));
  DPC_ASSIGN_OR_RETURN(
      const train::AimBudget budget,
      train::CalibrateAimBudget(n, rounds, request.epsilon(), dataset.budget().delta(),
                                train::AimLabelForRounds(candidates, schema.label_index())));
  DPC_RETURN_IF_ERROR(train::CheckAimRunnable(domain_sizes, candidates, budget, max_model_cells,
                                              RelationFromProto(dataset.relation())));
  // Stored with the release: the defaults as resolved, so a replay is exact.
  v1::AimParams& resolved = *plan.resolved_request.mutable_aim();
  resolved.set_max_model_cells(max_model_cells);
  resolved.set_rounds(rounds);
  resolved.clear_workload();
  // A wide schema's default workload (every pair: 573,000 at 1,071 columns,
  // megabytes of names) stays implicit: an empty workload resolves to the
  // same pairs of the same schema on a replay.
  for (const std::vector<int>& clique : wide && default_workload
                                            ? std::vector<std::vector<int>>{}
                                            : workload) {
    v1::AimClique& named = *resolved.add_workload();
    for (int c : clique) named.add_columns(schema.column(c).name);
  }
  plan.noise_multiplier = budget.one_way_noise_multiplier;
  DPC_ASSIGN_OR_RETURN(plan.event, train::AimEvent(budget));
  // Issue 36 (item 3): the model at its limit while a round re-fits it
  // (kAimServerBytesPerModelCell), the candidates' exact tables kept for
  // the run, a round's model answers, and the artefact: the 1-way tables
  // and at most rounds + 1 measurements (RunAim's cap), each at most the
  // largest candidate. Rows: the raw table and its codes.
  int64_t candidate_cells = 0;
  int64_t largest_candidate = 0;
  for (const train::AimCandidate& candidate : candidates) {
    candidate_cells = Add({candidate_cells, candidate.cells});
    largest_candidate = std::max(largest_candidate, candidate.cells);
  }
  int64_t one_way_cells = 0;
  for (const int size : domain_sizes) one_way_cells += size;
  PlanFootprint& footprint = plan.footprint;
  footprint.what = "aim release";
  footprint.hint = absl::StrCat("lower max_model_cells (each cell of the model takes ",
                                kAimServerBytesPerModelCell,
                                " bytes while a round re-fits it) or the rounds");
  footprint.artefact_bytes =
      Add({Mul(one_way_cells, 8), Mul(n, kTableOverheadBytes),
           Mul(int64_t{budget.rounds} + 1, Add({Mul(largest_candidate, 8), kTableOverheadBytes,
                                               64})),
           static_cast<int64_t>(resolved.ByteSizeLong()), SchemaBytes(dataset),
           kArtefactOverheadBytes});
  // A wide run's model is a forest: its 1-way tables and at most d - 1
  // pairs; beside it, the model's answers for every pair (PgmAimModel), at
  // most kMaxAimCandidateCells cells.
  int64_t model_cells = max_model_cells;
  int64_t pair_answer_cells = 0;
  if (wide) {
    model_cells = std::min(max_model_cells,
                           Add({one_way_cells, Mul(int64_t{n} - 1, largest_candidate)}));
    pair_answer_cells = train::kMaxAimCandidateCells;
  }
  // Per candidate beyond its cells (wide runs have hundreds of thousands):
  // the candidate's column list and its exact table's vector, each a heap
  // block, and a pointer to its model answer.
  constexpr int64_t kAimCandidateOverheadBytes = 128;
  const int64_t candidate_overhead =
      wide ? Mul(static_cast<int64_t>(candidates.size()), kAimCandidateOverheadBytes) : 0;
  footprint.public_bytes =
      Add({Mul(model_cells, kAimServerBytesPerModelCell), Mul(candidate_cells, 8),
           Mul(pair_answer_cells, 8), candidate_overhead, Mul(largest_candidate, 2 * 8),
           Mul(kAnswerCopies, footprint.artefact_bytes)});
  footprint.row_bytes = Add({RawRowBytes(dataset, schema), Mul(Mul(StoredRows(dataset), n), 4)});
  if (dataset.external()) {
    // From the resolved request (its workload listed), as the module does.
    DPC_ASSIGN_OR_RETURN(std::vector<std::vector<int>> tables,
                         ExternalRecipeTables(plan.resolved_request, schema));
    PlanExternalTables(std::move(tables), domain_sizes, &plan);
  }
  plan.aim = ReleasePlan::Aim{budget, std::move(workload), std::move(candidates),
                              max_model_cells, train::AimMutation{}};
  return plan;
}

// The release envelope of a recipe kind (mst, aim): ids, key and kind.
v1::Release RecipeRelease(const ReleasePlan& plan, const v1::Dataset& dataset,
                          const std::string& release_id, v1::ReleaseKind kind) {
  v1::Release release;
  release.set_id(release_id);
  release.set_dataset_id(dataset.id());
  release.set_idempotency_key(plan.resolved_request.idempotency_key());
  release.set_kind(kind);
  return release;
}

// The fields every recipe artefact (MstArtefact, AimArtefact) carries
// before its tables: format, ids, the schema it was made under, the
// relation, and the privacy it cost (epsilon alone, the dataset's delta, rho).
template <typename Artefact>
void SetRecipeArtefactHeader(const v1::Dataset& dataset, const std::string& release_id,
                             double epsilon_alone, double rho, Artefact* artefact) {
  artefact->set_format_version(1);
  artefact->set_release_id(release_id);
  artefact->set_dataset_id(dataset.id());
  *artefact->mutable_schema() = dataset.schema();
  artefact->set_schema_fingerprint(dataset.schema_fingerprint());
  artefact->set_relation(dataset.relation() == v1::REPLACE_ONE ? v1::REPLACE_ONE
                                                               : v1::ADD_REMOVE);
  artefact->set_epsilon(epsilon_alone);
  artefact->set_delta(dataset.budget().delta());
  artefact->set_rho(rho);
}

}  // namespace

v1::ReleaseKind ReleasePlan::kind() const {
  if (mst.has_value()) return v1::MST;
  if (aim.has_value()) return v1::AIM;
  if (marginals.has_value()) return v1::MARGINALS;
  if (category_fit.has_value()) return v1::CATEGORY_FIT;
  return binding == nullptr ? v1::RELEASE_KIND_UNSPECIFIED : binding->kind();
}

std::string ReleasePlan::kind_name() const {
  if (mst.has_value()) return ReleaseKindName(v1::MST);
  if (aim.has_value()) return ReleaseKindName(v1::AIM);
  if (marginals.has_value()) return ReleaseKindName(v1::MARGINALS);
  if (category_fit.has_value()) return ReleaseKindName(v1::CATEGORY_FIT);
  return binding == nullptr ? "" : ReleaseKindName(binding->kind());
}

int64_t PublicRowCount(const v1::Dataset& dataset) {
  return dataset.external() ? dataset.public_row_bound() : dataset.row_count();
}

absl::Status CheckExternalRelease(const v1::ReleaseRequest& request, const v1::Dataset& dataset) {
  if (!dataset.external()) return absl::OkStatus();
  const bool one_phase_embedding =
      request.kind_case() == v1::ReleaseRequest::kRffEmbedding ||
      (request.kind_case() == v1::ReleaseRequest::kCharfnEmbedding &&
       !request.charfn_embedding().private_length_scale());
  // mst and aim read rows only through count tables: every table they may
  // read is counted in one pass, and the recipe runs here (issue 41).
  const bool table_recipe = request.kind_case() == v1::ReleaseRequest::kMst ||
                            request.kind_case() == v1::ReleaseRequest::kAim;
  if (one_phase_embedding || table_recipe) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "dataset '", dataset.id(), "' is external (its rows live in the curator's cluster): it "
      "takes rff_embedding and charfn_embedding with a declared length-scale (each one sum "
      "over the rows), mst and aim (their count tables, counted in one pass) for now. ",
      request.kind_case() == v1::ReleaseRequest::kCharfnEmbedding
          ? "private_length_scale releases the length-scale from the rows first (two phases)"
          : "This kind has no one-pass statistic there",
      ". Nothing was charged"));
}

absl::StatusOr<double> ResolveRequestedNoiseMultiplier(
    const v1::ReleaseRequest& request,
    absl::FunctionRef<absl::StatusOr<double>(double epsilon)> calibrate) {
  switch (request.privacy_case()) {
    case v1::ReleaseRequest::kEpsilon:
      DPC_RETURN_IF_ERROR(ValidateFinitePositive(request.epsilon(), "Epsilon"));
      return calibrate(request.epsilon());
    case v1::ReleaseRequest::kNoiseMultiplier:
      DPC_RETURN_IF_ERROR(ValidateFinitePositive(request.noise_multiplier(), "Noise multiplier"));
      return request.noise_multiplier();
    case v1::ReleaseRequest::PRIVACY_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "release request needs a privacy level: epsilon or noise_multiplier");
}

int64_t RawRowBytes(const v1::Dataset& dataset, const data::Schema& schema) {
  const int64_t rows = StoredRows(dataset);
  return Add({Mul(Mul(rows, schema.num_columns()), 8), Mul(rows, schema.pixels_per_image())});
}

int64_t EncodedRowBytes(const v1::Dataset& dataset, const data::Schema& schema) {
  const int64_t rows = StoredRows(dataset);
  const int64_t dim = data::FeatureLayout::ForFeatures(schema).total_dim();
  return Add({Mul(Mul(rows, dim), 8), Mul(rows, 4), RawRowBytes(dataset, schema)});
}

namespace {

// An rff_embedding or charfn_embedding release (or rff_embedding step) of k
// frequencies: its frequency matrix (k x total_dim), each accumulating
// thread's block of features (labelled_embedding.h: kFeatureBlockBytes) and
// per-class sums, the pairwise-distance blocks of a private length-scale,
// and the artefact: feature_dim x classes sums (feature_dim at most
// 2k + total_dim) and the class totals.
PlanFootprint EmbeddingFootprintOf(int64_t frequencies, const v1::Dataset& dataset,
                                   const data::Schema& schema, const std::string& what) {
  const int64_t dim = data::FeatureLayout::ForFeatures(schema).total_dim();
  const int64_t classes = std::max(schema.num_classes(), 1);
  const int64_t feature_dim = Add({Mul(frequencies, 2), dim});
  constexpr int64_t kThreads = 2;  // labelled_embedding.h: both cores at most
  constexpr int64_t kDistanceBlocks = int64_t{16} << 20;
  PlanFootprint footprint;
  footprint.what = what;
  footprint.hint = "use fewer frequencies";
  footprint.artefact_bytes = Add({Mul(Mul(feature_dim, classes), 8), Mul(classes, 8),
                                  SchemaBytes(dataset), kArtefactOverheadBytes});
  footprint.public_bytes =
      Add({Mul(Mul(frequencies, dim), 8),
           Mul(kThreads, Add({embed::kFeatureBlockBytes, Mul(Mul(feature_dim, classes), 8)})),
           kDistanceBlocks, Mul(kAnswerCopies, footprint.artefact_bytes)});
  footprint.row_bytes = EncodedRowBytes(dataset, schema);
  return footprint;
}

PlanFootprint EmbeddingFootprint(const v1::ReleaseRequest& resolved, const v1::Dataset& dataset,
                                 const data::Schema& schema) {
  const bool charfn = resolved.kind_case() == v1::ReleaseRequest::kCharfnEmbedding;
  const int64_t frequencies = charfn ? resolved.charfn_embedding().num_frequencies()
                                     : resolved.rff_embedding().num_frequencies();
  return EmbeddingFootprintOf(frequencies, dataset, schema,
                              charfn ? "charfn_embedding release" : "rff_embedding release");
}

}  // namespace

absl::StatusOr<ReleasePlan> PlanRelease(const v1::ReleaseRequest& request,
                                        const v1::Dataset& dataset, const data::Schema& schema) {
  // First: an external dataset's refusals come before any other check.
  DPC_RETURN_IF_ERROR(CheckExternalRelease(request, dataset));
  // Issue 38: an open column without categories has no level for any
  // method to read, so every kind is refused here, before admission
  // (nothing charged or written), except the one that gives it a list: the
  // category fit reads the stored values themselves. The only exemption.
  if (request.kind_case() != v1::ReleaseRequest::kCategoryFit) {
    DPC_RETURN_IF_ERROR(schema.RequireCategoriesForOpenColumns());
  }
  if (request.kind_case() == v1::ReleaseRequest::kMst) {
    return PlanMstRelease(request, dataset, schema);
  }
  if (request.kind_case() == v1::ReleaseRequest::kAim) {
    return PlanAimRelease(request, dataset, schema);
  }
  if (request.kind_case() == v1::ReleaseRequest::kMarginals) {
    ReleasePlan plan;
    plan.resolved_request = request;
    DPC_ASSIGN_OR_RETURN(MarginalsReleasePlan marginals,
                         PlanMarginalsRelease(request, dataset, schema));
    plan.noise_multiplier = marginals.noise_multiplier;
    plan.event = marginals.event;
    plan.footprint = marginals.footprint;
    plan.marginals = std::move(marginals);
    return plan;
  }
  if (request.kind_case() == v1::ReleaseRequest::kCategoryFit) {
    ReleasePlan plan;
    plan.resolved_request = request;
    DPC_ASSIGN_OR_RETURN(CategoryFitPlan fit, PlanCategoryFitRelease(request, dataset));
    plan.event = fit.event;
    plan.footprint = fit.footprint;
    plan.category_fit = std::move(fit);
    return plan;
  }
  if (request.has_partition()) {
    return absl::InvalidArgumentError(
        "a partitioned one-shot release takes kind marginals; embeddings per class are "
        "released by one ordinary release (its per-class sums), sessions by "
        "OpenPartitionedSessions");
  }
  ReleasePlan plan;
  plan.resolved_request = request;
  plan.binding = BindingFor(request.kind_case());
  if (plan.binding == nullptr) {
    return absl::InvalidArgumentError(
        "release request names no kind; supported: rff_embedding, charfn_embedding, mst, aim, "
        "marginals, category_fit");
  }
  // Every parameter against data-independent bounds (docs/privacy.md 6.2).
  DPC_RETURN_IF_ERROR(plan.binding->Resolve(schema, &plan.resolved_request));
  // An external dataset's rows are not here to count: its public n (where
  // the relation needs one) is the declared one, checked at creation.
  if (!dataset.external() && dataset.row_count() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset '", dataset.id(), "' has no rows; upload rows first"));
  }
  // Calibrated for the kind's own number of Gaussian releases (PEARL with
  // a private length-scale: two with the same multiplier), judged as the
  // event it will be charged (docs/privacy.md 4.6).
  DPC_ASSIGN_OR_RETURN(
      plan.noise_multiplier,
      ResolveRequestedNoiseMultiplier(request, [&](double epsilon) {
        const int gaussians = static_cast<int>(
            plan.binding->Plan(plan.resolved_request, 1.0).noise_multipliers.size());
        return privacy::CalibrateGridGaussianNoiseMultiplier(gaussians, epsilon,
                                                             dataset.budget().delta());
      }));
  // Before admission, with the code the engine's noise step runs: a
  // multiplier (or public n) the noise step cannot take is refused here,
  // never charged and failed after the rows are read (docs/privacy.md 6.4).
  DPC_RETURN_IF_ERROR(RefusedAtPlan(
      plan.binding->CheckNoise(plan.resolved_request, schema,
                               RelationFromProto(dataset.relation()), plan.noise_multiplier,
                               PublicRowCount(dataset)),
      plan.noise_multiplier));
  // The charge is the event of the planned mechanism, which ComputeRelease
  // checks the engine's own record against before anything is released.
  plan.planned = plan.binding->Plan(plan.resolved_request, plan.noise_multiplier);
  DPC_ASSIGN_OR_RETURN(plan.event, release::OneShotEvent(plan.planned));
  plan.footprint = EmbeddingFootprint(plan.resolved_request, dataset, schema);
  return plan;
}

absl::StatusOr<std::unique_ptr<PreparedEngine>> PrepareRelease(const ReleasePlan& plan,
                                                               const data::Schema& schema) {
  if (plan.binding == nullptr) return absl::InternalError("release plan names no kind");
  return plan.binding->Prepare(plan.resolved_request, schema);
}

absl::StatusOr<v1::Release> ComputeRelease(const ReleasePlan& plan, const v1::Dataset& dataset,
                                           const release::EncodedRows& rows,
                                           const std::string& release_id, double epsilon_alone,
                                           privacy::NoiseSource* noise) {
  DPC_ASSIGN_OR_RETURN(const data::Schema schema, SchemaFromProto(dataset.schema()));
  DPC_ASSIGN_OR_RETURN(std::unique_ptr<PreparedEngine> engine, PrepareRelease(plan, schema));
  return ComputeRelease(plan, *engine, dataset, rows, release_id, epsilon_alone, noise);
}

namespace {

// The release of a one-shot kind's engine output: the plan's check of the
// mechanism the engine ran, then the envelope and the dataset's fields.
absl::StatusOr<v1::Release> WrapEngineOutput(const ReleasePlan& plan, EngineOutput output,
                                             const v1::Dataset& dataset,
                                             const std::string& release_id,
                                             double epsilon_alone) {
  // Never release what the ledger did not charge (issue 12): the engine's
  // record of the mechanism it ran must be the plan, entry for entry.
  if (!(output.ran == plan.planned)) {
    return absl::InternalError("the engine ran a mechanism other than the one charged");
  }
  v1::Release release;
  release.set_id(release_id);
  release.set_dataset_id(dataset.id());
  release.set_idempotency_key(plan.resolved_request.idempotency_key());
  release.set_kind(plan.binding->kind());
  v1::EmbeddingArtefact& artefact = *release.mutable_embedding();
  artefact = std::move(output.artefact);
  SetDatasetFields(dataset, &artefact);
  artefact.set_release_id(release_id);
  artefact.set_epsilon(epsilon_alone);
  return release;
}

}  // namespace

absl::StatusOr<v1::Release> ComputeRelease(const ReleasePlan& plan, PreparedEngine& engine,
                                           const v1::Dataset& dataset,
                                           const release::EncodedRows& rows,
                                           const std::string& release_id, double epsilon_alone,
                                           privacy::NoiseSource* noise) {
  if (plan.binding == nullptr) return absl::InternalError("release plan names no kind");
  DPC_ASSIGN_OR_RETURN(EngineOutput output,
                       engine.Run(rows, RelationFromProto(dataset.relation()),
                                  plan.noise_multiplier, rows.num_rows(), noise));
  return WrapEngineOutput(plan, std::move(output), dataset, release_id, epsilon_alone);
}

namespace {

// The checks every submitted statistic gets after its length: each entry
// finite, rows >= 0, and under REPLACE_ONE rows = the public n. Shape
// checks of values the curator sent: no message names an entry.
absl::Status CheckSubmittedEntriesAndRows(const v1::Dataset& dataset,
                                          absl::Span<const double> statistic, int64_t rows) {
  for (const double value : statistic) {
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(
          "the statistic has an entry that is not finite (NaN or infinite). Nothing was changed");
    }
  }
  if (rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows must be at least 0, got ", rows, ". Nothing was changed"));
  }
  if (dataset.relation() == v1::REPLACE_ONE && rows != dataset.public_row_bound()) {
    // Under REPLACE_ONE the row count is public (the relation's n), and
    // the released means divide by it.
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", dataset.id(), "' is REPLACE_ONE with the public row count ",
        dataset.public_row_bound(), "; the statistic is of ", rows,
        " rows. Nothing was changed"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSubmittedShape(const ReleasePlan& plan, const PreparedEngine& engine,
                                 const v1::Dataset& dataset, const data::Schema& schema,
                                 absl::Span<const double> statistic, int64_t rows) {
  if (plan.binding == nullptr) return absl::InternalError("release plan names no kind");
  const int64_t expected = engine.StatisticLength(schema.num_classes());
  if (static_cast<int64_t>(statistic.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the statistic has ", statistic.size(), " entries; this job's plan has ", expected,
        " (per-class feature sums, class 0 first, then the ", schema.num_classes(),
        " per-class counts: the partial's layout). Nothing was changed"));
  }
  return CheckSubmittedEntriesAndRows(dataset, statistic, rows);
}

absl::StatusOr<v1::Release> ComputeReleaseFromStatistic(
    const ReleasePlan& plan, PreparedEngine& engine, const v1::Dataset& dataset,
    const data::Schema& schema, absl::Span<const double> statistic, int64_t rows,
    const std::string& release_id, double epsilon_alone, privacy::NoiseSource* noise) {
  DPC_RETURN_IF_ERROR(CheckSubmittedShape(plan, engine, dataset, schema, statistic, rows));
  DPC_ASSIGN_OR_RETURN(
      EngineOutput output,
      engine.RunOnStatistic(statistic, rows, data::FeatureLayout::ForFeatures(schema),
                            schema.num_classes(), RelationFromProto(dataset.relation()),
                            plan.noise_multiplier, PublicRowCount(dataset), noise));
  return WrapEngineOutput(plan, std::move(output), dataset, release_id, epsilon_alone);
}

namespace {

// The MST recipe over a table source (issue 41): the stored rows' codes, or
// an external dataset's submitted tables. The rows are read only through it.
absl::StatusOr<v1::Release> RunMstRecipe(const ReleasePlan& plan, const v1::Dataset& dataset,
                                         const data::Schema& schema,
                                         const release::ExactTableSource& tables,
                                         const std::string& release_id, double epsilon_alone,
                                         privacy::NoiseSource* noise) {
  if (!plan.mst.has_value()) return absl::InternalError("release plan is not an mst plan");
  const train::MstBudget& budget = *plan.mst;
  const auto relation = RelationFromProto(dataset.relation());
  using Kind = release::MarginalsKind;
  DPC_ASSIGN_OR_RETURN(const data::Discretizer domain, data::Discretizer::Create(schema));
  const int n = schema.num_columns();
  if (n != budget.num_columns) {
    return absl::InternalError("the mst plan was made for another schema");
  }
  Kind::Params one_way_params;
  for (int c = 0; c < n; ++c) one_way_params.cliques.push_back({c});
  DPC_ASSIGN_OR_RETURN(one_way_params, Kind::Resolve(one_way_params, schema));
  DPC_ASSIGN_OR_RETURN(Kind::ExactCounts one_way_exact,
                       Kind::CountFrom(one_way_params, domain, tables));
  DPC_ASSIGN_OR_RETURN(Kind::Result one_way,
                       Kind::Noise(one_way_params, std::move(one_way_exact), relation,
                                   budget.one_way_noise_multiplier, noise));
  // Never release what the ledger did not charge (MstEvent's first part).
  if (!(one_way.ran == Kind::Plan(one_way_params, budget.one_way_noise_multiplier))) {
    return absl::InternalError("the engine ran a mechanism other than the one charged");
  }
  // n - 1 exponential mechanisms of budget.selection_epsilon each.
  DPC_ASSIGN_OR_RETURN(const auto edges,
                       train::SelectMstTree(tables, one_way.marginals, relation,
                                            budget.selection_epsilon, noise));
  if (static_cast<int>(edges.size()) != n - 1) {
    return absl::InternalError("the tree selection ran other than n - 1 mechanisms");
  }
  Kind::Params two_way_params;
  for (const auto& [i, j] : edges) two_way_params.cliques.push_back({i, j});
  DPC_ASSIGN_OR_RETURN(two_way_params, Kind::Resolve(two_way_params, schema));
  DPC_ASSIGN_OR_RETURN(Kind::ExactCounts two_way_exact,
                       Kind::CountFrom(two_way_params, domain, tables));
  DPC_ASSIGN_OR_RETURN(Kind::Result two_way,
                       Kind::Noise(two_way_params, std::move(two_way_exact), relation,
                                   budget.two_way_noise_multiplier, noise));
  if (!(two_way.ran == Kind::Plan(two_way_params, budget.two_way_noise_multiplier))) {
    return absl::InternalError("the engine ran a mechanism other than the one charged");
  }
  v1::Release release = RecipeRelease(plan, dataset, release_id, v1::MST);
  v1::MstArtefact& artefact = *release.mutable_mst();
  SetRecipeArtefactHeader(dataset, release_id, epsilon_alone, budget.rho, &artefact);
  for (int c = 0; c < n; ++c) artefact.add_domain_sizes(domain.domain_size(c));
  for (const auto& m : one_way.marginals) *artefact.add_one_way() = NoisyMarginalToProto(m);
  for (const auto& [i, j] : edges) {
    v1::MstEdge& edge = *artefact.add_edges();
    edge.set_first(i);
    edge.set_second(j);
  }
  for (const auto& m : two_way.marginals) *artefact.add_two_way() = NoisyMarginalToProto(m);
  artefact.set_one_way_noise_multiplier(budget.one_way_noise_multiplier);
  artefact.set_selection_epsilon(budget.selection_epsilon);
  artefact.set_two_way_noise_multiplier(budget.two_way_noise_multiplier);
  return release;
}

// The AIM recipe over a table source (issue 41), as RunMstRecipe.
absl::StatusOr<v1::Release> RunAimRecipe(const ReleasePlan& plan, const v1::Dataset& dataset,
                                         const data::Schema& schema,
                                         const release::ExactTableSource& tables,
                                         const std::string& release_id, double epsilon_alone,
                                         privacy::NoiseSource* noise) {
  if (!plan.aim.has_value()) return absl::InternalError("release plan is not an aim plan");
  const ReleasePlan::Aim& aim = *plan.aim;
  DPC_ASSIGN_OR_RETURN(const data::Discretizer domain, data::Discretizer::Create(schema));
  const int n = schema.num_columns();
  if (n != aim.budget.num_columns) {
    return absl::InternalError("the aim plan was made for another schema");
  }
  std::vector<int> domain_sizes;
  for (int c = 0; c < n; ++c) domain_sizes.push_back(domain.domain_size(c));
  // The estimator the selections score against: Private-PGM over every
  // measurement so far (AIM Alg. 2), warm-started each round; a total
  // function of the released measurements.
  train::PgmAimModel model(domain_sizes, train::kAimRoundFitIterations, aim.max_model_cells);
  DPC_ASSIGN_OR_RETURN(
      const train::AimRun run,
      train::RunAim(tables, domain_sizes, aim.candidates, aim.budget,
                    aim.max_model_cells, RelationFromProto(dataset.relation()), &model, noise,
                    aim.mutation));
  v1::Release release = RecipeRelease(plan, dataset, release_id, v1::AIM);
  v1::AimArtefact& artefact = *release.mutable_aim();
  SetRecipeArtefactHeader(dataset, release_id, epsilon_alone, aim.budget.rho, &artefact);
  for (const int size : domain_sizes) artefact.add_domain_sizes(size);
  for (const auto& m : run.one_way) *artefact.add_one_way() = NoisyMarginalToProto(m);
  for (const train::AimRound& round : run.rounds) {
    v1::AimRoundRecord& record = *artefact.add_rounds();
    *record.mutable_measurement() = NoisyMarginalToProto(round.measurement);
    record.set_noise_multiplier(round.noise_multiplier);
    record.set_selection_epsilon(round.selection_epsilon);
    record.set_rho_used(round.rho_used);
    record.set_annealed(round.annealed);
  }
  artefact.set_one_way_noise_multiplier(aim.budget.one_way_noise_multiplier);
  artefact.set_planned_rounds(aim.budget.rounds);
  artefact.set_max_model_cells(aim.max_model_cells);
  *artefact.mutable_workload() = plan.resolved_request.aim().workload();
  return release;
}

// Rows -> their codes, the stored dataset's table source.
absl::StatusOr<Eigen::MatrixXi> RecipeCodes(const data::Schema& schema, const data::Table& rows) {
  if (rows.cells.cols() != schema.num_columns()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the table has ", rows.cells.cols(), " columns and the schema ", schema.num_columns(),
        "; read the rows under the dataset's schema"));
  }
  DPC_ASSIGN_OR_RETURN(const data::Discretizer domain, data::Discretizer::Create(schema));
  return domain.Encode(rows);
}

}  // namespace

absl::StatusOr<v1::Release> ComputeMstRelease(const ReleasePlan& plan, const v1::Dataset& dataset,
                                              const data::Schema& schema,
                                              const data::Table& rows,
                                              const std::string& release_id,
                                              double epsilon_alone, privacy::NoiseSource* noise) {
  if (!plan.mst.has_value()) return absl::InternalError("release plan is not an mst plan");
  DPC_ASSIGN_OR_RETURN(const Eigen::MatrixXi codes, RecipeCodes(schema, rows));
  const release::RowsTableSource tables(&codes);
  return RunMstRecipe(plan, dataset, schema, tables, release_id, epsilon_alone, noise);
}

absl::StatusOr<v1::Release> ComputeAimRelease(const ReleasePlan& plan, const v1::Dataset& dataset,
                                              const data::Schema& schema,
                                              const data::Table& rows,
                                              const std::string& release_id,
                                              double epsilon_alone, privacy::NoiseSource* noise) {
  if (!plan.aim.has_value()) return absl::InternalError("release plan is not an aim plan");
  DPC_ASSIGN_OR_RETURN(const Eigen::MatrixXi codes, RecipeCodes(schema, rows));
  const release::RowsTableSource tables(&codes);
  return RunAimRecipe(plan, dataset, schema, tables, release_id, epsilon_alone, noise);
}

absl::StatusOr<std::vector<std::vector<int>>> ExternalRecipeTables(
    const v1::ReleaseRequest& resolved, const data::Schema& schema) {
  absl::StatusOr<data::Discretizer> domain = data::Discretizer::Create(schema);
  if (!domain.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mst and aim need a discrete domain for every column (numeric columns need bins in the "
        "schema file): ", domain.status().message()));
  }
  const int n = schema.num_columns();
  if (resolved.kind_case() == v1::ReleaseRequest::kMst) return train::MstTableCliques(n);
  if (resolved.kind_case() != v1::ReleaseRequest::kAim) {
    return absl::InvalidArgumentError("only the mst and aim recipes read count tables");
  }
  std::vector<int> domain_sizes;
  for (int c = 0; c < n; ++c) domain_sizes.push_back(domain->domain_size(c));
  v1::Dataset unnamed;
  DPC_ASSIGN_OR_RETURN(
      std::vector<std::vector<int>> workload,
      ResolveCliqueColumns(resolved.aim().workload(), schema, unnamed, "aim workload"));
  if (workload.empty()) workload = train::DefaultAimWorkload(n, schema.label_index());
  DPC_ASSIGN_OR_RETURN(const std::vector<train::AimCandidate> candidates,
                       train::AimCandidates(workload, domain_sizes));
  return train::AimTableCliques(candidates);
}

absl::Status CheckSubmittedTablesShape(const ReleasePlan& plan, const v1::Dataset& dataset,
                                       absl::Span<const double> statistic, int64_t rows) {
  if (plan.external_tables.empty()) {
    return absl::InternalError("release plan has no external tables (not an external recipe)");
  }
  if (static_cast<int64_t>(statistic.size()) != plan.external_table_cells) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the statistic has ", statistic.size(), " entries; this job's plan has ",
        plan.external_table_cells, " (the exact count tables of its ",
        plan.external_tables.size(), " cliques, concatenated in plan order: the partial's "
        "layout). Nothing was changed"));
  }
  return CheckSubmittedEntriesAndRows(dataset, statistic, rows);
}

absl::StatusOr<v1::Release> ComputeRecipeReleaseFromTables(
    const ReleasePlan& plan, const v1::Dataset& dataset, const data::Schema& schema,
    absl::Span<const double> statistic, int64_t rows, const std::string& release_id,
    double epsilon_alone, privacy::NoiseSource* noise) {
  DPC_RETURN_IF_ERROR(CheckSubmittedTablesShape(plan, dataset, statistic, rows));
  DPC_ASSIGN_OR_RETURN(const data::Discretizer domain, data::Discretizer::Create(schema));
  std::vector<int> domain_sizes;
  for (int c = 0; c < schema.num_columns(); ++c) domain_sizes.push_back(domain.domain_size(c));
  DPC_ASSIGN_OR_RETURN(
      const release::ListedTableSource tables,
      release::ListedTableSource::Create(
          plan.external_tables, domain_sizes,
          Eigen::Map<const Eigen::VectorXd>(statistic.data(),
                                            static_cast<Eigen::Index>(statistic.size()))));
  if (plan.mst.has_value()) {
    return RunMstRecipe(plan, dataset, schema, tables, release_id, epsilon_alone, noise);
  }
  if (plan.aim.has_value()) {
    return RunAimRecipe(plan, dataset, schema, tables, release_id, epsilon_alone, noise);
  }
  return absl::InternalError("release plan is not an mst or aim plan");
}

absl::StatusOr<SessionPlan> PlanSession(const v1::OpenSessionRequest& request,
                                        const v1::Dataset& dataset) {
  if (dataset.external()) {
    // Before any other check: nothing is charged.
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset '", dataset.id(), "' is external (its rows live in the curator's cluster): "
        "sessions (dp_sgd, kernel_witness, rff_embedding steps) subsample the rows at every "
        "step and are not supported on it for now; request a one-shot rff_embedding or "
        "charfn_embedding release instead. Nothing was charged"));
  }
  {
    // Issue 38: every session reads the rows' levels, which an open column
    // without categories does not have yet (as PlanRelease).
    DPC_ASSIGN_OR_RETURN(const data::Schema schema, SchemaFromProto(dataset.schema()));
    DPC_RETURN_IF_ERROR(schema.RequireCategoriesForOpenColumns());
  }
  SessionPlan plan;
  plan.resolved_params = request.params();
  v1::SessionParams& params = plan.resolved_params;
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(params.steps(), "Session steps"));
  if (params.steps() > kMaxSessionSteps) {
    return absl::InvalidArgumentError(
        absl::StrCat("Session steps must be at most ", kMaxSessionSteps, ", got ", params.steps()));
  }
  if (!(params.sampling_rate() > 0 && params.sampling_rate() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Sampling rate must be in (0, 1], got ", params.sampling_rate()));
  }
  // The step kind (one case each; -Wswitch makes a new, unhandled case a
  // compile error in CI). Unset: rff_embedding with defaults, as clients
  // from before step kinds sent.
  if (params.step_case() == v1::SessionParams::STEP_NOT_SET) params.mutable_rff_embedding();
  switch (params.step_case()) {
    case v1::SessionParams::kRffEmbedding: {
      DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(dataset.schema()));
      DPC_ASSIGN_OR_RETURN(release::RffEmbeddingKind::Params resolved,
                           release::RffEmbeddingKind::Resolve(
                               ParamsFromProto(params.rff_embedding()), schema));
      ParamsToProto(resolved, params.mutable_rff_embedding());
      break;
    }
    case v1::SessionParams::kDpSgd: {
      DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(dataset.schema()));
      using Kind = release::DpSgdKind;
      DPC_ASSIGN_OR_RETURN(Kind::Params declared, DpSgdParamsFromProto(params.dp_sgd()));
      DPC_ASSIGN_OR_RETURN(const Kind::Params resolved, Kind::Resolve(declared, schema));
      // What the trainer and CheckStepQuery read back: the canonical
      // activation and slope, the row width and the parameter count, all
      // from the public schema.
      v1::DpSgdParams& proto = *params.mutable_dp_sgd();
      const int width = release::DpSgdRowWidth(schema);
      DPC_ASSIGN_OR_RETURN(const int64_t count, Kind::NumParameters(resolved, width));
      proto.set_activation(nn::ActivationName(resolved.activation));
      proto.set_leaky_relu_slope(resolved.leaky_relu_slope);
      proto.set_row_width(width);
      proto.set_num_parameters(count);
      break;
    }
    case v1::SessionParams::kKernelWitness: {
      DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(dataset.schema()));
      using Kind = release::KernelWitnessKind;
      v1::KernelWitnessParams& proto = *params.mutable_kernel_witness();
      if (proto.parallel()) {
        // Parallel composition over classes is valid only under ADD_REMOVE
        // with fixed public labels, and one ordinary session is charged
        // against the dataset in sequence with every other: K per-class
        // sessions opened this way would be charged K times. The one
        // charge is a partitioned open's (docs/privacy.md 2.10, 3.7).
        return absl::InvalidArgumentError(
            "kernel_witness parallel variant (one generator per class) is not supported by an "
            "ordinary open: the ledger cannot charge parallel composition over classes across "
            "separate sessions; open the per-class sessions together with "
            "OpenPartitionedSessions (`dpcurator train kernel --variant parallel`), or use the "
            "conditional variant (conditional = true)");
      }
      const int point_limit = Kind::MaxQueryPoints(proto.conditional(), schema.num_classes());
      if (proto.max_points() < 0 || proto.max_points() > point_limit) {
        return absl::InvalidArgumentError(absl::StrCat(
            "kernel_witness max_points must be in [1, ", point_limit, "] (0: ", point_limit,
            ") for a", proto.conditional() ? " conditional" : "n unconditional",
            " session, got ", proto.max_points()));
      }
      if (proto.conditional() && !schema.label_index().has_value()) {
        return absl::InvalidArgumentError(
            "conditional kernel_witness needs a label column in the dataset's schema; open an "
            "unconditional session (conditional = false) or declare a label");
      }
      if (dataset.relation() == v1::REPLACE_ONE) {
        // The batch has the fixed public size FixedBatchSize(q, n), the one
        // expression SampleStepBatch draws (checked below against the
        // resolved rate): the divisor is the batch by construction.
        proto.set_expected_batch_size(static_cast<double>(std::max<int64_t>(
            1, FixedBatchSize(params.sampling_rate(), dataset.row_count()))));
      }
      DPC_ASSIGN_OR_RETURN(const Kind::Params resolved,
                           Kind::Resolve(KernelWitnessParamsFromProto(proto), schema));
      proto.clear_bandwidths();
      for (const double h : resolved.bandwidths) proto.add_bandwidths(h);
      proto.set_expected_batch_size(resolved.batch_divisor);
      if (proto.max_points() == 0) proto.set_max_points(point_limit);
      proto.set_dimension(data::FeatureLayout::ForFeatures(schema).total_dim());
      proto.set_num_classes(schema.num_classes());
      break;
    }
    case v1::SessionParams::STEP_NOT_SET:
      return absl::InternalError("session step kind was not resolved");
  }
  if (dataset.row_count() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset '", dataset.id(), "' has no rows; upload rows first"));
  }
  const auto relation = RelationFromProto(dataset.relation());
  const privacy::SamplingScheme scheme = privacy::SamplingSchemeFor(relation);
  if (relation == privacy::NeighbouringRelation::kReplaceOne) {
    // Fixed-size batches of m = floor(q n) rows: the accountant must see the
    // rate actually used, m / n (never the rounded-up one), or Wang et al.'s
    // bound would be applied to a smaller sampling rate than the real one.
    const int64_t batch = FixedBatchSize(params.sampling_rate(), dataset.row_count());
    if (batch < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sampling rate ", params.sampling_rate(), " times the dataset size ",
          dataset.row_count(), " is below one row; raise --sampling-rate"));
    }
    params.set_sampling_rate(static_cast<double>(batch) /
                             static_cast<double>(dataset.row_count()));
    // Every step draws FixedBatchSize of the resolved rate: it must be the
    // batch charged and (kernel_witness) the divisor, or every step would
    // run on another size than planned. Checked here, before admission.
    const bool divisor_agrees =
        params.step_case() != v1::SessionParams::kKernelWitness ||
        params.kernel_witness().expected_batch_size() == static_cast<double>(batch);
    if (FixedBatchSize(params.sampling_rate(), dataset.row_count()) != batch ||
        !divisor_agrees) {
      return absl::InternalError(
          "the session's fixed batch size does not survive its resolved sampling rate; "
          "nothing was charged");
    }
  }
  switch (params.privacy_case()) {
    case v1::SessionParams::kEpsilon: {
      DPC_RETURN_IF_ERROR(ValidateFinitePositive(params.epsilon(), "Epsilon"));
      DPC_ASSIGN_OR_RETURN(plan.noise_multiplier,
                           privacy::CalibrateSampledDiscreteGaussianNoiseMultiplier(
                               scheme, params.sampling_rate(), params.steps(), params.epsilon(),
                               dataset.budget().delta()));
      break;
    }
    case v1::SessionParams::kNoiseMultiplier:
      DPC_RETURN_IF_ERROR(ValidateFinitePositive(params.noise_multiplier(), "Noise multiplier"));
      plan.noise_multiplier = params.noise_multiplier();
      break;
    default:
      return absl::InvalidArgumentError(
          "session needs a privacy level: epsilon (for all steps) or noise_multiplier");
  }
  params.set_noise_multiplier(plan.noise_multiplier);
  // Before admission, with the code each step's noise step runs: a
  // multiplier the noise grid cannot take for the step's public sensitivity
  // and dimension is refused now, never charged and failed after the read
  // (docs/privacy.md 6.4).
  const int64_t step_public_n =
      relation == privacy::NeighbouringRelation::kReplaceOne
          ? FixedBatchSize(params.sampling_rate(), dataset.row_count())
          : 0;
  switch (params.step_case()) {
    case v1::SessionParams::kRffEmbedding: {
      DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(dataset.schema()));
      DPC_RETURN_IF_ERROR(RefusedAtPlan(
          release::RffEmbeddingKind::CheckNoise(ParamsFromProto(params.rff_embedding()),
                                                data::FeatureLayout::ForFeatures(schema),
                                                schema.num_classes(), relation,
                                                plan.noise_multiplier, step_public_n),
          plan.noise_multiplier));
      break;
    }
    case v1::SessionParams::kDpSgd: {
      // The call every step's Run makes first (grid range of s * C and the
      // float32 answer's range; docs/privacy.md 2.9 "Totality").
      DPC_ASSIGN_OR_RETURN(const release::DpSgdKind::Params resolved,
                           DpSgdParamsFromProto(params.dp_sgd()));
      DPC_RETURN_IF_ERROR(RefusedAtPlan(
          release::DpSgdKind::NoiseFor(resolved, relation, plan.noise_multiplier,
                                       params.dp_sgd().row_width())
              .status(),
          plan.noise_multiplier));
      break;
    }
    case v1::SessionParams::kKernelWitness: {
      const v1::KernelWitnessParams& declared = params.kernel_witness();
      DPC_RETURN_IF_ERROR(RefusedAtPlan(
          release::KernelWitnessKind::CheckNoise(KernelWitnessParamsFromProto(declared), relation,
                                                 plan.noise_multiplier, declared.max_points(),
                                                 declared.dimension()),
          plan.noise_multiplier));
      break;
    }
    case v1::SessionParams::STEP_NOT_SET:
      return absl::InternalError("session step kind was not resolved");
  }
  plan.steps = params.steps();
  // Steps draw the grid's discrete Gaussian: charged by the bounds proven
  // for it (docs/privacy.md 4.7), stored as discrete_poisson / discrete_wor.
  DPC_ASSIGN_OR_RETURN(plan.step_event,
                       privacy::SampledGaussianEvent(scheme, params.sampling_rate(),
                                                     plan.noise_multiplier,
                                                     privacy::SampledNoise::kDiscrete));
  return plan;
}

PlanFootprint SessionStepFootprint(const v1::SessionParams& params, const v1::Dataset& dataset,
                                   const data::Schema& schema) {
  const int64_t rows = StoredRows(dataset);
  const int64_t dim = data::FeatureLayout::ForFeatures(schema).total_dim();
  // The batch: q n rows expected, Poisson's far tail bounded by eight
  // standard deviations (at most n); its size is private under ADD_REMOVE,
  // so every buffer that grows with it counts as row bytes.
  const double expected = params.sampling_rate() * static_cast<double>(rows);
  const int64_t batch =
      std::min<int64_t>(rows, static_cast<int64_t>(expected + 8.0 * std::sqrt(expected)) + 16);
  // The cached encoded rows, a part's row indices, and the batch's copy.
  const int64_t row_bytes = Add({EncodedRowBytes(dataset, schema), Mul(rows, 8),
                                 Mul(batch, Add({Mul(dim, 8), 4}))});
  PlanFootprint footprint;
  switch (params.step_case()) {
    case v1::SessionParams::kDpSgd: {
      // The parameters, the clipped sum, one example's gradient, the noise
      // and the answer (floats), and each layer's activations for the
      // batch, forward and back. The sum is computed in
      // nn::kClippedSumShards row shards, each into a vector of its own
      // (issue 39), and a chunk of rows at a time, so the activations held
      // are a few chunks', well under the batch's counted here.
      const v1::DpSgdParams& declared = params.dp_sgd();
      const int64_t parameters = std::max<int64_t>(declared.num_parameters(), 0);
      int64_t widest = std::max<int64_t>(declared.row_width(), 1);
      for (const int32_t width : declared.hidden()) widest = std::max<int64_t>(widest, width);
      const int64_t layers = declared.hidden_size() + 2;
      footprint.what = "dp_sgd session step";
      footprint.hint = "declare a smaller network";
      footprint.artefact_bytes = Add({Mul(parameters, 4), kArtefactOverheadBytes});
      footprint.public_bytes =
          Add({Mul(parameters, (6 + nn::kClippedSumShards - 1) * 8),
               Mul(kAnswerCopies, footprint.artefact_bytes)});
      footprint.row_bytes = Add({row_bytes, Mul(Mul(batch, widest), Mul(layers, 2 * 8))});
      return footprint;
    }
    case v1::SessionParams::kKernelWitness: {
      // The query points and the gradients (doubles), and per bandwidth
      // the batch-by-points kernel matrix.
      const v1::KernelWitnessParams& declared = params.kernel_witness();
      const int64_t points = std::max<int64_t>(declared.max_points(), 0);
      const int64_t width = std::max<int64_t>(declared.dimension(), 0);
      const int64_t bandwidths = std::max<int64_t>(declared.bandwidths_size(), 1);
      footprint.what = "kernel_witness session step";
      footprint.hint = "use fewer max_points";
      footprint.artefact_bytes =
          Add({Mul(Mul(points, Add({width, 1})), 4), kArtefactOverheadBytes});
      footprint.public_bytes = Add({Mul(Mul(points, width), 4 * 8),
                                    Mul(kAnswerCopies, footprint.artefact_bytes)});
      footprint.row_bytes =
          Add({row_bytes, Mul(Mul(batch, points), Mul(bandwidths, 2 * 8))});
      return footprint;
    }
    case v1::SessionParams::kRffEmbedding:
    case v1::SessionParams::STEP_NOT_SET:
      break;
  }
  footprint = EmbeddingFootprintOf(params.rff_embedding().num_frequencies(), dataset, schema,
                                   "rff_embedding session step");
  footprint.row_bytes = row_bytes;
  return footprint;
}

absl::Status CheckStepQuery(const v1::SessionParams& params,
                            const v1::SessionStepRequest& request) {
  switch (params.step_case()) {
    case v1::SessionParams::kRffEmbedding:
      if (request.query_case() == v1::SessionStepRequest::QUERY_NOT_SET ||
          request.query_case() == v1::SessionStepRequest::kRffEmbedding) {
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(
          "this session's steps are rff_embedding: send an rff_embedding query or none");
    case v1::SessionParams::kDpSgd: {
      if (request.query_case() != v1::SessionStepRequest::kDpSgd) {
        return absl::InvalidArgumentError(
            "this session's steps are dp_sgd: send a dp_sgd query with the network's parameters");
      }
      const auto& values = request.dp_sgd().parameters();
      if (values.size() != params.dp_sgd().num_parameters()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dp_sgd step parameters have length ", values.size(), "; the network declared at "
            "open has ", params.dp_sgd().num_parameters(), " (nn::Mlp::parameters() layout)"));
      }
      // The unit's own check (length, finite, magnitude at most 2^20), the
      // one its Run repeats: a query it would refuse is refused here, before
      // any row is read, never after (issue 23's row oracle).
      DPC_ASSIGN_OR_RETURN(const release::DpSgdKind::Params resolved,
                           DpSgdParamsFromProto(params.dp_sgd()));
      return release::DpSgdKind::CheckParameters(
          resolved, params.dp_sgd().row_width(),
          Eigen::Map<const Eigen::VectorXf>(values.data(), values.size()).cast<double>());
    }
    case v1::SessionParams::kKernelWitness: {
      if (request.query_case() != v1::SessionStepRequest::kKernelWitness) {
        return absl::InvalidArgumentError(
            "this session's steps are kernel_witness: send a kernel_witness query with the "
            "generated points");
      }
      const v1::KernelWitnessParams& declared = params.kernel_witness();
      const v1::KernelWitnessQuery& query = request.kernel_witness();
      const int max_points = declared.max_points();  // resolved at open
      if (query.num_points() < 1 || query.num_points() > max_points) {
        return absl::InvalidArgumentError(
            absl::StrCat("kernel_witness step has ", query.num_points(), " query points; this "
                         "session takes 1 to ", max_points, " per step (max_points at open)"));
      }
      if (query.points_size() !=
          static_cast<int64_t>(query.num_points()) * declared.dimension()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "kernel_witness step points have ", query.points_size(), " numbers; expected ",
            query.num_points(), " points times the dataset's ", declared.dimension(),
            " encoded feature dimensions, row-major"));
      }
      // The unit's own checks (finite, bounded, labels in range), on the
      // query alone: nothing here reads a row.
      release::KernelWitnessKind::Query unit_query;
      unit_query.points = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic,
                                                         Eigen::RowMajor>>(
                              query.points().data(), query.num_points(), declared.dimension())
                              .cast<double>();
      unit_query.labels = Eigen::Map<const Eigen::VectorXi>(query.labels().data(),
                                                            query.labels_size());
      return release::KernelWitnessKind::ValidateQuery(KernelWitnessParamsFromProto(declared),
                                                       unit_query, declared.dimension(),
                                                       declared.num_classes());
    }
    case v1::SessionParams::STEP_NOT_SET:
      break;
  }
  return absl::FailedPreconditionError("the session has no step kind");
}

namespace {

// One step's batch: fixed size without replacement (REPLACE_ONE, with its
// public size) or Poisson (ADD_REMOVE, size private), drawn with the noise
// source's randomness, which is part of the mechanism. Shared by every step
// kind: the sampling is what the step event's subsampled bound accounts.
struct StepBatch {
  release::EncodedRows rows;
  int64_t public_n = 0;
};
StepBatch SampleStepBatch(const v1::SessionParams& params, const v1::Dataset& dataset,
                          const release::EncodedRows& rows, const std::vector<int64_t>* part_rows,
                          privacy::NoiseSource* noise) {
  const auto relation = RelationFromProto(dataset.relation());
  StepBatch batch;
  const int64_t population =
      part_rows != nullptr ? static_cast<int64_t>(part_rows->size()) : rows.num_rows();
  std::vector<int64_t> chosen =
      release::SampleStepIndices(relation, params.sampling_rate(), population, noise);
  // A partitioned member samples among its part's rows, exactly as over a
  // table of the part alone (the same draws, in the same order).
  if (part_rows != nullptr) {
    for (int64_t& index : chosen) index = (*part_rows)[static_cast<size_t>(index)];
  }
  if (relation == privacy::NeighbouringRelation::kReplaceOne) {
    batch.public_n = static_cast<int64_t>(chosen.size());  // fixed and public
  }
  batch.rows = release::SelectRows(rows, chosen);
  return batch;
}

}  // namespace

absl::StatusOr<std::string> ComputeSessionStep(const v1::Session& session,
                                               const v1::Dataset& dataset,
                                               const release::EncodedRows& rows,
                                               const std::string& step_id,
                                               const v1::SessionStepRequest& request,
                                               privacy::NoiseSource* noise,
                                               const std::vector<int64_t>* part_rows) {
  const v1::SessionParams& params = session.params();
  const StepBatch batch = SampleStepBatch(params, dataset, rows, part_rows, noise);
  const auto relation = RelationFromProto(dataset.relation());
  switch (params.step_case()) {
    case v1::SessionParams::kRffEmbedding: {
      using Kind = release::RffEmbeddingKind;
      const Kind::Params resolved = ParamsFromProto(params.rff_embedding());
      DPC_ASSIGN_OR_RETURN(Kind::Result result,
                           Kind::Run(resolved, batch.rows, relation, session.noise_multiplier(),
                                     batch.public_n, noise));
      // The step event (charged at open) is one subsampled Gaussian with
      // this multiplier; refuse anything else.
      if (!(result.ran == Kind::Plan(resolved, session.noise_multiplier()))) {
        return absl::InternalError("the step ran a mechanism other than the one charged");
      }
      v1::EmbeddingArtefact artefact;
      SetArtefactFields(result, &artefact);
      SetDatasetFields(dataset, &artefact);
      artefact.set_release_id(step_id);
      return artefact.SerializeAsString();
    }
    case v1::SessionParams::kDpSgd: {
      using Kind = release::DpSgdKind;
      DPC_ASSIGN_OR_RETURN(const Kind::Params resolved, DpSgdParamsFromProto(params.dp_sgd()));
      const auto& values = request.dp_sgd().parameters();
      const Eigen::VectorXd parameters =
          Eigen::Map<const Eigen::VectorXf>(values.data(), values.size()).cast<double>();
      DPC_ASSIGN_OR_RETURN(Kind::Result result,
                           Kind::Run(resolved, batch.rows, relation, session.noise_multiplier(),
                                     parameters, noise));
      if (!(result.ran == Kind::Plan(resolved, session.noise_multiplier()))) {
        return absl::InternalError("the step ran a mechanism other than the one charged");
      }
      v1::DpSgdGradient answer;
      answer.mutable_gradient()->Reserve(static_cast<int>(result.gradient.size()));
      for (const double g : result.gradient) answer.add_gradient(static_cast<float>(g));
      answer.set_divisor(result.divisor);
      return answer.SerializeAsString();
    }
    case v1::SessionParams::kKernelWitness: {
      using Kind = release::KernelWitnessKind;
      const v1::KernelWitnessParams& declared = params.kernel_witness();
      const v1::KernelWitnessQuery& request_query = request.kernel_witness();
      const Kind::Params resolved = KernelWitnessParamsFromProto(declared);
      Kind::Query query;
      query.points = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic,
                                                    Eigen::RowMajor>>(
                         request_query.points().data(), request_query.num_points(),
                         declared.dimension())
                         .cast<double>();
      query.labels = Eigen::Map<const Eigen::VectorXi>(request_query.labels().data(),
                                                       request_query.labels_size());
      DPC_ASSIGN_OR_RETURN(Kind::Result result,
                           Kind::Run(resolved, batch.rows, query, relation,
                                     session.noise_multiplier(), noise));
      if (!(result.ran == Kind::Plan(resolved, session.noise_multiplier()))) {
        return absl::InternalError("the step ran a mechanism other than the one charged");
      }
      v1::KernelWitnessValues answer;
      answer.mutable_values()->Reserve(static_cast<int>(result.values.size()));
      for (const double v : result.values) answer.add_values(static_cast<float>(v));
      answer.mutable_gradients()->Reserve(static_cast<int>(result.gradients.size()));
      for (Eigen::Index j = 0; j < result.gradients.rows(); ++j) {
        for (Eigen::Index a = 0; a < result.gradients.cols(); ++a) {
          answer.add_gradients(static_cast<float>(result.gradients(j, a)));
        }
      }
      answer.set_divisor(resolved.batch_divisor);
      return answer.SerializeAsString();
    }
    case v1::SessionParams::STEP_NOT_SET:
      break;
  }
  return absl::FailedPreconditionError("the session has no step kind");
}

absl::Status SetStepAnswer(const v1::SessionParams& params, const std::string& answer,
                           v1::SessionStepResponse* response) {
  switch (params.step_case()) {
    case v1::SessionParams::kRffEmbedding:
      if (!response->mutable_batch()->ParseFromString(answer)) {
        return absl::DataLossError("stored session step does not parse");
      }
      return absl::OkStatus();
    case v1::SessionParams::kDpSgd:
      // An answer always has its divisor, so it is never empty; empty means
      // a later step replaced it (Ledger::RecordStep).
      if (answer.empty()) {
        return absl::FailedPreconditionError(
            "this dp_sgd step's answer is no longer stored: sessions keep only the latest "
            "step's answer. Continue with the session's next step index (steps_used)");
      }
      if (!response->mutable_gradient()->ParseFromString(answer)) {
        return absl::DataLossError("stored session step does not parse");
      }
      return absl::OkStatus();
    case v1::SessionParams::kKernelWitness:
      // Like dp_sgd: the divisor is always set, so empty means replaced.
      if (answer.empty()) {
        return absl::FailedPreconditionError(
            "this kernel_witness step's answer is no longer stored: sessions keep only the "
            "latest step's answer. Continue with the session's next step index (steps_used)");
      }
      if (!response->mutable_witness()->ParseFromString(answer)) {
        return absl::DataLossError("stored session step does not parse");
      }
      return absl::OkStatus();
    case v1::SessionParams::STEP_NOT_SET:
      break;
  }
  return absl::FailedPreconditionError("the session has no step kind");
}

bool KeepsOnlyLatestAnswer(const v1::SessionParams& params) {
  return params.step_case() == v1::SessionParams::kDpSgd ||
         params.step_case() == v1::SessionParams::kKernelWitness;
}

namespace {
const char* KindName(const v1::SessionParams& params) {
  return params.step_case() == v1::SessionParams::kKernelWitness ? "kernel_witness" : "dp_sgd";
}
}  // namespace

absl::Status CheckStepOrder(const v1::Session& session, int64_t step) {
  if (!KeepsOnlyLatestAnswer(session.params()) || step == session.steps_used()) {
    return absl::OkStatus();
  }
  if (step < session.steps_used()) {
    return absl::FailedPreconditionError(absl::StrCat(
        KindName(session.params()), " step ", step, " of session '", session.id(), "' was answered and replaced by a "
        "later step; only the latest answer is kept. The next step is ", session.steps_used()));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      KindName(session.params()), " steps run in order: the next step of session '", session.id(), "' is ",
      session.steps_used(), ", not ", step));
}

absl::StatusOr<std::vector<std::vector<int>>> ResolveCliqueColumns(
    const google::protobuf::RepeatedPtrField<v1::AimClique>& cliques, const data::Schema& schema,
    const v1::Dataset& dataset, const std::string& what) {
  if (cliques.size() > release::kMaxCliques) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", cliques.size(),
                                                   " cliques; at most ", release::kMaxCliques));
  }
  std::vector<std::vector<int>> resolved;
  for (const v1::AimClique& clique : cliques) {
    if (clique.columns_size() > release::kMaxCliqueColumns) {
      return absl::InvalidArgumentError(absl::StrCat("a clique of the ", what, " has ",
                                                     clique.columns_size(),
                                                     " columns; a clique has 1 to ",
                                                     release::kMaxCliqueColumns));
    }
    std::vector<int> columns;
    for (const std::string& name : clique.columns()) {
      const std::optional<int> index = schema.FindColumn(name);
      if (!index.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(what, " names unknown column '", name,
                                                       "'; dataset '", dataset.id(),
                                                       "' has no such column in its schema"));
      }
      columns.push_back(*index);
    }
    resolved.push_back(std::move(columns));
  }
  return resolved;
}

}  // namespace dpcurator::plan
