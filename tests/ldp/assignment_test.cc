#include "core/ldp/assignment.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::ldp {
namespace {

TEST(AssignmentTest, MatchesBruteForceOverPermutations) {
  PublicRng rng(1);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 1 + static_cast<int>(rng.UniformInt(7));
    Eigen::MatrixXd cost(n, n);
    rng.FillUniform(cost);
    if (trial % 5 == 0) cost = (cost * 3).array().floor();  // ties
    std::vector<int> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    double best = INFINITY;
    do {
      double total = 0;
      for (int i = 0; i < n; ++i) total += cost(i, perm[i]);
      best = std::min(best, total);
    } while (std::next_permutation(perm.begin(), perm.end()));
    const AssignmentResult result = SolveAssignment(cost).value();
    EXPECT_NEAR(result.total_cost, best, 1e-12);
    std::vector<int> sorted = result.column;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < n; ++i) EXPECT_EQ(sorted[i], i);
  }
}

TEST(AssignmentTest, W2OfShiftedCloudIsTheShift) {
  // W2 between a cloud and its translate by v is ||v|| (the identity
  // matching is optimal: cyclical monotonicity of translations).
  PublicRng rng(2);
  Eigen::MatrixXd x(200, 2);
  rng.FillNormal(x);
  Eigen::MatrixXd y = x;
  y.col(0).array() += 0.3;
  y.col(1).array() -= 0.4;
  EXPECT_NEAR(EmpiricalW2(x, y).value(), 0.5, 1e-12);
  EXPECT_NEAR(EmpiricalW2(x, x).value(), 0.0, 1e-12);
}

TEST(AssignmentTest, Validates) {
  EXPECT_FALSE(SolveAssignment(Eigen::MatrixXd::Zero(2, 3)).ok());
  EXPECT_FALSE(EmpiricalW2(Eigen::MatrixXd::Zero(2, 2), Eigen::MatrixXd::Zero(3, 2)).ok());
}

}  // namespace
}  // namespace dpcurator::ldp
