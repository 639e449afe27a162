#ifndef DPCURATOR_CLIENT_METHODS_SINKHORN_H_
#define DPCURATOR_CLIENT_METHODS_SINKHORN_H_

// Sinkhorn deconvolution of local-DP reports (Reshetova et al.) as a client
// method: fit an LdpPointGenerator to downloaded reports
// (core/train/sinkhorn_trainer.h, with p and lambda from the collection's
// public mechanism) and decode its points into rows of the collection's
// label-less schema.

#include <cstdint>

#include "absl/status/statusor.h"
#include "client/methods/method.h"
#include "core/data/table.h"
#include "core/train/sinkhorn_trainer.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// The unit (registry.cc).
const Method& SinkhornMethod();

inline constexpr uint32_t kReportsFileFormatVersion = 1;

// Trains on `reports` (a file written by `collections download`) and packages
// the generator as a GeneratorModel of this method; the model's schema
// is the label-less collection schema.
absl::StatusOr<v1::GeneratorModel> TrainSinkhornModel(const v1::ReportsFile& reports,
                                                      const train::SinkhornTrainerOptions& options,
                                                      uint32_t model_format_version);

// Samples `num_rows` points in R^d and decodes them (argmax per categorical
// block) under the model's schema.
absl::StatusOr<data::Table> SampleSinkhornModel(const v1::GeneratorModel& model, int64_t num_rows,
                                                uint64_t seed);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_SINKHORN_H_
