#ifndef DPCURATOR_CORE_NN_MOMENTUM_SGD_H_
#define DPCURATOR_CORE_NN_MOMENTUM_SGD_H_

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dpcurator::nn {

struct MomentumSgdOptions {
  double learning_rate = 1e-2;  // finite and positive
  double momentum = 0.9;        // mu, in [0, 1); 0 is plain SGD
};

// SGD with heavy-ball momentum (Polyak 1964; the form of Sutskever et al.
// 2013, Eq. 1-2, with the learning rate outside the velocity, as PyTorch's
// torch.optim.SGD applies it):
//   v <- mu v + g
//   theta <- theta - lr v
// over a flat parameter vector, v = 0 before the first step. Unlike Adam,
// every coordinate moves in proportion to its own gradient, so a noisy
// gradient (DP-SGD) moves a coordinate whose true gradient is ~0 by the
// noise times lr, not by ~lr (docs/benchmarks.md, issue 39, rows 26-28).
class MomentumSgd {
 public:
  static absl::StatusOr<MomentumSgd> Create(Eigen::Index num_parameters,
                                            const MomentumSgdOptions& options);

  // One update as above. Fails, leaving everything unchanged, on a size
  // mismatch or a non-finite gradient entry.
  absl::Status Step(Eigen::Ref<Eigen::VectorXd> params,
                    const Eigen::Ref<const Eigen::VectorXd>& grads);

  const Eigen::VectorXd& velocity() const { return velocity_; }
  const MomentumSgdOptions& options() const { return options_; }

 private:
  MomentumSgd(const MomentumSgdOptions& options, Eigen::Index num_parameters);

  MomentumSgdOptions options_;
  Eigen::VectorXd velocity_;
};

}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_MOMENTUM_SGD_H_
