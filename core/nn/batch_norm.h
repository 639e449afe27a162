#ifndef DPCURATOR_CORE_NN_BATCH_NORM_H_
#define DPCURATOR_CORE_NN_BATCH_NORM_H_

#include "Eigen/Core"
#include "absl/status/statusor.h"

namespace dpcurator::nn {

struct BatchNormOptions {
  // Number of normalised channels C; required (positive). For a dense layer's
  // output (BatchNorm1d) every unit is a channel.
  int channels = 0;
  // Values per channel in one example: 1 for dense features, H * W for an
  // image batch (BatchNorm2d; layout: conv2d.h, ImageShape). Positive.
  int spatial = 1;
  // Added to the variance before the square root (Ioffe & Szegedy 2015,
  // Alg. 1); PyTorch's default, which the papers' generators use.
  double epsilon = 1e-5;
  // Weight of the newest batch in the running averages; PyTorch's default.
  // In (0, 1].
  double momentum = 0.1;
};

// Buffers for one Forward/Backward pair. One per thread.
template <typename Scalar>
class BasicBatchNormWorkspace {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;
  const Matrix& output() const { return output_; }

 private:
  template <typename>
  friend class BasicBatchNorm;
  Matrix normalized_;  // xhat, n x (C * spatial)
  Matrix output_;
  Vector inv_std_;     // per channel
  bool training_ = true;
};

// Batch normalisation (Ioffe & Szegedy 2015, Alg. 1 and its backward pass in
// Sec. 3): y = gamma (x - mean) / sqrt(var + eps) + beta per channel, with
// the batch's mean and biased variance over the n * spatial values of the
// channel in training, and running averages at inference. The DP-MERF and
// PEARL generators put it after their dense layers (dp-merf.md Sec. 4:
// "FC 200, BN, ReLU, FC 100, BN"; pearl.md Sec. 4: "fc -> bn -> fc -> bn").
// The generators are post-processing of a released embedding, so mixing
// examples through batch statistics costs no privacy there; it must not be
// used under DP-SGD (dp-merf.md Sec. 2: "batch norm breaks DP-SGD"), whose
// per-example gradients it couples.
//
// Like Conv2d the layer holds its configuration only. Parameters (caller's
// flat vector): gamma (C) then beta (C). Running statistics (a separate
// caller-owned "buffer" vector, stored in model files but not optimised):
// mean (C) then variance (C), updated as PyTorch does (unbiased batch
// variance into the running average).
template <typename Scalar>
class BasicBatchNorm {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;
  using Workspace = BasicBatchNormWorkspace<Scalar>;

  // Validates `options`.
  static absl::StatusOr<BasicBatchNorm> Create(const BatchNormOptions& options);

  const BatchNormOptions& options() const { return options_; }
  Eigen::Index num_parameters() const { return 2 * Eigen::Index{options_.channels}; }
  Eigen::Index num_running_statistics() const { return 2 * Eigen::Index{options_.channels}; }
  Eigen::Index feature_size() const {
    return Eigen::Index{options_.channels} * options_.spatial;
  }

  // gamma = 1, beta = 0 (PyTorch's initialisation).
  void Initialize(Eigen::Ref<Vector> parameters) const;
  // Running mean 0, running variance 1.
  void InitializeRunningStatistics(Eigen::Ref<Vector> running) const;

  // Training mode on `input` (n x feature_size(), n * spatial >= 2):
  // normalises with the batch statistics and folds them into `running`.
  // Returns the output, a reference into `workspace`.
  const Matrix& ForwardTraining(const Eigen::Ref<const Vector>& parameters,
                                const Eigen::Ref<const Matrix>& input,
                                Eigen::Ref<Vector> running, Workspace* workspace) const;

  // Inference mode: normalises with the running statistics (PEARL's critic
  // step evaluates the generator this way, pearl.md Sec. 1.2).
  const Matrix& ForwardInference(const Eigen::Ref<const Vector>& parameters,
                                 const Eigen::Ref<const Matrix>& input,
                                 const Eigen::Ref<const Vector>& running,
                                 Workspace* workspace) const;

  // Backpropagation for the last Forward (either mode) on `workspace`. Adds
  // dLoss/dParameters to `grad_params` (the caller zeroes it); sets
  // `grad_input` (if not null) to dLoss/dInput. In training mode the input
  // gradient includes the paths through the batch mean and variance.
  void Backward(const Eigen::Ref<const Vector>& parameters,
                const Eigen::Ref<const Matrix>& grad_output, Workspace* workspace,
                Eigen::Ref<Vector> grad_params, Matrix* grad_input = nullptr) const;

 private:
  explicit BasicBatchNorm(const BatchNormOptions& options) : options_(options) {}
  const Matrix& Normalize(const Eigen::Ref<const Vector>& parameters, Workspace* workspace) const;

  BatchNormOptions options_;
};

using BatchNorm = BasicBatchNorm<double>;
using BatchNormWorkspace = BasicBatchNormWorkspace<double>;
using BatchNormF = BasicBatchNorm<float>;
using BatchNormWorkspaceF = BasicBatchNormWorkspace<float>;

extern template class BasicBatchNorm<double>;
extern template class BasicBatchNorm<float>;

}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_BATCH_NORM_H_
