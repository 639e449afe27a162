#ifndef DPCURATOR_CLIENT_METHODS_MST_H_
#define DPCURATOR_CLIENT_METHODS_MST_H_

// MST (McKenna, Miklau, Sheldon 2021; issue 17 item 3) as a client method:
// the server's "mst" recipe release (noisy 1-way marginals, private tree,
// noisy 2-way marginals), the client-side fit of the tree model
// (core/train/mst.h FitTreeModel), the model file (GeneratorModel fields
// 40-44) and sampling (codes from the tree, decoded with the schema's
// domain: atoms exact, uniform in bins).

#include <string>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "client/methods/method.h"
#include "core/train/mst.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// The unit (registry.cc).
const Method& MstMethod();

// Requests the MST release of `dataset_id` at `epsilon` (the dataset's
// delta), idempotency key `key`.
absl::StatusOr<v1::Release> RequestMstRelease(Connection& analyst, const std::string& dataset_id,
                                              double epsilon, const std::string& key);

// Fits the tree model to an "mst" release (no budget) and packages it.
absl::StatusOr<v1::GeneratorModel> TrainMstModel(const v1::Release& release);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_MST_H_
