#ifndef DPCURATOR_CORE_NN_DROPOUT_H_
#define DPCURATOR_CORE_NN_DROPOUT_H_

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/util/public_rng.h"

namespace dpcurator::nn {

// Buffers for one Forward/Backward pair: the mask and the output.
template <typename Scalar>
class BasicDropoutWorkspace {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  const Matrix& output() const { return output_; }
  // 0 for dropped entries, 1 / (1 - rate) for kept ones.
  const Matrix& mask() const { return mask_; }

 private:
  template <typename>
  friend class BasicDropout;
  Matrix mask_;
  Matrix output_;
};

// Inverted dropout (Srivastava et al. 2014, with the 1 / (1 - rate) scaling
// moved to training time as PyTorch does): in training each entry is zeroed
// with probability `rate` and the survivors are scaled by 1 / (1 - rate), so
// inference is the identity (callers skip the layer). Elementwise, like
// PyTorch's nn.Dropout, which the papers' evaluation CNN uses after each
// convolution (issue 14 item 4: "Conv 32 k3 s2 p1 -> dropout 0.5 -> relu").
// The mask comes from a caller's PublicRng: the judge is trained on public
// synthetic data, and a seeded stream makes the judge's runs reproducible.
template <typename Scalar>
class BasicDropout {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  using Workspace = BasicDropoutWorkspace<Scalar>;

  // `rate` must be in [0, 1).
  static absl::StatusOr<BasicDropout> Create(double rate);

  double rate() const { return rate_; }

  // Training mode: draws a fresh mask from `rng` (one Uniform() per entry,
  // column-major order) and returns input .* mask, a reference into
  // `workspace`.
  const Matrix& ForwardTraining(const Eigen::Ref<const Matrix>& input, PublicRng* rng,
                                Workspace* workspace) const;

  // Sets `grad_input` to grad_output .* mask of the last ForwardTraining.
  void Backward(const Eigen::Ref<const Matrix>& grad_output, const Workspace& workspace,
                Matrix* grad_input) const;

 private:
  explicit BasicDropout(double rate) : rate_(rate) {}
  double rate_;
};

using Dropout = BasicDropout<double>;
using DropoutWorkspace = BasicDropoutWorkspace<double>;
using DropoutF = BasicDropout<float>;
using DropoutWorkspaceF = BasicDropoutWorkspace<float>;

extern template class BasicDropout<double>;
extern template class BasicDropout<float>;

}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_DROPOUT_H_
