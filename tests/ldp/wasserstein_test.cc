#include "core/ldp/wasserstein.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::ldp {
namespace {

Eigen::MatrixXf RandomImages(PublicRng* rng, int n, int d) {
  Eigen::MatrixXf x(n, d);
  for (Eigen::Index j = 0; j < d; ++j) {
    for (Eigen::Index i = 0; i < n; ++i) x(i, j) = static_cast<float>(rng->Uniform());
  }
  return x;
}

// sqrt(min over all n! matchings of the mean squared distance), in double,
// by enumeration: independent of the cost-matrix algebra and the solver.
double BruteForceW2(const Eigen::MatrixXf& x, const Eigen::MatrixXf& y) {
  const int n = static_cast<int>(x.rows());
  std::vector<int> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  double best = INFINITY;
  do {
    double total = 0;
    for (int i = 0; i < n; ++i) {
      total += (x.row(i).cast<double>() - y.row(perm[i]).cast<double>()).squaredNorm();
    }
    best = std::min(best, total);
  } while (std::next_permutation(perm.begin(), perm.end()));
  return std::sqrt(best / n);
}

TEST(ExactW2Test, MatchesBruteForceOverMatchings) {
  PublicRng rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 1 + static_cast<int>(rng.UniformInt(7));
    const int d = 1 + static_cast<int>(rng.UniformInt(50));
    const Eigen::MatrixXf x = RandomImages(&rng, n, d);
    const Eigen::MatrixXf y = RandomImages(&rng, n, d);
    const double expected = BruteForceW2(x, y);
    EXPECT_NEAR(ExactW2(x, y).value(), expected, 1e-9 * (1 + expected)) << n << " x " << d;
  }
  // Identical samples in another order are at distance 0.
  const Eigen::MatrixXf x = RandomImages(&rng, 30, 784);
  EXPECT_NEAR(ExactW2(x, x.colwise().reverse()).value(), 0.0, 1e-6);
}

TEST(ClassConditionalW2Test, AveragesTheBruteForcePerClass) {
  PublicRng rng(4);
  const int classes = 3, per_class = 5, d = 12;
  // Interleaved labels with a surplus row per class that must be ignored.
  const int n = classes * (per_class + 1);
  const Eigen::MatrixXf x = RandomImages(&rng, n, d);
  Eigen::MatrixXf y = RandomImages(&rng, n, d);
  std::vector<int> x_labels(n), y_labels(n);
  for (int i = 0; i < n; ++i) {
    x_labels[i] = i % classes;
    y_labels[i] = (n - 1 - i) % classes;
  }
  // Make one class of y far away: its W2 must dominate.
  for (int i = 0; i < n; ++i) {
    if (y_labels[i] == 2) y.row(i).array() += 3.0f;
  }
  const ClassConditionalW2Result result =
      ClassConditionalW2(x, x_labels, y, y_labels, classes, per_class).value();
  ASSERT_EQ(result.per_class.size(), 3u);
  double mean = 0;
  for (int c = 0; c < classes; ++c) {
    Eigen::MatrixXf xc(per_class, d), yc(per_class, d);
    int xi = 0, yi = 0;
    for (int i = 0; i < n; ++i) {
      if (x_labels[i] == c && xi < per_class) xc.row(xi++) = x.row(i);
      if (y_labels[i] == c && yi < per_class) yc.row(yi++) = y.row(i);
    }
    const double expected = BruteForceW2(xc, yc);
    EXPECT_NEAR(result.per_class[c], expected, 1e-9) << "class " << c;
    mean += expected / classes;
  }
  EXPECT_NEAR(result.mean, mean, 1e-9);
  EXPECT_GT(result.per_class[2], 2 * result.per_class[0]);
}

TEST(ClassConditionalW2Test, Validates) {
  const Eigen::MatrixXf x = Eigen::MatrixXf::Zero(4, 3);
  const std::vector<int> labels = {0, 1, 0, 1};
  EXPECT_FALSE(ExactW2(x, Eigen::MatrixXf::Zero(3, 3)).ok());
  EXPECT_FALSE(ExactW2(x, Eigen::MatrixXf::Zero(4, 2)).ok());
  Eigen::MatrixXf nan = x;
  nan(1, 1) = NAN;
  EXPECT_FALSE(ExactW2(x, nan).ok());
  EXPECT_TRUE(ClassConditionalW2(x, labels, x, labels, 2, 2).ok());
  // Too few rows of a class, a label out of range, a missing label.
  EXPECT_FALSE(ClassConditionalW2(x, labels, x, labels, 2, 3).ok());
  EXPECT_FALSE(ClassConditionalW2(x, {0, 1, 0, 2}, x, labels, 2, 1).ok());
  EXPECT_FALSE(ClassConditionalW2(x, {0, 1, 0}, x, labels, 2, 1).ok());
}

}  // namespace
}  // namespace dpcurator::ldp
