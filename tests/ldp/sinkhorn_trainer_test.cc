#include "core/train/sinkhorn_trainer.h"

#include <cmath>
#include <vector>

#include "core/ldp/mechanism.h"
#include "core/ldp/sinkhorn.h"
#include "core/privacy/noise_source.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::train {
namespace {

ldp::LdpMechanism GaussianMechanism() {
  return ldp::LdpMechanism::Builder()
      .SetKind(ldp::LdpKind::kGaussianL2)
      .SetDimension(2)
      .SetRadius(1.0)
      .SetEpsilon(5.0)
      .SetDelta(1e-4)
      .Build()
      .value();
}

ldp::LdpMechanism LaplaceMechanism() {
  return ldp::LdpMechanism::Builder()
      .SetKind(ldp::LdpKind::kLaplaceL1)
      .SetDimension(2)
      .SetRadius(1.0)
      .SetEpsilon(5.0)
      .Build()
      .value();
}

// Reports of n copies of the record c.
Eigen::MatrixXd PointMassReports(const ldp::LdpMechanism& mechanism, const Eigen::Vector2d& c,
                                 int n, uint64_t seed) {
  privacy::SeededNoiseSource noise(seed);
  Eigen::MatrixXd records = c.transpose().replicate(n, 1);
  return mechanism.PrivatizeRows(records, &noise).value();
}

SinkhornTrainerOptions SmallOptions() {
  SinkhornTrainerOptions options;
  options.steps = 300;
  options.batch_size = 128;
  options.learning_rate = 2e-3;
  options.generator.hidden = {32, 32};
  options.sinkhorn_max_iterations = 200;
  return options;
}

// Root mean squared distance of generated points to c.
double RmsSpread(const PointGenerator& generator, const Eigen::Vector2d& c) {
  PublicRng rng(77);
  const Eigen::MatrixXd points = generator.Sample(4000, &rng);
  return std::sqrt((points.rowwise() - c.transpose()).rowwise().squaredNorm().mean());
}

TEST(SinkhornTrainerTest, DeconvolvesAPointMass) {
  // Oracle (ldp-sinkhorn.md Sec. 1.3): W_{2, 2 sigma^2}(delta_c, delta_c * N)
  // is minimised by the point mass itself; the naive loss learns the noisy
  // cloud, whose RMS spread is sqrt(d) sigma.
  for (const ldp::LdpMechanism& mechanism : {GaussianMechanism(), LaplaceMechanism()}) {
    const Eigen::Vector2d c(0.3, -0.2);
    const Eigen::MatrixXd reports = PointMassReports(mechanism, c, 20000, 5);
    const double noisy_spread = std::sqrt(2.0) * mechanism.noise_stddev();
    SinkhornTrainerOptions options = SmallOptions();
    int calls = 0;
    options.progress = [&calls](int, double loss) {
      EXPECT_TRUE(std::isfinite(loss));
      ++calls;
    };
    auto deconvolved = TrainSinkhornGenerator(reports, mechanism, options);
    ASSERT_TRUE(deconvolved.ok()) << deconvolved.status();
    EXPECT_EQ(calls, 3);  // steps 100, 200, 300
    EXPECT_EQ(deconvolved->lambda, mechanism.regularizer());
    options.naive = true;
    options.naive_annealing = 0.8;
    options.sinkhorn_max_iterations = 50;  // approximate plans suffice here
    auto naive = TrainSinkhornGenerator(reports, mechanism, options);
    ASSERT_TRUE(naive.ok()) << naive.status();
    EXPECT_LT(naive->lambda, 0.1 * mechanism.regularizer());
    const double spread_deconvolved = RmsSpread(deconvolved->generator, c);
    const double spread_naive = RmsSpread(naive->generator, c);
    EXPECT_LT(spread_deconvolved, 0.3 * noisy_spread) << ldp::LdpKindName(mechanism.kind());
    EXPECT_GT(spread_naive, 0.6 * noisy_spread) << ldp::LdpKindName(mechanism.kind());
    // The exact-assignment naive baseline (unregularised W_p^p) too.
    options.naive_solver = SinkhornTrainerOptions::NaiveSolver::kExactAssignment;
    auto exact = TrainSinkhornGenerator(reports, mechanism, options);
    ASSERT_TRUE(exact.ok()) << exact.status();
    EXPECT_EQ(exact->lambda, 0.0);
    EXPECT_GT(RmsSpread(exact->generator, c), 0.6 * noisy_spread)
        << ldp::LdpKindName(mechanism.kind());
  }
}

TEST(SinkhornTrainerTest, DeterministicForASeed) {
  const ldp::LdpMechanism mechanism = GaussianMechanism();
  const Eigen::MatrixXd reports = PointMassReports(mechanism, {0.1, 0.1}, 500, 9);
  SinkhornTrainerOptions options = SmallOptions();
  options.steps = 20;
  const auto a = TrainSinkhornGenerator(reports, mechanism, options).value();
  const auto b = TrainSinkhornGenerator(reports, mechanism, options).value();
  EXPECT_EQ(a.generator.parameters(), b.generator.parameters());
  options.seed = 2;
  const auto c = TrainSinkhornGenerator(reports, mechanism, options).value();
  EXPECT_NE(a.generator.parameters(), c.generator.parameters());
  // The model rebuilds from its architecture and parameters.
  const auto rebuilt = PointGenerator::FromParameters(2, a.generator.options(),
                                                      a.generator.parameters());
  ASSERT_TRUE(rebuilt.ok());
  PublicRng r1(3), r2(3);
  EXPECT_EQ(rebuilt->Sample(10, &r1), a.generator.Sample(10, &r2));
}

TEST(SinkhornTrainerTest, Validates) {
  const ldp::LdpMechanism mechanism = GaussianMechanism();
  const Eigen::MatrixXd reports = Eigen::MatrixXd::Zero(10, 2);
  SinkhornTrainerOptions options = SmallOptions();
  options.steps = 1;
  EXPECT_TRUE(TrainSinkhornGenerator(reports, mechanism, options).ok());
  EXPECT_FALSE(TrainSinkhornGenerator(Eigen::MatrixXd::Zero(10, 3), mechanism, options).ok());
  EXPECT_FALSE(TrainSinkhornGenerator(Eigen::MatrixXd(0, 2), mechanism, options).ok());
  Eigen::MatrixXd bad = reports;
  bad(0, 0) = NAN;
  EXPECT_FALSE(TrainSinkhornGenerator(bad, mechanism, options).ok());
  options.steps = 0;
  EXPECT_FALSE(TrainSinkhornGenerator(reports, mechanism, options).ok());
  options.steps = 1;
  options.learning_rate = -1;
  EXPECT_FALSE(TrainSinkhornGenerator(reports, mechanism, options).ok());
  options.learning_rate = 1e-3;
  options.naive = true;
  options.naive_lambda_fraction = 0;
  EXPECT_FALSE(TrainSinkhornGenerator(reports, mechanism, options).ok());
}

TEST(SinkhornTrainerTest, MinibatchLossGradientIsThePlanWeightedCostGradient) {
  PublicRng rng(4);
  Eigen::MatrixXd x(6, 2), y(8, 2);
  rng.FillNormal(x);
  rng.FillNormal(y);
  const MinibatchLoss loss = EntropicOtLoss(x, y, 2, 0.7, 1e-12, 10000).value();
  ldp::SinkhornOptions options;
  options.lambda = 0.7;
  options.tolerance = 1e-12;
  const ldp::SinkhornResult result = ldp::Sinkhorn(x, y, options).value();
  EXPECT_NEAR(loss.loss, result.cost, 1e-12);
  EXPECT_LE((loss.grad_generated - ldp::TransportGradient(x, y, result.plan, 2))
                .cwiseAbs()
                .maxCoeff(),
            1e-12);
  // The gradient pulls each point toward its barycentric image: for p = 2,
  // grad_i = 2 (x_i - T(x_i)) / n with T(x_i) = n sum_j P_ij y_j.
  const Eigen::MatrixXd image = 6.0 * result.plan * y;
  EXPECT_LE(((x - image) * (2.0 / 6.0) - loss.grad_generated).cwiseAbs().maxCoeff(), 1e-9);
}

TEST(SinkhornTrainerTest, ExactOtLossMatchesAssignment) {
  PublicRng rng(6);
  Eigen::MatrixXd x(5, 2), y(5, 2);
  rng.FillNormal(x);
  rng.FillNormal(y);
  for (int p : {1, 2}) {
    const MinibatchLoss loss = ExactOtLoss(x, y, p).value();
    // Small-lambda Sinkhorn approaches the same value (transport part).
    ldp::SinkhornOptions options;
    options.p = p;
    options.lambda = 1e-3;
    options.annealing = 0.8;
    options.tolerance = 1e-7;
    options.max_iterations = 1000000;
    const ldp::SinkhornResult entropic = ldp::Sinkhorn(x, y, options).value();
    EXPECT_NEAR(entropic.transport_cost, loss.loss, 1e-2);
    EXPECT_LE(loss.loss, entropic.transport_cost + 1e-9);
  }
  EXPECT_FALSE(ExactOtLoss(x, Eigen::MatrixXd::Zero(4, 2), 2).ok());
}

}  // namespace
}  // namespace dpcurator::train
