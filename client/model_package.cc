#include "client/model_package.h"

#include <chrono>
#include <string>

namespace dpcurator::client {

v1::GeneratorModel PackageModel(absl::string_view method, const ModelSource& source,
                                const std::vector<int>& hidden, nn::Activation activation,
                                const Eigen::VectorXd& parameters, int steps, double final_loss) {
  v1::GeneratorModel model;
  model.set_format_version(kModelFormatVersion);
  model.set_method(std::string(method));
  *model.mutable_schema() = source.schema;
  model.set_schema_fingerprint(source.schema_fingerprint);
  model.set_epsilon(source.epsilon);
  model.set_delta(source.delta);
  for (int width : hidden) model.add_hidden(width);
  model.set_activation(nn::ActivationName(activation));
  model.mutable_parameters()->Assign(parameters.data(), parameters.data() + parameters.size());
  model.set_steps(steps);
  model.set_final_loss(final_loss);
  model.set_created_unix(std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count());
  return model;
}

}  // namespace dpcurator::client
