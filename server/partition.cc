#include "server/partition.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "server/releases.h"

namespace dpcurator::server {

absl::StatusOr<std::vector<int32_t>> ResolvePartition(const data::Schema& schema,
                                                      privacy::NeighbouringRelation relation,
                                                      const std::string& column,
                                                      const std::vector<std::string>& values) {
  if (relation != privacy::NeighbouringRelation::kAddRemove) {
    return absl::FailedPreconditionError(
        "partitioned sessions need an ADD_REMOVE dataset: under REPLACE_ONE a step samples a "
        "fixed number of rows of a public n, and the size of a part is not public");
  }
  if (!schema.label_index().has_value()) {
    return absl::FailedPreconditionError(
        "partitioned sessions need a dataset whose schema declares a label column (its "
        "declared categories are the public parts)");
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

absl::StatusOr<PartitionedPlan> PlanPartitionedSessions(
    const v1::OpenPartitionedSessionsRequest& request, const v1::Dataset& dataset) {
  DPC_ASSIGN_OR_RETURN(const data::Schema schema, SchemaFromProto(dataset.schema()));
  const v1::Partition& partition = request.partition();
  std::vector<std::string> values(partition.values().begin(), partition.values().end());
  if (values.empty() && schema.label_index().has_value() &&
      partition.column() == schema.column(*schema.label_index()).name) {
    // Every declared category: public, from the schema alone.
    values = schema.column(*schema.label_index()).categories;
  }
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
    Ledger::SessionPart part;
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

}  // namespace dpcurator::server
