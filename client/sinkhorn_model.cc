#include "client/sinkhorn_model.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/model_package.h"
#include "core/data/encoder.h"
#include "core/nn/activation.h"
#include "core/util/public_rng.h"
#include "core/util/status_macros.h"
#include "proto/collection.h"
#include "proto/convert.h"

namespace dpcurator::client {

absl::StatusOr<v1::GeneratorModel> TrainSinkhornModel(const v1::ReportsFile& reports,
                                                      const train::SinkhornTrainerOptions& options,
                                                      uint32_t model_format_version) {
  if (reports.format_version() != kReportsFileFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("reports file format version ", reports.format_version(),
                     " is not supported (expected ", kReportsFileFormatVersion, ")"));
  }
  const v1::Collection& collection = reports.collection();
  DPC_ASSIGN_OR_RETURN(ldp::LdpMechanism mechanism, MechanismFromCollection(collection));
  const int d = mechanism.dimension();
  if (reports.rows() <= 0) {
    return absl::FailedPreconditionError("the reports file holds no reports");
  }
  if (reports.values_size() != reports.rows() * d) {
    return absl::DataLossError(absl::StrCat("reports file has ", reports.values_size(),
                                            " values for ", reports.rows(), " rows of ", d));
  }
  const Eigen::MatrixXd data =
      Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
          reports.values().data(), reports.rows(), d);
  DPC_ASSIGN_OR_RETURN(data::Schema label_free, CollectionSchema(collection.params()));
  const RecordSpace space = CollectionRecordSpace(label_free);
  absl::StatusOr<train::TrainedPointGenerator> fitted;
  if (space.low < space.high) {
    // Image records: the generator's head is bounded to the pixel box
    // (a projected image stays in it), and the float32 path trains it.
    train::SinkhornTrainerOptions bounded = options;
    bounded.generator.output_low = space.low;
    bounded.generator.output_high = space.high;
    fitted = train::TrainSinkhornGeneratorFloat(data.cast<float>(), mechanism, bounded);
  } else {
    fitted = train::TrainSinkhornGenerator(data, mechanism, options);
  }
  if (!fitted.ok()) return fitted.status();
  train::TrainedPointGenerator& trained = *fitted;
  const train::PointGeneratorOptions& g = trained.generator.options();
  const ModelSource source{SchemaToProto(label_free), label_free.FingerprintHex(),
                           mechanism.epsilon(), mechanism.delta()};
  v1::GeneratorModel model = PackageModel("sinkhorn", source, g.hidden, g.activation,
                                          trained.generator.parameters(), trained.steps,
                                          trained.final_loss);
  model.set_format_version(model_format_version);
  model.set_collection_id(collection.id());
  model.set_latent_dim(g.latent_dim);
  model.set_noise_dim(g.latent_dim);
  model.set_output_dim(trained.generator.output_dim());
  model.set_output_low(g.output_low);
  model.set_output_high(g.output_high);
  model.set_num_classes(1);
  return model;
}

absl::StatusOr<data::Table> SampleSinkhornModel(const v1::GeneratorModel& model, int64_t num_rows,
                                                uint64_t seed) {
  if (num_rows <= 0) return absl::InvalidArgumentError("--rows must be positive");
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(model.schema()));
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  if (layout.total_dim() != model.output_dim()) {
    return absl::InvalidArgumentError(absl::StrCat("model output dimension ", model.output_dim(),
                                                   " does not match its schema's encoded width ",
                                                   layout.total_dim()));
  }
  train::PointGeneratorOptions options;
  options.latent_dim = model.latent_dim();
  options.hidden.assign(model.hidden().begin(), model.hidden().end());
  options.output_low = model.output_low();
  options.output_high = model.output_high();
  DPC_ASSIGN_OR_RETURN(options.activation, nn::ParseActivation(model.activation()));
  Eigen::VectorXd parameters =
      Eigen::Map<const Eigen::VectorXd>(model.parameters().data(), model.parameters_size());
  DPC_ASSIGN_OR_RETURN(auto generator,
                       train::PointGenerator::FromParameters(model.output_dim(), options,
                                                             std::move(parameters)));
  PublicRng rng(seed);
  // Records back to the encoding (image pixels from [-1, 1] to [0, 1]).
  const Eigen::MatrixXd points =
      FromRecordSpace(CollectionRecordSpace(schema), generator.Sample(num_rows, &rng));
  // Argmax per categorical block (uniforms empty); numerics mapped back to
  // the declared bounds, pixels to 8-bit levels. No label: the schema is
  // label-less.
  return data::DecodeFeatures(schema, layout, points, Eigen::VectorXi::Zero(num_rows),
                              Eigen::MatrixXd());
}

}  // namespace dpcurator::client
