#ifndef DPCURATOR_CORE_NN_PER_EXAMPLE_H_
#define DPCURATOR_CORE_NN_PER_EXAMPLE_H_

#include <functional>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "core/nn/mlp.h"

namespace dpcurator::nn {

// Per-example gradients of an Mlp, for DP-SGD (Abadi et al. 2016, Alg. 1;
// dp-auto-gan.md Sec. 1.2 with microbatch size r = 1): every example's
// gradient is clipped to L2 norm C before the batch sum, so its norm is needed
// without a backward pass per example.
//
// The trick (Goodfellow 2015, "Efficient per-example gradient computations";
// Lee & Kifer 2021, Sec. 3): a dense layer H = X W + 1 b^T gives example i
// the weight gradient x_i^T delta_i (an outer product; x_i is row i of X,
// delta_i = dL_i/dH_i is row i of dH), so
//   ||dW_i||_F^2 = ||x_i||^2 ||delta_i||^2,   ||db_i||^2 = ||delta_i||^2,
// and, for a hidden layer norm y = gain * xhat + shift (dy_i = dL_i/dY_i),
//   ||dgain_i||^2 = ||dy_i * xhat_i||^2,      ||dshift_i||^2 = ||dy_i||^2.
// The network's squared norm is the sum over layers and parameter groups.
// One Mlp::BackpropagateDeltas over the batch gives every delta_i.
//
// Scope: this is exact because an Mlp treats examples independently (row i
// of every cache and delta depends on row i of the input and of grad_output
// only). Layer norm normalises within a row and qualifies. Batch norm, or
// anything else that mixes examples, does not: per-example gradients (and
// the privacy argument of per-example clipping) would not be well defined.
//
// Scaling: `grad_output` row i must be dL_i/dOutput_i, the gradient of
// example i's OWN loss L_i, not of a batch mean. With a mean loss
// (1/n) sum_i L_i, pass n times that gradient. DP-SGD divides the noisy
// clipped sum by the (expected) batch size afterwards (dp-auto-gan.md 1.2).

// Buffers for per-example gradient computations. One per thread; reusing it
// for batches of the same size performs no allocation of its own.
class PerExampleWorkspace {
 public:
  PerExampleWorkspace() = default;

  // The Forward caches: call mlp.Forward(input, workspace.mlp_workspace()).
  MlpWorkspace* mlp_workspace() { return &mlp_; }

  // Of the last PerExampleGradientNorms or AddClippedGradientSum: the L2
  // norm of every example's full parameter gradient (n), and the factors
  // min(1, C / norm) that AddClippedGradientSum applied (n): 0 for an
  // example whose norm is not finite, which it drops.
  const Eigen::VectorXd& norms() const { return norms_; }
  const Eigen::VectorXd& clip_factors() const { return clip_factors_; }

 private:
  friend const Eigen::VectorXd& PerExampleGradientNorms(
      const Mlp& mlp, const Eigen::Ref<const Eigen::MatrixXd>& grad_output,
      PerExampleWorkspace* workspace);
  friend absl::Status BatchClippedGradientSum(
      const Mlp& mlp, Eigen::Index num_rows, const std::function<void(Eigen::Index, Eigen::Index,
                                                                        Eigen::MatrixXd*)>& rows,
      const std::function<void(const Eigen::MatrixXd&, const Eigen::MatrixXd&,
                               Eigen::MatrixXd*)>& loss_gradient,
      double clip_norm, int max_threads, Eigen::VectorXd* sum, PerExampleWorkspace* report);
  friend absl::Status AddClippedGradientSum(
      const Mlp& mlp, const Eigen::Ref<const Eigen::MatrixXd>& grad_output,
      double clip_norm, PerExampleWorkspace* workspace, Eigen::VectorXd* grad_params);

  MlpWorkspace mlp_;
  Eigen::VectorXd norms_;
  Eigen::VectorXd clip_factors_;
  // 1 for an example whose norm is finite, 0 for one dropped (n).
  Eigen::VectorXd kept_;
  // Per-example norm terms (n x terms) and the kept rows of a layer input.
  Eigen::MatrixXd norm_terms_;
  Eigen::VectorXd norm_scratch_;
  Eigen::MatrixXd kept_input_;
  // scaled_[l]: clip_factors-weighted rows of layer l's delta (n x fan_out).
  std::vector<Eigen::MatrixXd> scaled_;
};

// The L2 norm of each example's gradient over all of mlp's parameters,
// ||grad_theta L_i||_2 for i = 1..n, from the identity above: one
// BackpropagateDeltas over the batch plus row-wise norms, no per-example
// gradient materialised. Requires a Forward of `mlp` on
// workspace->mlp_workspace() for the same n examples; `grad_output` is
// n x output_dim, per-example scaled (see Scaling above). Returns
// workspace->norms().
const Eigen::VectorXd& PerExampleGradientNorms(
    const Mlp& mlp, const Eigen::Ref<const Eigen::MatrixXd>& grad_output,
    PerExampleWorkspace* workspace);

// Adds the sum of clipped per-example gradients,
//   sum_i min(1, C / ||g_i||) g_i,   g_i = grad_theta L_i,
// (Abadi et al. 2016, Alg. 1, "clip gradient"; dp-auto-gan.md 1.2 CLIP) to
// `grad_params` (size mlp.num_parameters(), Mlp::parameters() layout, the
// same as Mlp::Backward; the caller zeroes it). A zero gradient gets factor 1.
// An example whose norm is not finite (overflow in its forward or backward
// values) contributes exactly zero, by selection (factor 0 and its rows
// zeroed, never 0 * inf); the sum of the others is finite, each term having
// norm at most C.
// By linearity the clipped sum is the batch gradient of the rows scaled by
// their factors: one GEMM per dense layer, dW = X^T diag(c) dH. Same
// preconditions as PerExampleGradientNorms, whose results it leaves in
// `workspace` too. The caller adds the Gaussian noise N(0, C^2 sigma^2 I).
// InvalidArgument if `clip_norm` is not finite and positive.
absl::Status AddClippedGradientSum(const Mlp& mlp,
                                   const Eigen::Ref<const Eigen::MatrixXd>& grad_output,
                                   double clip_norm, PerExampleWorkspace* workspace,
                                   Eigen::VectorXd* grad_params);

// A whole batch's clipped sum on up to two cores (issue 39): the
// sum_i min(1, C / ||g_i||) g_i of AddClippedGradientSum over `num_rows`
// examples, computed a chunk of rows at a time. The batch is cut into
// kClippedSumShards contiguous shards of rows (shard s: rows
// [s n / S, (s + 1) n / S)) and each shard into chunks of
// kClippedSumChunkRows; each shard sums its chunks in order into its own
// vector, on whichever of at most `max_threads` threads (the caller's
// included; at most the machine's) takes it, and the shards' sums are added
// in shard order. The cut depends on num_rows alone, never on the threads or
// their timing, so a fixed input gives the same bits on one core or two.
// Chunks keep every buffer about 1 MiB at 2,142 wide (a 4,096-row batch is
// 70 MB a copy), near the core's cache, and reused chunk after chunk instead
// of fresh pages faulted in for every copy: on the binary shapes 64 rows ran
// about 1.5x faster than 512 (bench/step_bench), and the weight gradient's
// GEMM (inner dimension 64) still runs near the dgemm peak.
//
// `rows(first, count, &out)` sets out (count x mlp.input_dim()) to rows
// [first, first + count) of the batch; `loss_gradient(outputs, rows, &out)`
// sets out (count x output_dim) to dL_i/dOutput_i of each row's OWN loss
// (Scaling above). Both are called from two threads at once, on disjoint
// rows: they must only read shared state. Every row is visited exactly
// once, whatever its values: no early return, no branch on them.
//
// Sets *sum (resized to mlp.num_parameters(), zeroed first; 0 rows give
// zeros). With `report`, sets its norms() and clip_factors() for all rows.
// InvalidArgument if `clip_norm` is not finite and positive, before any row
// is read.
inline constexpr int kClippedSumShards = 2;
inline constexpr Eigen::Index kClippedSumChunkRows = 64;
absl::Status BatchClippedGradientSum(
    const Mlp& mlp, Eigen::Index num_rows,
    const std::function<void(Eigen::Index first, Eigen::Index count, Eigen::MatrixXd* out)>&
        rows,
    const std::function<void(const Eigen::MatrixXd& outputs, const Eigen::MatrixXd& rows,
                             Eigen::MatrixXd* out)>& loss_gradient,
    double clip_norm, int max_threads, Eigen::VectorXd* sum,
    PerExampleWorkspace* report = nullptr);

}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_PER_EXAMPLE_H_
