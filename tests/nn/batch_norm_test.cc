#include "core/nn/batch_norm.h"

#include <cmath>
#include <cstdint>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "core/nn/dropout.h"
#include "core/nn/gradient_check.h"
#include "core/util/public_rng.h"
#include "tests/nn/random_matrix.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::nn {
namespace {

using ::testing::HasSubstr;

// Batch norm is not linear in its input; step 1e-5 leaves O(h^2) = 1e-10
// truncation, well inside this.
constexpr double kBatchNormGradientTolerance = 1e-6;

using test_util::RandomMatrix;

// Per channel c, the values of columns c * spatial .. (c + 1) * spatial - 1
// of every row (the layout of conv2d.h).
Eigen::MatrixXd NaiveBatchNorm(const Eigen::MatrixXd& x, int channels, int spatial,
                               const Eigen::VectorXd& params, double eps,
                               Eigen::VectorXd* mean, Eigen::VectorXd* var) {
  Eigen::MatrixXd out(x.rows(), x.cols());
  mean->resize(channels);
  var->resize(channels);
  for (int c = 0; c < channels; ++c) {
    const Eigen::MatrixXd block = x.middleCols(c * spatial, spatial);
    const double m = block.mean();
    const double v = (block.array() - m).square().mean();
    (*mean)(c) = m;
    (*var)(c) = v;
    out.middleCols(c * spatial, spatial) =
        ((block.array() - m) / std::sqrt(v + eps) * params(c) + params(channels + c)).matrix();
  }
  return out;
}

class BatchNormTest : public ::testing::TestWithParam<int> {};

TEST_P(BatchNormTest, TrainingForwardMatchesDirectStatisticsAndUpdatesRunningAverages) {
  const int spatial = GetParam();
  const int channels = 3;
  absl::StatusOr<BatchNorm> bn =
      BatchNorm::Create({.channels = channels, .spatial = spatial, .momentum = 0.25});
  ASSERT_TRUE(bn.ok()) << bn.status();
  Eigen::VectorXd params = RandomMatrix(2 * channels, 1, 1).col(0);
  const Eigen::MatrixXd x = (RandomMatrix(6, bn->feature_size(), 2).array() * 2.0 + 0.5).matrix();
  Eigen::VectorXd running(bn->num_running_statistics());
  bn->InitializeRunningStatistics(running);
  BatchNormWorkspace ws;
  const Eigen::MatrixXd out = bn->ForwardTraining(params, x, running, &ws);
  Eigen::VectorXd mean, var;
  const Eigen::MatrixXd expected = NaiveBatchNorm(x, channels, spatial, params, 1e-5, &mean, &var);
  EXPECT_LT((out - expected).cwiseAbs().maxCoeff(), 1e-12);
  const double count = 6.0 * spatial;
  for (int c = 0; c < channels; ++c) {
    EXPECT_NEAR(running(c), 0.25 * mean(c), 1e-12);
    EXPECT_NEAR(running(channels + c), 0.75 + 0.25 * var(c) * count / (count - 1), 1e-12);
  }

  // Inference with the running statistics is an affine map per channel.
  const Eigen::MatrixXd inferred = bn->ForwardInference(params, x, running, &ws);
  for (int c = 0; c < channels; ++c) {
    const double scale = params(c) / std::sqrt(running(channels + c) + 1e-5);
    const Eigen::MatrixXd want =
        ((x.middleCols(c * spatial, spatial).array() - running(c)) * scale + params(channels + c))
            .matrix();
    EXPECT_LT((inferred.middleCols(c * spatial, spatial) - want).cwiseAbs().maxCoeff(), 1e-12);
  }
}

TEST_P(BatchNormTest, GradientsMatchCentralDifferencesInBothModes) {
  const int spatial = GetParam();
  const int channels = 2;
  absl::StatusOr<BatchNorm> bn = BatchNorm::Create({.channels = channels, .spatial = spatial});
  ASSERT_TRUE(bn.ok());
  const Eigen::VectorXd params = RandomMatrix(2 * channels, 1, 3).col(0);
  const Eigen::MatrixXd x = RandomMatrix(5, bn->feature_size(), 4);
  const Eigen::MatrixXd r = RandomMatrix(5, bn->feature_size(), 5);
  Eigen::VectorXd running(bn->num_running_statistics());
  running << 0.3, -0.2, 1.5, 0.7;

  for (const bool training : {true, false}) {
    auto forward = [&](const Eigen::VectorXd& p, const Eigen::Ref<const Eigen::MatrixXd>& in,
                       BatchNormWorkspace* ws) -> const Eigen::MatrixXd& {
      if (!training) return bn->ForwardInference(p, in, running, ws);
      Eigen::VectorXd scratch = running;  // the running averages do not affect the output
      return bn->ForwardTraining(p, in, scratch, ws);
    };
    BatchNormWorkspace ws;
    forward(params, x, &ws);
    Eigen::VectorXd grad_params = Eigen::VectorXd::Zero(bn->num_parameters());
    Eigen::MatrixXd grad_input;
    bn->Backward(params, r, &ws, grad_params, &grad_input);

    auto param_loss = [&](const Eigen::VectorXd& p) {
      BatchNormWorkspace local;
      return forward(p, x, &local).cwiseProduct(r).sum();
    };
    const GradientCheckResult by_params = CheckGradient(param_loss, params, grad_params);
    EXPECT_LT(by_params.max_relative_error, kBatchNormGradientTolerance) << "training " << training;
    auto input_loss = [&](const Eigen::VectorXd& flat) {
      BatchNormWorkspace local;
      const Eigen::Map<const Eigen::MatrixXd> in(flat.data(), x.rows(), x.cols());
      return forward(params, in, &local).cwiseProduct(r).sum();
    };
    const GradientCheckResult by_input =
        CheckGradient(input_loss, x.reshaped(), grad_input.reshaped());
    EXPECT_LT(by_input.max_relative_error, kBatchNormGradientTolerance)
        << "training " << training << " worst " << by_input.worst_index << ": analytic "
        << by_input.analytic_at_worst << " numeric " << by_input.numeric_at_worst;
    EXPECT_GT(grad_input.norm(), 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(Spatial, BatchNormTest, ::testing::Values(1, 4, 9));

TEST(BatchNormTest, FloatAgreesWithDouble) {
  absl::StatusOr<BatchNormF> bn_f = BatchNormF::Create({.channels = 4, .spatial = 3});
  absl::StatusOr<BatchNorm> bn = BatchNorm::Create({.channels = 4, .spatial = 3});
  ASSERT_TRUE(bn_f.ok() && bn.ok());
  const Eigen::VectorXd params = RandomMatrix(8, 1, 6).col(0);
  const Eigen::MatrixXd x = RandomMatrix(10, 12, 7);
  Eigen::VectorXd running(8);
  bn->InitializeRunningStatistics(running);
  Eigen::VectorXf running_f = running.cast<float>();
  BatchNormWorkspace ws;
  BatchNormWorkspaceF ws_f;
  const Eigen::MatrixXd out = bn->ForwardTraining(params, x, running, &ws);
  const Eigen::MatrixXd out_f =
      bn_f->ForwardTraining(params.cast<float>(), x.cast<float>(), running_f, &ws_f)
          .cast<double>();
  EXPECT_LT((out - out_f).cwiseAbs().maxCoeff(), 1e-5);
  EXPECT_LT((running - running_f.cast<double>()).cwiseAbs().maxCoeff(), 1e-6);
}

TEST(BatchNormTest, InitializeIsTheIdentityAffineMap) {
  absl::StatusOr<BatchNorm> bn = BatchNorm::Create({.channels = 3});
  ASSERT_TRUE(bn.ok());
  Eigen::VectorXd params(6), running(6);
  bn->Initialize(params);
  bn->InitializeRunningStatistics(running);
  EXPECT_EQ(params, (Eigen::VectorXd(6) << 1, 1, 1, 0, 0, 0).finished());
  EXPECT_EQ(running, (Eigen::VectorXd(6) << 0, 0, 0, 1, 1, 1).finished());
}

TEST(BatchNormTest, CreateRejectsInvalidOptions) {
  struct Case {
    BatchNormOptions options;
    const char* message;
  };
  for (const Case& c :
       {Case{{.channels = 0}, "BatchNorm channels must be a positive integer, got 0"},
        Case{{.channels = 2, .spatial = -1}, "BatchNorm spatial size must be a positive integer"},
        Case{{.channels = 2, .epsilon = 0.0}, "BatchNorm epsilon must be"},
        Case{{.channels = 2, .momentum = 0.0}, "BatchNorm momentum must be in (0, 1], got 0"},
        Case{{.channels = 2, .momentum = 1.5}, "BatchNorm momentum must be in (0, 1]"}}) {
    absl::StatusOr<BatchNorm> bn = BatchNorm::Create(c.options);
    ASSERT_FALSE(bn.ok()) << c.message;
    EXPECT_EQ(bn.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(bn.status().message(), HasSubstr(c.message));
  }
}

// Dropout ------------------------------------------------------------------

TEST(DropoutTest, MaskIsZeroOrInverseKeepAndDropsAboutTheRate) {
  absl::StatusOr<Dropout> dropout = Dropout::Create(0.5);
  ASSERT_TRUE(dropout.ok());
  const Eigen::MatrixXd x = RandomMatrix(200, 500, 40);
  PublicRng rng(41);
  DropoutWorkspace ws;
  const Eigen::MatrixXd out = dropout->ForwardTraining(x, &rng, &ws);
  const Eigen::MatrixXd& mask = ws.mask();
  EXPECT_TRUE(((mask.array() == 0.0) || (mask.array() == 2.0)).all());
  EXPECT_EQ(out, x.cwiseProduct(mask));
  // 100000 Bernoulli(1/2): sd of the dropped fraction is 0.0016.
  const double dropped = (mask.array() == 0.0).cast<double>().mean();
  EXPECT_NEAR(dropped, 0.5, 0.01);
  // Inverted dropout keeps the mean: E[mask] = 1.
  EXPECT_NEAR(mask.mean(), 1.0, 0.02);
}

TEST(DropoutTest, SameSeedSameMaskAndBackwardAppliesIt) {
  absl::StatusOr<DropoutF> dropout = DropoutF::Create(0.3);
  ASSERT_TRUE(dropout.ok());
  const Eigen::MatrixXf x = RandomMatrix(7, 9, 42).cast<float>();
  PublicRng a(43), b(43), c(44);
  DropoutWorkspaceF wa, wb, wc;
  dropout->ForwardTraining(x, &a, &wa);
  dropout->ForwardTraining(x, &b, &wb);
  dropout->ForwardTraining(x, &c, &wc);
  EXPECT_EQ(wa.mask(), wb.mask());
  EXPECT_NE(wa.mask(), wc.mask());
  const Eigen::MatrixXf r = RandomMatrix(7, 9, 45).cast<float>();
  Eigen::MatrixXf grad;
  dropout->Backward(r, wa, &grad);
  EXPECT_EQ(grad, r.cwiseProduct(wa.mask()));
}

TEST(DropoutTest, RateZeroIsTheIdentity) {
  absl::StatusOr<Dropout> dropout = Dropout::Create(0.0);
  ASSERT_TRUE(dropout.ok());
  const Eigen::MatrixXd x = RandomMatrix(4, 6, 46);
  PublicRng rng(47);
  DropoutWorkspace ws;
  EXPECT_EQ(dropout->ForwardTraining(x, &rng, &ws), x);
}

TEST(DropoutTest, CreateRejectsRatesOutsideTheUnitInterval) {
  for (const double rate : {-0.1, 1.0, 2.0, std::nan("")}) {
    absl::StatusOr<Dropout> dropout = Dropout::Create(rate);
    ASSERT_FALSE(dropout.ok()) << rate;
    EXPECT_THAT(dropout.status().message(), HasSubstr("Dropout rate must be in [0, 1)"));
  }
}

}  // namespace
}  // namespace dpcurator::nn
