#include "core/nn/per_example.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <new>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "core/nn/activation.h"
#include "core/nn/mlp.h"
#include "core/util/public_rng.h"
#include "tests/nn/random_matrix.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::nn {
namespace {

using ::testing::HasSubstr;

// The done-when criterion of issue 12, item 6: the identity and a naive
// per-example loop agree to 1e-10, relative, in double.
constexpr double kRelativeTolerance = 1e-10;
constexpr int kInputDim = 5;
constexpr int kOutputDim = 3;
constexpr Eigen::Index kBatch = 9;

using test_util::RandomMatrix;

// A network whose biases, gains and shifts are all non-zero, so that every
// parameter group contributes to every example's gradient.
Mlp MakeMlp(int num_hidden, Activation activation, bool layer_norm) {
  MlpOptions options;
  options.input_dim = kInputDim;
  options.hidden.assign(num_hidden, 0);
  for (int l = 0; l < num_hidden; ++l) options.hidden[l] = 6 + l;  // 6, 7
  options.output_dim = kOutputDim;
  options.activation = activation;
  options.leaky_relu_slope = 0.1;
  options.layer_norm = layer_norm;
  options.seed = 17 + num_hidden;
  absl::StatusOr<Mlp> created = Mlp::Create(options);
  EXPECT_TRUE(created.ok()) << created.status();
  Mlp mlp = *std::move(created);
  PublicRng rng(23);
  for (Eigen::Index i = 0; i < mlp.num_parameters(); ++i) {
    mlp.parameters()(i) += 0.2 * rng.Normal();
  }
  return mlp;
}

// The naive reference: Backward on one example at a time. Column i is the
// full gradient of example i's own loss, <grad_output.row(i), Mlp(x_i)>.
Eigen::MatrixXd NaivePerExampleGradients(const Mlp& mlp, const Eigen::MatrixXd& x,
                                         const Eigen::MatrixXd& grad_output) {
  Eigen::MatrixXd gradients = Eigen::MatrixXd::Zero(mlp.num_parameters(), x.rows());
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    MlpWorkspace ws;
    mlp.Forward(x.row(i), &ws);
    Eigen::VectorXd g = Eigen::VectorXd::Zero(mlp.num_parameters());
    mlp.Backward(grad_output.row(i), &ws, &g);
    gradients.col(i) = g;
  }
  return gradients;
}

// sum_i min(1, C / ||g_i||) g_i, skipping zero gradients (they add nothing).
Eigen::VectorXd NaiveClippedSum(const Eigen::MatrixXd& gradients, double clip_norm) {
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(gradients.rows());
  for (Eigen::Index i = 0; i < gradients.cols(); ++i) {
    const double norm = gradients.col(i).norm();
    if (norm == 0.0) continue;
    sum += std::min(1.0, clip_norm / norm) * gradients.col(i);
  }
  return sum;
}

// max_i |a_i - b_i| / |b_i|; b must have no zero entries.
double MaxRelativeError(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  return ((a - b).array().abs() / b.array().abs()).maxCoeff();
}

// ||a - b||_2 / ||b||_2 and max_i |a_i - b_i| / max_i |b_i|, the larger.
double VectorRelativeError(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  return std::max((a - b).norm() / b.norm(),
                  (a - b).lpNorm<Eigen::Infinity>() / b.lpNorm<Eigen::Infinity>());
}

// The worst relative error seen by any test, printed at the end of the run.
double& WorstSeen() {
  static double worst = 0.0;
  return worst;
}
double Track(double error) {
  WorstSeen() = std::max(WorstSeen(), error);
  return error;
}

// (number of hidden layers: 0-2, i.e. 1-3 dense layers; activation; layer norm)
using Architecture = std::tuple<int, Activation, bool>;

class PerExampleTest : public ::testing::TestWithParam<Architecture> {
 protected:
  PerExampleTest()
      : mlp_(MakeMlp(std::get<0>(GetParam()), std::get<1>(GetParam()),
                     std::get<2>(GetParam()))),
        x_(RandomMatrix(kBatch, kInputDim, 101)),
        grad_output_(RandomMatrix(kBatch, kOutputDim, 202)),
        naive_(NaivePerExampleGradients(mlp_, x_, grad_output_)) {}

  Eigen::VectorXd NaiveNorms() const { return naive_.colwise().norm().transpose(); }

  Mlp mlp_;
  Eigen::MatrixXd x_;
  Eigen::MatrixXd grad_output_;
  Eigen::MatrixXd naive_;  // num_parameters x kBatch
};

TEST_P(PerExampleTest, NormsMatchNaiveLoop) {
  PerExampleWorkspace ws;
  mlp_.Forward(x_, ws.mlp_workspace());
  const Eigen::VectorXd& norms = PerExampleGradientNorms(mlp_, grad_output_, &ws);
  ASSERT_EQ(norms.size(), kBatch);
  EXPECT_EQ(&norms, &ws.norms());
  const Eigen::VectorXd naive = NaiveNorms();
  ASSERT_GT(naive.minCoeff(), 1e-3);
  EXPECT_LT(Track(MaxRelativeError(norms, naive)), kRelativeTolerance)
      << "fast " << norms.transpose() << "\nnaive " << naive.transpose();

  // The workspace is reusable for a batch of another size.
  const Eigen::MatrixXd x_small = x_.topRows(4);
  const Eigen::MatrixXd grad_small = 3.0 * grad_output_.bottomRows(4);
  mlp_.Forward(x_small, ws.mlp_workspace());
  const Eigen::VectorXd small = PerExampleGradientNorms(mlp_, grad_small, &ws);
  const Eigen::VectorXd naive_small =
      NaivePerExampleGradients(mlp_, x_small, grad_small).colwise().norm().transpose();
  EXPECT_LT(Track(MaxRelativeError(small, naive_small)), kRelativeTolerance);
}

// The clip norm lies between the 5th and 6th smallest of the 9 naive norms
// (not on one: rounding would decide that example's fate), so 4 examples
// clip and 5 do not.
TEST_P(PerExampleTest, ClippedSumMatchesNaiveClippedSum) {
  const Eigen::VectorXd naive_norms = NaiveNorms();
  std::vector<double> sorted(naive_norms.data(), naive_norms.data() + kBatch);
  std::sort(sorted.begin(), sorted.end());
  const double clip_norm = 0.5 * (sorted[kBatch / 2] + sorted[kBatch / 2 + 1]);

  PerExampleWorkspace ws;
  mlp_.Forward(x_, ws.mlp_workspace());
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(mlp_.num_parameters());
  ASSERT_TRUE(AddClippedGradientSum(mlp_, grad_output_, clip_norm, &ws, &sum).ok());
  EXPECT_LT(Track(VectorRelativeError(sum, NaiveClippedSum(naive_, clip_norm))),
            kRelativeTolerance);
  EXPECT_LT(Track(MaxRelativeError(ws.norms(), naive_norms)), kRelativeTolerance);

  const Eigen::VectorXd& factors = ws.clip_factors();
  ASSERT_EQ(factors.size(), kBatch);
  EXPECT_EQ((factors.array() < 1.0).count(), kBatch / 2);
  EXPECT_EQ((factors.array() == 1.0).count(), kBatch - kBatch / 2);
  for (Eigen::Index i = 0; i < kBatch; ++i) {
    EXPECT_NEAR(factors(i), std::min(1.0, clip_norm / naive_norms(i)), 1e-12) << i;
  }

  // It adds, like Backward.
  Eigen::VectorXd twice = sum;
  ASSERT_TRUE(AddClippedGradientSum(mlp_, grad_output_, clip_norm, &ws, &twice).ok());
  EXPECT_TRUE(twice.isApprox(2.0 * sum, 1e-14));
}

// C above every norm: nothing clips and the sum is the plain batch gradient.
TEST_P(PerExampleTest, HugeClipNormIsTheBatchGradient) {
  PerExampleWorkspace ws;
  mlp_.Forward(x_, ws.mlp_workspace());
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(mlp_.num_parameters());
  ASSERT_TRUE(AddClippedGradientSum(mlp_, grad_output_, 1e300, &ws, &sum).ok());
  EXPECT_TRUE((ws.clip_factors().array() == 1.0).all());

  MlpWorkspace batch_ws;
  mlp_.Forward(x_, &batch_ws);
  Eigen::VectorXd batch = Eigen::VectorXd::Zero(mlp_.num_parameters());
  mlp_.Backward(grad_output_, &batch_ws, &batch);
  EXPECT_LT(Track(VectorRelativeError(sum, batch)), kRelativeTolerance);
  EXPECT_LT(Track(VectorRelativeError(sum, naive_.rowwise().sum())), kRelativeTolerance);
}

// C below every norm: every example contributes exactly C g_i / ||g_i||.
TEST_P(PerExampleTest, TinyClipNormNormalisesEveryExample) {
  constexpr double kTiny = 1e-6;
  PerExampleWorkspace ws;
  mlp_.Forward(x_, ws.mlp_workspace());
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(mlp_.num_parameters());
  ASSERT_TRUE(AddClippedGradientSum(mlp_, grad_output_, kTiny, &ws, &sum).ok());
  EXPECT_TRUE((ws.clip_factors().array() < 1.0).all());

  const Eigen::VectorXd unit_sum =
      naive_ * NaiveNorms().cwiseInverse();  // sum_i g_i / ||g_i||
  EXPECT_LT(Track(VectorRelativeError(sum, kTiny * unit_sum)), kRelativeTolerance);
  EXPECT_LE(sum.norm(), kBatch * kTiny * (1 + 1e-12));  // the triangle inequality
}

// An example whose loss does not depend on the output has gradient 0: norm 0,
// factor 1, no NaN, and it adds nothing.
TEST_P(PerExampleTest, ZeroGradientExample) {
  Eigen::MatrixXd grad_output = grad_output_;
  grad_output.row(3).setZero();
  const Eigen::MatrixXd naive = NaivePerExampleGradients(mlp_, x_, grad_output);
  const Eigen::VectorXd naive_norms = naive.colwise().norm().transpose();
  ASSERT_EQ(naive_norms(3), 0.0);
  const double clip_norm = 0.5 * naive_norms.maxCoeff();

  PerExampleWorkspace ws;
  mlp_.Forward(x_, ws.mlp_workspace());
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(mlp_.num_parameters());
  ASSERT_TRUE(AddClippedGradientSum(mlp_, grad_output, clip_norm, &ws, &sum).ok());
  EXPECT_EQ(ws.norms()(3), 0.0);
  EXPECT_EQ(ws.clip_factors()(3), 1.0);
  ASSERT_TRUE(sum.allFinite());
  EXPECT_LT(Track(VectorRelativeError(sum, NaiveClippedSum(naive, clip_norm))),
            kRelativeTolerance);

  // A batch of such examples leaves the gradient untouched.
  Eigen::VectorXd untouched = Eigen::VectorXd::Constant(mlp_.num_parameters(), 0.25);
  const Eigen::MatrixXd zeros = Eigen::MatrixXd::Zero(kBatch, kOutputDim);
  ASSERT_TRUE(AddClippedGradientSum(mlp_, zeros, clip_norm, &ws, &untouched).ok());
  EXPECT_TRUE((ws.norms().array() == 0.0).all());
  EXPECT_TRUE((untouched.array() == 0.25).all());
}

// Guards the tolerance: every parameter group (each layer's weight and bias,
// and gain and shift with layer norm) carries, for some example, a share of
// its squared norm orders of magnitude above kRelativeTolerance, so an
// identity that forgot a group (say the bias term's +1) would fail
// NormsMatchNaiveLoop. (Dead ReLU units can zero a group for one example.)
TEST_P(PerExampleTest, EveryParameterGroupIsVisibleAtTheTolerance) {
  const Eigen::VectorXd squared = naive_.colwise().squaredNorm().transpose();
  for (int l = 0; l < mlp_.num_layers(); ++l) {
    const DenseLayerLayout& layer = mlp_.layers()[l];
    std::vector<std::pair<Eigen::Index, Eigen::Index>> groups = {
        {layer.weight_offset, Eigen::Index{layer.fan_in} * layer.fan_out},
        {layer.bias_offset, layer.fan_out}};
    if (layer.gain_offset >= 0) {
      groups.push_back({layer.gain_offset, layer.fan_out});
      groups.push_back({layer.shift_offset, layer.fan_out});
    }
    for (const auto& [offset, size] : groups) {
      const Eigen::VectorXd share =
          naive_.middleRows(offset, size).colwise().squaredNorm().transpose().cwiseQuotient(
              squared);
      EXPECT_GT(share.maxCoeff(), 1e4 * kRelativeTolerance)
          << "layer " << l << " offset " << offset;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, PerExampleTest,
    ::testing::Combine(::testing::Values(0, 1, 2),
                       ::testing::Values(Activation::kRelu, Activation::kLeakyRelu,
                                         Activation::kTanh),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<Architecture>& info) {
      return std::to_string(std::get<0>(info.param) + 1) + "_dense_" +
             ActivationName(std::get<1>(info.param)) +
             (std::get<2>(info.param) ? "_layer_norm" : "_plain");
    });

TEST(PerExampleClipTest, RejectsClipNormThatIsNotFinitePositive) {
  const Mlp mlp = MakeMlp(1, Activation::kTanh, false);
  PerExampleWorkspace ws;
  mlp.Forward(RandomMatrix(4, kInputDim, 1), ws.mlp_workspace());
  const Eigen::MatrixXd grad_output = RandomMatrix(4, kOutputDim, 2);
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(mlp.num_parameters());
  for (const double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN()}) {
    const absl::Status status = AddClippedGradientSum(mlp, grad_output, bad, &ws, &sum);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(status.message(), HasSubstr("Clip norm must be finite and positive, got"));
  }
  EXPECT_TRUE((sum.array() == 0.0).all());
}

// Splitting Backward into BackpropagateDeltas and the batch sums must not
// change it: the deltas it leaves are those of the per-example loop.
TEST(PerExampleClipTest, BackpropagateDeltasLeavesPerExampleRows) {
  const Mlp mlp = MakeMlp(2, Activation::kLeakyRelu, true);
  const Eigen::MatrixXd x = RandomMatrix(5, kInputDim, 3);
  const Eigen::MatrixXd grad_output = RandomMatrix(5, kOutputDim, 4);
  MlpWorkspace batch;
  mlp.Forward(x, &batch);
  mlp.BackpropagateDeltas(grad_output, &batch);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    MlpWorkspace single;
    mlp.Forward(x.row(i), &single);
    mlp.BackpropagateDeltas(grad_output.row(i), &single);
    for (int l = 0; l + 1 < mlp.num_layers(); ++l) {
      EXPECT_TRUE(batch.hidden_delta(l).row(i).isApprox(single.hidden_delta(l).row(0), 1e-12))
          << "example " << i << " layer " << l;
      EXPECT_TRUE(batch.norm_output_delta(l).row(i).isApprox(
          single.norm_output_delta(l).row(0), 1e-12));
    }
  }
}

// Issue 39: per-example norms far outside the range of their squares. Row i
// of every delta is linear in row i of grad_output, so scaling it by s
// scales every norm by s; at s = 1e200 the squares overflow and at 1e-200
// they underflow, and a norm taken as sqrt(sum of squares) would come out
// inf or 0 (a dropped or unclipped example). RowNorms scales by a power of
// two per row first.
TEST(PerExampleNormsTest, NormsScaleLinearlyFarOutsideTheRangeOfTheirSquares) {
  const Mlp mlp = MakeMlp(2, Activation::kLeakyRelu, false);
  const Eigen::MatrixXd x = RandomMatrix(kBatch, kInputDim, 5);
  const Eigen::MatrixXd grad_output = RandomMatrix(kBatch, kOutputDim, 6);
  PerExampleWorkspace ws;
  mlp.Forward(x, ws.mlp_workspace());
  const Eigen::VectorXd base = PerExampleGradientNorms(mlp, grad_output, &ws);
  ASSERT_TRUE((base.array() > 0.0).all());
  for (const double s : {1e200, 1e-200}) {
    const Eigen::MatrixXd scaled_output = s * grad_output;
    const Eigen::VectorXd norms = PerExampleGradientNorms(mlp, scaled_output, &ws);
    ASSERT_TRUE(norms.allFinite()) << s;
    EXPECT_LT(Track(MaxRelativeError(norms, s * base)), kRelativeTolerance) << s;
  }
}

// ---- BatchClippedGradientSum (issue 39): chunks, two shards, fixed order.

// A per-row loss gradient that reads both the outputs and the rows, as
// DP-SGD's reconstruction loss does.
void TestLossGradient(const Eigen::MatrixXd& outputs, const Eigen::MatrixXd& rows,
                      Eigen::MatrixXd* out) {
  *out = 0.5 * outputs;
  out->col(0) += rows.rowwise().sum();
}

struct BatchRun {
  Eigen::VectorXd sum;
  Eigen::VectorXd norms;
  Eigen::VectorXd clip_factors;
};

BatchRun RunBatch(const Mlp& mlp, const Eigen::MatrixXd& x, double clip_norm, int threads) {
  BatchRun run;
  PerExampleWorkspace report;
  const absl::Status status = BatchClippedGradientSum(
      mlp, x.rows(),
      [&x](Eigen::Index first, Eigen::Index count, Eigen::MatrixXd* out) {
        *out = x.middleRows(first, count);
      },
      TestLossGradient, clip_norm, threads, &run.sum, &report);
  EXPECT_TRUE(status.ok()) << status;
  run.norms = report.norms();
  run.clip_factors = report.clip_factors();
  return run;
}

// Every batch size around the chunk and shard boundaries (0, 1, a chunk, a
// chunk and one, two shards of several chunks with a ragged end): the same
// sum, norms and factors as one AddClippedGradientSum over the whole batch.
TEST(BatchClippedSumTest, EqualsOneCallOverTheWholeBatch) {
  for (const bool layer_norm : {false, true}) {
    const Mlp mlp = MakeMlp(2, Activation::kTanh, layer_norm);
    for (const Eigen::Index n :
         {Eigen::Index{0}, Eigen::Index{1}, Eigen::Index{2}, kClippedSumChunkRows,
          kClippedSumChunkRows + 1, 2 * kClippedSumChunkRows + 1,
          5 * kClippedSumChunkRows + 17}) {
      const Eigen::MatrixXd x = RandomMatrix(n, kInputDim, 40 + n);
      PerExampleWorkspace whole;
      Eigen::MatrixXd grad_output;
      TestLossGradient(mlp.Forward(x, whole.mlp_workspace()), x, &grad_output);
      Eigen::VectorXd expected = Eigen::VectorXd::Zero(mlp.num_parameters());
      // C at the median norm: about half the examples clipped.
      double clip_norm = 1.0;
      if (n > 0) {
        std::vector<double> norms(PerExampleGradientNorms(mlp, grad_output, &whole).begin(),
                                  PerExampleGradientNorms(mlp, grad_output, &whole).end());
        std::nth_element(norms.begin(), norms.begin() + n / 2, norms.end());
        clip_norm = norms[n / 2];
        ASSERT_TRUE(AddClippedGradientSum(mlp, grad_output, clip_norm, &whole, &expected).ok());
      }
      const BatchRun run = RunBatch(mlp, x, clip_norm, 2);
      ASSERT_EQ(run.sum.size(), mlp.num_parameters());
      ASSERT_EQ(run.norms.size(), n);
      if (n == 0) {
        EXPECT_TRUE((run.sum.array() == 0.0).all());
        continue;
      }
      EXPECT_LT(Track(VectorRelativeError(run.sum, expected)), kRelativeTolerance)
          << "n=" << n << " layer_norm=" << layer_norm;
      EXPECT_LT(Track(MaxRelativeError(run.norms, whole.norms())), kRelativeTolerance);
      EXPECT_LT(Track(MaxRelativeError(run.clip_factors, whole.clip_factors())),
                kRelativeTolerance);
    }
  }
}

// The cut depends on the batch size alone: one thread or two, and every
// repetition, give the same bits (no result depends on thread timing).
TEST(BatchClippedSumTest, SameBitsOnOneThreadOrTwoAndOnEveryRun) {
  const Mlp mlp = MakeMlp(2, Activation::kRelu, false);
  const Eigen::MatrixXd x = RandomMatrix(7 * kClippedSumChunkRows + 5, kInputDim, 77);
  const BatchRun reference = RunBatch(mlp, x, 0.3, 1);
  ASSERT_TRUE((reference.clip_factors.array() < 1.0).any());  // clipping is on
  for (int repeat = 0; repeat < 6; ++repeat) {
    const BatchRun run = RunBatch(mlp, x, 0.3, 1 + repeat % 2);
    EXPECT_TRUE((run.sum.array() == reference.sum.array()).all()) << "repeat " << repeat;
    EXPECT_TRUE((run.norms.array() == reference.norms.array()).all()) << "repeat " << repeat;
  }
}

// A throw in a shard running on the pool's other thread (here std::bad_alloc
// from the rows callback) reaches the caller, as on one thread: escaping a
// pool thread would end the process (the server turns a throw after the
// rows were read into a charged failure, Guarded). The two shards wait for
// each other before reading, so one of them is on the other thread.
TEST(BatchClippedSumTest, AThrowOnThePoolsThreadReachesTheCaller) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two hardware threads";
  const Mlp mlp = MakeMlp(1, Activation::kTanh, false);
  constexpr Eigen::Index kRows = 4 * kClippedSumChunkRows;
  const std::thread::id caller = std::this_thread::get_id();
  for (int repeat = 0; repeat < 5; ++repeat) {
    std::atomic<int> started{0};
    Eigen::VectorXd sum;
    EXPECT_THROW(
        (void)BatchClippedGradientSum(
            mlp, kRows,
            [&](Eigen::Index first, Eigen::Index count, Eigen::MatrixXd* out) {
              if (first == 0 || first == kRows / 2) {
                ++started;
                const auto deadline =
                    std::chrono::steady_clock::now() + std::chrono::seconds(10);
                while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) {
                  std::this_thread::yield();
                }
                if (std::this_thread::get_id() != caller) throw std::bad_alloc();
              }
              *out = Eigen::MatrixXd::Zero(count, kInputDim);
            },
            TestLossGradient, 1.0, 2, &sum),
        std::bad_alloc);
    EXPECT_EQ(started.load(), 2);
  }
}

TEST(BatchClippedSumTest, RefusesABadClipNormBeforeReadingARow) {
  const Mlp mlp = MakeMlp(1, Activation::kTanh, false);
  int reads = 0;
  Eigen::VectorXd sum;
  const absl::Status status = BatchClippedGradientSum(
      mlp, 10,
      [&reads](Eigen::Index, Eigen::Index count, Eigen::MatrixXd* out) {
        ++reads;
        *out = Eigen::MatrixXd::Zero(count, kInputDim);
      },
      TestLossGradient, std::numeric_limits<double>::quiet_NaN(), 2, &sum);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reads, 0);
}

// Prints the worst relative error of the run (all tests in one process).
class ReportWorstError : public ::testing::Environment {
 public:
  void TearDown() override {
    std::cout << "[per_example] worst relative error vs naive loop: " << WorstSeen()
              << std::endl;
  }
};
[[maybe_unused]] ::testing::Environment* const kReport =
    ::testing::AddGlobalTestEnvironment(new ReportWorstError);

}  // namespace
}  // namespace dpcurator::nn
