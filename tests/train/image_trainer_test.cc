// The image trainers (issue 14 item 2) on toy 8 x 8 images: DP-MERF's
// one-shot and per-step fits and PEARL's reduce their loss, runs are
// deterministic given the seeds, and the minibatch step's release returns
// the exact class means when no noise is added.

#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "core/data/schema.h"
#include "core/embed/charfn.h"
#include "core/embed/rff.h"
#include "core/privacy/noise_source.h"
#include "core/release/encoded_rows.h"
#include "core/release/rff_embedding.h"
#include "core/train/image_trainer.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::train {
namespace {

constexpr int kSide = 8;
constexpr int kPixels = kSide * kSide;
constexpr int kClasses = 3;

data::FeatureLayout PixelLayout() {
  data::FeatureLayout layout;
  for (int i = 0; i < kPixels; ++i) layout.numeric.push_back({i, i});
  layout.numeric_dim = kPixels;
  return layout;
}

// Class c: a bright horizontal band in rows [2c + 1, 2c + 3), dim noise.
void ToyImages(int n, Eigen::MatrixXd* images, Eigen::VectorXi* labels) {
  PublicRng rng(11);
  images->resize(n, kPixels);
  labels->resize(n);
  for (int i = 0; i < n; ++i) {
    const int c = i % kClasses;
    (*labels)(i) = c;
    for (int p = 0; p < kPixels; ++p) {
      const int row = p / kSide;
      const bool band = row >= 2 * c + 1 && row < 2 * c + 3;
      (*images)(i, p) = (band ? 0.8 : 0.1) + 0.1 * rng.Uniform();
    }
  }
}

embed::EmbeddingTarget ExactTarget(const embed::FeatureMap& map) {
  Eigen::MatrixXd images, features;
  Eigen::VectorXi labels;
  ToyImages(300, &images, &labels);
  map.Features(images, &features);
  embed::EmbeddingTarget target;
  target.class_means = Eigen::MatrixXd::Zero(map.output_dim(), kClasses);
  Eigen::VectorXd counts = Eigen::VectorXd::Zero(kClasses);
  for (int i = 0; i < labels.size(); ++i) {
    target.class_means.col(labels(i)) += features.row(i).transpose();
    counts(labels(i)) += 1;
  }
  target.class_means.array().rowwise() /= counts.transpose().array();
  target.class_weights = counts / counts.sum();
  return target;
}

ImageTrainerOptions SmallOptions(ImageGeneratorArchitecture architecture,
                                 std::vector<double>* losses) {
  ImageTrainerOptions options;
  options.generator.architecture = architecture;
  options.generator.height = kSide;
  options.generator.width = kSide;
  options.steps = 120;
  options.batch_size = 60;
  options.threads = 2;
  options.progress_every = 1;
  options.progress = [losses](int, double loss) { losses->push_back(loss); };
  return options;
}

double MeanOf(const std::vector<double>& v, size_t begin, size_t end) {
  double s = 0.0;
  for (size_t i = begin; i < end; ++i) s += v[i];
  return s / static_cast<double>(end - begin);
}

absl::StatusOr<embed::RandomFourierFeatureMap> ToyRff() {
  embed::RffOptions rff;
  rff.num_frequencies = 100;
  rff.length_scale = 2.0;
  rff.seed = 5;
  return embed::RandomFourierFeatureMap::Create(PixelLayout(), rff);
}

TEST(ImageTrainerTest, MerfLossDecreasesForBothGenerators) {
  absl::StatusOr<embed::RandomFourierFeatureMap> map = ToyRff();
  ASSERT_TRUE(map.ok()) << map.status();
  const embed::EmbeddingTarget target = ExactTarget(*map);
  for (auto architecture : {ImageGeneratorArchitecture::kFullyConnected,
                            ImageGeneratorArchitecture::kConvolutional}) {
    std::vector<double> losses;
    absl::StatusOr<TrainedImageGenerator> trained =
        TrainImageMerf(PixelLayout(), *map, target, SmallOptions(architecture, &losses));
    ASSERT_TRUE(trained.ok()) << trained.status();
    ASSERT_EQ(losses.size(), 120u);
    EXPECT_LT(MeanOf(losses, 100, 120), 0.3 * MeanOf(losses, 0, 10))
        << ImageGeneratorArchitectureName(architecture);
  }
}

TEST(ImageTrainerTest, DeterministicGivenSeeds) {
  absl::StatusOr<embed::RandomFourierFeatureMap> map = ToyRff();
  ASSERT_TRUE(map.ok());
  const embed::EmbeddingTarget target = ExactTarget(*map);
  std::vector<double> l1, l2, l3;
  ImageTrainerOptions options = SmallOptions(ImageGeneratorArchitecture::kConvolutional, &l1);
  options.steps = 20;
  auto a = TrainImageMerf(PixelLayout(), *map, target, options);
  options.progress = [&l2](int, double loss) { l2.push_back(loss); };
  auto b = TrainImageMerf(PixelLayout(), *map, target, options);
  options.seed = 2;
  options.progress = [&l3](int, double loss) { l3.push_back(loss); };
  auto c = TrainImageMerf(PixelLayout(), *map, target, options);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(a->generator.parameters(), b->generator.parameters());
  EXPECT_NE(a->generator.parameters(), c->generator.parameters());
}

TEST(ImageTrainerTest, PearlLossDecreases) {
  embed::CharfnOptions charfn;
  charfn.num_frequencies = 100;
  charfn.length_scale = 2.0;
  charfn.seed = 6;
  absl::StatusOr<embed::CharacteristicFunctionMap> map =
      embed::CharacteristicFunctionMap::Create(PixelLayout(), charfn);
  ASSERT_TRUE(map.ok()) << map.status();
  const embed::EmbeddingTarget target = ExactTarget(*map);
  std::vector<double> losses;
  ImagePearlOptions options;
  static_cast<ImageTrainerOptions&>(options) =
      SmallOptions(ImageGeneratorArchitecture::kConvolutional, &losses);
  absl::StatusOr<TrainedImageGenerator> trained =
      TrainImagePearl(PixelLayout(), *map, target, options);
  ASSERT_TRUE(trained.ok()) << trained.status();
  EXPECT_LT(MeanOf(losses, 100, 120), 0.3 * MeanOf(losses, 0, 10));
}

TEST(ImageTrainerTest, PerStepTargetsAreFollowed) {
  absl::StatusOr<embed::RandomFourierFeatureMap> map = ToyRff();
  ASSERT_TRUE(map.ok());
  const embed::EmbeddingTarget target = ExactTarget(*map);
  PublicRng rng(3);
  std::vector<int> asked;
  // Each step's target: the exact one plus fresh noise (a stand-in for a
  // noisy minibatch release).
  const StepTarget step_target = [&](int step) -> absl::StatusOr<embed::EmbeddingTarget> {
    asked.push_back(step);
    embed::EmbeddingTarget noisy = target;
    for (Eigen::Index i = 0; i < noisy.class_means.size(); ++i) {
      noisy.class_means.data()[i] += 0.01 * rng.Normal();
    }
    return noisy;
  };
  std::vector<double> losses;
  auto trained = TrainImageMerfPerStep(
      PixelLayout(), *map, step_target,
      SmallOptions(ImageGeneratorArchitecture::kFullyConnected, &losses));
  ASSERT_TRUE(trained.ok()) << trained.status();
  ASSERT_EQ(asked.size(), 120u);
  EXPECT_EQ(asked.front(), 1);
  EXPECT_EQ(asked.back(), 120);
  EXPECT_LT(MeanOf(losses, 100, 120), 0.5 * MeanOf(losses, 0, 10));
}

TEST(ImageTrainerTest, PoissonBatchReleaseIsTheClassMeansWithoutNoise) {
  data::Schema::Builder builder;
  for (int p = 0; p < kPixels; ++p) builder.AddNumeric(absl::StrCat("p", p), 0.0, 1.0);
  builder.AddCategorical("label", {"a", "b", "c"});
  builder.SetLabel("label");
  absl::StatusOr<data::Schema> schema = builder.Build();
  ASSERT_TRUE(schema.ok()) << schema.status();
  release::EncodedRows rows;
  rows.layout = data::FeatureLayout::ForFeatures(*schema);
  ASSERT_EQ(rows.layout.total_dim(), kPixels);
  ToyImages(90, &rows.features, &rows.labels);
  rows.num_classes = kClasses;
  release::RffEmbeddingKind::Params params;
  params.num_frequencies = 50;
  params.length_scale = 2.0;
  params.seed = 9;
  absl::StatusOr<release::RffEmbeddingKind::Params> resolved =
      release::RffEmbeddingKind::Resolve(params, *schema);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  // q = 1 with no noise: every row, exact per-class means.
  privacy::ZeroNoiseSource zero;
  absl::StatusOr<embed::EmbeddingTarget> exact =
      ReleasePoissonBatchTarget(rows, *resolved, 1.0, 1.0, &zero);
  ASSERT_TRUE(exact.ok()) << exact.status();
  embed::RffOptions rff;
  rff.num_frequencies = 50;
  rff.length_scale = 2.0;
  rff.seed = 9;
  absl::StatusOr<embed::RandomFourierFeatureMap> map =
      release::RffEmbeddingKind::FeatureMap(rows.layout, rff);
  ASSERT_TRUE(map.ok()) << map.status();
  Eigen::MatrixXd features;
  map->Features(rows.features, &features);
  for (int c = 0; c < kClasses; ++c) {
    Eigen::VectorXd mean = Eigen::VectorXd::Zero(features.cols());
    int count = 0;
    for (int i = 0; i < rows.labels.size(); ++i) {
      if (rows.labels(i) == c) {
        mean += features.row(i).transpose();
        ++count;
      }
    }
    EXPECT_TRUE(exact->class_means.col(c).isApprox(mean / count, 1e-9)) << "class " << c;
  }
  // A real sample at q = 0.5 with noise has the same shape.
  privacy::SeededNoiseSource noise(4);
  absl::StatusOr<embed::EmbeddingTarget> sampled =
      ReleasePoissonBatchTarget(rows, *resolved, 0.5, 2.0, &noise);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  EXPECT_EQ(sampled->class_means.rows(), exact->class_means.rows());
  EXPECT_FALSE(sampled->class_means.isApprox(exact->class_means, 1e-3));
  EXPECT_FALSE(ReleasePoissonBatchTarget(rows, *resolved, 0.0, 2.0, &noise).ok());
}

}  // namespace
}  // namespace dpcurator::train
