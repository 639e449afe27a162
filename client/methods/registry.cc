#include "client/methods/registry.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/methods/autogan.h"
#include "client/methods/kernel.h"
#include "client/methods/merf.h"
#include "client/methods/mst.h"
#include "client/methods/pearl.h"
#include "client/methods/sinkhorn.h"
#include "client/model_package.h"

namespace dpcurator::client {

const Method* MethodFor(MethodId id) {
  switch (id) {
    // One line per method: its enumerator, its unit.
    case MethodId::kMerf:
      return &MerfMethod();
    case MethodId::kPearl:
      return &PearlMethod();
    case MethodId::kAutogan:
      return &AutoganMethod();
    case MethodId::kKernel:
      return &KernelMethod();
    case MethodId::kMst:
      return &MstMethod();
    case MethodId::kSinkhorn:
      return &SinkhornMethod();
    // AIM (issue 26): case MethodId::kAim: return &AimMethod();
  }
  return nullptr;
}

const std::vector<const Method*>& RegisteredMethods() {
  // The enumerators are consecutive from 0: walk them until the switch
  // knows no more, so the list needs no line of its own.
  static const std::vector<const Method*>* const methods = [] {
    auto* list = new std::vector<const Method*>();
    for (int i = 0;; ++i) {
      const Method* method = MethodFor(static_cast<MethodId>(i));
      if (method == nullptr) break;
      list->push_back(method);
    }
    return list;
  }();
  return *methods;
}

absl::StatusOr<const Method*> FindMethod(absl::string_view name) {
  std::vector<std::string> names;
  for (const Method* method : RegisteredMethods()) {
    if (method->name() == name) return method;
    names.emplace_back(method->name());
  }
  return absl::NotFoundError(absl::StrCat("no method '", name, "' in this client (it knows ",
                                          absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<const Method*> MethodOfModel(const v1::GeneratorModel& model) {
  if (model.format_version() != kModelFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model format version ", model.format_version(), " is not supported (expected ",
        kModelFormatVersion, "); retrain with this version of dpcurator"));
  }
  auto method = FindMethod(model.method());
  if (!method.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this model was written by method '", model.method(),
        "', which this client does not know; sample it with the dpcurator that trained it"));
  }
  return method;
}

absl::StatusOr<data::Table> SampleModel(const v1::GeneratorModel& model, int64_t num_rows,
                                        uint64_t seed) {
  auto method = MethodOfModel(model);
  if (!method.ok()) return method.status();
  if (num_rows <= 0) return absl::InvalidArgumentError("--rows must be positive");
  return (*method)->SampleTable(model, num_rows, seed);
}

}  // namespace dpcurator::client
