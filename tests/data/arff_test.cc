#include "core/data/arff.h"

#include <gtest/gtest.h>

#include <sstream>

namespace dpcurator::data {
namespace {

constexpr char kHeader[] =
    "% leading comment\n"
    "@RELATION 'credit data'\n"
    "\n"
    "@attribute 'checking status' {'<0', '0<=X<200', \"no checking\"}\n"
    "@ATTRIBUTE duration INTEGER  % months\n"
    "@Attribute amount Real\n"
    "@attribute rate numeric\n"
    "@attribute note string\n"
    "@attribute \"the class\" { good , bad }\n"
    "@data\n";

TEST(ArffTest, HeaderQuotedNamesNominalValuesAndCaseInsensitiveKeywords) {
  std::istringstream input(kHeader);
  ArffReader reader(&input, "t.arff");
  auto header = reader.ReadHeader();
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->relation, "credit data");
  ASSERT_EQ(header->attributes.size(), 6u);
  const ArffAttribute& checking = header->attributes[0];
  EXPECT_EQ(checking.name, "checking status");
  EXPECT_EQ(checking.kind, ArffAttribute::Kind::kNominal);
  EXPECT_EQ(checking.values, (std::vector<std::string>{"<0", "0<=X<200", "no checking"}));
  EXPECT_EQ(checking.line, 4);
  EXPECT_EQ(header->attributes[1].kind, ArffAttribute::Kind::kNumeric);
  EXPECT_TRUE(header->attributes[1].integer);
  EXPECT_EQ(header->attributes[2].kind, ArffAttribute::Kind::kNumeric);
  EXPECT_FALSE(header->attributes[2].integer);
  EXPECT_EQ(header->attributes[3].kind, ArffAttribute::Kind::kNumeric);
  EXPECT_EQ(header->attributes[4].kind, ArffAttribute::Kind::kString);
  EXPECT_EQ(header->attributes[5].name, "the class");
  EXPECT_EQ(header->attributes[5].values, (std::vector<std::string>{"good", "bad"}));
}

TEST(ArffTest, RowsQuotedValuesMissingCommentsAndLineNumbers) {
  std::istringstream input(std::string(kHeader) +
                           "'<0',6,1169.5,4,'a, b',good\n"
                           "% a comment line\n"
                           "\n"
                           "\"no checking\" , ? ,2.5e3,?, 'it\\'s',bad % trailing comment\n");
  ArffReader reader(&input, "t.arff");
  ASSERT_TRUE(reader.ReadHeader().ok());
  std::vector<std::string> fields;
  auto more = reader.Next(&fields);
  ASSERT_TRUE(more.ok() && *more) << more.status();
  EXPECT_EQ(reader.line_number(), 11);
  EXPECT_EQ(fields, (std::vector<std::string>{"<0", "6", "1169.5", "4", "a, b", "good"}));
  more = reader.Next(&fields);
  ASSERT_TRUE(more.ok() && *more) << more.status();
  EXPECT_EQ(reader.line_number(), 14);
  EXPECT_EQ(fields, (std::vector<std::string>{"no checking", "?", "2.5e3", "?", "it's", "bad"}));
  more = reader.Next(&fields);
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(*more);
}

TEST(ArffTest, ErrorsNameFileAndLine) {
  {
    std::istringstream input("@relation r\n@attribute x numerc\n@data\n");
    ArffReader reader(&input, "bad.arff");
    auto header = reader.ReadHeader();
    ASSERT_FALSE(header.ok());
    const std::string message(header.status().message());
    EXPECT_NE(message.find("bad.arff:2: attribute 'x': unknown type 'numerc'"), std::string::npos)
        << message;
    EXPECT_NE(message.find("numeric, real, integer"), std::string::npos) << message;
  }
  {
    std::istringstream input(
        "@relation r\n@attribute x numeric\n@attribute y {a,b}\n@data\n1,a\n2\n");
    ArffReader reader(&input, "bad.arff");
    ASSERT_TRUE(reader.ReadHeader().ok());
    std::vector<std::string> fields;
    ASSERT_TRUE(reader.Next(&fields).ok());
    auto more = reader.Next(&fields);
    ASSERT_FALSE(more.ok());
    EXPECT_NE(std::string(more.status().message()).find("bad.arff:6: row has 1 values"),
              std::string::npos)
        << more.status();
  }
  {
    std::istringstream input("@relation r\n@attribute x numeric\n@data\n{0 1}\n");
    ArffReader reader(&input, "s.arff");
    ASSERT_TRUE(reader.ReadHeader().ok());
    std::vector<std::string> fields;
    auto more = reader.Next(&fields);
    ASSERT_FALSE(more.ok());
    EXPECT_NE(std::string(more.status().message()).find("s.arff:4: sparse"), std::string::npos);
  }
  {
    std::istringstream input("@relation r\n@attribute x numeric\n");
    ArffReader reader(&input, "n.arff");
    EXPECT_FALSE(reader.ReadHeader().ok());
  }
}

TEST(ArffTest, SplitValues) {
  auto values = SplitArffValues(" a , 'b c' ,\"d,e\",, f ");
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(*values, (std::vector<std::string>{"a", "b c", "d,e", "", "f"}));
  EXPECT_FALSE(SplitArffValues("'open").ok());
  EXPECT_FALSE(SplitArffValues("'a' b").ok());
}

}  // namespace
}  // namespace dpcurator::data
