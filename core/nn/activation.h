#ifndef DPCURATOR_CORE_NN_ACTIVATION_H_
#define DPCURATOR_CORE_NN_ACTIVATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpcurator::nn {

// Hidden-layer nonlinearity of an Mlp. The output layer is always linear;
// bounded heads (sigmoid, softmax) belong to the model that owns the Mlp
// (for example train::TabularGenerator).
enum class Activation {
  kRelu,       // max(x, 0)
  kLeakyRelu,  // x for x > 0, slope * x otherwise (Maas et al. 2013)
  kTanh,       // tanh(x)
};

// Stable names for model files: "relu", "leaky_relu", "tanh".
std::string ActivationName(Activation activation);

// Inverse of ActivationName; InvalidArgument names the unknown token.
absl::StatusOr<Activation> ParseActivation(absl::string_view name);

}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_ACTIVATION_H_
