#ifndef DPCURATOR_CORE_NN_MLP_H_
#define DPCURATOR_CORE_NN_MLP_H_

#include <cstdint>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/nn/activation.h"

namespace dpcurator::nn {

// Architecture of a dense network. Together with the flat parameter vector it
// is everything a model file needs to rebuild the network (Mlp::FromParameters).
struct MlpOptions {
  // Width of the input rows; required (positive).
  int input_dim = 0;
  // Widths of the hidden layers, in order; may be empty (a linear model).
  std::vector<int> hidden = {256, 256};
  // Width of the (linear) output; required (positive).
  int output_dim = 0;
  // Nonlinearity after every hidden layer.
  Activation activation = Activation::kRelu;
  // Negative-side slope for Activation::kLeakyRelu, in (0, 1).
  double leaky_relu_slope = 0.01;
  // Layer normalisation (Ba, Kiros & Hinton 2016, eqs. 3-4) of every hidden
  // pre-activation, with a learned gain and shift per unit. A batch-free
  // alternative to the batch norm of the DP-MERF/PEARL reference generators
  // (dp-merf.md Sec. 4, pearl.md Sec. 4): each row is normalised on its own,
  // so per-example gradients (DP-SGD) stay well defined.
  bool layer_norm = false;
  // Seed of the public randomness used for initialisation (PublicRng).
  uint64_t seed = 0;
};

// Where one dense layer's parameters live in the flat parameter vector (and,
// identically, in a gradient vector). The layer computes, for a batch X
// (n x fan_in, one example per row):
//   H = X W + 1 b^T                          W: fan_in x fan_out (column-major)
//   H <- LayerNorm(H) * gain + shift         hidden layers, if layer_norm
//   A = activation(H)                        hidden layers only
struct DenseLayerLayout {
  int fan_in = 0;
  int fan_out = 0;
  bool hidden = false;
  Eigen::Index weight_offset = 0;
  Eigen::Index bias_offset = 0;
  Eigen::Index gain_offset = -1;   // -1 without layer norm
  Eigen::Index shift_offset = -1;  // -1 without layer norm
};

// Buffers for one Forward/Backward pair of a BasicMlp<Scalar>. Reusing a
// workspace for batches of the same size performs no allocation of its own.
// One workspace per thread: an Mlp is immutable during Forward/Backward,
// workspaces are not.
template <typename Scalar>
class BasicMlpWorkspace {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;

  BasicMlpWorkspace() = default;

  // Output of the last Forward (n x output_dim).
  const Matrix& output() const { return outputs_.back(); }

  // Caches read by per-example gradient code (core/nn/per_example.h), one row
  // per example. After Forward: layer_input(l) is the X of layer l (the
  // network input for l = 0, the activations of layer l-1 otherwise) and, for
  // hidden layers with layer norm, normalized(l) is the xhat of layer l.
  // After Mlp::BackpropagateDeltas (or Backward): hidden_delta(l) is dLoss/dH
  // of hidden layer l, and, with layer norm, norm_output_delta(l) is dLoss/dY
  // for Y = gain * xhat + shift. The output layer's dLoss/dH is grad_output.
  const Matrix& layer_input(int layer) const {
    return layer == 0 ? input_ : outputs_[layer - 1];
  }
  const Matrix& hidden_delta(int layer) const { return deltas_[layer]; }
  const Matrix& normalized(int layer) const { return normalized_[layer]; }
  const Matrix& norm_output_delta(int layer) const { return norm_deltas_[layer]; }

 private:
  template <typename>
  friend class BasicMlp;

  Matrix input_;
  // outputs_[l]: activations of layer l (the network output for the last).
  std::vector<Matrix> outputs_;
  // Layer norm: normalised pre-activations and 1/sqrt(var + eps) per row.
  std::vector<Matrix> normalized_;
  std::vector<Vector> inv_std_;
  // deltas_[l]: gradient of the loss w.r.t. the pre-activation H of hidden
  // layer l (the output layer uses grad_output directly).
  std::vector<Matrix> deltas_;
  // Layer norm: norm_deltas_[l] is dLoss/dY of hidden layer l, where
  // Y = gain * xhat + shift (before the activation).
  std::vector<Matrix> norm_deltas_;
  Vector row_buffer_a_;
  Vector row_buffer_b_;
};

// A multilayer perceptron over batches stored as rows, in Scalar precision:
// Mlp (double) for DP-SGD, whose per-example gradient norms are tested to
// 1e-10, and MlpF (float) for the generators of the embedding trainers, which
// are post-processing of a released artefact (precision there costs no
// privacy) and run twice as many float as double flops per cycle. Float
// products go to the BLAS sgemm (gemm.h); double ones stay on Eigen.
// All parameters live in one flat vector; each layer's weight, bias
// (and layer-norm gain/shift) are Eigen::Map views into it, so optimizers,
// serialisation and gradient checks operate on one vector.
template <typename Scalar>
class BasicMlp {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;
  using Workspace = BasicMlpWorkspace<Scalar>;

  // Validates `options` and initialises the weights from PublicRng(seed):
  // He et al. 2015 ("Delving deep into rectifiers", eq. 10; eq. 15 form for
  // leaky ReLU), W ~ N(0, 2 / ((1 + slope^2) fan_in)), for ReLU-family hidden
  // layers; Glorot & Bengio 2010 (normalised init, eq. 16, as a normal),
  // W ~ N(0, 2 / (fan_in + fan_out)), for tanh hidden layers and the linear
  // output layer. Biases and shifts start at 0, layer-norm gains at 1.
  static absl::StatusOr<BasicMlp> Create(const MlpOptions& options);

  // Rebuilds a network from its architecture and flat parameters (a model
  // file). The seed in `options` is ignored. Fails if the size does not match
  // the architecture or an entry is not finite.
  static absl::StatusOr<BasicMlp> FromParameters(const MlpOptions& options, Vector parameters);

  // Number of parameters of the architecture, or the validation error.
  static absl::StatusOr<Eigen::Index> CountParameters(const MlpOptions& options);

  // Runs the network on `input` (n x input_dim) and returns the output
  // (n x output_dim), a reference into `workspace` valid until its next use.
  // Keeps what Backward needs in `workspace`.
  const Matrix& Forward(const Eigen::Ref<const Matrix>& input, Workspace* workspace) const;

  // Backpropagation (Rumelhart, Hinton & Williams 1986) for the last Forward
  // on `workspace`. `grad_output` is dLoss/dOutput (n x output_dim). Adds
  // dLoss/dParameters to `grad_params` (size num_parameters(), same layout as
  // parameters(); the caller zeroes it). If `grad_input` is not null it is
  // set to dLoss/dInput (n x input_dim).
  void Backward(const Eigen::Ref<const Matrix>& grad_output, Workspace* workspace,
                Vector* grad_params, Matrix* grad_input = nullptr) const;

  // The first half of Backward: propagates `grad_output` (n x output_dim)
  // down the network for the last Forward on `workspace` and leaves every
  // hidden layer's dLoss/dH (and, with layer norm, dLoss/dY) in `workspace`
  // (MlpWorkspace::hidden_delta, norm_output_delta), without summing anything
  // over the batch. Row i of every delta depends on row i of grad_output
  // only, linearly: the basis of per-example gradients (per_example.h).
  void BackpropagateDeltas(const Eigen::Ref<const Matrix>& grad_output,
                           Workspace* workspace) const;

  // The flat parameter vector. Callers may change its entries (optimizer
  // steps) but must not resize it.
  Vector& parameters() { return parameters_; }
  const Vector& parameters() const { return parameters_; }
  // Replaces all parameters; fails on a size mismatch or non-finite entry.
  absl::Status SetParameters(const Eigen::Ref<const Vector>& parameters);

  Eigen::Index num_parameters() const { return parameters_.size(); }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  int input_dim() const { return options_.input_dim; }
  int output_dim() const { return options_.output_dim; }
  const MlpOptions& options() const { return options_; }
  const std::vector<DenseLayerLayout>& layers() const { return layers_; }

  // Views into parameters() for layer `layer` (0-based; the last is the
  // output layer). Gain and shift exist for hidden layers with layer norm.
  Eigen::Map<Matrix> weight(int layer);
  Eigen::Map<const Matrix> weight(int layer) const;
  Eigen::Map<Vector> bias(int layer);
  Eigen::Map<const Vector> bias(int layer) const;
  Eigen::Map<Vector> norm_gain(int layer);
  Eigen::Map<const Vector> norm_gain(int layer) const;
  Eigen::Map<Vector> norm_shift(int layer);
  Eigen::Map<const Vector> norm_shift(int layer) const;

 private:
  BasicMlp(MlpOptions options, std::vector<DenseLayerLayout> layers, Vector parameters);

  static absl::Status Validate(const MlpOptions& options);
  static std::vector<DenseLayerLayout> Plan(const MlpOptions& options,
                                            Eigen::Index* num_parameters);
  void Initialize();
  void PrepareWorkspace(Eigen::Index rows, Workspace* workspace) const;
  void ApplyActivation(Matrix* values) const;
  void MultiplyActivationDerivative(const Matrix& activations, Matrix* delta) const;

  MlpOptions options_;
  std::vector<DenseLayerLayout> layers_;
  Vector parameters_;
};

using Mlp = BasicMlp<double>;
using MlpWorkspace = BasicMlpWorkspace<double>;
using MlpF = BasicMlp<float>;
using MlpWorkspaceF = BasicMlpWorkspace<float>;

extern template class BasicMlp<double>;
extern template class BasicMlp<float>;



}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_MLP_H_
