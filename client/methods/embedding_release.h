#ifndef DPCURATOR_CLIENT_METHODS_EMBEDDING_RELEASE_H_
#define DPCURATOR_CLIENT_METHODS_EMBEDDING_RELEASE_H_

// What the two one-shot embedding methods (DP-MERF on rff_embedding, PEARL
// on charfn_embedding releases) share: reading the artefact, the trainer
// flags of `train merf|pearl` and the demo, and packaging the fitted
// generator with its release. Each method's unit (merf.cc, pearl.cc) adds
// its own feature map, trainer and defaults.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/cli.h"
#include "client/methods/method.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/embed/labelled_embedding.h"
#include "core/train/embedding_trainer.h"
#include "core/train/image_trainer.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// What every trainer needs from an embedding artefact: the schema, its
// layout, and the post-processed target.
struct LoadedArtefact {
  data::Schema schema;
  data::FeatureLayout layout;
  embed::EmbeddingTarget target;
};

// Reads the embedding of `release`, checking it is of `kind` (naming the
// command for the kind it is otherwise) and `feature_dim` wide.
absl::StatusOr<LoadedArtefact> LoadArtefact(const v1::Release& release, v1::ReleaseKind kind,
                                            int feature_dim);

// A trained tabular generator packaged with the release it was fitted to.
v1::GeneratorModel PackageReleaseModel(const v1::Release& release, absl::string_view method,
                                       const train::TrainedGenerator& trained);

// A trained image generator packaged with the release it was fitted to.
v1::GeneratorModel PackageImageModel(const v1::Release& release, absl::string_view method,
                                     const train::TrainedImageGenerator& trained);

// The tabular trainer's flags (steps, batch, learning rate, widths, seed,
// the image generator's name, quiet) and their reading.
std::vector<OptionSpec> TrainerOptionSpecs();
absl::StatusOr<train::EmbeddingTrainerOptions> TrainerOptionsFromArgs(const ParsedArgs& args);

// The image trainers' defaults where the tabular ones do not fit (a flag
// given on the command line wins); each method's unit holds its own.
struct ImageTrainDefaults {
  const char* generator;
  int steps;  // 0: one per session step
  int batch_size;
};
// Adam 1e-2 for the image generators (both papers).
inline constexpr double kImageLearningRate = 1e-2;

// The image trainer's options from the flags and `defaults` (steps 0 is
// left for the caller to fill), and the generator's name in *generator.
absl::StatusOr<train::ImagePearlOptions> ImageTrainerOptionsFromArgs(
    const ParsedArgs& args, const ImageTrainDefaults& defaults, std::string* generator);

// "model written to OUT (release R, epsilon E; training used no budget)"
// and its image variant with the `sample --png` hint.
std::string ReleaseModelWritten(const v1::GeneratorModel& model, const std::string& out,
                                bool images);

// The demo's embedding release: `request` (its kind's parameters set, and
// the demo's --num-frequencies) for the dataset at the demo's epsilon, and
// the analyst's line about it; *seconds is how long it took.
absl::StatusOr<v1::Release> RequestDemoRelease(const DemoInput& input, absl::string_view method,
                                               v1::ReleaseRequest request, double* seconds);

// The demo's tabular trainer options (its trainer flags) with the progress
// line "trainer (METHOD): step ..." timed from now (none under --json).
absl::StatusOr<train::EmbeddingTrainerOptions> DemoTrainerOptions(const DemoInput& input,
                                                                  absl::string_view method);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_EMBEDDING_RELEASE_H_
