#ifndef DPCURATOR_CORE_LDP_SINKHORN_H_
#define DPCURATOR_CORE_LDP_SINKHORN_H_

// Entropy-regularised optimal transport between two uniformly weighted point
// clouds, the loss of the LDP deconvolving trainer (Reshetova, Chen & Ozgur,
// "Training generative models from privatized data", eq. (8);
// ldp-sinkhorn.md Sec. 1.2-1.5):
//
//   W_{p,lambda}(a, b) = min_{P in Pi(a, b)} <P, C> + lambda KL(P || a b^T),
//   C_ij = ||x_i - y_j||_p^p,  a = 1_n / n,  b = 1_m / m,
//
// with the mutual-information form of the regulariser (eq. 8; it differs
// from the -lambda H(P) form by a constant, so the plan is the same).
// Orientation (pitfall 7): rows i are the first cloud X (generated points),
// columns j the second cloud Y (privatised reports).
//
// Solved by Sinkhorn's algorithm (Cuturi 2013) in the log domain (Peyre &
// Cuturi 2019, "Computational Optimal Transport", Sec. 4.4, eqs. 4.43-4.44,
// soft-min updates stabilised by log-sum-exp), in double precision:
//   f_i <- -lambda log sum_j b_j exp((g_j - C_ij) / lambda)
//   g_j <- -lambda log sum_i a_i exp((f_i - C_ij) / lambda)
//   P_ij = a_i b_j exp((f_i + g_j - C_ij) / lambda).
// At the optimum the value equals the dual <a, f> + <b, g> (Peyre & Cuturi
// Prop. 4.4, eq. 4.30 with the KL(P || a b^T) regulariser).
//
// Not the Sinkhorn *divergence*: the deconvolving loss needs the biased
// W_{p,lambda} itself (ldp-sinkhorn.md pitfall 4, "do not debias").

#include "Eigen/Core"
#include "absl/status/statusor.h"

namespace dpcurator::ldp {

struct SinkhornOptions {
  // Entropic regulariser lambda > 0 (LdpMechanism::regularizer() for the
  // deconvolving loss: b for Laplace/p = 1, 2 sigma^2 for Gaussian/p = 2).
  double lambda = 1.0;
  // Cost exponent: 1 for ||x - y||_1, 2 for ||x - y||_2^2 (pitfall 3 and 5:
  // coordinate-wise l_p^p, not geomloss's Euclidean p = 1 cost).
  int p = 2;
  // Stop once the l1 marginal error sum_i |(P 1)_i - a_i| (the column
  // marginals are exact after each g update) is at most this.
  double tolerance = 1e-9;
  // Iteration cap (one iteration = one f and one g update). Reaching it is
  // not an error: the result says converged = false (the paper runs a fixed
  // L = 200-400 iterations, pitfall 6).
  int max_iterations = 100000;
  // Epsilon scaling (geomloss's "scaling", Schmitzer 2019 Sec. 3.2): when in
  // (0, 1), lambda is annealed from max_ij C_ij down to `lambda`, multiplied
  // by this factor after each iteration, before the iterations counted
  // against the tolerance. 0 disables it. Useful only for small lambda.
  double annealing = 0.0;
  // Iterate on the scaling vectors u = exp(f / lambda) / n, v (Sinkhorn-
  // Knopp, Cuturi 2013) with the column minima of C absorbed into the kernel
  // (Schmitzer 2019 Sec. 3.1) when that is safe: every entry of
  // (C_ij - min_i C_ij) / lambda at most 100, and annealing off. Two
  // matrix-vector products per iteration instead of 2 n m exponentials;
  // the same fixed point and stopping rule. Where unsafe (small lambda, the
  // huge C / lambda of pitfall 6 that no shift removes) or if a value stops
  // being finite, the log domain runs from the start instead. For the
  // deconvolving image loss the noise energy ||n||^2 / lambda (~ d / 2)
  // is the same for every generated point and is absorbed, leaving a range
  // of a few tens.
  bool scaling_domain = false;
};

struct SinkhornResult {
  // Dual potentials, in cost units (n and m entries).
  Eigen::VectorXd f;
  Eigen::VectorXd g;
  // The transport plan P (n x m, total mass 1).
  Eigen::MatrixXd plan;
  // The entropic OT value W_{p,lambda}, as the dual <a, f> + <b, g>
  // (second-order accurate in the potentials' error).
  double cost = 0.0;
  // The primal objective <P, C> + lambda KL(P || a b^T) of the returned plan
  // (equal to `cost` at convergence).
  double primal_cost = 0.0;
  // <P, C>, the transport part alone.
  double transport_cost = 0.0;
  // Iterations run at the final lambda (annealing iterations excluded).
  int iterations = 0;
  // ||P 1 - a||_1 + ||P^T 1 - b||_1 of the returned plan.
  double marginal_error = 0.0;
  bool converged = false;
};

// C_ij = ||x_i - y_j||_p^p for rows of X (n x d) and Y (m x d); p in {1, 2}.
absl::StatusOr<Eigen::MatrixXd> TransportCostMatrix(const Eigen::MatrixXd& x,
                                                    const Eigen::MatrixXd& y, int p);

// Entropic OT between the uniform measures on the rows of X and Y. Fails on
// empty or mismatched inputs, non-finite entries or invalid options.
absl::StatusOr<SinkhornResult> Sinkhorn(const Eigen::MatrixXd& x, const Eigen::MatrixXd& y,
                                        const SinkhornOptions& options);

// The same for a precomputed cost matrix (n x m, finite); options.p is not
// used.
absl::StatusOr<SinkhornResult> SinkhornFromCost(const Eigen::MatrixXd& cost,
                                                const SinkhornOptions& options);

// The envelope (Danskin) gradient of W_{p,lambda} with respect to the first
// cloud, the plan held fixed (ldp-sinkhorn.md Sec. 1.4, Algorithm 1 and
// pitfall 7): row i is
//   d/dx_i = sum_j P_ij dC_ij/dx_i
//          = 2 (x_i sum_j P_ij - sum_j P_ij y_j)       (p = 2)
//          = sum_j P_ij sign(x_i - y_j)                (p = 1, subgradient,
//                                                       sign(0) = 0).
// Exact for the entropic problem at the optimal plan. `plan` is n x m.
Eigen::MatrixXd TransportGradient(const Eigen::MatrixXd& x, const Eigen::MatrixXd& y,
                                  const Eigen::MatrixXd& plan, int p);

}  // namespace dpcurator::ldp

#endif  // DPCURATOR_CORE_LDP_SINKHORN_H_
