// PEARL trainer (Liew et al. 2022, Alg. 1; pearl.md 1.2 F-H): the loss and
// its two hand-written gradients (generator side through the alpha-weighted
// charfn features, critic side through the softmax weights) against central
// differences, the critic's weights, and training on a small synthetic
// problem released with zero noise. Plus a timing run on an Adult-like
// layout (reported, not asserted).

#include "core/train/pearl_trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "Eigen/Core"
#include "core/embed/charfn.h"
#include "core/embed/labelled_embedding.h"
#include "core/nn/gradient_check.h"
#include "core/privacy/noise_source.h"
#include "core/train/embedding_trainer.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"
#include "tests/pearl/test_util.h"

namespace dpcurator::train {
namespace {

using pearl_testing::MakeLayout;
using pearl_testing::RandomEncodedRows;

constexpr double kGradientTolerance = 1e-4;

embed::CharacteristicFunctionMap MakeTrainerMap(const data::FeatureLayout& layout, int k,
                                         double length_scale, uint64_t seed) {
  embed::CharfnOptions options;
  options.num_frequencies = k;
  options.length_scale = length_scale;
  options.seed = seed;
  return embed::CharacteristicFunctionMap::Create(layout, options).value();
}

// A critic moved away from uniform weights: s = s0 + random perturbation.
PearlCritic PerturbedCritic(const embed::CharacteristicFunctionMap& map, PublicRng* rng,
                            double scale) {
  PearlCritic critic = PearlCritic::Create(map.frequencies(), map.length_scale()).value();
  Eigen::VectorXd s(map.input_dim());
  rng->FillNormal(s);
  s = critic.base_precisions() + scale * s;
  EXPECT_TRUE(critic.SetPrecisions(s).ok());
  return critic;
}

TEST(PearlLossTest, UniformWeightsGiveTheEmbeddingLoss) {
  PublicRng rng(1);
  const auto layout = MakeLayout(2, {3});
  const auto map = MakeTrainerMap(layout, 24, 0.8, 2);
  const Eigen::VectorXi labels = StratifiedLabels(Eigen::Vector3d(0.2, 0.5, 0.3), 20);
  Eigen::MatrixXd features, target(map.output_dim(), 3);
  map.Features(RandomEncodedRows(layout, labels.size(), &rng), &features);
  rng.FillNormal(target);
  target *= 0.1;
  const Eigen::VectorXd uniform = Eigen::VectorXd::Constant(24, 1.0 / 24);
  Eigen::VectorXd f;
  Eigen::MatrixXd grad_pearl, grad_merf;
  const double pearl = PearlLoss(target, features, labels, uniform, &f, &grad_pearl);
  const double merf = EmbeddingLoss(target, features, labels, &grad_merf);
  EXPECT_NEAR(pearl, merf, 1e-12 * merf);
  EXPECT_LE((grad_pearl - grad_merf).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_NEAR(uniform.dot(f), pearl, 1e-12);
  EXPECT_TRUE((f.array() >= 0).all());
}

// dL/dY through the alpha-weighted features: PearlLoss's dL/dh, then the
// charfn Backward (pearl.md 1.2 G), against central differences on Y.
TEST(PearlLossTest, GeneratorGradientMatchesCentralDifferences) {
  PublicRng rng(3);
  const auto layout = MakeLayout(3, {2, 4});
  const auto map = MakeTrainerMap(layout, 17, 1.2, 4);
  const PearlCritic critic = PerturbedCritic(map, &rng, 0.5);
  EXPECT_GT((critic.weights().array() - 1.0 / 17).abs().maxCoeff(), 1e-3);
  const Eigen::VectorXi labels = StratifiedLabels(Eigen::Vector2d(0.4, 0.6), 9);
  const Eigen::Index n = labels.size();
  const Eigen::MatrixXd y = RandomEncodedRows(layout, n, &rng);
  Eigen::MatrixXd target;
  map.Features(RandomEncodedRows(layout, 2, &rng), &target);
  target.transposeInPlace();  // feature_dim x 2
  auto loss = [&](const Eigen::VectorXd& flat) {
    const Eigen::MatrixXd rows = Eigen::Map<const Eigen::MatrixXd>(flat.data(), n, y.cols());
    Eigen::MatrixXd features;
    map.Features(rows, &features);
    Eigen::VectorXd f;
    return PearlLoss(target, features, labels, critic.weights(), &f, nullptr);
  };
  Eigen::MatrixXd features, grad_features, grad_y;
  map.Features(y, &features);
  Eigen::VectorXd f;
  PearlLoss(target, features, labels, critic.weights(), &f, &grad_features);
  map.BackwardFromFeatures(features, grad_features, &grad_y);
  const Eigen::VectorXd flat = Eigen::Map<const Eigen::VectorXd>(y.data(), y.size());
  const auto check = nn::CheckGradient(
      loss, flat, Eigen::Map<const Eigen::VectorXd>(grad_y.data(), grad_y.size()));
  EXPECT_LT(check.max_relative_error, kGradientTolerance)
      << "worst " << check.worst_index << ": " << check.analytic_at_worst << " vs "
      << check.numeric_at_worst;
}

// The full chain to the generator's parameters (fixed latents).
TEST(PearlLossTest, GeneratorParameterGradientMatchesCentralDifferences) {
  PublicRng rng(5);
  const auto layout = MakeLayout(2, {3, 2});
  const auto map = MakeTrainerMap(layout, 11, 0.9, 6);
  const PearlCritic critic = PerturbedCritic(map, &rng, 0.5);
  GeneratorOptions options;
  options.noise_dim = 3;
  options.hidden = {6};
  options.activation = nn::Activation::kTanh;
  options.seed = 7;
  TabularGenerator generator = TabularGenerator::Create(layout, 2, options).value();
  const Eigen::VectorXi labels = StratifiedLabels(Eigen::Vector2d(0.5, 0.5), 8);
  Eigen::MatrixXd z(labels.size(), options.noise_dim);
  rng.FillNormal(z);
  Eigen::MatrixXd target(map.output_dim(), 2);
  rng.FillNormal(target);
  target *= 0.2;
  auto loss = [&](const Eigen::VectorXd& params) {
    TabularGenerator copy = generator;
    copy.parameters() = params;
    GeneratorWorkspace workspace;
    Eigen::MatrixXd features;
    map.Features(copy.Forward(z, labels, &workspace), &features);
    Eigen::VectorXd f;
    return PearlLoss(target, features, labels, critic.weights(), &f, nullptr);
  };
  GeneratorWorkspace workspace;
  const Eigen::MatrixXd& encoded = generator.Forward(z, labels, &workspace);
  Eigen::MatrixXd features, grad_features, grad_encoded;
  map.Features(encoded, &features);
  Eigen::VectorXd f;
  PearlLoss(target, features, labels, critic.weights(), &f, &grad_features);
  map.Backward(encoded, grad_features, &grad_encoded);
  Eigen::VectorXd grad = Eigen::VectorXd::Zero(generator.num_parameters());
  generator.Backward(grad_encoded, &workspace, &grad);
  const auto check = nn::CheckGradient(loss, generator.parameters(), grad);
  EXPECT_LT(check.max_relative_error, kGradientTolerance)
      << "worst " << check.worst_index << ": " << check.analytic_at_worst << " vs "
      << check.numeric_at_worst;
}

// dL/ds = -sum_i alpha_i (f_i - L) t_i^2 / 2 (pearl.md 1.2 F) against
// central differences of L(s) = sum_i alpha_i(s) f_i at fixed features.
TEST(PearlCriticTest, CriticGradientMatchesCentralDifferences) {
  PublicRng rng(8);
  for (const double spread : {0.0, 0.3, 2.0}) {
    const auto layout = MakeLayout(3, {3});
    const auto map = MakeTrainerMap(layout, 29, 0.7, 9);
    const PearlCritic critic = PerturbedCritic(map, &rng, spread);
    const Eigen::VectorXi labels = StratifiedLabels(Eigen::Vector2d(0.3, 0.7), 10);
    Eigen::MatrixXd features, target;
    map.Features(RandomEncodedRows(layout, labels.size(), &rng), &features);
    map.Features(RandomEncodedRows(layout, 2, &rng), &target);
    target.transposeInPlace();
    Eigen::VectorXd f;
    PearlLoss(target, features, labels, critic.weights(), &f, nullptr);
    auto loss = [&](const Eigen::VectorXd& s) {
      PearlCritic moved = critic;
      EXPECT_TRUE(moved.SetPrecisions(s).ok());
      Eigen::VectorXd per_frequency;
      return PearlLoss(target, features, labels, moved.weights(), &per_frequency, nullptr);
    };
    const auto check = nn::CheckGradient(loss, critic.precisions(), critic.Gradient(f));
    EXPECT_LT(check.max_relative_error, kGradientTolerance)
        << "spread " << spread << " worst " << check.worst_index << ": "
        << check.analytic_at_worst << " vs " << check.numeric_at_worst;
  }
}

TEST(PearlCriticTest, WeightsStartUniformAndStayNormalised) {
  const auto layout = MakeLayout(4, {5, 2});
  const auto map = MakeTrainerMap(layout, 50, 1.5, 10);
  PearlCritic critic = PearlCritic::Create(map.frequencies(), map.length_scale()).value();
  EXPECT_EQ(critic.weights().size(), 50);
  EXPECT_LE((critic.weights().array() - 1.0 / 50).abs().maxCoeff(), 1e-15);
  EXPECT_TRUE((critic.base_precisions().array() == 1.5 * 1.5).all());
  PublicRng rng(11);
  // Extreme precisions (far beyond what training reaches) stay finite and
  // normalised thanks to the log-space softmax.
  for (const double scale : {0.1, 10.0, 1e4, 1e8}) {
    Eigen::VectorXd s(map.input_dim());
    rng.FillNormal(s);
    ASSERT_TRUE(critic.SetPrecisions(critic.base_precisions() + scale * s).ok());
    EXPECT_TRUE(critic.weights().allFinite());
    EXPECT_TRUE((critic.weights().array() >= 0).all());
    EXPECT_NEAR(critic.weights().sum(), 1.0, 1e-12);
  }
  EXPECT_FALSE(critic.SetPrecisions(Eigen::VectorXd::Zero(3)).ok());
  EXPECT_FALSE(PearlCritic::Create(map.frequencies(), 0.0).ok());
}

// Two Gaussian blobs in two numeric dimensions plus one categorical column
// whose level depends on the class; the embedding is released through the
// production path with zero noise.
struct BlobProblem {
  data::FeatureLayout layout = MakeLayout(2, {3});
  Eigen::Matrix<double, 2, 2> centres;        // class x numeric
  Eigen::Matrix<double, 2, 3> level_probs;    // class x level
  embed::EmbeddingTarget target;
};

BlobProblem MakeBlobs(const embed::CharacteristicFunctionMap& map) {
  BlobProblem problem;
  problem.centres << 0.25, 0.3, 0.75, 0.65;
  problem.level_probs << 0.8, 0.15, 0.05, 0.1, 0.1, 0.8;
  PublicRng rng(12);
  const int n = 3000;
  Eigen::MatrixXd rows = Eigen::MatrixXd::Zero(n, 5);
  Eigen::VectorXi labels(n);
  for (int i = 0; i < n; ++i) {
    const int c = rng.Uniform() < 0.4 ? 0 : 1;
    labels(i) = c;
    for (int j = 0; j < 2; ++j)
      rows(i, j) = std::clamp(problem.centres(c, j) + 0.08 * rng.Normal(), 0.0, 1.0);
    const double u = rng.Uniform();
    const int level = u < problem.level_probs(c, 0) ? 0
                      : u < problem.level_probs(c, 0) + problem.level_probs(c, 1) ? 1
                                                                                   : 2;
    rows(i, 2 + level) = 1.0;
  }
  auto accumulator = embed::AccumulateEmbedding(map, rows, labels, 2).value();
  privacy::ZeroNoiseSource zero;
  const auto release = embed::ReleaseLabelledEmbedding(
                           accumulator, privacy::NeighbouringRelation::kAddRemove, 1.0, 0, &zero)
                           .value();
  problem.target = embed::ToEmbeddingTarget(release);
  return problem;
}

// Class-conditional means of the generator's encoded rows (2 x 5).
Eigen::MatrixXd GeneratedClassMeans(const TabularGenerator& generator) {
  PublicRng rng(13);
  Eigen::VectorXi labels(4000);
  labels.head(2000).setZero();
  labels.tail(2000).setOnes();
  Eigen::MatrixXd z(4000, generator.noise_dim());
  rng.FillNormal(z);
  GeneratorWorkspace workspace;
  const Eigen::MatrixXd& rows = generator.Forward(z, labels, &workspace);
  Eigen::MatrixXd means(2, rows.cols());
  means.row(0) = rows.topRows(2000).colwise().mean();
  means.row(1) = rows.bottomRows(2000).colwise().mean();
  return means;
}

double MeanError(const BlobProblem& problem, const Eigen::MatrixXd& means) {
  double error = 0.0;
  for (int c = 0; c < 2; ++c) {
    error += (means.row(c).head(2) - problem.centres.row(c)).squaredNorm();
    error += (means.row(c).tail(3) - problem.level_probs.row(c)).squaredNorm();
  }
  return std::sqrt(error);
}

TEST(PearlTrainerTest, FitsTwoBlobsAndKeepsCriticNormalised) {
  const auto layout = MakeLayout(2, {3});
  const auto map = MakeTrainerMap(layout, 200, embed::DefaultCharfnLengthScale(layout), 14);
  const BlobProblem problem = MakeBlobs(map);
  PearlTrainerOptions options;
  options.steps = 600;
  options.batch_size = 256;
  options.learning_rate = 5e-3;
  options.generator.noise_dim = 4;
  options.generator.hidden = {32, 32};
  options.seed = 15;
  std::vector<double> losses;
  options.progress = [&](int, double loss) { losses.push_back(loss); };
  options.progress_every = 1;
  const TabularGenerator initial =
      TabularGenerator::Create(layout, 2, [&] {
        GeneratorOptions g = options.generator;
        g.seed = options.seed;
        return g;
      }()).value();
  const double initial_error = MeanError(problem, GeneratedClassMeans(initial));
  const auto result = TrainPearlGenerator(layout, map, problem.target, options).value();
  ASSERT_EQ(losses.size(), 600u);
  const double first = (losses[0] + losses[1] + losses[2]) / 3;
  double last = 0.0;
  for (int i = 0; i < 20; ++i) last += losses[losses.size() - 1 - i] / 20;
  EXPECT_LT(last, 0.2 * first) << "first " << first << " last " << last;
  const double final_error = MeanError(problem, GeneratedClassMeans(result.trained.generator));
  EXPECT_LT(final_error, 0.5 * initial_error);
  EXPECT_LT(final_error, 0.12) << "initial " << initial_error;
  std::printf("blobs: loss %.4g -> %.4g, class-mean error %.4f -> %.4f\n", first, last,
              initial_error, final_error);
  // Critic: 60 steps, weights a distribution that moved away from uniform.
  EXPECT_EQ(result.critic_steps, 60);
  EXPECT_NEAR(result.frequency_weights.sum(), 1.0, 1e-12);
  EXPECT_TRUE((result.frequency_weights.array() > 0).all());
  EXPECT_GT((result.frequency_weights.array() - 1.0 / 200).abs().maxCoeff(), 1e-4);
  EXPECT_EQ(result.critic_precisions.size(), layout.total_dim());
  EXPECT_EQ(result.trained.steps, 600);
  EXPECT_EQ(result.trained.class_weights, problem.target.class_weights);
}

TEST(PearlTrainerTest, WithoutCriticWeightsStayUniform) {
  const auto layout = MakeLayout(2, {3});
  const auto map = MakeTrainerMap(layout, 40, 1.0, 16);
  const BlobProblem problem = MakeBlobs(map);
  PearlTrainerOptions options;
  options.steps = 20;
  options.batch_size = 64;
  options.generator.hidden = {8};
  options.use_critic = false;
  const auto result = TrainPearlGenerator(layout, map, problem.target, options).value();
  EXPECT_EQ(result.critic_steps, 0);
  EXPECT_LE((result.frequency_weights.array() - 1.0 / 40).abs().maxCoeff(), 1e-15);
}

TEST(PearlTrainerTest, RejectsInvalidOptionsAndMismatchedRelease) {
  const auto layout = MakeLayout(2, {3});
  const auto map = MakeTrainerMap(layout, 40, 1.0, 16);
  const BlobProblem problem = MakeBlobs(map);
  PearlTrainerOptions options;
  options.steps = 2;
  options.generator.hidden = {8};
  options.generator_steps_per_critic_step = 0;
  EXPECT_FALSE(TrainPearlGenerator(layout, map, problem.target, options).ok());
  options.generator_steps_per_critic_step = 1;
  options.critic_learning_rate = -1;
  EXPECT_FALSE(TrainPearlGenerator(layout, map, problem.target, options).ok());
  options.critic_learning_rate = 1e-2;
  EXPECT_TRUE(TrainPearlGenerator(layout, map, problem.target, options).ok());
  const auto other = MakeTrainerMap(layout, 41, 1.0, 16);
  EXPECT_FALSE(TrainPearlGenerator(layout, other, problem.target, options).ok());
  EXPECT_FALSE(TrainPearlGenerator(MakeLayout(3, {3}), map, problem.target, options).ok());
}

// Adult-like layout: 6 numerics and Adult's 8 categorical columns (102
// levels), 108 encoded dimensions; k = 500, batch 1024, hidden (128, 128),
// critic every 10 steps. Prints ms per generator step.
TEST(PearlTrainerTiming, AdultLikeLayout) {
  const auto layout = MakeLayout(6, {9, 16, 7, 15, 6, 5, 2, 42});
  ASSERT_EQ(layout.total_dim(), 108);
  const auto map = MakeTrainerMap(layout, 500, embed::DefaultCharfnLengthScale(layout), 17);
  PublicRng rng(18);
  embed::EmbeddingTarget target;
  target.class_weights = Eigen::Vector2d(0.75, 0.25);
  Eigen::MatrixXd features;
  map.Features(RandomEncodedRows(layout, 2, &rng), &features);
  target.class_means = features.transpose();
  PearlTrainerOptions options;
  options.steps = 50;
  options.batch_size = 1024;
  options.generator.hidden = {128, 128};
  auto time_run = [&](bool use_critic) {
    options.use_critic = use_critic;
    const auto start = std::chrono::steady_clock::now();
    const auto result = TrainPearlGenerator(layout, map, target, options);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(result.ok());
    return 1e3 * seconds / options.steps;
  };
  const double with_critic = time_run(true);
  const double without_critic = time_run(false);
  std::printf("PEARL Adult-like (d=108, k=500, B=1024, hidden 128x128): %.2f ms/step with "
              "critic every 10, %.2f ms/step without\n",
              with_critic, without_critic);
  RecordProperty("ms_per_step_with_critic", std::to_string(with_critic));
  RecordProperty("ms_per_step_without_critic", std::to_string(without_critic));
}

}  // namespace
}  // namespace dpcurator::train
