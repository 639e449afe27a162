// Writes a DP-MERF model file for the Python module's tests without a
// server: a generator with its initial (seeded, public) weights, packaged
// the way client/methods/embedding_release.cc packages a trained one. What
// the test checks is that `dpcurator sample` and dpcurator.load_model()
// .sample() draw the same rows from one file, not the model's quality.
//
//   write_model SCHEMA.json OUT.pb
#include <iostream>

#include "client/model_package.h"
#include "client/proto_file.h"
#include "core/data/encoder.h"
#include "core/train/tabular_generator.h"
#include "proto/convert.h"

int main(int argc, char** argv) {
  using namespace dpcurator;  // NOLINT
  if (argc != 3) {
    std::cerr << "usage: write_model SCHEMA.json OUT.pb\n";
    return 2;
  }
  auto proto = ReadSchemaFile(argv[1]);
  if (!proto.ok()) {
    std::cerr << proto.status() << "\n";
    return 1;
  }
  auto schema = SchemaFromProto(*proto);
  if (!schema.ok()) {
    std::cerr << schema.status() << "\n";
    return 1;
  }
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(*schema);
  train::GeneratorOptions options;
  options.hidden = {32, 32};
  options.seed = 17;
  auto generator = train::TabularGenerator::Create(layout, schema->num_classes(), options);
  if (!generator.ok()) {
    std::cerr << generator.status() << "\n";
    return 1;
  }
  const client::ModelSource source{*proto, schema->FingerprintHex(), 1.0, 1e-5};
  v1::GeneratorModel model = client::PackageModel("merf", source, options.hidden,
                                                  options.activation, generator->parameters(),
                                                  /*steps=*/0, /*final_loss=*/0.0);
  model.set_noise_dim(options.noise_dim);
  model.set_num_classes(schema->num_classes());
  for (int c = 0; c < schema->num_classes(); ++c) {
    model.add_class_weights(1.0 / schema->num_classes());
  }
  if (auto status = client::WriteProtoFile(model, argv[2]); !status.ok()) {
    std::cerr << status << "\n";
    return 1;
  }
  return 0;
}
