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
      g.parameters() = theta + kStep * v;
      const double up = loss();
      g.parameters() = theta - kStep * v;
      const double down = loss();
      g.parameters() = theta;
      const double numeric = (up - down) / (2.0 * kStep);
      const double a = analytic.cast<double>().dot(v.cast<double>());
      EXPECT_NEAR(a, numeric, 2e-3 + 2e-2 * std::abs(numeric))
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
  for (auto architecture : {ImageGeneratorArchitecture::kFullyConnected,
                            ImageGeneratorArchitecture::kConvolutional}) {
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
