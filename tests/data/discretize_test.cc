// Atoms and bins in the schema (validation) and the discrete domain of
// marginal methods (core/data/discretize.h).

#include "core/data/discretize.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "proto/convert.h"

#ifndef DPC_SOURCE_DIR
#error "DPC_SOURCE_DIR must be defined by the build (tests/data/CMakeLists.txt)"
#endif

namespace dpcurator::data {
namespace {

std::string DiscretizeBuildError(const Schema::Builder& builder) {
  auto schema = builder.Build();
  EXPECT_FALSE(schema.ok());
  return std::string(schema.status().message());
}

TEST(SchemaAtomsTest, ValidatesAtomsAndBins) {
  auto base = [] {
    Schema::Builder b;
    b.AddNumeric("hours", 1, 99, /*integer=*/true).AddCategorical("sex", {"F", "M"});
    return b;
  };
  EXPECT_TRUE(base().SetAtoms("hours", {1, 40, 99}).SetBins("hours", {10, 40.5}).Build().ok());
  EXPECT_NE(DiscretizeBuildError(base().SetAtoms("hours", {0})).find("inside the declared bounds"),
            std::string::npos);
  EXPECT_NE(DiscretizeBuildError(base().SetAtoms("hours", {40, 20})).find("strictly increasing"),
            std::string::npos);
  EXPECT_NE(DiscretizeBuildError(base().SetAtoms("hours", {40, 40})).find("strictly increasing"),
            std::string::npos);
  EXPECT_NE(DiscretizeBuildError(base().SetAtoms("hours", {40.5})).find("whole numbers"),
            std::string::npos);
  EXPECT_NE(DiscretizeBuildError(base().SetBins("hours", {1})).find("strictly inside"), std::string::npos);
  EXPECT_NE(DiscretizeBuildError(base().SetBins("hours", {50, 20})).find("strictly increasing"),
            std::string::npos);
  EXPECT_NE(DiscretizeBuildError(base().SetBins("sex", {0.5})).find("only numeric columns"),
            std::string::npos);
  EXPECT_NE(DiscretizeBuildError(base().SetAtoms("nope", {1})).find("unknown column 'nope'"),
            std::string::npos);
}

TEST(SchemaAtomsTest, FingerprintChangesOnlyWhenDeclared) {
  Schema::Builder plain;
  plain.AddNumeric("x", 0, 10);
  Schema::Builder with_atoms = plain;
  with_atoms.SetAtoms("x", {0});
  Schema::Builder with_bins = plain;
  with_bins.SetBins("x", {5});
  const auto a = plain.Build().value().Fingerprint();
  EXPECT_NE(a, with_atoms.Build().value().Fingerprint());
  EXPECT_NE(a, with_bins.Build().value().Fingerprint());
  EXPECT_NE(with_atoms.Build().value().Fingerprint(), with_bins.Build().value().Fingerprint());
}

Schema DiscretizeSchema() {
  Schema::Builder b;
  b.AddNumeric("hours", 1, 99, true)
      .SetAtoms("hours", {40})
      .SetBins("hours", {20, 40, 60})
      .AddNumeric("real", 0.0, 1.0)
      .SetAtoms("real", {0.0, 0.5})
      .SetBins("real", {0.25})
      .AddNumeric("small", 1, 5, true)
      .AddNumeric("wide", 0, 1000, true)
      .AddCategorical("c", {"a", "b"}, /*nullable=*/true);
  return b.Build().value();
}

TEST(DiscretizerTest, DomainAndCodes) {
  const Schema schema = DiscretizeSchema();
  const Discretizer d = Discretizer::Create(schema).value();
  // hours: atom 40 + bins [1,20) [20,40) [40,60) [60,99].
  EXPECT_EQ(d.domain_size(0), 5);
  EXPECT_EQ(d.Code(0, 40), 0);
  EXPECT_EQ(d.Code(0, 1), 1);
  EXPECT_EQ(d.Code(0, 19), 1);
  EXPECT_EQ(d.Code(0, 20), 2);
  EXPECT_EQ(d.Code(0, 39), 2);
  EXPECT_EQ(d.Code(0, 41), 3);
  EXPECT_EQ(d.Code(0, 60), 4);
  EXPECT_EQ(d.Code(0, 99), 4);
  EXPECT_EQ(d.CellName(0, 0), "40");
  EXPECT_EQ(d.CellName(0, 2), "[20, 40)");
  EXPECT_EQ(d.CellName(0, 4), "[60, 99]");
  // real: atoms 0, 0.5 + bins [0, 0.25) [0.25, 1].
  EXPECT_EQ(d.domain_size(1), 4);
  EXPECT_EQ(d.Code(1, 0.0), 0);
  EXPECT_EQ(d.Code(1, 0.5), 1);
  EXPECT_EQ(d.Code(1, 0.1), 2);
  EXPECT_EQ(d.Code(1, 1.0), 3);
  // small: one cell per integer (default).
  EXPECT_EQ(d.domain_size(2), 5);
  for (int v = 1; v <= 5; ++v) EXPECT_EQ(d.Code(2, v), v - 1);
  // wide: kDefaultNumericBins equal-width bins.
  EXPECT_EQ(d.domain_size(3), kDefaultNumericBins);
  EXPECT_EQ(d.Code(3, 0), 0);
  EXPECT_EQ(d.Code(3, 1000), kDefaultNumericBins - 1);
  // c: two categories + missing.
  EXPECT_EQ(d.domain_size(4), 3);
  EXPECT_EQ(d.Code(4, 2), 2);
  EXPECT_EQ(d.CellName(4, 1), "b");
}

TEST(DiscretizerTest, DecodeLandsInTheCellAndAvoidsAtoms) {
  const Schema schema = DiscretizeSchema();
  const Discretizer d = Discretizer::Create(schema).value();
  const int rows = 4000;
  Eigen::MatrixXi codes(rows, schema.num_columns());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < schema.num_columns(); ++c) codes(r, c) = r % d.domain_size(c);
  }
  const Table table = d.Decode(codes, 7);
  std::set<double> hours_in_bin_3;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < schema.num_columns(); ++c) {
      const double v = table.cells(r, c);
      ASSERT_EQ(d.Code(c, v), codes(r, c)) << "column " << c << " value " << v;
      if (schema.column(c).integer) {
        EXPECT_EQ(v, std::round(v));
      }
    }
    if (codes(r, 0) == 3) hours_in_bin_3.insert(table.cells(r, 0));
  }
  // [40, 60) without the atom: 41..59, all reached.
  EXPECT_EQ(hours_in_bin_3.size(), 19u);
  EXPECT_EQ(*hours_in_bin_3.begin(), 41);
  // Atoms decode exactly.
  EXPECT_EQ(table.cells(0, 0), 40);
  EXPECT_EQ(table.cells(1, 1), 0.5);
  // Same seed, same table; another seed, another one.
  EXPECT_EQ(d.Decode(codes, 7).cells, table.cells);
  EXPECT_NE(d.Decode(codes, 8).cells, table.cells);
}

// Issue 38: a nullable numeric column has one more cell, last, for
// missing (NaN); it decodes to NaN and is named "missing".
TEST(DiscretizerTest, NullableNumericHasAMissingCellLast) {
  Schema::Builder builder;
  builder.AddNumeric("gain", 0, 100, /*integer=*/true, /*nullable=*/true)
      .AddNumeric("rate", 0, 1, /*integer=*/false, /*nullable=*/true)
      .SetAtoms("gain", {0})
      .SetBins("gain", {50})
      .AddNumeric("plain", 0, 1);
  const Schema schema = builder.Build().value();
  const Discretizer d = Discretizer::Create(schema).value();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // gain: atom 0, [0, 50), [50, 100], missing.
  EXPECT_EQ(d.domain_size(0), 4);
  EXPECT_EQ(d.Code(0, 0), 0);
  EXPECT_EQ(d.Code(0, 7), 1);
  EXPECT_EQ(d.Code(0, 100), 2);
  EXPECT_EQ(d.Code(0, nan), 3);
  EXPECT_EQ(d.CellName(0, 3), "missing");
  EXPECT_EQ(d.CellName(0, 2), "[50, 100]");
  // rate: the default bins, then missing.
  EXPECT_EQ(d.domain_size(1), kDefaultNumericBins + 1);
  EXPECT_EQ(d.Code(1, 1.0), kDefaultNumericBins - 1);
  EXPECT_EQ(d.Code(1, nan), kDefaultNumericBins);
  EXPECT_EQ(d.domain_size(2), kDefaultNumericBins);  // not nullable: unchanged
  Table table;
  table.cells.resize(3, 3);
  table.cells << nan, 0.5, 0.5,  //
      0, nan, 0.5,               //
      60, 0.2, 0.5;
  const Eigen::MatrixXi codes = d.Encode(table);
  EXPECT_EQ(codes(0, 0), 3);
  EXPECT_EQ(codes(1, 1), kDefaultNumericBins);
  const Table decoded = d.Decode(codes, 3);
  EXPECT_TRUE(std::isnan(decoded.cells(0, 0)));
  EXPECT_TRUE(std::isnan(decoded.cells(1, 1)));
  EXPECT_EQ(decoded.cells(1, 0), 0);
  EXPECT_GE(decoded.cells(2, 0), 50);
  EXPECT_EQ(d.Encode(decoded), codes);
}

TEST(DiscretizerTest, AdultSchemaDeclaresAtomsAndBins) {
  auto proto = ReadSchemaFile(DPC_SOURCE_DIR "/schemas/adult.schema.json");
  ASSERT_TRUE(proto.ok()) << proto.status();
  const Schema schema = SchemaFromProto(*proto).value();
  const int gain = *schema.FindColumn("capital-gain");
  const int hours = *schema.FindColumn("hours-per-week");
  const int education_num = *schema.FindColumn("education-num");
  EXPECT_EQ(schema.column(gain).atoms, (std::vector<double>{0, 99999}));
  EXPECT_EQ(schema.column(hours).atoms, std::vector<double>{40});
  // The proto round trip keeps them.
  const Schema again = SchemaFromProto(SchemaToProto(schema)).value();
  EXPECT_EQ(again.Fingerprint(), schema.Fingerprint());
  const Discretizer d = Discretizer::Create(schema).value();
  EXPECT_EQ(d.Code(hours, 40), 0);
  EXPECT_EQ(d.Code(gain, 0), 0);
  EXPECT_EQ(d.domain_size(education_num), 16);  // one cell per level
  for (int v = 1; v <= 16; ++v) EXPECT_EQ(d.Code(education_num, v), v - 1);
}

}  // namespace
}  // namespace dpcurator::data
