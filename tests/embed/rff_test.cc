#include "core/embed/rff.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/data/csv.h"
#include "core/data/encoder.h"
#include "core/embed/frequency_bounds.h"
#include "core/util/public_rng.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/embed/test_util.h"

namespace dpcurator::embed {
namespace {

using testing::RandomSchema;
using testing::RandomTable;
using testing::SchemaSpec;

constexpr double kNormTolerance = 1e-12;

// Largest | ||h(x)|| - 1 | over the rows of `features`.
double MaxNormError(const Eigen::MatrixXd& features) {
  return (features.rowwise().norm().array() - 1.0).abs().maxCoeff();
}

Eigen::MatrixXd FeaturesOf(const data::Schema& schema, const data::Table& table,
                           const RffOptions& options) {
  const auto layout = data::FeatureLayout::ForFeatures(schema);
  auto map = RandomFourierFeatureMap::Create(layout, options).value();
  Eigen::MatrixXd features;
  map.Features(data::EncodeFeatures(schema, layout, table), &features);
  EXPECT_EQ(features.cols(), map.output_dim());
  return features;
}

// docs/privacy.md 2.1: ||h(x)|| = 1 exactly for every row of every schema,
// whatever the bounds, the length-scale, the numeric weight, and whether the
// row's numeric values lie inside the declared bounds (they are clamped).
TEST(RffNormTest, UnitNormOnRandomMixedSchemas) {
  PublicRng rng(20260101);
  for (int trial = 0; trial < 60; ++trial) {
    SchemaSpec spec;
    spec.numeric_columns = 1 + static_cast<int>(rng.UniformInt(6));
    spec.categorical_columns = 1 + static_cast<int>(rng.UniformInt(5));
    spec.num_classes = static_cast<int>(rng.UniformInt(4));  // 0 = unlabelled
    if (spec.num_classes == 1) spec.num_classes = 2;
    const data::Schema schema = RandomSchema(spec, &rng);
    const data::Table table = RandomTable(schema, 200, &rng, /*extreme=*/0.2);
    RffOptions options;
    options.num_frequencies = 1 + static_cast<int>(rng.UniformInt(300));
    options.seed = rng.NextU64();
    // Half the trials use the schema defaults, half explicit choices (a
    // tiny length-scale makes the phases huge; weights include 0 and 1).
    if (trial % 2 == 1) {
      const double scales[] = {1e-3, 0.1, 1.0, 50.0};
      options.length_scale = scales[rng.UniformInt(4)];
      const double weights[] = {0.0, 0.25, 0.5, 1.0, rng.Uniform()};
      options.numeric_weight = weights[rng.UniformInt(5)];
    }
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " D/2=" << options.num_frequencies);
    const Eigen::MatrixXd features = FeaturesOf(schema, table, options);
    EXPECT_LE(MaxNormError(features), kNormTolerance);
  }
}

// Rows that come in as text go through ParseCell's clamping (counted) and
// still have unit norm; the clamped row has the same features as the row
// holding the bound itself.
TEST(RffNormTest, ClampedTextRowsHaveUnitNormAndMatchTheBound) {
  data::Schema::Builder builder;
  builder.AddNumeric("x", -2.0, 3.0)
      .AddCategorical("c", {"a", "b", "c"}, /*nullable=*/true)
      .AddNumeric("z", 0.0, 1e-3)
      .AddCategorical("y", {"no", "yes"})
      .SetLabel("y");
  const data::Schema schema = builder.Build().value();
  data::TableBuilder rows(schema);
  ASSERT_TRUE(rows.AddRow({"-1e9", "a", "5", "no"}).ok());
  ASSERT_TRUE(rows.AddRow({"-2", "?", "1e-3", "yes"}).ok());
  ASSERT_TRUE(rows.AddRow({" 1e300 ", "", "-7", "no"}).ok());
  ASSERT_TRUE(rows.AddRow({"3", "c", "0", "yes"}).ok());
  const data::Table table = rows.Finish();
  EXPECT_EQ(table.clamped_cells, 4);
  RffOptions options;
  options.num_frequencies = 257;
  options.seed = 7;
  const Eigen::MatrixXd features = FeaturesOf(schema, table, options);
  EXPECT_LE(MaxNormError(features), kNormTolerance);
  // Row 0 = (-2, a, 1e-3), row 3 = (3, c, 0): compare with rows at the bounds.
  data::Table bounds;
  bounds.cells.resize(2, 4);
  bounds.cells << -2.0, 0, 1e-3, 0,  //
      3.0, 2, 0.0, 1;
  const Eigen::MatrixXd expected = FeaturesOf(schema, bounds, options);
  EXPECT_EQ(features.row(0), expected.row(0));
  EXPECT_EQ(features.row(3), expected.row(1));
}

TEST(RffNormTest, NumericOnly) {
  PublicRng rng(11);
  for (int d : {1, 2, 5, 40}) {
    SchemaSpec spec;
    spec.numeric_columns = d;
    spec.categorical_columns = 0;
    spec.num_classes = 3;
    const data::Schema schema = RandomSchema(spec, &rng);
    const auto layout = data::FeatureLayout::ForFeatures(schema);
    RffOptions options;
    options.num_frequencies = 100;
    options.numeric_weight = 0.3;  // ignored: the only block gets the whole norm
    auto map = RandomFourierFeatureMap::Create(layout, options).value();
    EXPECT_EQ(map.numeric_weight(), 1.0);
    EXPECT_EQ(map.output_dim(), 200);
    Eigen::MatrixXd features;
    map.Features(data::EncodeFeatures(schema, layout, RandomTable(schema, 300, &rng)), &features);
    EXPECT_LE(MaxNormError(features), kNormTolerance) << d;
  }
}

TEST(RffNormTest, CategoricalOnly) {
  PublicRng rng(12);
  for (int v : {1, 2, 7}) {
    SchemaSpec spec;
    spec.numeric_columns = 0;
    spec.categorical_columns = v;
    spec.num_classes = 2;
    const data::Schema schema = RandomSchema(spec, &rng);
    const auto layout = data::FeatureLayout::ForFeatures(schema);
    RffOptions options;
    options.num_frequencies = 10;
    options.numeric_weight = 0.9;  // ignored: there is no numeric block
    auto map = RandomFourierFeatureMap::Create(layout, options).value();
    EXPECT_EQ(map.numeric_weight(), 0.0);
    Eigen::MatrixXd features;
    map.Features(data::EncodeFeatures(schema, layout, RandomTable(schema, 300, &rng)), &features);
    EXPECT_LE(MaxNormError(features), kNormTolerance) << v;
    // The RFF block is identically zero; each categorical entry is 0 or
    // 1/sqrt(V) (times the rounding margin kFeatureNormShrink).
    EXPECT_EQ(features.leftCols(20).cwiseAbs().maxCoeff(), 0.0);
    const double entry = kFeatureNormShrink / std::sqrt(static_cast<double>(v));
    for (Eigen::Index i = 0; i < features.rows(); ++i)
      for (Eigen::Index j = 20; j < features.cols(); ++j)
        EXPECT_TRUE(features(i, j) == 0.0 || std::fabs(features(i, j) - entry) < 1e-15);
  }
}

// The split of the norm between the blocks is a^2 and b^2 = 1 - a^2.
TEST(RffNormTest, BlockNormsAreTheWeights) {
  PublicRng rng(13);
  SchemaSpec spec;
  spec.numeric_columns = 3;
  spec.categorical_columns = 4;
  const data::Schema schema = RandomSchema(spec, &rng);
  const auto layout = data::FeatureLayout::ForFeatures(schema);
  RffOptions options;
  options.num_frequencies = 64;
  auto map = RandomFourierFeatureMap::Create(layout, options).value();
  EXPECT_DOUBLE_EQ(map.numeric_weight(), 3.0 / 7.0);  // d_num / (d_num + V)
  Eigen::MatrixXd features;
  map.Features(data::EncodeFeatures(schema, layout, RandomTable(schema, 50, &rng)), &features);
  for (Eigen::Index i = 0; i < features.rows(); ++i) {
    EXPECT_NEAR(features.row(i).head(128).squaredNorm(), 3.0 / 7.0, 1e-13);
    EXPECT_NEAR(features.row(i).tail(layout.categorical_dim).squaredNorm(), 4.0 / 7.0, 1e-13);
  }
}

// The schema-only defaults: l = sqrt(d_num / 6) is the RMS distance of two
// uniform points of [0,1]^d (checked by simulation), and a^2 = d/(d+V).
TEST(RffDefaultsTest, LengthScaleIsRmsDistanceOfUniformPoints) {
  PublicRng rng(14);
  for (int d : {1, 3, 10}) {
    data::Schema::Builder builder;
    for (int j = 0; j < d; ++j) builder.AddNumeric(absl::StrCat("x", j), 0, 1);
    builder.AddCategorical("a", {"p", "q"});
    const data::Schema schema = builder.Build().value();
    const auto layout = data::FeatureLayout::ForFeatures(schema);
    EXPECT_DOUBLE_EQ(DefaultLengthScale(layout), std::sqrt(d / 6.0));
    EXPECT_DOUBLE_EQ(DefaultNumericWeight(layout), d / (d + 1.0));
    const int samples = 200000;
    double sum = 0;
    for (int s = 0; s < samples; ++s) {
      double sq = 0;
      for (int j = 0; j < d; ++j) {
        const double diff = rng.Uniform() - rng.Uniform();
        sq += diff * diff;
      }
      sum += sq;
    }
    // E||u-u'||^2 = d/6; Var of one coordinate's diff^2 is 1/15 - 1/36.
    const double se = std::sqrt(d * (1.0 / 15 - 1.0 / 36) / samples);
    EXPECT_NEAR(sum / samples, d / 6.0, 5 * se) << d;
  }
}

TEST(RffDefaultsTest, FrequenciesArePublicAndReproducible) {
  data::Schema::Builder builder;
  builder.AddNumeric("x", 0, 1).AddNumeric("z", 0, 1);
  const auto layout = data::FeatureLayout::ForFeatures(builder.Build().value());
  RffOptions options;
  options.num_frequencies = 20000;
  options.length_scale = 0.5;
  options.seed = 99;
  auto a = RandomFourierFeatureMap::Create(layout, options).value();
  auto b = RandomFourierFeatureMap::Create(layout, options).value();
  EXPECT_EQ(a.frequencies(), b.frequencies());
  options.seed = 100;
  auto c = RandomFourierFeatureMap::Create(layout, options).value();
  EXPECT_NE(a.frequencies(), c.frequencies());
  // W entries ~ N(0, 1/l^2): sample variance 4 within 5 standard errors.
  const Eigen::ArrayXd w = Eigen::Map<const Eigen::ArrayXd>(a.frequencies().data(), 40000);
  const double var = w.square().mean();
  EXPECT_NEAR(var, 4.0, 5 * 4.0 * std::sqrt(2.0 / 40000));
  EXPECT_NEAR(w.mean(), 0.0, 5 * 2.0 / std::sqrt(40000.0));
}

TEST(RffValidationTest, RejectsBadOptions) {
  data::Schema::Builder builder;
  builder.AddNumeric("x", 0, 1).AddCategorical("c", {"a", "b"});
  const auto layout = data::FeatureLayout::ForFeatures(builder.Build().value());
  RffOptions options;
  options.num_frequencies = 0;
  EXPECT_EQ(RandomFourierFeatureMap::Create(layout, options).status().message(),
            "Number of frequencies must be a positive integer, got 0");
  options.num_frequencies = (1 << 20) + 1;
  EXPECT_FALSE(RandomFourierFeatureMap::Create(layout, options).ok());
  options.num_frequencies = 10;
  options.numeric_weight = 1.5;
  EXPECT_EQ(RandomFourierFeatureMap::Create(layout, options).status().message(),
            "Numeric weight must be in [0, 1], got 1.5");
  // NaN is not a sentinel for "default": it is refused.
  options.numeric_weight = std::nan("");
  EXPECT_FALSE(RandomFourierFeatureMap::Create(layout, options).ok());
  options.numeric_weight = -1;
  options.length_scale = std::nan("");
  EXPECT_FALSE(RandomFourierFeatureMap::Create(layout, options).ok());
  options.length_scale = std::numeric_limits<double>::infinity();
  EXPECT_THAT(std::string(RandomFourierFeatureMap::Create(layout, options).status().message()),
              ::testing::StartsWith("Length-scale must be in [1e-06, 1e+06]"));
  // Below the data-independent floor (frequency_bounds.h): the phases could
  // overflow on some row of the box, so the map refuses to exist.
  options.length_scale = 1e-310;
  EXPECT_EQ(RandomFourierFeatureMap::Create(layout, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.length_scale = kMinLengthScale;
  EXPECT_TRUE(RandomFourierFeatureMap::Create(layout, options).ok());
  // The sentinels select the schema defaults.
  options.length_scale = 0;
  auto defaults = RandomFourierFeatureMap::Create(layout, options).value();
  EXPECT_DOUBLE_EQ(defaults.length_scale(), std::sqrt(1.0 / 6.0));
  EXPECT_DOUBLE_EQ(defaults.numeric_weight(), 0.5);
}

// Backward is the exact chain rule: compare <G, h(x)> differentiated by
// central finite differences in every encoded coordinate.
TEST(RffBackwardTest, MatchesCentralFiniteDifferences) {
  PublicRng rng(15);
  for (int trial = 0; trial < 10; ++trial) {
    SchemaSpec spec;
    spec.numeric_columns = 1 + static_cast<int>(rng.UniformInt(4));
    spec.categorical_columns = static_cast<int>(rng.UniformInt(3));
    const data::Schema schema = RandomSchema(spec, &rng);
    const auto layout = data::FeatureLayout::ForFeatures(schema);
    RffOptions options;
    options.num_frequencies = 1 + static_cast<int>(rng.UniformInt(40));
    options.seed = rng.NextU64();
    auto map = RandomFourierFeatureMap::Create(layout, options).value();
    const int n = 6;
    Eigen::MatrixXd encoded =
        data::EncodeFeatures(schema, layout, RandomTable(schema, n, &rng, 0.0));
    // Generator outputs are soft: move the one-hot blocks off the vertices.
    for (Eigen::Index i = 0; i < n; ++i)
      for (int j = layout.numeric_dim; j < layout.total_dim(); ++j) encoded(i, j) += 0.3 * rng.Uniform();
    Eigen::MatrixXd grad_features(n, map.output_dim());
    rng.FillNormal(grad_features);
    Eigen::MatrixXd grad;
    map.Backward(encoded, grad_features, &grad);
    ASSERT_EQ(grad.rows(), n);
    ASSERT_EQ(grad.cols(), map.input_dim());
    auto loss = [&](const Eigen::MatrixXd& x) {
      Eigen::MatrixXd f;
      map.Features(x, &f);
      return (f.array() * grad_features.array()).sum();
    };
    const double step = 1e-5;
    const double scale = grad.cwiseAbs().maxCoeff();
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < encoded.cols(); ++j) {
        Eigen::MatrixXd plus = encoded, minus = encoded;
        plus(i, j) += step;
        minus(i, j) -= step;
        const double numeric = (loss(plus) - loss(minus)) / (2 * step);
        EXPECT_LE(std::fabs(numeric - grad(i, j)), 1e-6 * std::max(std::fabs(grad(i, j)), scale))
            << "trial " << trial << " row " << i << " col " << j << ": fd " << numeric
            << " vs backward " << grad(i, j);
      }
    }
  }
}

}  // namespace
}  // namespace dpcurator::embed
