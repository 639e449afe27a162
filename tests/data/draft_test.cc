#include "core/data/draft.h"

#include <gtest/gtest.h>

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
  // A value outside the declared list, or a non-number in a numeric column.
  EXPECT_FALSE(drafter.AddRow({"3", "ugly"}).ok());
  EXPECT_FALSE(drafter.AddRow({"three", "good"}).ok());
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

}  // namespace
}  // namespace dpcurator::data
