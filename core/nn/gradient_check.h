#ifndef DPCURATOR_CORE_NN_GRADIENT_CHECK_H_
#define DPCURATOR_CORE_NN_GRADIENT_CHECK_H_

#include <functional>

#include "Eigen/Core"

namespace dpcurator::nn {

// Finite-difference verification of hand-written gradients (the trainers
// have no autograd: dp-merf.md Sec. 1.5 and pearl.md Sec. 1.2 G derive them
// by hand). For tests.

struct GradientCheckOptions {
  // Central-difference step h. The error is O(h^2) truncation plus
  // O(eps_machine |f| / h) rounding; h ~ eps_machine^(1/3) balances them.
  double step = 1e-5;
  // Relative errors divide by max(|analytic|, |numeric|, denominator_floor),
  // so coordinates whose true gradient is ~0 are judged by absolute error.
  double denominator_floor = 1e-6;
};

struct GradientCheckResult {
  // max_i |a_i - n_i| / max(|a_i|, |n_i|, floor).
  double max_relative_error = 0.0;
  // ||a - n||_2 / max(||a||_2, ||n||_2, floor).
  double norm_relative_error = 0.0;
  // Coordinate with the largest relative error, and both values there.
  Eigen::Index worst_index = -1;
  double analytic_at_worst = 0.0;
  double numeric_at_worst = 0.0;
  Eigen::VectorXd numeric;
};

// Central differences: n_i = (f(x + h e_i) - f(x - h e_i)) / (2h).
Eigen::VectorXd NumericalGradient(const std::function<double(const Eigen::VectorXd&)>& f,
                                  const Eigen::VectorXd& x, double step);

// Compares `analytic` (df/dx at `x`) with NumericalGradient.
GradientCheckResult CheckGradient(const std::function<double(const Eigen::VectorXd&)>& f,
                                  const Eigen::VectorXd& x,
                                  const Eigen::VectorXd& analytic,
                                  const GradientCheckOptions& options = {});

}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_GRADIENT_CHECK_H_
