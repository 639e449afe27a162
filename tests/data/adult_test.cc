// The shared UCI Adult files (../shared/data/adult, next to the checkout)
// read under the project's declared schema (schemas/adult.schema.json) via
// the proto JSON reader. A missing file is a failure, not a skip.

#include <fstream>
#include <string>

#include "core/data/csv.h"
#include "core/data/encoder.h"
#include "gtest/gtest.h"
#include "proto/convert.h"

#ifndef DPC_SOURCE_DIR
#error "DPC_SOURCE_DIR must be defined by the build (tests/data/CMakeLists.txt)"
#endif

namespace dpcurator::data {
namespace {

const std::string kSchemaPath = DPC_SOURCE_DIR "/schemas/adult.schema.json";
const std::string kTrainPath = DPC_SOURCE_DIR "/../shared/data/adult/adult.data";
const std::string kTestPath = DPC_SOURCE_DIR "/../shared/data/adult/adult.test";

Schema AdultSchema() {
  auto proto = ReadSchemaFile(kSchemaPath);
  EXPECT_TRUE(proto.ok()) << proto.status();
  auto schema = SchemaFromProto(*proto);
  EXPECT_TRUE(schema.ok()) << schema.status();
  return *std::move(schema);
}

TEST(AdultTest, FilesExist) {
  EXPECT_TRUE(std::ifstream(kSchemaPath).good()) << kSchemaPath;
  EXPECT_TRUE(std::ifstream(kTrainPath).good()) << kTrainPath;
  EXPECT_TRUE(std::ifstream(kTestPath).good()) << kTestPath;
}

TEST(AdultTest, SchemaFile) {
  const Schema schema = AdultSchema();
  EXPECT_EQ(schema.num_columns(), 15);
  ASSERT_TRUE(schema.label_index().has_value());
  EXPECT_EQ(schema.column(*schema.label_index()).name, "Y");
  EXPECT_EQ(schema.num_classes(), 2);
  const FeatureLayout layout = FeatureLayout::ForFeatures(schema);
  EXPECT_EQ(layout.numeric_dim, 6);
  // 8 categorical columns, then the atom indicators of capital-gain (0,
  // 99999), capital-loss (0) and hours-per-week (40).
  EXPECT_EQ(layout.num_categorical_columns(), 8 + 3);
  for (int b = 8; b < 11; ++b) EXPECT_TRUE(layout.categorical[b].atom_indicator) << b;
  EXPECT_EQ(layout.categorical[8].levels, 3);
  EXPECT_EQ(layout.categorical[9].levels, 2);
  EXPECT_EQ(layout.categorical[10].levels, 2);
  // Reading the file twice gives the same schema.
  EXPECT_EQ(schema.FingerprintHex(), AdultSchema().FingerprintHex());
  // The test file's spelling of the label is an alias.
  const int y = *schema.label_index();
  EXPECT_EQ(schema.ParseCell(y, " >50K.").value().value, 1);
  EXPECT_EQ(schema.ParseCell(y, "<=50K.").value().value, 0);
}

void CheckTable(const Schema& schema, const Table& table) {
  const int y = *schema.label_index();
  const double positive = table.cells.col(y).mean();
  // Adult: about 24% earn >50K in both files.
  EXPECT_GT(positive, 0.22);
  EXPECT_LT(positive, 0.26);
  EXPECT_TRUE(table.cells.allFinite());
  // "?" cells of the nullable columns land on the missing level.
  const int workclass = *schema.FindColumn("workclass");
  EXPECT_GT((table.cells.col(workclass).array() == schema.NumLevels(workclass) - 1).count(), 0);
  for (int c = 0; c < schema.num_columns(); ++c) {
    const Column& column = schema.column(c);
    if (column.type == ColumnType::kNumeric) {
      EXPECT_GE(table.cells.col(c).minCoeff(), column.lower) << column.name;
      EXPECT_LE(table.cells.col(c).maxCoeff(), column.upper) << column.name;
    }
  }
}

TEST(AdultTest, TrainFile) {
  const Schema schema = AdultSchema();
  auto table = ReadCsvFile(schema, kTrainPath);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->num_rows(), 32561);
  CheckTable(schema, *table);
}

TEST(AdultTest, TestFile) {
  const Schema schema = AdultSchema();
  auto table = ReadCsvFile(schema, kTestPath);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->num_rows(), 16281);
  CheckTable(schema, *table);
}

}  // namespace
}  // namespace dpcurator::data
