#ifndef DPCURATOR_CLIENT_METHODS_KERNEL_H_
#define DPCURATOR_CLIENT_METHODS_KERNEL_H_

// DP-kernel (issue 16 item 4) as a client method: one kernel_witness
// session on the server, the generator trained on its answers (DP-MERF's
// tabular generator, or the image generators), and the model file.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "client/methods/method.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// The unit (registry.cc).
const Method& KernelMethod();

struct KernelRun {
  std::string dataset_id;
  v1::TableSchema schema;  // the dataset's (public) schema
  double delta = 0.0;      // the dataset's delta, recorded in the model
  // A public guess of the dataset's size: q = batch / rows_guess. A wrong
  // guess changes the real batch size, never the guarantee (the divisor is
  // the declared batch).
  int64_t rows_guess = 0;
  double epsilon = 1.0;  // of all steps together
  // "conditional", "unconditional" or empty (conditional when the schema
  // has a label); "parallel": one generator per class on partitioned
  // sessions (images with a label; docs/privacy.md 2.10, 3.7).
  std::string variant;
  // 0 (or empty): the default for the dataset's kind, below.
  int64_t steps = 0;           // T
  double batch = 0.0;          // m, the public divisor
  int points = 0;              // M per step
  double learning_rate = 0.0;  // Adam
  // Images only: "conv" (default) or "fc" (issue 14's generators), and the
  // Polyak-averaging decay of the generator's parameters (negative: the
  // default; 0: off).
  std::string generator;
  double average_decay = -1.0;
  uint64_t seed = 1;
  // Idempotency key of the session (empty: random). Rerunning with the key
  // of a closed session is refused without a charge.
  std::string key;
  bool quiet = false;
  // `train kernel --json`: stdout holds the JSON document alone, so the
  // session's lines go to stderr.
  bool json = false;
};

// Tables: tuned on Adult at (1, 1e-5) with bench/adult.sh --method kernel
// (one seed each): lr 1e-3 / 3e-3 / 3e-4 / 1e-4 at 2000 steps gave LR
// ROC-AUC 0.748 / 0.582 / 0.772 / 0.770; 4000 steps at 3e-4 gave 0.798
// before the atom indicators (issue 17) widened the row, 0.685 and 0.696
// after (seeds 1, 2); 8000 steps gave 0.756 (--steps 8000, seed 1).
inline constexpr int64_t kTableKernelSteps = 8000;
inline constexpr double kTableKernelBatch = 500.0;
inline constexpr int kTableKernelPoints = 32;
inline constexpr double kTableKernelLearningRate = 3e-4;
// Images: train::kImageKernel* (core/train/image_kernel_generator.h).

// Opens the session, trains (tabular generator for tables, the conv or fc
// image generator for images), closes it, and packages the model.
absl::StatusOr<v1::GeneratorModel> TrainKernelModel(Connection& analyst, const KernelRun& run);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_KERNEL_H_
