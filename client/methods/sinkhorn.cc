// The Sinkhorn unit (ldp-sinkhorn.md): `train sinkhorn` fits a
// LdpPointGenerator to downloaded local-DP reports (core/train/sinkhorn_trainer.h,
// with p and lambda from the collection's public mechanism); `sample`
// decodes its points into rows (or images) of the collection's label-less
// schema.
#include "client/methods/sinkhorn.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/methods/generator_model.h"
#include "client/proto_file.h"
#include "client/progress.h"
#include "core/data/idx.h"
#include "core/data/png_folder.h"
#include "client/model_package.h"
#include "core/data/encoder.h"
#include "core/nn/activation.h"
#include "core/util/public_rng.h"
#include "core/util/status_macros.h"
#include "proto/collection.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

constexpr absl::string_view kSinkhornName = "sinkhorn";

}  // namespace

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
  const train::LdpPointGeneratorOptions& g = trained.generator.options();
  const ModelSource source{SchemaToProto(label_free), label_free.FingerprintHex(),
                           mechanism.epsilon(), mechanism.delta()};
  v1::GeneratorModel model = PackageModel(kSinkhornName, source, g.hidden, g.activation,
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
  train::LdpPointGeneratorOptions options;
  options.latent_dim = model.latent_dim();
  options.hidden.assign(model.hidden().begin(), model.hidden().end());
  options.output_low = model.output_low();
  options.output_high = model.output_high();
  DPC_ASSIGN_OR_RETURN(options.activation, nn::ParseActivation(model.activation()));
  Eigen::VectorXd parameters =
      Eigen::Map<const Eigen::VectorXd>(model.parameters().data(), model.parameters_size());
  DPC_ASSIGN_OR_RETURN(auto generator,
                       train::LdpPointGenerator::FromParameters(model.output_dim(), options,
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

namespace {

absl::StatusOr<TrainResult> RunTrainSinkhorn(const ParsedArgs& args) {
  v1::ReportsFile reports;
  if (auto s = ReadProtoFile(args.Get("reports"), &reports); !s.ok()) return s;
  train::SinkhornTrainerOptions options;
  auto steps = args.GetInt("steps");
  auto batch = args.GetInt("batch-size");
  auto lr = args.GetDouble("learning-rate");
  auto seed = args.GetInt("seed");
  for (const absl::Status& s : {steps.status(), batch.status(), lr.status(), seed.status()}) {
    if (!s.ok()) return s;
  }
  options.steps = static_cast<int>(*steps);
  options.batch_size = static_cast<int>(*batch);
  options.learning_rate = *lr;
  options.seed = static_cast<uint64_t>(*seed);
  options.generator.seed = static_cast<uint64_t>(*seed);
  options.naive = args.Flag("naive");
  if (IsImageSchema(reports.collection().params().schema())) {
    // Images, where a flag is left out: minibatches of b = 200 (the LDP
    // paper's MNIST Sec. 4.5) and bench/fmnist_ldp's tuned generator on
    // Fashion-MNIST at epsilon 30: an MLP of 2 x 128 units (the paper's
    // 2 x 500 fitted no better), 500 steps per class collection.
    options.generator.hidden = {128, 128};
    if (args.IsDefault("batch-size")) options.batch_size = 200;
    if (args.IsDefault("steps")) options.steps = 500;
  }
  StepProgress progress("train sinkhorn", options.steps, args.Flag("quiet"));
  options.progress = progress.Callback();
  auto model = TrainSinkhornModel(reports, options, kModelFormatVersion);
  if (!model.ok()) return model.status();
  TrainResult result;
  result.message = absl::StrFormat("%s generator (%s, %d steps, final loss %.6f) written to %s\n",
                                   kSinkhornName, options.naive ? "naive baseline" : "deconvolving",
                                   model->steps(), model->final_loss(), args.Get("out"));
  result.model = *std::move(model);
  return result;
}

// A local-DP image model (one collection: one class, or unlabelled): a PNG
// grid of its images, 10 a row, and/or an IDX pair labelled --label.
absl::Status WriteSinkhornImages(const ParsedArgs& args, const v1::GeneratorModel& model,
                                     int64_t rows, uint64_t seed) {
  auto label = args.GetInt("label");
  if (!label.ok()) return label.status();
  if (*label < 0 || *label > 255) return absl::InvalidArgumentError("--label must be 0 to 255");
  auto per_class = args.GetInt("grid-per-class");
  if (!per_class.ok()) return per_class.status();
  const int64_t grid = args.Has("png") ? 10 * *per_class : 0;
  auto table = SampleSinkhornModel(model, std::max(rows, grid), seed);
  if (!table.ok()) return table.status();
  auto schema = SchemaFromProto(model.schema());
  if (!schema.ok()) return schema.status();
  const data::Column& column = schema->column(*schema->image_index());
  data::ImageSet images;
  images.height = column.image_height;
  images.width = column.image_width;
  images.num_classes = static_cast<int>(*label) + 1;
  images.pixels.reserve(table->pixels.size());
  for (uint8_t level : table->pixels) images.pixels.push_back(static_cast<float>(level) / 255.0f);
  images.labels.assign(static_cast<size_t>(table->num_rows()), static_cast<int>(*label));
  if (args.Has("png")) {
    const std::vector<float> first(
        images.pixels.begin(),
        images.pixels.begin() + static_cast<std::ptrdiff_t>(grid * images.pixels_per_image()));
    if (auto s = data::WritePngGrid(args.Get("png"), first, static_cast<int>(images.height),
                                    static_cast<int>(images.width), 10);
        !s.ok()) {
      return s;
    }
    std::printf("%lld images written to %s (10 a row)\n", static_cast<long long>(grid),
                args.Get("png").c_str());
  }
  if (args.Has("idx")) {
    images.pixels.resize(static_cast<size_t>(rows * images.pixels_per_image()));
    images.labels.resize(static_cast<size_t>(rows));
    const std::string prefix = args.Get("idx");
    const std::string images_path = absl::StrCat(prefix, "-images-idx3-ubyte");
    const std::string labels_path = absl::StrCat(prefix, "-labels-idx1-ubyte");
    if (auto s = data::WriteIdxImages(images_path, labels_path, images); !s.ok()) return s;
    std::printf("%lld synthetic images (label %lld) written to %s and %s\n",
                static_cast<long long>(rows), static_cast<long long>(*label),
                images_path.c_str(), labels_path.c_str());
  }
  return absl::OkStatus();
}

class SinkhornUnit final : public Method {
 public:
  MethodId id() const override { return MethodId::kSinkhorn; }
  absl::string_view name() const override { return kSinkhornName; }
  absl::string_view title() const override { return "Sinkhorn (local DP)"; }

  std::string TrainSummary() const override {
    return "fit a generator to local-DP reports (no budget, post-processing)";
  }
  std::string TrainDescription() const override {
    return "Algorithm 1 of Reshetova et al.: entropic OT with the mechanism's cost and lambda\n"
           "deconvolves the device noise; --naive fits the noisy reports instead (baseline).";
  }
  std::vector<OptionSpec> TrainOptions() const override {
    return {{"reports", "reports.pb", "reports file from `collections download`"},
            {"out", "model.pb", "output model"},
            {"steps", "2000", "training steps"},
            {"batch-size", "512", "generated points and reports per step"},
            {"learning-rate", "0.001", "Adam learning rate"},
            {"seed", "1", "training seed"},
            {"naive", "", "no deconvolution (unregularised OT baseline)", true},
            {"quiet", "", "no progress line", true}};
  }
  absl::StatusOr<TrainResult> Train(const ParsedArgs& args) const override {
    return RunTrainSinkhorn(args);
  }

  // It fits reports that devices privatised (a collection), not a
  // curator's dataset: the demo's pipeline has no place for it.
  bool RunsInDemo() const override { return false; }

  absl::StatusOr<data::Table> SampleTable(const v1::GeneratorModel& model, int64_t num_rows,
                                          uint64_t seed) const override {
    return SampleSinkhornModel(model, num_rows, seed);
  }
  absl::Status SampleImages(const ParsedArgs& args, const v1::GeneratorModel& model,
                            int64_t num_images, uint64_t seed) const override {
    return WriteSinkhornImages(args, model, num_images, seed);
  }
};

}  // namespace

const Method& SinkhornMethod() {
  static const SinkhornUnit* const unit = new SinkhornUnit();
  return *unit;
}

}  // namespace dpcurator::client
