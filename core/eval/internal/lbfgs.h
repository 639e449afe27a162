#ifndef DPCURATOR_CORE_EVAL_INTERNAL_LBFGS_H_
#define DPCURATOR_CORE_EVAL_INTERNAL_LBFGS_H_

#include <functional>

#include "Eigen/Core"

namespace dpcurator::eval::internal {

// Value of a smooth objective at x; writes the gradient into *gradient.
using Objective = std::function<double(const Eigen::VectorXd& x, Eigen::VectorXd* gradient)>;

struct LbfgsOptions {
  int max_iterations = 500;
  int history = 10;
  // Stop when max |gradient_i| <= gradient_tolerance.
  double gradient_tolerance = 1e-6;
  // Or when the relative decrease of the value in one step is below this.
  double relative_function_tolerance = 1e-12;
};

struct LbfgsResult {
  double value = 0.0;
  int iterations = 0;
  bool converged = false;
};

// Limited-memory BFGS (Nocedal & Wright 2006, Algorithm 7.5 with the two-loop
// recursion of Algorithm 7.4 and the initial scaling of Eq. 7.20), with a
// backtracking Armijo line search (Algorithm 3.1, c1 = 1e-4). Curvature pairs
// with s'y <= 0 are skipped, which keeps the inverse-Hessian estimate positive
// definite for the convex objectives used here. Minimises in place.
LbfgsResult MinimizeLbfgs(const Objective& objective, Eigen::VectorXd* x,
                          const LbfgsOptions& options);

}  // namespace dpcurator::eval::internal

#endif  // DPCURATOR_CORE_EVAL_INTERNAL_LBFGS_H_
