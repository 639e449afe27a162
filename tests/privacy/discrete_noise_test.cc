// Distribution tests of the exact samplers and the grid layer
// (core/privacy/discrete_noise.h, docs/privacy.md 4.2). Every statistical
// check compares against the exact law at a fixed level with a fixed seed,
// so the verdict is deterministic; the secure-source cases run at a looser
// level (1e-6). The *Power tests show that the same checks reject a wrong
// pmf, so they can fail.

#include "core/privacy/discrete_noise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "core/ldp/mechanism.h"
#include "core/privacy/calibration.h"
#include "core/privacy/noise_source.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"
#include "tests/privacy/test_util.h"

namespace dpcurator::privacy {
namespace {

using testing::ChiSquare;
using testing::ChiSquareCritical;
using testing::NormalUpperQuantile;

// Pearson's chi-square of integer samples against a symmetric unimodal pmf:
// one bin per integer x with expected count N p(x) >= 5, both tails pooled
// into one bin (merged into the outermost bins when its expectation is
// below 5).
ChiSquare ChiSquareAgainst(const std::vector<int64_t>& samples,
                           const std::function<double(int64_t)>& pmf) {
  const double n = static_cast<double>(samples.size());
  int64_t k = 0;
  while (n * pmf(k + 1) >= 5.0) ++k;
  std::map<int64_t, double> observed;
  double tail_observed = 0.0;
  for (int64_t x : samples) {
    if (x < -k || x > k) {
      tail_observed += 1.0;
    } else {
      observed[x] += 1.0;
    }
  }
  std::vector<std::pair<double, double>> bins;  // (observed, expected)
  double inside = 0.0;
  for (int64_t x = -k; x <= k; ++x) {
    bins.push_back({observed[x], n * pmf(x)});
    inside += pmf(x);
  }
  const double tail_expected = n * std::max(0.0, 1.0 - inside);
  if (tail_expected >= 5.0) {
    bins.push_back({tail_observed, tail_expected});
  } else {
    bins.front().first += bins.back().first + tail_observed;
    bins.front().second += bins.back().second + tail_expected;
    bins.pop_back();
  }
  ChiSquare result;
  for (const auto& [o, e] : bins) result.statistic += (o - e) * (o - e) / e;
  result.df = static_cast<int>(bins.size()) - 1;
  return result;
}

void ExpectChiSquarePasses(const std::vector<int64_t>& samples,
                           const std::function<double(int64_t)>& pmf, double level) {
  const ChiSquare c = ChiSquareAgainst(samples, pmf);
  ASSERT_GE(c.df, 1);
  EXPECT_LT(c.statistic, ChiSquareCritical(c.df, level))
      << "chi-square " << c.statistic << " with " << c.df << " degrees of freedom";
}

bool ChiSquareRejects(const std::vector<int64_t>& samples,
                      const std::function<double(int64_t)>& pmf, double level) {
  const ChiSquare c = ChiSquareAgainst(samples, pmf);
  return c.statistic > ChiSquareCritical(c.df, level);
}

// Exact pmf of the discrete Gaussian N_Z(0, sigma^2): exp(-x^2/(2 sigma^2))
// over its normaliser, summed until the terms vanish in double precision.
std::function<double(int64_t)> DiscreteGaussianPmf(double sigma) {
  double normaliser = 1.0;
  for (int64_t x = 1; x <= static_cast<int64_t>(40 * sigma) + 40; ++x) {
    normaliser += 2.0 * std::exp(-0.5 * x * x / (sigma * sigma));
  }
  return [sigma, normaliser](int64_t x) {
    return std::exp(-0.5 * static_cast<double>(x) * x / (sigma * sigma)) / normaliser;
  };
}

// Exact pmf of the discrete Laplace: (1 - e^{-1/t}) / (1 + e^{-1/t}) e^{-|x|/t}.
std::function<double(int64_t)> DiscreteLaplacePmf(double t) {
  const double r = std::exp(-1.0 / t);
  return [t, r](int64_t x) {
    return (1.0 - r) / (1.0 + r) * std::exp(-std::fabs(static_cast<double>(x)) / t);
  };
}

// A continuous Gaussian rounded to the nearest integer: close to, but not, the
// discrete Gaussian (variance sigma^2 + 1/12 instead of about sigma^2).
std::function<double(int64_t)> RoundedGaussianPmf(double sigma) {
  return [sigma](int64_t x) {
    const double s = sigma * std::sqrt(2.0);
    return 0.5 * (std::erfc(-(x + 0.5) / s) - std::erfc(-(x - 0.5) / s));
  };
}

std::vector<int64_t> DrawGaussian(NoiseSource* noise, uint64_t sigma, int n) {
  std::vector<int64_t> x(n);
  for (auto& v : x) v = DiscreteGaussian(noise, sigma);
  return x;
}

std::vector<int64_t> DrawLaplace(NoiseSource* noise, uint64_t scale, int n) {
  std::vector<int64_t> x(n);
  for (auto& v : x) v = DiscreteLaplace(noise, scale);
  return x;
}

// KS distance between integer samples and an integer-valued law with CDF
// F(x) = P[X <= x], checked on both sides of every jump. For a discrete law
// the continuous KS critical value is conservative.
double DiscreteKs(std::vector<int64_t> samples, const std::function<double(int64_t)>& cdf) {
  std::sort(samples.begin(), samples.end());
  const double n = static_cast<double>(samples.size());
  double d = 0.0;
  size_t i = 0;
  while (i < samples.size()) {
    size_t j = i;
    while (j < samples.size() && samples[j] == samples[i]) ++j;
    const int64_t x = samples[i];
    d = std::max({d, std::fabs(j / n - cdf(x)), std::fabs(i / n - cdf(x - 1))});
    i = j;
  }
  return d;
}

double KsCritical(double level, size_t n) {
  return std::sqrt(-0.5 * std::log(level / 2)) / std::sqrt(static_cast<double>(n));
}

// P[X <= x] for N_Z(0, sigma^2) with sigma >= 2^20: Phi((x + 1/2)/sigma) up to
// O(sigma^-2), far below the KS resolution here.
std::function<double(int64_t)> LargeGaussianCdf(double sigma) {
  return [sigma](int64_t x) {
    return 0.5 * std::erfc(-(static_cast<double>(x) + 0.5) / (sigma * std::sqrt(2.0)));
  };
}

// P[X <= x] for the discrete Laplace of scale t, exactly (geometric sums).
std::function<double(int64_t)> DiscreteLaplaceCdf(double t) {
  const double r = std::exp(-1.0 / t);
  return [r](int64_t x) {
    // P[X <= -k] = r^k / (1 + r) for k >= 0 ... and symmetry.
    if (x < 0) return std::pow(r, static_cast<double>(-x)) / (1.0 + r);
    return 1.0 - std::pow(r, static_cast<double>(x + 1)) / (1.0 + r);
  };
}

// --- Bernoulli and uniform building blocks ---------------------------------

TEST(BernoulliExpNegTest, FrequencyMatchesExpMinusGammaForRationalGamma) {
  // Binomial z-test at two-sided level 1e-5 per gamma (|z| < 4.42).
  const double z_critical = NormalUpperQuantile(0.5e-5);
  SeededNoiseSource noise(101);
  const int n = 200000;
  const std::pair<uint64_t, uint64_t> gammas[] = {{1, 3}, {1, 1},  {7, 5},
                                                  {5, 2}, {10, 3}, {123456789, 98765432}};
  for (const auto& [num, den] : gammas) {
    const double p = std::exp(-static_cast<double>(num) / static_cast<double>(den));
    int hits = 0;
    for (int i = 0; i < n; ++i) hits += BernoulliExpNeg(&noise, num, den) ? 1 : 0;
    const double z = (hits - n * p) / std::sqrt(n * p * (1 - p));
    EXPECT_LT(std::fabs(z), z_critical) << "gamma = " << num << "/" << den;
  }
  // gamma = 0 always succeeds; a huge gamma (exp(-1000)) never does.
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(BernoulliExpNeg(&noise, 0, 7));
    EXPECT_FALSE(BernoulliExpNeg(&noise, 1000, 1));
  }
}

TEST(BernoulliExpNegTest, DenominatorsBeyond64Bits) {
  // gamma = num / den with den ~ 2^100: the 128-bit path.
  const double z_critical = NormalUpperQuantile(0.5e-5);
  SeededNoiseSource noise(7);
  const uint128 den = uint128{1} << 100;
  const uint128 num = (uint128{3} << 99) + 12345;  // gamma = 1.5 + tiny
  const double p = std::exp(-1.5);
  const int n = 100000;
  int hits = 0;
  for (int i = 0; i < n; ++i) hits += BernoulliExpNeg(&noise, num, den) ? 1 : 0;
  EXPECT_LT(std::fabs((hits - n * p) / std::sqrt(n * p * (1 - p))), z_critical);
}

TEST(UniformBelowTest, UniformAndInRange) {
  SeededNoiseSource noise(5);
  // Chi-square over 7 cells.
  std::vector<int64_t> counts(7, 0);
  const int n = 70000;
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(UniformBelow(&noise, 7))];
  double chi = 0.0;
  for (int64_t c : counts) chi += (c - n / 7.0) * (c - n / 7.0) / (n / 7.0);
  EXPECT_LT(chi, ChiSquareCritical(6, 1e-4));
  // A bound above 2^64: always below it, and the top part is hit at its rate.
  const uint128 bound = (uint128{3} << 64) + 5;
  int top = 0;
  for (int i = 0; i < 30000; ++i) {
    const uint128 x = UniformBelow(&noise, bound);
    ASSERT_LT(x, bound);
    top += x >= (uint128{2} << 64) ? 1 : 0;
  }
  const double p = 1.0 / 3.0;
  EXPECT_LT(std::fabs((top - 30000 * p) / std::sqrt(30000 * p * (1 - p))),
            NormalUpperQuantile(0.5e-5));
  EXPECT_EQ(UniformBelow(&noise, 1), 0u);
}

// --- Samplers against the exact pmf ---------------------------------------

TEST(DiscreteGaussianTest, MatchesExactPmfAtSmallScales) {
  for (uint64_t sigma : {1, 2, 7, 30}) {
    SeededNoiseSource noise(1000 + sigma);
    ExpectChiSquarePasses(DrawGaussian(&noise, sigma, 100000),
                          DiscreteGaussianPmf(static_cast<double>(sigma)), 1e-4);
  }
}

TEST(DiscreteLaplaceTest, MatchesExactPmfAtSmallScales) {
  for (uint64_t t : {1, 2, 7, 30}) {
    SeededNoiseSource noise(2000 + t);
    ExpectChiSquarePasses(DrawLaplace(&noise, t, 100000),
                          DiscreteLaplacePmf(static_cast<double>(t)), 1e-4);
  }
}

TEST(DiscreteSamplersTest, MatchTheirLawsAtGridScales) {
  // The scales the grid produces (2^20 to 2^21 units), and the samplers'
  // upper limit 2^31 (the 128-bit bounds of DiscreteGaussian are tight there).
  for (uint64_t sigma : {uint64_t{1} << 20, (uint64_t{1} << 21) - 3, kMaxDiscreteScale}) {
    SeededNoiseSource noise(sigma);
    const auto g = DrawGaussian(&noise, sigma, 40000);
    EXPECT_LT(DiscreteKs(g, LargeGaussianCdf(static_cast<double>(sigma))),
              KsCritical(1e-4, g.size()));
    const auto l = DrawLaplace(&noise, sigma, 40000);
    EXPECT_LT(DiscreteKs(l, DiscreteLaplaceCdf(static_cast<double>(sigma))),
              KsCritical(1e-4, l.size()));
  }
}

// The secure source is not reproducible: a false alarm must be rare enough
// never to redden CI (1e-9 per check), and the checks still reject a 10%
// scale error at these sizes (DiscreteNoisePowerTest.LooseLevelStillRejects).
constexpr double kNonReproducibleLevel = 1e-9;

TEST(DiscreteSamplersTest, SecureSourceAtALooserLevel) {
  auto noise = SecureNoiseSource::Create().value();
  ExpectChiSquarePasses(DrawGaussian(noise.get(), 3, 50000), DiscreteGaussianPmf(3.0),
                        kNonReproducibleLevel);
  ExpectChiSquarePasses(DrawLaplace(noise.get(), 2, 50000), DiscreteLaplacePmf(2.0),
                        kNonReproducibleLevel);
  const uint64_t big = uint64_t{1} << 20;
  const auto g = DrawGaussian(noise.get(), big, 20000);
  EXPECT_LT(DiscreteKs(g, LargeGaussianCdf(static_cast<double>(big))),
            KsCritical(kNonReproducibleLevel, g.size()));
}

TEST(DiscreteNoisePowerTest, LooseLevelStillRejects) {
  SeededNoiseSource noise(1009);
  EXPECT_TRUE(ChiSquareRejects(DrawGaussian(&noise, 3, 50000), DiscreteGaussianPmf(3.3),
                               kNonReproducibleLevel));
  EXPECT_TRUE(ChiSquareRejects(DrawLaplace(&noise, 2, 50000), DiscreteLaplacePmf(2.2),
                               kNonReproducibleLevel));
  const uint64_t big = uint64_t{1} << 20;
  const auto g = DrawGaussian(&noise, big, 20000);
  EXPECT_GT(DiscreteKs(g, LargeGaussianCdf(1.1 * static_cast<double>(big))),
            KsCritical(kNonReproducibleLevel, g.size()));
}

// The checks above can fail: the same samples against a wrong pmf.
TEST(DiscreteNoisePowerTest, ChiSquareRejectsWrongPmfs) {
  SeededNoiseSource noise(1007);
  const auto g7 = DrawGaussian(&noise, 7, 100000);
  EXPECT_TRUE(ChiSquareRejects(g7, DiscreteGaussianPmf(7.7), 1e-4));  // 10% wrong scale
  EXPECT_TRUE(ChiSquareRejects(g7, DiscreteLaplacePmf(7.0 / std::sqrt(2.0)), 1e-4));
  const auto g1 = DrawGaussian(&noise, 1, 100000);
  EXPECT_TRUE(ChiSquareRejects(g1, RoundedGaussianPmf(1.0), 1e-4));  // rounded continuous
  const auto l7 = DrawLaplace(&noise, 7, 100000);
  EXPECT_TRUE(ChiSquareRejects(l7, DiscreteLaplacePmf(7.7), 1e-4));
  EXPECT_TRUE(ChiSquareRejects(l7, DiscreteGaussianPmf(7.0 * std::sqrt(2.0)), 1e-4));
  const auto big = DrawGaussian(&noise, uint64_t{1} << 20, 40000);
  EXPECT_GT(DiscreteKs(big, LargeGaussianCdf(1.1 * (1 << 20))), KsCritical(1e-4, big.size()));
}

TEST(DiscreteNoiseTest, SeededDrawsAreReproducible) {
  SeededNoiseSource a(5), b(5), c(6);
  std::vector<int64_t> x, y, z;
  for (int i = 0; i < 50; ++i) {
    x.push_back(DiscreteGaussian(&a, 1000));
    y.push_back(DiscreteGaussian(&b, 1000));
    z.push_back(DiscreteGaussian(&c, 1000));
  }
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
}

// --- The grid --------------------------------------------------------------

bool IsPowerOfTwo(double g) {
  int e = 0;
  return g > 0 && std::frexp(g, &e) == 0.5;
}

TEST(GridNoiseTest, GridIsAPowerOfTwoTwentyOrdersBelowTheScale) {
  PublicRng rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    const double s = std::exp(-3.0 + 6.0 * rng.Uniform());
    const double delta = std::exp(-20.0 + 25.0 * rng.Uniform());
    const int64_t d = 1 + static_cast<int64_t>(rng.UniformInt(100000));
    const GridNoise spec = GridGaussianNoise(s, delta, d).value();
    ASSERT_TRUE(IsPowerOfTwo(spec.grid));
    EXPECT_EQ(spec.grid, std::ldexp(1.0, spec.grid_exponent));
    const double ratio = s * delta / spec.grid;
    EXPECT_GE(ratio, 0x1.0p20);
    EXPECT_LT(ratio, 0x1.0p21);
    // Never below the inflated scale s (Delta + sqrt(d) g), and not much above.
    const double needed = s * (delta + std::sqrt(static_cast<double>(d)) * spec.grid);
    EXPECT_GE(spec.scale(), needed);
    EXPECT_LE(spec.scale(), needed + 1.001 * spec.grid);
  }
}

TEST(GridNoiseTest, EveryReleasedValueIsOnTheGrid) {
  PublicRng rng(11);
  SeededNoiseSource noise(12);
  for (int trial = 0; trial < 300; ++trial) {
    const int d = 1 + static_cast<int>(rng.UniformInt(50));
    Eigen::VectorXd values(d);
    const double magnitude = std::exp(-10.0 + 20.0 * rng.Uniform());
    for (int i = 0; i < d; ++i) values(i) = magnitude * (2.0 * rng.Uniform() - 1.0);
    const double s = 0.3 + 5.0 * rng.Uniform();
    const double delta = std::exp(-8.0 + 12.0 * rng.Uniform());
    const bool laplace = trial % 2 == 1;
    const auto spec = laplace ? AddGridLaplaceNoise(values, s, delta, &noise)
                              : AddGridGaussianNoise(values, s, delta, &noise);
    ASSERT_TRUE(spec.ok()) << spec.status();
    ASSERT_TRUE(IsPowerOfTwo(spec->grid));
    for (int i = 0; i < d; ++i) {
      const double units = values(i) / spec->grid;
      EXPECT_EQ(units, std::round(units)) << values(i) << " on grid " << spec->grid;
    }
  }
}

TEST(GridNoiseTest, GridPathMatchesTheDiscreteLawAtContinuousScales) {
  // Continuous scales 0.5, 2 and 7.3 go through the grid: released / g is
  // the integer snapped value plus a discrete Gaussian (Laplace) draw of
  // scale_units; with zero inputs, exactly the draw.
  for (double sigma : {0.5, 2.0, 7.3}) {
    SeededNoiseSource noise(static_cast<uint64_t>(10 * sigma));
    Eigen::VectorXd values = Eigen::VectorXd::Zero(30000);
    const GridNoise spec = AddGridGaussianNoise(values, sigma, 1.0, &noise).value();
    std::vector<int64_t> units(values.size());
    for (Eigen::Index i = 0; i < values.size(); ++i)
      units[i] = static_cast<int64_t>(values(i) / spec.grid);
    EXPECT_LT(DiscreteKs(units, LargeGaussianCdf(static_cast<double>(spec.scale_units))),
              KsCritical(1e-4, units.size()));
    // Wrong by the inflation alone would not be detectable; wrong by 10% is.
    EXPECT_GT(DiscreteKs(units, LargeGaussianCdf(1.1 * static_cast<double>(spec.scale_units))),
              KsCritical(1e-4, units.size()));

    const GridNoise laplace = GridLaplaceNoise(1.0, sigma, 4).value();
    values.setZero();
    ASSERT_TRUE(AddGridNoise(laplace, values, &noise).ok());
    for (Eigen::Index i = 0; i < values.size(); ++i)
      units[i] = static_cast<int64_t>(values(i) / laplace.grid);
    EXPECT_LT(DiscreteKs(units, DiscreteLaplaceCdf(static_cast<double>(laplace.scale_units))),
              KsCritical(1e-4, units.size()));
  }
}

// Snapping adds at most sqrt(d) g (L2) and d g (L1) to the sensitivity, and
// the discrete noise is inflated enough that the integer shift in grid units
// over the integer scale stays within the requested 1/s (Gaussian RDP
// alpha ||mu||^2 / (2 sigma^2) <= alpha / (2 s^2)) or eps (Laplace).
TEST(GridNoiseTest, SnappedNeighboursStayWithinTheInflatedSensitivity) {
  PublicRng rng(21);
  for (int trial = 0; trial < 3000; ++trial) {
    const int d = 1 + static_cast<int>(rng.UniformInt(40));
    const double delta = std::exp(-6.0 + 8.0 * rng.Uniform());
    const double s = 0.5 + 3.0 * rng.Uniform();
    // f(D) anywhere; f(D') at L2 (resp. L1) distance at most delta, often
    // exactly delta, in a random direction.
    Eigen::VectorXd a(d), direction(d);
    for (int i = 0; i < d; ++i) {
      a(i) = 100.0 * delta * (2.0 * rng.Uniform() - 1.0);
      direction(i) = 2.0 * rng.Uniform() - 1.0;
    }
    const double length = rng.Uniform() < 0.5 ? delta : delta * rng.Uniform();
    const Eigen::VectorXd b2 = a + direction.normalized() * length;
    const Eigen::VectorXd b1 = a + direction / direction.lpNorm<1>() * length;

    const GridNoise gauss = GridGaussianNoise(s, delta, d).value();
    Eigen::VectorXd shift(d);
    for (int i = 0; i < d; ++i)
      shift(i) = SnapToGrid(a(i), gauss.grid_exponent) - SnapToGrid(b2(i), gauss.grid_exponent);
    EXPECT_LE(shift.norm(), delta + std::sqrt(static_cast<double>(d)) * gauss.grid + 1e-12 * delta);
    const double mu = (shift / gauss.grid).norm();  // integer shift in grid units
    EXPECT_LE(mu / static_cast<double>(gauss.scale_units), 1.0 / s * (1 + 1e-12));

    const double eps = 0.1 + 3.0 * rng.Uniform();
    const GridNoise lap = GridLaplaceNoise(eps, delta, d).value();
    for (int i = 0; i < d; ++i)
      shift(i) = SnapToGrid(a(i), lap.grid_exponent) - SnapToGrid(b1(i), lap.grid_exponent);
    EXPECT_LE(shift.lpNorm<1>(), delta + d * lap.grid + 1e-12 * delta);
    EXPECT_LE(shift.lpNorm<1>() / lap.grid / static_cast<double>(lap.scale_units),
              eps * (1 + 1e-12));
  }
}

TEST(GridNoiseTest, RoundingDistanceIsNeededInTheSensitivity) {
  // Without the inflation the bound would fail: two inputs 0.02 g apart per
  // coordinate snap a whole grid step apart.
  const GridNoise spec = GridGaussianNoise(1.0, 1.0, 16).value();
  const double g = spec.grid;
  double before = 0.0, after = 0.0;
  for (int i = 0; i < 16; ++i) {
    const double a = 0.49 * g, b = 0.51 * g;
    before += (a - b) * (a - b);
    const double snapped = SnapToGrid(a, spec.grid_exponent) - SnapToGrid(b, spec.grid_exponent);
    after += snapped * snapped;
  }
  EXPECT_NEAR(std::sqrt(before), 0.08 * g, 1e-9 * g);
  EXPECT_EQ(std::sqrt(after), 4.0 * g);  // = sqrt(d) g, the added term
}

TEST(GridNoiseTest, ZeroSourceLeavesValuesExactAndBadInputsAreRefused) {
  ZeroNoiseSource zero;
  Eigen::VectorXd values(3);
  values << 0.123456789, -3.0e-7, 1234.5;
  const Eigen::VectorXd original = values;
  ASSERT_TRUE(AddGridGaussianNoise(values, 1.0, 1.0, &zero).ok());
  EXPECT_EQ(values, original);

  SeededNoiseSource noise(1);
  // Too large for the grid: 2^53 grid units. Clamped to 2^52 units before
  // the noise (a refusal would depend on the rows), never refused.
  const GridNoise spec = GridGaussianNoise(1.0, 1.0, 3).value();
  values << 1.0, std::ldexp(1.0, spec.grid_exponent + 53), -std::ldexp(1.0, spec.grid_exponent + 60);
  ASSERT_TRUE(AddGridNoise(spec, values, &noise).ok());
  const double limit = std::ldexp(kMaxGridUnits, spec.grid_exponent);
  const double noise_bound = 64 * spec.scale();  // |Z| > 64 sigma: probability < e^-2000
  EXPECT_LE(std::fabs(values(1) - limit), noise_bound);
  EXPECT_LE(std::fabs(values(2) + limit), noise_bound);
  // A non-finite value is refused, values untouched, and the message names
  // neither the coordinate nor the value (they are functions of rows).
  values << 1.0, std::nan(""), 2.0;
  const absl::Status non_finite = AddGridNoise(spec, values, &noise);
  EXPECT_EQ(non_finite.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(non_finite.message(), "the released vector has a non-finite value");
  EXPECT_TRUE(std::isnan(values(1)));
  EXPECT_FALSE(AddGridNoise(spec, values, nullptr).ok());
  // Bad parameters.
  EXPECT_EQ(GridGaussianNoise(0.0, 1.0, 3).status().message(),
            "Noise multiplier must be finite and positive, got 0");
  EXPECT_FALSE(GridGaussianNoise(1.0, -1.0, 3).ok());
  EXPECT_FALSE(GridGaussianNoise(1.0, 1.0, 0).ok());
  EXPECT_FALSE(GridLaplaceNoise(0.0, 1.0, 3).ok());
  EXPECT_EQ(GridExponentFor(1e-310).status().code(), absl::StatusCode::kOutOfRange);
  // A rounding distance that dwarfs the sensitivity needs more than 2^31
  // grid units: refused rather than silently under-noised.
  EXPECT_EQ(GridGaussianNoise(1.0, 1.0, int64_t{1} << 62).status().code(),
            absl::StatusCode::kOutOfRange);
  GridNoise forged = spec;
  forged.grid = 0.3;
  EXPECT_FALSE(AddGridNoise(forged, values, &noise).ok());
}

// Device reports (LdpMechanism::Privatize) go through the same grid: every
// coordinate is a grid multiple, and the applied scale includes the
// rounding distance (docs/privacy.md 2.6, 4.3).
TEST(GridNoiseTest, LocalDpReportsAreOnTheGridWithInflatedScale) {
  SeededNoiseSource noise(31);
  PublicRng rng(32);
  for (const auto kind : {ldp::LdpKind::kLaplaceL1, ldp::LdpKind::kGaussianL2}) {
    const int d = 6;
    const double radius = 1.5, epsilon = 2.0, delta = 1e-5;
    ldp::LdpMechanism::Builder builder;
    builder.SetKind(kind).SetDimension(d).SetRadius(radius).SetEpsilon(epsilon);
    if (kind == ldp::LdpKind::kGaussianL2) builder.SetDelta(delta);
    const ldp::LdpMechanism mechanism = builder.Build().value();
    const double g = mechanism.noise_grid();
    ASSERT_TRUE(IsPowerOfTwo(g));
    const double needed =
        kind == ldp::LdpKind::kLaplaceL1
            ? (2 * radius + d * g) / epsilon
            : RdpGaussianSigma(epsilon, delta, 2 * radius + std::sqrt(1.0 * d) * g).value();
    EXPECT_GE(mechanism.applied_noise_scale(), needed);
    EXPECT_LE(mechanism.applied_noise_scale(), needed + 1.001 * g);
    EXPECT_GT(mechanism.applied_noise_scale(), mechanism.noise_scale());
    for (int trial = 0; trial < 200; ++trial) {
      Eigen::VectorXd record(d);
      for (int i = 0; i < d; ++i) record(i) = 3.0 * (2.0 * rng.Uniform() - 1.0);
      const Eigen::VectorXd y = mechanism.Privatize(record, &noise).value();
      for (int i = 0; i < d; ++i) ASSERT_EQ(y(i) / g, std::round(y(i) / g));
    }
  }
}

}  // namespace
}  // namespace dpcurator::privacy
