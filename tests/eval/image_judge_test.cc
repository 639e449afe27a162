// The shared image judge (core/eval/image_judge.h): the bilinear resize
// against hand-computed values, the judge on a separable toy problem (it
// must learn it) and on shuffled labels (it must not), and its input checks.

#include "core/eval/image_judge.h"

#include <vector>

#include <gtest/gtest.h>

#include "core/util/public_rng.h"

namespace dpcurator::eval {
namespace {

TEST(ResizeImagesTest, SameSizeIsACopyAndUpsamplingInterpolates) {
  Eigen::MatrixXf images(2, 4);
  images << 0.0f, 1.0f, 2.0f, 3.0f,  // [[0, 1], [2, 3]]
      4.0f, 4.0f, 4.0f, 4.0f;
  EXPECT_TRUE(ResizeImages(images, 2, 2, 2).isApprox(images));
  const Eigen::MatrixXf up = ResizeImages(images, 2, 2, 4);
  ASSERT_EQ(up.cols(), 16);
  // Output pixel (y, x) samples source ((y + .5)/2 - .5, (x + .5)/2 - .5),
  // clamped: the corners copy the source corners, (1, 1) is at source
  // (0.25, 0.25): 0.75^2 * 0 + 0.75*0.25 * (1 + 2) + 0.25^2 * 3 = 0.75.
  EXPECT_FLOAT_EQ(up(0, 0), 0.0f);
  EXPECT_FLOAT_EQ(up(0, 3), 1.0f);
  EXPECT_FLOAT_EQ(up(0, 12), 2.0f);
  EXPECT_FLOAT_EQ(up(0, 15), 3.0f);
  EXPECT_FLOAT_EQ(up(0, 1 * 4 + 1), 0.75f);
  EXPECT_TRUE((up.row(1).array() == 4.0f).all());
}

// Class c's images are bright in the c-th quarter of an 8 x 8 image.
void ToyImages(int n, bool shuffle_labels, uint64_t seed, Eigen::MatrixXf* images,
               std::vector<int>* labels) {
  PublicRng rng(seed);
  images->resize(n, 64);
  labels->resize(n);
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng.UniformInt(4));
    for (int p = 0; p < 64; ++p) {
      const int quarter = (p / 8 < 4 ? 0 : 2) + (p % 8 < 4 ? 0 : 1);
      (*images)(i, p) = static_cast<float>((quarter == c ? 0.7 : 0.1) + 0.2 * rng.Uniform());
    }
    (*labels)[i] = shuffle_labels ? static_cast<int>(rng.UniformInt(4)) : c;
  }
}

TEST(JudgeImagesTest, LearnsASeparableProblemAndNotShuffledLabels) {
  Eigen::MatrixXf train, test;
  std::vector<int> train_labels, test_labels;
  ToyImages(400, false, 1, &train, &train_labels);
  ToyImages(200, false, 2, &test, &test_labels);
  ImageJudgeOptions options;
  options.seeds = 2;
  options.resize = 0;
  options.epochs = 3;
  options.lr_iterations = 50;
  int progress_calls = 0;
  options.progress = [&](int, double) { ++progress_calls; };
  auto judged = JudgeImages(train, train_labels, test, test_labels, 8, 8, 4, options);
  ASSERT_TRUE(judged.ok()) << judged.status();
  EXPECT_EQ(progress_calls, 2);
  ASSERT_EQ(judged->cnn_accuracy.size(), 2u);
  EXPECT_GT(judged->cnn_mean, 0.9);
  ASSERT_TRUE(judged->lr_accuracy.has_value());
  EXPECT_GT(*judged->lr_accuracy, 0.9);

  std::vector<int> shuffled;
  ToyImages(400, true, 1, &train, &shuffled);
  auto chance = JudgeImages(train, shuffled, test, test_labels, 8, 8, 4, options);
  ASSERT_TRUE(chance.ok()) << chance.status();
  EXPECT_LT(chance->cnn_mean, 0.5);  // 4 classes: chance is 0.25
}

TEST(JudgeImagesTest, RefusesMismatchedShapesAndLabels) {
  Eigen::MatrixXf train, test;
  std::vector<int> train_labels, test_labels;
  ToyImages(20, false, 3, &train, &train_labels);
  ToyImages(10, false, 4, &test, &test_labels);
  ImageJudgeOptions options;
  options.seeds = 1;
  options.resize = 0;
  EXPECT_EQ(JudgeImages(train, train_labels, test, test_labels, 7, 9, 4, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  test_labels[3] = 4;
  EXPECT_EQ(JudgeImages(train, train_labels, test, test_labels, 8, 8, 4, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  train_labels.pop_back();
  EXPECT_EQ(JudgeImages(train, train_labels, test, test_labels, 8, 8, 4, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dpcurator::eval
