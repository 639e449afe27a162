// Upload validation: rows outside the public schema are refused with a
// message naming the column and the row, an upload is stored whole or not
// at all (one transaction, issue 25 item 2), a sealed dataset takes no more
// rows, and a deleted dataset's rows are gone while its ledger stays.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "client/connection.h"
#include "core/data/demo.h"
#include "proto/convert.h"
#include "server/limits.h"
#include "server/sqlite.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;

class UploadTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    ASSERT_TRUE(CreateDataset(2.0, 1e-5, v1::ADD_REMOVE, &dataset_).ok());
  }

  v1::UploadRowsRequest Message(int64_t num_rows, uint64_t seed, bool with_id = true) {
    v1::UploadRowsRequest message;
    if (with_id) message.set_dataset_id(dataset_.id());
    for (auto& row : DemoRows(data::GenerateDemoTable(num_rows, seed))) {
      *message.add_rows() = std::move(row);
    }
    return message;
  }

  // One integer read from the server's database file by a second
  // connection (the server keeps running).
  int64_t CountRowsInDatabase(const std::string& sql) {
    auto database = Database::Open(db_path_);
    EXPECT_TRUE(database.ok()) << database.status();
    if (!database.ok()) return -1;
    auto query = (*database)->Prepare(sql);
    EXPECT_TRUE(query.ok()) << query.status();
    if (!query.ok()) return -1;
    auto row = query->Step();
    EXPECT_TRUE(row.ok() && *row);
    return query->ColumnInt(0);
  }

  int64_t StoredRows() { return StoredRowsOf(dataset_.id()); }
  int64_t StoredRowsOf(const std::string& dataset_id) {
    v1::Dataset listed;
    EXPECT_TRUE(FindDataset(Curator(), dataset_id, &listed).ok());
    return listed.row_count();
  }

  v1::Dataset dataset_;
};

TEST_F(UploadTest, ValidRowsAreCountedAndClampedCellsReported) {
  v1::UploadRowsRequest first = Message(30, 1);
  v1::UploadRowsRequest second = Message(20, 2, /*with_id=*/false);
  second.mutable_rows(0)->set_cells(1, "500");  // age above the declared 80
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages({first, second}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.rows_accepted(), 50);
  EXPECT_EQ(response.total_rows(), 50);
  EXPECT_EQ(response.cells_clamped(), 1);
  EXPECT_EQ(StoredRows(), 50);
}

TEST_F(UploadTest, UndeclaredCategoryIsRefusedNamingColumnAndRow) {
  v1::UploadRowsRequest message = Message(10, 3);
  message.mutable_rows(4)->set_cells(0, "atlantis");  // region
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages({message}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("'region'"));
  EXPECT_THAT(status.error_message(), HasSubstr("row 4"));
  EXPECT_THAT(status.error_message(), HasSubstr("atlantis"));
  EXPECT_THAT(status.error_message(), HasSubstr("not a declared category"));
  EXPECT_EQ(StoredRows(), 0) << "rows of a refused message were stored";
}

TEST_F(UploadTest, NonNumberInNumericColumnIsRefusedNamingColumnAndRow) {
  v1::UploadRowsRequest message = Message(10, 4);
  message.mutable_rows(7)->set_cells(3, "lots");  // income
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages({message}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("'income'"));
  EXPECT_THAT(status.error_message(), HasSubstr("row 7"));
  EXPECT_THAT(status.error_message(), HasSubstr("not a finite number"));
  EXPECT_EQ(StoredRows(), 0);

  // Non-finite numbers are not numbers either.
  message = Message(3, 5);
  message.mutable_rows(1)->set_cells(5, "nan");  // tenure
  status = UploadMessages({message}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("'tenure'"));
  EXPECT_EQ(StoredRows(), 0);
}

TEST_F(UploadTest, WrongFieldCountIsRefused) {
  v1::UploadRowsRequest message = Message(5, 6);
  message.mutable_rows(2)->mutable_cells()->RemoveLast();
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages({message}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("row 2"));
  EXPECT_EQ(StoredRows(), 0);
}

// An upload is one transaction: a bad row in a later message leaves the
// earlier, good messages unstored too (before, they stayed: 77 -> 94 rows
// after a few tries, with no way back).
TEST_F(UploadTest, AnUploadIsStoredWholeOrNotAtAll) {
  ASSERT_TRUE(UploadDemoRows(dataset_.id(), 7, 70).ok());
  ASSERT_EQ(StoredRows(), 7);
  v1::UploadRowsRequest good = Message(5, 7);
  v1::UploadRowsRequest also_good = Message(6, 9, /*with_id=*/false);
  v1::UploadRowsRequest bad = Message(4, 8, /*with_id=*/false);
  bad.mutable_rows(2)->set_cells(4, "platinum");  // plan
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages({good, also_good, bad}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("upload message 2, row 2"));
  EXPECT_THAT(status.error_message(), HasSubstr("'plan'"));
  EXPECT_THAT(status.error_message(), HasSubstr("Nothing of this upload was stored"));
  EXPECT_EQ(StoredRows(), 7) << "rows of a refused upload were stored";

  // The same rows without the bad one are stored, all of them.
  bad.mutable_rows(2)->set_cells(4, good.rows(0).cells(4));
  status = UploadMessages({good, also_good, bad}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.rows_accepted(), 15);
  EXPECT_EQ(response.total_rows(), 22);
  EXPECT_EQ(StoredRows(), 22);
}

// Issue 38: the same file uploaded twice stored every person twice, which
// halves the guarantee for them. Rows equal to stored ones are refused,
// counted, with nothing stored, unless the first message says `append`;
// rows repeated within one upload are distinct people and pass.
TEST_F(UploadTest, RowsAlreadyStoredAreRefusedUnlessAppend) {
  ASSERT_TRUE(UploadDemoRows(dataset_.id(), 50, 31).ok());
  v1::UploadRowsResponse response;
  grpc::Status status = UploadDemoRows(dataset_.id(), 50, 31, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("all 50 rows of this upload repeat rows already stored"));
  EXPECT_THAT(status.error_message(), HasSubstr("half the strength"));
  EXPECT_THAT(status.error_message(), HasSubstr("--append"));
  EXPECT_THAT(status.error_message(), HasSubstr("nothing of this upload was stored"));
  EXPECT_EQ(StoredRows(), 50);

  // Two stored rows among ten new ones, in the second message of a stream.
  v1::UploadRowsRequest fresh = Message(10, 32);
  v1::UploadRowsRequest repeats = Message(50, 31, /*with_id=*/false);
  repeats.mutable_rows()->DeleteSubrange(2, 48);
  status = UploadMessages({fresh, repeats}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("2 of the 12 rows of this upload repeat rows already stored"));
  EXPECT_EQ(StoredRows(), 50);

  fresh.set_append(true);
  status = UploadMessages({fresh, repeats}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.total_rows(), 62);

  // Twins within one upload, nothing like them stored: stored.
  v1::UploadRowsRequest twins = Message(1, 33);
  *twins.add_rows() = twins.rows(0);
  status = UploadMessages({twins}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(StoredRows(), 64);
}

// Issue 38: `datasets list` said "private" for an empty dataset, as the
// count withheld from an analyst and a stored 0 looked the same. The server
// now says when it withholds the count.
TEST_F(UploadTest, AWithheldRowCountIsMarkedAndAnEmptyOneIsNot) {
  v1::Dataset listed;
  ASSERT_TRUE(FindDataset(Curator(), dataset_.id(), &listed).ok());
  EXPECT_EQ(listed.row_count(), 0);
  EXPECT_FALSE(listed.row_count_hidden());
  ASSERT_TRUE(FindDataset(Analyst(), dataset_.id(), &listed).ok());
  EXPECT_EQ(listed.row_count(), 0);
  EXPECT_TRUE(listed.row_count_hidden()) << "an analyst's withheld count reads as empty";
}

TEST_F(UploadTest, UploadsToAnotherDatasetOrUnknownDatasetAreRefused) {
  v1::UploadRowsRequest message = Message(3, 9);
  message.set_dataset_id("ds_does_not_exist");
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages({message}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();

  v1::Dataset other;
  ASSERT_TRUE(CreateDataset(2.0, 1e-5, v1::ADD_REMOVE, &other, "other").ok());
  v1::UploadRowsRequest first = Message(3, 10);
  v1::UploadRowsRequest second = Message(3, 11);
  second.set_dataset_id(other.id());
  status = UploadMessages({first, second}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  v1::Dataset listed_other;
  ASSERT_TRUE(FindDataset(Curator(), other.id(), &listed_other).ok());
  EXPECT_EQ(listed_other.row_count(), 0);
}

// Issue 38: an analyst's upload was refused only after the client had read
// and streamed its whole file. The server now answers the stream's opening
// message (the dataset, no rows) with client::kUploadReadyMetadata once the
// role and the dataset have passed, and a refusal ends the call instead, so
// the client knows before it reads a row.
TEST_F(UploadTest, TheOpeningMessageIsAnsweredBeforeAnyRowIsSent) {
  const auto open = [&](client::Connection connection, const std::string& dataset_id,
                        grpc::Status* finished) {
    auto context = connection.NewContext();
    v1::UploadRowsResponse response;
    auto writer = connection.datasets().UploadRows(context.get(), &response);
    v1::UploadRowsRequest opening;
    opening.set_dataset_id(dataset_id);
    if (writer->Write(opening)) writer->WaitForInitialMetadata();
    const bool ready =
        context->GetServerInitialMetadata().count(client::kUploadReadyMetadata) > 0;
    if (ready) {
      EXPECT_TRUE(writer->Write(Message(4, 13, /*with_id=*/false)));
    }
    writer->WritesDone();
    *finished = writer->Finish();
    return ready;
  };
  grpc::Status finished;
  EXPECT_TRUE(open(Curator(), dataset_.id(), &finished));
  EXPECT_TRUE(finished.ok()) << finished.error_message();
  EXPECT_EQ(StoredRows(), 4);
  EXPECT_FALSE(open(Analyst(), dataset_.id(), &finished));
  EXPECT_EQ(finished.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_FALSE(open(Curator(), "ds_does_not_exist", &finished));
  EXPECT_EQ(finished.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(StoredRows(), 4);
}

TEST_F(UploadTest, SealedAfterFirstRelease) {
  ASSERT_TRUE(UploadDemoRows(dataset_.id(), 500, 12).ok());
  v1::Release release;
  grpc::Status status = RequestRelease(RffRequest(dataset_.id(), 1.0, "seal-key"), &release);
  ASSERT_TRUE(status.ok()) << status.error_message();

  v1::UploadRowsResponse response;
  status = UploadMessages({Message(10, 13)}, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("sealed"));
  EXPECT_EQ(StoredRows(), 500);
  v1::Dataset listed;
  ASSERT_TRUE(FindDataset(Curator(), dataset_.id(), &listed).ok());
  EXPECT_TRUE(listed.sealed());
}

// `datasets delete`: the rows are gone, the dataset is listed no more and
// takes no upload or release, its budget history stays readable, and a
// dataset with an open session is refused.
TEST_F(UploadTest, DeleteRemovesRowsAndKeepsTheLedger) {
  ASSERT_TRUE(UploadDemoRows(dataset_.id(), 300, 21).ok());
  v1::Release release;
  grpc::Status status = RequestRelease(RffRequest(dataset_.id(), 0.5, "del-key"), &release);
  ASSERT_TRUE(status.ok()) << status.error_message();

  auto connection = Curator();
  v1::DeleteDatasetRequest request;
  request.set_dataset_id(dataset_.id());
  v1::DeleteDatasetResponse deleted;
  {
    auto analyst = Analyst();
    auto context = analyst.NewContext();
    status = analyst.datasets().DeleteDataset(context.get(), request, &deleted);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  }
  {
    auto context = connection.NewContext();
    status = connection.datasets().DeleteDataset(context.get(), request, &deleted);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(deleted.rows_deleted(), 300);
  v1::Dataset listed;
  EXPECT_EQ(FindDataset(Curator(), dataset_.id(), &listed).error_code(),
            grpc::StatusCode::NOT_FOUND);
  // The rows are gone from the database, not only hidden.
  EXPECT_EQ(CountRowsInDatabase("SELECT COUNT(*) FROM row_chunks WHERE dataset_id = '" +
                                dataset_.id() + "'"),
            0);
  // The ledger's history stays: the release's event is still reported.
  v1::BudgetReport report;
  {
    auto context = connection.NewContext();
    v1::GetBudgetRequest budget;
    budget.set_dataset_id(dataset_.id());
    status = connection.datasets().GetBudget(context.get(), budget, &report);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_GE(report.events_size(), 1);
  EXPECT_GT(report.epsilon_spent(), 0);
  // No more uploads, releases or deletes.
  v1::UploadRowsResponse response;
  EXPECT_EQ(UploadMessages({Message(3, 22)}, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(RequestRelease(RffRequest(dataset_.id(), 0.5, "after-delete"), &release)
                .error_code(),
            grpc::StatusCode::NOT_FOUND);
  {
    auto context = connection.NewContext();
    EXPECT_EQ(connection.datasets().DeleteDataset(context.get(), request, &deleted).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
}

// Issue 38 (docs/schema.md "Open columns"): a dataset with an open column
// `city` (nullable) beside a numeric `x`.
class OpenColumnTest : public UploadTest {
 protected:
  static v1::TableSchema OpenSchema(std::vector<std::string> categories = {}) {
    v1::TableSchema schema;
    v1::ColumnSchema& city = *schema.add_columns();
    city.set_name("city");
    city.set_type(v1::ColumnSchema::CATEGORICAL);
    city.set_open(true);
    city.set_nullable(true);
    for (auto& category : categories) city.add_categories(std::move(category));
    v1::ColumnSchema& x = *schema.add_columns();
    x.set_name("x");
    x.set_type(v1::ColumnSchema::NUMERIC);
    x.set_lower(0);
    x.set_upper(1e6);
    return schema;
  }

  void SetUp() override {
    UploadTest::SetUp();
    v1::CreateDatasetRequest request;
    request.set_name("cities");
    *request.mutable_schema() = OpenSchema();
    request.mutable_budget()->set_epsilon(10);
    request.mutable_budget()->set_delta(1e-5);
    auto connection = Curator();
    auto context = connection.NewContext();
    grpc::Status status = connection.datasets().CreateDataset(context.get(), request, &open_);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  // One message of (city, x) rows.
  v1::UploadRowsRequest Rows(const std::vector<std::pair<std::string, int>>& rows) {
    v1::UploadRowsRequest message;
    message.set_dataset_id(open_.id());
    for (const auto& [city, x] : rows) {
      v1::Row& row = *message.add_rows();
      row.add_cells(city);
      row.add_cells(std::to_string(x));
    }
    return message;
  }

  grpc::Status Upload(const v1::UploadRowsRequest& message) {
    v1::UploadRowsResponse response;
    return UploadMessages({message}, &response);
  }

  grpc::Status SetCategories(const client::Connection& connection,
                             const v1::TableSchema& schema, v1::Dataset* updated) {
    v1::SetCategoriesRequest request;
    request.set_dataset_id(open_.id());
    *request.mutable_schema() = schema;
    client::Connection copy = connection;
    auto context = copy.NewContext();
    return copy.datasets().SetCategories(context.get(), request, updated);
  }

  release::OpenColumnValues Values() {
    auto values = server_->store()->LoadOpenColumn(open_.id(), 0);
    EXPECT_TRUE(values.ok()) << values.status();
    return values.ok() ? *values : release::OpenColumnValues{};
  }

  int64_t StoredOpenValues() {
    return CountRowsInDatabase("SELECT COUNT(*) FROM open_values WHERE dataset_id = '" +
                               open_.id() + "'");
  }

  v1::Dataset open_;
};

TEST_F(OpenColumnTest, UploadsKeepEachValueOnceInFirstSeenOrder) {
  ASSERT_TRUE(Upload(Rows({{"Paris", 1}, {" Rome ", 2}, {"Paris", 3}, {"", 4}})).ok());
  release::OpenColumnValues values = Values();
  EXPECT_EQ(values.dictionary, (std::vector<std::string>{"Paris", "Rome"}));
  EXPECT_EQ(values.indices, (std::vector<int32_t>{0, 1, 0, release::kMissingOpenValue}));
  // A second upload reuses the stored values and extends the dictionary.
  ASSERT_TRUE(Upload(Rows({{"Lyon", 5}, {"Rome", 6}})).ok());
  values = Values();
  EXPECT_EQ(values.dictionary, (std::vector<std::string>{"Paris", "Rome", "Lyon"}));
  EXPECT_EQ(values.indices, (std::vector<int32_t>{0, 1, 0, -1, 2, 1}));
  // The duplicate check compares the stored indices: the same row again is
  // refused (nothing stored), another x with a known city is not a repeat.
  grpc::Status repeated = Upload(Rows({{"Lyon", 5}, {"Oslo", 9}}));
  EXPECT_EQ(repeated.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(repeated.error_message(), HasSubstr("repeats a row"));
  EXPECT_EQ(Values().dictionary.size(), 3u);  // "Oslo" was not kept
  ASSERT_TRUE(Upload(Rows({{"Lyon", 7}})).ok());
  EXPECT_EQ(Values().indices.size(), 7u);
  // Not an open column.
  EXPECT_EQ(server_->store()->LoadOpenColumn(open_.id(), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A value longer than kMaxOpenValueBytes is refused (on the wire a cell
  // is already bounded by the same 256 bytes: server/input_limits.h).
  grpc::Status long_value = Upload(Rows({{std::string(data::kMaxOpenValueBytes + 1, 'a'), 1}}));
  EXPECT_EQ(long_value.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(long_value.error_message(), HasSubstr("256 bytes"));
  // Deleting the dataset deletes its values.
  EXPECT_EQ(StoredOpenValues(), 3);
  {
    auto connection = Curator();
    auto context = connection.NewContext();
    v1::DeleteDatasetRequest request;
    request.set_dataset_id(open_.id());
    v1::DeleteDatasetResponse deleted;
    ASSERT_TRUE(connection.datasets().DeleteDataset(context.get(), request, &deleted).ok());
  }
  EXPECT_EQ(StoredOpenValues(), 0);
}

TEST_F(OpenColumnTest, TheIntegrityCheckFindsMisnumberedOpenValues) {
  ASSERT_TRUE(Upload(Rows({{"Paris", 1}, {"Rome", 2}, {"Lyon", 3}})).ok());
  auto healthy = server_->store()->CheckIntegrity();
  ASSERT_TRUE(healthy.ok()) << healthy.status();
  EXPECT_TRUE(healthy->empty()) << ::testing::PrintToString(*healthy);
  {
    // A gap in the numbering: LoadOpenColumn would refuse the column.
    auto database = Database::Open(db_path_);
    ASSERT_TRUE(database.ok()) << database.status();
    ASSERT_TRUE((*database)->Exec("UPDATE open_values SET value_index = 7 WHERE value_index = 1").ok());
  }
  auto problems = server_->store()->CheckIntegrity();
  ASSERT_TRUE(problems.ok()) << problems.status();
  EXPECT_EQ(*problems, (std::vector<std::string>{absl::StrCat(
                           "dataset ", open_.id(), " column 0: open values are not numbered 0, 1, ...")}));
}

TEST_F(OpenColumnTest, ThePerColumnLimitRefusesAnUploadWhole) {
  // kMaxOpenValuesPerColumn - 1 distinct values, in messages of 50,000.
  std::vector<v1::UploadRowsRequest> messages;
  const std::string x = "1";
  for (int64_t i = 0; i < kMaxOpenValuesPerColumn - 1; ++i) {
    if (i % 50'000 == 0) messages.emplace_back().set_dataset_id(open_.id());
    v1::Row& row = *messages.back().add_rows();
    row.add_cells(absl::StrCat("v", i));
    row.add_cells(x);
  }
  v1::UploadRowsResponse response;
  ASSERT_TRUE(UploadMessages(messages, &response).ok());
  // Two new values would pass the limit: refused, nothing stored.
  grpc::Status refused = Upload(Rows({{"v0", 2}, {"new1", 2}, {"new2", 2}}));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("kMaxOpenValuesPerColumn"));
  EXPECT_THAT(refused.error_message(), HasSubstr("nothing of this upload was stored"));
  EXPECT_EQ(StoredOpenValues(), kMaxOpenValuesPerColumn - 1);
  EXPECT_EQ(StoredRowsOf(open_.id()), kMaxOpenValuesPerColumn - 1);
  // One new value reaches it exactly.
  ASSERT_TRUE(Upload(Rows({{"v0", 2}, {"new1", 2}})).ok());
  EXPECT_EQ(StoredOpenValues(), kMaxOpenValuesPerColumn);
}

TEST_F(OpenColumnTest, LoadRowsReadsValuesUnderTheSetCategories) {
  ASSERT_TRUE(Upload(Rows({{"Paris", 1}, {"Rome", 2}, {"Lyon", 3}, {"?", 4}, {"Roma", 5}}))
                  .ok());
  auto before = SchemaFromProto(OpenSchema()).value();
  auto unfitted = server_->store()->LoadRows(open_.id(), before);
  ASSERT_TRUE(unfitted.ok()) << unfitted.status();
  EXPECT_TRUE((*unfitted)->cells.col(0).array().isNaN().all());  // no level yet
  v1::TableSchema fitted = OpenSchema({"Paris", "Rome", "other"});
  v1::Dataset updated;
  grpc::Status status = SetCategories(Curator(), fitted, &updated);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_NE(updated.schema_fingerprint(), open_.schema_fingerprint());
  auto schema = SchemaFromProto(updated.schema()).value();
  auto rows = server_->store()->LoadRows(open_.id(), schema);
  ASSERT_TRUE(rows.ok()) << rows.status();
  // Listed values their levels, others ("Lyon", "Roma") the catch-all (2),
  // missing the missing level (3).
  const Eigen::VectorXd city = (*rows)->cells.col(0);
  EXPECT_EQ(std::vector<double>(city.data(), city.data() + city.size()),
            (std::vector<double>{0, 1, 2, 3, 2}));
  EXPECT_EQ((*rows)->cells(4, 1), 5);
}

TEST_F(OpenColumnTest, SetCategoriesChangesOpenCategoriesOnly) {
  v1::Dataset updated;
  v1::TableSchema bounds = OpenSchema({"a", "other"});
  bounds.mutable_columns(1)->set_upper(10);
  grpc::Status status = SetCategories(Curator(), bounds, &updated);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("'x'"));
  v1::TableSchema closed = OpenSchema({"a", "other"});
  closed.mutable_columns(0)->set_open(false);
  EXPECT_EQ(SetCategories(Curator(), closed, &updated).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(SetCategories(Curator(), OpenSchema({"other"}), &updated).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::TableSchema aliased = OpenSchema({"a", "other"});
  (*aliased.mutable_columns(0)->mutable_aliases())["A"] = "a";
  EXPECT_EQ(SetCategories(Curator(), aliased, &updated).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(SetCategories(Analyst(), OpenSchema({"a", "other"}), &updated).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::Dataset listed;
  ASSERT_TRUE(FindDataset(Curator(), open_.id(), &listed).ok());
  EXPECT_EQ(listed.schema_fingerprint(), open_.schema_fingerprint());
  ASSERT_TRUE(SetCategories(Curator(), OpenSchema({"a", "other"}), &updated).ok());
  // Once set, the list cannot be emptied again.
  EXPECT_EQ(SetCategories(Curator(), OpenSchema(), &updated).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(OpenColumnTest, ReleasesAndSessionsWaitForCategories) {
  ASSERT_TRUE(Upload(Rows({{"Paris", 1}, {"Rome", 2}, {"Paris", 3}})).ok());
  v1::ReleaseRequest marginals;
  marginals.set_dataset_id(open_.id());
  marginals.set_idempotency_key("m");
  marginals.set_noise_multiplier(2.0);
  marginals.mutable_marginals()->add_cliques()->add_columns("x");
  v1::OpenSessionRequest session;
  session.set_dataset_id(open_.id());
  session.set_idempotency_key("s");
  session.mutable_params()->set_steps(2);
  session.mutable_params()->set_sampling_rate(0.5);
  session.mutable_params()->set_noise_multiplier(2.0);
  session.mutable_params()->mutable_rff_embedding()->set_num_frequencies(4);
  auto open_session = [&](v1::Session* opened) {
    client::Connection analyst = Analyst();
    auto context = analyst.NewContext();
    return analyst.sessions().OpenSession(context.get(), session, opened);
  };
  v1::Release release;
  grpc::Status refused = RequestRelease(marginals, &release);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("column 'city' is open and has no categories"));
  v1::Session opened;
  refused = open_session(&opened);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("datasets set-categories"));
  v1::BudgetReport budget;
  ASSERT_TRUE(GetBudget(open_.id(), &budget).ok());
  EXPECT_EQ(budget.events_size(), 0);
  EXPECT_EQ(budget.epsilon_spent(), 0);
  v1::Dataset updated;
  ASSERT_TRUE(SetCategories(Curator(), OpenSchema({"Paris", "other"}), &updated).ok());
  grpc::Status admitted = RequestRelease(marginals, &release);
  EXPECT_TRUE(admitted.ok()) << admitted.error_message();
  admitted = open_session(&opened);
  EXPECT_TRUE(admitted.ok()) << admitted.error_message();
  ASSERT_TRUE(GetBudget(open_.id(), &budget).ok());
  EXPECT_EQ(budget.events_size(), 2);
}

TEST_F(OpenColumnTest, AnExternalDatasetCannotHaveAnOpenColumn) {
  v1::CreateDatasetRequest request;
  request.set_name("external cities");
  *request.mutable_schema() = OpenSchema();
  request.mutable_budget()->set_epsilon(1);
  request.mutable_budget()->set_delta(1e-5);
  request.set_external(true);
  auto connection = Curator();
  auto context = connection.NewContext();
  v1::Dataset dataset;
  grpc::Status status = connection.datasets().CreateDataset(context.get(), request, &dataset);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("column 'city' is open"));
}

}  // namespace
}  // namespace dpcurator::server::testing
