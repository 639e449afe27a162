#ifndef DPCURATOR_CLIENT_METHODS_REGISTRY_H_
#define DPCURATOR_CLIENT_METHODS_REGISTRY_H_

// The client's methods, bound in one place (registry.cc: one exhaustive
// switch over MethodId, the way server/release_kinds.cc binds release
// kinds). `train`, `sample`, `eval`, `report`, `demo --method` and `--help`
// find methods only here, so a new method is its unit plus one line.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/methods/method.h"
#include "core/data/table.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// The unit of `id`; null only for a value outside the enum.
const Method* MethodFor(MethodId id);

// Every registered method, in MethodId order.
const std::vector<const Method*>& RegisteredMethods();

// The method named `name` (a command word or a model file's `method`);
// NotFound listing the registered names otherwise.
absl::StatusOr<const Method*> FindMethod(absl::string_view name);

// The method that wrote `model`, after checking the file's format version
// (kModelFormatVersion) and naming what is wrong otherwise.
absl::StatusOr<const Method*> MethodOfModel(const v1::GeneratorModel& model);

// Rows drawn from a tabular model by its method's sampler.
absl::StatusOr<data::Table> SampleModel(const v1::GeneratorModel& model, int64_t num_rows,
                                        uint64_t seed);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_REGISTRY_H_
