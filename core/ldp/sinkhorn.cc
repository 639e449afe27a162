#include "core/ldp/sinkhorn.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::ldp {
namespace {

// Up to this dimension the squared-l2 cost is summed coordinate by coordinate
// (exact); above it, one matrix product is faster.
constexpr Eigen::Index kDirectCostMaxDimension = 32;

absl::Status ValidateOptions(const SinkhornOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(options.lambda, "Sinkhorn lambda"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(options.tolerance, "Sinkhorn tolerance"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.max_iterations, "Sinkhorn iterations"));
  if (!std::isfinite(options.annealing) || options.annealing < 0 || options.annealing >= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Sinkhorn annealing must be in [0, 1), got ", options.annealing));
  }
  return absl::OkStatus();
}

absl::Status ValidateCostExponent(int p) {
  if (p != 1 && p != 2) {
    return absl::InvalidArgumentError(absl::StrCat("Cost exponent must be 1 or 2, got ", p));
  }
  return absl::OkStatus();
}

// The log-domain half steps of Peyre & Cuturi 2019, eqs. 4.43-4.44, with
// uniform weights a_i = 1/n, b_j = 1/m and the scaled cost Cs = C / lambda:
//   f_i = -lambda [ LSE_j (g_j / lambda - Cs_ij) - log m ]
//   g_j = -lambda [ LSE_i (f_i / lambda - Cs_ij) - log n ]
// where LSE(v) = max(v) + log sum exp(v - max(v)) (the stabilisation).
// Cs is column-major, so both passes stream it column by column.
class LogDomainSolver {
 public:
  explicit LogDomainSolver(const Eigen::MatrixXd& cost) : cost_(cost) {
    scaled_.resize(cost.rows(), cost.cols());
    row_max_.resize(cost.rows());
    row_sum_.resize(cost.rows());
  }

  void SetLambda(double lambda) {
    lambda_ = lambda;
    scaled_ = cost_ * (1.0 / lambda);
  }

  // f from g (row soft-min).
  void UpdateF(const Eigen::VectorXd& g, Eigen::VectorXd* f) {
    const Eigen::Index m = scaled_.cols();
    row_max_.setConstant(-std::numeric_limits<double>::infinity());
    for (Eigen::Index j = 0; j < m; ++j) {
      row_max_ = row_max_.max(g(j) / lambda_ - scaled_.col(j).array());
    }
    row_sum_.setZero();
    for (Eigen::Index j = 0; j < m; ++j) {
      row_sum_ += ((g(j) / lambda_ - scaled_.col(j).array()) - row_max_).exp();
    }
    *f = (-lambda_ * (row_max_ + row_sum_.log() - std::log(static_cast<double>(m)))).matrix();
  }

  // g from f (column soft-min).
  void UpdateG(const Eigen::VectorXd& f, Eigen::VectorXd* g) {
    const Eigen::Index n = scaled_.rows();
    const Eigen::ArrayXd fs = f.array() / lambda_;
    for (Eigen::Index j = 0; j < scaled_.cols(); ++j) {
      const double mx = (fs - scaled_.col(j).array()).maxCoeff();
      const double sum = ((fs - scaled_.col(j).array()) - mx).exp().sum();
      (*g)(j) = -lambda_ * (mx + std::log(sum) - std::log(static_cast<double>(n)));
    }
  }

 private:
  const Eigen::MatrixXd& cost_;
  Eigen::MatrixXd scaled_;
  Eigen::ArrayXd row_max_;
  Eigen::ArrayXd row_sum_;
  double lambda_ = 1.0;
};

// The scaling-domain iterations need every kernel entry above exp(-this):
// then u and v stay within about exp(+-2 x this) of 1, far inside double's
// range.
constexpr double kMaxScalingExponent = 100.0;

// The iterations of Sinkhorn-Knopp on u, v (Cuturi 2013, Alg. 1) with the
// column minima of C absorbed into the kernel (Schmitzer 2019, "Stabilized
// sparse scaling algorithms for entropy regularized transport problems",
// Sec. 3.1, absorption): the same fixed point and stopping rule as the log
// domain, with two matrix-vector products per iteration instead of two
// passes of n m exponentials. Returns false (and leaves `result` to be
// recomputed) when the kernel's range is too wide or a value is not
// finite; sets f, g, iterations and converged otherwise.
bool ScalingDomainIterations(const Eigen::MatrixXd& cost, const SinkhornOptions& options,
                             SinkhornResult* result);

// Plan, costs and marginal error from the potentials in `result`.
absl::StatusOr<SinkhornResult> Finish(const Eigen::MatrixXd& cost, double lambda,
                                      SinkhornResult result);

}  // namespace

absl::StatusOr<Eigen::MatrixXd> TransportCostMatrix(const Eigen::MatrixXd& x,
                                                    const Eigen::MatrixXd& y, int p) {
  DPC_RETURN_IF_ERROR(ValidateCostExponent(p));
  if (x.rows() == 0 || y.rows() == 0 || x.cols() == 0 || x.cols() != y.cols()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "point clouds must be non-empty with the same dimension, got ", x.rows(), " x ",
        x.cols(), " and ", y.rows(), " x ", y.cols()));
  }
  if (!x.allFinite() || !y.allFinite()) {
    return absl::InvalidArgumentError("point clouds must be finite");
  }
  Eigen::MatrixXd cost(x.rows(), y.rows());
  if (p == 2 && x.cols() > kDirectCostMaxDimension) {
    // ||x - y||^2 = ||x||^2 + ||y||^2 - 2 <x, y> by one matrix product,
    // clamped at 0 against cancellation (absolute error ~1e-16 ||x||^2).
    const Eigen::VectorXd xx = x.rowwise().squaredNorm();
    const Eigen::VectorXd yy = y.rowwise().squaredNorm();
    cost.noalias() = -2.0 * x * y.transpose();
    cost.colwise() += xx;
    cost.rowwise() += yy.transpose();
    cost = cost.cwiseMax(0.0);
  } else {
    // Coordinate by coordinate, sum_k |x_k - y_k|^p: exact to rounding of
    // the differences (cost(x, x) = 0 exactly).
    cost.setZero();
    for (Eigen::Index k = 0; k < x.cols(); ++k) {
      for (Eigen::Index j = 0; j < y.rows(); ++j) {
        if (p == 1) {
          cost.col(j).array() += (x.col(k).array() - y(j, k)).abs();
        } else {
          cost.col(j).array() += (x.col(k).array() - y(j, k)).square();
        }
      }
    }
  }
  return cost;
}

absl::StatusOr<SinkhornResult> SinkhornFromCost(const Eigen::MatrixXd& cost,
                                                const SinkhornOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateOptions(options));
  if (cost.rows() == 0 || cost.cols() == 0) {
    return absl::InvalidArgumentError("cost matrix is empty");
  }
  if (!cost.allFinite()) return absl::InvalidArgumentError("cost matrix is not finite");
  const Eigen::Index n = cost.rows();
  const Eigen::Index m = cost.cols();
  const double lambda = options.lambda;

  LogDomainSolver solver(cost);
  SinkhornResult result;
  result.f = Eigen::VectorXd::Zero(n);
  result.g = Eigen::VectorXd::Zero(m);
  Eigen::VectorXd f_next(n);

  // Epsilon scaling: lambda_k = max(C) s^k while above the target.
  if (options.annealing > 0) {
    for (double lambda_k = cost.maxCoeff(); lambda_k > lambda; lambda_k *= options.annealing) {
      solver.SetLambda(lambda_k);
      solver.UpdateG(result.f, &result.g);
      solver.UpdateF(result.g, &result.f);
    }
  }

  if (options.scaling_domain && options.annealing == 0) {
    if (ScalingDomainIterations(cost, options, &result)) {
      return Finish(cost, lambda, std::move(result));
    }
    result.f.setZero();  // start the log domain afresh
    result.g.setZero();
    result.iterations = 0;
    result.converged = false;
  }

  solver.SetLambda(lambda);
  solver.UpdateG(result.f, &result.g);  // column marginals now exact
  while (true) {
    solver.UpdateF(result.g, &f_next);
    // Row marginal of the current plan: (P 1)_i = a_i exp((f_i - f_next_i) / lambda).
    const double row_error =
        (((result.f - f_next).array() / lambda).exp() - 1.0).abs().sum() / static_cast<double>(n);
    if (row_error <= options.tolerance) {
      result.converged = true;
      break;
    }
    if (result.iterations >= options.max_iterations) break;
    result.f = f_next;
    solver.UpdateG(result.f, &result.g);
    ++result.iterations;
  }
  return Finish(cost, lambda, std::move(result));
}

namespace {

absl::StatusOr<SinkhornResult> Finish(const Eigen::MatrixXd& cost, double lambda,
                                      SinkhornResult result) {
  const Eigen::Index n = cost.rows();
  const Eigen::Index m = cost.cols();
  // P_ij = a_i b_j exp((f_i + g_j - C_ij) / lambda); log(P_ij / (a_i b_j)) is
  // the exponent, so the primal objective (eq. 8) is <P, C> + lambda <P, exponent>.
  Eigen::MatrixXd exponent = (-cost).colwise() + result.f;
  exponent.rowwise() += result.g.transpose();
  exponent /= lambda;
  result.plan = exponent.array().exp() / (static_cast<double>(n) * static_cast<double>(m));
  result.transport_cost = (result.plan.array() * cost.array()).sum();
  result.primal_cost =
      result.transport_cost + lambda * (result.plan.array() * exponent.array()).sum();
  result.cost = result.f.mean() + result.g.mean();
  result.marginal_error =
      (result.plan.rowwise().sum().array() - 1.0 / static_cast<double>(n)).abs().sum() +
      (result.plan.colwise().sum().array() - 1.0 / static_cast<double>(m)).abs().sum();
  if (!std::isfinite(result.cost) || !std::isfinite(result.primal_cost) ||
      !result.plan.allFinite()) {
    return absl::InternalError("Sinkhorn produced a non-finite value");
  }
  return result;
}

bool ScalingDomainIterations(const Eigen::MatrixXd& cost, const SinkhornOptions& options,
                             SinkhornResult* result) {
  const Eigen::Index n = cost.rows();
  const Eigen::Index m = cost.cols();
  const double lambda = options.lambda;
  // Absorb the column minima: K_ij = exp(-(C_ij - c_j) / lambda) lies in
  // [exp(-range), 1] with every column's maximum 1.
  const Eigen::RowVectorXd column_min = cost.colwise().minCoeff();
  Eigen::MatrixXd kernel = ((cost.rowwise() - column_min) * (-1.0 / lambda));
  if (-kernel.minCoeff() > kMaxScalingExponent) return false;
  kernel = kernel.array().exp().matrix();
  const double a = 1.0 / static_cast<double>(n);
  const double b = 1.0 / static_cast<double>(m);
  // f = 0 to start, as the log-domain path: u = a.
  Eigen::VectorXd u = Eigen::VectorXd::Constant(n, a);
  Eigen::VectorXd v(m), u_next(n);
  v.noalias() = kernel.transpose() * u;
  v = (b / v.array()).matrix();  // column marginals now exact
  result->iterations = 0;
  result->converged = false;
  while (true) {
    u_next.noalias() = kernel * v;
    u_next = (a / u_next.array()).matrix();
    // (P 1)_i = u_i (K v)_i = a u_i / u_next_i, the log path's row error.
    const double row_error = ((u.array() / u_next.array()) - 1.0).abs().sum() * a;
    if (!std::isfinite(row_error)) return false;
    if (row_error <= options.tolerance) {
      result->converged = true;
      break;
    }
    if (result->iterations >= options.max_iterations) break;
    u = u_next;
    v.noalias() = kernel.transpose() * u;
    v = (b / v.array()).matrix();
    ++result->iterations;
  }
  // Back to potentials in cost units: P_ij = a b exp((f_i + g_j - C_ij) / lambda)
  // = u_i K_ij v_j gives f_i = lambda log(n u_i), g_j = lambda log(m v_j) + c_j.
  result->f = lambda * (u.array() * static_cast<double>(n)).log();
  result->g = (lambda * (v.array() * static_cast<double>(m)).log()).matrix() +
              column_min.transpose();
  return result->f.allFinite() && result->g.allFinite();
}

}  // namespace


absl::StatusOr<SinkhornResult> Sinkhorn(const Eigen::MatrixXd& x, const Eigen::MatrixXd& y,
                                        const SinkhornOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateOptions(options));
  DPC_ASSIGN_OR_RETURN(Eigen::MatrixXd cost, TransportCostMatrix(x, y, options.p));
  return SinkhornFromCost(cost, options);
}

Eigen::MatrixXd TransportGradient(const Eigen::MatrixXd& x, const Eigen::MatrixXd& y,
                                  const Eigen::MatrixXd& plan, int p) {
  Eigen::MatrixXd grad(x.rows(), x.cols());
  if (p == 2) {
    // 2 (x_i sum_j P_ij - sum_j P_ij y_j).
    const Eigen::VectorXd row_mass = plan.rowwise().sum();
    grad.noalias() = -2.0 * plan * y;
    grad += 2.0 * (x.array().colwise() * row_mass.array()).matrix();
  } else {
    // sum_j P_ij sign(x_ik - y_jk), coordinate by coordinate.
    grad.setZero();
    for (Eigen::Index k = 0; k < x.cols(); ++k) {
      for (Eigen::Index j = 0; j < y.rows(); ++j) {
        grad.col(k).array() += plan.col(j).array() * (x.col(k).array() - y(j, k)).sign();
      }
    }
  }
  return grad;
}

}  // namespace dpcurator::ldp
