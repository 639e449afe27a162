#ifndef DPCURATOR_CLIENT_SINKHORN_MODEL_H_
#define DPCURATOR_CLIENT_SINKHORN_MODEL_H_

// `dpcurator train sinkhorn` and the "sinkhorn" branch of `sample`: fit a
// PointGenerator to downloaded local-DP reports (core/train/sinkhorn_trainer.h,
// with p and lambda from the collection's public mechanism) and decode its
// points into rows of the collection's label-less schema.

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/data/table.h"
#include "core/train/sinkhorn_trainer.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

inline constexpr uint32_t kReportsFileFormatVersion = 1;

// Trains on `reports` (a file written by `collections download`) and packages
// the generator as a GeneratorModel with method "sinkhorn"; the model's schema
// is the label-less collection schema.
absl::StatusOr<v1::GeneratorModel> TrainSinkhornModel(const v1::ReportsFile& reports,
                                                      const train::SinkhornTrainerOptions& options,
                                                      uint32_t model_format_version);

// Samples `num_rows` points in R^d and decodes them (argmax per categorical
// block) under the model's schema.
absl::StatusOr<data::Table> SampleSinkhornModel(const v1::GeneratorModel& model, int64_t num_rows,
                                                uint64_t seed);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_SINKHORN_MODEL_H_
