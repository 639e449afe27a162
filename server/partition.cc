#include "server/partition.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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

release::EncodedRows RowsOfPart(const release::EncodedRows& rows, int32_t level) {
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < rows.num_rows(); ++i) {
    if (rows.labels(i) == level) indices.push_back(i);
  }
  return release::SelectRows(rows, indices);
}

}  // namespace dpcurator::server
