// The PEARL unit: `train pearl` from a charfn_embedding release (tables or
// images), the demo's release and fit, and the generator's sampler.
#include "client/methods/pearl.h"

#include <cstdio>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/methods/embedding_release.h"
#include "client/methods/label_warning.h"
#include "client/methods/generator_model.h"
#include "client/proto_file.h"
#include "client/progress.h"
#include "core/embed/charfn.h"
#include "core/release/charfn_embedding.h"
#include "core/train/image_generator.h"
#include "core/train/pearl_trainer.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"

namespace dpcurator::client {
namespace {

constexpr absl::string_view kPearlName = "pearl";

// Images: ConvCondGen with the paper's schedule (pearl.md Sec. 4: 3000
// steps of 100, a critic step every 5), the critic at Adam 1e-3 (at the
// code's 1e-2 its weights collapse onto a few frequencies: 64.0% vs 75.6%
// CNN accuracy on Fashion-MNIST at epsilon 1, bench/fmnist.cc).
constexpr ImageTrainDefaults kImagePearl{"conv", 3000, 100};
constexpr int kImagePearlCriticEvery = 5;  // pearl.md Sec. 4 [code], images
constexpr double kImagePearlCriticLearningRate = 1e-3;

}  // namespace

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
  return PackageReleaseModel(release, kPearlName, trained.trained);
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
  return PackageImageModel(release, kPearlName, trained);
}

namespace {

absl::StatusOr<TrainResult> TrainPearlImages(const ParsedArgs& args, const v1::Release& release) {
  std::string generator;
  DPC_ASSIGN_OR_RETURN(train::ImagePearlOptions options,
                       ImageTrainerOptionsFromArgs(args, kImagePearl, &generator));
  StepProgress progress(absl::StrFormat("train %s (images, %s generator)", kPearlName, generator),
                        options.steps, args.Flag("quiet"));
  options.progress = progress.Callback();
  options.use_critic = !args.Flag("no-critic");
  DPC_ASSIGN_OR_RETURN(const int64_t every, args.GetInt("critic-every"));
  DPC_ASSIGN_OR_RETURN(const double critic_lr, args.GetDouble("critic-learning-rate"));
  options.generator_steps_per_critic_step =
      args.IsDefault("critic-every") ? kImagePearlCriticEvery : static_cast<int>(every);
  options.critic_learning_rate =
      args.IsDefault("critic-learning-rate") ? kImagePearlCriticLearningRate : critic_lr;
  TrainResult result;
  DPC_ASSIGN_OR_RETURN(result.model, TrainImagePearlModel(release, options));
  result.message = ReleaseModelWritten(result.model, args.Get("out"), /*images=*/true);
  return result;
}

class PearlUnit final : public Method {
 public:
  MethodId id() const override { return MethodId::kPearl; }
  absl::string_view name() const override { return kPearlName; }
  absl::string_view title() const override { return "PEARL"; }

  std::string TrainSummary() const override {
    return "fit a generator to a PEARL release with the adversarial critic (no budget)";
  }
  std::string TrainDescription() const override {
    return "Matches the released class-conditional characteristic-function embedding, with a\n"
           "critic that re-weights frequencies (Liew et al. 2022, Alg. 1; per-dimension "
           "precisions,\n"
           "self-normalised weights), one critic step every --critic-every generator steps.";
  }
  std::vector<v1::ReleaseKind> ReleaseKinds() const override { return {v1::CHARFN_EMBEDDING}; }

  std::vector<OptionSpec> TrainOptions() const override {
    std::vector<OptionSpec> options = {
        {"release", "release.pb", "charfn_embedding artefact from `dpcurator release`"},
        {"out", "model.pb", "model file to write"}};
    for (auto& o : TrainerOptionSpecs()) options.push_back(o);
    options.push_back({"critic-every", "10", "generator steps per critic step"});
    options.push_back({"critic-learning-rate", "0.01", "critic Adam learning rate"});
    options.push_back({"no-critic", "", "keep frequency weights uniform (ablation)", true});
    return options;
  }

  absl::StatusOr<TrainResult> Train(const ParsedArgs& args) const override {
    v1::Release release;
    DPC_RETURN_IF_ERROR(ReadProtoFile(args.Get("release"), &release));
    if (release.has_embedding() && IsImageSchema(release.embedding().schema())) {
      return TrainPearlImages(args, release);
    }
    DPC_ASSIGN_OR_RETURN(train::EmbeddingTrainerOptions options, TrainerOptionsFromArgs(args));
    StepProgress progress(absl::StrCat("train ", kPearlName), options.steps, args.Flag("quiet"));
    options.progress = progress.Callback();
    PearlOptions pearl;
    pearl.use_critic = !args.Flag("no-critic");
    DPC_ASSIGN_OR_RETURN(const int64_t every, args.GetInt("critic-every"));
    DPC_ASSIGN_OR_RETURN(const double critic_lr, args.GetDouble("critic-learning-rate"));
    pearl.generator_steps_per_critic_step = static_cast<int>(every);
    pearl.critic_learning_rate = critic_lr;
    TrainResult result;
    DPC_ASSIGN_OR_RETURN(result.model, TrainPearlModel(release, options, pearl));
    result.message = ReleaseModelWritten(result.model, args.Get("out"), /*images=*/false);
    if (auto warning = EmbeddingLabelWarning(kPearlName, release)) {
      absl::StrAppend(&result.message, *warning, "\n");
    }
    return result;
  }

  std::vector<OptionSpec> DemoOptions() const override {
    std::vector<OptionSpec> options = {
        {"num-frequencies", "500", "frequencies (rff: D/2; charfn: k)"},
        {"private-length-scale", "", "pearl: spend part of epsilon on a DP length-scale", true},
        {"pearl-length-scale", "", "pearl: declared length-scale (default: from the schema)"},
        {"pearl-no-critic", "", "pearl: uniform frequency weights (the paper's ablation)", true}};
    for (auto& o : TrainerOptionSpecs()) {
      if (o.name != "quiet") options.push_back(o);
    }
    return options;
  }

  absl::StatusOr<DemoOutput> TrainInDemo(const DemoInput& input) const override {
    const ParsedArgs& args = *input.args;
    DPC_ASSIGN_OR_RETURN(const int64_t frequencies, args.GetInt("num-frequencies"));
    v1::ReleaseRequest request;
    auto* params = request.mutable_charfn_embedding();
    params->set_num_frequencies(static_cast<int>(frequencies));
    params->set_private_length_scale(args.Flag("private-length-scale"));
    if (args.Has("pearl-length-scale")) {
      DPC_ASSIGN_OR_RETURN(const double length_scale, args.GetDouble("pearl-length-scale"));
      params->set_length_scale(length_scale);
    }
    DPC_ASSIGN_OR_RETURN(train::EmbeddingTrainerOptions options, TrainerOptionsFromArgs(args));
    DemoOutput out;
    DPC_ASSIGN_OR_RETURN(out.release,
                         RequestDemoRelease(input, kPearlName, request, &out.release_seconds));
    DPC_ASSIGN_OR_RETURN(options, DemoTrainerOptions(input, kPearlName));
    DPC_ASSIGN_OR_RETURN(out.model,
                         TrainPearlModel(out.release, options,
                                         PearlOptions{.use_critic = !args.Flag("pearl-no-critic")}));
    if (auto warning = EmbeddingLabelWarning(kPearlName, out.release)) input.say(*warning);
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

const Method& PearlMethod() {
  static const PearlUnit* const unit = new PearlUnit();
  return *unit;
}

}  // namespace dpcurator::client
