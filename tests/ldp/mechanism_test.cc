#include "core/ldp/mechanism.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "core/privacy/analytic_gaussian.h"
#include "core/privacy/calibration.h"
#include "core/privacy/conversion.h"
#include "core/privacy/rdp.h"
#include "core/privacy/noise_source.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::ldp {
namespace {

// Reference l1-ball projection by bisection on the soft threshold theta:
// phi(theta) = sum_i max(|v_i| - theta, 0) is continuous and decreasing,
// and the projection is the soft threshold at phi(theta) = R (Duchi et al.
// 2008, Lemma 2 / Sec. 4), independent of the sort-based code under test.
Eigen::VectorXd BisectionL1Projection(const Eigen::VectorXd& v, double radius) {
  if (v.lpNorm<1>() <= radius) return v;
  double lo = 0.0, hi = v.cwiseAbs().maxCoeff();
  for (int it = 0; it < 200; ++it) {
    const double mid = 0.5 * (lo + hi);
    const double phi = (v.cwiseAbs().array() - mid).max(0.0).sum();
    (phi > radius ? lo : hi) = mid;
  }
  const double theta = 0.5 * (lo + hi);
  Eigen::VectorXd w(v.size());
  for (Eigen::Index i = 0; i < v.size(); ++i) {
    w(i) = std::copysign(std::max(std::fabs(v(i)) - theta, 0.0), v(i));
  }
  return w;
}

Eigen::VectorXd RandomVector(PublicRng* rng, int d, double scale) {
  Eigen::VectorXd v(d);
  for (int i = 0; i < d; ++i) v(i) = scale * rng->Normal();
  return v;
}

TEST(ProjectL1BallTest, LandsOnBallAndMatchesBisectionReference) {
  PublicRng rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int d = 1 + static_cast<int>(rng.UniformInt(40));
    const double radius = 0.1 + 3.0 * rng.Uniform();
    const Eigen::VectorXd v = RandomVector(&rng, d, 2.0);
    const Eigen::VectorXd w = ProjectL1Ball(v, radius);
    ASSERT_LE(w.lpNorm<1>(), radius * (1 + 1e-12));
    if (v.lpNorm<1>() > radius) {
      EXPECT_NEAR(w.lpNorm<1>(), radius, 1e-12 * radius);
    }
    const Eigen::VectorXd reference = BisectionL1Projection(v, radius);
    ASSERT_LE((w - reference).cwiseAbs().maxCoeff(), 1e-12) << "d=" << d << " R=" << radius;
  }
}

TEST(ProjectL1BallTest, IsTheEuclideanProjection) {
  // Variational characterisation of the projection w = P_K(v) onto a convex
  // set K: <v - w, z - w> <= 0 for every z in K. Test it on the vertices
  // +-R e_k of the l1 ball (enough: the inequality is linear in z) and on
  // random interior points.
  PublicRng rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int d = 2 + static_cast<int>(rng.UniformInt(10));
    const double radius = 1.5;
    const Eigen::VectorXd v = RandomVector(&rng, d, 2.0);
    const Eigen::VectorXd w = ProjectL1Ball(v, radius);
    for (int k = 0; k < d; ++k) {
      for (double sign : {-1.0, 1.0}) {
        Eigen::VectorXd z = Eigen::VectorXd::Zero(d);
        z(k) = sign * radius;
        EXPECT_LE((v - w).dot(z - w), 1e-12);
      }
    }
    // And no point of the ball sampled at random is closer to v.
    for (int s = 0; s < 50; ++s) {
      const Eigen::VectorXd z = ProjectL1Ball(RandomVector(&rng, d, 1.0), radius);
      EXPECT_GE((v - z).norm(), (v - w).norm() - 1e-12);
    }
  }
}

TEST(ProjectL1BallTest, IdentityInsideTheBall) {
  PublicRng rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    Eigen::VectorXd v = RandomVector(&rng, 6, 1.0);
    v *= 0.99 * 2.0 / v.lpNorm<1>();  // ||v||_1 = 1.98 < R = 2
    EXPECT_EQ(ProjectL1Ball(v, 2.0), v);
  }
  const Eigen::VectorXd boundary = Eigen::VectorXd::Constant(4, 0.5);  // ||.||_1 = 2
  EXPECT_EQ(ProjectL1Ball(boundary, 2.0), boundary);
}

TEST(ProjectL1BallTest, KnownExample) {
  // v = (3, -1, 0.5), R = 2: theta = 1 (|3|-1 + |-1|-1 = 2), w = (2, 0, 0).
  Eigen::VectorXd v(3);
  v << 3.0, -1.0, 0.5;
  Eigen::VectorXd expected(3);
  expected << 2.0, 0.0, 0.0;
  EXPECT_LE((ProjectL1Ball(v, 2.0) - expected).norm(), 1e-15);
  // Ties: (1, 1) onto R = 1 -> (0.5, 0.5).
  EXPECT_LE((ProjectL1Ball(Eigen::Vector2d(1, 1), 1.0) - Eigen::Vector2d(0.5, 0.5)).norm(),
            1e-15);
}

// Found by fuzz/report_fuzz: with |x| around 1e17 R the l1 threshold cannot
// be resolved, and the l2 norm overflowed above ~1e154; the privacy
// argument needs every output inside the ball, exactly, at any scale.
TEST(ProjectBallTest, HugeFiniteRecordsLandInsideTheBallExactly) {
  PublicRng rng(11);
  for (double scale : {1.0, 1e8, 1e17, 1e30, 1e154, 1e200, 1e307}) {
    for (int trial = 0; trial < 50; ++trial) {
      const int d = 1 + static_cast<int>(rng.UniformInt(12));
      const Eigen::VectorXd v = RandomVector(&rng, d, 1.0) * scale;
      for (double radius : {1.0, 4.0, 0.01}) {
        const Eigen::VectorXd w1 = ProjectL1Ball(v, radius);
        const Eigen::VectorXd w2 = ProjectL2Ball(v, radius);
        ASSERT_TRUE(w1.allFinite() && w2.allFinite()) << "scale " << scale;
        EXPECT_LE(w1.lpNorm<1>(), radius) << "scale " << scale << " d " << d;
        EXPECT_LE(w2.stableNorm(), radius) << "scale " << scale << " d " << d;
        // Still useful projections: outside points reach the sphere (to the
        // precision |v| leaves for R).
        if (v.lpNorm<1>() > 2 * radius) {
          EXPECT_GE(w1.lpNorm<1>(), radius * (1 - 1e-4));
        }
        if (v.stableNorm() > 2 * radius) {
          EXPECT_GE(w2.stableNorm(), radius * (1 - 1e-9));
        }
      }
    }
  }
}

TEST(ProjectL2BallTest, RadialScalingIsTheProjection) {
  PublicRng rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int d = 1 + static_cast<int>(rng.UniformInt(20));
    const Eigen::VectorXd v = RandomVector(&rng, d, 2.0);
    const Eigen::VectorXd w = ProjectL2Ball(v, 1.0);
    EXPECT_LE(w.norm(), 1.0 + 1e-12);
    if (v.norm() <= 1.0) {
      EXPECT_EQ(w, v);
    } else {
      EXPECT_NEAR(w.norm(), 1.0, 1e-12);
      // Same direction.
      EXPECT_NEAR(w.dot(v), v.norm(), 1e-12 * v.norm());
      for (int s = 0; s < 20; ++s) {
        const Eigen::VectorXd z = ProjectL2Ball(RandomVector(&rng, d, 1.0), 1.0);
        EXPECT_GE((v - z).norm(), (v - w).norm() - 1e-12);
      }
    }
  }
}

TEST(LdpMechanismTest, LaplaceScaleIsDiameterOverEpsilon) {
  auto mechanism = LdpMechanism::Builder()
                       .SetKind(LdpKind::kLaplaceL1)
                       .SetDimension(3)
                       .SetRadius(1.7)
                       .SetEpsilon(5.0)
                       .Build();
  ASSERT_TRUE(mechanism.ok()) << mechanism.status();
  EXPECT_EQ(mechanism->sensitivity(), 2.0 * 1.7);
  EXPECT_EQ(mechanism->noise_scale(), 2.0 * 1.7 / 5.0);  // b = 2R / eps exactly
  EXPECT_EQ(mechanism->regularizer(), mechanism->noise_scale());  // lambda = b
  EXPECT_EQ(mechanism->cost_exponent(), 1);
  EXPECT_DOUBLE_EQ(mechanism->noise_stddev(), std::sqrt(2.0) * 2.0 * 1.7 / 5.0);
  EXPECT_EQ(mechanism->delta(), 0.0);
}

// The noise is discrete, so sigma comes from the RDP route (docs/privacy.md
// 2.6, 4.2), at the diameter 2R.
TEST(LdpMechanismTest, GaussianSigmaIsTheRdpRouteAtDiameter) {
  auto mechanism = LdpMechanism::Builder()
                       .SetKind(LdpKind::kGaussianL2)
                       .SetDimension(2)
                       .SetRadius(1.0)
                       .SetEpsilon(5.0)
                       .SetDelta(1e-4)
                       .Build();
  ASSERT_TRUE(mechanism.ok()) << mechanism.status();
  const double sigma = mechanism->noise_scale();
  EXPECT_EQ(sigma, privacy::RdpGaussianSigma(5.0, 1e-4, 2.0).value());
  EXPECT_EQ(mechanism->noise_stddev(), sigma);
  EXPECT_EQ(mechanism->regularizer(), 2.0 * sigma * sigma);  // lambda = 2 sigma^2
  EXPECT_EQ(mechanism->cost_exponent(), 2);
  // (eps, delta)-LDP at sensitivity 2R, checked from the closed-form curve
  // alpha (2R)^2 / (2 sigma^2) (CKS20 Thm. 4) and the improved conversion;
  // 1e-6 less noise would miss (1e-6 relative: the calibration tolerance).
  auto epsilon_at = [](double s) {
    std::vector<double> rdp;
    for (double a : privacy::DefaultRdpOrders()) rdp.push_back(a * 4.0 / (2 * s * s));
    return privacy::RdpToEpsilon(privacy::DefaultRdpOrders(), rdp, 1e-4).value().epsilon;
  };
  EXPECT_LE(epsilon_at(sigma), 5.0);
  EXPECT_GT(epsilon_at(sigma * (1 - 1e-6)), 5.0);
  // Not the analytic Gaussian's sigma, which holds for continuous noise only
  // and is smaller; still above half of the paper's eq. (5) value (0.9020
  // Delta at eps = 5, delta = 1e-4): it is calibrated to 2R, not R.
  EXPECT_GT(sigma, privacy::AnalyticGaussianSigma(5.0, 1e-4, 2.0).value());
  EXPECT_GT(sigma, 0.9020);
  // The grid's applied scale is the same route at 2R + sqrt(d) g, rounded up
  // to whole grid units.
  const double g = mechanism->noise_grid();
  const double needed = privacy::RdpGaussianSigma(5.0, 1e-4, 2.0 + std::sqrt(2.0) * g).value();
  EXPECT_GE(mechanism->applied_noise_scale(), needed);
  EXPECT_LE(mechanism->applied_noise_scale(), needed + 1.001 * g);
}

// The image settings of the LDP paper's Gaussian pipeline (Sec. 4.4:
// l2 ball R = 20, delta = 1e-4, eps 25-35) for a 28 x 28 image, at the
// diameter 2R. sigma is recomputed here independently: the Gaussian RDP
// curve alpha Delta^2 / (2 sigma^2) with the improved conversion
// eps = min_alpha rdp + log1p(-1/alpha) - (log delta + log alpha) / (alpha - 1)
// (CKS20 Prop. 12) minimised over a fine geometric grid of real orders
// (not the library's order list), then bisected on sigma.
TEST(LdpMechanismTest, ImageSettingsSigmaMatchesAnIndependentCalibration) {
  const double radius = 20.0, delta = 1e-4;
  auto epsilon_of = [&](double sigma) {
    const double sensitivity = 2 * radius;
    double best = INFINITY;
    for (double a = 1.0005; a < 500; a *= 1.0005) {
      const double rdp = a * sensitivity * sensitivity / (2 * sigma * sigma);
      best = std::min(best, rdp + std::log1p(-1 / a) - (std::log(delta) + std::log(a)) / (a - 1));
    }
    return best;
  };
  auto independent_sigma = [&](double eps) {
    double lo = 1, hi = 100;
    for (int it = 0; it < 60; ++it) {
      const double mid = 0.5 * (lo + hi);
      (epsilon_of(mid) <= eps ? hi : lo) = mid;
    }
    return hi;
  };
  // The paper's eq. (5): sigma > (c + sqrt(c^2 + eps)) / (eps sqrt 2) Delta,
  // c^2 = ln(2 / (sqrt(16 delta + 1) - 1)).
  auto eq5 = [&](double eps, double sensitivity) {
    const double c2 = std::log(2 / (std::sqrt(16 * delta + 1) - 1));
    return (std::sqrt(c2) + std::sqrt(c2 + eps)) / (eps * std::sqrt(2.0)) * sensitivity;
  };
  for (double eps : {25.0, 30.0, 35.0}) {
    auto mechanism = LdpMechanism::Builder()
                         .SetKind(LdpKind::kGaussianL2)
                         .SetDimension(784)
                         .SetRadius(radius)
                         .SetEpsilon(eps)
                         .SetDelta(delta)
                         .Build();
    ASSERT_TRUE(mechanism.ok()) << mechanism.status();
    const double sigma = mechanism->noise_scale();
    const double reference = independent_sigma(eps);
    // The library's order grid is coarser than this one, so its sigma can
    // only be (slightly) larger; 0.5% bounds the grid's slack.
    EXPECT_GE(sigma, reference * (1 - 1e-6)) << eps;
    EXPECT_LE(sigma, reference * 1.005) << eps;
    // Calibrated to the diameter: about eq. (5) at 2R (within 1%), about
    // twice the paper's own value at Delta = R (4.218 at eps = 30).
    EXPECT_NEAR(sigma / eq5(eps, 2 * radius), 1.0, 0.01) << eps;
    EXPECT_GT(sigma, 1.99 * eq5(eps, radius)) << eps;
    EXPECT_EQ(mechanism->regularizer(), 2 * sigma * sigma);
    // The applied grid noise is at most a relative 1e-4 above.
    EXPECT_GE(mechanism->applied_noise_scale(), sigma);
    EXPECT_LE(mechanism->applied_noise_scale(), sigma * (1 + 1e-4));
  }
  // Pinned: eps = 30 gives sigma = 8.46 per pixel (against 4.218 in the
  // paper's table at Delta = R).
  EXPECT_NEAR(independent_sigma(30.0), 8.46, 0.01);
}

TEST(LdpMechanismTest, BuilderValidates) {
  auto base = [] {
    return LdpMechanism::Builder().SetKind(LdpKind::kGaussianL2).SetDimension(2).SetRadius(1).SetEpsilon(1).SetDelta(1e-5);
  };
  EXPECT_TRUE(base().Build().ok());
  EXPECT_EQ(LdpMechanism::Builder().SetDimension(2).SetRadius(1).SetEpsilon(1).Build().status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(base().SetDimension(0).Build().ok());
  EXPECT_FALSE(base().SetRadius(0).Build().ok());
  EXPECT_FALSE(base().SetRadius(NAN).Build().ok());
  EXPECT_FALSE(base().SetEpsilon(-1).Build().ok());
  EXPECT_FALSE(base().SetEpsilon(INFINITY).Build().ok());
  EXPECT_FALSE(base().SetDelta(0).Build().ok());
  EXPECT_FALSE(base().SetDelta(1).Build().ok());
  EXPECT_FALSE(base().SetKind(LdpKind::kLaplaceL1).Build().ok());  // delta set
  EXPECT_TRUE(base().SetKind(LdpKind::kLaplaceL1).SetDelta(0).Build().ok());
}

TEST(LdpMechanismTest, KindNamesRoundTrip) {
  for (LdpKind kind : {LdpKind::kLaplaceL1, LdpKind::kGaussianL2}) {
    EXPECT_EQ(ParseLdpKind(LdpKindName(kind)).value(), kind);
  }
  EXPECT_FALSE(ParseLdpKind("laplace").ok());
}

TEST(LdpMechanismTest, PrivatizeValidatesAndProjects) {
  auto mechanism = LdpMechanism::Builder()
                       .SetKind(LdpKind::kLaplaceL1)
                       .SetDimension(3)
                       .SetRadius(2.0)
                       .SetEpsilon(1.0)
                       .Build()
                       .value();
  privacy::ZeroNoiseSource zero;
  Eigen::VectorXd v(3);
  v << 3.0, -1.0, 0.5;
  // With no noise the report is the projection (2, 0, 0).
  const Eigen::VectorXd y = mechanism.Privatize(v, &zero).value();
  EXPECT_LE((y - Eigen::Vector3d(2, 0, 0)).norm(), 1e-15);
  EXPECT_FALSE(mechanism.Privatize(Eigen::VectorXd::Zero(2), &zero).ok());
  EXPECT_FALSE(mechanism.Privatize(Eigen::Vector3d(NAN, 0, 0), &zero).ok());
  EXPECT_FALSE(mechanism.Privatize(v, nullptr).ok());
}

TEST(LdpMechanismTest, ProjectionHasDiameterSensitivity) {
  // Any two projected records differ by at most 2R in the mechanism's norm,
  // and antipodal points attain it: the sensitivity is the diameter.
  PublicRng rng(19);
  for (int trial = 0; trial < 500; ++trial) {
    const Eigen::VectorXd a = ProjectL1Ball(RandomVector(&rng, 5, 3.0), 1.0);
    const Eigen::VectorXd b = ProjectL1Ball(RandomVector(&rng, 5, 3.0), 1.0);
    EXPECT_LE((a - b).lpNorm<1>(), 2.0 + 1e-12);
    const Eigen::VectorXd c = ProjectL2Ball(RandomVector(&rng, 5, 3.0), 1.0);
    const Eigen::VectorXd e = ProjectL2Ball(RandomVector(&rng, 5, 3.0), 1.0);
    EXPECT_LE((c - e).norm(), 2.0 + 1e-12);
  }
  Eigen::VectorXd e1 = Eigen::VectorXd::Zero(5);
  e1(0) = 5.0;
  EXPECT_NEAR((ProjectL1Ball(e1, 1.0) - ProjectL1Ball(-e1, 1.0)).lpNorm<1>(), 2.0, 1e-15);
}

// ---- Distribution of the device noise ----

double StandardNormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double LaplaceCdf(double x, double b) {
  return x < 0 ? 0.5 * std::exp(x / b) : 1.0 - 0.5 * std::exp(-x / b);
}

// Kolmogorov-Smirnov statistic sup_x |F_n(x) - F(x)|.
template <typename Cdf>
double KsStatistic(std::vector<double> samples, Cdf cdf) {
  std::sort(samples.begin(), samples.end());
  const double n = static_cast<double>(samples.size());
  double d = 0.0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const double f = cdf(samples[i]);
    d = std::max({d, f - i / n, (i + 1) / n - f});
  }
  return d;
}

// Asymptotic Kolmogorov critical value: P(sqrt(n) D_n > c) ~ 2 exp(-2 c^2),
// so c(alpha) = sqrt(ln(2 / alpha) / 2).
double KsCritical(double alpha, size_t n) {
  return std::sqrt(std::log(2.0 / alpha) / 2.0) / std::sqrt(static_cast<double>(n));
}

// Noise samples: reports of a record inside the ball minus the record
// (which the projection leaves unchanged).
std::vector<double> NoiseSamples(const LdpMechanism& mechanism, privacy::NoiseSource* source,
                                 int records) {
  const int d = mechanism.dimension();
  Eigen::VectorXd x = Eigen::VectorXd::Constant(d, 0.1 * mechanism.radius() / d);
  std::vector<double> out;
  for (int r = 0; r < records; ++r) {
    const Eigen::VectorXd y = mechanism.Privatize(x, source).value();
    for (int i = 0; i < d; ++i) out.push_back(y(i) - x(i));
  }
  return out;
}

// `alpha` is the KS level; `standard_errors` the tolerance of the variance
// checks (4.5 for seeded draws, 6.5 for the non-reproducible source).
void ExpectCalibratedNoise(const LdpMechanism& mechanism, privacy::NoiseSource* source,
                           double alpha, double standard_errors = 4.5) {
  const std::vector<double> noise = NoiseSamples(mechanism, source, 12000);
  ASSERT_GE(noise.size(), 20000u);
  const double scale = mechanism.noise_scale();
  double ks;
  double kurtosis;
  if (mechanism.kind() == LdpKind::kLaplaceL1) {
    ks = KsStatistic(noise, [scale](double x) { return LaplaceCdf(x, scale); });
    kurtosis = 6.0;
  } else {
    ks = KsStatistic(noise, [scale](double x) { return StandardNormalCdf(x / scale); });
    kurtosis = 3.0;
  }
  EXPECT_LT(ks, KsCritical(alpha, noise.size())) << LdpKindName(mechanism.kind());
  // Empirical variance vs the calibrated one: the estimator's relative
  // standard error is sqrt((kurtosis - 1) / n); allow `standard_errors`.
  double sum = 0.0, sum_sq = 0.0;
  for (double v : noise) {
    sum += v;
    sum_sq += v * v;
  }
  const double n = static_cast<double>(noise.size());
  const double variance = sum_sq / n - (sum / n) * (sum / n);
  const double expected = mechanism.noise_stddev() * mechanism.noise_stddev();
  EXPECT_NEAR(variance / expected, 1.0, standard_errors * std::sqrt((kurtosis - 1.0) / n));
  // Std within CLT tolerance (delta method: half the variance's).
  EXPECT_NEAR(std::sqrt(variance) / mechanism.noise_stddev(), 1.0,
              standard_errors * 0.5 * std::sqrt((kurtosis - 1.0) / n));
}

LdpMechanism Laplace() {
  return LdpMechanism::Builder()
      .SetKind(LdpKind::kLaplaceL1)
      .SetDimension(2)
      .SetRadius(std::sqrt(2.0))
      .SetEpsilon(5.0)
      .Build()
      .value();
}
LdpMechanism Gaussian() {
  return LdpMechanism::Builder()
      .SetKind(LdpKind::kGaussianL2)
      .SetDimension(2)
      .SetRadius(1.0)
      .SetEpsilon(5.0)
      .SetDelta(1e-4)
      .Build()
      .value();
}

TEST(LdpNoiseTest, LaplaceNoiseIsCalibratedSeeded) {
  privacy::SeededNoiseSource source(1234);
  ExpectCalibratedNoise(Laplace(), &source, 1e-3);
}

TEST(LdpNoiseTest, GaussianNoiseIsCalibratedSeeded) {
  privacy::SeededNoiseSource source(4321);
  ExpectCalibratedNoise(Gaussian(), &source, 1e-3);
}

TEST(LdpNoiseTest, ProductionSourceIsCalibrated) {
  // Non-reproducible draws: test where a false alarm is ~1e-9 (KS) and
  // ~1e-10 (6.5 standard errors).
  auto source = privacy::SecureNoiseSource::Create().value();
  ExpectCalibratedNoise(Laplace(), source.get(), 1e-9, 6.5);
  ExpectCalibratedNoise(Gaussian(), source.get(), 1e-9, 6.5);
}

TEST(LdpNoiseTest, WrongScaleIsDetected) {
  // Power check of the KS test above: noise calibrated to the radius R
  // (the paper's choice, pitfall 1) instead of 2R is rejected.
  privacy::SeededNoiseSource source(99);
  const LdpMechanism half = LdpMechanism::Builder()
                                .SetKind(LdpKind::kLaplaceL1)
                                .SetDimension(2)
                                .SetRadius(std::sqrt(2.0) / 2)
                                .SetEpsilon(5.0)
                                .Build()
                                .value();
  const std::vector<double> noise = NoiseSamples(half, &source, 12000);
  const double b = Laplace().noise_scale();
  EXPECT_GT(KsStatistic(noise, [b](double x) { return LaplaceCdf(x, b); }),
            KsCritical(1e-3, noise.size()));
}

}  // namespace
}  // namespace dpcurator::ldp
