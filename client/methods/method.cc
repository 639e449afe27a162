#include "client/methods/method.h"

#include "absl/strings/str_cat.h"

namespace dpcurator::client {

absl::StatusOr<DemoOutput> Method::TrainInDemo(const DemoInput&) const {
  return absl::InvalidArgumentError(
      absl::StrCat("method ", name(), " does not run in `dpcurator demo`"));
}

absl::Status Method::SampleImages(const ParsedArgs&, const v1::GeneratorModel&, int64_t,
                                  uint64_t) const {
  return absl::InvalidArgumentError(
      absl::StrCat("this ", name(), " model samples table rows, not images; omit --png/--idx"));
}

}  // namespace dpcurator::client
