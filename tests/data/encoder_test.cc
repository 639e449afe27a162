#include "core/data/encoder.h"

#include <cmath>
#include <limits>

#include "core/data/demo.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::data {
namespace {

Schema MixedSchema() {
  Schema::Builder builder;
  builder.AddCategorical("c1", {"a", "b", "c"}, /*nullable=*/true)
      .AddNumeric("n1", -5, 5, /*integer=*/true)
      .AddCategorical("y", {"u", "v", "w"})
      .AddNumeric("n2", 1000, 1e6, /*integer=*/true)
      .AddCategorical("c2", {"only"})
      .AddNumeric("n3", 0.25, 0.75)
      .SetLabel("y");
  return builder.Build().value();
}

TEST(FeatureLayoutTest, NumericFirstThenOneHotBlocksLabelExcluded) {
  const Schema schema = MixedSchema();
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  EXPECT_EQ(layout.numeric_dim, 3);
  EXPECT_EQ(layout.categorical_dim, 4 + 1);
  EXPECT_EQ(layout.total_dim(), 8);
  EXPECT_EQ(layout.num_categorical_columns(), 2);
  ASSERT_EQ(layout.numeric.size(), 3u);
  EXPECT_EQ(layout.numeric[0].column, 1);
  EXPECT_EQ(layout.numeric[1].column, 3);
  EXPECT_EQ(layout.numeric[2].column, 5);
  EXPECT_EQ(layout.numeric[2].offset, 2);
  ASSERT_EQ(layout.categorical.size(), 2u);
  EXPECT_EQ(layout.categorical[0].column, 0);
  EXPECT_EQ(layout.categorical[0].offset, 3);
  EXPECT_EQ(layout.categorical[0].levels, 4);  // three categories + missing
  EXPECT_EQ(layout.categorical[1].column, 4);
  EXPECT_EQ(layout.categorical[1].offset, 7);
}

TEST(EncoderTest, ScalesByDeclaredBoundsClampsAndOneHots) {
  const Schema schema = MixedSchema();
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  Table table;
  table.cells.resize(3, 6);
  table.cells << 0, -5, 2, 1000, 0, 0.5,  //
      3, 5, 0, 1e6, 0, 0.25,               //
      1, 1e9, 1, -1e9, 0, 0.8;             // out-of-bounds cells (a hand-made table)
  const Eigen::MatrixXd encoded = EncodeFeatures(schema, layout, table);
  Eigen::MatrixXd expected(3, 8);
  expected << 0, 0, 0.5, 1, 0, 0, 0, 1,  //
      1, 1, 0, 0, 0, 0, 1, 1,            //
      1, 0, 1, 0, 1, 0, 0, 1;
  EXPECT_LE((encoded - expected).cwiseAbs().maxCoeff(), 1e-15);
  EXPECT_EQ(ExtractLabels(schema, table), Eigen::Vector3i(2, 0, 1));
  // Every encoded row is in the domain: numerics in [0,1], one 1 per block.
  EXPECT_GE(encoded.minCoeff(), 0.0);
  EXPECT_LE(encoded.maxCoeff(), 1.0);
  EXPECT_EQ(encoded.middleCols(3, 4).rowwise().sum(), Eigen::Vector3d::Ones());
}

TEST(EncoderTest, UnlabelledSchemaGivesLabelZero) {
  Schema::Builder builder;
  builder.AddNumeric("x", 0, 1).AddCategorical("c", {"a", "b"});
  const Schema schema = builder.Build().value();
  Table table;
  table.cells = Eigen::MatrixXd::Zero(4, 2);
  EXPECT_EQ(ExtractLabels(schema, table), Eigen::Vector4i::Zero());
}

// Encode then Decode (argmax) is the identity on tables whose numerics are
// integer-valued and inside the bounds (and within rounding otherwise).
TEST(EncoderTest, EncodeDecodeRoundTrip) {
  const Schema schema = MixedSchema();
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  PublicRng rng(42);
  const int n = 2000;
  Table table;
  table.cells.resize(n, 6);
  for (int i = 0; i < n; ++i) {
    table.cells(i, 0) = static_cast<double>(rng.UniformInt(4));
    table.cells(i, 1) = -5.0 + static_cast<double>(rng.UniformInt(11));
    table.cells(i, 2) = static_cast<double>(rng.UniformInt(3));
    table.cells(i, 3) = 1000.0 + static_cast<double>(rng.UniformInt(999001));
    table.cells(i, 4) = 0;
    table.cells(i, 5) = 0.25 + 0.5 * rng.Uniform();
  }
  const Eigen::MatrixXd encoded = EncodeFeatures(schema, layout, table);
  const Eigen::VectorXi labels = ExtractLabels(schema, table);
  const Table decoded = DecodeFeatures(schema, layout, encoded, labels, Eigen::MatrixXd());
  ASSERT_EQ(decoded.cells.rows(), n);
  for (int c : {0, 1, 2, 3, 4}) EXPECT_EQ(decoded.cells.col(c), table.cells.col(c)) << c;
  EXPECT_LE((decoded.cells.col(5) - table.cells.col(5)).cwiseAbs().maxCoeff(), 1e-15);
  // Sampling decode of one-hot blocks ignores the uniforms.
  Eigen::MatrixXd uniforms(n, 2);
  rng.FillUniform(uniforms);
  const Table sampled = DecodeFeatures(schema, layout, encoded, labels, uniforms);
  EXPECT_EQ(sampled.cells.leftCols(5), decoded.cells.leftCols(5));
}

TEST(DecoderTest, GeneratorOutputsAreMappedIntoTheDomain) {
  const Schema schema = MixedSchema();
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  Eigen::MatrixXd encoded(2, 8);
  // Numerics outside [0,1] are clamped; integers rounded; soft blocks argmax.
  encoded << -0.3, 1.7, 0.5, 0.1, 0.6, 0.2, 0.1, 0.4,  //
      0.46, 0.0016, 1.0, -1, -2, 0.5, -0.1, 0.0;
  const Table table = DecodeFeatures(schema, layout, encoded, Eigen::Vector2i(1, 2),
                                     Eigen::MatrixXd());
  Eigen::MatrixXd expected(2, 6);
  expected << 1, -5, 1, 1e6, 0, 0.5,  //
      2, 0, 2, 2598, 0, 0.75;  // 1000 + 0.0016 * 999000 = 2598.4
  EXPECT_LE((table.cells - expected).cwiseAbs().maxCoeff(), 1e-9) << table.cells;
}

// Sampling decode draws level l with probability max(w_l, 0) / sum.
TEST(DecoderTest, SamplingFollowsTheClippedWeights) {
  Schema::Builder builder;
  builder.AddCategorical("c", {"a", "b", "c", "d"});
  const Schema schema = builder.Build().value();
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  const int n = 40000;
  Eigen::MatrixXd encoded(n, 4);
  encoded.rowwise() = Eigen::RowVector4d(0.2, -0.5, 0.6, 0.2);
  PublicRng rng(3);
  Eigen::MatrixXd uniforms(n, 1);
  rng.FillUniform(uniforms);
  const Table table = DecodeFeatures(schema, layout, encoded, Eigen::VectorXi::Zero(n), uniforms);
  const double p[] = {0.2, 0.0, 0.6, 0.2};
  for (int l = 0; l < 4; ++l) {
    const double freq = (table.cells.col(0).array() == l).cast<double>().mean();
    EXPECT_NEAR(freq, p[l], 5 * std::sqrt(p[l] * (1 - p[l]) / n) + 1e-12) << l;
  }
}

// ----------------------------------------------------------------- atoms ---

// A numeric column with declared atoms gets a one-hot indicator block after
// every categorical block: level a for atom a, the last level for "none".
Schema AtomSchema() {
  Schema::Builder builder;
  builder.AddNumeric("gain", 0, 100, /*integer=*/true)
      .AddCategorical("c", {"a", "b"})
      .AddNumeric("hours", 1, 99, /*integer=*/true)
      .AddNumeric("plain", 0, 1)
      .SetAtoms("gain", {0, 100})
      .SetAtoms("hours", {40});
  return builder.Build().value();
}

TEST(AtomEncoderTest, IndicatorBlocksFollowTheCategoricalBlocks) {
  const Schema schema = AtomSchema();
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  EXPECT_EQ(layout.numeric_dim, 3);
  ASSERT_EQ(layout.categorical.size(), 3u);
  EXPECT_FALSE(layout.categorical[0].atom_indicator);
  EXPECT_EQ(layout.categorical[0].offset, 3);
  EXPECT_TRUE(layout.categorical[1].atom_indicator);
  EXPECT_EQ(layout.categorical[1].column, 0);
  EXPECT_EQ(layout.categorical[1].offset, 5);
  EXPECT_EQ(layout.categorical[1].levels, 3);  // 0, 100, none
  EXPECT_TRUE(layout.categorical[2].atom_indicator);
  EXPECT_EQ(layout.categorical[2].column, 2);
  EXPECT_EQ(layout.categorical[2].offset, 8);
  EXPECT_EQ(layout.categorical[2].levels, 2);  // 40, none
  EXPECT_EQ(layout.categorical_dim, 2 + 3 + 2);
  EXPECT_EQ(layout.num_categorical_columns(), 3);
  EXPECT_EQ(layout.total_dim(), 10);
}

TEST(AtomEncoderTest, EncodesTheAtomExactlyAndNothingNearIt) {
  const Schema schema = AtomSchema();
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  Table table;
  table.cells.resize(4, 4);
  table.cells << 0, 1, 40, 0.5,  //
      100, 0, 41, 0.5,           //
      1e-12, 0, 39.999999, 0.5,  // near an atom is not at it
      50, 1, 40, 0.5;
  const Eigen::MatrixXd encoded = EncodeFeatures(schema, layout, table);
  Eigen::MatrixXd expected_blocks(4, 5);
  expected_blocks << 1, 0, 0, 1, 0,  //
      0, 1, 0, 0, 1,                 //
      0, 0, 1, 0, 1,                 //
      0, 0, 1, 1, 0;
  EXPECT_EQ(encoded.middleCols(5, 5), expected_blocks);
  // The scaled values stay beside the indicators.
  EXPECT_DOUBLE_EQ(encoded(1, 0), 1.0);
  EXPECT_DOUBLE_EQ(encoded(0, 1), 39.0 / 98.0);
  EXPECT_EQ(AtomLevel({0, 100}, 100), 1);
  EXPECT_EQ(AtomLevel({0, 100}, 99.5), 2);
  EXPECT_EQ(AtomLevel({}, 0), 0);
}

TEST(AtomDecoderTest, ChosenAtomIsExactNoneKeepsTheContinuousValue) {
  const Schema schema = AtomSchema();
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  Eigen::MatrixXd encoded = Eigen::MatrixXd::Zero(3, layout.total_dim());
  // Row 0: gain's head says 0.37 (-> 37) but its indicator picks atom 0;
  // hours 0.6 (-> 59.8 -> 60) with "none".
  encoded.row(0) << 0.37, 0.6, 0.5, 1, 0, 0.9, 0.05, 0.05, 0.1, 0.8;
  // Row 1: gain "none" keeps 37; hours picks 40 over a head at 0.99.
  encoded.row(1) << 0.37, 0.99, 0.5, 0, 1, 0.1, 0.2, 0.7, 0.6, 0.4;
  // Row 2: gain picks 100.
  encoded.row(2) << 0.0, 0.0, 0.5, 0, 1, 0.0, 1.0, 0.0, 0.0, 1.0;
  const Table table = DecodeFeatures(schema, layout, encoded, Eigen::Vector3i::Zero(),
                                     Eigen::MatrixXd());
  EXPECT_EQ(table.cells(0, 0), 0);
  EXPECT_EQ(table.cells(0, 2), 60);
  EXPECT_EQ(table.cells(1, 0), 37);
  EXPECT_EQ(table.cells(1, 2), 40);
  EXPECT_EQ(table.cells(2, 0), 100);
  EXPECT_EQ(table.cells(2, 2), 1);
  // Encoding the decoded rows sets each indicator to the level chosen.
  const Eigen::MatrixXd again = EncodeFeatures(schema, layout, table);
  EXPECT_EQ(again(0, 5), 1.0);
  EXPECT_EQ(again(1, 8), 1.0);
  EXPECT_EQ(again(0, 9), 1.0);
  EXPECT_EQ(again(2, 6), 1.0);
}

// Issue 38: a nullable numeric column keeps its value slot (0 when
// missing) and adds a (present, missing) block after every atom block.
Schema NullableSchema() {
  Schema::Builder builder;
  builder.AddNumeric("gain", 0, 100, /*integer=*/true, /*nullable=*/true)
      .AddCategorical("c", {"a", "b"})
      .AddNumeric("rate", 0, 1, /*integer=*/false, /*nullable=*/true)
      .AddNumeric("plain", 0, 10)
      .SetAtoms("gain", {0});
  return builder.Build().value();
}

TEST(NullableEncoderTest, LayoutAddsAMissingBlockPerNullableNumeric) {
  const Schema schema = NullableSchema();
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  EXPECT_EQ(layout.numeric_dim, 3);
  ASSERT_EQ(layout.categorical.size(), 4u);
  EXPECT_EQ(layout.categorical[0].column, 1);  // c
  EXPECT_TRUE(layout.categorical[1].atom_indicator);
  EXPECT_EQ(layout.categorical[1].offset, 5);
  for (int b : {2, 3}) {
    EXPECT_TRUE(layout.categorical[b].missing_indicator) << b;
    EXPECT_FALSE(layout.categorical[b].atom_indicator) << b;
    EXPECT_EQ(layout.categorical[b].levels, kMissingIndicatorLevels) << b;
  }
  EXPECT_EQ(layout.categorical[2].column, 0);
  EXPECT_EQ(layout.categorical[2].offset, 7);
  EXPECT_EQ(layout.categorical[3].column, 2);
  EXPECT_EQ(layout.categorical[3].offset, 9);
  EXPECT_EQ(layout.num_categorical_columns(), 4);
  EXPECT_EQ(layout.total_dim(), 11);
}

TEST(NullableEncoderTest, MissingIsZeroValueAndOneIndicatorNoNaN) {
  const Schema schema = NullableSchema();
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Table table;
  table.cells.resize(3, 4);
  table.cells << nan, 0, 0.5, 5,  //
      0, 1, nan, 10,              //
      50, 0, 1, 0;
  const Eigen::MatrixXd encoded = EncodeFeatures(schema, layout, table);
  EXPECT_TRUE(encoded.allFinite());
  Eigen::MatrixXd expected(3, 11);
  //           gain rate plain | a  b | 0 none | gain p m | rate p m
  expected << 0.0, 0.5, 0.5, 1, 0, 0, 1, 0, 1, 1, 0,  //
      0.0, 0.0, 1.0, 0, 1, 1, 0, 1, 0, 0, 1,          //
      0.5, 1.0, 0.0, 1, 0, 0, 1, 1, 0, 1, 0;
  EXPECT_EQ(encoded, expected);
  // Exactly one 1 per one-hot block and row, missing or not.
  for (const auto& slot : layout.categorical) {
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(encoded.row(i).segment(slot.offset, slot.levels).sum(), 1.0);
    }
  }
}

TEST(NullableDecoderTest, MissingBlockWritesNaNAndWinsOverAnAtom) {
  const Schema schema = NullableSchema();
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  Eigen::MatrixXd encoded = Eigen::MatrixXd::Zero(3, layout.total_dim());
  // Row 0: gain's atom block picks 0 but its missing block says missing.
  encoded.row(0) << 0.3, 0.4, 0.5, 1, 0, 0.9, 0.1, 0.2, 0.8, 0.9, 0.1;
  // Row 1: gain present (0.3 -> 30, "none"), rate missing.
  encoded.row(1) << 0.3, 0.4, 0.5, 0, 1, 0.1, 0.9, 0.7, 0.3, 0.4, 0.6;
  // Row 2: both present; gain picks the atom 0.
  encoded.row(2) << 0.3, 0.4, 0.5, 0, 1, 0.9, 0.1, 0.7, 0.3, 0.6, 0.4;
  const Table table =
      DecodeFeatures(schema, layout, encoded, Eigen::Vector3i::Zero(), Eigen::MatrixXd());
  EXPECT_TRUE(std::isnan(table.cells(0, 0)));
  EXPECT_DOUBLE_EQ(table.cells(0, 2), 0.4);
  EXPECT_EQ(table.cells(1, 0), 30);
  EXPECT_TRUE(std::isnan(table.cells(1, 2)));
  EXPECT_EQ(table.cells(2, 0), 0);
  EXPECT_DOUBLE_EQ(table.cells(2, 2), 0.4);
  EXPECT_EQ(table.cells(2, 3), 5);
  // Encoding the decoded rows sets each missing block to what was chosen.
  const Eigen::MatrixXd again = EncodeFeatures(schema, layout, table);
  EXPECT_EQ(again(0, 8), 1.0);
  EXPECT_EQ(again(1, 10), 1.0);
  EXPECT_EQ(again(2, 7), 1.0);
  EXPECT_EQ(again(2, 9), 1.0);
}

// ---------------------------------------------------------------- images ---

Schema ImageSchema(int height, int width) {
  Schema::Builder builder;
  builder.AddCategorical("label", {"a", "b", "c"})
      .AddImage("pixels", height, width)
      .SetLabel("label");
  return builder.Build().value();
}

TEST(ImageEncoderTest, PixelsAreNumericDimsOfTheImageSlot) {
  const Schema schema = ImageSchema(3, 5);
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  ASSERT_TRUE(layout.image.has_value());
  EXPECT_EQ(layout.image->column, 1);
  EXPECT_EQ(layout.image->offset, 0);
  EXPECT_EQ(layout.image->pixels, 15);
  EXPECT_EQ(layout.image->height, 3);
  EXPECT_EQ(layout.image->width, 5);
  EXPECT_EQ(layout.image->channels, 1);
  EXPECT_TRUE(layout.numeric.empty());
  EXPECT_EQ(layout.numeric_dim, 15);
  EXPECT_EQ(layout.categorical_dim, 0);
  EXPECT_EQ(layout.total_dim(), 15);
  EXPECT_FALSE(FeatureLayout::ForFeatures(MixedSchema()).image.has_value());
}

TEST(ImageEncoderTest, EncodesLevelsOver255AndDecodesThemBack) {
  const Schema schema = ImageSchema(2, 3);
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  // More rows than one encoding block (128), so the blocked copy is covered.
  const int n = 300;
  PublicRng rng(7);
  Table table;
  table.cells = Eigen::MatrixXd::Zero(n, 2);
  table.pixels.resize(n * 6);
  for (int i = 0; i < n; ++i) {
    table.cells(i, 0) = i % 3;
    for (int p = 0; p < 6; ++p) {
      table.pixels[i * 6 + p] = static_cast<uint8_t>(rng.Uniform() * 256.0);
    }
  }
  const Eigen::MatrixXd encoded = EncodeFeatures(schema, layout, table);
  ASSERT_EQ(encoded.rows(), n);
  ASSERT_EQ(encoded.cols(), 6);
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < 6; ++p) {
      ASSERT_EQ(encoded(i, p), table.pixels[i * 6 + p] / 255.0) << i << " " << p;
    }
  }
  const Eigen::VectorXi labels = ExtractLabels(schema, table);
  const Table decoded = DecodeFeatures(schema, layout, encoded, labels, Eigen::MatrixXd());
  EXPECT_EQ(decoded.pixels, table.pixels);
  EXPECT_EQ(decoded.cells.col(0), table.cells.col(0));
  EXPECT_EQ(decoded.cells.col(1), Eigen::VectorXd::Zero(n));
}

TEST(ImageEncoderTest, DecodeClampsGeneratorValuesAndRounds) {
  const Schema schema = ImageSchema(1, 6);
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  Eigen::MatrixXd generated(1, 6);
  generated << -0.5, 1.7, std::nan(""), 0.5, 1.0 / 255.0 * 0.49, 254.6 / 255.0;
  const Table decoded =
      DecodeFeatures(schema, layout, generated, Eigen::VectorXi::Constant(1, 2), Eigen::MatrixXd());
  EXPECT_EQ(decoded.pixels, (std::vector<uint8_t>{0, 255, 0, 128, 0, 255}));
  EXPECT_EQ(decoded.cells(0, 0), 2);
}

}  // namespace
}  // namespace dpcurator::data
