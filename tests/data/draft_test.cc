#include "core/data/draft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/data/discretize.h"

namespace dpcurator::data {
namespace {

TEST(DraftTest, InfersTypesBoundsCategoriesAndMarksWhatCameFromRows) {
  SchemaDrafter drafter({"age", "income", "colour", "y"}, {});
  const std::vector<std::vector<std::string>> rows = {
      {"31", "1000.5", "red", "yes"}, {"45", "20", "?", "no"}, {" 19 ", "3e3", "blue", "no"}};
  for (const auto& row : rows) ASSERT_TRUE(drafter.AddRow(row).ok());
  auto draft = drafter.Finish(std::string("y"));
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_EQ(draft->rows, 3);
  ASSERT_EQ(draft->columns.size(), 4u);
  const DraftColumn& age = draft->columns[0];
  EXPECT_EQ(age.type, ColumnType::kNumeric);
  EXPECT_EQ(age.lower, 19);
  EXPECT_EQ(age.upper, 45);
  EXPECT_TRUE(age.integer);
  EXPECT_TRUE(age.data_derived);
  EXPECT_FALSE(draft->columns[1].integer);
  EXPECT_EQ(draft->columns[1].upper, 3000);
  const DraftColumn& colour = draft->columns[2];
  EXPECT_EQ(colour.type, ColumnType::kCategorical);
  EXPECT_EQ(colour.categories, (std::vector<std::string>{"blue", "red"}));
  EXPECT_TRUE(colour.nullable);
  EXPECT_TRUE(colour.data_derived);
  EXPECT_EQ(draft->label, "y");
}

// Issue 25: a column that is 40% zeros gets the atom 0 suggested (marked
// data-derived with its bounds); one under the 20% share does not; each
// category's count is kept (for the report) so that a stray shows as rare.
TEST(DraftTest, SuggestsZeroAtomAndCountsCategories) {
  SchemaDrafter drafter({"gain", "hours", "sex"}, {});
  for (int i = 0; i < 10; ++i) {
    const std::string gain = i < 4 ? "0" : std::to_string(100 * i);
    const std::string hours = i < 1 ? "0" : std::to_string(30 + i);
    const std::string sex = i == 9 ? "femal" : (i % 2 == 0 ? "Female" : "Male");
    ASSERT_TRUE(drafter.AddRow({gain, hours, sex}).ok());
  }
  auto draft = drafter.Finish(std::nullopt);
  ASSERT_TRUE(draft.ok()) << draft.status();
  const DraftColumn& gain = draft->columns[0];
  EXPECT_EQ(gain.atoms, std::vector<double>{0.0});
  EXPECT_TRUE(gain.data_derived);
  ASSERT_FALSE(gain.notes.empty());
  EXPECT_NE(gain.notes.back().find("4 of 10 values are exactly 0"), std::string::npos)
      << gain.notes.back();
  EXPECT_TRUE(draft->columns[1].atoms.empty());  // 10% zeros
  const DraftColumn& sex = draft->columns[2];
  EXPECT_EQ(sex.categories, (std::vector<std::string>{"Female", "Male", "femal"}));
  EXPECT_EQ(sex.category_counts, (std::vector<int64_t>{5, 4, 1}));
}

TEST(DraftTest, DeclaredNominalValuesAreNotDataDerived) {
  DraftHint nominal;
  nominal.kind = DraftHint::Kind::kCategorical;
  nominal.categories = {"good", "bad", "unused"};
  DraftHint integer;
  integer.kind = DraftHint::Kind::kNumeric;
  integer.integer = true;
  SchemaDrafter drafter({"n", "class"}, {integer, nominal});
  ASSERT_TRUE(drafter.AddRow({"3", "good"}).ok());
  ASSERT_TRUE(drafter.AddRow({"3", "bad"}).ok());
  auto draft = drafter.Finish(std::string("class"));
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_FALSE(draft->columns[1].data_derived);
  EXPECT_EQ(draft->columns[1].categories, nominal.categories);  // declared order, unused kept
  EXPECT_TRUE(draft->columns[0].data_derived);
  EXPECT_EQ(draft->columns[0].lower, 3);
  EXPECT_EQ(draft->columns[0].upper, 4);  // a constant column still gets lower < upper
  // A value outside the declared list, or a non-number in a numeric column:
  // the column is left out and reported (issue 38), the row still counts.
  ASSERT_TRUE(drafter.AddRow({"3", "ugly"}, 7).ok());
  ASSERT_TRUE(drafter.AddRow({"three", "good"}, 8).ok());
  auto bad = drafter.Finish(std::nullopt);  // both columns bad: nothing to draft
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("column 'n': declared numeric, but 'three' (line 8)"),
            std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("column 'class': 'ugly' (line 7)"), std::string::npos);
  EXPECT_FALSE(drafter.AddRow({"3"}).ok());  // wrong number of fields: still an error
}

TEST(DraftTest, MissingNumericsAreNullableAndLabelsChecked) {
  SchemaDrafter drafter({"x", "y"}, {});
  ASSERT_TRUE(drafter.AddRow({"1", "a"}).ok());
  ASSERT_TRUE(drafter.AddRow({"?", "b"}).ok());
  auto draft = drafter.Finish(std::nullopt);
  ASSERT_TRUE(draft.ok());
  EXPECT_EQ(draft->columns[0].type, ColumnType::kNumeric);
  EXPECT_EQ(draft->columns[0].missing, 1);
  // Issue 38: a numeric column with missing cells is drafted nullable (no
  // imputation outside the tool); one without stays not nullable.
  EXPECT_TRUE(draft->columns[0].nullable);
  EXPECT_TRUE(draft->columns[0].notes.empty());
  EXPECT_FALSE(draft->columns[1].nullable);
  // An ARFF numeric attribute with '?' cells: the same (the header's type
  // decides numeric, the gaps decide nullable).
  DraftHint numeric;
  numeric.kind = DraftHint::Kind::kNumeric;
  numeric.integer = true;
  SchemaDrafter arff({"n"}, {numeric});
  ASSERT_TRUE(arff.AddRow({"?"}).ok());
  ASSERT_TRUE(arff.AddRow({"4"}).ok());
  auto arff_draft = arff.Finish(std::nullopt);
  ASSERT_TRUE(arff_draft.ok()) << arff_draft.status();
  EXPECT_EQ(arff_draft->columns[0].type, ColumnType::kNumeric);
  EXPECT_TRUE(arff_draft->columns[0].nullable);
  EXPECT_FALSE(draft->label.has_value());
  EXPECT_FALSE(drafter.Finish(std::string("x")).ok());               // numeric label
  EXPECT_FALSE(drafter.Finish(std::string("nope")).ok());            // unknown column
  EXPECT_FALSE(SchemaDrafter({"x"}, {}).Finish(std::nullopt).ok());  // no rows
}

// The largest share of `values` in one cell of `column` as the marginal
// methods discretise it (core/data/discretize.h), with its bins or without.
double FullestCellShare(const DraftColumn& column, const std::vector<double>& values,
                        bool with_bins) {
  Schema::Builder builder;
  builder.AddNumeric(column.name, column.lower, column.upper, column.integer);
  if (!column.atoms.empty()) builder.SetAtoms(column.name, column.atoms);
  if (with_bins && !column.bins.empty()) builder.SetBins(column.name, column.bins);
  auto schema = builder.Build();
  EXPECT_TRUE(schema.ok()) << schema.status();
  if (!schema.ok()) return 1.0;
  auto discretizer = Discretizer::Create(*schema);
  EXPECT_TRUE(discretizer.ok()) << discretizer.status();
  if (!discretizer.ok()) return 1.0;
  std::vector<int64_t> counts(discretizer->domain_size(0));
  for (double v : values) ++counts[discretizer->Code(0, v)];
  return static_cast<double>(*std::max_element(counts.begin(), counts.end())) /
         static_cast<double>(values.size());
}

// Issue 38: a lognormal money column (2,000 rows, sigma 1.5) put 95% of its
// rows in one of the default 16 equal-width bins. The draft suggests bins
// (marked data-derived with the bounds, explained in a note) under which no
// cell holds more than 40% of the rows; a normal column keeps the default.
TEST(DraftTest, HeavyTailedColumnsGetBinsThatSpreadTheirRows) {
  std::mt19937_64 rng(38);
  std::normal_distribution<double> normal(0.0, 1.0);
  SchemaDrafter drafter({"income", "height", "loss"}, {});
  std::vector<double> income, height, loss;
  for (int i = 0; i < 2000; ++i) {
    income.push_back(std::round(std::exp(10.0 + 1.5 * normal(rng)) * 100) / 100);
    height.push_back(std::round(170.0 + 10.0 * normal(rng)));
    // A signed heavy tail (profit and loss): no log scale, quantile edges.
    const double z = normal(rng);
    loss.push_back(std::round((z < 0 ? -1 : 1) * std::exp(5.0 + 2.0 * std::fabs(z))));
    ASSERT_TRUE(drafter
                    .AddRow({absl::StrFormat("%.2f", income.back()),
                             absl::StrFormat("%g", height.back()),
                             absl::StrFormat("%g", loss.back())})
                    .ok());
  }
  auto draft = drafter.Finish(std::nullopt);
  ASSERT_TRUE(draft.ok()) << draft.status();
  const DraftColumn& money = draft->columns[0];
  EXPECT_GT(FullestCellShare(money, income, /*with_bins=*/false), 0.9);
  ASSERT_FALSE(money.bins.empty());
  EXPECT_LE(FullestCellShare(money, income, /*with_bins=*/true), kDraftBinShare);
  EXPECT_TRUE(money.data_derived);
  // Round 1-2-5 edges for a non-negative column spanning decades.
  for (double edge : money.bins) {
    const double mantissa = edge / std::pow(10.0, std::floor(std::log10(edge)));
    EXPECT_TRUE(std::fabs(mantissa - 1) < 1e-9 || std::fabs(mantissa - 2) < 1e-9 ||
                std::fabs(mantissa - 5) < 1e-9)
        << edge;
  }
  ASSERT_FALSE(money.notes.empty());
  EXPECT_NE(money.notes.back().find("bins suggested"), std::string::npos) << money.notes.back();
  EXPECT_TRUE(draft->columns[1].bins.empty());  // normal: the default holds ~17% at most
  const DraftColumn& signed_column = draft->columns[2];
  EXPECT_GT(FullestCellShare(signed_column, loss, /*with_bins=*/false), 0.9);
  ASSERT_FALSE(signed_column.bins.empty());
  EXPECT_LE(FullestCellShare(signed_column, loss, /*with_bins=*/true), kDraftBinShare);
  EXPECT_TRUE(signed_column.integer);
  for (double edge : signed_column.bins) EXPECT_EQ(edge, std::round(edge));
}

// Issue 38: the draft stopped at the first bad column. Now every bad column
// is reported with what to do, and the others are drafted.
TEST(DraftTest, EveryBadColumnIsReportedAndTheOthersDrafted) {
  DraftHint nominal;
  nominal.kind = DraftHint::Kind::kCategorical;
  nominal.categories = {"a", "b"};
  DraftHint number;
  number.kind = DraftHint::Kind::kNumeric;
  SchemaDrafter drafter({"id", "empty", "x", "grade", "score", "y"},
                        {DraftHint{}, DraftHint{}, DraftHint{}, nominal, number, DraftHint{}});
  for (int i = 0; i < 1200; ++i) {
    ASSERT_TRUE(drafter
                    .AddRow({absl::StrCat("id", i), "", std::to_string(i % 7),
                             i == 5 || i == 9 ? "c" : "a", i == 3 ? "n/a" : "1.5",
                             i % 2 == 0 ? "yes" : "no"},
                            i + 2)
                    .ok());
  }
  auto draft = drafter.Finish(std::string("y"));
  ASSERT_TRUE(draft.ok()) << draft.status();
  ASSERT_EQ(draft->left_out.size(), 4u);  // in file order
  EXPECT_EQ(draft->left_out[0].column, "id");
  EXPECT_NE(draft->left_out[0].message.find("distinct values"), std::string::npos);
  EXPECT_EQ(draft->left_out[1].column, "empty");
  EXPECT_EQ(draft->left_out[2].column, "grade");
  EXPECT_NE(draft->left_out[2].message.find("'c' (line 7)"), std::string::npos)
      << draft->left_out[2].message;
  EXPECT_NE(draft->left_out[2].message.find("2 such values"), std::string::npos);
  EXPECT_EQ(draft->left_out[3].column, "score");
  EXPECT_NE(draft->left_out[3].message.find("'n/a' (line 5)"), std::string::npos);
  ASSERT_EQ(draft->columns.size(), 2u);
  EXPECT_EQ(draft->columns[0].name, "x");
  EXPECT_EQ(draft->columns[1].name, "y");
  EXPECT_EQ(draft->label, "y");
  // A label that cannot be drafted is still an error, saying why.
  auto bad_label = drafter.Finish(std::string("grade"));
  ASSERT_FALSE(bad_label.ok());
  EXPECT_NE(bad_label.status().message().find("not one of the values"), std::string::npos);
}

}  // namespace
}  // namespace dpcurator::data
