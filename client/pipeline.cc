#include "client/pipeline.h"

#include <cstdio>
#include <fstream>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/autogan_model.h"
#include "client/methods/registry.h"
#include "client/model_package.h"
#include "client/sinkhorn_model.h"
#include "core/data/arff.h"
#include "core/data/csv.h"
#include "core/data/encoder.h"
#include "core/embed/charfn.h"
#include "core/embed/labelled_embedding.h"
#include "core/embed/rff.h"
#include "core/privacy/noise_source.h"
#include "core/release/charfn_embedding.h"
#include "core/release/rff_embedding.h"
#include "core/train/image_generator.h"
#include "core/train/pearl_trainer.h"
#include "core/util/public_rng.h"
#include "core/util/shard_pool.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"

namespace dpcurator::client {
namespace {

absl::StatusOr<v1::UploadRowsResponse> FinishUpload(
    std::unique_ptr<grpc::ClientWriter<v1::UploadRowsRequest>>& writer,
    v1::UploadRowsResponse& response, int64_t rows_sent) {
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return RpcError(status, "upload refused");
  // A message the server cannot decode ends its stream like a normal end
  // (gRPC's sync API cannot tell them apart), so the count is the only
  // witness of a cut-short upload.
  if (response.rows_accepted() != rows_sent) {
    return absl::DataLossError(absl::StrCat(
        "the server stored ", response.rows_accepted(), " of the ", rows_sent,
        " rows sent (the stream was cut short); check the rows after the last stored one "
        "and upload them again"));
  }
  return response;
}

}  // namespace

std::string NewIdempotencyKey() {
  return absl::StrFormat("key_%016x%016x", privacy::SecureRandomU64(), privacy::SecureRandomU64());
}

absl::StatusOr<v1::UploadRowsResponse> UploadTable(Connection& connection,
                                                   const std::string& dataset_id,
                                                   const data::Schema& schema,
                                                   const data::Table& table,
                                                   int rows_per_message) {
  auto context = connection.NewContext();
  v1::UploadRowsResponse response;
  auto writer = connection.datasets().UploadRows(context.get(), &response);
  v1::UploadRowsRequest message;
  message.set_dataset_id(dataset_id);
  for (int64_t i = 0; i < table.num_rows(); ++i) {
    auto* row = message.add_rows();
    for (int c = 0; c < schema.num_columns(); ++c) {
      row->add_cells(schema.FormatCell(c, table.cells(i, c)));
    }
    if (message.rows_size() == rows_per_message || i + 1 == table.num_rows()) {
      if (!writer->Write(message)) break;  // the server ended the stream: Finish says why
      message.Clear();
    }
  }
  return FinishUpload(writer, response, table.num_rows());
}

absl::Status CiteUploadLine(const absl::Status& status, const std::string& path,
                            const std::vector<int64_t>& row_lines, int rows_per_message) {
  const absl::string_view text = status.message();
  constexpr absl::string_view kMarker = "upload message ";
  const size_t at = text.find(kMarker);
  if (at == absl::string_view::npos) return status;
  long long message_index = -1;
  long long row_index = -1;
  const std::string tail(text.substr(at + kMarker.size()));
  if (std::sscanf(tail.c_str(), "%lld, row %lld", &message_index, &row_index) != 2 ||
      message_index < 0 || row_index < 0 || row_index >= rows_per_message) {
    return status;
  }
  const long long global = message_index * rows_per_message + row_index;
  if (global >= static_cast<long long>(row_lines.size())) return status;
  return absl::Status(status.code(),
                      absl::StrCat(path, ":", row_lines[global], ": ", status.message()));
}

namespace {

// One record and its 1-based line; false at the end of the file.
using RecordSource = std::function<absl::StatusOr<bool>(std::vector<std::string>*, int64_t*)>;

// Streams records whose fields are named by `header` (matched to the schema
// by name). Every row is checked on this side first (the server checks
// again), so a bad cell is reported as path:line before anything after it is
// sent; a refusal by the server is mapped back to its line too.
absl::StatusOr<v1::UploadRowsResponse> UploadRecords(Connection& connection,
                                                     const std::string& dataset_id,
                                                     const data::Schema& schema,
                                                     const std::string& path,
                                                     const std::vector<std::string>& header,
                                                     const RecordSource& next,
                                                     int rows_per_message) {
  auto mapping = data::MapHeader(schema, header);
  if (!mapping.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":1: ", mapping.status().message()));
  }
  auto context = connection.NewContext();
  v1::UploadRowsResponse response;
  auto writer = connection.datasets().UploadRows(context.get(), &response);
  v1::UploadRowsRequest message;
  message.set_dataset_id(dataset_id);
  std::vector<int64_t> row_lines;
  std::vector<std::string> fields;
  // Ends the stream after a local error: what was sent is stored (or the
  // server's refusal says why not).
  auto abort = [&](const std::string& error) -> absl::Status {
    if (message.rows_size() > 0) writer->Write(message);
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (!status.ok()) {
      return CiteUploadLine(RpcError(status, "upload refused"), path, row_lines,
                            rows_per_message);
    }
    const int64_t stored = response.rows_accepted();
    return absl::InvalidArgumentError(absl::StrCat(
        error, " (", stored, stored == 1 ? " row before it is" : " rows before it are",
        " stored; fix the line and upload the rows from it on, e.g. in a file with the same "
        "header)"));
  };
  int64_t rows_sent = 0;
  while (true) {
    int64_t line = 0;
    auto more = next(&fields, &line);
    if (!more.ok()) return abort(std::string(more.status().message()));
    if (*more) {
      if (fields.size() != header.size()) {
        return abort(absl::StrCat(path, ":", line, ": row has ", fields.size(),
                                  " fields, the header has ", header.size(),
                                  "; quote fields that contain the delimiter"));
      }
      auto* row = message.add_rows();
      for (int c = 0; c < schema.num_columns(); ++c) {
        const std::string& cell = fields[(*mapping)[c]];
        if (auto parsed = schema.ParseCell(c, cell); !parsed.ok()) {
          message.mutable_rows()->RemoveLast();
          return abort(absl::StrCat(path, ":", line, ": ", parsed.status().message()));
        }
        row->add_cells(cell);
      }
      row_lines.push_back(line);
      ++rows_sent;
    }
    if ((message.rows_size() == rows_per_message || !*more) && message.rows_size() > 0) {
      if (!writer->Write(message)) break;  // the server ended the stream: Finish says why
      message.Clear();
    }
    if (!*more) break;
  }
  auto finished = FinishUpload(writer, response, rows_sent);
  if (!finished.ok()) return CiteUploadLine(finished.status(), path, row_lines, rows_per_message);
  return finished;
}

}  // namespace

absl::StatusOr<v1::UploadRowsResponse> UploadCsv(Connection& connection,
                                                 const std::string& dataset_id,
                                                 const data::Schema& schema,
                                                 const std::string& csv_path,
                                                 int rows_per_message) {
  std::ifstream input(csv_path);
  if (!input) return absl::NotFoundError(absl::StrCat("cannot open '", csv_path, "'"));
  data::CsvRecordReader reader(&input, {});
  std::vector<std::string> header;
  auto has_header = reader.Next(&header);
  if (!has_header.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(csv_path, ": ", has_header.status().message()));
  }
  if (!*has_header) return absl::InvalidArgumentError(absl::StrCat(csv_path, ": empty file"));
  return UploadRecords(
      connection, dataset_id, schema, csv_path, header,
      [&](std::vector<std::string>* fields, int64_t* line) -> absl::StatusOr<bool> {
        auto more = reader.Next(fields);
        if (!more.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(csv_path, ": ", more.status().message()));
        }
        *line = reader.line_number();
        return *more;
      },
      rows_per_message);
}

absl::StatusOr<v1::UploadRowsResponse> UploadArff(Connection& connection,
                                                  const std::string& dataset_id,
                                                  const data::Schema& schema,
                                                  const std::string& arff_path,
                                                  int rows_per_message) {
  std::ifstream input(arff_path);
  if (!input) return absl::NotFoundError(absl::StrCat("cannot open '", arff_path, "'"));
  data::ArffReader reader(&input, arff_path);
  DPC_ASSIGN_OR_RETURN(data::ArffHeader arff, reader.ReadHeader());
  std::vector<std::string> header;
  for (const auto& attribute : arff.attributes) header.push_back(attribute.name);
  return UploadRecords(
      connection, dataset_id, schema, arff_path, header,
      [&](std::vector<std::string>* fields, int64_t* line) -> absl::StatusOr<bool> {
        auto more = reader.Next(fields);
        *line = reader.line_number();
        return more;
      },
      rows_per_message);
}

namespace {

// What every trainer needs from an embedding artefact: the schema, its
// layout, and the post-processed target.
struct LoadedArtefact {
  data::Schema schema;
  data::FeatureLayout layout;
  embed::EmbeddingTarget target;
};

absl::StatusOr<LoadedArtefact> LoadArtefact(const v1::Release& release, v1::ReleaseKind kind,
                                            int feature_dim) {
  if (!release.has_embedding()) {
    return absl::InvalidArgumentError("this artefact holds no embedding; fetch the release again");
  }
  DPC_ASSIGN_OR_RETURN(const v1::ReleaseKind released, ArtefactKind(release.embedding()));
  if (released != kind) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this artefact is a ", ReleaseKindName(released), " release, not ", ReleaseKindName(kind),
        ": use `train merf` for rff_embedding releases and `train pearl` for charfn_embedding"));
  }
  const v1::EmbeddingArtefact& artefact = release.embedding();
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(artefact.schema()));
  if (schema.FingerprintHex() != artefact.schema_fingerprint()) {
    return absl::DataLossError("artefact schema does not match its fingerprint");
  }
  const int classes = artefact.num_classes();
  if (feature_dim != artefact.feature_dim() ||
      artefact.class_values_size() != artefact.feature_dim() * classes ||
      artefact.class_totals_size() != classes || classes != schema.num_classes()) {
    return absl::DataLossError("artefact dimensions are inconsistent; fetch it again");
  }
  embed::NoisyLabelledEmbedding noisy;
  noisy.relation = RelationFromProto(artefact.relation());
  noisy.class_values = Eigen::Map<const Eigen::MatrixXd>(artefact.class_values().data(),
                                                         artefact.feature_dim(), classes);
  noisy.class_totals = Eigen::Map<const Eigen::VectorXd>(artefact.class_totals().data(), classes);
  noisy.public_n = artefact.public_n();
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  return LoadedArtefact{std::move(schema), layout, embed::ToEmbeddingTarget(noisy)};
}

// A trained tabular generator packaged with the release it was fitted to.
v1::GeneratorModel PackageReleaseModel(const v1::Release& release, const std::string& method,
                                       const train::TrainedGenerator& trained) {
  const v1::EmbeddingArtefact& artefact = release.embedding();
  const auto& generator_options = trained.generator.options();
  const ModelSource source{artefact.schema(), artefact.schema_fingerprint(), artefact.epsilon(),
                           artefact.delta()};
  v1::GeneratorModel model =
      PackageModel(method, source, generator_options.hidden, generator_options.activation,
                   trained.generator.parameters(), trained.steps, trained.final_loss);
  model.set_release_id(release.id());
  model.set_dataset_id(release.dataset_id());
  model.set_noise_dim(generator_options.noise_dim);
  model.set_layer_norm(generator_options.layer_norm);
  model.set_num_classes(static_cast<int>(trained.class_weights.size()));
  model.mutable_class_weights()->Assign(trained.class_weights.data(),
                                        trained.class_weights.data() + trained.class_weights.size());
  return model;
}

// A trained image generator packaged with the release it was fitted to.
v1::GeneratorModel PackageImageModel(const v1::Release& release, const std::string& method,
                                     const train::TrainedImageGenerator& trained) {
  const v1::EmbeddingArtefact& artefact = release.embedding();
  const ModelSource source{artefact.schema(), artefact.schema_fingerprint(), artefact.epsilon(),
                           artefact.delta()};
  const Eigen::VectorXd parameters = trained.generator.parameters().cast<double>();
  v1::GeneratorModel model = PackageModel(method, source, {}, nn::Activation::kRelu, parameters,
                                          trained.steps, trained.final_loss);
  model.clear_activation();
  model.set_release_id(release.id());
  model.set_dataset_id(release.dataset_id());
  const train::ImageGeneratorOptions& options = trained.generator.options();
  model.set_image_architecture(train::ImageGeneratorArchitectureName(options.architecture));
  model.set_code_dim(options.code_dim);
  model.set_num_classes(options.num_classes);
  const Eigen::VectorXf& running = trained.generator.running_statistics();
  for (float value : running) model.add_running_statistics(value);
  return model;
}

// Sets the image generator's shape from an image schema: one grey image
// column and the label's classes (the architecture and code width stay the
// caller's).
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

}  // namespace

bool IsImageSchema(const v1::TableSchema& schema) {
  for (const v1::ColumnSchema& column : schema.columns()) {
    if (column.type() == v1::ColumnSchema::IMAGE) return true;
  }
  return false;
}

absl::StatusOr<v1::GeneratorModel> TrainImageMerfModel(const v1::Release& release,
                                                       const train::ImageTrainerOptions& options) {
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(release.embedding().schema()));
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  DPC_ASSIGN_OR_RETURN(auto feature_map, release::RffEmbeddingKind::FeatureMap(
                                              layout, RffOptionsFromProto(release.embedding())));
  DPC_ASSIGN_OR_RETURN(LoadedArtefact loaded,
                       LoadArtefact(release, v1::RFF_EMBEDDING, feature_map.output_dim()));
  train::ImageTrainerOptions shaped = options;
  DPC_RETURN_IF_ERROR(ShapeImageGenerator(loaded.schema, &shaped.generator));
  DPC_ASSIGN_OR_RETURN(train::TrainedImageGenerator trained,
                       train::TrainImageMerf(loaded.layout, feature_map, loaded.target, shaped));
  return PackageImageModel(release, "merf", trained);
}

absl::StatusOr<v1::GeneratorModel> TrainImagePearlModel(const v1::Release& release,
                                                        const train::ImagePearlOptions& options) {
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(release.embedding().schema()));
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  DPC_ASSIGN_OR_RETURN(auto feature_map, release::CharfnEmbeddingKind::FeatureMap(
                                              layout, CharfnOptionsFromProto(release.embedding())));
  DPC_ASSIGN_OR_RETURN(LoadedArtefact loaded,
                       LoadArtefact(release, v1::CHARFN_EMBEDDING, feature_map.output_dim()));
  train::ImagePearlOptions shaped = options;
  DPC_RETURN_IF_ERROR(ShapeImageGenerator(loaded.schema, &shaped.generator));
  DPC_ASSIGN_OR_RETURN(train::TrainedImageGenerator trained,
                       train::TrainImagePearl(loaded.layout, feature_map, loaded.target, shaped));
  return PackageImageModel(release, "pearl", trained);
}

namespace {

// The artefacts of a session-steps file, read one at a time by index.
class SessionStepsFile {
 public:
  static absl::StatusOr<SessionStepsFile> Open(const std::string& path) {
    SessionStepsFile file;
    file.path_ = path;
    file.input_.open(path, std::ios::binary);
    if (!file.input_) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
    // Index the records: [uint64 size][size bytes], to the end of the file.
    while (true) {
      uint64_t size = 0;
      const std::streamoff at = file.input_.tellg();
      if (!file.input_.read(reinterpret_cast<char*>(&size), sizeof(size))) break;
      if (size == 0 || size > (uint64_t{1} << 30)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "'", path, "' is not a session-steps file (record ", file.offsets_.size(),
            " has a bad length); write it with `dpcurator session step --out FILE`"));
      }
      file.input_.seekg(static_cast<std::streamoff>(size), std::ios::cur);
      if (!file.input_) {
        return absl::InvalidArgumentError(absl::StrCat("'", path, "' ends inside record ",
                                                       file.offsets_.size(),
                                                       "; fetch the steps again"));
      }
      file.offsets_.push_back(at);
      file.sizes_.push_back(size);
    }
    if (file.offsets_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "' holds no session steps"));
    }
    file.input_.clear();
    return file;
  }

  int64_t size() const { return static_cast<int64_t>(offsets_.size()); }

  absl::StatusOr<v1::Release> Read(int64_t index) {
    std::string bytes(sizes_[index], '\0');
    input_.seekg(offsets_[index] + static_cast<std::streamoff>(sizeof(uint64_t)));
    v1::Release release;
    if (!input_.read(bytes.data(), static_cast<std::streamsize>(bytes.size())) ||
        !release.mutable_embedding()->ParseFromString(bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", path_, "': record ", index, " is not an embedding artefact"));
    }
    return release;
  }

 private:
  std::string path_;
  std::ifstream input_;
  std::vector<std::streamoff> offsets_;
  std::vector<uint64_t> sizes_;
};

}  // namespace

absl::StatusOr<int64_t> CountSessionSteps(const std::string& steps_path) {
  DPC_ASSIGN_OR_RETURN(SessionStepsFile file, SessionStepsFile::Open(steps_path));
  return file.size();
}

absl::StatusOr<v1::GeneratorModel> TrainImageMerfFromSessionSteps(
    const std::string& steps_path, const train::ImageTrainerOptions& options) {
  DPC_ASSIGN_OR_RETURN(SessionStepsFile file, SessionStepsFile::Open(steps_path));
  DPC_ASSIGN_OR_RETURN(v1::Release first, file.Read(0));
  if (!IsImageSchema(first.embedding().schema())) {
    return absl::InvalidArgumentError(
        "--session-steps trains image generators; this session is over a table (train on a "
        "one-shot release with --release)");
  }
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(first.embedding().schema()));
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  const embed::RffOptions released = RffOptionsFromProto(first.embedding());
  DPC_ASSIGN_OR_RETURN(auto feature_map, release::RffEmbeddingKind::FeatureMap(layout, released));
  train::ImageTrainerOptions shaped = options;
  DPC_RETURN_IF_ERROR(ShapeImageGenerator(schema, &shaped.generator));
  const std::string fingerprint = first.embedding().schema_fingerprint();
  const train::StepTarget step_target =
      [&](int step) -> absl::StatusOr<embed::EmbeddingTarget> {
    const int64_t index = (step - 1) % file.size();
    DPC_ASSIGN_OR_RETURN(v1::Release release, file.Read(index));
    const embed::RffOptions map = RffOptionsFromProto(release.embedding());
    if (release.embedding().schema_fingerprint() != fingerprint || map.seed != released.seed ||
        map.num_frequencies != released.num_frequencies ||
        map.length_scale != released.length_scale ||
        map.numeric_weight != released.numeric_weight) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", steps_path, "': record ", index,
          " comes from another session's feature map; keep one session per file"));
    }
    DPC_ASSIGN_OR_RETURN(LoadedArtefact loaded,
                         LoadArtefact(release, v1::RFF_EMBEDDING, feature_map.output_dim()));
    return std::move(loaded.target);
  };
  DPC_ASSIGN_OR_RETURN(train::TrainedImageGenerator trained,
                       train::TrainImageMerfPerStep(layout, feature_map, step_target, shaped));
  // No one release: the model's privacy is its session's (all its steps
  // together, `dpcurator session get`), which a step artefact does not
  // carry, so the model records no release and no epsilon of its own.
  first.clear_id();
  first.mutable_embedding()->set_epsilon(0);
  return PackageImageModel(first, "merf", trained);
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
  DPC_ASSIGN_OR_RETURN(options.architecture,
                       train::ParseImageGeneratorArchitecture(model.image_architecture()));
  options.code_dim = model.code_dim();
  if (options.num_classes != model.num_classes()) {
    return absl::DataLossError("model class count does not match its schema; retrain it");
  }
  if (only_class >= options.num_classes) {
    return absl::InvalidArgumentError(absl::StrCat("--class must be below the model's ",
                                                   options.num_classes, " classes"));
  }
  const Eigen::VectorXf parameters =
      Eigen::Map<const Eigen::VectorXd>(model.parameters().data(), model.parameters_size())
          .cast<float>();
  const Eigen::VectorXf running = Eigen::Map<const Eigen::VectorXd>(
                                      model.running_statistics().data(),
                                      model.running_statistics_size())
                                      .cast<float>();
  DPC_ASSIGN_OR_RETURN(train::ImageGenerator generator,
                       train::ImageGenerator::FromParameters(options, parameters, running));
  Eigen::VectorXi labels(num_images);
  for (int64_t i = 0; i < num_images; ++i) {
    labels(i) = only_class >= 0 ? only_class : static_cast<int>(i % options.num_classes);
  }
  PublicRng rng(seed);
  ShardPool pool(0);
  const Eigen::MatrixXf images = generator.Sample(labels, &rng, &pool);
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

absl::StatusOr<v1::GeneratorModel> TrainMerfModel(const v1::Release& release,
                                                  const train::EmbeddingTrainerOptions& options) {
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(release.embedding().schema()));
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  DPC_ASSIGN_OR_RETURN(auto feature_map, release::RffEmbeddingKind::FeatureMap(
                                              layout, RffOptionsFromProto(release.embedding())));
  DPC_ASSIGN_OR_RETURN(LoadedArtefact loaded,
                       LoadArtefact(release, v1::RFF_EMBEDDING, feature_map.output_dim()));
  DPC_ASSIGN_OR_RETURN(train::TrainedGenerator trained,
                       train::TrainEmbeddingGenerator(loaded.layout, feature_map, loaded.target,
                                                      options));
  return PackageReleaseModel(release, "merf", trained);
}

absl::StatusOr<v1::GeneratorModel> TrainPearlModel(const v1::Release& release,
                                                   const train::EmbeddingTrainerOptions& options,
                                                   const PearlOptions& pearl) {
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(release.embedding().schema()));
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  DPC_ASSIGN_OR_RETURN(auto feature_map, release::CharfnEmbeddingKind::FeatureMap(
                                              layout, CharfnOptionsFromProto(release.embedding())));
  DPC_ASSIGN_OR_RETURN(LoadedArtefact loaded,
                       LoadArtefact(release, v1::CHARFN_EMBEDDING, feature_map.output_dim()));
  train::PearlTrainerOptions pearl_options;
  static_cast<train::EmbeddingTrainerOptions&>(pearl_options) = options;
  pearl_options.use_critic = pearl.use_critic;
  pearl_options.critic_learning_rate = pearl.critic_learning_rate;
  pearl_options.generator_steps_per_critic_step = pearl.generator_steps_per_critic_step;
  DPC_ASSIGN_OR_RETURN(train::TrainedPearlGenerator trained,
                       train::TrainPearlGenerator(loaded.layout, feature_map, loaded.target,
                                                  pearl_options));
  return PackageReleaseModel(release, "pearl", trained.trained);
}

absl::StatusOr<data::Table> SampleModel(const v1::GeneratorModel& model, int64_t num_rows,
                                        uint64_t seed) {
  if (model.format_version() != kModelFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model format version ", model.format_version(), " is not supported (expected ",
        kModelFormatVersion, "); retrain with this version of dpcurator"));
  }
  if (num_rows <= 0) return absl::InvalidArgumentError("--rows must be positive");
  // Local-DP reports: a PointGenerator in R^d, decoded under the label-less
  // collection schema (client/sinkhorn_model.h).
  if (model.method() == "sinkhorn") return SampleSinkhornModel(model, num_rows, seed);
  if (model.method() == "autogan") return SampleAutoganModel(model, num_rows, seed);
  // Methods with a unit of their own (client/methods/).
  if (auto method = FindMethod(model.method()); method.ok()) {
    return (*method)->SampleTable(model, num_rows, seed);
  }
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

absl::Status WriteProtoFile(const google::protobuf::Message& message, const std::string& path) {
  // Write to a temporary name and rename, so a crash never leaves half a file.
  const std::string temporary = absl::StrCat(path, ".tmp");
  {
    std::ofstream output(temporary, std::ios::binary | std::ios::trunc);
    if (!output || !message.SerializeToOstream(&output)) {
      return absl::UnavailableError(absl::StrCat("cannot write '", path, "'"));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot move '", temporary, "' to '", path, "'"));
  }
  return absl::OkStatus();
}

absl::Status ReadProtoFile(const std::string& path, google::protobuf::Message* message) {
  std::ifstream input(path, std::ios::binary);
  if (!input) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  if (!message->ParseFromIstream(&input)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a ",
                                                   message->GetDescriptor()->name(), " file"));
  }
  return absl::OkStatus();
}

std::string FormatEvalReport(const eval::EvalReport& report) {
  std::string out;
  absl::StrAppend(&out, absl::StrFormat("%-22s %-10s %8s %8s %9s %9s %8s\n", "classifier",
                                        "trained on", "rows", "ROC-AUC", "PR-AUC", "accuracy",
                                        "fit s"));
  for (const auto& row : report.utility) {
    absl::StrAppend(&out, absl::StrFormat("%-22s %-10s %8d %8.4f %9.4f %9.4f %8.2f%s\n",
                                          row.classifier, row.train_source, row.train_rows,
                                          row.roc_auc, row.pr_auc, row.accuracy, row.fit_seconds,
                                          row.single_class_training ? "  (single class!)" : ""));
  }
  if (report.fidelity.has_value()) {
    const auto& f = *report.fidelity;
    absl::StrAppend(&out, absl::StrFormat(
                              "marginals (synthetic vs real test): mean TV %.4f, max TV %.4f "
                              "(%s); pairwise correlation |diff| %.4f\n",
                              f.mean_tv_distance, f.max_tv_distance, f.max_tv_column,
                              f.correlation_mean_abs_difference));
  }
  if (report.real_train_fidelity.has_value()) {
    const auto& f = *report.real_train_fidelity;
    absl::StrAppend(&out, absl::StrFormat(
                              "reference (real train vs real test): mean TV %.4f, max TV %.4f; "
                              "correlation |diff| %.4f\n",
                              f.mean_tv_distance, f.max_tv_distance,
                              f.correlation_mean_abs_difference));
  }
  for (const auto& warning : report.warnings) absl::StrAppend(&out, "warning: ", warning, "\n");
  return out;
}

}  // namespace dpcurator::client
