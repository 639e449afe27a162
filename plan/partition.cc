#include "plan/partition.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/data/discretize.h"
#include "core/privacy/calibration.h"
#include "core/privacy/discrete_noise.h"
#include "core/release/bin_fit.h"
#include "core/release/partitioned_marginals.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"
#include "plan/releases.h"

namespace dpcurator::plan {

absl::StatusOr<std::vector<int32_t>> ResolvePartition(const data::Schema& schema,
                                                      privacy::NeighbouringRelation relation,
                                                      const std::string& column,
                                                      const std::vector<std::string>& values) {
  if (relation != privacy::NeighbouringRelation::kAddRemove) {
    return absl::FailedPreconditionError(
        "partitioned sessions need an ADD_REMOVE dataset: under REPLACE_ONE a step samples a "
        "fixed number of rows of a public n, and the size of a part is not public");
  }
  return ResolvePartitionValues(schema, column, values);
}

absl::StatusOr<std::vector<int32_t>> ResolvePartitionValues(
    const data::Schema& schema, const std::string& column,
    const std::vector<std::string>& values) {
  if (!schema.label_index().has_value()) {
    return absl::FailedPreconditionError(
        "a partition needs a dataset whose schema declares a label column (its declared "
        "categories are the public parts)");
  }
  const data::Column& label = schema.column(*schema.label_index());
  if (column != label.name) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot partition by column '", column, "': only the declared label column '",
        label.name, "' is a public partition key"));
  }
  if (values.empty() || values.size() > static_cast<size_t>(privacy::kMaxPartitionParts)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a partition needs 1 to ", privacy::kMaxPartitionParts, " part values, got ",
        values.size()));
  }
  std::vector<int32_t> levels;
  levels.reserve(values.size());
  for (const std::string& value : values) {
    const auto it = std::find(label.categories.begin(), label.categories.end(), value);
    if (it == label.categories.end()) {
      return absl::InvalidArgumentError(absl::StrCat("part value '", value,
                                                     "' is not a declared category of '",
                                                     label.name, "'"));
    }
    const auto level = static_cast<int32_t>(it - label.categories.begin());
    if (std::find(levels.begin(), levels.end(), level) != levels.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("part value '", value, "' is named twice; each part is opened once"));
    }
    levels.push_back(level);
  }
  return levels;
}

std::vector<std::string> PartitionValues(const data::Schema& schema,
                                         const v1::Partition& partition) {
  std::vector<std::string> values(partition.values().begin(), partition.values().end());
  if (values.empty() && schema.label_index().has_value() &&
      partition.column() == schema.column(*schema.label_index()).name) {
    // Every declared category: public, from the schema alone.
    values = schema.column(*schema.label_index()).categories;
  }
  return values;
}

absl::StatusOr<PartitionedPlan> PlanPartitionedSessions(
    const v1::OpenPartitionedSessionsRequest& request, const v1::Dataset& dataset) {
  DPC_ASSIGN_OR_RETURN(const data::Schema schema, SchemaFromProto(dataset.schema()));
  const v1::Partition& partition = request.partition();
  const std::vector<std::string> values = PartitionValues(schema, partition);
  // First, before anything else is looked at: the partition is public and
  // defined for the dataset's relation.
  DPC_ASSIGN_OR_RETURN(const std::vector<int32_t> levels,
                       ResolvePartition(schema, RelationFromProto(dataset.relation()),
                                        partition.column(), values));
  v1::OpenSessionRequest part_request;
  part_request.set_dataset_id(request.dataset_id());
  part_request.set_idempotency_key(request.idempotency_key());
  *part_request.mutable_params() = request.params();
  const bool kernel = part_request.params().step_case() == v1::SessionParams::kKernelWitness;
  if (kernel) {
    v1::KernelWitnessParams& witness = *part_request.mutable_params()->mutable_kernel_witness();
    if (witness.conditional()) {
      return absl::InvalidArgumentError(
          "a partitioned kernel_witness session is unconditional (conditional = false): each "
          "part is one class, and its generator needs no label");
    }
    // Planned as the ordinary unconditional session each part is.
    witness.set_parallel(false);
  }
  DPC_ASSIGN_OR_RETURN(SessionPlan plan, PlanSession(part_request, dataset));
  if (kernel) plan.resolved_params.mutable_kernel_witness()->set_parallel(true);
  PartitionedPlan planned;
  planned.column = partition.column();
  std::vector<std::pair<int32_t, std::string>> by_level;
  for (size_t k = 0; k < levels.size(); ++k) by_level.emplace_back(levels[k], values[k]);
  std::sort(by_level.begin(), by_level.end());
  for (const auto& [level, value] : by_level) {
    planned.values.push_back(value);
    SessionPart part;
    part.level = level;
    part.params = plan.resolved_params;
    part.step_event = plan.step_event;
    part.steps = plan.steps;
    part.noise_multiplier = plan.noise_multiplier;
    planned.parts.push_back(std::move(part));
  }
  return planned;
}

std::vector<int64_t> RowIndicesOfPart(const release::EncodedRows& rows, int32_t level) {
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < rows.num_rows(); ++i) {
    if (rows.labels(i) == level) indices.push_back(i);
  }
  return indices;
}

release::EncodedRows RowsOfPart(const release::EncodedRows& rows, int32_t level) {
  return release::SelectRows(rows, RowIndicesOfPart(rows, level));
}

absl::StatusOr<MarginalsReleasePlan> PlanMarginalsRelease(const v1::ReleaseRequest& request,
                                                          const v1::Dataset& dataset,
                                                          const data::Schema& dataset_schema) {
  using Kind = release::MarginalsKind;
  const auto relation = RelationFromProto(dataset.relation());
  MarginalsReleasePlan plan;
  const v1::MarginalsParams& params = request.marginals();
  if (params.fit_grid() && request.has_partition()) {
    // A part's rows would fit bins of that part only, and the grid's edges
    // go into the dataset's schema: one release over all rows.
    return absl::InvalidArgumentError(
        "a bin-fit marginals release (fit_grid) takes no partition. Nothing was charged");
  }
  // First, before anything else is looked at: the partition is public.
  if (request.has_partition()) {
    const std::vector<std::string> values = PartitionValues(dataset_schema, request.partition());
    DPC_ASSIGN_OR_RETURN(
        std::vector<int32_t> levels,
        ResolvePartitionValues(dataset_schema, request.partition().column(), values));
    plan.partitioned = true;
    plan.column = request.partition().column();
    std::vector<std::pair<int32_t, std::string>> by_level;
    for (size_t k = 0; k < levels.size(); ++k) by_level.emplace_back(levels[k], values[k]);
    std::sort(by_level.begin(), by_level.end());
    for (const auto& [level, value] : by_level) {
      plan.levels.push_back(level);
      plan.values.push_back(value);
    }
  }
  DPC_ASSIGN_OR_RETURN(
      plan.params.cliques,
      ResolveCliqueColumns(params.cliques(), dataset_schema, dataset, "marginals release"));
  if (params.fit_grid()) {
    // Bin fitting (docs/privacy.md 2.11.1): 1-way cliques of numeric
    // columns over FitGridSchema, the very call the release's domain comes
    // from; it names the first column that is not numeric.
    if (plan.params.cliques.empty()) {
      for (int c = 0; c < dataset_schema.num_columns(); ++c) {
        const data::Column& column = dataset_schema.column(c);
        if (column.type == data::ColumnType::kNumeric) {
          plan.params.cliques.push_back({c});
        }
      }
      if (plan.params.cliques.empty()) {
        return absl::InvalidArgumentError(
            "a bin-fit marginals release needs a numeric column; the schema has none. Nothing was "
            "charged");
      }
    }
    std::vector<int> columns;
    for (const std::vector<int>& clique : plan.params.cliques) {
      if (clique.size() != 1) {
        return absl::InvalidArgumentError(
            "a bin-fit marginals release (fit_grid) takes 1-way cliques only, one numeric "
            "column each. Nothing was charged");
      }
      columns.push_back(clique[0]);
    }
    DPC_ASSIGN_OR_RETURN(plan.fit_schema, release::FitGridSchema(dataset_schema, columns));
  }
  const data::Schema& schema = plan.fit_schema ? *plan.fit_schema : dataset_schema;
  if (plan.params.cliques.empty()) {
    // The 1-way marginal of every column but the label (a part's label is
    // one value), public from the schema.
    if (schema.num_columns() > release::kMaxCliques + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a marginals release without cliques takes schemas of at most ",
          release::kMaxCliques + 1, " columns; name the cliques"));
    }
    for (int c = 0; c < schema.num_columns(); ++c) {
      if (schema.label_index() != c) plan.params.cliques.push_back({c});
    }
  }
  DPC_ASSIGN_OR_RETURN(plan.params, Kind::Resolve(std::move(plan.params), schema));
  DPC_ASSIGN_OR_RETURN(const int64_t cells, release::MarginalsCells(plan.params, schema));
  if (dataset.external()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset '", dataset.id(), "' is external; marginals are computed here only. Nothing "
        "was charged"));
  }
  if (dataset.row_count() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset '", dataset.id(), "' has no rows; upload rows first"));
  }
  const int64_t parts = plan.partitioned ? static_cast<int64_t>(plan.levels.size()) : 0;
  const double delta = dataset.budget().delta();
  DPC_ASSIGN_OR_RETURN(
      plan.noise_multiplier,
      ResolveRequestedNoiseMultiplier(request, [&](double epsilon) -> absl::StatusOr<double> {
        if (!plan.partitioned) {
          // The ordinary release's calibration, as every one-shot kind's.
          return privacy::CalibrateGridGaussianNoiseMultiplier(1, epsilon, delta);
        }
        // Judged as the partitioned event it will be charged.
        return privacy::CalibrateEventNoiseMultiplier(
            [&](double s) {
              return release::MarginalsEvent(plan.params, cells, s, relation, parts);
            },
            relation, epsilon, delta);
      }));
  // The grid noise the engine's draw will make, checked here (never a
  // failure after the read; docs/privacy.md 6.4).
  const absl::Status drawable =
      privacy::GridGaussianNoise(plan.noise_multiplier, Kind::L2Sensitivity(plan.params, relation),
                                 cells)
          .status();
  if (!drawable.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "noise multiplier ", plan.noise_multiplier,
        " cannot be used for this request (checked before any charge): ", drawable.message(),
        ". Choose a noise multiplier or epsilon in the supported range"));
  }
  DPC_ASSIGN_OR_RETURN(plan.event, release::MarginalsEvent(plan.params, cells,
                                                           plan.noise_multiplier, relation, parts));
  // Its answer: each part's artefact carries every clique's table and the
  // schema, so K parts send K times the per-release cell limit
  // (release::kMaxMarginalCells): 10 parts of 2^20 cells are 80 MiB, over
  // the 64 MiB message limit, and are refused here, never charged.
  const int64_t copies = std::max<int64_t>(parts, 1);
  const int64_t tables = static_cast<int64_t>(plan.params.cliques.size());
  int64_t values_bytes = 0;
  for (const std::string& value : plan.values) {
    values_bytes += 2 * (static_cast<int64_t>(value.size()) + 8);
  }
  const int64_t part_bytes = SaturatingAdd(
      SaturatingAdd(SaturatingMul(cells, 8), SaturatingMul(tables, kTableOverheadBytes)),
      SaturatingAdd(static_cast<int64_t>(dataset.schema().ByteSizeLong()) +
                        static_cast<int64_t>(
                            plan.fit_schema ? SchemaToProto(schema).ByteSizeLong() : 0) +
                        16 * int64_t{schema.num_columns()} +
                        static_cast<int64_t>(plan.column.size()),
                    kArtefactOverheadBytes));
  PlanFootprint& footprint = plan.footprint;
  footprint.what = plan.partitioned ? "partitioned marginals release" : "marginals release";
  footprint.hint =
      plan.partitioned ? "name fewer parts or smaller cliques" : "name smaller cliques";
  footprint.artefact_bytes =
      SaturatingAdd(SaturatingMul(copies, part_bytes), values_bytes + kArtefactOverheadBytes);
  // The engine's tables (counts, then noisy) beside the answer's copies.
  footprint.public_bytes =
      SaturatingAdd(SaturatingMul(SaturatingMul(copies, cells), 2 * 8),
                    SaturatingMul(3, footprint.artefact_bytes));
  const int64_t rows = std::max<int64_t>(dataset.row_count(), 0);
  footprint.row_bytes =
      SaturatingAdd(SaturatingMul(RawRowBytes(dataset, schema), 2),
                    SaturatingMul(SaturatingMul(rows, schema.num_columns()), 4));
  return plan;
}

namespace {

// One part's (or the whole release's) artefact, from the engine's result.
absl::StatusOr<v1::MarginalsArtefact> MarginalsArtefactOf(
    const MarginalsReleasePlan& plan, const release::MarginalsKind::Result& result,
    const v1::Dataset& dataset, const data::Schema& schema, const std::string& release_id,
    double epsilon_alone) {
  // `schema`: the domain the tables are over (the fit grid's, or the
  // dataset's).
  using Kind = release::MarginalsKind;
  // Never release what the ledger did not charge.
  if (!(result.ran == Kind::Plan(plan.params, plan.noise_multiplier))) {
    return absl::InternalError("the engine ran a mechanism other than the one charged");
  }
  DPC_ASSIGN_OR_RETURN(const data::Discretizer domain, data::Discretizer::Create(schema));
  v1::MarginalsArtefact artefact;
  artefact.set_format_version(1);
  artefact.set_release_id(release_id);
  artefact.set_dataset_id(dataset.id());
  if (plan.fit_schema) {
    // Over the grid, not the dataset's bins: marked, so a trainer refuses it
    // (the fingerprint stays the dataset's: the schema the rows were read
    // under).
    *artefact.mutable_schema() = SchemaToProto(schema);
    artefact.set_fit_grid(true);
  } else {
    *artefact.mutable_schema() = dataset.schema();
  }
  artefact.set_schema_fingerprint(dataset.schema_fingerprint());
  artefact.set_relation(dataset.relation() == v1::REPLACE_ONE ? v1::REPLACE_ONE
                                                              : v1::ADD_REMOVE);
  artefact.set_epsilon(epsilon_alone);
  artefact.set_delta(dataset.budget().delta());
  for (int c = 0; c < schema.num_columns(); ++c) artefact.add_domain_sizes(domain.domain_size(c));
  for (const auto& m : result.marginals) *artefact.add_tables() = NoisyMarginalToProto(m);
  artefact.set_noise_multiplier(plan.noise_multiplier);
  artefact.set_sensitivity(Kind::L2Sensitivity(plan.params, RelationFromProto(dataset.relation())));
  return artefact;
}

}  // namespace

absl::StatusOr<v1::Release> ComputeMarginalsRelease(const MarginalsReleasePlan& plan,
                                                    const v1::Dataset& dataset,
                                                    const data::Schema& dataset_schema,
                                                    const data::Table& rows,
                                                    const std::string& release_id,
                                                    const std::string& idempotency_key,
                                                    double epsilon_alone,
                                                    privacy::NoiseSource* noise) {
  // The planned domain: the fit grid's when asked (same columns, names and
  // types as the dataset's, so the stored values are read alike).
  const data::Schema& schema = plan.fit_schema ? *plan.fit_schema : dataset_schema;
  v1::Release release;
  release.set_id(release_id);
  release.set_dataset_id(dataset.id());
  release.set_idempotency_key(idempotency_key);
  release.set_kind(v1::MARGINALS);
  const auto relation = RelationFromProto(dataset.relation());
  if (!plan.partitioned) {
    DPC_ASSIGN_OR_RETURN(release::MarginalsKind::Result result,
                         release::MarginalsKind::Run(plan.params, schema, rows, relation,
                                                     plan.noise_multiplier, noise));
    DPC_ASSIGN_OR_RETURN(*release.mutable_marginals(),
                         MarginalsArtefactOf(plan, result, dataset, schema, release_id,
                                             epsilon_alone));
    return release;
  }
  if (!schema.label_index().has_value()) {
    return absl::InternalError("the partitioned plan was made for another schema");
  }
  // Every planned part runs, whatever its rows: no branch on a row count.
  DPC_ASSIGN_OR_RETURN(std::vector<release::MarginalsKind::Result> results,
                       release::RunMarginalsParts(plan.params, schema, rows,
                                                  *schema.label_index(), plan.levels, relation,
                                                  plan.noise_multiplier, noise));
  if (results.size() != plan.levels.size()) {
    return absl::InternalError("the engine ran other parts than the ones charged");
  }
  v1::PartitionedArtefact& partitioned = *release.mutable_partitioned();
  partitioned.set_column(plan.column);
  for (size_t k = 0; k < results.size(); ++k) {
    DPC_ASSIGN_OR_RETURN(v1::MarginalsArtefact artefact,
                         MarginalsArtefactOf(plan, results[k], dataset, schema, release_id,
                                             epsilon_alone));
    artefact.set_partition_column(plan.column);
    artefact.set_part_value(plan.values[k]);
    partitioned.add_values(plan.values[k]);
    *partitioned.add_marginals() = std::move(artefact);
  }
  return release;
}

}  // namespace dpcurator::plan
