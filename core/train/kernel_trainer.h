#ifndef DPCURATOR_CORE_TRAIN_KERNEL_TRAINER_H_
#define DPCURATOR_CORE_TRAIN_KERNEL_TRAINER_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "absl/status/statusor.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/encoded_rows.h"
#include "core/release/kernel_witness.h"
#include "core/util/public_rng.h"

namespace dpcurator::train {

// DP-kernel's trainer core (issue 16 item 4; dp-kernel-frdp.md sec. 2;
// docs/privacy.md 2.10). Each step the trainer sends M generated points
// (and labels) and gets back ONE noisy witness's values and gradients
// there; everything below is post-processing of that answer.

// One step's answer: f~(w_j) and grad f~(w_j) (KernelWitnessKind::Result
// without the record).
struct KernelWitnessAnswer {
  Eigen::VectorXd values;     // M
  Eigen::MatrixXd gradients;  // M x d
};

// Where answers come from: a kernel_witness session step on the server
// (a later change), or InProcessKernelWitnessOracle in tests.
class KernelWitnessOracle {
 public:
  virtual ~KernelWitnessOracle() = default;
  // labels: M values for the conditional variant, empty otherwise.
  virtual absl::StatusOr<KernelWitnessAnswer> Step(const Eigen::MatrixXd& points,
                                                   const Eigen::VectorXi& labels) = 0;
};

// Poisson-samples `rows` at rate q with `noise` and runs the unit: what a
// session step does, without the ledger. For tests and local experiments.
class InProcessKernelWitnessOracle final : public KernelWitnessOracle {
 public:
  InProcessKernelWitnessOracle(release::KernelWitnessKind::Params resolved,
                               const release::EncodedRows* rows, double sampling_rate,
                               double noise_multiplier, privacy::NoiseSource* noise)
      : params_(std::move(resolved)),
        rows_(rows),
        sampling_rate_(sampling_rate),
        noise_multiplier_(noise_multiplier),
        noise_(noise) {}

  absl::StatusOr<KernelWitnessAnswer> Step(const Eigen::MatrixXd& points,
                                           const Eigen::VectorXi& labels) override;
  int64_t steps() const { return steps_; }

 private:
  release::KernelWitnessKind::Params params_;
  const release::EncodedRows* rows_;
  double sampling_rate_;
  double noise_multiplier_;
  privacy::NoiseSource* noise_;
  int64_t steps_ = 0;
};

// The generator's private MMD loss from one answer (notes eq. 6-7 with
// pitfall 3 resolved: the term at private points is dropped, it is constant
// in the generator):
//   L~(Y) = (1/M^2) sum_{j,l} k*(y_j, y_l) - (2/M) sum_j f~(y_j),
// and its gradient with respect to each generated point,
//   dL~/dy_j = (2/M^2) sum_l grad_1 k*(y_j, y_l) - (2/M) grad f~(y_j)
// (k symmetric, so the gen-gen term counts y_j twice). The gen-gen term is
// computed locally from public points; the cross term uses the release only.
struct MmdStep {
  double loss = 0.0;
  Eigen::MatrixXd point_gradients;  // M x d
};
MmdStep MmdLossAndGradient(const Eigen::MatrixXd& points, const Eigen::VectorXi& labels,
                           const std::vector<double>& bandwidths,
                           const KernelWitnessAnswer& answer);

// A generator as the trainer sees it: sample M points (and labels), take
// dL/dY for the last sample and update its parameters.
class PointGenerator {
 public:
  virtual ~PointGenerator() = default;
  virtual void Sample(int count, PublicRng* rng, Eigen::MatrixXd* points,
                      Eigen::VectorXi* labels) = 0;
  virtual void Update(const Eigen::MatrixXd& point_gradients) = 0;
};

struct KernelTrainerOptions {
  int steps = 0;
  int points_per_step = 0;  // M, at most KernelWitnessKind::kMaxQueryPoints
  uint64_t seed = 1;        // public: the generator's latent draws
};

struct KernelTrainerProgress {
  int step = 0;
  double loss = 0.0;
};

// Runs `steps` oracle steps: sample, ask, MmdLossAndGradient, Update. The
// callback (may be empty) sees every step's loss.
absl::Status TrainKernelGenerator(const KernelTrainerOptions& options,
                                  const std::vector<double>& bandwidths,
                                  KernelWitnessOracle* oracle, PointGenerator* generator,
                                  const std::function<void(const KernelTrainerProgress&)>& progress);

}  // namespace dpcurator::train

#endif  // DPCURATOR_CORE_TRAIN_KERNEL_TRAINER_H_
