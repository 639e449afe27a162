// The feature-norm bound ||h(x)|| <= 1, on which every embedding
// sensitivity rests, must hold for the features as computed (docs/privacy.md
// 2.7): the vectorised sin/cos (SLEEF, 1 ULP), the scales' rounding and the
// products, with the margin embed::kFeatureNormShrink. Checked by brute
// force on random and adversarial rows and phases, for the variant this CPU
// runs and for the SSE2 baseline that every x86-64 CPU runs.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "core/data/encoder.h"
#include "core/embed/charfn.h"
#include "core/embed/feature_map.h"
#include "core/embed/rff.h"
#include "core/util/public_rng.h"
#include "core/util/sincos.h"

namespace dpcurator::embed {
namespace {

// Distance in units in the last place of `exact` (correctly rounded double).
double UlpDistance(double computed, long double exact) {
  const double rounded = static_cast<double>(exact);
  if (rounded == 0.0) return std::fabs(computed) / std::numeric_limits<double>::denorm_min();
  const double ulp = std::nextafter(std::fabs(rounded), INFINITY) - std::fabs(rounded);
  return static_cast<double>(std::fabs(static_cast<long double>(computed) - exact) / ulp);
}

// Phases that stress argument reduction: near multiples of pi/4 and pi/2,
// tiny ones, and large ones up to the 2^54 bound on |w . x| that the
// length-scale range guarantees (docs/privacy.md 6.2).
std::vector<double> AdversarialPhases() {
  std::vector<double> phases;
  PublicRng rng(17);
  for (int k = -2000; k <= 2000; ++k) {
    const double base = k * (M_PI / 4);
    for (double nudge = base; phases.size() % 7 != 6; nudge = std::nextafter(nudge, INFINITY)) {
      phases.push_back(nudge);
    }
    phases.push_back(base);
  }
  for (int e = -1074; e <= 53; e += 1) phases.push_back(std::ldexp(1.0 + rng.Uniform(), e));
  for (int i = 0; i < 20000; ++i) {
    phases.push_back(std::ldexp(rng.Uniform() * 2 - 1, static_cast<int>(rng.Uniform() * 54)));
  }
  for (int i = 0; i < 1000; ++i) phases.push_back(std::ldexp(1.0, 54) * (1 - rng.Uniform() * 1e-3));
  return phases;
}

TEST(SinCosTest, WithinOneUlpAndUnitCircleOnAdversarialPhases) {
  const std::vector<double> x = AdversarialPhases();
  const auto n = static_cast<int64_t>(x.size());
  std::vector<double> s(x.size()), c(x.size());
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? SinCosVariant() : "sse2");
    if (variant == 0) {
      SinCos(x.data(), n, 1.0, s.data(), c.data());
    } else {
      internal::SinCosSse2(x.data(), n, 1.0, s.data(), c.data());
    }
    double worst_ulp = 0, worst_circle = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const long double phase = x[i];
      worst_ulp = std::max({worst_ulp, UlpDistance(s[i], std::sin(phase)),
                            UlpDistance(c[i], std::cos(phase))});
      worst_circle = std::max(worst_circle, s[i] * s[i] + c[i] * c[i] - 1.0);
    }
    // SLEEF's u10 bound is 1.0 ULP; glibc's long double reference adds a
    // little of its own.
    EXPECT_LE(worst_ulp, 1.5);
    EXPECT_LE(worst_circle, 0x1p-50);
  }
}

TEST(SinCosTest, ScalesAndHandlesEveryTailLength) {
  for (int64_t n = 0; n < 40; ++n) {
    std::vector<double> x(n), s(n, -7), c(n, -7);
    for (int64_t i = 0; i < n; ++i) x[i] = 0.37 * i - 3;
    SinCos(x.data(), n, 0.5, s.data(), c.data());
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(s[i], 0.5 * std::sin(x[i]), 1e-15);
      EXPECT_NEAR(c[i], 0.5 * std::cos(x[i]), 1e-15);
    }
    // In place: the sines overwrite the phases (what the feature maps do).
    std::vector<double> in_place = x;
    std::vector<double> c_in_place(n, -7);
    SinCos(in_place.data(), n, 0.5, in_place.data(), c_in_place.data());
    EXPECT_EQ(in_place, s);
    EXPECT_EQ(c_in_place, c);
    std::vector<float> xf(x.begin(), x.end()), sf(n, -7), cf(n, -7);
    SinCos(xf.data(), n, 0.5f, sf.data(), cf.data());
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(sf[i], 0.5 * std::sin(xf[i]), 1e-6);
      EXPECT_NEAR(cf[i], 0.5 * std::cos(xf[i]), 1e-6);
    }
  }
}

// Rows at the corners of the declared box (numerics 0 or 1) and random ones,
// with the smallest and largest length-scales the server accepts: every
// computed feature vector has norm <= 1, never more.
TEST(FeatureNormRoundingTest, ComputedNormNeverExceedsOne) {
  data::FeatureLayout layout;
  layout.numeric_dim = 6;
  layout.categorical_dim = 9;
  for (int i = 0; i < 6; ++i) layout.numeric.push_back({i, i});
  layout.categorical.push_back({6, 6, 4});
  layout.categorical.push_back({7, 10, 5});
  PublicRng rng(3);
  const int rows = 4000;
  Eigen::MatrixXd encoded = Eigen::MatrixXd::Zero(rows, layout.total_dim());
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < 6; ++j) {
      encoded(r, j) = r % 3 == 0 ? rng.Uniform() : static_cast<double>(rng.Uniform() < 0.5);
    }
    encoded(r, 6 + r % 4) = 1.0;
    encoded(r, 10 + r % 5) = 1.0;
  }
  double worst = 0;
  for (double length_scale : {1e-6, 1e-3, 0.4, 1.0, 1e6}) {
    for (int frequencies : {1, 7, 500}) {
      for (double weight : {0.0, 0.3, 1.0}) {
        RffOptions rff;
        rff.num_frequencies = frequencies;
        rff.length_scale = length_scale;
        rff.numeric_weight = weight;
        rff.seed = 11;
        CharfnOptions charfn;
        charfn.num_frequencies = frequencies;
        charfn.length_scale = length_scale;
        charfn.seed = 11;
        Eigen::MatrixXd features;
        RandomFourierFeatureMap::Create(layout, rff).value().Features(encoded, &features);
        worst = std::max(worst, features.rowwise().norm().maxCoeff());
        CharacteristicFunctionMap::Create(layout, charfn).value().Features(encoded, &features);
        worst = std::max(worst, features.rowwise().norm().maxCoeff());
      }
    }
  }
  EXPECT_LE(worst, 1.0);
  // And the margin costs nothing a release could resolve.
  EXPECT_GT(worst, 1.0 - 1e-12);
}

}  // namespace
}  // namespace dpcurator::embed
