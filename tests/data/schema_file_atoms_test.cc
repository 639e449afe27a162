// Schema files declare numeric atoms and bins (client/schema_file.cc,
// docs/schema.md "Atoms and bins"); errors name the column and say what is
// expected.

#include <string>

#include "client/schema_file.h"
#include "gtest/gtest.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

std::string ErrorOf(const std::string& text) {
  auto file = ParseSchemaFileText(text, "s.json");
  EXPECT_FALSE(file.ok());
  return std::string(file.status().message());
}

TEST(SchemaFileAtomsTest, ReadsAtomsAndBins) {
  auto file = ParseSchemaFileText(
      R"({"columns": [{"name": "hours", "type": "INTEGER", "lower": 1, "upper": 99,
                       "atoms": [40], "bins": [20, 40, 60]},
                      {"name": "c", "type": "CATEGORICAL", "categories": ["a", "b"]}]})",
      "s.json");
  ASSERT_TRUE(file.ok()) << file.status();
  const data::Schema schema = SchemaFromProto(file->schema).value();
  EXPECT_EQ(schema.column(0).atoms, std::vector<double>{40});
  EXPECT_EQ(schema.column(0).bins, (std::vector<double>{20, 40, 60}));
}

TEST(SchemaFileAtomsTest, RefusesMalformedDeclarations) {
  const std::string head = R"({"columns": [{"name": "x", "type": "NUMERIC", "lower": 0,
                                             "upper": 10, )";
  EXPECT_NE(ErrorOf(head + R"("atoms": 3}]})").find("\"atoms\" must be a list of numbers"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + R"("bins": ["5"]}]})").find("\"bins\" must hold numbers only"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + R"("bins": [5, 2]}]})").find("strictly increasing"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + R"("atoms": [11]}]})").find("inside the declared bounds"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"columns": [{"name": "c", "type": "CATEGORICAL", "categories": ["a"],
                                     "atoms": [1]}]})")
                .find("belong to NUMERIC columns only"),
            std::string::npos);
}

// Issue 38: "open": true declares an open categorical column.
TEST(SchemaFileAtomsTest, ReadsOpenColumns) {
  auto file = ParseSchemaFileText(
      R"({"columns": [{"name": "city", "type": "CATEGORICAL", "open": true},
                      {"name": "x", "type": "NUMERIC", "lower": 0, "upper": 1}]})",
      "s.json");
  ASSERT_TRUE(file.ok()) << file.status();
  const data::Schema schema = SchemaFromProto(file->schema).value();
  EXPECT_TRUE(schema.column(0).open);
  EXPECT_TRUE(schema.column(0).categories.empty());
  EXPECT_FALSE(schema.column(1).open);
  // The canonical proto keeps the flag (the server stores SchemaToProto's).
  EXPECT_TRUE(SchemaToProto(schema).columns(0).open());
  EXPECT_FALSE(SchemaToProto(schema).columns(1).open());
  EXPECT_NE(ErrorOf(R"({"columns": [{"name": "x", "type": "NUMERIC", "lower": 0, "upper": 1,
                                     "open": true}]})")
                .find("\"open\" belongs to CATEGORICAL columns only"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"columns": [{"name": "c", "type": "CATEGORICAL", "open": 1}]})")
                .find("must be true or false"),
            std::string::npos);
}

}  // namespace
}  // namespace dpcurator::client
