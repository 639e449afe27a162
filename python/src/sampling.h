#ifndef DPCURATOR_PYTHON_SRC_SAMPLING_H_
#define DPCURATOR_PYTHON_SRC_SAMPLING_H_

// Analysts' side (issue 28 item 5): a model file's synthetic rows, drawn by
// the client's own samplers (client/methods/registry.h) exactly as
// `dpcurator sample` draws them, as columns for a pandas DataFrame.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::python {

// One column of sampled rows: what `dpcurator sample` writes in it, typed.
struct SampledColumn {
  std::string name;
  enum class Type { kFloat, kInteger, kText } type = Type::kFloat;
  std::vector<double> numbers;     // kFloat, kInteger: the CSV text's value
  std::vector<std::string> texts;  // kText: category names ("" or "?" for missing)
};

// A tabular model file, its format version and method checked
// (MethodOfModel). Image models are refused: sample them with `dpcurator
// sample --png/--idx`.
absl::StatusOr<v1::GeneratorModel> LoadModel(const std::string& path);

// num_rows rows from `model` with `seed`: the same chunks and chunk seeds
// as `dpcurator sample` (kSampleChunkRows, SampleChunkSeed) and each cell
// as its CSV writes it (Schema::FormatCell: %.6g, integers rounded, level
// names), so the DataFrame equals the file the command writes.
absl::StatusOr<std::vector<SampledColumn>> SampleColumns(const v1::GeneratorModel& model,
                                                         int64_t num_rows, uint64_t seed);

}  // namespace dpcurator::python

#endif  // DPCURATOR_PYTHON_SRC_SAMPLING_H_
