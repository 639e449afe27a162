#include "core/eval/internal/lbfgs.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <vector>

namespace dpcurator::eval::internal {
namespace {
constexpr double kArmijoC1 = 1e-4;
constexpr double kBacktrackFactor = 0.5;
constexpr int kMaxLineSearchSteps = 60;
}  // namespace

LbfgsResult MinimizeLbfgs(const Objective& objective, Eigen::VectorXd* x,
                          const LbfgsOptions& options) {
  LbfgsResult result;
  Eigen::VectorXd gradient(x->size());
  double value = objective(*x, &gradient);
  std::deque<Eigen::VectorXd> s_history, y_history;
  std::deque<double> rho_history;
  Eigen::VectorXd direction(x->size()), candidate(x->size()), candidate_gradient(x->size());

  for (int iteration = 0; iteration < options.max_iterations; ++iteration) {
    if (x->size() == 0 || gradient.lpNorm<Eigen::Infinity>() <= options.gradient_tolerance) {
      result.converged = true;
      break;
    }
    // Two-loop recursion: direction = -H_k gradient.
    direction = -gradient;
    const int m = static_cast<int>(s_history.size());
    std::vector<double> alpha(m);
    for (int i = m - 1; i >= 0; --i) {
      alpha[i] = rho_history[i] * s_history[i].dot(direction);
      direction -= alpha[i] * y_history[i];
    }
    if (m > 0) {
      direction *= s_history.back().dot(y_history.back()) / y_history.back().squaredNorm();
    } else {
      direction /= std::max(1.0, gradient.norm());  // First step: unit length at most.
    }
    for (int i = 0; i < m; ++i) {
      const double beta = rho_history[i] * y_history[i].dot(direction);
      direction += (alpha[i] - beta) * s_history[i];
    }
    double slope = gradient.dot(direction);
    if (slope >= 0) {  // Not a descent direction: restart from steepest descent.
      s_history.clear();
      y_history.clear();
      rho_history.clear();
      direction = -gradient / std::max(1.0, gradient.norm());
      slope = gradient.dot(direction);
    }
    double step = 1.0;
    double candidate_value = 0.0;
    bool accepted = false;
    for (int k = 0; k < kMaxLineSearchSteps; ++k) {
      candidate = *x + step * direction;
      candidate_value = objective(candidate, &candidate_gradient);
      if (std::isfinite(candidate_value) &&
          candidate_value <= value + kArmijoC1 * step * slope) {
        accepted = true;
        break;
      }
      step *= kBacktrackFactor;
    }
    result.iterations = iteration + 1;
    if (!accepted) break;  // No progress possible at machine precision.
    Eigen::VectorXd s = candidate - *x;
    Eigen::VectorXd y = candidate_gradient - gradient;
    const double decrease = value - candidate_value;
    *x = candidate;
    gradient = candidate_gradient;
    const double previous_value = value;
    value = candidate_value;
    const double sy = s.dot(y);
    if (sy > 1e-12 * s.norm() * y.norm()) {
      s_history.push_back(std::move(s));
      y_history.push_back(std::move(y));
      rho_history.push_back(1.0 / sy);
      if (static_cast<int>(s_history.size()) > options.history) {
        s_history.pop_front();
        y_history.pop_front();
        rho_history.pop_front();
      }
    }
    if (decrease <= options.relative_function_tolerance *
                        std::max({std::abs(previous_value), std::abs(value), 1.0})) {
      result.converged = true;
      break;
    }
  }
  if (!result.converged && gradient.lpNorm<Eigen::Infinity>() <= options.gradient_tolerance) {
    result.converged = true;
  }
  result.value = value;
  return result;
}

}  // namespace dpcurator::eval::internal
