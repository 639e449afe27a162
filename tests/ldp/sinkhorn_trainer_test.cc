#include "core/train/sinkhorn_trainer.h"

#include <algorithm>
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
double RmsSpread(const LdpPointGenerator& generator, const Eigen::Vector2d& c) {
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

// The q-quantile of generated points' distances to c: how far the bulk of
// the model's mass is from the truth, whatever a small share of it does.
double QuantileDistance(const LdpPointGenerator& generator, const Eigen::Vector2d& c, double q) {
  PublicRng rng(77);
  const Eigen::MatrixXd points = generator.Sample(4000, &rng);
  std::vector<double> distances(points.rows());
  for (Eigen::Index i = 0; i < points.rows(); ++i) {
    distances[i] = (points.row(i).transpose() - c).norm();
  }
  const size_t k = static_cast<size_t>(q * static_cast<double>(distances.size()));
  std::nth_element(distances.begin(), distances.begin() + k, distances.end());
  return distances[k];
}

// Issue 24: what a flooding device token can do to the fit. The server
// stores at most --max_reports_per_token reports of one token, each inside
// ReportCoordinateBound (docs/privacy.md 2.6), so the worst flood is that
// many reports at a corner of the bound. A flood of a share eta of the
// reports moves that share of the model's mass at most (the fit is faithful
// to what it is given): the RMS spread grows by about sqrt(eta) times the
// corner's distance, but the bulk stays put. So the accuracy test here is
// DeconvolvesAPointMass's threshold on the 75th percentile of the distances
// to c (measured, 20,000 honest reports and a flood at the bound's corner:
// 0.35 alone; 0.46, 0.55, 0.67, 0.81 for floods of 0.1%, 0.25%, 0.5%, 1%;
// the threshold is 0.73). With a quota of 0.5% of the honest reports the fit
// passes it; without
// the value bound (the 1e6 the server once took) or without the quota (as
// many flood reports as honest ones) it fails it.
TEST(SinkhornTrainerTest, AQuotaBoundedFloodKeepsTheFitWithinItsAccuracyTest) {
  const ldp::LdpMechanism mechanism = GaussianMechanism();
  const Eigen::Vector2d c(0.3, -0.2);
  constexpr int kHonest = 20000;
  constexpr int kQuota = kHonest / 200;
  const Eigen::MatrixXd honest = PointMassReports(mechanism, c, kHonest, 5);
  const double accuracy = 0.3 * std::sqrt(2.0) * mechanism.noise_stddev();
  const double bound = mechanism.ReportCoordinateBound();
  auto bulk_distance_with_flood = [&](int flood_rows, double flood_value) {
    Eigen::MatrixXd reports(kHonest + flood_rows, 2);
    reports.topRows(kHonest) = honest;
    reports.bottomRows(flood_rows).setConstant(flood_value);
    auto fit = TrainSinkhornGenerator(reports, mechanism, SmallOptions());
    EXPECT_TRUE(fit.ok()) << fit.status();
    return fit.ok() ? QuantileDistance(fit->generator, c, 0.75) : INFINITY;
  };
  const double alone = bulk_distance_with_flood(0, 0.0);
  EXPECT_LT(alone, accuracy);
  EXPECT_LT(bulk_distance_with_flood(kQuota, bound), accuracy) << "alone " << alone;
  EXPECT_GT(bulk_distance_with_flood(kQuota, 1e6), accuracy) << "no value bound";
  EXPECT_GT(bulk_distance_with_flood(kHonest, bound), accuracy) << "no quota";
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
  const auto rebuilt = LdpPointGenerator::FromParameters(2, a.generator.options(),
                                                      a.generator.parameters());
  ASSERT_TRUE(rebuilt.ok());
  PublicRng r1(3), r2(3);
  EXPECT_EQ(rebuilt->Sample(10, &r1), a.generator.Sample(10, &r2));
}

// Iterate averaging returns beta_t avg + (1 - beta_t) theta, with
// beta_t = min(beta, (1 + t) / (10 + t)) and avg starting at the
// initialisation; training itself is unchanged.
TEST(SinkhornTrainerTest, IterateAveragingAveragesTheIterates) {
  const ldp::LdpMechanism mechanism = GaussianMechanism();
  const Eigen::MatrixXd reports = PointMassReports(mechanism, {0.1, 0.1}, 300, 9);
  SinkhornTrainerOptions options = SmallOptions();
  LdpPointGeneratorOptions initial_options = options.generator;
  initial_options.seed = options.seed;
  const Eigen::VectorXd initial = LdpPointGenerator::Create(2, initial_options).value().parameters();
  options.steps = 1;
  const Eigen::VectorXd one = TrainSinkhornGenerator(reports, mechanism, options)
                                  .value()
                                  .generator.parameters();
  options.steps = 2;
  const Eigen::VectorXd two = TrainSinkhornGenerator(reports, mechanism, options)
                                  .value()
                                  .generator.parameters();
  options.parameter_averaging = 0.5;
  const Eigen::VectorXd averaged =
      TrainSinkhornGeneratorFloat(reports.cast<float>(), mechanism, options)
          .value()
          .generator.parameters();
  const Eigen::VectorXd averaged_double = TrainSinkhornGenerator(reports, mechanism, options)
                                              .value()
                                              .generator.parameters();
  const double beta1 = 2.0 / 11.0, beta2 = 3.0 / 12.0;
  const Eigen::VectorXd expected = beta2 * (beta1 * initial + (1 - beta1) * one) + (1 - beta2) * two;
  EXPECT_LE((averaged_double - expected).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LE((averaged - expected).cwiseAbs().maxCoeff(), 1e-4);
  EXPECT_GT((averaged - two).cwiseAbs().maxCoeff(), 1e-4);
  options.parameter_averaging = 1.0;
  EXPECT_FALSE(TrainSinkhornGenerator(reports, mechanism, options).ok());
  EXPECT_FALSE(TrainSinkhornGeneratorFloat(reports.cast<float>(), mechanism, options).ok());
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

// --- The image path: bounded head and float32 trainer --------------------

TEST(LdpPointGeneratorTest, BoundedHeadGradientMatchesFiniteDifferences) {
  LdpPointGeneratorOptions options;
  options.latent_dim = 2;
  options.hidden = {6};
  options.activation = nn::Activation::kTanh;
  options.output_low = -1.0;
  options.output_high = 1.0;
  options.seed = 3;
  LdpPointGenerator generator = LdpPointGenerator::Create(4, options).value();
  PublicRng rng(8);
  Eigen::MatrixXd z(5, 2), weights(5, 4);
  rng.FillUniform(z);
  rng.FillNormal(weights);
  LdpPointGeneratorWorkspace workspace;
  // L = <W, G(z)>, so dL/dG = W.
  auto loss = [&]() { return (generator.Forward(z, &workspace).array() * weights.array()).sum(); };
  const Eigen::MatrixXd points = generator.Forward(z, &workspace);
  EXPECT_GT(points.minCoeff(), -1.0);
  EXPECT_LT(points.maxCoeff(), 1.0);
  Eigen::VectorXd grad = Eigen::VectorXd::Zero(generator.num_parameters());
  generator.Backward(weights, &workspace, &grad);
  for (Eigen::Index k = 0; k < generator.num_parameters(); ++k) {
    const double saved = generator.parameters()(k);
    const double h = 1e-6;
    generator.parameters()(k) = saved + h;
    const double up = loss();
    generator.parameters()(k) = saved - h;
    const double down = loss();
    generator.parameters()(k) = saved;
    EXPECT_NEAR(grad(k), (up - down) / (2 * h), 1e-7) << "parameter " << k;
  }
  // The float replica computes the same points.
  FloatLdpPointGenerator replica = FloatLdpPointGenerator::Create(generator).value();
  LdpPointGeneratorWorkspaceF workspace_f;
  const Eigen::MatrixXf points_f = replica.Forward(z.cast<float>(), &workspace_f);
  EXPECT_LE((points_f.cast<double>() - points).cwiseAbs().maxCoeff(), 1e-5);
  // An empty or inverted box is refused.
  options.output_high = -1.0;
  EXPECT_FALSE(LdpPointGenerator::Create(4, options).ok());
}

// The float32 path computes the same Algorithm 1 as the double path: same
// random streams, same plan (to the Sinkhorn tolerance), so after a few
// Adam steps the parameters agree to float precision, for the entropic loss
// and for the naive exact-assignment baseline.
TEST(SinkhornTrainerTest, FloatPathFollowsTheDoublePath) {
  const ldp::LdpMechanism mechanism = GaussianMechanism();
  const Eigen::MatrixXd reports = PointMassReports(mechanism, {0.2, -0.1}, 600, 4);
  SinkhornTrainerOptions options = SmallOptions();
  options.steps = 10;
  options.batch_size = 64;
  options.sinkhorn_tolerance = 1e-10;
  options.sinkhorn_max_iterations = 10000;
  for (bool naive : {false, true}) {
    options.naive = naive;
    options.naive_solver = SinkhornTrainerOptions::NaiveSolver::kExactAssignment;
    const auto exact = TrainSinkhornGenerator(reports, mechanism, options).value();
    const auto fast = TrainSinkhornGeneratorFloat(reports.cast<float>(), mechanism, options).value();
    const Eigen::VectorXd moved = exact.generator.parameters() -
                                  LdpPointGenerator::Create(2, [&] {
                                    LdpPointGeneratorOptions g = options.generator;
                                    g.seed = options.seed;
                                    return g;
                                  }()).value().parameters();
    const double gap = (fast.generator.parameters() - exact.generator.parameters()).norm();
    EXPECT_GT(moved.norm(), 1e-3);
    EXPECT_LT(gap, 1e-3 * moved.norm()) << (naive ? "naive" : "deconvolving");
    EXPECT_NEAR(fast.final_loss, exact.final_loss, 1e-4 * std::abs(exact.final_loss));
    EXPECT_EQ(fast.lambda, exact.lambda);
  }
}

// A point mass in 64 dimensions (an "image" of +-0.5 pixels) behind the
// Gaussian mechanism at eps = 30: the deconvolving bounded generator
// concentrates on it and its minibatch loss falls; the naive one spreads
// out towards the noise (RMS sigma ~ 1.7 per pixel, clipped by the box).
TEST(SinkhornTrainerTest, FloatPathDeconvolvesAnImagePointMass) {
  const int d = 64;
  Eigen::VectorXd c(d);
  for (int k = 0; k < d; ++k) c(k) = (k % 3 == 0) ? 0.5 : -0.5;
  const ldp::LdpMechanism mechanism = ldp::LdpMechanism::Builder()
                                          .SetKind(ldp::LdpKind::kGaussianL2)
                                          .SetDimension(d)
                                          .SetRadius(c.norm())
                                          .SetEpsilon(30.0)
                                          .SetDelta(1e-4)
                                          .Build()
                                          .value();
  privacy::SeededNoiseSource noise(12);
  const Eigen::MatrixXf reports =
      mechanism.PrivatizeRows(c.transpose().replicate(3000, 1), &noise).value().cast<float>();
  SinkhornTrainerOptions options;
  options.steps = 600;
  options.batch_size = 128;
  options.learning_rate = 2e-3;
  options.generator.latent_dim = 2;
  options.generator.hidden = {32, 32};
  options.generator.output_low = -1.0;
  options.generator.output_high = 1.0;
  auto rms_to_c = [&](const LdpPointGenerator& generator) {
    PublicRng rng(5);
    const Eigen::MatrixXd points = generator.Sample(2000, &rng);
    return std::sqrt((points.rowwise() - c.transpose()).squaredNorm() / points.size());
  };
  // The paper's validation error (Sec. 3 "Metrics"): W_{2, 2 sigma^2}
  // between 500 generated points and 500 held-out reports, before and after.
  const Eigen::MatrixXd held_out =
      mechanism.PrivatizeRows(c.transpose().replicate(500, 1), &noise).value();
  auto validation = [&](const LdpPointGenerator& generator) {
    PublicRng rng(6);
    return EntropicOtLoss(generator.Sample(500, &rng), held_out, 2, mechanism.regularizer(), 1e-9,
                          10000)
        .value()
        .loss;
  };
  LdpPointGeneratorOptions initial_options = options.generator;
  initial_options.seed = options.seed;
  const LdpPointGenerator initial = LdpPointGenerator::Create(d, initial_options).value();
  const auto deconvolved = TrainSinkhornGeneratorFloat(reports, mechanism, options);
  ASSERT_TRUE(deconvolved.ok()) << deconvolved.status();
  EXPECT_EQ(deconvolved->unconverged_steps, 0);
  EXPECT_LT(validation(deconvolved->generator), validation(initial) - 10.0);
  options.naive = true;
  options.naive_solver = SinkhornTrainerOptions::NaiveSolver::kExactAssignment;
  const auto naive = TrainSinkhornGeneratorFloat(reports, mechanism, options);
  ASSERT_TRUE(naive.ok()) << naive.status();
  const double rms_deconvolved = rms_to_c(deconvolved->generator);
  const double rms_naive = rms_to_c(naive->generator);
  EXPECT_LT(rms_deconvolved, 0.15) << rms_naive;
  EXPECT_GT(rms_naive, 2 * rms_deconvolved);
  EXPECT_LT(validation(deconvolved->generator), validation(naive->generator));
  // Same seed, same model.
  options.naive = false;
  const auto again = TrainSinkhornGeneratorFloat(reports, mechanism, options).value();
  EXPECT_EQ(again.generator.parameters(), deconvolved->generator.parameters());
}

}  // namespace
}  // namespace dpcurator::train
