#include "core/nn/activation.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpcurator::nn {

std::string ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kRelu:
      return "relu";
    case Activation::kLeakyRelu:
      return "leaky_relu";
    case Activation::kTanh:
      return "tanh";
  }
  return "unknown";
}

absl::StatusOr<Activation> ParseActivation(absl::string_view name) {
  if (name == "relu") return Activation::kRelu;
  if (name == "leaky_relu") return Activation::kLeakyRelu;
  if (name == "tanh") return Activation::kTanh;
  return absl::InvalidArgumentError(absl::StrCat(
      "Unknown activation \"", name, "\"; expected relu, leaky_relu or tanh"));
}

}  // namespace dpcurator::nn
