#ifndef DPCURATOR_CLIENT_METHODS_PEARL_H_
#define DPCURATOR_CLIENT_METHODS_PEARL_H_

// PEARL (Liew et al. 2022) as a client method: a generator fitted to a
// charfn_embedding release with the adversarial critic that re-weights
// frequencies (tables and images).

#include "absl/status/statusor.h"
#include "client/methods/method.h"
#include "core/train/embedding_trainer.h"
#include "core/train/image_trainer.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// The unit (registry.cc).
const Method& PearlMethod();

// PEARL's critic settings on top of the shared trainer options.
struct PearlOptions {
  bool use_critic = true;
  double critic_learning_rate = 1e-2;
  int generator_steps_per_critic_step = 10;
};

// Fits a generator with PEARL's adversarial re-weighting to a
// charfn_embedding release.
absl::StatusOr<v1::GeneratorModel> TrainPearlModel(const v1::Release& release,
                                                   const train::EmbeddingTrainerOptions& options,
                                                   const PearlOptions& pearl);

// The same for a charfn_embedding release over images (class-conditional
// image generator, with its critic).
absl::StatusOr<v1::GeneratorModel> TrainImagePearlModel(const v1::Release& release,
                                                        const train::ImagePearlOptions& options);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_PEARL_H_
