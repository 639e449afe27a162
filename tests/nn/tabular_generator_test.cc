#include "core/train/tabular_generator.h"

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/nn/adam.h"
#include "core/nn/gradient_check.h"
#include "core/util/public_rng.h"
#include "tests/nn/random_matrix.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::train {
namespace {

using ::testing::HasSubstr;

constexpr double kGeneratorGradientTolerance = 1e-4;

// [ 2 numeric | 3 levels | 4 levels ], built by hand so these tests depend
// only on the FeatureLayout contract.
data::FeatureLayout SmallLayout() {
  data::FeatureLayout layout;
  layout.numeric = {{0, 0}, {2, 1}};
  layout.numeric_dim = 2;
  layout.categorical = {{1, 2, 3}, {3, 5, 4}};
  layout.categorical_dim = 7;
  return layout;
}

GeneratorOptions SmallGeneratorOptions() {
  GeneratorOptions options;
  options.noise_dim = 4;
  options.hidden = {8, 8};
  options.seed = 21;
  return options;
}

using nn::test_util::RandomMatrix;

struct GradientCase {
  int num_classes;
  bool layer_norm;
  nn::Activation activation;
};

void PrintTo(const GradientCase& c, std::ostream* os) {
  *os << c.num_classes << " classes, " << nn::ActivationName(c.activation)
      << (c.layer_norm ? ", layer norm" : "");
}

class GeneratorGradientTest : public ::testing::TestWithParam<GradientCase> {};

// Loss = sum(W .* G(z, y)) with random W, so dLoss/dEncoded = W; checks the
// sigmoid and softmax heads and the MLP together.
TEST_P(GeneratorGradientTest, MatchesCentralDifferences) {
  const GradientCase c = GetParam();
  GeneratorOptions options = SmallGeneratorOptions();
  options.layer_norm = c.layer_norm;
  options.activation = c.activation;
  absl::StatusOr<TabularGenerator> created =
      TabularGenerator::Create(SmallLayout(), c.num_classes, options);
  ASSERT_TRUE(created.ok()) << created.status();
  TabularGenerator generator = *std::move(created);
  PublicRng rng(8);
  for (Eigen::Index i = 0; i < generator.num_parameters(); ++i) {
    generator.parameters()(i) += 0.2 * rng.Normal();
  }
  const int n = 5;
  const Eigen::MatrixXd z = RandomMatrix(n, options.noise_dim, 31);
  Eigen::VectorXi labels(n);
  for (int i = 0; i < n; ++i) labels(i) = i % c.num_classes;
  const Eigen::MatrixXd w = RandomMatrix(n, generator.output_dim(), 32);

  GeneratorWorkspace ws;
  generator.Forward(z, labels, &ws);
  Eigen::VectorXd analytic = Eigen::VectorXd::Zero(generator.num_parameters());
  generator.Backward(w, &ws, &analytic);

  TabularGenerator probe = generator;
  auto loss = [&](const Eigen::VectorXd& params) {
    probe.parameters() = params;
    GeneratorWorkspace local;
    return probe.Forward(z, labels, &local).cwiseProduct(w).sum();
  };
  const nn::GradientCheckResult result =
      nn::CheckGradient(loss, generator.parameters(), analytic);
  EXPECT_LT(result.max_relative_error, kGeneratorGradientTolerance)
      << "worst index " << result.worst_index << ": analytic " << result.analytic_at_worst
      << " numeric " << result.numeric_at_worst;
  EXPECT_LT(result.norm_relative_error, kGeneratorGradientTolerance);
  EXPECT_GT(analytic.norm(), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, GeneratorGradientTest,
    ::testing::Values(GradientCase{3, false, nn::Activation::kRelu},
                      GradientCase{1, false, nn::Activation::kRelu},
                      GradientCase{3, true, nn::Activation::kRelu},
                      GradientCase{2, false, nn::Activation::kTanh},
                      GradientCase{2, true, nn::Activation::kLeakyRelu}),
    [](const ::testing::TestParamInfo<GradientCase>& info) {
      return "classes" + std::to_string(info.param.num_classes) + "_" +
             nn::ActivationName(info.param.activation) +
             (info.param.layer_norm ? "_layer_norm" : "_plain");
    });

TEST(TabularGeneratorTest, HeadsAreBoundedAndNormalised) {
  absl::StatusOr<TabularGenerator> created =
      TabularGenerator::Create(SmallLayout(), 3, SmallGeneratorOptions());
  ASSERT_TRUE(created.ok());
  TabularGenerator generator = *std::move(created);
  const Eigen::MatrixXd z = RandomMatrix(50, 4, 40);
  Eigen::VectorXi labels = Eigen::VectorXi::LinSpaced(50, 0, 49).unaryExpr(
      [](int i) { return i % 3; });
  // Also with huge logits, where a naive softmax would overflow.
  for (double scale : {1.0, 300.0}) {
    generator.parameters() *= scale;
    GeneratorWorkspace ws;
    const Eigen::MatrixXd& x = generator.Forward(z, labels, &ws);
    ASSERT_EQ(x.rows(), 50);
    ASSERT_EQ(x.cols(), 9);
    ASSERT_TRUE(x.allFinite()) << "scale " << scale;
    EXPECT_GE(x.minCoeff(), 0.0);
    EXPECT_LE(x.maxCoeff(), 1.0);
    for (const auto& slot : generator.layout().categorical) {
      const Eigen::VectorXd sums = x.middleCols(slot.offset, slot.levels).rowwise().sum();
      EXPECT_LT((sums.array() - 1.0).abs().maxCoeff(), 1e-12) << "scale " << scale;
    }
  }
}

TEST(TabularGeneratorTest, OutputHeadsApplySigmoidAndSoftmaxToLogits) {
  absl::StatusOr<TabularGenerator> created =
      TabularGenerator::Create(SmallLayout(), 1, SmallGeneratorOptions());
  ASSERT_TRUE(created.ok());
  TabularGenerator generator = *std::move(created);
  // Zero weights: the logits are the output bias for every row.
  generator.parameters().setZero();
  const int last = generator.mlp().num_layers() - 1;
  const Eigen::Index bias_offset = generator.mlp().layers()[last].bias_offset;
  Eigen::VectorXd logits(9);
  logits << 0.0, std::log(3.0), 1.0, 2.0, 3.0, 0.0, 0.0, 0.0, std::log(5.0);
  generator.parameters().segment(bias_offset, 9) = logits;
  GeneratorWorkspace ws;
  const Eigen::MatrixXd& x =
      generator.Forward(RandomMatrix(2, 4, 1), Eigen::VectorXi(), &ws);
  const double e = std::exp(1.0);
  const double z3 = e + e * e + e * e * e;
  EXPECT_NEAR(x(1, 0), 0.5, 1e-15);
  EXPECT_NEAR(x(1, 1), 0.75, 1e-15);
  EXPECT_NEAR(x(1, 2), e / z3, 1e-15);
  EXPECT_NEAR(x(1, 4), e * e * e / z3, 1e-15);
  EXPECT_NEAR(x(1, 5), 1.0 / 8.0, 1e-15);
  EXPECT_NEAR(x(1, 8), 5.0 / 8.0, 1e-15);
}

TEST(TabularGeneratorTest, LabelsChangeTheOutput) {
  absl::StatusOr<TabularGenerator> generator =
      TabularGenerator::Create(SmallLayout(), 3, SmallGeneratorOptions());
  ASSERT_TRUE(generator.ok());
  EXPECT_EQ(generator->input_dim(), 4 + 3);
  const Eigen::MatrixXd z = RandomMatrix(1, 4, 2);
  GeneratorWorkspace ws;
  const Eigen::MatrixXd a = generator->Forward(z, Eigen::VectorXi::Constant(1, 0), &ws);
  const Eigen::MatrixXd b = generator->Forward(z, Eigen::VectorXi::Constant(1, 2), &ws);
  EXPECT_GT((a - b).norm(), 1e-3);

  absl::StatusOr<TabularGenerator> unlabelled =
      TabularGenerator::Create(SmallLayout(), 1, SmallGeneratorOptions());
  ASSERT_TRUE(unlabelled.ok());
  EXPECT_EQ(unlabelled->input_dim(), 4);
}

TEST(TabularGeneratorTest, ParametersRoundTripThroughFlatVector) {
  GeneratorOptions options = SmallGeneratorOptions();
  options.layer_norm = true;
  absl::StatusOr<TabularGenerator> original =
      TabularGenerator::Create(SmallLayout(), 2, options);
  ASSERT_TRUE(original.ok());
  absl::StatusOr<TabularGenerator> rebuilt = TabularGenerator::FromParameters(
      original->layout(), original->num_classes(), original->options(),
      original->parameters());
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  const Eigen::MatrixXd z = RandomMatrix(7, 4, 3);
  const Eigen::VectorXi labels = Eigen::VectorXi::Ones(7);
  GeneratorWorkspace a, b;
  EXPECT_EQ(original->Forward(z, labels, &a), rebuilt->Forward(z, labels, &b));

  absl::StatusOr<TabularGenerator> wrong = TabularGenerator::FromParameters(
      original->layout(), 3, original->options(), original->parameters());
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("the architecture needs"));
}

TEST(TabularGeneratorTest, CreateValidatesArguments) {
  EXPECT_THAT(TabularGenerator::Create(SmallLayout(), 0, SmallGeneratorOptions()).status().message(),
              HasSubstr("Number of classes must be a positive integer, got 0"));
  GeneratorOptions options = SmallGeneratorOptions();
  options.noise_dim = 0;
  EXPECT_THAT(TabularGenerator::Create(SmallLayout(), 2, options).status().message(),
              HasSubstr("Noise dimension must be a positive integer, got 0"));
  options = SmallGeneratorOptions();
  options.hidden = {8, -1};
  EXPECT_THAT(TabularGenerator::Create(SmallLayout(), 2, options).status().message(),
              HasSubstr("Width of hidden layer 1"));

  data::FeatureLayout overlap = SmallLayout();
  overlap.categorical[1].offset = 4;  // collides with the first block
  EXPECT_THAT(TabularGenerator::Create(overlap, 2, SmallGeneratorOptions()).status().message(),
              HasSubstr("Feature layout position 4 is used twice (column 3)"));
  data::FeatureLayout outside = SmallLayout();
  outside.categorical[1].levels = 5;
  outside.categorical_dim = 8;
  outside.numeric_dim = 1;
  outside.numeric.pop_back();
  EXPECT_THAT(TabularGenerator::Create(outside, 2, SmallGeneratorOptions()).status().message(),
              HasSubstr("is outside [0, 9)"));
  EXPECT_THAT(
      TabularGenerator::Create(data::FeatureLayout(), 2, SmallGeneratorOptions()).status().message(),
      HasSubstr("at least one encoded dimension"));
}

// Fits class-conditional means of the encoded rows by MSE,
//   L = sum_c || mean_{i: y_i = c} G(z_i, c) - t_c ||^2,
// the linear-kernel special case of the DP-MERF objective (dp-merf.md 1.5).
TEST(TabularGeneratorTest, LearnsClassConditionalMeans) {
  data::FeatureLayout layout = SmallLayout();
  Eigen::MatrixXd targets(2, 9);
  targets << 0.2, 0.9, 0.1, 0.6, 0.3, 0.25, 0.25, 0.25, 0.25,  //
      0.7, 0.1, 0.8, 0.1, 0.1, 0.05, 0.05, 0.1, 0.8;
  GeneratorOptions options;
  options.noise_dim = 8;
  options.hidden = {64, 64};
  options.seed = 5;
  absl::StatusOr<TabularGenerator> created = TabularGenerator::Create(layout, 2, options);
  ASSERT_TRUE(created.ok());
  TabularGenerator generator = *std::move(created);
  nn::AdamOptions adam_options;
  adam_options.learning_rate = 1e-2;
  absl::StatusOr<nn::Adam> adam = nn::Adam::Create(generator.num_parameters(), adam_options);
  ASSERT_TRUE(adam.ok());

  const int n = 256;
  Eigen::VectorXi labels(n);
  for (int i = 0; i < n; ++i) labels(i) = i % 2;
  PublicRng rng(77);
  Eigen::MatrixXd z(n, options.noise_dim);
  GeneratorWorkspace ws;
  Eigen::VectorXd grad(generator.num_parameters());
  Eigen::MatrixXd grad_encoded(n, 9);
  Eigen::MatrixXd means(2, 9);
  auto class_means = [&](const Eigen::MatrixXd& x) {
    means.setZero();
    for (int i = 0; i < n; ++i) means.row(labels(i)) += x.row(i) / (n / 2);
  };

  rng.FillNormal(z);
  class_means(generator.Forward(z, labels, &ws));
  const double initial_error = (means - targets).cwiseAbs().maxCoeff();
  for (int step = 0; step < 400; ++step) {
    rng.FillNormal(z);
    const Eigen::MatrixXd& x = generator.Forward(z, labels, &ws);
    class_means(x);
    // dL/dx_i = 2 (mean_c - t_c) / n_c for y_i = c.
    for (int i = 0; i < n; ++i) {
      grad_encoded.row(i) = 2.0 * (means.row(labels(i)) - targets.row(labels(i))) / (n / 2);
    }
    grad.setZero();
    generator.Backward(grad_encoded, &ws, &grad);
    ASSERT_TRUE(adam->Step(generator.parameters(), grad).ok());
  }
  // Evaluate on a large fresh batch.
  const int m = 4000;
  Eigen::MatrixXd z_eval(m, options.noise_dim);
  rng.FillNormal(z_eval);
  for (int c = 0; c < 2; ++c) {
    GeneratorWorkspace eval_ws;
    const Eigen::MatrixXd& x =
        generator.Forward(z_eval, Eigen::VectorXi::Constant(m, c), &eval_ws);
    const Eigen::RowVectorXd mean = x.colwise().mean();
    EXPECT_LT((mean - targets.row(c)).cwiseAbs().maxCoeff(), 0.02)
        << "class " << c << ": " << mean << " vs " << targets.row(c);
  }
  EXPECT_GT(initial_error, 0.1);  // it did have something to learn
}

absl::StatusOr<data::Schema> SampleSchema(int colors) {
  std::vector<std::string> levels = {"red", "green", "blue", "cyan"};
  levels.resize(colors);
  return data::Schema::Builder()
      .AddNumeric("age", 17, 90, /*integer=*/true)
      .AddCategorical("color", levels)
      .AddNumeric("hours", 0, 10)
      .AddCategorical("income", {"<=50K", ">50K"})
      .SetLabel("income")
      .Build();
}

// Sets every weight to zero, so the logits equal the output bias for every
// row; then the decoded rows follow known distributions.
TEST(TabularGeneratorTest, SampleDecodesHeadsIntoTheSchema) {
  absl::StatusOr<data::Schema> schema = SampleSchema(3);
  ASSERT_TRUE(schema.ok()) << schema.status();
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(*schema);
  ASSERT_EQ(layout.total_dim(), 5);
  absl::StatusOr<TabularGenerator> created =
      TabularGenerator::Create(layout, schema->num_classes(), SmallGeneratorOptions());
  ASSERT_TRUE(created.ok()) << created.status();
  TabularGenerator generator = *std::move(created);
  generator.parameters().setZero();
  const int last = generator.mlp().num_layers() - 1;
  const Eigen::Index bias_offset = generator.mlp().layers()[last].bias_offset;
  // age: sigmoid(0) = 0.5 -> 53.5 -> 54; hours: sigmoid(log 3) = 0.75 -> 7.5;
  // color: softmax(log [0.2, 0.5, 0.3]).
  Eigen::VectorXd bias(5);
  bias << 0.0, std::log(3.0), std::log(0.2), std::log(0.5), std::log(0.3);
  generator.parameters().segment(bias_offset, 5) = bias;

  const int n = 20000;  // > kSampleChunkRows: several chunks
  Eigen::VectorXi labels(n);
  for (int i = 0; i < n; ++i) labels(i) = (i % 5 == 0) ? 1 : 0;
  PublicRng rng(123);
  absl::StatusOr<data::Table> table = generator.Sample(*schema, labels, &rng);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->num_rows(), n);
  ASSERT_EQ(table->cells.cols(), 4);
  const int age = *schema->FindColumn("age");
  const int color = *schema->FindColumn("color");
  const int hours = *schema->FindColumn("hours");
  const int income = *schema->FindColumn("income");
  EXPECT_TRUE((table->cells.col(age).array() == 54.0).all());
  EXPECT_TRUE((table->cells.col(hours).array() - 7.5).abs().maxCoeff() < 1e-12);
  EXPECT_EQ(table->cells.col(income), labels.cast<double>());
  Eigen::Vector3d counts = Eigen::Vector3d::Zero();
  for (int i = 0; i < n; ++i) {
    const double level = table->cells(i, color);
    ASSERT_TRUE(level == 0.0 || level == 1.0 || level == 2.0) << level;
    counts(static_cast<int>(level)) += 1;
  }
  const Eigen::Vector3d expected(0.2, 0.5, 0.3);
  for (int l = 0; l < 3; ++l) {
    // 5 binomial standard deviations.
    const double sd = std::sqrt(expected(l) * (1 - expected(l)) / n);
    EXPECT_NEAR(counts(l) / n, expected(l), 5 * sd) << "level " << l;
  }

  // Same seed, same rows.
  PublicRng again(123);
  absl::StatusOr<data::Table> repeat = generator.Sample(*schema, labels, &again);
  ASSERT_TRUE(repeat.ok());
  EXPECT_EQ(repeat->cells, table->cells);
}

TEST(TabularGeneratorTest, SampleRejectsMismatchedSchemaAndLabels) {
  absl::StatusOr<data::Schema> schema = SampleSchema(3);
  absl::StatusOr<data::Schema> other = SampleSchema(4);
  ASSERT_TRUE(schema.ok() && other.ok());
  absl::StatusOr<TabularGenerator> generator = TabularGenerator::Create(
      data::FeatureLayout::ForFeatures(*schema), 2, SmallGeneratorOptions());
  ASSERT_TRUE(generator.ok());
  PublicRng rng(1);
  EXPECT_THAT(generator->Sample(*other, Eigen::VectorXi::Zero(3), &rng).status().message(),
              HasSubstr("Schema does not match the generator's feature layout"));
  Eigen::VectorXi bad(3);
  bad << 0, 2, 1;
  EXPECT_THAT(generator->Sample(*schema, bad, &rng).status().message(),
              HasSubstr("Label 2 of row 1 is outside [0, 2)"));
  absl::StatusOr<TabularGenerator> unlabelled = TabularGenerator::Create(
      data::FeatureLayout::ForFeatures(*schema), 1, SmallGeneratorOptions());
  ASSERT_TRUE(unlabelled.ok());
  EXPECT_THAT(unlabelled->Sample(*schema, Eigen::VectorXi::Zero(3), &rng).status().message(),
              HasSubstr("Schema has 2 label classes; the generator was built for 1"));
}

}  // namespace
}  // namespace dpcurator::train
