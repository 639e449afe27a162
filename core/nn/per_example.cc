#include "core/nn/per_example.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "core/nn/gemm.h"
#include "core/util/shard_pool.h"
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
// selection: 0 * inf would be NaN, a selected 0 is 0. With `factors`, the
// kept rows are scaled by them (diag(factors) rows). Plain loops over the
// column-major storage, which the compiler vectorises (Eigen 3.4 does not
// vectorise select(), and its replicate() made a temporary of the batch).
void KeepRows(const Eigen::Ref<const Eigen::MatrixXd>& rows, const Eigen::VectorXd& kept,
              Eigen::MatrixXd* out) {
  out->resize(rows.rows(), rows.cols());
  const Eigen::Index n = rows.rows();
  const double* keep = kept.data();
  for (Eigen::Index j = 0; j < rows.cols(); ++j) {
    const double* in = rows.col(j).data();
    double* to = out->col(j).data();
    for (Eigen::Index i = 0; i < n; ++i) to[i] = keep[i] != 0.0 ? in[i] : 0.0;
  }
}
void KeepScaledRows(const Eigen::Ref<const Eigen::MatrixXd>& rows, const Eigen::VectorXd& kept,
                    const Eigen::VectorXd& factors, Eigen::MatrixXd* out) {
  out->resize(rows.rows(), rows.cols());
  const Eigen::Index n = rows.rows();
  const double* keep = kept.data();
  const double* factor = factors.data();
  for (Eigen::Index j = 0; j < rows.cols(); ++j) {
    const double* in = rows.col(j).data();
    double* to = out->col(j).data();
    for (Eigen::Index i = 0; i < n; ++i) to[i] = keep[i] != 0.0 ? factor[i] * in[i] : 0.0;
  }
}

// The L2 norm of every row of `m`, into `out` (m.rows()), without overflow
// or harmful underflow: the scaling idea of Blue 1978 (Eigen's blueNorm)
// with one power-of-two scale per row. Pass 1 finds the row's largest
// |m_ij|; pass 2 sums the squares of m_ij 2^-e with 2^(e-1) <= max < 2^e
// (exact multiplications, each square <= 1, so the sum of w of them cannot
// overflow), and the norm is 2^e sqrt(sum): inf only when the norm itself is
// beyond the double range. Both passes walk the column-major storage in
// order, a row at a time per lane; Eigen's rowwise().blueNorm() walked each
// row across columns a batch apart, and took most of a 2,142-wide dp_sgd
// step (issue 39). A row holding NaN gets NaN (the NaN survives the sum); a
// row whose largest entry is infinite gets that entry (inf, or NaN).
void RowNorms(const Eigen::Ref<const Eigen::MatrixXd>& m, Eigen::VectorXd* scratch,
              Eigen::Ref<Eigen::VectorXd> out) {
  const Eigen::Index n = m.rows();
  Eigen::VectorXd& largest = *scratch;
  largest.setZero(n);
  double* big = largest.data();
  for (Eigen::Index j = 0; j < m.cols(); ++j) {
    const double* in = m.col(j).data();
    // NaN compares false and is skipped here; the sum below carries it.
    for (Eigen::Index i = 0; i < n; ++i) {
      const double a = std::abs(in[i]);
      big[i] = a > big[i] ? a : big[i];
    }
  }
  // The scales 2^-e, clamped so that 2^-e stays finite for the smallest
  // (subnormal) maxima: there the scaled entries are small but far from
  // underflow.
  double* scale = out.data();
  for (Eigen::Index i = 0; i < n; ++i) {
    int e = 0;
    std::frexp(std::isfinite(big[i]) ? big[i] : 1.0, &e);
    scale[i] = std::ldexp(1.0, -std::max(e, -1000));
  }
  Eigen::VectorXd sums = Eigen::VectorXd::Zero(n);
  double* sum = sums.data();
  for (Eigen::Index j = 0; j < m.cols(); ++j) {
    const double* in = m.col(j).data();
    for (Eigen::Index i = 0; i < n; ++i) {
      const double v = in[i] * scale[i];
      sum[i] += v * v;
    }
  }
  for (Eigen::Index i = 0; i < n; ++i) {
    scale[i] = std::isfinite(big[i]) ? std::sqrt(sum[i]) / scale[i] : big[i];
  }
}

// std::thread::hardware_concurrency() reads sysfs on every call (glibc); a
// step asks once per batch, so it is read once per process.
int HardwareThreads() {
  static const int threads =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return threads;
}

}  // namespace

const Eigen::VectorXd& PerExampleGradientNorms(
    const Mlp& mlp, const Eigen::Ref<const Eigen::MatrixXd>& grad_output,
    PerExampleWorkspace* workspace) {
  MlpWorkspace& ws = workspace->mlp_;
  eigen_assert(grad_output.rows() == ws.layer_input(0).rows());
  mlp.BackpropagateDeltas(grad_output, &ws);

  // ||g_i||^2 is the sum over layers and parameter groups of squared terms.
  // Each term is taken as a norm of its own, scaled so that no square
  // overflows or underflows (RowNorms, after Blue 1978), and the terms are
  // combined the same way: a norm is inf only when the gradient itself is
  // beyond the double range. Before, ||x_i||^2 could overflow while
  // ||delta_i|| was 0, and 0 * inf made the norm NaN (issue 23). A
  // non-finite norm stays non-finite here; AddClippedGradientSum drops that
  // example by selection.
  Eigen::MatrixXd& terms = workspace->norm_terms_;
  terms.resize(grad_output.rows(), NumNormTerms(mlp));
  Eigen::VectorXd& scratch = workspace->norm_scratch_;
  int column = 0;
  for (int l = 0; l < mlp.num_layers(); ++l) {
    const Eigen::Ref<const Eigen::MatrixXd> delta = LayerDelta(mlp, l, grad_output, ws);
    const Eigen::MatrixXd& x = ws.layer_input(l);
    // Goodfellow 2015: dW_i = x_i^T delta_i, so ||dW_i||_F = ||x_i|| ||delta_i||;
    // db_i = delta_i.
    RowNorms(delta, &scratch, terms.col(column));
    RowNorms(x, &scratch, terms.col(column + 1));
    terms.col(column + 1).array() *= terms.col(column).array();
    column += 2;
    if (mlp.layers()[l].gain_offset >= 0) {
      // Ba et al. 2016 (y = gain * xhat + shift): dgain_i = dy_i * xhat_i,
      // dshift_i = dy_i.
      const Eigen::MatrixXd& dy = ws.norm_output_delta(l);
      RowNorms(dy.cwiseProduct(ws.normalized(l)), &scratch, terms.col(column));
      RowNorms(dy, &scratch, terms.col(column + 1));
      column += 2;
    }
  }
  workspace->norms_.resize(terms.rows());
  RowNorms(terms, &scratch, workspace->norms_);
  // A NaN term must make the norm non-finite, whatever a scaling path does
  // with it (an infinite term beside it gives inf); say so explicitly.
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
    KeepScaledRows(delta, kept, factors, &scaled);
    Eigen::Map<Eigen::MatrixXd> grad_w(g + layer.weight_offset, layer.fan_in, layer.fan_out);
    Eigen::Map<Eigen::VectorXd> grad_b(g + layer.bias_offset, layer.fan_out);
    Gemm(true, x, false, scaled, 1.0, grad_w);
    grad_b.noalias() += scaled.colwise().sum().transpose();

    if (layer.gain_offset >= 0) {
      // dgain = sum_i c_i dy_i * xhat_i, dshift = sum_i c_i dy_i.
      KeepScaledRows(ws.norm_output_delta(l), kept, factors, &scaled);
      KeepRows(ws.normalized(l), kept, &x);
      Eigen::Map<Eigen::VectorXd> grad_gain(g + layer.gain_offset, layer.fan_out);
      Eigen::Map<Eigen::VectorXd> grad_shift(g + layer.shift_offset, layer.fan_out);
      grad_gain.noalias() += scaled.cwiseProduct(x).colwise().sum().transpose();
      grad_shift.noalias() += scaled.colwise().sum().transpose();
    }
  }
  return absl::OkStatus();
}

absl::Status BatchClippedGradientSum(
    const Mlp& mlp, Eigen::Index num_rows,
    const std::function<void(Eigen::Index, Eigen::Index, Eigen::MatrixXd*)>& rows,
    const std::function<void(const Eigen::MatrixXd&, const Eigen::MatrixXd&, Eigen::MatrixXd*)>&
        loss_gradient,
    double clip_norm, int max_threads, Eigen::VectorXd* sum, PerExampleWorkspace* report) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(clip_norm, "Clip norm"));
  eigen_assert(sum != nullptr && num_rows >= 0);
  sum->setZero(mlp.num_parameters());
  if (report != nullptr) {
    report->norms_.resize(num_rows);
    report->clip_factors_.resize(num_rows);
  }
  if (num_rows == 0) return absl::OkStatus();
  // Shard 0 sums into *sum, the others into their own vectors (the extra
  // parameter vector the step's footprint counts, plan/releases.cc).
  std::vector<Eigen::VectorXd> partial(kClippedSumShards - 1);
  std::vector<absl::Status> outcomes(kClippedSumShards);
  // A throw in a shard (std::bad_alloc from a buffer) is carried back to the
  // caller's thread and rethrown there, as it would have been on one
  // thread: escaping a pool thread would end the process, and the server
  // turns a throw after the rows were read into a charged failure
  // (server/service.h, Guarded).
  std::vector<std::exception_ptr> thrown(kClippedSumShards);
  auto sum_shard = [&](int shard) {
    const Eigen::Index first = num_rows * shard / kClippedSumShards;
    const Eigen::Index last = num_rows * (shard + 1) / kClippedSumShards;
    Eigen::VectorXd& out = shard == 0 ? *sum : partial[shard - 1];
    if (shard > 0) out.setZero(mlp.num_parameters());
    PerExampleWorkspace workspace;
    Eigen::MatrixXd chunk, grad_output;
    for (Eigen::Index start = first; start < last; start += kClippedSumChunkRows) {
      const Eigen::Index count = std::min(kClippedSumChunkRows, last - start);
      rows(start, count, &chunk);
      const Eigen::MatrixXd& outputs = mlp.Forward(chunk, workspace.mlp_workspace());
      loss_gradient(outputs, chunk, &grad_output);
      // Fails only on the clip norm, checked above: every chunk runs.
      absl::Status added = AddClippedGradientSum(mlp, grad_output, clip_norm, &workspace, &out);
      if (!added.ok() && outcomes[shard].ok()) outcomes[shard] = std::move(added);
      if (report != nullptr) {
        report->norms_.segment(start, count) = workspace.norms();
        report->clip_factors_.segment(start, count) = workspace.clip_factors();
      }
    }
  };
  auto run_shard = [&](int shard) {
    try {
      sum_shard(shard);
    } catch (...) {
      thrown[shard] = std::current_exception();
    }
  };
  const int threads =
      std::clamp(std::min(max_threads, HardwareThreads()), 1, kClippedSumShards);
  ShardPool pool(threads);
  pool.Run(kClippedSumShards, run_shard);
  for (const std::exception_ptr& error : thrown) {
    if (error) std::rethrow_exception(error);
  }
  for (const absl::Status& outcome : outcomes) DPC_RETURN_IF_ERROR(outcome);
  for (const Eigen::VectorXd& shard_sum : partial) *sum += shard_sum;
  return absl::OkStatus();
}

}  // namespace dpcurator::nn
