#include "client/methods/generator_model.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "client/model_package.h"
#include "core/data/encoder.h"
#include "core/data/idx.h"
#include "core/data/png_folder.h"
#include "core/nn/activation.h"
#include "core/train/tabular_generator.h"
#include "core/util/public_rng.h"
#include "core/util/shard_pool.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"

namespace dpcurator::client {

bool IsImageSchema(const v1::TableSchema& schema) {
  for (const v1::ColumnSchema& column : schema.columns()) {
    if (column.type() == v1::ColumnSchema::IMAGE) return true;
  }
  return false;
}

absl::Status ShapeImageGenerator(const data::Schema& schema,
                                 train::ImageGeneratorOptions* options) {
  if (!schema.image_index().has_value()) {
    return absl::InvalidArgumentError("this schema has no image column");
  }
  const data::Column& image = schema.column(*schema.image_index());
  options->height = image.image_height;
  options->width = image.image_width;
  options->num_classes = schema.num_classes();
  return absl::OkStatus();
}


absl::StatusOr<data::ImageSet> SampleImageModel(const v1::GeneratorModel& model,
                                                int64_t num_images, uint64_t seed,
                                                int only_class) {
  if (model.format_version() != kModelFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model format version ", model.format_version(), " is not supported (expected ",
        kModelFormatVersion, "); retrain with this version of dpcurator"));
  }
  if (num_images <= 0) return absl::InvalidArgumentError("--rows must be positive");
  if (model.image_architecture().empty()) {
    return absl::InvalidArgumentError("this model samples table rows, not images; omit --png/--idx");
  }
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(model.schema()));
  train::ImageGeneratorOptions options;
  DPC_RETURN_IF_ERROR(ShapeImageGenerator(schema, &options));
  if (options.num_classes != model.num_classes()) {
    return absl::DataLossError("model class count does not match its schema; retrain it");
  }
  if (only_class >= options.num_classes) {
    return absl::InvalidArgumentError(absl::StrCat("--class must be below the model's ",
                                                   options.num_classes, " classes"));
  }
  // A generator of `source` (the model, or one class's generator of a
  // parallel model, which has one class).
  auto generator_of = [&options](const v1::GeneratorModel& source,
                                 int num_classes) -> absl::StatusOr<train::ImageGenerator> {
    train::ImageGeneratorOptions shaped = options;
    shaped.num_classes = num_classes;
    DPC_ASSIGN_OR_RETURN(shaped.architecture,
                         train::ParseImageGeneratorArchitecture(source.image_architecture()));
    shaped.code_dim = source.code_dim();
    const Eigen::VectorXf parameters =
        Eigen::Map<const Eigen::VectorXd>(source.parameters().data(), source.parameters_size())
            .cast<float>();
    const Eigen::VectorXf running = Eigen::Map<const Eigen::VectorXd>(
                                        source.running_statistics().data(),
                                        source.running_statistics_size())
                                        .cast<float>();
    return train::ImageGenerator::FromParameters(shaped, parameters, running);
  };
  Eigen::VectorXi labels(num_images);
  for (int64_t i = 0; i < num_images; ++i) {
    labels(i) = only_class >= 0 ? only_class : static_cast<int>(i % options.num_classes);
  }
  PublicRng rng(seed);
  ShardPool pool(0);
  Eigen::MatrixXf images;
  if (model.class_generators_size() == 0) {
    DPC_ASSIGN_OR_RETURN(train::ImageGenerator generator,
                         generator_of(model, options.num_classes));
    images = generator.Sample(labels, &rng, &pool);
  } else {
    // The parallel variant: each label's images from its class's own
    // (unconditional) generator.
    if (model.class_generators_size() != options.num_classes) {
      return absl::DataLossError("model has a generator count other than its class count; "
                                 "retrain it");
    }
    images.resize(num_images, static_cast<Eigen::Index>(options.height) * options.width);
    for (int c = 0; c < options.num_classes; ++c) {
      std::vector<Eigen::Index> rows;
      for (Eigen::Index i = 0; i < labels.size(); ++i) {
        if (labels(i) == c) rows.push_back(i);
      }
      if (rows.empty()) continue;
      DPC_ASSIGN_OR_RETURN(train::ImageGenerator generator,
                           generator_of(model.class_generators(c), 1));
      const Eigen::MatrixXf drawn = generator.Sample(
          Eigen::VectorXi::Zero(static_cast<Eigen::Index>(rows.size())), &rng, &pool);
      for (size_t r = 0; r < rows.size(); ++r) {
        images.row(rows[r]) = drawn.row(static_cast<Eigen::Index>(r));
      }
    }
  }
  data::ImageSet set;
  set.height = options.height;
  set.width = options.width;
  set.num_classes = options.num_classes;
  // Row-major images: the sample matrix is column-major, one image a row.
  set.pixels.resize(static_cast<size_t>(images.size()));
  Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      set.pixels.data(), images.rows(), images.cols()) = images;
  set.labels.assign(labels.data(), labels.data() + labels.size());
  if (schema.label_index().has_value()) {
    set.class_names = schema.column(*schema.label_index()).categories;
  }
  return set;
}

absl::StatusOr<data::Table> SampleTabularGenerator(const v1::GeneratorModel& model,
                                                   int64_t num_rows, uint64_t seed) {
  if (num_rows <= 0) return absl::InvalidArgumentError("--rows must be positive");
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(model.schema()));
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  train::GeneratorOptions options;
  options.noise_dim = model.noise_dim();
  options.hidden.assign(model.hidden().begin(), model.hidden().end());
  DPC_ASSIGN_OR_RETURN(options.activation, nn::ParseActivation(model.activation()));
  options.layer_norm = model.layer_norm();
  Eigen::VectorXd parameters =
      Eigen::Map<const Eigen::VectorXd>(model.parameters().data(), model.parameters_size());
  DPC_ASSIGN_OR_RETURN(auto generator,
                       train::TabularGenerator::FromParameters(layout, model.num_classes(),
                                                               options, std::move(parameters)));
  // Labels from the released class weights (DP-MERF's G2: multinomial over
  // the noisy proportions).
  PublicRng rng(seed);
  Eigen::VectorXi labels(num_rows);
  for (int64_t i = 0; i < num_rows; ++i) {
    double u = rng.Uniform();
    int label = model.num_classes() - 1;
    for (int c = 0; c < model.num_classes(); ++c) {
      u -= model.class_weights(c);
      if (u < 0) {
        label = c;
        break;
      }
    }
    labels(i) = label;
  }
  return generator.Sample(schema, labels, &rng);
}

absl::Status WriteImageModelSamples(const ParsedArgs& args, const v1::GeneratorModel& model,
                                    int64_t rows, uint64_t seed) {
  if (args.Has("png")) {
    auto per_class = args.GetInt("grid-per-class");
    if (!per_class.ok()) return per_class.status();
    if (*per_class < 1 || *per_class > 100) {
      return absl::InvalidArgumentError("--grid-per-class must be in [1, 100]");
    }
    std::vector<float> grid;
    int height = 0, width = 0, classes = model.num_classes();
    for (int c = 0; c < classes; ++c) {
      auto images = SampleImageModel(model, *per_class, seed + static_cast<uint64_t>(c), c);
      if (!images.ok()) return images.status();
      grid.insert(grid.end(), images->pixels.begin(), images->pixels.end());
      height = static_cast<int>(images->height);
      width = static_cast<int>(images->width);
    }
    if (auto s = data::WritePngGrid(args.Get("png"), grid, height, width,
                                    static_cast<int>(*per_class));
        !s.ok()) {
      return s;
    }
    std::printf("%d classes x %lld images written to %s (one row per class)\n", classes,
                static_cast<long long>(*per_class), args.Get("png").c_str());
  }
  if (args.Has("idx")) {
    auto images = SampleImageModel(model, rows, seed);
    if (!images.ok()) return images.status();
    const std::string prefix = args.Get("idx");
    const std::string images_path = absl::StrCat(prefix, "-images-idx3-ubyte");
    const std::string labels_path = absl::StrCat(prefix, "-labels-idx1-ubyte");
    if (auto s = data::WriteIdxImages(images_path, labels_path, *images); !s.ok()) return s;
    std::printf("%lld synthetic images written to %s and %s (labels balanced)\n",
                static_cast<long long>(rows), images_path.c_str(), labels_path.c_str());
  }
  return absl::OkStatus();
}

}  // namespace dpcurator::client
