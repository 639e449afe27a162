#include "core/data/schema.h"

#include <cmath>
#include <limits>
#include <set>
#include <vector>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace dpcurator::data {
namespace {

std::string BuildError(const Schema::Builder& builder) {
  auto schema = builder.Build();
  EXPECT_FALSE(schema.ok());
  return std::string(schema.status().message());
}

TEST(SchemaBuilderTest, RejectsEmptyAndUnnamed) {
  EXPECT_EQ(BuildError(Schema::Builder()), "Schema must have at least one column");
  Schema::Builder unnamed;
  unnamed.AddNumeric("", 0, 1);
  EXPECT_EQ(BuildError(unnamed), "Column names must be non-empty");
  Schema::Builder only_label;
  only_label.AddCategorical("y", {"a", "b"}).SetLabel("y");
  EXPECT_EQ(BuildError(only_label), "Schema must have at least one feature column");
}

TEST(SchemaBuilderTest, RejectsDuplicateNames) {
  Schema::Builder builder;
  builder.AddNumeric("age", 0, 100).AddCategorical("age", {"young", "old"});
  EXPECT_EQ(BuildError(builder), "Column name 'age' is declared twice");
}

TEST(SchemaBuilderTest, RejectsBadBounds) {
  Schema::Builder equal;
  equal.AddNumeric("x", 1, 1);
  EXPECT_EQ(BuildError(equal),
            "Numeric column 'x' needs finite declared bounds with lower < upper, got [1, 1]");
  Schema::Builder reversed;
  reversed.AddNumeric("x", 2, -2);
  EXPECT_EQ(BuildError(reversed),
            "Numeric column 'x' needs finite declared bounds with lower < upper, got [2, -2]");
  Schema::Builder infinite;
  infinite.AddNumeric("x", 0, std::numeric_limits<double>::infinity());
  EXPECT_EQ(BuildError(infinite),
            "Numeric column 'x' needs finite declared bounds with lower < upper, got [0, inf]");
  Schema::Builder nan;
  nan.AddNumeric("x", std::nan(""), 1);
  EXPECT_NE(BuildError(nan).find("needs finite declared bounds"), std::string::npos);
}

TEST(SchemaBuilderTest, RejectsBadCategories) {
  Schema::Builder empty;
  empty.AddCategorical("c", {});
  EXPECT_EQ(BuildError(empty), "Categorical column 'c' must declare its categories");
  Schema::Builder twice;
  twice.AddCategorical("c", {"a", "b", "a"});
  EXPECT_EQ(BuildError(twice), "Categorical column 'c' declares category 'a' twice");
  Schema::Builder missing_token;
  missing_token.AddCategorical("c", {"a", "?"});
  EXPECT_EQ(BuildError(missing_token),
            "Categorical column 'c' declares category '?', which is a missing-value token; "
            "declare the column nullable instead");
  // With other missing tokens, "?" is an ordinary category.
  Schema::Builder custom;
  custom.AddCategorical("c", {"a", "?"}).SetMissingTokens({"NA"});
  EXPECT_TRUE(custom.Build().ok());
}

// Issue 24, item 4: every release plan rebuilds the stored schema, so
// building one is linear in its size. The alias check scanned the column's
// categories once per alias (O(aliases x categories): 4e8 string
// comparisons here, 4e9 at the input limits' 65,536 of each); it now looks
// each target up in a set. The result is unchanged: every alias kept, an
// alias of an undeclared category or an unknown column still refused.
TEST(SchemaBuilderTest, ManyAliasesOfManyCategoriesBuildWithEveryAliasChecked) {
  constexpr int kCount = 20000;
  std::vector<std::string> categories;
  for (int i = 0; i < kCount; ++i) categories.push_back(absl::StrCat("c", i));
  Schema::Builder builder;
  builder.AddCategorical("wide", categories).AddNumeric("x", 0, 1);
  for (int i = 0; i < kCount; ++i) {
    builder.AddAlias("wide", absl::StrCat("alias", i), categories[kCount - 1 - i]);
  }
  auto schema = builder.Build();
  ASSERT_TRUE(schema.ok()) << schema.status();
  ASSERT_EQ(schema->column(0).aliases.size(), static_cast<size_t>(kCount));
  auto cell = schema->ParseCell(0, "alias0");
  ASSERT_TRUE(cell.ok()) << cell.status();
  EXPECT_EQ(cell->value, kCount - 1);

  builder.AddAlias("wide", "stray", "not-declared");
  EXPECT_EQ(BuildError(builder),
            "Alias 'stray' of column 'wide' targets undeclared category 'not-declared'");
  Schema::Builder unknown;
  unknown.AddCategorical("c", {"a", "b"}).AddAlias("d", "x", "a");
  EXPECT_EQ(BuildError(unknown), "Alias refers to unknown column 'd'");
}

// Issue 36, item 9: an alias spelled like a declared category maps one
// declared category onto another (a cell "a" is category a, so the alias
// a -> b says the opposite of the schema); and one spelling with two
// targets is ambiguous. Both are refused; other spellings still work.
TEST(SchemaBuilderTest, RejectsAliasesThatAreDeclaredCategoriesOrRepeated) {
  Schema::Builder onto;
  onto.AddCategorical("c", {"a", "b"}).AddAlias("c", "a", "b");
  EXPECT_EQ(BuildError(onto),
            "Alias 'a' of column 'c' is itself a declared category; an alias must be another "
            "spelling, not map one declared category onto another");
  Schema::Builder self;
  self.AddCategorical("c", {"a", "b"}).AddAlias("c", "b", "b");
  EXPECT_NE(BuildError(self).find("is itself a declared category"), std::string::npos);
  Schema::Builder twice;
  twice.AddCategorical("c", {"a", "b"}).AddAlias("c", "x", "a").AddAlias("c", "x", "b");
  EXPECT_EQ(BuildError(twice), "Alias 'x' of column 'c' is declared twice");
  // The same spelling on two columns is two aliases, and a category of one
  // column may be an alias on another.
  Schema::Builder fine;
  fine.AddCategorical("c", {"a", "b"})
      .AddCategorical("d", {"x", "y"})
      .AddAlias("c", "z", "a")
      .AddAlias("d", "z", "y")
      .AddAlias("d", "a", "x");
  auto schema = fine.Build();
  ASSERT_TRUE(schema.ok()) << schema.status();
  auto cell = schema->ParseCell(1, "a");
  ASSERT_TRUE(cell.ok()) << cell.status();
  EXPECT_EQ(cell->value, 0);
}

TEST(SchemaBuilderTest, RejectsBadLabels) {
  Schema::Builder numeric;
  numeric.AddNumeric("x", 0, 1).AddNumeric("y", 0, 1).SetLabel("y");
  const std::string message =
      "Label column 'y' must be categorical, not nullable, with at least two categories";
  EXPECT_EQ(BuildError(numeric), message);
  Schema::Builder nullable;
  nullable.AddNumeric("x", 0, 1).AddCategorical("y", {"a", "b"}, true).SetLabel("y");
  EXPECT_EQ(BuildError(nullable), message);
  Schema::Builder one_class;
  one_class.AddNumeric("x", 0, 1).AddCategorical("y", {"a"}).SetLabel("y");
  EXPECT_EQ(BuildError(one_class), message);
  Schema::Builder undeclared;
  undeclared.AddNumeric("x", 0, 1).SetLabel("z");
  EXPECT_EQ(BuildError(undeclared), "Label column 'z' is not declared");
}

TEST(SchemaBuilderTest, RejectsBadAliases) {
  Schema::Builder undeclared_category;
  undeclared_category.AddNumeric("x", 0, 1)
      .AddCategorical("Y", {"<=50K", ">50K"})
      .AddAlias("Y", ">50K.", ">50k");
  EXPECT_EQ(BuildError(undeclared_category),
            "Alias '>50K.' of column 'Y' targets undeclared category '>50k'");
  Schema::Builder unknown_column;
  unknown_column.AddNumeric("x", 0, 1).AddAlias("Z", "a", "b");
  EXPECT_EQ(BuildError(unknown_column), "Alias refers to unknown column 'Z'");
  Schema::Builder numeric;
  numeric.AddNumeric("x", 0, 1).AddAlias("x", "one", "1");
  EXPECT_EQ(BuildError(numeric), "Alias on column 'x', which is not categorical");
}

Schema AdultLike() {
  Schema::Builder builder;
  builder.AddNumeric("age", 17, 90, /*integer=*/true)
      .AddCategorical("workclass", {"Private", "State-gov"}, /*nullable=*/true)
      .AddNumeric("hours", 1, 99)
      .AddCategorical("Y", {"<=50K", ">50K"})
      .AddAlias("Y", ">50K.", ">50K")
      .AddAlias("Y", "<=50K.", "<=50K")
      .SetLabel("Y");
  return builder.Build().value();
}

TEST(SchemaTest, Accessors) {
  const Schema schema = AdultLike();
  EXPECT_EQ(schema.num_columns(), 4);
  EXPECT_EQ(schema.label_index(), 3);
  EXPECT_EQ(schema.num_classes(), 2);
  EXPECT_EQ(schema.feature_indices(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(schema.NumLevels(1), 3);  // two categories and the missing level
  EXPECT_EQ(schema.NumLevels(3), 2);
  EXPECT_EQ(schema.LevelName(1, 1), "State-gov");
  EXPECT_EQ(schema.LevelName(1, 2), "");
  EXPECT_EQ(schema.FindColumn("hours"), 2);
  EXPECT_EQ(schema.FindColumn("nope"), std::nullopt);
  Schema::Builder unlabelled;
  unlabelled.AddNumeric("x", 0, 1);
  EXPECT_EQ(unlabelled.Build().value().num_classes(), 1);
}

TEST(ParseCellTest, NumericTrimClampAndErrors) {
  const Schema schema = AdultLike();
  auto cell = schema.ParseCell(0, "  39\t").value();
  EXPECT_EQ(cell.value, 39);
  EXPECT_FALSE(cell.clamped);
  cell = schema.ParseCell(0, "17").value();  // the bound itself is inside
  EXPECT_EQ(cell.value, 17);
  EXPECT_FALSE(cell.clamped);
  cell = schema.ParseCell(0, "5").value();
  EXPECT_EQ(cell.value, 17);
  EXPECT_TRUE(cell.clamped);
  cell = schema.ParseCell(0, " 1e9 ").value();
  EXPECT_EQ(cell.value, 90);
  EXPECT_TRUE(cell.clamped);
  cell = schema.ParseCell(2, "40.5").value();
  EXPECT_EQ(cell.value, 40.5);
  EXPECT_EQ(schema.ParseCell(0, "?").status().message(),
            "Column 'age': missing value, and the column is not nullable");
  EXPECT_EQ(schema.ParseCell(0, "  ").status().message(),
            "Column 'age': missing value, and the column is not nullable");
  EXPECT_EQ(schema.ParseCell(0, "forty").status().message(),
            "Column 'age': 'forty' is not a finite number");
  EXPECT_FALSE(schema.ParseCell(0, "inf").ok());
  EXPECT_FALSE(schema.ParseCell(0, "nan").ok());
  EXPECT_FALSE(schema.ParseCell(0, "1e999").ok());
  EXPECT_EQ(schema.ParseCell(7, "1").status().code(), absl::StatusCode::kOutOfRange);
}

TEST(ParseCellTest, CategoricalMissingAndAliases) {
  const Schema schema = AdultLike();
  EXPECT_EQ(schema.ParseCell(1, " State-gov ").value().value, 1);
  // Nullable: "?" and "" are the missing level, after the declared ones.
  EXPECT_EQ(schema.ParseCell(1, " ?").value().value, 2);
  EXPECT_EQ(schema.ParseCell(1, "").value().value, 2);
  // Not nullable.
  EXPECT_EQ(schema.ParseCell(3, "?").status().message(),
            "Column 'Y': missing value, and the column is not nullable");
  // Aliases (Adult's test file writes ">50K.").
  EXPECT_EQ(schema.ParseCell(3, ">50K.").value().value, 1);
  EXPECT_EQ(schema.ParseCell(3, " <=50K.").value().value, 0);
  EXPECT_EQ(schema.ParseCell(3, ">50K").value().value, 1);
  // Case matters; categories are never learned from rows.
  auto unknown = schema.ParseCell(1, "private");
  EXPECT_EQ(unknown.status().message(),
            "Column 'workclass': 'private' is not a declared category (declare it in the "
            "schema; categories are never learned from rows)");
}

TEST(ParseCellTest, CustomMissingTokens) {
  Schema::Builder builder;
  builder.AddCategorical("c", {"a", "b"}, true).SetMissingTokens({"NA"});
  const Schema schema = builder.Build().value();
  EXPECT_EQ(schema.ParseCell(0, "NA").value().value, 2);
  EXPECT_FALSE(schema.ParseCell(0, "?").ok());  // no longer a missing token
  EXPECT_FALSE(schema.ParseCell(0, "").ok());
}

TEST(FormatCellTest, LevelsIntegersAndMissing) {
  const Schema schema = AdultLike();
  EXPECT_EQ(schema.FormatCell(0, 38.6), "39");
  EXPECT_EQ(schema.FormatCell(2, 40.25), "40.25");
  EXPECT_EQ(schema.FormatCell(1, 0), "Private");
  // A missing category is written as the first missing token, "" by default
  // (an empty cell, as spreadsheets and pandas read it), not "?".
  EXPECT_EQ(schema.FormatCell(1, 2), "");
  EXPECT_EQ(schema.FormatCell(3, 1), ">50K");
}

// Issue 38: a numeric column may be nullable. Its missing cell is NaN
// (core/data/table.h), written back as an empty cell that parses as
// missing again; a numeric column that is not nullable still refuses it.
TEST(ParseCellTest, NullableNumericMissingIsNaNAndRoundTrips) {
  Schema::Builder builder;
  builder.AddNumeric("income", 0, 1e6, /*integer=*/false, /*nullable=*/true)
      .AddNumeric("age", 0, 120, /*integer=*/true, /*nullable=*/true)
      .AddNumeric("hours", 0, 99);
  auto built = builder.Build();
  ASSERT_TRUE(built.ok()) << built.status();
  const Schema& schema = *built;
  EXPECT_TRUE(schema.column(0).nullable);
  for (const char* token : {"", "?", "  ", " ? "}) {
    auto cell = schema.ParseCell(0, token);
    ASSERT_TRUE(cell.ok()) << cell.status();
    EXPECT_TRUE(std::isnan(cell->value)) << token;
    EXPECT_FALSE(cell->clamped);
  }
  EXPECT_EQ(schema.ParseCell(0, "2e6").value().value, 1e6);  // still clamped
  EXPECT_FALSE(schema.ParseCell(0, "nan").ok());  // "nan" is text, not missing
  EXPECT_EQ(schema.ParseCell(2, "").status().message(),
            "Column 'hours': missing value, and the column is not nullable");
  // Written as an empty cell (the first missing token), read back as NaN.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int c : {0, 1}) {
    const std::string text = schema.FormatCell(c, nan);
    EXPECT_EQ(text, "") << c;
    EXPECT_TRUE(std::isnan(schema.ParseCell(c, text).value().value)) << c;
  }
  EXPECT_EQ(schema.FormatCell(1, 41.4), "41");
  // Declared: the fingerprint says so; undeclared, prints are unchanged.
  Schema::Builder plain;
  plain.AddNumeric("income", 0, 1e6).AddNumeric("age", 0, 120, true).AddNumeric("hours", 0, 99);
  EXPECT_NE(plain.Build().value().Fingerprint(), schema.Fingerprint());
  // The label must still be categorical and not nullable.
  Schema::Builder label;
  label.AddNumeric("x", 0, 1, false, true).AddCategorical("y", {"a", "b"}).SetLabel("y");
  EXPECT_TRUE(label.Build().ok());
}

TEST(FingerprintTest, StableAndSensitiveToEveryDeclaredProperty) {
  const Schema a = AdultLike();
  const Schema b = AdultLike();
  EXPECT_EQ(a.Fingerprint(), b.Fingerprint());
  EXPECT_EQ(a.FingerprintHex(), b.FingerprintHex());
  EXPECT_EQ(a.FingerprintHex().size(), 16u);
  EXPECT_EQ(a.FingerprintHex().find_first_not_of("0123456789abcdef"), std::string::npos);
  // Pinned: artefacts and models store this value, so the canonical text must
  // not drift between versions.
  EXPECT_EQ(a.FingerprintHex(), "e2129b9b8dd89233");

  auto variant = [](auto edit) {
    Schema::Builder builder;
    edit(builder);
    return builder.Build().value().FingerprintHex();
  };
  const std::string base = a.FingerprintHex();
  std::set<std::string> seen = {base};
  const std::vector<std::string> variants = {
      variant([](Schema::Builder& s) {  // bound
        s.AddNumeric("age", 17, 91, true).AddCategorical("workclass", {"Private", "State-gov"}, true)
            .AddNumeric("hours", 1, 99).AddCategorical("Y", {"<=50K", ">50K"}).SetLabel("Y");
      }),
      variant([](Schema::Builder& s) {  // integer flag
        s.AddNumeric("age", 17, 90, false).AddCategorical("workclass", {"Private", "State-gov"}, true)
            .AddNumeric("hours", 1, 99).AddCategorical("Y", {"<=50K", ">50K"}).SetLabel("Y");
      }),
      variant([](Schema::Builder& s) {  // nullable flag
        s.AddNumeric("age", 17, 90, true).AddCategorical("workclass", {"Private", "State-gov"}, false)
            .AddNumeric("hours", 1, 99).AddCategorical("Y", {"<=50K", ">50K"}).SetLabel("Y");
      }),
      variant([](Schema::Builder& s) {  // category order
        s.AddNumeric("age", 17, 90, true).AddCategorical("workclass", {"State-gov", "Private"}, true)
            .AddNumeric("hours", 1, 99).AddCategorical("Y", {"<=50K", ">50K"}).SetLabel("Y");
      }),
      variant([](Schema::Builder& s) {  // column name
        s.AddNumeric("Age", 17, 90, true).AddCategorical("workclass", {"Private", "State-gov"}, true)
            .AddNumeric("hours", 1, 99).AddCategorical("Y", {"<=50K", ">50K"}).SetLabel("Y");
      }),
      variant([](Schema::Builder& s) {  // no label
        s.AddNumeric("age", 17, 90, true).AddCategorical("workclass", {"Private", "State-gov"}, true)
            .AddNumeric("hours", 1, 99).AddCategorical("Y", {"<=50K", ">50K"});
      }),
      variant([](Schema::Builder& s) {  // column order
        s.AddCategorical("workclass", {"Private", "State-gov"}, true).AddNumeric("age", 17, 90, true)
            .AddNumeric("hours", 1, 99).AddCategorical("Y", {"<=50K", ">50K"}).SetLabel("Y");
      }),
      variant([](Schema::Builder& s) {  // type
        s.AddNumeric("age", 17, 90, true).AddCategorical("workclass", {"Private", "State-gov"}, true)
            .AddCategorical("hours", {"1", "99"}).AddCategorical("Y", {"<=50K", ">50K"}).SetLabel("Y");
      }),
  };
  for (size_t i = 0; i < variants.size(); ++i) {
    EXPECT_TRUE(seen.insert(variants[i]).second) << "variant " << i << " collides";
  }
}

// ---------------------------------------------------------------- images ---

Schema::Builder ImageBuilder(int height, int width, int channels = 1) {
  Schema::Builder builder;
  builder.AddImage("pixels", height, width, channels)
      .AddCategorical("label", {"0", "1", "2"})
      .SetLabel("label");
  return builder;
}

TEST(SchemaImageTest, AcceptsAnImageAndItsLabel) {
  auto schema = ImageBuilder(28, 28).Build();
  ASSERT_TRUE(schema.ok()) << schema.status();
  ASSERT_TRUE(schema->image_index().has_value());
  EXPECT_EQ(*schema->image_index(), 0);
  EXPECT_EQ(schema->pixels_per_image(), 784);
  EXPECT_EQ(schema->column(0).type, ColumnType::kImage);
  EXPECT_EQ(schema->num_classes(), 3);
  EXPECT_EQ(schema->feature_indices(), std::vector<int>{0});
  // Unlabelled image schemas are fine too.
  Schema::Builder bare;
  bare.AddImage("x", 1, 1);
  ASSERT_TRUE(bare.Build().ok());
  EXPECT_EQ(bare.Build()->pixels_per_image(), 1);
  // Largest accepted: 4096 x 256 = 2^20 pixels.
  EXPECT_TRUE(ImageBuilder(4096, 256).Build().ok());
  // A tabular schema has no image.
  Schema::Builder tabular;
  tabular.AddNumeric("x", 0, 1);
  EXPECT_FALSE(tabular.Build()->image_index().has_value());
  EXPECT_EQ(tabular.Build()->pixels_per_image(), 0);
}

TEST(SchemaImageTest, RefusesShapesOutsideTheDeclaredBounds) {
  EXPECT_EQ(BuildError(ImageBuilder(0, 28)),
            "Image column 'pixels' declares 0 x 28 pixels; height and width must each be in "
            "[1, 4096]");
  EXPECT_EQ(BuildError(ImageBuilder(28, 4097)),
            "Image column 'pixels' declares 28 x 4097 pixels; height and width must each be in "
            "[1, 4096]");
  EXPECT_EQ(BuildError(ImageBuilder(28, -1)),
            "Image column 'pixels' declares 28 x -1 pixels; height and width must each be in "
            "[1, 4096]");
  EXPECT_EQ(BuildError(ImageBuilder(4096, 257)),
            "Image column 'pixels' declares 1052672 pixels per image; at most 1048576 (height x "
            "width x channels) are accepted");
  auto colour = ImageBuilder(28, 28, 3).Build();
  ASSERT_FALSE(colour.ok());
  EXPECT_EQ(colour.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(colour.status().message().find("only grey images (1 channel)"), std::string::npos);
  EXPECT_FALSE(ImageBuilder(28, 28, 0).Build().ok());
}

TEST(SchemaImageTest, AnImageSchemaHoldsTheImageAndItsLabelOnly) {
  Schema::Builder two;
  two.AddImage("a", 2, 2).AddImage("b", 2, 2);
  EXPECT_EQ(BuildError(two),
            "Image column 'b' is the schema's second image column; declare at most one");
  Schema::Builder extra;
  extra.AddImage("pixels", 2, 2).AddNumeric("age", 0, 1);
  EXPECT_EQ(BuildError(extra),
            "Column 'age' is declared beside the image column 'pixels'; an image schema holds "
            "the image column and, optionally, its label column only");
  Schema::Builder unlabelled_category;
  unlabelled_category.AddImage("pixels", 2, 2).AddCategorical("y", {"a", "b"});
  EXPECT_FALSE(unlabelled_category.Build().ok());
  // The image cannot be the label.
  Schema::Builder image_label;
  image_label.AddImage("pixels", 2, 2).SetLabel("pixels");
  EXPECT_FALSE(image_label.Build().ok());
}

TEST(SchemaImageTest, ImageCellsAreNotText) {
  const Schema schema = ImageBuilder(2, 2).Build().value();
  auto cell = schema.ParseCell(0, "0.5");
  ASSERT_FALSE(cell.ok());
  EXPECT_NE(cell.status().message().find("upload --idx"), std::string::npos);
  EXPECT_TRUE(schema.ParseCell(1, "2").ok());
  EXPECT_EQ(schema.FormatCell(0, 0.0), "");
}

TEST(SchemaImageTest, FingerprintDependsOnTheShape) {
  const uint64_t base = ImageBuilder(28, 28).Build()->Fingerprint();
  EXPECT_EQ(ImageBuilder(28, 28).Build()->Fingerprint(), base);
  EXPECT_NE(ImageBuilder(32, 32).Build()->Fingerprint(), base);
  EXPECT_NE(ImageBuilder(28, 27).Build()->Fingerprint(), base);
  EXPECT_NE(ImageBuilder(27, 28).Build()->Fingerprint(), base);
  // 14 x 56 has the same pixel count as 28 x 28, and is another schema.
  EXPECT_NE(ImageBuilder(14, 56).Build()->Fingerprint(), base);
  // Not the same as a numeric column of that name either.
  Schema::Builder numeric;
  numeric.AddNumeric("pixels", 0, 1).AddCategorical("label", {"0", "1", "2"}).SetLabel("label");
  EXPECT_NE(numeric.Build()->Fingerprint(), base);
}

// Issue 38 (docs/schema.md "Open columns"): an open categorical column.
// FNV-1a of "c|cat|a\x1fother|0\nlabel=-1", the canonical text before open columns.
constexpr char kClosedPrintBeforeOpenColumns[] = "906a0b09c853f5b9";

TEST(SchemaOpenColumnTest, BuildRules) {
  Schema::Builder none;
  none.AddOpenCategorical("city", {}).AddNumeric("x", 0, 1);
  ASSERT_TRUE(none.Build().ok()) << none.Build().status();
  EXPECT_TRUE(none.Build()->column(0).open);
  EXPECT_TRUE(none.Build()->has_open_columns());
  Schema::Builder fitted;
  fitted.AddOpenCategorical("city", {"Paris", "Rome", "other"});
  EXPECT_TRUE(fitted.Build().ok()) << fitted.Build().status();
  Schema::Builder one;
  one.AddOpenCategorical("city", {"other"});
  EXPECT_NE(BuildError(one).find("declares one category"), std::string::npos);
  Schema::Builder label;
  label.AddNumeric("x", 0, 1).AddOpenCategorical("y", {"a", "b", "other"}).SetLabel("y");
  EXPECT_NE(BuildError(label).find("is open"), std::string::npos);
  // An ordinary categorical still needs its categories.
  Schema::Builder closed;
  closed.AddCategorical("c", {});
  EXPECT_NE(BuildError(closed).find("must declare its categories"), std::string::npos);
  Schema::Builder plain;
  plain.AddCategorical("c", {"a", "b"});
  EXPECT_FALSE(plain.Build()->has_open_columns());
}

TEST(SchemaOpenColumnTest, ParseCellWithoutCategoriesKeepsNoLevel) {
  Schema::Builder builder;
  builder.AddOpenCategorical("city", {}).AddOpenCategorical("code", {}, /*nullable=*/true);
  const Schema schema = builder.Build().value();
  auto cell = schema.ParseCell(0, " Lyon ");
  ASSERT_TRUE(cell.ok()) << cell.status();
  EXPECT_TRUE(std::isnan(cell->value));
  EXPECT_TRUE(schema.ParseCell(0, std::string(kMaxOpenValueBytes, 'a')).ok());
  const auto long_value = schema.ParseCell(0, std::string(kMaxOpenValueBytes + 1, 'a'));
  ASSERT_FALSE(long_value.ok());
  EXPECT_NE(long_value.status().message().find("kMaxOpenValueBytes"), std::string::npos);
  // Missing: an error unless nullable, then NaN too (no missing level yet).
  EXPECT_FALSE(schema.ParseCell(0, "?").ok());
  auto missing = schema.ParseCell(1, "?");
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(std::isnan(missing->value));
}

TEST(SchemaOpenColumnTest, ParseCellWithCategoriesMapsOthersToTheCatchAll) {
  Schema::Builder builder;
  builder.AddOpenCategorical("city", {"Paris", "Rome", "other"}, /*nullable=*/true)
      .AddAlias("city", "Roma", "Rome");
  const Schema schema = builder.Build().value();
  EXPECT_EQ(schema.ParseCell(0, "Paris")->value, 0);
  EXPECT_EQ(schema.ParseCell(0, "Roma")->value, 1);
  EXPECT_EQ(schema.ParseCell(0, "Lyon")->value, 2);   // unlisted: the catch-all
  EXPECT_EQ(schema.ParseCell(0, "other")->value, 2);
  EXPECT_EQ(schema.ParseCell(0, "")->value, 3);       // the missing level
  EXPECT_EQ(schema.NumLevels(0), 4);
  EXPECT_FALSE(schema.ParseCell(0, std::string(kMaxOpenValueBytes + 1, 'a')).ok());
}

TEST(SchemaOpenColumnTest, RequireCategoriesNamesTheColumnAndTheCommands) {
  Schema::Builder builder;
  builder.AddNumeric("x", 0, 1).AddOpenCategorical("city", {});
  const absl::Status status = builder.Build()->RequireCategoriesForOpenColumns();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("column 'city' is open and has no categories yet"),
            std::string::npos);
  EXPECT_NE(status.message().find("schema fit --dataset ID --categories city"),
            std::string::npos);
  EXPECT_NE(status.message().find("datasets set-categories"), std::string::npos);
  Schema::Builder fitted;
  fitted.AddNumeric("x", 0, 1).AddOpenCategorical("city", {"a", "other"});
  EXPECT_TRUE(fitted.Build()->RequireCategoriesForOpenColumns().ok());
}

TEST(SchemaOpenColumnTest, FingerprintMarksOpenOnly) {
  Schema::Builder closed;
  closed.AddCategorical("c", {"a", "other"});
  Schema::Builder open;
  open.AddOpenCategorical("c", {"a", "other"});
  EXPECT_NE(closed.Build()->Fingerprint(), open.Build()->Fingerprint());
  // A schema without open columns keeps the print it always had (this
  // value was computed before open columns existed).
  EXPECT_EQ(closed.Build()->FingerprintHex(), kClosedPrintBeforeOpenColumns);
}

}  // namespace
}  // namespace dpcurator::data
