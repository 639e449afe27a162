#include "core/eval/logistic_regression.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "Eigen/Cholesky"
#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "core/eval/internal/lbfgs.h"
#include "core/util/sigmoid.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::eval {
namespace {

// Columns with standard deviation below this are treated as constant.
constexpr double kConstantColumnStd = 1e-12;
// Ridge on the intercept's Newton diagonal, so the system stays definite when
// every fitted probability saturates.
constexpr double kInterceptRidge = 1e-10;
constexpr int kMaxNewtonLineSearchSteps = 50;

// log(1 + exp(z)) without overflow.
double Softplus(double z) { return std::max(z, 0.0) + std::log1p(std::exp(-std::abs(z))); }

struct BinaryFit {
  Eigen::VectorXd weights;
  double bias = 0.0;
  int iterations = 0;
  bool converged = false;
};

// Penalised mean logistic loss of (w, b) on standardised features xs with 0/1
// targets t.
double BinaryLoss(const Eigen::MatrixXd& xs, const Eigen::VectorXd& t, const Eigen::VectorXd& w,
                  double b, double l2, Eigen::VectorXd* eta) {
  *eta = xs * w;
  eta->array() += b;
  double loss = 0.0;
  for (Eigen::Index i = 0; i < eta->size(); ++i) loss += Softplus((*eta)(i)) - t(i) * (*eta)(i);
  return loss / static_cast<double>(xs.rows()) + 0.5 * l2 * w.squaredNorm();
}

// Newton-Raphson / IRLS for the penalised binary logistic loss (ESL §4.4.1,
// Eq. 4.23-4.26, with the ridge term added to gradient and Hessian), with a
// backtracking line search to guarantee descent.
BinaryFit FitBinaryNewton(const Eigen::MatrixXd& xs, const Eigen::VectorXd& t,
                          const LogisticRegressionOptions& options) {
  const Eigen::Index n = xs.rows();
  const Eigen::Index p = xs.cols();
  const double inv_n = 1.0 / static_cast<double>(n);
  BinaryFit fit;
  fit.weights = Eigen::VectorXd::Zero(p);
  const double mean_t = t.mean();
  fit.bias = std::log(std::clamp(mean_t, 1e-12, 1 - 1e-12) /
                      std::clamp(1 - mean_t, 1e-12, 1 - 1e-12));
  Eigen::VectorXd eta;
  double loss = BinaryLoss(xs, t, fit.weights, fit.bias, options.l2, &eta);
  Eigen::VectorXd residual(n), sqrt_w(n), gradient(p + 1), candidate_eta;
  Eigen::MatrixXd weighted(n, p);
  Eigen::MatrixXd hessian(p + 1, p + 1);
  for (int iteration = 0; iteration < options.max_iterations; ++iteration) {
    for (Eigen::Index i = 0; i < n; ++i) {
      const double prob = Sigmoid(eta(i));
      residual(i) = prob - t(i);
      sqrt_w(i) = std::sqrt(prob * (1 - prob));
    }
    gradient.head(p) = xs.transpose() * residual * inv_n + options.l2 * fit.weights;
    gradient(p) = residual.sum() * inv_n;
    if (gradient.lpNorm<Eigen::Infinity>() <= options.gradient_tolerance) {
      fit.converged = true;
      break;
    }
    fit.iterations = iteration + 1;
    // H = [X 1]' W [X 1] / n + diag(l2, ..., l2, ridge).
    weighted = xs.array().colwise() * sqrt_w.array();
    hessian.setZero();
    hessian.topLeftCorner(p, p).selfadjointView<Eigen::Lower>().rankUpdate(
        weighted.transpose(), inv_n);
    const Eigen::VectorXd w_weights = sqrt_w.array().square();
    hessian.block(p, 0, 1, p) = (xs.transpose() * w_weights).transpose() * inv_n;
    hessian(p, p) = w_weights.sum() * inv_n + kInterceptRidge;
    hessian.topLeftCorner(p, p).diagonal().array() += options.l2;
    const Eigen::VectorXd step =
        -hessian.selfadjointView<Eigen::Lower>().ldlt().solve(gradient);
    const double slope = gradient.dot(step);
    double scale = 1.0;
    bool accepted = false;
    for (int k = 0; k < kMaxNewtonLineSearchSteps; ++k) {
      const Eigen::VectorXd w_new = fit.weights + scale * step.head(p);
      const double b_new = fit.bias + scale * step(p);
      const double candidate = BinaryLoss(xs, t, w_new, b_new, options.l2, &candidate_eta);
      if (std::isfinite(candidate) && candidate <= loss + 1e-4 * scale * slope) {
        fit.weights = w_new;
        fit.bias = b_new;
        loss = candidate;
        eta.swap(candidate_eta);
        accepted = true;
        break;
      }
      scale *= 0.5;
    }
    if (!accepted) {
      // At machine precision: the step cannot decrease the loss any further.
      fit.converged = gradient.lpNorm<Eigen::Infinity>() <= 1e3 * options.gradient_tolerance;
      break;
    }
  }
  return fit;
}

// L-BFGS on the same binary objective, for many features.
BinaryFit FitBinaryLbfgs(const Eigen::MatrixXd& xs, const Eigen::VectorXd& t,
                         const LogisticRegressionOptions& options) {
  const Eigen::Index n = xs.rows();
  const Eigen::Index p = xs.cols();
  const double inv_n = 1.0 / static_cast<double>(n);
  auto objective = [&](const Eigen::VectorXd& theta, Eigen::VectorXd* gradient) {
    const Eigen::VectorXd w = theta.head(p);
    Eigen::VectorXd eta;
    const double loss = BinaryLoss(xs, t, w, theta(p), options.l2, &eta);
    Eigen::VectorXd residual(n);
    for (Eigen::Index i = 0; i < n; ++i) residual(i) = Sigmoid(eta(i)) - t(i);
    gradient->head(p) = xs.transpose() * residual * inv_n + options.l2 * w;
    (*gradient)(p) = residual.sum() * inv_n;
    return loss;
  };
  Eigen::VectorXd theta = Eigen::VectorXd::Zero(p + 1);
  internal::LbfgsOptions lbfgs;
  lbfgs.max_iterations = options.max_iterations;
  lbfgs.gradient_tolerance = options.gradient_tolerance;
  const internal::LbfgsResult result = internal::MinimizeLbfgs(objective, &theta, lbfgs);
  BinaryFit fit;
  fit.weights = theta.head(p);
  fit.bias = theta(p);
  fit.iterations = result.iterations;
  fit.converged = result.converged;
  return fit;
}

BinaryFit FitBinary(const Eigen::MatrixXd& xs, const Eigen::VectorXd& t,
                    const LogisticRegressionOptions& options) {
  if (xs.cols() <= LogisticRegression::kMaxNewtonFeatures) {
    return FitBinaryNewton(xs, t, options);
  }
  return FitBinaryLbfgs(xs, t, options);
}

}  // namespace

absl::Status LogisticRegressionOptions::Validate() const {
  DPC_RETURN_IF_ERROR(ValidateFiniteNonNegative(l2, "L2"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(max_iterations, "Max iterations"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(gradient_tolerance, "Gradient tolerance"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LogisticRegression>> LogisticRegression::Fit(
    const Eigen::MatrixXd& x, const Eigen::VectorXi& y, int num_classes,
    const LogisticRegressionOptions& options) {
  DPC_RETURN_IF_ERROR(options.Validate());
  DPC_RETURN_IF_ERROR(ValidateTrainingData(x, y, num_classes));
  std::unique_ptr<LogisticRegression> model(new LogisticRegression());
  model->num_classes_ = num_classes;
  model->multiclass_ = options.multiclass;
  const Eigen::Index n = x.rows();
  const Eigen::Index p = x.cols();

  // Standardise: z = (x - mean) / scale.
  model->mean_ = x.colwise().mean();
  model->scale_.resize(p);
  for (Eigen::Index j = 0; j < p; ++j) {
    const double variance =
        (x.col(j).array() - model->mean_(j)).square().sum() / static_cast<double>(n);
    const double std_dev = std::sqrt(variance);
    model->scale_(j) = std_dev > kConstantColumnStd ? std_dev : 1.0;
  }
  const Eigen::MatrixXd xs =
      (x.rowwise() - model->mean_).array().rowwise() / model->scale_.array();

  if (num_classes == 2 ||
      options.multiclass == LogisticRegressionOptions::Multiclass::kOneVsRest) {
    const int models = num_classes == 2 ? 1 : num_classes;
    model->weights_.resize(p, models);
    model->bias_.resize(models);
    model->converged_ = true;
    for (int k = 0; k < models; ++k) {
      const int positive = num_classes == 2 ? 1 : k;
      const Eigen::VectorXd t = (y.array() == positive).cast<double>();
      const BinaryFit fit = FitBinary(xs, t, options);
      model->weights_.col(k) = fit.weights;
      model->bias_(k) = fit.bias;
      model->iterations_ += fit.iterations;
      model->converged_ = model->converged_ && fit.converged;
    }
    return model;
  }

  // Multinomial: theta = [vec(W) (p x C, column-major); b (C)].
  const int c = num_classes;
  const double inv_n = 1.0 / static_cast<double>(n);
  Eigen::MatrixXd targets = Eigen::MatrixXd::Zero(n, c);
  for (Eigen::Index i = 0; i < n; ++i) targets(i, y(i)) = 1.0;
  Eigen::MatrixXd logits(n, c);
  auto objective = [&](const Eigen::VectorXd& theta, Eigen::VectorXd* gradient) {
    const Eigen::Map<const Eigen::MatrixXd> w(theta.data(), p, c);
    const Eigen::Map<const Eigen::RowVectorXd> b(theta.data() + p * c, c);
    logits.noalias() = xs * w;
    logits.rowwise() += b;
    double loss = 0.0;
    for (Eigen::Index i = 0; i < n; ++i) {
      const double max_logit = logits.row(i).maxCoeff();
      const double log_sum =
          max_logit + std::log((logits.row(i).array() - max_logit).exp().sum());
      loss += log_sum - logits(i, y(i));
      logits.row(i) = (logits.row(i).array() - log_sum).exp();  // Now probabilities.
    }
    logits -= targets;  // Now dLoss/dlogits (times n).
    Eigen::Map<Eigen::MatrixXd> grad_w(gradient->data(), p, c);
    Eigen::Map<Eigen::RowVectorXd> grad_b(gradient->data() + p * c, c);
    grad_w.noalias() = xs.transpose() * logits * inv_n;
    grad_w += options.l2 * w;
    grad_b = logits.colwise().sum() * inv_n;
    return loss * inv_n + 0.5 * options.l2 * w.squaredNorm();
  };
  Eigen::VectorXd theta = Eigen::VectorXd::Zero((p + 1) * c);
  internal::LbfgsOptions lbfgs;
  lbfgs.max_iterations = options.max_iterations;
  lbfgs.gradient_tolerance = options.gradient_tolerance;
  const internal::LbfgsResult result = internal::MinimizeLbfgs(objective, &theta, lbfgs);
  model->weights_ = Eigen::Map<const Eigen::MatrixXd>(theta.data(), p, c);
  model->bias_ = Eigen::Map<const Eigen::RowVectorXd>(theta.data() + p * c, c);
  model->iterations_ = result.iterations;
  model->converged_ = result.converged;
  return model;
}

Eigen::MatrixXd LogisticRegression::Logits(const Eigen::MatrixXd& x) const {
  Eigen::MatrixXd logits =
      ((x.rowwise() - mean_).array().rowwise() / scale_.array()).matrix() * weights_;
  logits.rowwise() += bias_;
  return logits;
}

absl::StatusOr<Eigen::MatrixXd> LogisticRegression::PredictProba(const Eigen::MatrixXd& x) const {
  DPC_RETURN_IF_ERROR(ValidatePredictionInput(x, num_features()));
  const Eigen::MatrixXd logits = Logits(x);
  Eigen::MatrixXd proba(x.rows(), num_classes_);
  if (num_classes_ == 2) {
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      proba(i, 1) = Sigmoid(logits(i, 0));
      proba(i, 0) = Sigmoid(-logits(i, 0));
    }
  } else if (multiclass_ == LogisticRegressionOptions::Multiclass::kOneVsRest) {
    // sklearn's one-vs-rest: per-class sigmoids, normalised to sum to one.
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      for (int k = 0; k < num_classes_; ++k) proba(i, k) = Sigmoid(logits(i, k));
      const double total = proba.row(i).sum();
      if (total > 0) {
        proba.row(i) /= total;
      } else {  // Every sigmoid underflowed: fall back to the softmax.
        const double max_logit = logits.row(i).maxCoeff();
        proba.row(i) = (logits.row(i).array() - max_logit).exp();
        proba.row(i) /= proba.row(i).sum();
      }
    }
  } else {
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      const double max_logit = logits.row(i).maxCoeff();
      proba.row(i) = (logits.row(i).array() - max_logit).exp();
      proba.row(i) /= proba.row(i).sum();
    }
  }
  return proba;
}

Eigen::MatrixXd LogisticRegression::coefficients() const {
  return weights_.array().colwise() / scale_.transpose().array();
}

Eigen::VectorXd LogisticRegression::intercepts() const {
  // b_orig = b - sum_j w_j mean_j / scale_j.
  return (bias_ - (mean_.array() / scale_.array()).matrix() * weights_).transpose();
}

}  // namespace dpcurator::eval
