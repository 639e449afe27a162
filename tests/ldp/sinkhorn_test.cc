#include "core/ldp/sinkhorn.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/ldp/assignment.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::ldp {
namespace {

Eigen::MatrixXd RandomCloud(PublicRng* rng, int n, int d, double scale, double shift = 0.0) {
  Eigen::MatrixXd x(n, d);
  rng->FillNormal(x);
  return (x * scale).array() + shift;
}

double RowError(const Eigen::MatrixXd& plan) {
  return (plan.rowwise().sum().array() - 1.0 / plan.rows()).abs().sum();
}
double ColumnError(const Eigen::MatrixXd& plan) {
  return (plan.colwise().sum().array() - 1.0 / plan.cols()).abs().sum();
}

TEST(SinkhornTest, MarginalsMatchForBothCosts) {
  PublicRng rng(1);
  for (int p : {1, 2}) {
    for (double lambda : {0.05, 0.5, 5.0}) {
      const Eigen::MatrixXd x = RandomCloud(&rng, 37, 3, 1.0);
      const Eigen::MatrixXd y = RandomCloud(&rng, 53, 3, 1.5, 0.3);
      SinkhornOptions options;
      options.p = p;
      options.lambda = lambda;
      auto result = Sinkhorn(x, y, options);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_TRUE(result->converged) << "p=" << p << " lambda=" << lambda;
      EXPECT_LE(RowError(result->plan), 1e-6);
      EXPECT_LE(ColumnError(result->plan), 1e-6);
      EXPECT_LE(result->marginal_error, 1e-8);
      EXPECT_NEAR(result->plan.sum(), 1.0, 1e-9);
      EXPECT_TRUE((result->plan.array() >= 0).all());
      // Primal (eq. 8) and dual values agree at the optimum.
      EXPECT_NEAR(result->primal_cost, result->cost, 1e-7 * (1 + std::fabs(result->cost)));
      // The entropic cost exceeds the transport part by lambda KL >= 0.
      EXPECT_GE(result->primal_cost, result->transport_cost - 1e-12);
    }
  }
}

TEST(SinkhornTest, CostMatrixUsesCoordinatewiseLp) {
  Eigen::MatrixXd x(1, 2), y(1, 2);
  x << 0.0, 0.0;
  y << 3.0, -4.0;
  EXPECT_DOUBLE_EQ(TransportCostMatrix(x, y, 1).value()(0, 0), 7.0);   // l1, not Euclidean 5
  EXPECT_DOUBLE_EQ(TransportCostMatrix(x, y, 2).value()(0, 0), 25.0);  // squared l2
}

TEST(SinkhornTest, StableWhenCostOverLambdaIsHuge) {
  // C / lambda in the thousands (MNIST-like, ldp-sinkhorn.md Sec. 1.5): the
  // kernel exp(-C / lambda) underflows, the log-domain iteration does not.
  PublicRng rng(2);
  const Eigen::MatrixXd x = RandomCloud(&rng, 20, 50, 3.0);
  const Eigen::MatrixXd y = RandomCloud(&rng, 25, 50, 3.0, 2.0);
  SinkhornOptions options;
  options.p = 2;
  options.lambda = 0.5;
  auto result = Sinkhorn(x, y, options);
  ASSERT_TRUE(result.ok()) << result.status();
  const Eigen::MatrixXd cost = TransportCostMatrix(x, y, 2).value();
  ASSERT_GT(cost.minCoeff() / options.lambda, 700);  // exp(-700) ~ 1e-304
  EXPECT_TRUE(result->converged);
  EXPECT_LE(RowError(result->plan) + ColumnError(result->plan), 1e-6);
}

TEST(SinkhornTest, LargeLambdaGivesIndependentCoupling) {
  PublicRng rng(3);
  const Eigen::MatrixXd x = RandomCloud(&rng, 10, 2, 1.0);
  const Eigen::MatrixXd y = RandomCloud(&rng, 12, 2, 1.0);
  SinkhornOptions options;
  options.lambda = 1e7;
  const SinkhornResult result = Sinkhorn(x, y, options).value();
  const Eigen::MatrixXd cost = TransportCostMatrix(x, y, 2).value();
  EXPECT_NEAR(result.cost, cost.mean(), 1e-5 * cost.mean());
  EXPECT_LE((result.plan.array() - 1.0 / 120).abs().maxCoeff(), 1e-7);
}

TEST(SinkhornTest, SmallLambdaApproachesExactAssignment) {
  // lambda -> 0: <P, C> -> the unregularised OT value, which for equal
  // sizes is the optimal assignment / n (Birkhoff).
  PublicRng rng(4);
  for (int p : {1, 2}) {
    const Eigen::MatrixXd x = RandomCloud(&rng, 12, 2, 1.0);
    const Eigen::MatrixXd y = RandomCloud(&rng, 12, 2, 1.0, 0.5);
    const Eigen::MatrixXd cost = TransportCostMatrix(x, y, p).value();
    const double exact = SolveAssignment(cost).value().total_cost / 12;
    SinkhornOptions options;
    options.p = p;
    options.lambda = 3e-2 * cost.mean();
    options.tolerance = 1e-8;
    options.annealing = 0.8;
    const SinkhornResult result = Sinkhorn(x, y, options).value();
    EXPECT_TRUE(result.converged);
    EXPECT_GE(result.transport_cost, exact - 1e-9);
    // <P, C> - OT <= lambda log(n m) (entropy of the plan is at most that).
    EXPECT_LE(result.transport_cost - exact, options.lambda * std::log(144.0));
  }
}

TEST(SinkhornTest, AnnealingReachesTheSameSolution) {
  PublicRng rng(5);
  const Eigen::MatrixXd x = RandomCloud(&rng, 30, 2, 1.0);
  const Eigen::MatrixXd y = RandomCloud(&rng, 30, 2, 1.0);
  SinkhornOptions options;
  options.lambda = 0.1;
  options.tolerance = 1e-11;
  const SinkhornResult plain = Sinkhorn(x, y, options).value();
  options.annealing = 0.7;
  const SinkhornResult annealed = Sinkhorn(x, y, options).value();
  EXPECT_NEAR(plain.cost, annealed.cost, 1e-9);
  EXPECT_LE((plain.plan - annealed.plan).cwiseAbs().maxCoeff(), 1e-9);
  EXPECT_LT(annealed.iterations, plain.iterations);
}

TEST(SinkhornTest, IterationCapIsReportedNotAnError) {
  PublicRng rng(6);
  const Eigen::MatrixXd x = RandomCloud(&rng, 30, 2, 1.0);
  const Eigen::MatrixXd y = RandomCloud(&rng, 30, 2, 1.0);
  SinkhornOptions options;
  options.lambda = 1e-3;
  options.max_iterations = 3;
  const SinkhornResult result = Sinkhorn(x, y, options).value();
  EXPECT_FALSE(result.converged);
  EXPECT_EQ(result.iterations, 3);
  EXPECT_LE(ColumnError(result.plan), 1e-12);  // the g update was last
}

// The scaling-domain iterations (column minima absorbed) reach the log
// domain's fixed point with the same stopping rule, and hand over to the log
// domain when the shifted kernel's range is too wide.
TEST(SinkhornTest, ScalingDomainMatchesLogDomain) {
  PublicRng rng(21);
  // Image-like costs: a large common noise energy per column plus a spread
  // of a few lambda; then a cost whose range no shift removes (C / lambda up
  // to ~1e4), which must fall back.
  Eigen::MatrixXd image_like(60, 70);
  rng.FillUniform(image_like);
  image_like = (image_like * 30.0).rowwise() + Eigen::RowVectorXd::Constant(70, 400.0);
  const Eigen::MatrixXd x = RandomCloud(&rng, 40, 3, 10.0);
  const Eigen::MatrixXd y = RandomCloud(&rng, 50, 3, 10.0, 1.0);
  const Eigen::MatrixXd wide = TransportCostMatrix(x, y, 2).value();
  const double wide_lambda = 4.0;
  // Precondition of the fallback case: a shifted range beyond 100.
  ASSERT_GT(((wide.rowwise() - wide.colwise().minCoeff()) / wide_lambda).maxCoeff(), 150.0);
  for (const auto& [cost, lambda] :
       {std::pair{image_like, 8.0}, std::pair{wide, wide_lambda}}) {
    SinkhornOptions options;
    options.lambda = lambda;
    options.tolerance = 1e-11;
    const SinkhornResult log_domain = SinkhornFromCost(cost, options).value();
    options.scaling_domain = true;
    const SinkhornResult scaling = SinkhornFromCost(cost, options).value();
    ASSERT_TRUE(log_domain.converged);
    ASSERT_TRUE(scaling.converged);
    EXPECT_LE(scaling.marginal_error, 2e-11);
    EXPECT_NEAR(scaling.cost, log_domain.cost, 1e-8 * std::abs(log_domain.cost));
    EXPECT_LE((scaling.plan - log_domain.plan).cwiseAbs().maxCoeff(), 1e-10);
    EXPECT_NEAR(scaling.iterations, log_domain.iterations, 1);
  }
}

TEST(SinkhornTest, ValidatesInputs) {
  const Eigen::MatrixXd x = Eigen::MatrixXd::Zero(3, 2);
  SinkhornOptions options;
  EXPECT_FALSE(Sinkhorn(x, Eigen::MatrixXd::Zero(3, 3), options).ok());
  EXPECT_FALSE(Sinkhorn(Eigen::MatrixXd(0, 2), x, options).ok());
  options.lambda = 0;
  EXPECT_FALSE(Sinkhorn(x, x, options).ok());
  options.lambda = 1;
  options.p = 3;
  EXPECT_FALSE(Sinkhorn(x, x, options).ok());
  options.p = 2;
  options.annealing = 1.0;
  EXPECT_FALSE(Sinkhorn(x, x, options).ok());
  options.annealing = 0;
  Eigen::MatrixXd bad = x;
  bad(0, 0) = NAN;
  EXPECT_FALSE(Sinkhorn(bad, x, options).ok());
}

// ---- Envelope gradient vs finite differences ----

void ExpectEnvelopeGradient(int p, double lambda, uint64_t seed) {
  PublicRng rng(seed);
  const Eigen::MatrixXd x = RandomCloud(&rng, 7, 3, 1.0);
  const Eigen::MatrixXd y = RandomCloud(&rng, 9, 3, 1.3, 0.2);
  SinkhornOptions options;
  options.p = p;
  options.lambda = lambda;
  options.tolerance = 1e-13;
  const SinkhornResult base = Sinkhorn(x, y, options).value();
  ASSERT_TRUE(base.converged);
  const Eigen::MatrixXd grad = TransportGradient(x, y, base.plan, p);
  // Central differences of the OT value with the potentials recomputed, for
  // every coordinate of two generated points.
  const double h = 1e-5;
  for (int i : {0, 4}) {
    for (int k = 0; k < 3; ++k) {
      Eigen::MatrixXd plus = x, minus = x;
      plus(i, k) += h;
      minus(i, k) -= h;
      const double numeric =
          (Sinkhorn(plus, y, options).value().cost - Sinkhorn(minus, y, options).value().cost) /
          (2 * h);
      EXPECT_NEAR(grad(i, k), numeric, 1e-4 * std::max(std::fabs(numeric), 1e-2))
          << "p=" << p << " lambda=" << lambda << " i=" << i << " k=" << k;
    }
  }
}

TEST(SinkhornGradientTest, EnvelopeMatchesFiniteDifferencesSquaredL2) {
  ExpectEnvelopeGradient(2, 0.3, 21);
  ExpectEnvelopeGradient(2, 2.0, 22);
}

TEST(SinkhornGradientTest, EnvelopeMatchesFiniteDifferencesL1) {
  ExpectEnvelopeGradient(1, 0.2, 23);
  ExpectEnvelopeGradient(1, 1.0, 24);
}

// ---- The 1-D Gaussian oracle (ldp-sinkhorn.md Sec. 1.3, "Test oracles") ----

// Closed form of W_{2, lambda}(N(0, a^2), N(0, b^2)) with the MI regulariser:
// a^2 + b^2 - 2 rho a b - (lambda / 2) log(1 - rho^2),
// rho = (-lambda + sqrt(lambda^2 + 16 a^2 b^2)) / (4 a b).
double GaussianEntropicCost(double a, double b, double lambda) {
  const double rho = (-lambda + std::sqrt(lambda * lambda + 16 * a * a * b * b)) / (4 * a * b);
  return a * a + b * b - 2 * rho * a * b - 0.5 * lambda * std::log(1 - rho * rho);
}

double NormalQuantile(double u) {
  double lo = -40, hi = 40;
  for (int it = 0; it < 200; ++it) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < u ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// n points at the midpoint quantiles of N(0, scale^2): a deterministic,
// low-discrepancy stand-in for the population measure.
Eigen::MatrixXd GaussianQuantiles(int n, double scale) {
  Eigen::MatrixXd x(n, 1);
  for (int i = 0; i < n; ++i) x(i, 0) = scale * NormalQuantile((i + 0.5) / n);
  return x;
}

TEST(GaussianOracleTest, ClosedFormIsMinimisedAtCleanScale) {
  // The notes' check: s = 1.3, sigma = 0.7 -> argmin t = 1.300, value
  // 1.22141 = sigma^2 (1 + log((s^2 + sigma^2) / sigma^2)).
  const double s = 1.3, sigma = 0.7, lambda = 2 * sigma * sigma;
  const double b = std::sqrt(s * s + sigma * sigma);
  double best_t = 0, best = INFINITY;
  for (double t = 0.5; t <= 2.0; t += 1e-4) {
    const double value = GaussianEntropicCost(t, b, lambda);
    if (value < best) best = value, best_t = t;
  }
  EXPECT_NEAR(best_t, s, 2e-4);
  EXPECT_NEAR(best, sigma * sigma * (1 + std::log((s * s + sigma * sigma) / (sigma * sigma))),
              1e-8);
  EXPECT_NEAR(best, 1.22141, 1e-5);
}

TEST(GaussianOracleTest, SinkhornLossOverGeneratorScaleIsMinimisedAtCleanScale) {
  // X ~ N(0, s^2), Y = X + N(0, sigma^2), generator family N(0, t^2),
  // lambda = 2 sigma^2 (Gaussian mechanism, p = 2): our Sinkhorn on
  // quantile discretisations reproduces the closed form and its minimiser
  // t = s, i.e. it deconvolves; the naive target sqrt(s^2 + sigma^2) = 1.48
  // is far from the argmin.
  const double s = 1.3, sigma = 0.7, lambda = 2 * sigma * sigma;
  const double b = std::sqrt(s * s + sigma * sigma);
  const int n = 600;
  const Eigen::MatrixXd y = GaussianQuantiles(n, b);
  SinkhornOptions options;
  options.p = 2;
  options.lambda = lambda;
  double best_t = 0, best = INFINITY;
  for (double t = 1.0; t <= 1.6 + 1e-9; t += 0.025) {
    const SinkhornResult result = Sinkhorn(GaussianQuantiles(n, t), y, options).value();
    ASSERT_TRUE(result.converged);
    EXPECT_NEAR(result.cost, GaussianEntropicCost(t, b, lambda), 5e-3) << "t=" << t;
    if (result.cost < best) best = result.cost, best_t = t;
  }
  EXPECT_NEAR(best_t, s, 0.05);
  EXPECT_NEAR(best, 1.22141, 5e-3);
}

TEST(GaussianOracleTest, PointMassAgainstNoise) {
  // W_{2, 2 sigma^2}(delta_0, N(0, sigma^2 I_d)) = d sigma^2: a single
  // generated point has only one coupling (KL = 0), so the value is the mean
  // squared norm of the noise sample.
  PublicRng rng(8);
  const double sigma = 0.8;
  const Eigen::MatrixXd y = RandomCloud(&rng, 20000, 3, sigma);
  SinkhornOptions options;
  options.lambda = 2 * sigma * sigma;
  const SinkhornResult result = Sinkhorn(Eigen::MatrixXd::Zero(1, 3), y, options).value();
  EXPECT_NEAR(result.cost, 3 * sigma * sigma, 0.03 * 3 * sigma * sigma);
}

}  // namespace
}  // namespace dpcurator::ldp
