#ifndef DPCURATOR_CLIENT_MST_MODEL_H_
#define DPCURATOR_CLIENT_MST_MODEL_H_

// MST through the product (issue 17 item 3): the server's "mst" release
// (noisy 1-way marginals, private tree, noisy 2-way marginals), the
// client-side fit of the tree model (core/train/mst.h FitTreeModel), the
// model file (GeneratorModel method "mst", fields 40-44) and sampling.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli.h"
#include "client/connection.h"
#include "core/data/table.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// Requests the MST release of `dataset_id` at `epsilon` (the dataset's
// delta), idempotency key `key`.
absl::StatusOr<v1::Release> RequestMstRelease(Connection& analyst, const std::string& dataset_id,
                                              double epsilon, const std::string& key);

// Fits the tree model to an "mst" release (no budget) and packages it.
absl::StatusOr<v1::GeneratorModel> TrainMstModel(const v1::Release& release);

// Synthetic rows from a method "mst" model (SampleModel's hook): codes from
// the tree, decoded with the schema's domain (atoms exact, uniform in bins).
absl::StatusOr<data::Table> SampleMstModel(const v1::GeneratorModel& model, int64_t num_rows,
                                           uint64_t seed);

// `train mst` (registered by ModelCommands).
std::vector<Command> MstCommands();

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_MST_MODEL_H_
