#include "core/data/demo.h"

#include <cmath>
#include <sstream>

#include "core/data/csv.h"
#include "gtest/gtest.h"

namespace dpcurator::data {
namespace {

TEST(DemoTest, SchemaIsTheDocumentedOne) {
  const Schema schema = DemoSchema();
  EXPECT_EQ(schema.num_columns(), 8);
  EXPECT_EQ(schema.label_index(), 7);
  EXPECT_EQ(schema.column(7).name, "churn");
  EXPECT_EQ(schema.num_classes(), 2);
  EXPECT_EQ(schema.FingerprintHex(), DemoSchema().FingerprintHex());
}

TEST(DemoTest, ReproducibleForASeed) {
  const Table a = GenerateDemoTable(3000, 17);
  const Table b = GenerateDemoTable(3000, 17);
  const Table c = GenerateDemoTable(3000, 18);
  EXPECT_EQ(a.cells, b.cells);
  EXPECT_NE(a.cells, c.cells);
  // A prefix does not depend on how many rows follow.
  EXPECT_EQ(GenerateDemoTable(100, 17).cells, a.cells.topRows(100));
}

TEST(DemoTest, ValuesWithinDeclaredDomainAndLabelRate) {
  const Schema schema = DemoSchema();
  const Table table = GenerateDemoTable(20000, 2026);
  ASSERT_EQ(table.num_rows(), 20000);
  EXPECT_TRUE(table.cells.allFinite());
  for (int c = 0; c < schema.num_columns(); ++c) {
    const Column& column = schema.column(c);
    const auto values = table.cells.col(c).array();
    if (column.type == ColumnType::kNumeric) {
      EXPECT_GE(values.minCoeff(), column.lower) << column.name;
      EXPECT_LE(values.maxCoeff(), column.upper) << column.name;
      if (column.integer) {
        EXPECT_TRUE((values == values.round()).all()) << column.name;
      }
    } else {
      EXPECT_TRUE((values == values.round()).all()) << column.name;
      EXPECT_GE(values.minCoeff(), 0) << column.name;
      EXPECT_LE(values.maxCoeff(), schema.NumLevels(c) - 1) << column.name;
      // Every declared level occurs.
      for (int l = 0; l < static_cast<int>(column.categories.size()); ++l)
        EXPECT_GT((values == l).count(), 0) << column.name << " level " << l;
    }
  }
  const double churn = table.cells.col(7).mean();
  EXPECT_GE(churn, 0.2);
  EXPECT_LE(churn, 0.6);
  // Through CSV and back: every cell parses, nothing needs clamping.
  std::ostringstream out;
  WriteCsv(schema, table, &out);
  std::istringstream in(out.str());
  CsvRecordReader reader(&in, {});
  std::vector<std::string> fields;
  ASSERT_TRUE(reader.Next(&fields).value());
  TableBuilder builder(schema);
  while (reader.Next(&fields).value()) ASSERT_TRUE(builder.AddRow(fields).ok());
  const Table back = builder.Finish();
  EXPECT_EQ(back.num_rows(), 20000);
  EXPECT_EQ(back.clamped_cells, 0);
  // Categorical and integer columns survive exactly; reals to %.6g.
  for (int c : {0, 1, 2, 4, 7}) EXPECT_EQ(back.cells.col(c), table.cells.col(c)) << c;
  for (int c : {3, 5, 6})
    EXPECT_LE(((back.cells.col(c) - table.cells.col(c)).array().abs() /
               table.cells.col(c).array().abs().max(1.0)).maxCoeff(), 1e-5) << c;
}

}  // namespace
}  // namespace dpcurator::data
