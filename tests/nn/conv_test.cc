#include "core/nn/conv2d.h"

#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "core/nn/batch_norm.h"
#include "core/nn/conv_transpose2d.h"
#include "core/nn/gradient_check.h"
#include "core/nn/upsample2d.h"
#include "core/util/public_rng.h"
#include "tests/nn/random_matrix.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::nn {
namespace {

using ::testing::HasSubstr;

// Conv2d is linear in its input and its parameters, so central differences
// are exact up to rounding: double gradients must agree to 1e-6 (the issue's
// "conv gradients checked by finite differences").
constexpr double kConvGradientTolerance = 1e-6;
// float (OpenBLAS sgemm) against the double reference, relative to the
// largest magnitude: a few hundred float roundings of O(1) terms.
constexpr double kFloatTolerance = 1e-5;

// The losses are O(10), so a central difference with h = 1e-5 carries about
// 1e-16 * 10 / 1e-5 = 1e-10 of rounding: gradient entries below 1e-3 are
// judged by absolute error (1e-6 * 1e-3) rather than relative error.
GradientCheckOptions CheckOptions() {
  GradientCheckOptions options;
  options.denominator_floor = 1e-3;
  return options;
}

using test_util::RandomMatrix;

Eigen::VectorXd RandomVector(Eigen::Index size, uint64_t seed) {
  return RandomMatrix(size, 1, seed).col(0);
}

// Direct loops over the definition in conv2d.h, one example at a time,
// reading the CHW row layout: the reference every im2col result must match.
Eigen::MatrixXd NaiveConv(const Conv2dOptions& o, const Eigen::VectorXd& params,
                          const Eigen::MatrixXd& input) {
  const int k = o.kernel_size;
  const int cin = o.input.channels;
  const int h = o.input.height;
  const int w = o.input.width;
  const int oh = (h + 2 * o.padding - k) / o.stride + 1;
  const int ow = (w + 2 * o.padding - k) / o.stride + 1;
  const Eigen::Index patch = Eigen::Index{cin} * k * k;
  Eigen::MatrixXd out(input.rows(), Eigen::Index{o.out_channels} * oh * ow);
  for (Eigen::Index i = 0; i < input.rows(); ++i) {
    for (int co = 0; co < o.out_channels; ++co) {
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          double sum = o.bias ? params(patch * o.out_channels + co) : 0.0;
          for (int c = 0; c < cin; ++c) {
            for (int ky = 0; ky < k; ++ky) {
              for (int kx = 0; kx < k; ++kx) {
                const int y = oy * o.stride - o.padding + ky;
                const int x = ox * o.stride - o.padding + kx;
                if (y < 0 || y >= h || x < 0 || x >= w) continue;
                const double weight = params(co * patch + (c * k + ky) * k + kx);
                sum += weight * input(i, (c * h + y) * w + x);
              }
            }
          }
          out(i, (co * oh + oy) * ow + ox) = sum;
        }
      }
    }
  }
  return out;
}

// in channels, out channels, height, width, kernel, stride, padding, bias.
using Geometry = std::tuple<int, int, int, int, int, int, int, bool>;

Conv2dOptions MakeOptions(const Geometry& g) {
  Conv2dOptions o;
  o.input = {std::get<0>(g), std::get<2>(g), std::get<3>(g)};
  o.out_channels = std::get<1>(g);
  o.kernel_size = std::get<4>(g);
  o.stride = std::get<5>(g);
  o.padding = std::get<6>(g);
  o.bias = std::get<7>(g);
  return o;
}

class Conv2dGeometryTest : public ::testing::TestWithParam<Geometry> {};

TEST_P(Conv2dGeometryTest, ForwardMatchesDirectLoops) {
  const Conv2dOptions options = MakeOptions(GetParam());
  absl::StatusOr<Conv2d> conv = Conv2d::Create(options);
  ASSERT_TRUE(conv.ok()) << conv.status();
  const Eigen::VectorXd params = RandomVector(conv->num_parameters(), 3);
  const Eigen::MatrixXd input = RandomMatrix(5, conv->input_shape().size(), 4);
  Conv2dWorkspace ws;
  const Eigen::MatrixXd& out = conv->Forward(params, input, &ws);
  const Eigen::MatrixXd expected = NaiveConv(options, params, input);
  ASSERT_EQ(out.rows(), expected.rows());
  ASSERT_EQ(out.cols(), expected.cols());
  EXPECT_LT((out - expected).cwiseAbs().maxCoeff(), 1e-12);

  // float through OpenBLAS against the double reference.
  absl::StatusOr<Conv2dF> conv_f = Conv2dF::Create(options);
  ASSERT_TRUE(conv_f.ok()) << conv_f.status();
  Conv2dWorkspaceF ws_f;
  const Eigen::VectorXf params_f = params.cast<float>();
  const Eigen::MatrixXf input_f = input.cast<float>();
  const Eigen::MatrixXd out_f = conv_f->Forward(params_f, input_f, &ws_f).cast<double>();
  EXPECT_LT((out_f - expected).cwiseAbs().maxCoeff(),
            kFloatTolerance * expected.cwiseAbs().maxCoeff());
}

// Loss = sum(R .* Conv(X)) with random R, so dLoss/dOutput = R.
TEST_P(Conv2dGeometryTest, GradientsMatchCentralDifferences) {
  const Conv2dOptions options = MakeOptions(GetParam());
  absl::StatusOr<Conv2d> conv = Conv2d::Create(options);
  ASSERT_TRUE(conv.ok()) << conv.status();
  const Eigen::VectorXd params = RandomVector(conv->num_parameters(), 5);
  const Eigen::MatrixXd input = RandomMatrix(3, conv->input_shape().size(), 6);
  const Eigen::MatrixXd r = RandomMatrix(3, conv->output_shape().size(), 7);

  Conv2dWorkspace ws;
  conv->Forward(params, input, &ws);
  Eigen::VectorXd grad_params = Eigen::VectorXd::Zero(conv->num_parameters());
  Eigen::MatrixXd grad_input;
  conv->Backward(params, r, &ws, grad_params, &grad_input);

  auto param_loss = [&](const Eigen::VectorXd& p) {
    Conv2dWorkspace local;
    return conv->Forward(p, input, &local).cwiseProduct(r).sum();
  };
  const GradientCheckResult by_params =
      CheckGradient(param_loss, params, grad_params, CheckOptions());
  EXPECT_LT(by_params.max_relative_error, kConvGradientTolerance)
      << "worst parameter " << by_params.worst_index << ": analytic "
      << by_params.analytic_at_worst << " numeric " << by_params.numeric_at_worst;
  EXPECT_GT(grad_params.norm(), 1e-3);

  auto input_loss = [&](const Eigen::VectorXd& flat) {
    Conv2dWorkspace local;
    const Eigen::Map<const Eigen::MatrixXd> x(flat.data(), input.rows(), input.cols());
    return conv->Forward(params, x, &local).cwiseProduct(r).sum();
  };
  const Eigen::VectorXd flat_input = input.reshaped();
  const Eigen::VectorXd flat_grad = grad_input.reshaped();
  const GradientCheckResult by_input =
      CheckGradient(input_loss, flat_input, flat_grad, CheckOptions());
  EXPECT_LT(by_input.max_relative_error, kConvGradientTolerance)
      << "worst input " << by_input.worst_index << ": analytic " << by_input.analytic_at_worst
      << " numeric " << by_input.numeric_at_worst;
  EXPECT_GT(grad_input.norm(), 1e-3);

  // The float path (OpenBLAS for all three GEMMs) agrees with double.
  absl::StatusOr<Conv2dF> conv_f = Conv2dF::Create(options);
  ASSERT_TRUE(conv_f.ok());
  Conv2dWorkspaceF ws_f;
  const Eigen::VectorXf params_f = params.cast<float>();
  conv_f->Forward(params_f, input.cast<float>(), &ws_f);
  Eigen::VectorXf grad_params_f = Eigen::VectorXf::Zero(conv_f->num_parameters());
  Eigen::MatrixXf grad_input_f;
  conv_f->Backward(params_f, r.cast<float>(), &ws_f, grad_params_f, &grad_input_f);
  EXPECT_LT((grad_params_f.cast<double>() - grad_params).cwiseAbs().maxCoeff(),
            kFloatTolerance * grad_params.cwiseAbs().maxCoeff());
  EXPECT_LT((grad_input_f.cast<double>() - grad_input).cwiseAbs().maxCoeff(),
            kFloatTolerance * grad_input.cwiseAbs().maxCoeff());
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, Conv2dGeometryTest,
    ::testing::Values(Geometry{1, 3, 5, 7, 3, 1, 1, true},   // odd sizes, same padding
                      Geometry{2, 4, 9, 8, 3, 2, 1, true},   // the judge's k3 s2 p1
                      Geometry{3, 2, 6, 5, 2, 2, 0, false},  // even kernel, no bias
                      Geometry{2, 3, 7, 6, 5, 1, 2, true},   // the generator's k5 p2
                      Geometry{1, 2, 4, 4, 4, 1, 0, true},   // kernel = input
                      Geometry{2, 2, 5, 6, 3, 3, 2, true},   // stride 3, wide pad
                      Geometry{1, 1, 1, 1, 3, 1, 1, true},   // 1 x 1 image, padded
                      Geometry{4, 1, 8, 3, 1, 1, 0, false})); // 1 x 1 kernel

TEST(Conv2dTest, OutputShapeFollowsTheFormula) {
  struct Case {
    int size, kernel, stride, padding, expected;
  };
  // (H + 2p - k) / s + 1, rounded down.
  for (const Case& c : std::vector<Case>{{28, 3, 2, 1, 14},
                                         {14, 3, 2, 1, 7},
                                         {14, 5, 1, 2, 14},
                                         {8, 3, 2, 0, 3},
                                         {7, 7, 1, 0, 1},
                                         {5, 2, 3, 1, 2}}) {
    EXPECT_EQ(ConvOutputSize(c.size, c.kernel, c.stride, c.padding), c.expected)
        << c.size << " k" << c.kernel << " s" << c.stride << " p" << c.padding;
    Conv2dOptions o;
    o.input = {2, c.size, c.size + 1};
    o.out_channels = 3;
    o.kernel_size = c.kernel;
    o.stride = c.stride;
    o.padding = c.padding;
    absl::StatusOr<Conv2d> conv = Conv2d::Create(o);
    ASSERT_TRUE(conv.ok()) << conv.status();
    EXPECT_EQ(conv->output_shape().channels, 3);
    EXPECT_EQ(conv->output_shape().height, c.expected);
    EXPECT_EQ(conv->output_shape().width,
              ConvOutputSize(c.size + 1, c.kernel, c.stride, c.padding));
  }
}

TEST(Conv2dTest, TheJudgesLayersHaveThePapersShapes) {
  // Issue 14 item 4: Conv 32 k3 s2 p1 -> Conv 64 k3 s2 p1 on 1 x 28 x 28.
  absl::StatusOr<Conv2dF> first = Conv2dF::Create(
      {.input = {1, 28, 28}, .out_channels = 32, .kernel_size = 3, .stride = 2, .padding = 1});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->output_shape(), (ImageShape{32, 14, 14}));
  EXPECT_EQ(first->num_parameters(), 32 * 9 + 32);
  absl::StatusOr<Conv2dF> second = Conv2dF::Create({.input = first->output_shape(),
                                                    .out_channels = 64,
                                                    .kernel_size = 3,
                                                    .stride = 2,
                                                    .padding = 1});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->output_shape(), (ImageShape{64, 7, 7}));
}

TEST(Conv2dTest, CreateRejectsInvalidGeometry) {
  const Conv2dOptions valid{
      .input = {2, 6, 6}, .out_channels = 3, .kernel_size = 3, .stride = 1, .padding = 1};
  ASSERT_TRUE(Conv2d::Create(valid).ok());
  struct Case {
    Conv2dOptions options;
    const char* message;
  };
  std::vector<Case> cases;
  Conv2dOptions o = valid;
  o.input.channels = 0;
  cases.push_back({o, "Conv2d input channels must be a positive integer, got 0"});
  o = valid;
  o.input.height = -2;
  cases.push_back({o, "Conv2d input height must be a positive integer, got -2"});
  o = valid;
  o.input.width = 0;
  cases.push_back({o, "Conv2d input width must be a positive integer"});
  o = valid;
  o.out_channels = 0;
  cases.push_back({o, "Conv2d output channels must be a positive integer"});
  o = valid;
  o.kernel_size = 0;
  cases.push_back({o, "Conv2d kernel size must be a positive integer"});
  o = valid;
  o.stride = -1;
  cases.push_back({o, "Conv2d stride must be a positive integer"});
  o = valid;
  o.padding = -1;
  cases.push_back({o, "Conv2d padding must be non-negative, got -1"});
  o = valid;
  o.kernel_size = 9;  // padded input is 8 x 8
  cases.push_back({o, "Conv2d kernel size 9 exceeds the padded input 8 x 8"});
  o = valid;
  o.input = {2, 6, 3};
  o.padding = 0;
  o.kernel_size = 4;  // fits the height, not the width
  cases.push_back({o, "Conv2d kernel size 4 exceeds the padded input 6 x 3"});
  for (const Case& c : cases) {
    absl::StatusOr<Conv2d> conv = Conv2d::Create(c.options);
    ASSERT_FALSE(conv.ok()) << c.message;
    EXPECT_EQ(conv.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(conv.status().message(), HasSubstr(c.message));
    EXPECT_FALSE(Conv2dF::Create(c.options).ok()) << c.message;
  }
}

TEST(Conv2dTest, StridedBlocksAndReusedWorkspacesGiveTheSameResults) {
  absl::StatusOr<Conv2d> conv = Conv2d::Create(
      {.input = {2, 5, 5}, .out_channels = 3, .kernel_size = 3, .stride = 2, .padding = 1});
  ASSERT_TRUE(conv.ok());
  const Eigen::VectorXd params = RandomVector(conv->num_parameters(), 8);
  const Eigen::MatrixXd big_input = RandomMatrix(7, conv->input_shape().size(), 9);
  const Eigen::MatrixXd big_r = RandomMatrix(7, conv->output_shape().size(), 10);
  const Eigen::MatrixXd input = big_input.topRows(4);
  const Eigen::MatrixXd r = big_r.topRows(4);

  Conv2dWorkspace fresh;
  const Eigen::MatrixXd expected = conv->Forward(params, input, &fresh);
  Eigen::VectorXd expected_grad = Eigen::VectorXd::Zero(conv->num_parameters());
  Eigen::MatrixXd expected_grad_input;
  conv->Backward(params, r, &fresh, expected_grad, &expected_grad_input);

  // A workspace used first for a larger batch, then fed blocks whose outer
  // stride is not their row count.
  Conv2dWorkspace reused;
  conv->Forward(params, big_input, &reused);
  const Eigen::MatrixXd out = conv->Forward(params, big_input.topRows(4), &reused);
  Eigen::VectorXd grad = Eigen::VectorXd::Zero(conv->num_parameters());
  Eigen::MatrixXd grad_input;
  conv->Backward(params, big_r.topRows(4), &reused, grad, &grad_input);
  EXPECT_EQ(out, expected);
  EXPECT_LT((grad - expected_grad).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LT((grad_input - expected_grad_input).cwiseAbs().maxCoeff(), 1e-12);
}

TEST(Conv2dTest, BackwardAccumulatesIntoASegmentOfAFlatGradient) {
  absl::StatusOr<Conv2d> conv =
      Conv2d::Create({.input = {1, 4, 4}, .out_channels = 2, .kernel_size = 3});
  ASSERT_TRUE(conv.ok());
  const Eigen::VectorXd params = RandomVector(conv->num_parameters(), 11);
  const Eigen::MatrixXd input = RandomMatrix(2, 16, 12);
  const Eigen::MatrixXd r = RandomMatrix(2, conv->output_shape().size(), 13);
  Conv2dWorkspace ws;
  conv->Forward(params, input, &ws);
  Eigen::VectorXd once = Eigen::VectorXd::Zero(conv->num_parameters());
  conv->Backward(params, r, &ws, once);
  // A generator's flat vector: 3 entries of another layer, then this one's.
  Eigen::VectorXd flat = Eigen::VectorXd::Constant(3 + conv->num_parameters(), 1.0);
  conv->Backward(params, r, &ws, flat.segment(3, conv->num_parameters()));
  EXPECT_EQ(flat.head(3), Eigen::VectorXd::Ones(3));
  EXPECT_LT((flat.tail(conv->num_parameters()).array() - 1.0 - once.array()).abs().maxCoeff(),
            1e-12);
}

TEST(Conv2dTest, InitializeDrawsWithinPyTorchsDefaultBound) {
  absl::StatusOr<Conv2dF> conv =
      Conv2dF::Create({.input = {8, 14, 14}, .out_channels = 16, .kernel_size = 5, .padding = 2});
  ASSERT_TRUE(conv.ok());
  Eigen::VectorXf params(conv->num_parameters());
  PublicRng rng(1);
  conv->Initialize(&rng, params);
  const double bound = 1.0 / std::sqrt(8.0 * 25.0);
  EXPECT_LE(params.cwiseAbs().maxCoeff(), bound);
  // Uniform on [-b, b]: the largest of 3216 draws is close to b.
  EXPECT_GT(params.cwiseAbs().maxCoeff(), 0.99 * bound);
  PublicRng same(1);
  Eigen::VectorXf again(conv->num_parameters());
  conv->Initialize(&same, again);
  EXPECT_EQ(params, again);
}

// Upsample2d --------------------------------------------------------------

Eigen::MatrixXd NaiveNearest(const ImageShape& in, int f, const Eigen::MatrixXd& x) {
  const int oh = in.height * f;
  const int ow = in.width * f;
  Eigen::MatrixXd out(x.rows(), Eigen::Index{in.channels} * oh * ow);
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (int c = 0; c < in.channels; ++c)
      for (int y = 0; y < oh; ++y)
        for (int xx = 0; xx < ow; ++xx)
          out(i, (c * oh + y) * ow + xx) = x(i, (c * in.height + y / f) * in.width + xx / f);
  return out;
}

TEST(Upsample2dTest, NearestCopiesEachPixelIntoAFactorSquare) {
  for (const int factor : {1, 2, 3}) {
    const ImageShape shape{3, 3, 5};
    absl::StatusOr<Upsample2d> up =
        Upsample2d::Create({.input = shape, .factor = factor, .mode = UpsampleMode::kNearest});
    ASSERT_TRUE(up.ok()) << up.status();
    EXPECT_EQ(up->output_shape(), (ImageShape{3, 3 * factor, 5 * factor}));
    const Eigen::MatrixXd x = RandomMatrix(4, shape.size(), 20 + factor);
    Upsample2dWorkspace ws;
    EXPECT_EQ(up->Forward(x, &ws), NaiveNearest(shape, factor, x)) << "factor " << factor;
  }
}

TEST(Upsample2dTest, BilinearMatchesPyTorchOnASmallImage) {
  // torch.nn.functional.interpolate(torch.tensor([[[[1., 2.], [3., 4.]]]]),
  // scale_factor=2, mode="bilinear", align_corners=False).
  absl::StatusOr<Upsample2d> up =
      Upsample2d::Create({.input = {1, 2, 2}, .factor = 2, .mode = UpsampleMode::kBilinear});
  ASSERT_TRUE(up.ok());
  Eigen::MatrixXd x(1, 4);
  x << 1, 2, 3, 4;
  Eigen::MatrixXd expected(1, 16);
  expected << 1.0, 1.25, 1.75, 2.0,  //
      1.5, 1.75, 2.25, 2.5,          //
      2.5, 2.75, 3.25, 3.5,          //
      3.0, 3.25, 3.75, 4.0;
  Upsample2dWorkspace ws;
  EXPECT_LT((up->Forward(x, &ws) - expected).cwiseAbs().maxCoeff(), 1e-12);
}

class Upsample2dGradientTest
    : public ::testing::TestWithParam<std::tuple<UpsampleMode, int>> {};

TEST_P(Upsample2dGradientTest, BackwardMatchesCentralDifferences) {
  const auto [mode, factor] = GetParam();
  absl::StatusOr<Upsample2d> up =
      Upsample2d::Create({.input = {2, 3, 4}, .factor = factor, .mode = mode});
  ASSERT_TRUE(up.ok());
  const Eigen::MatrixXd x = RandomMatrix(3, up->input_shape().size(), 30);
  const Eigen::MatrixXd r = RandomMatrix(3, up->output_shape().size(), 31);
  Eigen::MatrixXd grad_input;
  up->Backward(r, &grad_input);
  auto loss = [&](const Eigen::VectorXd& flat) {
    Upsample2dWorkspace local;
    const Eigen::Map<const Eigen::MatrixXd> in(flat.data(), x.rows(), x.cols());
    return up->Forward(in, &local).cwiseProduct(r).sum();
  };
  const GradientCheckResult result =
      CheckGradient(loss, x.reshaped(), grad_input.reshaped(), CheckOptions());
  EXPECT_LT(result.max_relative_error, kConvGradientTolerance)
      << "worst " << result.worst_index << ": analytic " << result.analytic_at_worst
      << " numeric " << result.numeric_at_worst;

  // The float instantiation agrees.
  absl::StatusOr<Upsample2dF> up_f =
      Upsample2dF::Create({.input = {2, 3, 4}, .factor = factor, .mode = mode});
  ASSERT_TRUE(up_f.ok());
  Upsample2dWorkspaceF ws_f;
  Upsample2dWorkspace ws;
  EXPECT_LT((up_f->Forward(x.cast<float>(), &ws_f).cast<double>() - up->Forward(x, &ws))
                .cwiseAbs()
                .maxCoeff(),
            1e-5);
}

INSTANTIATE_TEST_SUITE_P(Modes, Upsample2dGradientTest,
                         ::testing::Combine(::testing::Values(UpsampleMode::kNearest,
                                                              UpsampleMode::kBilinear),
                                            ::testing::Values(1, 2, 3)));

TEST(Upsample2dTest, CreateRejectsInvalidOptions) {
  absl::StatusOr<Upsample2d> up = Upsample2d::Create({.input = {1, 7, 7}, .factor = 0});
  ASSERT_FALSE(up.ok());
  EXPECT_THAT(up.status().message(), HasSubstr("Upsample2d factor must be a positive integer"));
  up = Upsample2d::Create({.input = {0, 7, 7}, .factor = 2});
  ASSERT_FALSE(up.ok());
  EXPECT_THAT(up.status().message(),
              HasSubstr("Upsample2d input channels must be a positive integer"));
  up = Upsample2d::Create({.input = {1 << 12, 1 << 10, 1 << 10}, .factor = 2});
  ASSERT_FALSE(up.ok());
  EXPECT_THAT(up.status().message(), HasSubstr("values per example"));
}


// ConvTranspose2d ----------------------------------------------------------

// Direct scatter: input pixel (c, y, x) adds W[c][co][ky][kx] * value to
// output pixel (co, y s - p + ky, x s - p + kx) when that lies in the output.
Eigen::MatrixXd NaiveConvTranspose(const ConvTranspose2dOptions& o, const ImageShape& out_shape,
                                   const Eigen::VectorXd& params, const Eigen::MatrixXd& input) {
  const int k = o.kernel_size;
  const Eigen::Index weights = Eigen::Index{o.input.channels} * o.out_channels * k * k;
  Eigen::MatrixXd out = Eigen::MatrixXd::Zero(input.rows(), out_shape.size());
  for (Eigen::Index i = 0; i < input.rows(); ++i) {
    for (int co = 0; co < o.out_channels; ++co) {
      if (o.bias) out.row(i).segment(co * out_shape.pixels(), out_shape.pixels()).array() +=
          params(weights + co);
    }
    for (int c = 0; c < o.input.channels; ++c)
      for (int y = 0; y < o.input.height; ++y)
        for (int x = 0; x < o.input.width; ++x)
          for (int co = 0; co < o.out_channels; ++co)
            for (int ky = 0; ky < k; ++ky)
              for (int kx = 0; kx < k; ++kx) {
                const int oy = y * o.stride - o.padding + ky;
                const int ox = x * o.stride - o.padding + kx;
                if (oy < 0 || oy >= out_shape.height || ox < 0 || ox >= out_shape.width) continue;
                out(i, (co * out_shape.height + oy) * out_shape.width + ox) +=
                    params(((c * o.out_channels + co) * k + ky) * k + kx) *
                    input(i, (c * o.input.height + y) * o.input.width + x);
              }
  }
  return out;
}

// in channels, out channels, height, width, kernel, stride, padding,
// output padding, bias.
using TransposeGeometry = std::tuple<int, int, int, int, int, int, int, int, bool>;

ConvTranspose2dOptions MakeTransposeOptions(const TransposeGeometry& g) {
  ConvTranspose2dOptions o;
  o.input = {std::get<0>(g), std::get<2>(g), std::get<3>(g)};
  o.out_channels = std::get<1>(g);
  o.kernel_size = std::get<4>(g);
  o.stride = std::get<5>(g);
  o.padding = std::get<6>(g);
  o.output_padding = std::get<7>(g);
  o.bias = std::get<8>(g);
  return o;
}

class ConvTranspose2dGeometryTest : public ::testing::TestWithParam<TransposeGeometry> {};

TEST_P(ConvTranspose2dGeometryTest, ForwardMatchesDirectScatterAndGradientsMatchDifferences) {
  const ConvTranspose2dOptions options = MakeTransposeOptions(GetParam());
  absl::StatusOr<ConvTranspose2d> conv = ConvTranspose2d::Create(options);
  ASSERT_TRUE(conv.ok()) << conv.status();
  const ImageShape& out_shape = conv->output_shape();
  EXPECT_EQ(out_shape.height, (options.input.height - 1) * options.stride - 2 * options.padding +
                                  options.kernel_size + options.output_padding);
  const Eigen::VectorXd params = RandomVector(conv->num_parameters(), 50);
  const Eigen::MatrixXd input = RandomMatrix(3, conv->input_shape().size(), 51);
  ConvTranspose2dWorkspace ws;
  const Eigen::MatrixXd out = conv->Forward(params, input, &ws);
  const Eigen::MatrixXd expected = NaiveConvTranspose(options, out_shape, params, input);
  ASSERT_EQ(out.cols(), expected.cols());
  EXPECT_LT((out - expected).cwiseAbs().maxCoeff(), 1e-12);

  const Eigen::MatrixXd r = RandomMatrix(3, out_shape.size(), 52);
  Eigen::VectorXd grad_params = Eigen::VectorXd::Zero(conv->num_parameters());
  Eigen::MatrixXd grad_input;
  conv->Backward(params, r, &ws, grad_params, &grad_input);
  auto param_loss = [&](const Eigen::VectorXd& p) {
    ConvTranspose2dWorkspace local;
    return conv->Forward(p, input, &local).cwiseProduct(r).sum();
  };
  const GradientCheckResult by_params =
      CheckGradient(param_loss, params, grad_params, CheckOptions());
  EXPECT_LT(by_params.max_relative_error, kConvGradientTolerance)
      << "worst parameter " << by_params.worst_index << ": analytic "
      << by_params.analytic_at_worst << " numeric " << by_params.numeric_at_worst;
  auto input_loss = [&](const Eigen::VectorXd& flat) {
    ConvTranspose2dWorkspace local;
    const Eigen::Map<const Eigen::MatrixXd> x(flat.data(), input.rows(), input.cols());
    return conv->Forward(params, x, &local).cwiseProduct(r).sum();
  };
  const GradientCheckResult by_input =
      CheckGradient(input_loss, input.reshaped(), grad_input.reshaped(), CheckOptions());
  EXPECT_LT(by_input.max_relative_error, kConvGradientTolerance)
      << "worst input " << by_input.worst_index << ": analytic " << by_input.analytic_at_worst
      << " numeric " << by_input.numeric_at_worst;
  EXPECT_GT(grad_input.norm(), 1e-3);

  // float (OpenBLAS) agrees with double.
  absl::StatusOr<ConvTranspose2dF> conv_f = ConvTranspose2dF::Create(options);
  ASSERT_TRUE(conv_f.ok());
  ConvTranspose2dWorkspaceF ws_f;
  const Eigen::VectorXf params_f = params.cast<float>();
  const Eigen::MatrixXd out_f =
      conv_f->Forward(params_f, input.cast<float>(), &ws_f).cast<double>();
  EXPECT_LT((out_f - expected).cwiseAbs().maxCoeff(),
            kFloatTolerance * expected.cwiseAbs().maxCoeff());
  Eigen::VectorXf grad_params_f = Eigen::VectorXf::Zero(conv_f->num_parameters());
  Eigen::MatrixXf grad_input_f;
  conv_f->Backward(params_f, r.cast<float>(), &ws_f, grad_params_f, &grad_input_f);
  EXPECT_LT((grad_params_f.cast<double>() - grad_params).cwiseAbs().maxCoeff(),
            kFloatTolerance * grad_params.cwiseAbs().maxCoeff());
  EXPECT_LT((grad_input_f.cast<double>() - grad_input).cwiseAbs().maxCoeff(),
            kFloatTolerance * grad_input.cwiseAbs().maxCoeff());
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, ConvTranspose2dGeometryTest,
    ::testing::Values(TransposeGeometry{2, 3, 4, 5, 3, 2, 1, 1, true},  // 2x upsampling
                      TransposeGeometry{1, 2, 3, 3, 4, 2, 1, 0, true},  // DCGAN-style k4 s2 p1
                      TransposeGeometry{3, 1, 5, 4, 3, 1, 1, 0, false}, // stride 1
                      TransposeGeometry{2, 2, 3, 2, 5, 3, 2, 2, true},  // stride 3
                      TransposeGeometry{1, 1, 1, 1, 2, 1, 0, 0, true}));

// The defining property: with the same flat weights (PyTorch's layouts
// agree), ConvTranspose2d is the adjoint of Conv2d: <Conv x, y> = <x, ConvT y>.
TEST(ConvTranspose2dTest, IsTheAdjointOfConv2d) {
  absl::StatusOr<Conv2d> conv = Conv2d::Create(
      {.input = {3, 9, 8}, .out_channels = 4, .kernel_size = 3, .stride = 2, .padding = 1,
       .bias = false});
  ASSERT_TRUE(conv.ok());
  // 9 x 8 -> 5 x 4. Stride 2 maps widths 7 and 8 both to 4, so the way back
  // without output padding gives 9 x 7: output_padding picks between them.
  absl::StatusOr<ConvTranspose2d> up = ConvTranspose2d::Create(
      {.input = conv->output_shape(), .out_channels = 3, .kernel_size = 3, .stride = 2,
       .padding = 1, .output_padding = 0, .bias = false});
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(up->output_shape(), (ImageShape{3, 9, 7}));

  absl::StatusOr<Conv2d> square = Conv2d::Create(
      {.input = {3, 9, 9}, .out_channels = 4, .kernel_size = 3, .stride = 2, .padding = 1,
       .bias = false});
  ASSERT_TRUE(square.ok());
  absl::StatusOr<ConvTranspose2d> square_up = ConvTranspose2d::Create(
      {.input = square->output_shape(), .out_channels = 3, .kernel_size = 3, .stride = 2,
       .padding = 1, .bias = false});
  ASSERT_TRUE(square_up.ok());
  ASSERT_EQ(square_up->output_shape(), square->input_shape());
  ASSERT_EQ(square_up->num_parameters(), square->num_parameters());
  const Eigen::VectorXd w = RandomVector(square->num_parameters(), 60);
  const Eigen::MatrixXd x = RandomMatrix(2, square->input_shape().size(), 61);
  const Eigen::MatrixXd y = RandomMatrix(2, square->output_shape().size(), 62);
  Conv2dWorkspace ws;
  ConvTranspose2dWorkspace ws_t;
  const double lhs = square->Forward(w, x, &ws).cwiseProduct(y).sum();
  const double rhs = square_up->Forward(w, y, &ws_t).cwiseProduct(x).sum();
  EXPECT_NEAR(lhs, rhs, 1e-10 * std::abs(lhs));
}

TEST(ConvTranspose2dTest, CreateRejectsInvalidGeometry) {
  struct Case {
    ConvTranspose2dOptions options;
    const char* message;
  };
  const ConvTranspose2dOptions valid{
      .input = {2, 4, 4}, .out_channels = 3, .kernel_size = 3, .stride = 2, .padding = 1};
  ASSERT_TRUE(ConvTranspose2d::Create(valid).ok());
  std::vector<Case> cases;
  ConvTranspose2dOptions o = valid;
  o.input.channels = 0;
  cases.push_back({o, "ConvTranspose2d input channels must be a positive integer"});
  o = valid;
  o.out_channels = -1;
  cases.push_back({o, "ConvTranspose2d output channels must be a positive integer"});
  o = valid;
  o.kernel_size = 0;
  cases.push_back({o, "ConvTranspose2d kernel size must be a positive integer"});
  o = valid;
  o.stride = 0;
  cases.push_back({o, "ConvTranspose2d stride must be a positive integer"});
  o = valid;
  o.padding = -1;
  cases.push_back({o, "ConvTranspose2d padding must be non-negative"});
  o = valid;
  o.output_padding = 2;
  cases.push_back({o, "ConvTranspose2d output padding must be in [0, stride = 2), got 2"});
  o = valid;
  o.input = {2, 1, 1};
  o.padding = 2;  // (1 - 1) 2 - 4 + 3 = -1
  cases.push_back({o, "ConvTranspose2d output would be -1 x -1"});
  for (const Case& c : cases) {
    absl::StatusOr<ConvTranspose2d> conv = ConvTranspose2d::Create(c.options);
    ASSERT_FALSE(conv.ok()) << c.message;
    EXPECT_EQ(conv.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(conv.status().message(), HasSubstr(c.message));
  }
}

// Composition ---------------------------------------------------------------

// The tail of PEARL's ConvCondGen (pearl.md Sec. 4), shrunk: bn -> upsample
// -> relu -> conv -> sigmoid over one flat parameter vector, backpropagated
// layer by layer and checked end to end by central differences. Shows the
// layers compose on the shared layout and parameter segments.
TEST(ImageLayersTest, GeneratorTailGradientMatchesCentralDifferences) {
  const ImageShape image{3, 3, 3};
  absl::StatusOr<BatchNorm> bn = BatchNorm::Create({.channels = 3, .spatial = 9});
  absl::StatusOr<Upsample2d> up =
      Upsample2d::Create({.input = image, .factor = 2, .mode = UpsampleMode::kBilinear});
  ASSERT_TRUE(bn.ok() && up.ok());
  absl::StatusOr<Conv2d> conv = Conv2d::Create(
      {.input = up->output_shape(), .out_channels = 2, .kernel_size = 3, .padding = 1});
  ASSERT_TRUE(conv.ok());
  const Eigen::Index bn_size = bn->num_parameters();
  const Eigen::Index total = bn_size + conv->num_parameters();
  Eigen::VectorXd params = RandomVector(total, 70);
  const Eigen::MatrixXd z = RandomMatrix(4, image.size(), 71);
  const Eigen::MatrixXd r = RandomMatrix(4, conv->output_shape().size(), 72);

  struct Workspaces {
    BatchNormWorkspace bn;
    Upsample2dWorkspace up;
    Conv2dWorkspace conv;
    Eigen::MatrixXd relu;
    Eigen::MatrixXd out;
  };
  auto forward = [&](const Eigen::VectorXd& p, Workspaces* ws) {
    Eigen::VectorXd running(bn->num_running_statistics());
    bn->InitializeRunningStatistics(running);
    const Eigen::MatrixXd& h = bn->ForwardTraining(p.head(bn_size), z, running, &ws->bn);
    ws->relu = up->Forward(h, &ws->up).cwiseMax(0.0);
    const Eigen::MatrixXd& c = conv->Forward(p.tail(conv->num_parameters()), ws->relu, &ws->conv);
    ws->out = (1.0 / (1.0 + (-c.array()).exp())).matrix();
    return ws->out.cwiseProduct(r).sum();
  };
  Workspaces ws;
  forward(params, &ws);
  Eigen::VectorXd grad = Eigen::VectorXd::Zero(total);
  const Eigen::MatrixXd grad_logits =
      r.cwiseProduct(ws.out).cwiseProduct((1.0 - ws.out.array()).matrix());
  Eigen::MatrixXd grad_relu, grad_up, grad_bn;
  conv->Backward(params.tail(conv->num_parameters()), grad_logits, &ws.conv,
                 grad.tail(conv->num_parameters()), &grad_relu);
  grad_relu = grad_relu.cwiseProduct((ws.relu.array() > 0.0).cast<double>().matrix());
  up->Backward(grad_relu, &grad_up);
  bn->Backward(params.head(bn_size), grad_up, &ws.bn, grad.head(bn_size), &grad_bn);

  auto loss = [&](const Eigen::VectorXd& p) {
    Workspaces local;
    return forward(p, &local);
  };
  const GradientCheckResult result = CheckGradient(loss, params, grad, CheckOptions());
  EXPECT_LT(result.max_relative_error, 1e-5)
      << "worst " << result.worst_index << ": analytic " << result.analytic_at_worst
      << " numeric " << result.numeric_at_worst;
  EXPECT_GT(grad.head(bn_size).norm(), 1e-3);
}

}  // namespace
}  // namespace dpcurator::nn
