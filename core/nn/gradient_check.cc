#include "core/nn/gradient_check.h"

#include <algorithm>
#include <cmath>

namespace dpcurator::nn {

Eigen::VectorXd NumericalGradient(const std::function<double(const Eigen::VectorXd&)>& f,
                                  const Eigen::VectorXd& x, double step) {
  Eigen::VectorXd numeric(x.size());
  Eigen::VectorXd probe = x;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    probe(i) = x(i) + step;
    const double up = f(probe);
    probe(i) = x(i) - step;
    const double down = f(probe);
    probe(i) = x(i);
    numeric(i) = (up - down) / (2.0 * step);
  }
  return numeric;
}

GradientCheckResult CheckGradient(const std::function<double(const Eigen::VectorXd&)>& f,
                                  const Eigen::VectorXd& x,
                                  const Eigen::VectorXd& analytic,
                                  const GradientCheckOptions& options) {
  GradientCheckResult result;
  result.numeric = NumericalGradient(f, x, options.step);
  if (analytic.size() != x.size()) {
    // A gradient of the wrong shape is infinitely wrong.
    result.max_relative_error = result.norm_relative_error = INFINITY;
    return result;
  }
  const double floor = options.denominator_floor;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    const double a = analytic(i);
    const double n = result.numeric(i);
    const double error = std::abs(a - n) / std::max({std::abs(a), std::abs(n), floor});
    // "!(error <= max)" also catches NaN.
    if (!(error <= result.max_relative_error) || result.worst_index < 0) {
      result.max_relative_error = std::isnan(error) ? INFINITY : error;
      result.worst_index = i;
      result.analytic_at_worst = a;
      result.numeric_at_worst = n;
      if (std::isnan(error)) break;
    }
  }
  const double norm_error = (analytic - result.numeric).norm() /
                            std::max({analytic.norm(), result.numeric.norm(), floor});
  result.norm_relative_error = std::isnan(norm_error) ? INFINITY : norm_error;
  return result;
}

}  // namespace dpcurator::nn
