#include "core/nn/mlp.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "core/nn/activation.h"
#include "core/nn/gradient_check.h"
#include "core/util/public_rng.h"
#include "tests/nn/random_matrix.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::nn {
namespace {

using ::testing::HasSubstr;

constexpr double kMlpGradientTolerance = 1e-4;

using test_util::RandomMatrix;

MlpOptions SmallOptions(Activation activation, bool layer_norm) {
  MlpOptions options;
  options.input_dim = 5;
  options.hidden = {7, 6};
  options.output_dim = 4;
  options.activation = activation;
  options.leaky_relu_slope = 0.1;
  options.layer_norm = layer_norm;
  options.seed = 11;
  return options;
}

class MlpGradientTest
    : public ::testing::TestWithParam<std::tuple<Activation, bool>> {};

// Loss = sum(Wout .* Mlp(X)) with a random Wout, so dLoss/dOutput = Wout.
TEST_P(MlpGradientTest, ParameterGradientMatchesCentralDifferences) {
  const auto [activation, layer_norm] = GetParam();
  absl::StatusOr<Mlp> created = Mlp::Create(SmallOptions(activation, layer_norm));
  ASSERT_TRUE(created.ok()) << created.status();
  Mlp mlp = *std::move(created);
  // Non-zero biases and gains so that every parameter matters.
  PublicRng rng(5);
  for (Eigen::Index i = 0; i < mlp.num_parameters(); ++i) {
    mlp.parameters()(i) += 0.1 * rng.Normal();
  }
  const Eigen::MatrixXd x = RandomMatrix(6, 5, 1);
  const Eigen::MatrixXd w_out = RandomMatrix(6, 4, 2);

  MlpWorkspace ws;
  mlp.Forward(x, &ws);
  Eigen::VectorXd analytic = Eigen::VectorXd::Zero(mlp.num_parameters());
  Eigen::MatrixXd grad_input;
  mlp.Backward(w_out, &ws, &analytic, &grad_input);

  Mlp probe = mlp;
  auto loss = [&](const Eigen::VectorXd& params) {
    EXPECT_TRUE(probe.SetParameters(params).ok());
    MlpWorkspace local;
    return probe.Forward(x, &local).cwiseProduct(w_out).sum();
  };
  const GradientCheckResult result = CheckGradient(loss, mlp.parameters(), analytic);
  EXPECT_LT(result.max_relative_error, kMlpGradientTolerance)
      << "worst index " << result.worst_index << ": analytic "
      << result.analytic_at_worst << " numeric " << result.numeric_at_worst;
  EXPECT_LT(result.norm_relative_error, kMlpGradientTolerance);
  // The check is only meaningful if the gradient is not trivially zero.
  EXPECT_GT(analytic.norm(), 1e-3);

  auto input_loss = [&](const Eigen::VectorXd& flat_x) {
    MlpWorkspace local;
    const Eigen::MatrixXd reshaped = Eigen::Map<const Eigen::MatrixXd>(flat_x.data(), 6, 5);
    return mlp.Forward(reshaped, &local).cwiseProduct(w_out).sum();
  };
  const Eigen::VectorXd flat_x = Eigen::Map<const Eigen::VectorXd>(x.data(), x.size());
  const Eigen::VectorXd flat_grad_input =
      Eigen::Map<const Eigen::VectorXd>(grad_input.data(), grad_input.size());
  ASSERT_EQ(grad_input.rows(), 6);
  ASSERT_EQ(grad_input.cols(), 5);
  const GradientCheckResult input_result = CheckGradient(input_loss, flat_x, flat_grad_input);
  EXPECT_LT(input_result.max_relative_error, kMlpGradientTolerance)
      << "worst index " << input_result.worst_index;
}

INSTANTIATE_TEST_SUITE_P(
    AllActivations, MlpGradientTest,
    ::testing::Combine(::testing::Values(Activation::kRelu, Activation::kLeakyRelu,
                                         Activation::kTanh),
                       ::testing::Bool()),
    [](const auto& info) {
      return ActivationName(std::get<0>(info.param)) +
             (std::get<1>(info.param) ? "_layer_norm" : "_plain");
    });

TEST(MlpTest, BackwardAccumulatesIntoGradient) {
  absl::StatusOr<Mlp> mlp = Mlp::Create(SmallOptions(Activation::kTanh, false));
  ASSERT_TRUE(mlp.ok());
  const Eigen::MatrixXd x = RandomMatrix(3, 5, 3);
  const Eigen::MatrixXd w_out = RandomMatrix(3, 4, 4);
  MlpWorkspace ws;
  mlp->Forward(x, &ws);
  Eigen::VectorXd once = Eigen::VectorXd::Zero(mlp->num_parameters());
  mlp->Backward(w_out, &ws, &once);
  Eigen::VectorXd twice = once;
  mlp->Backward(w_out, &ws, &twice);
  EXPECT_TRUE(twice.isApprox(2.0 * once, 1e-12));
}

TEST(MlpTest, ParameterCountMatchesArchitecture) {
  MlpOptions options = SmallOptions(Activation::kRelu, false);
  absl::StatusOr<Mlp> plain = Mlp::Create(options);
  ASSERT_TRUE(plain.ok());
  // (5*7 + 7) + (7*6 + 6) + (6*4 + 4) = 42 + 48 + 28.
  EXPECT_EQ(plain->num_parameters(), 118);
  EXPECT_EQ(plain->num_layers(), 3);
  options.layer_norm = true;
  absl::StatusOr<Mlp> normed = Mlp::Create(options);
  ASSERT_TRUE(normed.ok());
  // Plus a gain and a shift per hidden unit: 2 * (7 + 6).
  EXPECT_EQ(normed->num_parameters(), 118 + 26);
  absl::StatusOr<Eigen::Index> counted = Mlp::CountParameters(options);
  ASSERT_TRUE(counted.ok());
  EXPECT_EQ(*counted, 144);
}

TEST(MlpTest, LayerViewsAliasTheFlatVector) {
  absl::StatusOr<Mlp> created = Mlp::Create(SmallOptions(Activation::kRelu, true));
  ASSERT_TRUE(created.ok());
  Mlp mlp = *std::move(created);
  const DenseLayerLayout& second = mlp.layers()[1];
  // Column-major fan_in x fan_out: W(2, 3) sits at offset + 3 * fan_in + 2.
  mlp.parameters()(second.weight_offset + 3 * second.fan_in + 2) = 42.0;
  EXPECT_EQ(mlp.weight(1)(2, 3), 42.0);
  mlp.bias(2)(1) = -7.0;
  EXPECT_EQ(mlp.parameters()(mlp.layers()[2].bias_offset + 1), -7.0);
  mlp.norm_gain(0)(4) = 3.0;
  EXPECT_EQ(mlp.parameters()(mlp.layers()[0].gain_offset + 4), 3.0);
  // The views survive a copy of the network (they are rebuilt on access).
  Mlp copy = mlp;
  copy.weight(1)(2, 3) = 1.0;
  EXPECT_EQ(mlp.weight(1)(2, 3), 42.0);
  EXPECT_EQ(copy.parameters()(second.weight_offset + 3 * second.fan_in + 2), 1.0);
}

TEST(MlpTest, ParametersRoundTripThroughFlatVector) {
  const MlpOptions options = SmallOptions(Activation::kLeakyRelu, true);
  absl::StatusOr<Mlp> original = Mlp::Create(options);
  ASSERT_TRUE(original.ok());
  const Eigen::VectorXd saved = original->parameters();
  MlpOptions other_seed = options;
  other_seed.seed = 999;  // ignored by FromParameters
  absl::StatusOr<Mlp> rebuilt = Mlp::FromParameters(other_seed, saved);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(rebuilt->parameters(), saved);
  const Eigen::MatrixXd x = RandomMatrix(8, 5, 6);
  MlpWorkspace ws_a, ws_b;
  EXPECT_EQ(original->Forward(x, &ws_a), rebuilt->Forward(x, &ws_b));
}

TEST(MlpTest, FromParametersRejectsWrongSizeAndNonFinite) {
  const MlpOptions options = SmallOptions(Activation::kRelu, false);
  absl::StatusOr<Mlp> short_vector = Mlp::FromParameters(options, Eigen::VectorXd::Zero(117));
  ASSERT_FALSE(short_vector.ok());
  EXPECT_EQ(short_vector.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_vector.status().message(),
              HasSubstr("Parameter vector has 117 entries; the architecture needs 118"));
  Eigen::VectorXd with_nan = Eigen::VectorXd::Zero(118);
  with_nan(17) = std::nan("");
  absl::StatusOr<Mlp> nan_vector = Mlp::FromParameters(options, with_nan);
  ASSERT_FALSE(nan_vector.ok());
  EXPECT_THAT(nan_vector.status().message(), HasSubstr("Parameter 17 must be finite"));
}

TEST(MlpTest, CreateValidatesOptions) {
  MlpOptions options = SmallOptions(Activation::kRelu, false);
  options.input_dim = 0;
  EXPECT_THAT(Mlp::Create(options).status().message(),
              HasSubstr("Input dimension must be a positive integer, got 0"));
  options = SmallOptions(Activation::kRelu, false);
  options.output_dim = -2;
  EXPECT_THAT(Mlp::Create(options).status().message(),
              HasSubstr("Output dimension must be a positive integer, got -2"));
  options = SmallOptions(Activation::kRelu, false);
  options.hidden = {8, 0};
  EXPECT_THAT(Mlp::Create(options).status().message(),
              HasSubstr("Width of hidden layer 1 must be a positive integer, got 0"));
  options = SmallOptions(Activation::kLeakyRelu, false);
  options.leaky_relu_slope = 1.5;
  EXPECT_THAT(Mlp::Create(options).status().message(),
              HasSubstr("Leaky ReLU slope must be in (0, 1), got 1.5"));
  options = SmallOptions(Activation::kRelu, false);
  options.hidden = {1 << 16, 1 << 16};
  EXPECT_THAT(Mlp::Create(options).status().message(), HasSubstr("parameters; at most"));
}

TEST(MlpTest, LinearModelWhenNoHiddenLayers) {
  MlpOptions options;
  options.input_dim = 3;
  options.hidden = {};
  options.output_dim = 2;
  absl::StatusOr<Mlp> created = Mlp::Create(options);
  ASSERT_TRUE(created.ok());
  Mlp mlp = *std::move(created);
  mlp.bias(0) << 0.5, -1.0;
  const Eigen::MatrixXd x = RandomMatrix(4, 3, 7);
  MlpWorkspace ws;
  const Eigen::MatrixXd expected =
      (x * mlp.weight(0)).rowwise() + mlp.bias(0).transpose();
  EXPECT_TRUE(mlp.Forward(x, &ws).isApprox(expected, 1e-14));
}

TEST(MlpTest, InitialisationIsSeededAndScaled) {
  MlpOptions options;
  options.input_dim = 400;
  options.hidden = {500};
  options.output_dim = 100;
  options.seed = 3;
  absl::StatusOr<Mlp> a = Mlp::Create(options);
  absl::StatusOr<Mlp> b = Mlp::Create(options);
  options.seed = 4;
  absl::StatusOr<Mlp> c = Mlp::Create(options);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->parameters(), b->parameters());
  EXPECT_NE(a->parameters(), c->parameters());
  // He: Var = 2 / fan_in for the ReLU layer (200000 draws: ~0.3% std error).
  const auto w0 = a->weight(0);
  EXPECT_NEAR(w0.squaredNorm() / w0.size(), 2.0 / 400, 0.02 * 2.0 / 400);
  // Glorot: Var = 2 / (fan_in + fan_out) for the linear output layer.
  const auto w1 = a->weight(1);
  EXPECT_NEAR(w1.squaredNorm() / w1.size(), 2.0 / 600, 0.03 * 2.0 / 600);
  EXPECT_EQ(a->bias(0).squaredNorm(), 0.0);
}

TEST(MlpTest, LayerNormNormalisesHiddenRows) {
  MlpOptions options;
  options.input_dim = 4;
  options.hidden = {32};
  options.output_dim = 32;
  options.activation = Activation::kTanh;
  options.layer_norm = true;
  absl::StatusOr<Mlp> created = Mlp::Create(options);
  ASSERT_TRUE(created.ok());
  Mlp mlp = *std::move(created);
  // Make the output layer the identity so the output shows tanh(LN(h)).
  mlp.weight(1).setIdentity();
  Eigen::MatrixXd x = 100.0 * RandomMatrix(5, 4, 8);
  x.col(0).array() += 1000.0;
  MlpWorkspace ws;
  const Eigen::MatrixXd y = mlp.Forward(x, &ws).array().atanh().matrix();
  for (Eigen::Index i = 0; i < y.rows(); ++i) {
    EXPECT_NEAR(y.row(i).mean(), 0.0, 1e-9);
    EXPECT_NEAR((y.row(i).array() - y.row(i).mean()).square().mean(), 1.0, 1e-4);
  }
}

TEST(MlpTest, WorkspaceBuffersAreReusedForSameBatchSize) {
  absl::StatusOr<Mlp> mlp = Mlp::Create(SmallOptions(Activation::kRelu, true));
  ASSERT_TRUE(mlp.ok());
  MlpWorkspace ws;
  Eigen::VectorXd grad = Eigen::VectorXd::Zero(mlp->num_parameters());
  Eigen::MatrixXd grad_input;
  const Eigen::MatrixXd x1 = RandomMatrix(9, 5, 9);
  const Eigen::MatrixXd x2 = RandomMatrix(9, 5, 10);
  const Eigen::MatrixXd g = RandomMatrix(9, 4, 11);
  const double* out_before = mlp->Forward(x1, &ws).data();
  mlp->Backward(g, &ws, &grad, &grad_input);
  const double* grad_input_before = grad_input.data();
  const double* out_after = mlp->Forward(x2, &ws).data();
  mlp->Backward(g, &ws, &grad, &grad_input);
  EXPECT_EQ(out_before, out_after);
  EXPECT_EQ(grad_input_before, grad_input.data());
}

TEST(ActivationTest, NamesRoundTrip) {
  for (Activation a : {Activation::kRelu, Activation::kLeakyRelu, Activation::kTanh}) {
    absl::StatusOr<Activation> parsed = ParseActivation(ActivationName(a));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, a);
  }
  EXPECT_THAT(ParseActivation("gelu").status().message(),
              HasSubstr("Unknown activation \"gelu\""));
}

}  // namespace
}  // namespace dpcurator::nn

namespace dpcurator::nn {
namespace {

// The float network (the trainers' generators) computes what the double one
// does to float precision, from the same parameters.
TEST(MlpFloatTest, MatchesDoubleForwardAndBackward) {
  for (const bool layer_norm : {false, true}) {
    MlpOptions options;
    options.input_dim = 5;
    options.hidden = {16, 12};
    options.output_dim = 4;
    options.activation = Activation::kTanh;
    options.layer_norm = layer_norm;
    options.seed = 3;
    absl::StatusOr<Mlp> mlp = Mlp::Create(options);
    ASSERT_TRUE(mlp.ok());
    absl::StatusOr<MlpF> mlp_float =
        MlpF::FromParameters(options, mlp->parameters().cast<float>());
    ASSERT_TRUE(mlp_float.ok());
    const Eigen::MatrixXd input = Eigen::MatrixXd::Random(9, 5);
    const Eigen::MatrixXd grad_output = Eigen::MatrixXd::Random(9, 4);
    MlpWorkspace ws;
    MlpWorkspaceF ws_float;
    const Eigen::MatrixXd out = mlp->Forward(input, &ws);
    const Eigen::MatrixXf out_float = mlp_float->Forward(input.cast<float>(), &ws_float);
    EXPECT_LT((out - out_float.cast<double>()).cwiseAbs().maxCoeff(), 1e-5);
    Eigen::VectorXd grad = Eigen::VectorXd::Zero(mlp->num_parameters());
    Eigen::VectorXf grad_float = Eigen::VectorXf::Zero(mlp->num_parameters());
    Eigen::MatrixXd grad_input;
    Eigen::MatrixXf grad_input_float;
    mlp->Backward(grad_output, &ws, &grad, &grad_input);
    mlp_float->Backward(grad_output.cast<float>(), &ws_float, &grad_float, &grad_input_float);
    EXPECT_LT((grad - grad_float.cast<double>()).cwiseAbs().maxCoeff(),
              1e-5 * std::max(1.0, grad.cwiseAbs().maxCoeff()));
    EXPECT_LT((grad_input - grad_input_float.cast<double>()).cwiseAbs().maxCoeff(), 1e-5);
  }
}

// A float network created from a seed starts from the double one's weights,
// rounded.
TEST(MlpFloatTest, CreateRoundsTheDoubleInitialisation) {
  MlpOptions options;
  options.input_dim = 3;
  options.hidden = {7};
  options.output_dim = 2;
  options.seed = 11;
  const Mlp mlp = Mlp::Create(options).value();
  const MlpF mlp_float = MlpF::Create(options).value();
  EXPECT_EQ(mlp.parameters().cast<float>(), mlp_float.parameters());
}

}  // namespace
}  // namespace dpcurator::nn
