// MST's core (core/train/mst.h): the budget and its event, the tree model's
// fit (exact on noiseless marginals, consistent on noisy ones), ancestral
// sampling, and the private selection of the tree.

#include "core/train/mst.h"

#include <algorithm>
#include <cmath>

#include "core/privacy/conversion.h"
#include "core/privacy/rdp.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::train {
namespace {

using privacy::NeighbouringRelation;
using release::NoisyMarginal;

// A chain 0 - 1 - 2 - 3 of columns with 3 values each: x0 uniform, each next
// copies the previous with probability 0.8, else uniform.
Eigen::MatrixXi ChainCodes(int rows, uint64_t seed) {
  PublicRng rng(seed);
  Eigen::MatrixXi codes(rows, 4);
  for (int r = 0; r < rows; ++r) {
    codes(r, 0) = static_cast<int>(rng.UniformInt(3));
    for (int c = 1; c < 4; ++c) {
      codes(r, c) = rng.Uniform() < 0.8 ? codes(r, c - 1) : static_cast<int>(rng.UniformInt(3));
    }
  }
  return codes;
}

NoisyMarginal Exact(const std::vector<int>& clique, const Eigen::MatrixXi& codes) {
  NoisyMarginal m;
  m.clique = clique;
  m.shape.assign(clique.size(), 3);
  m.counts = release::ExactMarginal(clique, m.shape, codes);
  return m;
}

std::vector<NoisyMarginal> OneWays(const Eigen::MatrixXi& codes) {
  std::vector<NoisyMarginal> out;
  for (int c = 0; c < codes.cols(); ++c) out.push_back(Exact({c}, codes));
  return out;
}

const std::vector<std::vector<int>> kChain = {{0, 1}, {1, 2}, {2, 3}};

TEST(MstBudgetTest, ThirdsAndCalibration) {
  const MstBudget b = MstBudgetForRho(15, 0.03).value();
  // Each third: 1 / (2 s^2) = 0.01, 14 eps^2 / 8 = 0.01.
  EXPECT_NEAR(1.0 / (2 * b.one_way_noise_multiplier * b.one_way_noise_multiplier), 0.01, 1e-15);
  EXPECT_NEAR(14 * b.selection_epsilon * b.selection_epsilon / 8, 0.01, 1e-15);
  EXPECT_EQ(b.two_way_noise_multiplier, b.one_way_noise_multiplier);
  // The event's RDP is exactly 0.03 alpha at small orders (no pure-DP cap).
  const auto event = MstEvent(b).value();
  EXPECT_NEAR(privacy::ComputeRdp(event, {{2.0}}).value()[0], 0.06, 1e-12);
  // Calibrated: converts to epsilon 1 at delta 1e-5, to 1e-5 relative.
  const MstBudget calibrated = CalibrateMstBudget(15, 1.0, 1e-5).value();
  const auto& orders = privacy::DefaultRdpOrders();
  const auto rdp = privacy::ComputeRdp(MstEvent(calibrated).value(), orders).value();
  const double eps = privacy::RdpToEpsilon(orders, rdp, 1e-5).value().epsilon;
  EXPECT_LE(eps, 1.0);
  EXPECT_GT(eps, 1.0 - 1e-4);
  // The classical zCDP conversion eps = rho + 2 sqrt(rho log(1/delta)) gives
  // rho ~ 0.0209 at (1, 1e-5); the RDP conversion is tighter, so larger.
  EXPECT_GT(calibrated.rho, 0.0209);
  EXPECT_LT(calibrated.rho, 0.05);
  EXPECT_FALSE(MstBudgetForRho(1, 0.1).ok());
  // An epsilon whose selections the exact sampler cannot draw (below 2^-30
  // each) is refused here, at plan time, not after the rows are read. At
  // delta 1e-5 a tiny epsilon is met by mu ~ 2.5 delta (delta(0) = 2 Phi(mu/2)
  // - 1), whose selections are still drawable; at delta 1e-12 they are not.
  EXPECT_TRUE(CalibrateMstBudget(15, 1e-9, 1e-5).ok());
  const auto tiny = CalibrateMstBudget(15, 1e-9, 1e-12);
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("exponential mechanism"), std::string::npos)
      << tiny.status();
}

TEST(MstFitTest, NoiselessMarginalsAreReproducedExactly) {
  const Eigen::MatrixXi codes = ChainCodes(5000, 1);
  std::vector<NoisyMarginal> two_way;
  for (const auto& pair : kChain) two_way.push_back(Exact(pair, codes));
  const TreeModel model = FitTreeModel({3, 3, 3, 3}, OneWays(codes), two_way).value();
  EXPECT_NEAR(model.total, 5000, 1e-9);
  for (size_t e = 0; e < kChain.size(); ++e) {
    const Eigen::VectorXd& truth = two_way[e].counts;
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 3; ++b) {
        EXPECT_NEAR(model.tables[e](a, b), truth[a * 3 + b] / 5000.0, 1e-12);
      }
    }
  }
  // Samples match the pair marginals statistically (n = 20000: standard
  // error of a cell's share below 0.0035).
  const Eigen::MatrixXi sample = SampleTreeModel(model, 20000, 5);
  for (size_t e = 0; e < kChain.size(); ++e) {
    const Eigen::VectorXd got = Exact(kChain[e], sample).counts / 20000.0;
    const Eigen::VectorXd want = two_way[e].counts / 5000.0;
    EXPECT_LT((got - want).cwiseAbs().maxCoeff(), 0.02) << "edge " << e;
  }
  // A non-edge pair follows the chain's conditional independence:
  // P(x0 = x2) = 0.8^2 + (1 - 0.8^2) / 3 = 0.76.
  double same = 0;
  for (int r = 0; r < sample.rows(); ++r) same += sample(r, 0) == sample(r, 2);
  EXPECT_NEAR(same / sample.rows(), 0.76, 0.02);
}

TEST(MstFitTest, NoisyMarginalsBecomeNonNegativeAndConsistent) {
  const Eigen::MatrixXi codes = ChainCodes(300, 2);
  PublicRng rng(3);
  auto noisy = [&](NoisyMarginal m) {
    for (Eigen::Index i = 0; i < m.counts.size(); ++i) m.counts[i] += 40.0 * rng.Normal();
    m.noise_std = 40.0;
    return m;
  };
  std::vector<NoisyMarginal> one_way;
  for (auto m : OneWays(codes)) one_way.push_back(noisy(m));
  std::vector<NoisyMarginal> two_way;
  bool any_negative = false;
  for (const auto& pair : kChain) {
    two_way.push_back(noisy(Exact(pair, codes)));
    any_negative = any_negative || two_way.back().counts.minCoeff() < 0;
  }
  ASSERT_TRUE(any_negative);  // the test exercises clipping
  const TreeModel model = FitTreeModel({3, 3, 3, 3}, one_way, two_way).value();
  for (size_t c = 0; c < 4; ++c) {
    EXPECT_GE(model.nodes[c].minCoeff(), 0.0);
    EXPECT_NEAR(model.nodes[c].sum(), 1.0, 1e-12);
  }
  for (size_t e = 0; e < kChain.size(); ++e) {
    const Eigen::MatrixXd& t = model.tables[e];
    EXPECT_GE(t.minCoeff(), 0.0);
    EXPECT_LT((t.rowwise().sum() - model.nodes[model.edges[e].first]).cwiseAbs().maxCoeff(),
              1e-9);
    EXPECT_LT((t.colwise().sum().transpose() - model.nodes[model.edges[e].second])
                  .cwiseAbs()
                  .maxCoeff(),
              1e-9);
  }
  // Pairs closing a cycle are refused.
  std::vector<NoisyMarginal> cycle = two_way;
  cycle.push_back(Exact({0, 3}, codes));
  EXPECT_FALSE(FitTreeModel({3, 3, 3, 3}, one_way, cycle).ok());
}

TEST(MstSelectTest, LargeEpsilonPicksTheTrueTree) {
  const Eigen::MatrixXi codes = ChainCodes(3000, 4);
  privacy::SeededNoiseSource noise(8);
  int exact_trees = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const auto edges =
        SelectMstTree(codes, OneWays(codes), NeighbouringRelation::kAddRemove, 1.0, &noise)
            .value();
    ASSERT_EQ(edges.size(), 3u);
    std::vector<std::vector<int>> got;
    for (const auto& [i, j] : edges) got.push_back({i, j});
    std::sort(got.begin(), got.end());
    exact_trees += got == kChain;
  }
  // A chain edge's share on the diagonal is 0.87, a two-step pair's 0.76:
  // L1 scores about 0.21 x 3000 apart, a weight ratio near e^300 at eps 1,
  // so the chain is chosen every time.
  EXPECT_EQ(exact_trees, 20);
  // At a tiny epsilon the choice is nearly uniform: some trials differ.
  int tiny_exact = 0;
  for (int trial = 0; trial < 20; ++trial) {
    auto edges =
        SelectMstTree(codes, OneWays(codes), NeighbouringRelation::kAddRemove, 1e-6, &noise)
            .value();
    std::vector<std::vector<int>> got;
    for (const auto& [i, j] : edges) got.push_back({i, j});
    std::sort(got.begin(), got.end());
    tiny_exact += got == kChain;
  }
  EXPECT_LT(tiny_exact, 20);
}

TEST(MstSelectTest, QualitySensitivityBruteForce) {
  // The score of a pair moves by at most 1 (ADD_REMOVE) or 2 (REPLACE_ONE)
  // between neighbours: recompute the L1 score by hand on random neighbours.
  EXPECT_EQ(MstQualitySensitivity(NeighbouringRelation::kAddRemove), 1.0);
  EXPECT_EQ(MstQualitySensitivity(NeighbouringRelation::kReplaceOne), 2.0);
  const Eigen::MatrixXi codes = ChainCodes(200, 6);
  const auto one_way = OneWays(ChainCodes(200, 7));  // public, fixed
  const Eigen::VectorXd p0 = ProjectToSimplex(one_way[0].counts);
  const Eigen::VectorXd p1 = ProjectToSimplex(one_way[1].counts);
  auto score = [&](const Eigen::MatrixXi& rows) {
    const Eigen::VectorXd truth = Exact({0, 1}, rows).counts;
    double l1 = 0;
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) l1 += std::fabs(truth[a * 3 + b] - 200.0 * p0[a] * p1[b]);
    return l1;
  };
  PublicRng rng(9);
  double worst_remove = 0, worst_replace = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int r = static_cast<int>(rng.UniformInt(200));
    Eigen::MatrixXi removed(199, 4);
    for (int i = 0, o = 0; i < 200; ++i)
      if (i != r) removed.row(o++) = codes.row(i);
    worst_remove = std::max(worst_remove, std::fabs(score(codes) - score(removed)));
    Eigen::MatrixXi replaced = codes;
    for (int c = 0; c < 4; ++c) replaced(r, c) = static_cast<int>(rng.UniformInt(3));
    worst_replace = std::max(worst_replace, std::fabs(score(codes) - score(replaced)));
  }
  EXPECT_LE(worst_remove, 1.0 + 1e-9);
  EXPECT_LE(worst_replace, 2.0 + 1e-9);
  EXPECT_GT(worst_remove, 0.5);
}

TEST(MstFitTest, ProjectToSimplex) {
  Eigen::VectorXd v(4);
  v << 10, -5, 3, 2;  // total 10: (1, -0.5, 0.3, 0.2) -> theta 1/6
  const Eigen::VectorXd p = ProjectToSimplex(v);
  EXPECT_NEAR(p[0], 5.0 / 6, 1e-12);
  EXPECT_EQ(p[1], 0.0);
  EXPECT_NEAR(p[2], 2.0 / 15, 1e-12);
  EXPECT_NEAR(p[3], 1.0 / 30, 1e-12);
  EXPECT_NEAR(p.sum(), 1.0, 1e-12);
  EXPECT_NEAR(ProjectToSimplex(Eigen::VectorXd::Constant(3, -1.0))[2], 1.0 / 3, 1e-15);
}

}  // namespace
}  // namespace dpcurator::train
