#include "client/methods/embedding_release.h"

#include <chrono>
#include <cstdio>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/model_package.h"
#include "client/proto_file.h"
#include "client/progress.h"
#include "core/train/image_generator.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"

namespace dpcurator::client {
namespace {

absl::StatusOr<std::vector<int>> ParseHidden(const std::string& text) {
  std::vector<int> hidden;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int width;
    if (!absl::SimpleAtoi(part, &width) || width <= 0 || width > 8192) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hidden expects comma-separated layer widths, got '", text, "'"));
    }
    hidden.push_back(width);
  }
  return hidden;
}

}  // namespace

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

v1::GeneratorModel PackageReleaseModel(const v1::Release& release, absl::string_view method,
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
v1::GeneratorModel PackageImageModel(const v1::Release& release, absl::string_view method,
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

absl::StatusOr<train::EmbeddingTrainerOptions> TrainerOptionsFromArgs(const ParsedArgs& args) {
  train::EmbeddingTrainerOptions options;
  auto steps = args.GetInt("steps");
  auto batch = args.GetInt("batch-size");
  auto lr = args.GetDouble("learning-rate");
  auto seed = args.GetInt("seed");
  auto noise_dim = args.GetInt("noise-dim");
  auto hidden = ParseHidden(args.Get("hidden"));
  for (const absl::Status& s : {steps.status(), batch.status(), lr.status(), seed.status(),
                                noise_dim.status(), hidden.status()}) {
    if (!s.ok()) return s;
  }
  options.steps = static_cast<int>(*steps);
  options.batch_size = static_cast<int>(*batch);
  options.learning_rate = *lr;
  options.seed = static_cast<uint64_t>(*seed);
  options.generator.noise_dim = static_cast<int>(*noise_dim);
  options.generator.hidden = *hidden;
  return options;
}

std::vector<OptionSpec> TrainerOptionSpecs() {
  return {{"steps", "1000", "generator updates"},
          {"batch-size", "1024", "generated rows per update"},
          {"learning-rate", "0.002", "Adam learning rate (decays linearly to a tenth)"},
          {"hidden", "128,128", "generator hidden layer widths"},
          {"noise-dim", "16", "generator latent dimension"},
          {"seed", "1", "seed of the generator's public randomness"},
          {"generator", "",
           "image releases: generator, fc or conv (PEARL's ConvCondGen); default fc for "
           "DP-MERF, conv for PEARL"},
          {"quiet", "", "no progress line", true}};
}

absl::StatusOr<train::ImagePearlOptions> ImageTrainerOptionsFromArgs(
    const ParsedArgs& args, const ImageTrainDefaults& defaults, std::string* generator) {
  train::ImagePearlOptions options;
  auto steps = args.GetInt("steps");
  auto batch = args.GetInt("batch-size");
  auto lr = args.GetDouble("learning-rate");
  auto seed = args.GetInt("seed");
  for (const absl::Status& s : {steps.status(), batch.status(), lr.status(), seed.status()}) {
    if (!s.ok()) return s;
  }
  options.steps = args.IsDefault("steps") ? defaults.steps : static_cast<int>(*steps);
  options.batch_size =
      args.IsDefault("batch-size") ? defaults.batch_size : static_cast<int>(*batch);
  options.learning_rate = args.IsDefault("learning-rate") ? kImageLearningRate : *lr;
  options.seed = static_cast<uint64_t>(*seed);
  *generator = args.Has("generator") ? args.Get("generator") : defaults.generator;
  auto architecture = train::ParseImageGeneratorArchitecture(*generator);
  if (!architecture.ok()) return architecture.status();
  options.generator.architecture = *architecture;
  if (!args.IsDefault("hidden") || !args.IsDefault("noise-dim")) {
    return absl::InvalidArgumentError(
        "--hidden and --noise-dim shape table generators; for images choose --generator fc|conv");
  }
  return options;
}

std::string ReleaseModelWritten(const v1::GeneratorModel& model, const std::string& out,
                                bool images) {
  if (!images) {
    return absl::StrFormat("model written to %s (release %s, epsilon %.4f; training used no "
                           "budget)\n",
                           out, model.release_id(), model.epsilon());
  }
  return absl::StrCat(
      absl::StrFormat("image model written to %s (release %s, epsilon %.4f; training used no "
                      "budget)\n",
                      out, model.release_id(), model.epsilon()),
      absl::StrFormat("look at it: dpcurator sample --model %s --png grid.png\n", out));
}

absl::StatusOr<v1::Release> RequestDemoRelease(const DemoInput& input, absl::string_view method,
                                               v1::ReleaseRequest request, double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  request.set_dataset_id(input.dataset_id);
  request.set_idempotency_key(NewIdempotencyKey());
  request.set_epsilon(input.epsilon);
  v1::Release release;
  {
    auto context = input.analyst->NewContext();
    grpc::Status status = input.analyst->releases().RequestRelease(context.get(), request, &release);
    if (!status.ok()) return RpcError(status, "release");
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto& artefact = release.embedding();
  input.say(absl::StrFormat("analyst: %s release %s (%s, %d frequencies, length-scale %.3f%s, "
                            "noise multiplier %.4f) in %.2fs",
                            method, release.id(), ReleaseKindName(release.kind()),
                            artefact.num_frequencies(), artefact.length_scale(),
                            artefact.length_scale_private() ? " private" : "",
                            artefact.noise_multiplier(), *seconds));
  return release;
}

absl::StatusOr<train::EmbeddingTrainerOptions> DemoTrainerOptions(const DemoInput& input,
                                                                  absl::string_view method) {
  DPC_ASSIGN_OR_RETURN(train::EmbeddingTrainerOptions options,
                       TrainerOptionsFromArgs(*input.args));
  const auto start = std::chrono::steady_clock::now();
  const int steps = options.steps;
  auto progress = std::make_shared<Progress>();
  const bool quiet = input.quiet;
  const std::string name(method);
  options.progress = [progress, quiet, name, steps, start](int step, double loss) {
    if (quiet) return;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string line = absl::StrFormat("trainer (%s): step %5d / %d, loss %.5f, %.1fs",
                                             name, step, steps, loss, seconds);
    if (step == steps) {
      progress->Finish(line);
    } else {
      progress->Update(line);
    }
  };
  return options;
}

}  // namespace dpcurator::client
