#include "core/nn/per_example.h"

#include "absl/status/status.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::nn {
namespace {

// dL_i/dH of layer `layer` for every example: grad_output for the (linear)
// output layer, the workspace's delta for hidden layers.
Eigen::Ref<const Eigen::MatrixXd> LayerDelta(
    const Mlp& mlp, int layer, const Eigen::Ref<const Eigen::MatrixXd>& grad_output,
    const MlpWorkspace& ws) {
  if (mlp.layers()[layer].hidden) return ws.hidden_delta(layer);
  return grad_output;
}

}  // namespace

const Eigen::VectorXd& PerExampleGradientNorms(
    const Mlp& mlp, const Eigen::Ref<const Eigen::MatrixXd>& grad_output,
    PerExampleWorkspace* workspace) {
  MlpWorkspace& ws = workspace->mlp_;
  eigen_assert(grad_output.rows() == ws.layer_input(0).rows());
  mlp.BackpropagateDeltas(grad_output, &ws);

  Eigen::VectorXd& squared = workspace->norms_;
  squared.setZero(grad_output.rows());
  for (int l = 0; l < mlp.num_layers(); ++l) {
    const Eigen::Ref<const Eigen::MatrixXd> delta = LayerDelta(mlp, l, grad_output, ws);
    const Eigen::MatrixXd& x = ws.layer_input(l);
    // Goodfellow 2015: dW_i = x_i^T delta_i, so ||dW_i||_F^2 = ||x_i||^2
    // ||delta_i||^2; db_i = delta_i adds ||delta_i||^2.
    squared.array() +=
        delta.rowwise().squaredNorm().array() * (x.rowwise().squaredNorm().array() + 1.0);
    if (mlp.layers()[l].gain_offset >= 0) {
      // Ba et al. 2016 (y = gain * xhat + shift): dgain_i = dy_i * xhat_i,
      // dshift_i = dy_i.
      const Eigen::MatrixXd& dy = ws.norm_output_delta(l);
      squared.array() += dy.cwiseProduct(ws.normalized(l)).rowwise().squaredNorm().array() +
                         dy.rowwise().squaredNorm().array();
    }
  }
  squared = squared.cwiseSqrt();  // now the norms, in place
  return workspace->norms_;
}

absl::Status AddClippedGradientSum(const Mlp& mlp,
                                   const Eigen::Ref<const Eigen::MatrixXd>& grad_output,
                                   double clip_norm, PerExampleWorkspace* workspace,
                                   Eigen::VectorXd* grad_params) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(clip_norm, "Clip norm"));
  eigen_assert(grad_params != nullptr && grad_params->size() == mlp.num_parameters());
  const Eigen::VectorXd& norms = PerExampleGradientNorms(mlp, grad_output, workspace);

  // min(1, C / ||g_i||) = C / max(||g_i||, C): no division by zero, and
  // exactly 1 for every example already inside the ball.
  Eigen::VectorXd& factors = workspace->clip_factors_;
  factors.resize(norms.size());
  factors.array() = clip_norm / norms.array().max(clip_norm);

  const MlpWorkspace& ws = workspace->mlp_;
  workspace->scaled_.resize(mlp.num_layers());
  double* g = grad_params->data();
  for (int l = 0; l < mlp.num_layers(); ++l) {
    const DenseLayerLayout& layer = mlp.layers()[l];
    const Eigen::Ref<const Eigen::MatrixXd> delta = LayerDelta(mlp, l, grad_output, ws);
    const Eigen::MatrixXd& x = ws.layer_input(l);
    Eigen::MatrixXd& scaled = workspace->scaled_[l];

    // Row i of every delta is linear in row i of grad_output, so scaling it
    // by c_i scales g_i by c_i: sum_i c_i x_i^T delta_i = X^T diag(c) dH,
    // sum_i c_i delta_i = dH^T c.
    scaled.noalias() = factors.asDiagonal() * delta;
    Eigen::Map<Eigen::MatrixXd> grad_w(g + layer.weight_offset, layer.fan_in, layer.fan_out);
    Eigen::Map<Eigen::VectorXd> grad_b(g + layer.bias_offset, layer.fan_out);
    grad_w.noalias() += x.transpose() * scaled;
    grad_b.noalias() += scaled.colwise().sum().transpose();

    if (layer.gain_offset >= 0) {
      // dgain = sum_i c_i dy_i * xhat_i, dshift = sum_i c_i dy_i.
      scaled.noalias() = factors.asDiagonal() * ws.norm_output_delta(l);
      Eigen::Map<Eigen::VectorXd> grad_gain(g + layer.gain_offset, layer.fan_out);
      Eigen::Map<Eigen::VectorXd> grad_shift(g + layer.shift_offset, layer.fan_out);
      grad_gain.noalias() += scaled.cwiseProduct(ws.normalized(l)).colwise().sum().transpose();
      grad_shift.noalias() += scaled.colwise().sum().transpose();
    }
  }
  return absl::OkStatus();
}

}  // namespace dpcurator::nn
