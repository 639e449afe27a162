#include "core/nn/per_example.h"

#include <cmath>

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

// Number of norm terms of one example's gradient: ||dW|| and ||db|| per
// dense layer, ||dgain|| and ||dshift|| more per layer norm.
int NumNormTerms(const Mlp& mlp) {
  int terms = 0;
  for (const DenseLayerLayout& layer : mlp.layers()) terms += layer.gain_offset >= 0 ? 4 : 2;
  return terms;
}

// `rows` with every row whose `kept` entry is 0 replaced by exact zeros, by
// selection: 0 * inf would be NaN, a selected 0 is 0.
void KeepRows(const Eigen::Ref<const Eigen::MatrixXd>& rows, const Eigen::VectorXd& kept,
              Eigen::MatrixXd* out) {
  *out = (kept.replicate(1, rows.cols()).array() != 0.0).select(rows, 0.0);
}

}  // namespace

const Eigen::VectorXd& PerExampleGradientNorms(
    const Mlp& mlp, const Eigen::Ref<const Eigen::MatrixXd>& grad_output,
    PerExampleWorkspace* workspace) {
  MlpWorkspace& ws = workspace->mlp_;
  eigen_assert(grad_output.rows() == ws.layer_input(0).rows());
  mlp.BackpropagateDeltas(grad_output, &ws);

  // ||g_i||^2 is the sum over layers and parameter groups of squared terms.
  // Each term is taken as a norm of its own with Eigen's blueNorm (Blue 1978:
  // one pass with scaling, so no square overflows or underflows), and the
  // terms are combined by blueNorm again: a norm is inf only when the
  // gradient itself is beyond the double range. Before, ||x_i||^2 could
  // overflow while ||delta_i|| was 0, and 0 * inf made the norm NaN (issue
  // 23). A non-finite norm stays non-finite here; AddClippedGradientSum
  // drops that example by selection.
  Eigen::MatrixXd& terms = workspace->norm_terms_;
  terms.resize(grad_output.rows(), NumNormTerms(mlp));
  int column = 0;
  for (int l = 0; l < mlp.num_layers(); ++l) {
    const Eigen::Ref<const Eigen::MatrixXd> delta = LayerDelta(mlp, l, grad_output, ws);
    const Eigen::MatrixXd& x = ws.layer_input(l);
    // Goodfellow 2015: dW_i = x_i^T delta_i, so ||dW_i||_F = ||x_i|| ||delta_i||;
    // db_i = delta_i.
    terms.col(column) = delta.rowwise().blueNorm();
    terms.col(column + 1) = terms.col(column).cwiseProduct(x.rowwise().blueNorm());
    column += 2;
    if (mlp.layers()[l].gain_offset >= 0) {
      // Ba et al. 2016 (y = gain * xhat + shift): dgain_i = dy_i * xhat_i,
      // dshift_i = dy_i.
      const Eigen::MatrixXd& dy = ws.norm_output_delta(l);
      terms.col(column) = dy.cwiseProduct(ws.normalized(l)).rowwise().blueNorm();
      terms.col(column + 1) = dy.rowwise().blueNorm();
      column += 2;
    }
  }
  workspace->norms_ = terms.rowwise().blueNorm();
  // blueNorm of a row holding NaN may come out finite on some paths of its
  // scaling; a NaN term must make the norm non-finite, so say so explicitly.
  workspace->norms_ =
      (terms.array().isNaN().rowwise().any()).select(
          Eigen::VectorXd::Constant(terms.rows(), std::nan("")), workspace->norms_);
  return workspace->norms_;
}

absl::Status AddClippedGradientSum(const Mlp& mlp,
                                   const Eigen::Ref<const Eigen::MatrixXd>& grad_output,
                                   double clip_norm, PerExampleWorkspace* workspace,
                                   Eigen::VectorXd* grad_params) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(clip_norm, "Clip norm"));
  eigen_assert(grad_params != nullptr && grad_params->size() == mlp.num_parameters());
  const Eigen::VectorXd& norms = PerExampleGradientNorms(mlp, grad_output, workspace);

  // Kept: examples whose norm is finite. The others (a forward or backward
  // value, or the norm, overflowed: only a network far outside the declared
  // bounds gets there) contribute exactly zero, by selection rather than by a
  // factor, since 0 * inf is NaN (issue 23's row oracle). Dropping an example
  // is a per-example function, so the sum's sensitivity stays C (2C).
  Eigen::VectorXd& kept = workspace->kept_;
  kept = norms.array().isFinite().cast<double>();

  // min(1, C / ||g_i||) = C / max(||g_i||, C): no division by zero, and
  // exactly 1 for every example already inside the ball; 0 when dropped.
  Eigen::VectorXd& factors = workspace->clip_factors_;
  factors = (kept.array() != 0.0)
                .select(clip_norm / norms.array().max(clip_norm), 0.0)
                .matrix();

  const MlpWorkspace& ws = workspace->mlp_;
  workspace->scaled_.resize(mlp.num_layers());
  double* g = grad_params->data();
  for (int l = 0; l < mlp.num_layers(); ++l) {
    const DenseLayerLayout& layer = mlp.layers()[l];
    const Eigen::Ref<const Eigen::MatrixXd> delta = LayerDelta(mlp, l, grad_output, ws);
    Eigen::MatrixXd& x = workspace->kept_input_;
    KeepRows(ws.layer_input(l), kept, &x);
    Eigen::MatrixXd& scaled = workspace->scaled_[l];

    // Row i of every delta is linear in row i of grad_output, so scaling it
    // by c_i scales g_i by c_i: sum_i c_i x_i^T delta_i = X^T diag(c) dH,
    // sum_i c_i delta_i = dH^T c. Dropped rows are zero in X and in diag(c) dH.
    KeepRows(factors.asDiagonal() * delta, kept, &scaled);
    Eigen::Map<Eigen::MatrixXd> grad_w(g + layer.weight_offset, layer.fan_in, layer.fan_out);
    Eigen::Map<Eigen::VectorXd> grad_b(g + layer.bias_offset, layer.fan_out);
    grad_w.noalias() += x.transpose() * scaled;
    grad_b.noalias() += scaled.colwise().sum().transpose();

    if (layer.gain_offset >= 0) {
      // dgain = sum_i c_i dy_i * xhat_i, dshift = sum_i c_i dy_i.
      KeepRows(factors.asDiagonal() * ws.norm_output_delta(l), kept, &scaled);
      KeepRows(ws.normalized(l), kept, &x);
      Eigen::Map<Eigen::VectorXd> grad_gain(g + layer.gain_offset, layer.fan_out);
      Eigen::Map<Eigen::VectorXd> grad_shift(g + layer.shift_offset, layer.fan_out);
      grad_gain.noalias() += scaled.cwiseProduct(x).colwise().sum().transpose();
      grad_shift.noalias() += scaled.colwise().sum().transpose();
    }
  }
  return absl::OkStatus();
}

}  // namespace dpcurator::nn
