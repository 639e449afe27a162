#include "python/src/sampling.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/methods/registry.h"
#include "client/proto_file.h"
#include "core/data/schema.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"

namespace dpcurator::python {

absl::StatusOr<v1::GeneratorModel> LoadModel(const std::string& path) {
  v1::GeneratorModel model;
  DPC_RETURN_IF_ERROR(client::ReadProtoFile(path, &model));
  DPC_RETURN_IF_ERROR(client::MethodOfModel(model).status());
  DPC_ASSIGN_OR_RETURN(const data::Schema schema, SchemaFromProto(model.schema()));
  if (!model.image_architecture().empty() || schema.image_index().has_value()) {
    return absl::UnimplementedError(absl::StrCat(
        "'", path, "' is an image model: sample it with `dpcurator sample --png/--idx`"));
  }
  return model;
}

absl::StatusOr<std::vector<SampledColumn>> SampleColumns(const v1::GeneratorModel& model,
                                                         int64_t num_rows, uint64_t seed) {
  if (num_rows < 1) return absl::InvalidArgumentError("n must be at least 1");
  DPC_ASSIGN_OR_RETURN(const data::Schema schema, SchemaFromProto(model.schema()));
  std::vector<SampledColumn> columns(static_cast<size_t>(schema.num_columns()));
  for (int c = 0; c < schema.num_columns(); ++c) {
    const data::Column& column = schema.column(c);
    SampledColumn& out = columns[static_cast<size_t>(c)];
    out.name = column.name;
    out.type = column.type == data::ColumnType::kCategorical ? SampledColumn::Type::kText
               : column.integer                              ? SampledColumn::Type::kInteger
                                                             : SampledColumn::Type::kFloat;
  }
  int64_t written = 0;
  for (int64_t chunk = 0; written < num_rows; ++chunk) {
    const int64_t n = std::min(client::kSampleChunkRows, num_rows - written);
    DPC_ASSIGN_OR_RETURN(const data::Table table,
                         client::SampleModel(model, n, client::SampleChunkSeed(seed, chunk)));
    for (int c = 0; c < schema.num_columns(); ++c) {
      SampledColumn& out = columns[static_cast<size_t>(c)];
      for (int64_t r = 0; r < table.num_rows(); ++r) {
        std::string text = schema.FormatCell(c, table.cells(r, c));
        if (out.type == SampledColumn::Type::kText) {
          out.texts.push_back(std::move(text));
        } else {
          double value = 0.0;
          // FormatCell writes a finite number ("%.6g", "%.0f") for a
          // numeric column; the CSV reader reads the same text.
          if (!absl::SimpleAtod(text, &value)) {
            return absl::InternalError(absl::StrCat("column '", out.name,
                                                    "': the sampler wrote a non-number"));
          }
          out.numbers.push_back(value);
        }
      }
    }
    written += n;
  }
  return columns;
}

}  // namespace dpcurator::python
