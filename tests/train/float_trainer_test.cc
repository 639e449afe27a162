// The float32 trainer path (issue 13): the float feature maps
// against the released artefact's double maps, the float generator against
// the double one, the class-mean losses against the row losses, the shard
// pool, and the loop's independence of the thread count.

#include <atomic>
#include <cmath>
#include <vector>

#include "Eigen/Core"
#include "core/embed/charfn.h"
#include "core/embed/rff.h"
#include "core/train/embedding_trainer.h"
#include "core/train/float_features.h"
#include "core/train/pearl_trainer.h"
#include "core/util/shard_pool.h"
#include "core/train/tabular_generator.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::train {
namespace {

// [ 3 numeric | 4 levels | 2 levels ].
data::FeatureLayout MixedLayout() {
  data::FeatureLayout layout;
  layout.numeric = {{0, 0}, {1, 1}, {2, 2}};
  layout.numeric_dim = 3;
  layout.categorical = {{3, 3, 4}, {4, 7, 2}};
  layout.categorical_dim = 6;
  return layout;
}

data::FeatureLayout CategoricalOnlyLayout() {
  data::FeatureLayout layout;
  layout.categorical = {{0, 0, 3}, {1, 3, 2}};
  layout.categorical_dim = 5;
  return layout;
}

// Rows in the declared domain: numerics in [0, 1], one-hot blocks.
Eigen::MatrixXd EncodedRows(const data::FeatureLayout& layout, int n, uint64_t seed) {
  PublicRng rng(seed);
  Eigen::MatrixXd rows = Eigen::MatrixXd::Zero(n, layout.total_dim());
  for (int i = 0; i < n; ++i) {
    for (const auto& slot : layout.numeric) rows(i, slot.offset) = rng.Uniform();
    for (const auto& slot : layout.categorical) {
      const int level = std::min(slot.levels - 1, static_cast<int>(rng.Uniform() * slot.levels));
      rows(i, slot.offset + level) = 1.0;
    }
  }
  return rows;
}

// The float map uses the artefact's own frequencies and scales: its features
// and gradients match the double map's to float precision.
void CheckAgainstDoubleMap(const embed::FeatureMap& map, const data::FeatureLayout& layout) {
  absl::StatusOr<FloatFeatureMap> float_map = FloatFeatureMap::Create(map, layout);
  ASSERT_TRUE(float_map.ok()) << float_map.status();
  ASSERT_EQ(float_map->output_dim(), map.output_dim());
  const int n = 37;
  const Eigen::MatrixXd rows = EncodedRows(layout, n, 5);
  Eigen::MatrixXd features;
  map.Features(rows, &features);
  Eigen::MatrixXf float_features, scratch;
  float_map->Features(rows.cast<float>(), &float_features, &scratch);
  EXPECT_LT((features - float_features.cast<double>()).cwiseAbs().maxCoeff(), 2e-6);

  // Labels grouped by class, one gradient vector per class.
  Eigen::VectorXi labels(n);
  labels.head(20).setZero();
  labels.tail(17).setOnes();
  const Eigen::MatrixXd grad_by_class = Eigen::MatrixXd::Random(map.output_dim(), 2);
  Eigen::MatrixXd grad_features(n, map.output_dim());
  for (int i = 0; i < n; ++i) grad_features.row(i) = grad_by_class.col(labels(i)).transpose();
  Eigen::MatrixXd grad_encoded;
  map.BackwardFromFeatures(features, grad_features, &grad_encoded);
  Eigen::MatrixXf float_grad;
  float_map->BackwardFromFeatures(float_features, grad_by_class.cast<float>(), labels, &float_grad,
                                  &scratch);
  ASSERT_EQ(float_grad.rows(), grad_encoded.rows());
  ASSERT_EQ(float_grad.cols(), grad_encoded.cols());
  EXPECT_LT((grad_encoded - float_grad.cast<double>()).cwiseAbs().maxCoeff(),
            1e-5 * std::max(1.0, grad_encoded.cwiseAbs().maxCoeff()));
}

TEST(FloatFeatureMapTest, RandomFourierFeaturesMatchTheReleasedMap) {
  for (const data::FeatureLayout& layout : {MixedLayout(), CategoricalOnlyLayout()}) {
    embed::RffOptions options;
    options.num_frequencies = 50;
    options.seed = 9;
    const auto map = embed::RandomFourierFeatureMap::Create(layout, options);
    ASSERT_TRUE(map.ok()) << map.status();
    CheckAgainstDoubleMap(*map, layout);
  }
}

TEST(FloatFeatureMapTest, CharacteristicFunctionFeaturesMatchTheReleasedMap) {
  const data::FeatureLayout layout = MixedLayout();
  embed::CharfnOptions options;
  options.num_frequencies = 40;
  options.length_scale = 0.7;
  options.numeric_length_scale = 0.3;
  options.seed = 4;
  const auto map = embed::CharacteristicFunctionMap::Create(layout, options);
  ASSERT_TRUE(map.ok()) << map.status();
  CheckAgainstDoubleMap(*map, layout);
}

// Any other FeatureMap is evaluated through its own double code.
class SquareMap final : public embed::FeatureMap {
 public:
  explicit SquareMap(int dim) : dim_(dim) {}
  int input_dim() const override { return dim_; }
  int output_dim() const override { return dim_; }
  void Features(const Eigen::MatrixXd& encoded, Eigen::MatrixXd* features) const override {
    *features = 0.5 * encoded.array().square().matrix();
  }
  void Backward(const Eigen::MatrixXd& encoded, const Eigen::MatrixXd& grad_features,
                Eigen::MatrixXd* grad_encoded) const override {
    *grad_encoded = encoded.cwiseProduct(grad_features);
  }
  void BackwardFromFeatures(const Eigen::MatrixXd& features, const Eigen::MatrixXd& grad_features,
                            Eigen::MatrixXd* grad_encoded) const override {
    *grad_encoded = (2.0 * features).cwiseSqrt().cwiseProduct(grad_features);
  }

 private:
  int dim_;
};

TEST(FloatFeatureMapTest, OtherMapsFallBackToTheirDoubleCode) {
  const data::FeatureLayout layout = MixedLayout();
  const SquareMap map(layout.total_dim());
  CheckAgainstDoubleMap(map, layout);
}

TEST(FloatGeneratorTest, MatchesTheDoubleGenerator) {
  const data::FeatureLayout layout = MixedLayout();
  GeneratorOptions options;
  options.noise_dim = 4;
  options.hidden = {16, 8};
  options.seed = 2;
  const TabularGenerator generator = TabularGenerator::Create(layout, 3, options).value();
  const FloatGenerator replica = FloatGenerator::Create(generator).value();
  const int n = 12;
  const Eigen::MatrixXd z = Eigen::MatrixXd::Random(n, 4);
  Eigen::VectorXi labels(n);
  for (int i = 0; i < n; ++i) labels(i) = i % 3;
  GeneratorWorkspace ws;
  FloatGeneratorWorkspace ws_float;
  const Eigen::MatrixXd encoded = generator.Forward(z, labels, &ws);
  const Eigen::MatrixXf encoded_float = replica.Forward(z.cast<float>(), labels, &ws_float);
  EXPECT_LT((encoded - encoded_float.cast<double>()).cwiseAbs().maxCoeff(), 1e-6);
  const Eigen::MatrixXd grad_encoded = Eigen::MatrixXd::Random(n, layout.total_dim());
  Eigen::VectorXd grad = Eigen::VectorXd::Zero(generator.num_parameters());
  Eigen::VectorXf grad_float = Eigen::VectorXf::Zero(replica.num_parameters());
  generator.Backward(grad_encoded, &ws, &grad);
  replica.Backward(grad_encoded.cast<float>(), &ws_float, &grad_float);
  EXPECT_LT((grad - grad_float.cast<double>()).cwiseAbs().maxCoeff(),
            1e-5 * std::max(1.0, grad.cwiseAbs().maxCoeff()));
}

// The class-mean losses are the row losses: same L, and dL/dh of a row of
// class c is dL/dm_c / n_c.
TEST(ClassMeanLossTest, MatchesTheRowLosses) {
  const Eigen::VectorXi labels = StratifiedLabels(Eigen::Vector2d(0.3, 0.7), 20);
  const int k = 5;
  const Eigen::MatrixXd target = 0.1 * Eigen::MatrixXd::Random(2 * k, 2);
  const Eigen::MatrixXd features = 0.1 * Eigen::MatrixXd::Random(labels.size(), 2 * k);
  Eigen::MatrixXd means = Eigen::MatrixXd::Zero(2 * k, 2);
  Eigen::Vector2d counts = Eigen::Vector2d::Zero();
  for (Eigen::Index i = 0; i < labels.size(); ++i) {
    means.col(labels(i)) += features.row(i).transpose();
    counts(labels(i)) += 1;
  }
  means.array().rowwise() /= counts.transpose().array();

  Eigen::MatrixXd grad_rows, grad_means;
  const double row_loss = EmbeddingLoss(target, features, labels, &grad_rows);
  EXPECT_NEAR(EmbeddingMeanLoss(target, means, &grad_means), row_loss, 1e-12);
  for (Eigen::Index i = 0; i < labels.size(); ++i) {
    const int c = labels(i);
    EXPECT_LT((grad_rows.row(i).transpose() - grad_means.col(c) / counts(c)).norm(), 1e-12);
  }

  const Eigen::VectorXd alpha = Eigen::VectorXd::Random(k).cwiseAbs().normalized();
  Eigen::VectorXd f_rows, f_means;
  const double pearl_rows = PearlLoss(target, features, labels, alpha, &f_rows, &grad_rows);
  EXPECT_NEAR(PearlMeanLoss(target, means, alpha, &f_means, &grad_means), pearl_rows, 1e-12);
  EXPECT_LT((f_rows - f_means).norm(), 1e-12);
  for (Eigen::Index i = 0; i < labels.size(); ++i) {
    const int c = labels(i);
    EXPECT_LT((grad_rows.row(i).transpose() - grad_means.col(c) / counts(c)).norm(), 1e-12);
  }
}

TEST(ShardPoolTest, RunsEveryShardOnceAndWaitsForAll) {
  for (const int threads : {1, 2, 3}) {
    ShardPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int round = 0; round < 50; ++round) {
      const int shards = 1 + round % 7;
      std::vector<std::atomic<int>> runs(shards);
      pool.Run(shards, [&](int s) { runs[s].fetch_add(1); });
      for (int s = 0; s < shards; ++s) EXPECT_EQ(runs[s].load(), 1) << threads << " " << s;
    }
  }
}

absl::StatusOr<TrainedGenerator> TrainSmall(int threads) {
  const data::FeatureLayout layout = MixedLayout();
  embed::RffOptions rff;
  rff.num_frequencies = 64;
  rff.seed = 3;
  const auto map = embed::RandomFourierFeatureMap::Create(layout, rff).value();
  Eigen::MatrixXd features;
  map.Features(EncodedRows(layout, 200, 8), &features);
  embed::EmbeddingTarget target;
  target.class_means = features.topRows(100).colwise().mean().transpose();
  target.class_means.conservativeResize(Eigen::NoChange, 2);
  target.class_means.col(1) = features.bottomRows(100).colwise().mean().transpose();
  target.class_weights = Eigen::Vector2d(0.4, 0.6);
  EmbeddingTrainerOptions options;
  options.steps = 40;
  options.batch_size = 512;
  options.learning_rate = 1e-2;
  options.generator.noise_dim = 4;
  options.generator.hidden = {32, 32};
  options.threads = threads;
  return TrainEmbeddingGenerator(layout, map, target, options);
}

// One shard or two: the same training up to float rounding of the shard
// sums; the same thread count twice: the same bits.
TEST(RunGeneratorLoopTest, ThreadCountChangesOnlyRounding) {
  const auto one = TrainSmall(1);
  const auto two = TrainSmall(2);
  const auto again = TrainSmall(2);
  ASSERT_TRUE(one.ok() && two.ok() && again.ok());
  EXPECT_EQ(two->generator.parameters(), again->generator.parameters());
  const Eigen::VectorXd& a = one->generator.parameters();
  const Eigen::VectorXd& b = two->generator.parameters();
  EXPECT_LT((a - b).cwiseAbs().maxCoeff(), 1e-3 * a.cwiseAbs().maxCoeff());
  EXPECT_NEAR(one->final_loss, two->final_loss, 1e-3 * one->final_loss + 1e-9);
}

}  // namespace
}  // namespace dpcurator::train
