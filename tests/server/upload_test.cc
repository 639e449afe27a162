// Upload validation: rows outside the public schema are refused with a
// message naming the column and the row, an upload is stored whole or not
// at all (one transaction, issue 25 item 2), a sealed dataset takes no more
// rows, and a deleted dataset's rows are gone while its ledger stays.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/connection.h"
#include "core/data/demo.h"
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

  int64_t StoredRows() {
    v1::Dataset listed;
    EXPECT_TRUE(FindDataset(Curator(), dataset_.id(), &listed).ok());
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

}  // namespace
}  // namespace dpcurator::server::testing
