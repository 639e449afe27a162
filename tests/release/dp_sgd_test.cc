// The dp_sgd step's core unit (core/release/dp_sgd.h; docs/privacy.md 2.9):
// its clipped sum equals the naive per-example loop, its sensitivity to one
// row is at most C (add/remove) or 2C (replace one), its noise is the grid
// discrete Gaussian of std s * Delta divided by the public divisor, and
// every parameter is bounded before any row is read.
#include "core/release/dp_sgd.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/data/demo.h"
#include "core/privacy/noise_source.h"
#include "core/release/encoded_rows.h"

namespace dpcurator::release {
namespace {

using privacy::NeighbouringRelation;

class DpSgdTest : public ::testing::Test {
 protected:
  const data::Schema schema_ = data::DemoSchema();
  const EncodedRows rows_ = EncodeRows(schema_, data::GenerateDemoTable(60, 5));
  const int width_ = DpSgdRowWidth(schema_);

  DpSgdKind::Params MakeParams(std::vector<int> hidden, nn::Activation activation,
                               DpSgdLoss loss, double clip) const {
    DpSgdKind::Params params;
    params.hidden = std::move(hidden);
    params.activation = activation;
    params.leaky_relu_slope = 0.2;
    params.loss = loss;
    params.clip_norm = clip;
    params.expected_batch_size = 7.5;
    auto resolved = DpSgdKind::Resolve(params, schema_);
    EXPECT_TRUE(resolved.ok()) << resolved.status();
    return *resolved;
  }

  nn::Mlp Network(const DpSgdKind::Params& params, uint64_t seed) const {
    nn::MlpOptions options = DpSgdKind::Network(params, width_);
    options.seed = seed;
    return *nn::Mlp::Create(options);
  }

  // The reference: one Forward/Backward per example, its full gradient
  // clipped to C, summed (Abadi et al. 2016, Alg. 1, literally).
  static Eigen::VectorXd NaiveClippedSum(const DpSgdKind::Params& params, const nn::Mlp& mlp,
                                         const Eigen::MatrixXd& rows) {
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(mlp.num_parameters());
    nn::MlpWorkspace workspace;
    for (Eigen::Index i = 0; i < rows.rows(); ++i) {
      const Eigen::MatrixXd row = rows.row(i);
      const Eigen::MatrixXd out = mlp.Forward(row, &workspace);
      const Eigen::MatrixXd grad_out = DpSgdKind::LossGradient(params, out, row);
      Eigen::VectorXd g = Eigen::VectorXd::Zero(mlp.num_parameters());
      mlp.Backward(grad_out, &workspace, &g);
      const double norm = g.norm();
      sum += g * std::min(1.0, params.clip_norm / std::max(norm, 1e-300));
    }
    return sum;
  }

  static Eigen::VectorXd ClippedSum(const DpSgdKind::Params& params, const nn::Mlp& mlp,
                                    const Eigen::MatrixXd& rows) {
    nn::PerExampleWorkspace workspace;
    Eigen::VectorXd sum;
    EXPECT_TRUE(DpSgdKind::ClippedGradientSum(params, mlp, rows, &workspace, &sum).ok());
    return sum;
  }

  static Eigen::MatrixXd WithoutRow(const Eigen::MatrixXd& rows, Eigen::Index skip) {
    Eigen::MatrixXd out(rows.rows() - 1, rows.cols());
    Eigen::Index k = 0;
    for (Eigen::Index i = 0; i < rows.rows(); ++i) {
      if (i != skip) out.row(k++) = rows.row(i);
    }
    return out;
  }
};

TEST_F(DpSgdTest, RowsAreTheEncodedFeaturesThenTheOneHotLabel) {
  ASSERT_GT(schema_.num_classes(), 1);
  const Eigen::MatrixXd rows = DpSgdRows(rows_);
  ASSERT_EQ(rows.cols(), rows_.layout.total_dim() + schema_.num_classes());
  EXPECT_EQ(rows.cols(), width_);
  EXPECT_EQ(rows.leftCols(rows_.layout.total_dim()), rows_.features);
  for (Eigen::Index i = 0; i < rows.rows(); ++i) {
    const Eigen::VectorXd label = rows.row(i).tail(schema_.num_classes());
    EXPECT_EQ(label.sum(), 1.0);
    EXPECT_EQ(label(rows_.labels(i)), 1.0);
  }
  // An unlabelled layout adds nothing.
  EXPECT_EQ(DpSgdRowWidth(rows_.layout, 1), rows_.layout.total_dim());
}

TEST_F(DpSgdTest, ClippedSumEqualsTheNaivePerExampleLoop) {
  const Eigen::MatrixXd rows = DpSgdRows(rows_);
  struct Case {
    std::vector<int> hidden;
    nn::Activation activation;
    DpSgdLoss loss;
  };
  const std::vector<Case> cases = {
      {{16, 4, 16}, nn::Activation::kRelu, DpSgdLoss::kReconstructionBce},
      {{8}, nn::Activation::kTanh, DpSgdLoss::kReconstructionBce},
      {{12, 6}, nn::Activation::kLeakyRelu, DpSgdLoss::kWganCriticReal},
      {{}, nn::Activation::kRelu, DpSgdLoss::kWganCriticReal},
      {{10, 10, 10}, nn::Activation::kTanh, DpSgdLoss::kWganCriticReal},
  };
  int clipped_some = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      // C at the median unclipped norm: about half the examples clipped.
      DpSgdKind::Params params =
          MakeParams(cases[c].hidden, cases[c].activation, cases[c].loss, 1e6);
      const nn::Mlp mlp = Network(params, seed * 31 + c);
      nn::PerExampleWorkspace workspace;
      Eigen::VectorXd unused;
      ASSERT_TRUE(DpSgdKind::ClippedGradientSum(params, mlp, rows, &workspace, &unused).ok());
      std::vector<double> norms(workspace.norms().begin(), workspace.norms().end());
      std::nth_element(norms.begin(), norms.begin() + norms.size() / 2, norms.end());
      params.clip_norm = norms[norms.size() / 2];
      const Eigen::VectorXd fast = ClippedSum(params, mlp, rows);
      const Eigen::VectorXd naive = NaiveClippedSum(params, mlp, rows);
      ASSERT_EQ(fast.size(), naive.size());
      EXPECT_LE((fast - naive).lpNorm<Eigen::Infinity>(), 1e-10)
          << "case " << c << " seed " << seed;
      // The test has power: without clipping the sums differ.
      Eigen::VectorXd unclipped = Eigen::VectorXd::Zero(mlp.num_parameters());
      nn::MlpWorkspace ws;
      mlp.Forward(rows, &ws);
      mlp.Backward(DpSgdKind::LossGradient(params, ws.output(), rows), &ws, &unclipped);
      if ((unclipped - naive).norm() > 1e-6) ++clipped_some;
    }
  }
  EXPECT_EQ(clipped_some, static_cast<int>(cases.size()) * 3);
}

TEST_F(DpSgdTest, OneRowMovesTheClippedSumByAtMostCOrTwoC) {
  const Eigen::MatrixXd rows = DpSgdRows(rows_);
  std::mt19937_64 rng(99);
  double worst_add_remove = 0.0;
  double worst_replace = 0.0;
  for (int trial = 0; trial < 60; ++trial) {
    const auto activation = static_cast<nn::Activation>(trial % 3);
    const DpSgdLoss loss =
        trial % 2 == 0 ? DpSgdLoss::kReconstructionBce : DpSgdLoss::kWganCriticReal;
    std::vector<int> hidden;
    for (int l = 0; l < 1 + trial % 3; ++l) hidden.push_back(4 + static_cast<int>(rng() % 12));
    // Small C: every gradient is clipped, so the bound is tight.
    const DpSgdKind::Params params = MakeParams(hidden, activation, loss, 0.05 + trial * 0.01);
    const nn::Mlp mlp = Network(params, 1000 + trial);
    // A random batch of 2..20 rows, a random row removed / replaced.
    const Eigen::Index n = 2 + static_cast<Eigen::Index>(rng() % 19);
    Eigen::MatrixXd batch(n, rows.cols());
    for (Eigen::Index i = 0; i < n; ++i) batch.row(i) = rows.row(rng() % rows.rows());
    const Eigen::Index j = static_cast<Eigen::Index>(rng() % n);
    const Eigen::VectorXd full = ClippedSum(params, mlp, batch);
    const Eigen::VectorXd removed = ClippedSum(params, mlp, WithoutRow(batch, j));
    Eigen::MatrixXd replaced = batch;
    replaced.row(j) = rows.row(rng() % rows.rows());
    replaced.row(j).head(3).setConstant(trial % 2);  // also rows off the data
    const Eigen::VectorXd swapped = ClippedSum(params, mlp, replaced);
    const double add_remove = (full - removed).norm() / params.clip_norm;
    const double replace = (full - swapped).norm() / params.clip_norm;
    EXPECT_LE(add_remove, 1.0 + 1e-12) << trial;
    EXPECT_LE(replace, 2.0 + 1e-12) << trial;
    EXPECT_EQ(DpSgdKind::Sensitivity(params, NeighbouringRelation::kAddRemove),
              params.clip_norm);
    EXPECT_EQ(DpSgdKind::Sensitivity(params, NeighbouringRelation::kReplaceOne),
              2.0 * params.clip_norm);
    worst_add_remove = std::max(worst_add_remove, add_remove);
    worst_replace = std::max(worst_replace, replace);
  }
  // Attained up to rounding: removing a row moves the sum by exactly C.
  EXPECT_GT(worst_add_remove, 0.999);
  EXPECT_GT(worst_replace, 1.0);
}

TEST_F(DpSgdTest, NoiseIsTheGridGaussianOfSigmaTimesCOverTheDivisor) {
  const DpSgdKind::Params params =
      MakeParams({48, 48}, nn::Activation::kRelu, DpSgdLoss::kReconstructionBce, 0.7);
  const nn::Mlp mlp = Network(params, 8);
  constexpr double kNoise = 1.3;
  privacy::ZeroNoiseSource zero;
  auto exact = DpSgdKind::Run(params, rows_, NeighbouringRelation::kAddRemove, kNoise,
                              mlp.parameters(), &zero);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_LE((exact->gradient * params.expected_batch_size -
             ClippedSum(params, mlp, DpSgdRows(rows_)))
                .lpNorm<Eigen::Infinity>(),
            1e-12);
  EXPECT_EQ(exact->divisor, params.expected_batch_size);
  EXPECT_EQ(exact->ran, DpSgdKind::Plan(params, kNoise));

  std::vector<double> z;  // noise in units of its nominal std s C / divisor
  const double nominal = kNoise * params.clip_norm / params.expected_batch_size;
  for (uint64_t seed : {11u, 12u, 13u, 14u, 15u}) {
    privacy::SeededNoiseSource noise(seed);
    auto noisy = DpSgdKind::Run(params, rows_, NeighbouringRelation::kAddRemove, kNoise,
                                mlp.parameters(), &noise);
    ASSERT_TRUE(noisy.ok()) << noisy.status();
    // Std s * C, inflated only by the grid's rounding (docs/privacy.md 4.2).
    EXPECT_GE(noisy->applied_noise_stddev, kNoise * params.clip_norm);
    EXPECT_LE(noisy->applied_noise_stddev, kNoise * params.clip_norm * 1.01);
    const Eigen::VectorXd diff = noisy->gradient - exact->gradient;
    for (double d : diff) z.push_back(d / nominal);
  }
  const double n = static_cast<double>(z.size());
  ASSERT_GT(n, 15000);
  double mean = 0.0;
  for (double v : z) mean += v;
  mean /= n;
  double var = 0.0;
  for (double v : z) var += (v - mean) * (v - mean);
  var /= n - 1;
  // Level about 1e-9: 6.1 standard errors.
  EXPECT_LE(std::abs(mean), 6.1 / std::sqrt(n));
  EXPECT_LE(std::abs(var - 1.0), 6.1 * std::sqrt(2.0 / n) + 0.01);
  // Kolmogorov-Smirnov against N(0, 1): critical value at 1e-9.
  std::sort(z.begin(), z.end());
  double ks = 0.0;
  for (size_t i = 0; i < z.size(); ++i) {
    const double cdf = 0.5 * std::erfc(-z[i] / std::sqrt(2.0));
    ks = std::max({ks, std::abs(cdf - i / n), std::abs(cdf - (i + 1) / n)});
  }
  EXPECT_LE(ks, std::sqrt(-std::log(1e-9 / 2.0) / (2.0 * n)) + 0.005);

  // REPLACE_ONE: twice the noise (sensitivity 2C).
  privacy::SeededNoiseSource noise(21);
  auto replace = DpSgdKind::Run(params, rows_, NeighbouringRelation::kReplaceOne, kNoise,
                                mlp.parameters(), &noise);
  ASSERT_TRUE(replace.ok());
  EXPECT_EQ(replace->sensitivity, 2.0 * params.clip_norm);
  EXPECT_GE(replace->applied_noise_stddev, 2.0 * kNoise * params.clip_norm);
}

TEST_F(DpSgdTest, ResolveRefusesEveryOutOfBoundsDeclaration) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto refused = [&](DpSgdKind::Params params) {
    const auto status = DpSgdKind::Resolve(params, schema_).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    return std::string(status.message());
  };
  DpSgdKind::Params ok;
  ok.hidden = {32, 8, 32};
  ok.clip_norm = 1.0;
  ok.expected_batch_size = 64;
  ASSERT_TRUE(DpSgdKind::Resolve(ok, schema_).ok());

  DpSgdKind::Params p = ok;
  p.hidden.assign(kMaxDpSgdHiddenLayers + 1, 4);
  EXPECT_NE(refused(p).find("at most 8"), std::string::npos);
  p = ok;
  p.hidden = {kMaxDpSgdWidth + 1};
  EXPECT_NE(refused(p).find("4096"), std::string::npos);
  p = ok;
  p.hidden = {0};
  refused(p);
  p = ok;
  p.hidden = {4096, 4096};  // 16.8M parameters
  EXPECT_NE(refused(p).find("parameters"), std::string::npos);
  for (double clip : {0.0, -1.0, nan, inf, 1e7, 1e-305, 1e-7}) {
    p = ok;
    p.clip_norm = clip;
    EXPECT_NE(refused(p).find("clip_norm"), std::string::npos);
  }
  for (double divisor : {0.0, -3.0, nan, inf, 0.5, 1e305}) {
    p = ok;
    p.expected_batch_size = divisor;
    EXPECT_NE(refused(p).find("expected_batch_size"), std::string::npos);
  }
  p = ok;
  p.activation = nn::Activation::kLeakyRelu;
  p.leaky_relu_slope = 1.5;
  refused(p);
  p.leaky_relu_slope = 0.0;  // 0: the default
  EXPECT_EQ(DpSgdKind::Resolve(p, schema_)->leaky_relu_slope, kDefaultLeakyReluSlope);
}

TEST_F(DpSgdTest, ParametersMustHaveTheNetworksLengthAndBeFinite) {
  const DpSgdKind::Params params =
      MakeParams({6}, nn::Activation::kTanh, DpSgdLoss::kWganCriticReal, 1.0);
  const int64_t count = *DpSgdKind::NumParameters(params, width_);
  EXPECT_EQ(count, (width_ + 1) * 6 + 7);
  EXPECT_TRUE(DpSgdKind::CheckParameters(params, width_, Eigen::VectorXd::Zero(count)).ok());
  const auto wrong = DpSgdKind::CheckParameters(params, width_, Eigen::VectorXd::Zero(count - 1));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find(std::to_string(count)), std::string::npos);
  Eigen::VectorXd bad = Eigen::VectorXd::Zero(count);
  bad(3) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(DpSgdKind::CheckParameters(params, width_, bad).code(),
            absl::StatusCode::kInvalidArgument);
  privacy::ZeroNoiseSource zero;
  EXPECT_FALSE(DpSgdKind::Run(params, rows_, NeighbouringRelation::kAddRemove, 1.0, bad, &zero)
                   .ok());
  // An empty batch (Poisson may draw none) answers the noise alone.
  const EncodedRows empty = SelectRows(rows_, {});
  auto none = DpSgdKind::Run(params, empty, NeighbouringRelation::kAddRemove, 1.0,
                             Eigen::VectorXd::Zero(count), &zero);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->gradient, Eigen::VectorXd::Zero(count));
}

// Issue 23's row oracle, in the core unit: a network whose forward pass is
// exactly 0 on every row except those with feature 0 above 1/2, where it is
// inf - inf = NaN. Before, the clipped sum became NaN and the step failed
// after the rows were read, so failure told whether such a row was in the
// batch. Now such examples are dropped by selection and the sum is that of
// the other rows; and the server never gets here, since parameters of 3e38
// are refused before any row is read.
TEST_F(DpSgdTest, OverflowingExamplesAreDroppedAndTheirParametersRefused) {
  constexpr int kLayers = kMaxDpSgdHiddenLayers;
  DpSgdKind::Params params = MakeParams(std::vector<int>(kLayers, 2), nn::Activation::kRelu,
                                        DpSgdLoss::kReconstructionBce, 1.0);
  nn::Mlp mlp = Network(params, 3);
  mlp.parameters().setZero();
  const auto& layers = mlp.layers();
  Eigen::VectorXd& theta = mlp.parameters();
  // Layer 0: h = relu(3e38 x_0 - 1.5e38) in both units: positive iff x_0 > 1/2.
  for (int unit = 0; unit < 2; ++unit) {
    theta(layers[0].weight_offset + unit * layers[0].fan_in) = 3e38;
    theta(layers[0].bias_offset + unit) = -1.5e38;
  }
  // Hidden layers 1..7: 3e38 h, past the double range on those rows.
  for (int l = 1; l < kLayers; ++l) {
    for (int k = 0; k < 4; ++k) theta(layers[l].weight_offset + k) = 3e38;
  }
  // Output: +3e38 h_0 - 3e38 h_1 = inf - inf = NaN on those rows, 0 elsewhere.
  for (int out = 0; out < layers[kLayers].fan_out; ++out) {
    theta(layers[kLayers].weight_offset + out * 2) = 3e38;
    theta(layers[kLayers].weight_offset + out * 2 + 1) = -3e38;
  }
  const Eigen::MatrixXd rows = DpSgdRows(rows_);
  nn::MlpWorkspace forward;
  const Eigen::MatrixXd outputs = mlp.Forward(rows, &forward);
  std::vector<Eigen::Index> finite;
  for (Eigen::Index i = 0; i < rows.rows(); ++i) {
    if (outputs.row(i).allFinite()) finite.push_back(i);
  }
  // The exploit's premise: some rows give NaN, the others exact zeros.
  ASSERT_GT(finite.size(), 0u);
  ASSERT_LT(finite.size(), static_cast<size_t>(rows.rows()));
  nn::PerExampleWorkspace workspace;
  Eigen::VectorXd sum;
  ASSERT_TRUE(DpSgdKind::ClippedGradientSum(params, mlp, rows, &workspace, &sum).ok());
  ASSERT_TRUE(sum.allFinite());
  for (Eigen::Index i = 0; i < rows.rows(); ++i) {
    EXPECT_EQ(workspace.clip_factors()(i) == 0.0, !outputs.row(i).allFinite()) << i;
  }
  const Eigen::VectorXd kept_only = ClippedSum(params, mlp, rows(finite, Eigen::all));
  EXPECT_LE((sum - kept_only).norm(), 1e-12 * (1.0 + kept_only.norm()));

  // The query itself is refused before any row is read, by the bound that
  // keeps every step's arithmetic finite.
  const absl::Status refused = DpSgdKind::CheckParameters(params, width_, mlp.parameters());
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("2^20"), std::string::npos) << refused;
  privacy::ZeroNoiseSource zero;
  EXPECT_EQ(DpSgdKind::Run(params, rows_, NeighbouringRelation::kAddRemove, 1.0,
                           mlp.parameters(), &zero)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// docs/privacy.md 2.9, "Totality": at the parameter bound, with every weight
// +2^20 (the sign pattern that grows fastest), eight hidden relu layers and
// rows of ones, every forward value, delta and per-example norm is finite,
// so no example is dropped and the released sum is a real clipped sum.
TEST_F(DpSgdTest, NetworksAtTheParameterBoundStayFinite) {
  for (const nn::Activation activation :
       {nn::Activation::kRelu, nn::Activation::kLeakyRelu, nn::Activation::kTanh}) {
    for (const DpSgdLoss loss : {DpSgdLoss::kReconstructionBce, DpSgdLoss::kWganCriticReal}) {
      const DpSgdKind::Params params =
          MakeParams(std::vector<int>(kMaxDpSgdHiddenLayers, 64), activation, loss, 1.0);
      nn::Mlp mlp = Network(params, 9);
      mlp.parameters().setConstant(kMaxDpSgdParameterMagnitude);
      ASSERT_TRUE(DpSgdKind::CheckParameters(params, width_, mlp.parameters()).ok());
      const Eigen::MatrixXd ones = Eigen::MatrixXd::Ones(16, width_);
      nn::PerExampleWorkspace workspace;
      Eigen::VectorXd sum;
      ASSERT_TRUE(DpSgdKind::ClippedGradientSum(params, mlp, ones, &workspace, &sum).ok());
      EXPECT_TRUE(workspace.norms().allFinite());
      EXPECT_TRUE((workspace.clip_factors().array() > 0.0).all());
      EXPECT_TRUE(sum.allFinite());
      EXPECT_LE(sum.norm(), 16.0 * params.clip_norm * (1.0 + 1e-9));
    }
  }
}

// Every parameter that could make the noise step fail after the rows are
// read is refused by NoiseFor, the call Run makes first and the server makes
// at open: s * Delta outside the grid's range, and answers beyond float32.
TEST_F(DpSgdTest, NoiseForRefusesWhatTheGridOrTheFloatAnswerCannotHold) {
  const DpSgdKind::Params params =
      MakeParams({6}, nn::Activation::kRelu, DpSgdLoss::kReconstructionBce, 1.0);
  for (const auto relation :
       {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
    EXPECT_TRUE(DpSgdKind::NoiseFor(params, relation, 1.1, width_).ok());
    EXPECT_TRUE(DpSgdKind::NoiseFor(params, relation, 1e6, width_).ok());
    for (double s : {1e-310, 1e30, 1e100, 1e300}) {
      const auto refused = DpSgdKind::NoiseFor(params, relation, s, width_);
      EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << s;
      // Run refuses it the same way, before it reads the batch.
      privacy::ZeroNoiseSource zero;
      const int64_t count = *DpSgdKind::NumParameters(params, width_);
      EXPECT_EQ(DpSgdKind::Run(params, rows_, relation, s, Eigen::VectorXd::Zero(count), &zero)
                    .status()
                    .code(),
                absl::StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace dpcurator::release
