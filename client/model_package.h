#ifndef DPCURATOR_CLIENT_MODEL_PACKAGE_H_
#define DPCURATOR_CLIENT_MODEL_PACKAGE_H_

// Model files: the fields every trained generator is packaged with, whatever
// method trained it (DP-MERF, PEARL, Sinkhorn).

#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/string_view.h"
#include "core/nn/activation.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// The model file format this client writes and samples (SampleModel checks
// it).
inline constexpr uint32_t kModelFormatVersion = 1;

// What a model was fitted to, as its file records it: the schema of the
// rows it samples (and its fingerprint) and what the release or collection
// behind it cost.
struct ModelSource {
  v1::TableSchema schema;
  std::string schema_fingerprint;
  double epsilon = 0.0;
  double delta = 0.0;
};

// A GeneratorModel with the fields every method fills the same way: format
// version, method, source, the network (hidden widths, activation,
// parameters), the steps trained, the final loss and the creation time. The
// caller adds its method's own fields (release or collection id, widths).
v1::GeneratorModel PackageModel(absl::string_view method, const ModelSource& source,
                                const std::vector<int>& hidden, nn::Activation activation,
                                const Eigen::VectorXd& parameters, int steps, double final_loss);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_MODEL_PACKAGE_H_
