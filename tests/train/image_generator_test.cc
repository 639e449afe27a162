// The image generators (issue 14 item 3): hand-written gradients against
// finite differences for both architectures in BN training mode, shapes,
// the thread pool's transparency, eval mode, and the model-file round trip.

#include <cmath>
#include <vector>

#include "Eigen/Core"
#include "core/train/image_generator.h"
#include "core/util/public_rng.h"
#include "core/util/shard_pool.h"
#include "gtest/gtest.h"

namespace dpcurator::train {
namespace {

ImageGeneratorOptions SmallOptions(ImageGeneratorArchitecture architecture) {
  ImageGeneratorOptions options;
  options.architecture = architecture;
  options.code_dim = 3;
  options.num_classes = 3;
  // 8 x 8: the convolutional trunk is 16 x 2 x 2, small enough for finite
  // differences over many coordinates.
  options.height = 8;
  options.width = 8;
  options.seed = 7;
  return options;
}

Eigen::MatrixXf RandomMatrix(Eigen::Index rows, Eigen::Index cols, uint64_t seed) {
  PublicRng rng(seed);
  Eigen::MatrixXf m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(rng.Normal());
  return m;
}

// L = sum(R o G(z, y)) in training mode: its gradient is Backward(R).
// Central differences in float with a step large enough for float rounding,
// over every coordinate of the conv/BN blocks and a sample of the dense ones.
void CheckGradients(ImageGeneratorArchitecture architecture) {
  absl::StatusOr<ImageGenerator> made = ImageGenerator::Create(SmallOptions(architecture));
  ASSERT_TRUE(made.ok()) << made.status();
  ImageGenerator& g = *made;
  // A batch large enough that BN's batch statistics are not dominated by a
  // single row (with 7 rows the loss is so curved that float central
  // differences need h ~ 1e-4, where rounding takes over).
  constexpr int n = 32;
  const Eigen::MatrixXf code = RandomMatrix(n, g.code_dim(), 1);
  Eigen::VectorXi labels(n);
  for (int i = 0; i < n; ++i) labels(i) = i % 3;
  const Eigen::MatrixXf weights = RandomMatrix(n, g.image_size(), 2);
  ImageGeneratorWorkspace ws;
  auto loss = [&]() {
    const Eigen::MatrixXf& images = g.Forward(code, labels, /*training=*/true, &ws);
    return (images.cast<double>().array() * weights.cast<double>().array()).sum();
  };
  loss();
  Eigen::VectorXf analytic = Eigen::VectorXf::Zero(g.num_parameters());
  g.Backward(weights, &ws, analytic);

  // Directional derivatives: the forward pass is float, so one coordinate's
  // central difference drowns in rounding where the derivative is small;
  // along a direction v touching many coordinates the signal is
  // |grad . v|, far above rounding. Every slice of the parameter vector
  // (so every layer: dense, BN, conv) gets its own random +-1 directions.
  const Eigen::VectorXf theta = g.parameters();
  const Eigen::Index p = g.num_parameters();
  constexpr int kSlices = 12;
  constexpr float kStep = 1e-3f;
  PublicRng pick(3);
  for (int slice = 0; slice < kSlices; ++slice) {
    const Eigen::Index begin = p * slice / kSlices, end = p * (slice + 1) / kSlices;
    for (int rep = 0; rep < 2; ++rep) {
      Eigen::VectorXf v = Eigen::VectorXf::Zero(p);
      for (Eigen::Index i = begin; i < end; ++i) v(i) = pick.Uniform() < 0.5 ? -1.0f : 1.0f;
      v /= std::sqrt(static_cast<float>(end - begin));
      auto central = [&](float step) {
        g.parameters() = theta + step * v;
        const double up = loss();
        g.parameters() = theta - step * v;
        const double down = loss();
        g.parameters() = theta;
        return (up - down) / (2.0 * step);
      };
      const double numeric = central(kStep);
      // The float forward's rounding and ReLU kinks make the difference
      // itself uncertain; its change between steps h and 2h estimates that
      // (the wide generator sums more terms, so it needs it).
      const double spread = std::abs(central(2 * kStep) - numeric);
      const double a = analytic.cast<double>().dot(v.cast<double>());
      EXPECT_NEAR(a, numeric, 2e-3 + 2e-2 * std::abs(numeric) + spread)
          << ImageGeneratorArchitectureName(architecture) << " slice " << slice << " of "
          << kSlices;
    }
  }
}

TEST(ImageGeneratorTest, FullyConnectedGradientMatchesFiniteDifferences) {
  CheckGradients(ImageGeneratorArchitecture::kFullyConnected);
}

TEST(ImageGeneratorTest, ConvolutionalGradientMatchesFiniteDifferences) {
  CheckGradients(ImageGeneratorArchitecture::kConvolutional);
}

TEST(ImageGeneratorTest, WideConvolutionalGradientMatchesFiniteDifferences) {
  CheckGradients(ImageGeneratorArchitecture::kConvolutionalWide);
}

TEST(ImageGeneratorTest, ShapesAndPixelRangeAtFashionMnistSize) {
  for (auto architecture : {ImageGeneratorArchitecture::kFullyConnected,
                            ImageGeneratorArchitecture::kConvolutional}) {
    ImageGeneratorOptions options;
    options.architecture = architecture;
    absl::StatusOr<ImageGenerator> g = ImageGenerator::Create(options);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->image_size(), 784);
    Eigen::VectorXi labels(20);
    for (int i = 0; i < 20; ++i) labels(i) = i % 10;
    PublicRng rng(5);
    const Eigen::MatrixXf images = g->Sample(labels, &rng);
    ASSERT_EQ(images.rows(), 20);
    ASSERT_EQ(images.cols(), 784);
    EXPECT_GE(images.minCoeff(), 0.0f);
    EXPECT_LE(images.maxCoeff(), 1.0f);
  }
  // ConvCondGen's parameter count (PyTorch: fc1 15*200+200, bn1 400, fc2
  // 200*784+784, bn2 1568, conv1 16*8*25+8, conv2 8*25+1).
  absl::StatusOr<ImageGenerator> conv = ImageGenerator::Create({});
  ASSERT_TRUE(conv.ok());
  EXPECT_EQ(conv->num_parameters(), 3200 + 400 + 157584 + 1568 + 3208 + 201);
  // conv-wide: fc2 200*1568+1568, bn2 3136, conv1 32*16*25+16, conv2 16*25+1.
  ImageGeneratorOptions wide_options;
  wide_options.architecture = ImageGeneratorArchitecture::kConvolutionalWide;
  absl::StatusOr<ImageGenerator> wide = ImageGenerator::Create(wide_options);
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->num_parameters(), 3200 + 400 + 315168 + 3136 + 12816 + 401);
  for (auto architecture :
       {ImageGeneratorArchitecture::kFullyConnected, ImageGeneratorArchitecture::kConvolutional,
        ImageGeneratorArchitecture::kConvolutionalWide}) {
    EXPECT_EQ(ParseImageGeneratorArchitecture(ImageGeneratorArchitectureName(architecture)).value(),
              architecture);
  }
  EXPECT_FALSE(ParseImageGeneratorArchitecture("wide").ok());
}

TEST(ImageGeneratorTest, PoolGivesTheSameImagesAndGradients) {
  ImageGeneratorOptions options = SmallOptions(ImageGeneratorArchitecture::kConvolutional);
  options.height = 12;
  options.width = 16;
  absl::StatusOr<ImageGenerator> a = ImageGenerator::Create(options);
  absl::StatusOr<ImageGenerator> b = ImageGenerator::Create(options);
  ASSERT_TRUE(a.ok() && b.ok());
  constexpr int n = 90;  // several 32-row chunks per shard
  const Eigen::MatrixXf code = RandomMatrix(n, options.code_dim, 4);
  Eigen::VectorXi labels(n);
  for (int i = 0; i < n; ++i) labels(i) = i * 3 / n;
  const Eigen::MatrixXf grad = RandomMatrix(n, a->image_size(), 6);
  ShardPool pool(2);
  ImageGeneratorWorkspace wa, wb;
  const Eigen::MatrixXf ia = a->Forward(code, labels, true, &wa);
  const Eigen::MatrixXf ib = b->Forward(code, labels, true, &wb, &pool);
  EXPECT_TRUE(ia.isApprox(ib, 1e-6f));
  Eigen::VectorXf ga = Eigen::VectorXf::Zero(a->num_parameters());
  Eigen::VectorXf gb = Eigen::VectorXf::Zero(b->num_parameters());
  a->Backward(grad, &wa, ga);
  b->Backward(grad, &wb, gb, &pool);
  EXPECT_TRUE(ga.isApprox(gb, 1e-5f));
}

TEST(ImageGeneratorTest, FromParametersRebuildsTheModel) {
  for (auto architecture :
       {ImageGeneratorArchitecture::kFullyConnected, ImageGeneratorArchitecture::kConvolutional,
        ImageGeneratorArchitecture::kConvolutionalWide}) {
    const ImageGeneratorOptions options = SmallOptions(architecture);
    absl::StatusOr<ImageGenerator> g = ImageGenerator::Create(options);
    ASSERT_TRUE(g.ok());
    // A training pass moves the running statistics away from (0, 1).
    ImageGeneratorWorkspace ws;
    Eigen::VectorXi labels(6);
    labels << 0, 0, 1, 1, 2, 2;
    g->Forward(RandomMatrix(6, options.code_dim, 8), labels, true, &ws);
    absl::StatusOr<ImageGenerator> copy =
        ImageGenerator::FromParameters(options, g->parameters(), g->running_statistics());
    ASSERT_TRUE(copy.ok()) << copy.status();
    PublicRng r1(9), r2(9);
    EXPECT_EQ(g->Sample(labels, &r1), copy->Sample(labels, &r2));

    Eigen::VectorXf short_params = g->parameters().head(g->num_parameters() - 1);
    EXPECT_FALSE(
        ImageGenerator::FromParameters(options, short_params, g->running_statistics()).ok());
    Eigen::VectorXf bad = g->parameters();
    bad(0) = std::nanf("");
    EXPECT_FALSE(ImageGenerator::FromParameters(options, bad, g->running_statistics()).ok());
  }
}

// The generator's own direct convolutions and parameter layout against the
// composition of core/nn layers (dense via Eigen, nn::BatchNormF,
// nn::Upsample2dF, nn::Conv2dF's im2col path) in eval mode.
TEST(ImageGeneratorTest, ConvolutionalMatchesComposedNnLayers) {
  for (auto [architecture, widen] :
       {std::pair{ImageGeneratorArchitecture::kConvolutional, 1},
        std::pair{ImageGeneratorArchitecture::kConvolutionalWide, 2}}) {
  ImageGeneratorOptions options = SmallOptions(architecture);
  absl::StatusOr<ImageGenerator> made = ImageGenerator::Create(options);
  ASSERT_TRUE(made.ok());
  ImageGenerator& g = *made;
  // Perturb BN parameters and running statistics away from the identity.
  Eigen::VectorXf params = g.parameters();
  Eigen::VectorXf running = g.running_statistics();
  PublicRng rng(12);
  for (Eigen::Index i = 0; i < running.size(); ++i) {
    running(i) = static_cast<float>(0.5 + rng.Uniform());
  }
  absl::StatusOr<ImageGenerator> rebuilt = ImageGenerator::FromParameters(options, params, running);
  ASSERT_TRUE(rebuilt.ok());
  constexpr int n = 5;
  const Eigen::MatrixXf code = RandomMatrix(n, options.code_dim, 13);
  Eigen::VectorXi labels(n);
  labels << 0, 1, 2, 1, 0;
  ImageGeneratorWorkspace ws;
  const Eigen::MatrixXf images = rebuilt->Forward(code, labels, /*training=*/false, &ws);

  // Reference, walking the documented flat layout.
  const int in = options.code_dim + options.num_classes;
  Eigen::MatrixXf x = Eigen::MatrixXf::Zero(n, in);
  x.leftCols(options.code_dim) = code;
  for (int i = 0; i < n; ++i) x(i, options.code_dim + labels(i)) = 1.0f;
  Eigen::Index offset = 0, run = 0;
  auto dense = [&](const Eigen::MatrixXf& a, int fan_out) {
    const Eigen::Map<const Eigen::MatrixXf> w(params.data() + offset, a.cols(), fan_out);
    const Eigen::VectorXf b = params.segment(offset + a.cols() * fan_out, fan_out);
    offset += a.cols() * fan_out + fan_out;
    Eigen::MatrixXf h = a * w;
    h.rowwise() += b.transpose();
    return h;
  };
  auto bn = [&](const Eigen::MatrixXf& h) {
    nn::BatchNormOptions bo;
    bo.channels = static_cast<int>(h.cols());
    auto layer = nn::BatchNormF::Create(bo);
    nn::BatchNormWorkspaceF bws;
    Eigen::MatrixXf y = layer->ForwardInference(params.segment(offset, 2 * h.cols()), h,
                                                running.segment(run, 2 * h.cols()), &bws);
    offset += 2 * h.cols();
    run += 2 * h.cols();
    return y;
  };
  Eigen::MatrixXf h = bn(dense(x, 200)).cwiseMax(0.0f);
  h = bn(dense(h, widen * 16 * 2 * 2));
  auto up = [](const Eigen::MatrixXf& a, nn::ImageShape shape) {
    auto layer = nn::Upsample2dF::Create({shape, 2, nn::UpsampleMode::kBilinear});
    nn::Upsample2dWorkspaceF uws;
    return Eigen::MatrixXf(layer->Forward(a, &uws));
  };
  auto conv = [&](const Eigen::MatrixXf& a, nn::ImageShape shape, int out) {
    nn::Conv2dOptions co;
    co.input = shape;
    co.out_channels = out;
    co.kernel_size = 5;
    co.padding = 2;
    auto layer = nn::Conv2dF::Create(co);
    nn::Conv2dWorkspaceF cws;
    Eigen::MatrixXf y = layer->Forward(params.segment(offset, layer->num_parameters()), a, &cws);
    offset += layer->num_parameters();
    return y;
  };
  h = up(h, {widen * 16, 2, 2});
  h = conv(h, {widen * 16, 4, 4}, widen * 8).cwiseMax(0.0f);
  h = up(h, {widen * 8, 4, 4});
  h = conv(h, {widen * 8, 8, 8}, 1);
  EXPECT_EQ(offset, params.size());
  const Eigen::MatrixXf expected =
      h.unaryExpr([](float v) { return 1.0f / (1.0f + std::exp(-v)); });
  EXPECT_LT((images - expected).cwiseAbs().maxCoeff(), 1e-5f)
      << ImageGeneratorArchitectureName(architecture);
  }
}

TEST(ImageGeneratorTest, RejectsBadOptions) {
  ImageGeneratorOptions options;
  options.height = 30;  // not a multiple of 4
  EXPECT_FALSE(ImageGenerator::Create(options).ok());
  options.architecture = ImageGeneratorArchitecture::kFullyConnected;
  EXPECT_TRUE(ImageGenerator::Create(options).ok());
  options.code_dim = 0;
  EXPECT_FALSE(ImageGenerator::Create(options).ok());
  EXPECT_TRUE(ParseImageGeneratorArchitecture("conv").ok());
  EXPECT_FALSE(ParseImageGeneratorArchitecture("gan").ok());
}

}  // namespace
}  // namespace dpcurator::train
