// The trainers' float normal draws (core/train/normal_draws.h): N(0, 1) by
// moments and a Kolmogorov-Smirnov test, reproducible from the seed, and
// every entry filled for odd sizes and several columns.
#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/train/normal_draws.h"

namespace dpcurator::train {
namespace {

TEST(NormalDrawsTest, StandardNormalByMomentsAndKs) {
  PublicRng rng(2024);
  Eigen::MatrixXf z(20001, 3);  // odd rows: the last pair is cut in half
  z.setConstant(NAN);
  FillStandardNormal(&rng, z);
  ASSERT_TRUE(z.allFinite());
  std::vector<double> x(z.data(), z.data() + z.size());
  const double n = static_cast<double>(x.size());
  double mean = 0, ss = 0;
  for (double v : x) mean += v;
  mean /= n;
  for (double v : x) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / (n - 1));
  // Seeded, so deterministic; 5 standard errors.
  EXPECT_NEAR(mean, 0.0, 5 / std::sqrt(n));
  EXPECT_NEAR(sd, 1.0, 5 / std::sqrt(2 * n));
  std::sort(x.begin(), x.end());
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double f = 0.5 * std::erfc(-x[i] / std::sqrt(2.0));
    d = std::max({d, (i + 1) / n - f, f - i / n});
  }
  // KS at level 1e-3: sqrt(-ln(5e-4)/2)/sqrt(n). A uniform or a wrongly
  // scaled draw (sd 1.05) is far above it at this n.
  EXPECT_LT(d, std::sqrt(-0.5 * std::log(5e-4)) / std::sqrt(n));
}

TEST(NormalDrawsTest, ReproducibleAndSeedDependent) {
  Eigen::MatrixXf a(7, 2), b(7, 2), c(7, 2);
  PublicRng ra(5), rb(5), rc(6);
  FillStandardNormal(&ra, a);
  FillStandardNormal(&rb, b);
  FillStandardNormal(&rc, c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace dpcurator::train
