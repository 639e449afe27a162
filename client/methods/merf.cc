// The DP-MERF unit: `train merf` from an rff_embedding release (tables or
// images) or an rff_embedding session's step artefacts (images), the
// demo's release and fit, and the generator's sampler.
#include "client/methods/merf.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/methods/label_warning.h"
#include "client/methods/embedding_release.h"
#include "client/methods/generator_model.h"
#include "client/proto_file.h"
#include "client/progress.h"
#include "core/embed/rff.h"
#include "core/release/rff_embedding.h"
#include "core/train/image_generator.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"

namespace dpcurator::client {
namespace {

constexpr absl::string_view kMerfName = "merf";

// The image trainer's defaults (bench/fmnist.cc records the tuning at
// epsilon 1 on Fashion-MNIST):
//  - one-shot: the FC generator, 2000 steps of 500 images (76.7% CNN
//    accuracy; the conv generator 75.6% at 4x the time);
//  - minibatch (--session-steps): the FC generator, one update per
//    released step, 2000 images per update.
constexpr ImageTrainDefaults kImageMerf{"fc", 2000, 500};
constexpr ImageTrainDefaults kImageMerfSteps{"fc", 0, 2000};

}  // namespace

namespace {

// An rff_embedding release's feature map (rebuilt from its public options)
// and its checked artefact.
struct MerfRelease {
  embed::RandomFourierFeatureMap feature_map;
  LoadedArtefact loaded;
};

absl::StatusOr<MerfRelease> LoadMerfRelease(const v1::Release& release) {
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(release.embedding().schema()));
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  DPC_ASSIGN_OR_RETURN(auto feature_map, release::RffEmbeddingKind::FeatureMap(
                                              layout, RffOptionsFromProto(release.embedding())));
  DPC_ASSIGN_OR_RETURN(LoadedArtefact loaded,
                       LoadArtefact(release, v1::RFF_EMBEDDING, feature_map.output_dim()));
  return MerfRelease{std::move(feature_map), std::move(loaded)};
}

}  // namespace

absl::StatusOr<double> MerfLossScale(const v1::Release& release) {
  DPC_ASSIGN_OR_RETURN(MerfRelease merf, LoadMerfRelease(release));
  // The loss L = sum_c ||target_c - m_c||^2 (EmbeddingMeanLoss, DP-MERF
  // eq. 6 per class) of generated class means m_c = 0.
  return merf.loaded.target.class_means.squaredNorm();
}

std::string MerfLossShare(double loss, double scale) {
  if (!(scale > 0.0)) return "";
  return absl::StrFormat("= %.2f%% of the released embedding's squared norm", 100.0 * loss / scale);
}

absl::StatusOr<v1::GeneratorModel> TrainMerfModel(const v1::Release& release,
                                                  const train::EmbeddingTrainerOptions& options) {
  DPC_ASSIGN_OR_RETURN(MerfRelease merf, LoadMerfRelease(release));
  DPC_ASSIGN_OR_RETURN(train::TrainedGenerator trained,
                       train::TrainEmbeddingGenerator(merf.loaded.layout, merf.feature_map,
                                                      merf.loaded.target, options));
  return PackageReleaseModel(release, kMerfName, trained);
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
  return PackageImageModel(release, kMerfName, trained);
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
  // together, `dpcurator session show`), which a step artefact does not
  // carry, so the model records no release and no epsilon of its own.
  first.clear_id();
  first.mutable_embedding()->set_epsilon(0);
  return PackageImageModel(first, kMerfName, trained);
}

namespace {

absl::StatusOr<TrainResult> TrainImages(const ParsedArgs& args, const v1::Release& release) {
  const bool session_steps = args.Has("session-steps");
  std::string generator;
  DPC_ASSIGN_OR_RETURN(
      train::ImagePearlOptions options,
      ImageTrainerOptionsFromArgs(args, session_steps ? kImageMerfSteps : kImageMerf, &generator));
  if (options.steps == 0) {
    DPC_ASSIGN_OR_RETURN(const int64_t count, CountSessionSteps(args.Get("session-steps")));
    options.steps = static_cast<int>(std::min<int64_t>(count, 1 << 30));
  }
  StepProgress progress(absl::StrFormat("train %s (images, %s generator)", kMerfName, generator),
                        options.steps, args.Flag("quiet"));
  options.progress = progress.Callback();
  const train::ImageTrainerOptions& image_options = options;
  TrainResult result;
  const std::string out = args.Get("out");
  if (session_steps) {
    DPC_ASSIGN_OR_RETURN(result.model, TrainImageMerfFromSessionSteps(args.Get("session-steps"),
                                                                      image_options));
    result.message = absl::StrCat(
        absl::StrFormat("image model written to %s (session steps of %s; its privacy is the "
                        "session's: `dpcurator session show`; training used no budget)\n",
                        out, args.Get("session-steps")),
        absl::StrFormat("look at it: dpcurator sample --model %s --png grid.png\n", out));
  } else {
    DPC_ASSIGN_OR_RETURN(result.model, TrainImageMerfModel(release, image_options));
    result.message = ReleaseModelWritten(result.model, out, /*images=*/true);
  }
  return result;
}


class MerfUnit final : public Method {
 public:
  MethodId id() const override { return MethodId::kMerf; }
  absl::string_view name() const override { return kMerfName; }
  absl::string_view title() const override { return "DP-MERF"; }

  std::string TrainSummary() const override {
    return "fit a generator to a DP-MERF release (no budget, no private data)";
  }
  std::string TrainDescription() const override {
    return "Minimises the distance between the released class-conditional mean embedding and "
           "the\n"
           "generator's (Harder et al. 2021, Alg. 1), with labels from the released class "
           "weights.\n"
           "Image releases fit a class-conditional image generator (--generator), labels "
           "balanced;\n"
           "with --session-steps each update fits the next step's fresh noisy embedding of a\n"
           "Poisson-sampled batch (dp-merf.md 1.6 (a)), cycling through the file.";
  }
  std::vector<v1::ReleaseKind> ReleaseKinds() const override { return {v1::RFF_EMBEDDING}; }

  std::vector<OptionSpec> TrainOptions() const override {
    std::vector<OptionSpec> options = {
        {"release", "release.pb", "rff_embedding artefact from `dpcurator release`"},
        {"out", "model.pb", "model file to write"}};
    for (auto& o : TrainerOptionSpecs()) options.push_back(o);
    options.push_back({"session-steps", "",
                       "images: the step artefacts of an rff_embedding session (`session "
                       "step --out FILE`) instead of --release: DP-MERF's minibatch variant"});
    return options;
  }

  absl::StatusOr<TrainResult> Train(const ParsedArgs& args) const override {
    v1::Release release;
    if (args.Has("session-steps")) {
      if (!args.IsDefault("release")) {
        return absl::InvalidArgumentError("give one of --release and --session-steps");
      }
      return TrainImages(args, release);
    }
    DPC_RETURN_IF_ERROR(ReadProtoFile(args.Get("release"), &release));
    if (release.has_embedding() && IsImageSchema(release.embedding().schema())) {
      return TrainImages(args, release);
    }
    DPC_ASSIGN_OR_RETURN(train::EmbeddingTrainerOptions options, TrainerOptionsFromArgs(args));
    StepProgress progress(absl::StrCat("train ", kMerfName), options.steps, args.Flag("quiet"));
    // The loss alone has no scale (issue 38): each line also gives it as a
    // share of the all-zero embedding's loss (MerfLossScale), so 0% is a
    // generator whose mean embedding matches the release and 100% one that
    // matches nothing; the noise in the release keeps it above 0.
    DPC_ASSIGN_OR_RETURN(const double scale, MerfLossScale(release));
    const auto step_line = progress.Callback();
    options.progress = [&progress, step_line, scale](int step, double loss) {
      progress.set_note(MerfLossShare(loss, scale));
      step_line(step, loss);
    };
    TrainResult result;
    DPC_ASSIGN_OR_RETURN(result.model, TrainMerfModel(release, options));
    result.message = ReleaseModelWritten(result.model, args.Get("out"), /*images=*/false);
    if (auto warning = EmbeddingLabelWarning(kMerfName, release)) absl::StrAppend(&result.message, *warning, "\n");
    return result;
  }

  // The trainer's flags and the release's width, shared with PEARL (the
  // demo merges the tables by name).
  std::vector<OptionSpec> DemoOptions() const override {
    std::vector<OptionSpec> options = {
        {"num-frequencies", "500", "frequencies (rff: D/2; charfn: k)"}};
    for (auto& o : TrainerOptionSpecs()) {
      if (o.name != "quiet") options.push_back(o);
    }
    return options;
  }

  absl::StatusOr<DemoOutput> TrainInDemo(const DemoInput& input) const override {
    DPC_ASSIGN_OR_RETURN(const int64_t frequencies, input.args->GetInt("num-frequencies"));
    DPC_ASSIGN_OR_RETURN(train::EmbeddingTrainerOptions options,
                         TrainerOptionsFromArgs(*input.args));
    v1::ReleaseRequest request;
    request.mutable_rff_embedding()->set_num_frequencies(static_cast<int>(frequencies));
    DemoOutput out;
    DPC_ASSIGN_OR_RETURN(out.release,
                         RequestDemoRelease(input, kMerfName, request, &out.release_seconds));
    DPC_ASSIGN_OR_RETURN(options, DemoTrainerOptions(input, kMerfName));
    DPC_ASSIGN_OR_RETURN(out.model, TrainMerfModel(out.release, options));
    if (auto warning = EmbeddingLabelWarning(kMerfName, out.release)) input.say(*warning);
    return out;
  }

  absl::StatusOr<data::Table> SampleTable(const v1::GeneratorModel& model, int64_t num_rows,
                                          uint64_t seed) const override {
    return SampleTabularGenerator(model, num_rows, seed);
  }
  absl::Status SampleImages(const ParsedArgs& args, const v1::GeneratorModel& model,
                            int64_t num_images, uint64_t seed) const override {
    return WriteImageModelSamples(args, model, num_images, seed);
  }
};

}  // namespace

const Method& MerfMethod() {
  static const MerfUnit* const unit = new MerfUnit();
  return *unit;
}

}  // namespace dpcurator::client
