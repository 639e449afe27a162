#ifndef DPCURATOR_CLIENT_METHODS_MERF_H_
#define DPCURATOR_CLIENT_METHODS_MERF_H_

// DP-MERF (Harder et al. 2021) as a client method: a generator fitted to an
// rff_embedding release (one-shot; tables and images) or, for images, to
// the per-step artefacts of an rff_embedding session (its minibatch
// variant, dp-merf.md 1.6 (a)).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/methods/method.h"
#include "core/train/embedding_trainer.h"
#include "core/train/image_trainer.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// The unit (registry.cc).
const Method& MerfMethod();

// The scale of DP-MERF's loss for `release` (an rff_embedding over a
// table): sum_c ||target_c||^2, the loss of generated class means that are
// all zero, so that loss / scale reads as a share (issue 38: the loss had
// no scale). MerfLossShare words it for the progress line ("= 4.12% of the
// released embedding's squared norm"; "" for a zero scale).
absl::StatusOr<double> MerfLossScale(const v1::Release& release);
std::string MerfLossShare(double loss, double scale);

// Fits a generator to an rff_embedding release and packages it as a model.
absl::StatusOr<v1::GeneratorModel> TrainMerfModel(const v1::Release& release,
                                                  const train::EmbeddingTrainerOptions& options);

// Fits a class-conditional image generator (core/train/image_generator.h)
// to an rff_embedding release over images (one-shot).
absl::StatusOr<v1::GeneratorModel> TrainImageMerfModel(const v1::Release& release,
                                                       const train::ImageTrainerOptions& options);

// The number of step artefacts in a session-steps file (the default
// number of training steps: one update per released step).
absl::StatusOr<int64_t> CountSessionSteps(const std::string& steps_path);

// DP-MERF's minibatch variant on images: fits an image generator to the
// per-step artefacts of an rff_embedding session, as `dpcurator session
// step --out FILE` writes them (each a uint64 length then the
// EmbeddingArtefact), training step t on artefact t (cycling when
// options.steps exceeds the artefacts in the file). The file is read one
// artefact at a time. Every artefact must come from the same session's
// feature map (same frequencies, seed and schema).
absl::StatusOr<v1::GeneratorModel> TrainImageMerfFromSessionSteps(
    const std::string& steps_path, const train::ImageTrainerOptions& options);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_MERF_H_
