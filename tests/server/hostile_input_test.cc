// Hostile input over the wire: every RPC that takes data is sent NaN/Inf,
// wrong dimensions, undeclared categories, out-of-bounds values, absurd
// privacy parameters, oversized and garbage messages. Each case checks the
// gRPC code, that the message says what to do, that the server keeps
// serving, and that nothing was stored or charged (rows, reports, ledger
// events, spent epsilon and sessions unchanged).

#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/sync_stream.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/data/demo.h"
#include "proto/collection.h"
#include "server/collection_service.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kSeedRows = 200;

// What must not change when a request is refused.
struct Snapshot {
  int64_t rows = 0;
  int64_t reports = 0;
  int events = 0;
  int sessions = 0;
  double epsilon_spent = 0.0;
};

class HostileInputTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    ASSERT_TRUE(CreateDataset(5.0, 1e-5, v1::ADD_REMOVE, &dataset_).ok());
    ASSERT_TRUE(UploadDemoRows(dataset_.id(), kSeedRows, 1).ok());
    ASSERT_TRUE(CreateLdpCollection("hostile", &collection_).ok());
  }

  Snapshot Take() {
    Snapshot s;
    v1::Dataset listed;
    EXPECT_TRUE(FindDataset(Curator(), dataset_.id(), &listed).ok());
    s.rows = listed.row_count();
    v1::BudgetReport budget;
    EXPECT_TRUE(GetBudget(dataset_.id(), &budget).ok());
    s.events = budget.events_size();
    s.sessions = budget.sessions_size();
    s.epsilon_spent = budget.epsilon_spent();
    auto curator = Curator();
    auto context = curator.NewContext();
    v1::GetCollectionRequest request;
    request.set_collection_id(collection_.id());
    v1::Collection collection;
    EXPECT_TRUE(curator.collections().GetCollection(context.get(), request, &collection).ok());
    s.reports = collection.report_count();
    return s;
  }

  // The server still answers, and the refused call left no trace.
  void ExpectServingAndUnchanged(const Snapshot& before, const std::string& what) {
    SCOPED_TRACE(what);
    const Snapshot after = Take();
    EXPECT_EQ(after.rows, before.rows) << "rows were stored";
    EXPECT_EQ(after.reports, before.reports) << "reports were stored";
    EXPECT_EQ(after.events, before.events) << "the ledger changed";
    EXPECT_EQ(after.sessions, before.sessions) << "a session was opened";
    EXPECT_EQ(after.epsilon_spent, before.epsilon_spent) << "budget was charged";
  }

  v1::UploadRowsRequest GoodMessage(int64_t rows, uint64_t seed) {
    v1::UploadRowsRequest message;
    message.set_dataset_id(dataset_.id());
    for (auto& row : DemoRows(data::GenerateDemoTable(rows, seed))) {
      *message.add_rows() = std::move(row);
    }
    return message;
  }

  // Raw bytes as one message of `method`, through a channel that skips the
  // generated (de)serialisation: what a broken or malicious client sends.
  grpc::Status RawUnary(const std::string& method, const std::string& bytes) {
    auto channel = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
    auto context = Curator().NewContext();
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel.get(), grpc::internal::RpcMethod(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC),
        context.get(), request, &response);
  }

  // Raw messages on the UploadRows client stream.
  grpc::Status RawUpload(const std::vector<std::string>& messages, grpc::ByteBuffer* response) {
    auto channel = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
    auto context = Curator().NewContext();
    std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
        grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
            channel.get(),
            grpc::internal::RpcMethod("/dpcurator.v1.DatasetService/UploadRows",
                                      grpc::internal::RpcMethod::CLIENT_STREAMING),
            context.get(), response));
    for (const std::string& bytes : messages) {
      grpc::Slice slice(bytes);
      grpc::ByteBuffer buffer(&slice, 1);
      if (!writer->Write(buffer)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  v1::Dataset dataset_;
  v1::Collection collection_;
};

// Through a std::string: GCC 12's -Wrestrict misfires on the inlined
// const char* overload of set_cells.
void SetCell(v1::UploadRowsRequest* message, int row, int column, const std::string& value) {
  *message->mutable_rows(row)->mutable_cells(column) = value;
}

// ------------------------------------------------------------- uploads ---

struct UploadCase {
  std::string name;
  // Edits a valid 5-row message (cells in DemoSchema order: region, age,
  // education, income, plan, tenure, usage, churn).
  std::function<void(v1::UploadRowsRequest*)> edit;
  grpc::StatusCode code;
  std::vector<std::string> message_parts;
};

TEST_F(HostileInputTest, UploadsOfBadCellsAreRefusedWholeAndNamed) {
  const std::vector<UploadCase> cases = {
      {"nan", [](auto* m) { SetCell(m, 2, 3, "nan"); },
       grpc::StatusCode::INVALID_ARGUMENT, {"row 2", "'income'", "not a finite number"}},
      {"NaN-payload", [](auto* m) { SetCell(m, 0, 1, "-NaN(0x7ff)"); },
       grpc::StatusCode::INVALID_ARGUMENT, {"row 0", "'age'", "not a finite number"}},
      {"inf", [](auto* m) { SetCell(m, 1, 3, "inf"); },
       grpc::StatusCode::INVALID_ARGUMENT, {"row 1", "not a finite number"}},
      {"-Infinity", [](auto* m) { SetCell(m, 1, 5, "-Infinity"); },
       grpc::StatusCode::INVALID_ARGUMENT, {"'tenure'", "not a finite number"}},
      {"overflow", [](auto* m) { SetCell(m, 4, 3, "1e999"); },
       grpc::StatusCode::INVALID_ARGUMENT, {"row 4", "not a finite number"}},
      {"too-many-cells", [](auto* m) { m->mutable_rows(3)->add_cells("extra"); },
       grpc::StatusCode::INVALID_ARGUMENT, {"row 3", "has 9 fields", "declares 8"}},
      {"too-few-cells", [](auto* m) { m->mutable_rows(3)->mutable_cells()->RemoveLast(); },
       grpc::StatusCode::INVALID_ARGUMENT, {"row 3", "has 7 fields"}},
      {"empty-row", [](auto* m) { m->mutable_rows(0)->clear_cells(); },
       grpc::StatusCode::INVALID_ARGUMENT, {"row 0", "has 0 fields"}},
      {"undeclared-category", [](auto* m) { SetCell(m, 2, 0, "atlantis"); },
       grpc::StatusCode::INVALID_ARGUMENT,
       {"'region'", "not a declared category", "declare it in the schema"}},
      {"garbage-bytes", [](auto* m) { SetCell(m, 2, 4, std::string("\xff\x00\xfe", 3)); },
       grpc::StatusCode::INVALID_ARGUMENT, {"'plan'", "\\xff\\x00\\xfe"}},
      {"missing-in-numeric", [](auto* m) { SetCell(m, 2, 1, "?"); },
       grpc::StatusCode::INVALID_ARGUMENT, {"'age'", "missing value"}},
      {"no-dataset-id", [](auto* m) { m->clear_dataset_id(); },
       grpc::StatusCode::INVALID_ARGUMENT, {"must name the dataset"}},
      {"unknown-dataset", [](auto* m) { m->set_dataset_id("ds_nope"); },
       grpc::StatusCode::NOT_FOUND, {"ds_nope"}},
  };
  for (const UploadCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Snapshot before = Take();
    v1::UploadRowsRequest message = GoodMessage(5, 2);
    c.edit(&message);
    v1::UploadRowsResponse response;
    grpc::Status status = UploadMessages({message}, &response);
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    for (const std::string& part : c.message_parts) {
      EXPECT_THAT(status.error_message(), HasSubstr(part));
    }
    if (c.code == grpc::StatusCode::INVALID_ARGUMENT && c.name != "no-dataset-id") {
      EXPECT_THAT(status.error_message(), HasSubstr("Nothing of this upload was stored"));
    }
    ExpectServingAndUnchanged(before, c.name);
  }
}

// Declared bounds are enforced by clamping, counted (docs/privacy.md 1.3):
// the value stored is the bound, never the value sent.
TEST_F(HostileInputTest, OutOfBoundsNumbersAreClampedToTheDeclaredBoundsAndCounted) {
  const data::Schema schema = data::DemoSchema();
  const int age = *schema.FindColumn("age");
  const int income = *schema.FindColumn("income");
  v1::UploadRowsRequest message = GoodMessage(3, 3);
  SetCell(&message, 0, age, "1e300");
  SetCell(&message, 1, age, "-1e300");
  SetCell(&message, 2, income, absl::StrCat(schema.column(income).upper));
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages({message}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.rows_accepted(), 3);
  // At the bound is inside the domain: two clamps, not three.
  EXPECT_EQ(response.cells_clamped(), 2);
  auto loaded = server_->store()->LoadRows(dataset_.id(), schema);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const data::Table& rows = **loaded;
  ASSERT_EQ(rows.num_rows(), kSeedRows + 3);
  EXPECT_EQ(rows.cells(kSeedRows, age), schema.column(age).upper);
  EXPECT_EQ(rows.cells(kSeedRows + 1, age), schema.column(age).lower);
  EXPECT_EQ(rows.cells(kSeedRows + 2, income), schema.column(income).upper);
  EXPECT_TRUE(rows.cells.allFinite());
}

TEST_F(HostileInputTest, TooManyRowsInOneMessageAndEmptyStreamsAreRefused) {
  const Snapshot before = Take();
  v1::UploadRowsRequest huge;
  huge.set_dataset_id(dataset_.id());
  for (int i = 0; i < 100001; ++i) huge.add_rows();
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages({huge}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("send at most 100000 per message"));
  status = UploadMessages({}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("carried no messages"));
  ExpectServingAndUnchanged(before, "row cap / empty stream");
}

// The receive limit (ServerOptions::max_message_bytes) is enforced by gRPC
// before any handler runs. Checked on a second server with a 1 MiB limit, so
// the test does not push 64 MiB through the loopback; the default itself is
// part of the documented contract (fuzz/README.md, "Message limits").
TEST_F(HostileInputTest, OversizedMessageIsRefusedByTheReceiveLimit) {
  EXPECT_EQ(ServerOptions().max_message_bytes, 64 << 20);
  ServerOptions options;
  options.db_path = dir_->File("small-limit.db");
  options.listen_address = "127.0.0.1:0";
  options.tokens_path = tokens_path_;
  options.insecure_dev = true;
  options.max_message_bytes = 1 << 20;
  auto small = CuratorServer::Start(options);
  ASSERT_TRUE(small.ok()) << small.status();
  auto curator = client::Connection::Plaintext(absl::StrCat("127.0.0.1:", (*small)->port()),
                                               kCuratorToken, std::chrono::seconds(30));
  v1::CreateDatasetRequest create;
  create.set_name("small");
  *create.mutable_schema() = DemoSchemaProto();
  create.mutable_budget()->set_epsilon(1.0);
  create.mutable_budget()->set_delta(1e-6);
  v1::Dataset dataset;
  {
    auto context = curator.NewContext();
    ASSERT_TRUE(curator.datasets().CreateDataset(context.get(), create, &dataset).ok());
  }
  auto upload = [&](const v1::UploadRowsRequest& message, v1::UploadRowsResponse* response) {
    auto context = curator.NewContext();
    auto writer = curator.datasets().UploadRows(context.get(), response);
    writer->Write(message);
    writer->WritesDone();
    return writer->Finish();
  };
  v1::UploadRowsRequest message = GoodMessage(3, 4);
  message.set_dataset_id(dataset.id());
  SetCell(&message, 0, 0, std::string((1 << 20) + 1024, 'x'));
  v1::UploadRowsResponse response;
  grpc::Status status = upload(message, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("larger than max"));
  // Still serving, nothing stored; a message under the limit goes through.
  message = GoodMessage(3, 4);
  message.set_dataset_id(dataset.id());
  status = upload(message, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.total_rows(), 3);
  (*small)->Shutdown(std::chrono::milliseconds(200));
}

// A cell far longer than any token is refused, and the message quotes only
// a bounded prefix of it. Since issue 24 the input-limits interceptor refuses
// it (cells are at most 256 bytes) before the upload handler sees it.
TEST_F(HostileInputTest, HugeCellIsRefusedWithABoundedMessage) {
  const Snapshot before = Take();
  v1::UploadRowsRequest message = GoodMessage(2, 5);
  SetCell(&message, 1, 0, std::string(4 << 20, '\x01'));
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages({message}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("dpcurator.v1.Row.cells"));
  EXPECT_LT(status.error_message().size(), 1000u);
  ExpectServingAndUnchanged(before, "huge cell");
}

// Bytes that are not a protobuf message at all: gRPC's own decoding refuses
// them (the handler never sees them) and the server carries on.
TEST_F(HostileInputTest, GarbageBytesAreRefusedBeforeAnyHandler) {
  const Snapshot before = Take();
  const std::string garbage("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x0f\x12\xff\x01", 14);
  grpc::Status status = RawUnary("/dpcurator.v1.DatasetService/CreateDataset", garbage);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.error_code(), grpc::StatusCode::UNKNOWN) << status.error_message();
  // A truncated message: a length prefix that promises more than follows.
  v1::UploadRowsRequest good = GoodMessage(3, 6);
  const std::string serialized = good.SerializeAsString();
  grpc::ByteBuffer response;
  status = RawUpload({serialized.substr(0, serialized.size() / 2)}, &response);
  EXPECT_FALSE(status.ok());
  ExpectServingAndUnchanged(before, "garbage");
}

// gRPC's sync server cannot tell a message that fails to decode from the
// end of the stream: the handler ends as if the client had finished. What
// the server can do is count exactly: rows_accepted is what was stored, so
// a client that compares it with what it sent sees the short upload.
TEST_F(HostileInputTest, UndecodableMessageMidStreamEndsItWithAnExactCount) {
  const Snapshot before = Take();
  const std::string good = GoodMessage(3, 6).SerializeAsString();
  const std::string truncated = good.substr(0, good.size() - 5);
  grpc::ByteBuffer raw;
  grpc::Status status = RawUpload({good, truncated, good}, &raw);
  if (status.ok()) {
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(raw.Dump(&slices).ok());
    std::string bytes;
    for (const auto& slice : slices) bytes.append(slice.begin(), slice.end());
    v1::UploadRowsResponse response;
    ASSERT_TRUE(response.ParseFromString(bytes));
    EXPECT_EQ(response.rows_accepted(), Take().rows - before.rows);
    EXPECT_LT(response.rows_accepted(), 9) << "the undecodable message was counted";
  } else {
    // Refused outright: whole messages only.
    const int64_t stored = Take().rows - before.rows;
    EXPECT_TRUE(stored == 0 || stored == 3) << stored;
  }
  // Cells are bytes on the wire (Row.cells): invalid UTF-8, as from a
  // Latin-1 CSV, reaches the schema check instead of ending the stream.
  v1::UploadRowsRequest latin1 = GoodMessage(2, 7);
  SetCell(&latin1, 1, 0, "Z\xfcrich");
  v1::UploadRowsResponse response;
  status = UploadMessages({GoodMessage(2, 8), latin1}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("upload message 1, row 1"));
  EXPECT_THAT(status.error_message(), HasSubstr("Z\\xfcrich"));
}

// A stream cut off by the client: what was committed before stays whole,
// nothing is half-stored.
TEST_F(HostileInputTest, CancelledUploadStoresWholeMessagesOnly) {
  const Snapshot before = Take();
  auto curator = Curator();
  auto context = curator.NewContext();
  v1::UploadRowsResponse response;
  auto writer = curator.datasets().UploadRows(context.get(), &response);
  ASSERT_TRUE(writer->Write(GoodMessage(7, 7)));
  context->TryCancel();
  writer->Write(GoodMessage(9, 8));
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
  const Snapshot after = Take();
  EXPECT_TRUE(after.rows == before.rows || after.rows == before.rows + 7) << after.rows;
  EXPECT_EQ(after.events, before.events);
}

// ------------------------------------------------------------- reports ---

struct ReportCase {
  std::string name;
  v1::Report report;
  std::string reason;
};

std::string HostileReportId(int k) { return std::string(15, 'r') + static_cast<char>(k); }

struct Submitted {
  std::vector<v1::SubmitReportsAck> acks;
  grpc::Status status;
};

Submitted Submit(client::Connection connection, const std::vector<v1::SubmitReportsRequest>& batches) {
  Submitted out;
  auto context = connection.NewContext();
  auto stream = connection.collections().SubmitReports(context.get());
  for (const auto& batch : batches) {
    if (!stream->Write(batch)) break;
  }
  stream->WritesDone();
  v1::SubmitReportsAck ack;
  while (stream->Read(&ack)) out.acks.push_back(ack);
  out.status = stream->Finish();
  return out;
}

TEST_F(HostileInputTest, BadReportsAreRejectedOneByOneWithAReason) {
  const int d = LdpCollectionDimension();
  const std::vector<double> ok(d, 0.25);
  auto with = [&](int j, double v) {
    std::vector<double> values = ok;
    values[j] = v;
    return values;
  };
  auto mechanism = MechanismFromCollection(collection_);
  ASSERT_TRUE(mechanism.ok()) << mechanism.status();
  const double bound = ReportValueBound(*mechanism);
  const std::vector<ReportCase> cases = {
      {"nan", MakeReport(HostileReportId(1), with(0, kNan)), "value 0 is not finite"},
      {"inf", MakeReport(HostileReportId(2), with(1, kInf)), "value 1 is not finite"},
      {"-inf", MakeReport(HostileReportId(3), with(3, -kInf)), "value 3 is not finite"},
      {"huge", MakeReport(HostileReportId(4), with(2, 1e300)), "exceeds the public bound"},
      {"just-over-bound", MakeReport(HostileReportId(5), with(2, std::nextafter(bound, kInf))),
       "exceeds the public bound"},
      {"short", MakeReport(HostileReportId(6), std::vector<double>(d - 1, 0.1)), "dimension is 4"},
      {"long", MakeReport(HostileReportId(7), std::vector<double>(d + 1, 0.1)), "dimension is 4"},
      {"no-values", MakeReport(HostileReportId(8), {}), "report has 0 values"},
      {"empty-id", MakeReport("", ok), "exactly 16 bytes, got 0"},
      {"short-id", MakeReport(std::string(15, 'x'), ok), "exactly 16 bytes, got 15"},
      // Longer than 256 bytes: the whole batch is refused by the input-limits
      // interceptor (tests/server/input_limits_test.cc), not one report.
      {"long-id", MakeReport(std::string(200, 'x'), ok), "exactly 16 bytes, got 200"},
  };
  for (const ReportCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Snapshot before = Take();
    v1::SubmitReportsRequest batch;
    batch.set_collection_id(collection_.id());
    *batch.add_reports() = c.report;
    Submitted result = Submit(Device(), {batch});
    ASSERT_TRUE(result.status.ok()) << result.status.error_message();
    ASSERT_EQ(result.acks.size(), 1u);
    EXPECT_EQ(result.acks[0].accepted(), 0);
    ASSERT_EQ(result.acks[0].rejections_size(), 1);
    EXPECT_EQ(result.acks[0].rejections(0).index(), 0);
    EXPECT_THAT(result.acks[0].rejections(0).reason(), HasSubstr(c.reason));
    // The id echoed back is bounded (64 bytes, hex) whatever was sent.
    EXPECT_LE(result.acks[0].rejections(0).report_id_hex().size(), 128u);
    ExpectServingAndUnchanged(before, c.name);
  }
  // At the bound exactly is still a report.
  v1::SubmitReportsRequest batch;
  batch.set_collection_id(collection_.id());
  *batch.add_reports() = MakeReport(HostileReportId(9), with(0, -bound));
  Submitted result = Submit(Device(), {batch});
  ASSERT_TRUE(result.status.ok());
  ASSERT_EQ(result.acks.size(), 1u);
  EXPECT_EQ(result.acks[0].accepted(), 1);
}

TEST_F(HostileInputTest, DuplicateIdsInOneBatchAreStoredOnce) {
  v1::SubmitReportsRequest batch;
  batch.set_collection_id(collection_.id());
  for (int i = 0; i < 5; ++i) {
    *batch.add_reports() = MakeReport(HostileReportId(42), std::vector<double>(LdpCollectionDimension(), i));
  }
  Submitted result = Submit(Device(), {batch, batch});
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.acks.size(), 2u);
  EXPECT_EQ(result.acks[0].accepted(), 1);
  EXPECT_EQ(result.acks[0].duplicates(), 4);
  EXPECT_EQ(result.acks[1].accepted(), 0);
  EXPECT_EQ(result.acks[1].duplicates(), 5);
  EXPECT_EQ(Take().reports, 1);
}

TEST_F(HostileInputTest, MalformedReportStreamsAreRefusedAndStoreNothing) {
  const int d = LdpCollectionDimension();
  v1::SubmitReportsRequest huge;
  huge.set_collection_id(collection_.id());
  for (int i = 0; i <= CollectionServiceImpl::kMaxReportsPerBatch; ++i) {
    std::string id(16, '\0');
    id[0] = static_cast<char>(i & 0xff);
    id[1] = static_cast<char>((i >> 8) & 0xff);
    *huge.add_reports() = MakeReport(id, std::vector<double>(d, 0.1));
  }
  v1::SubmitReportsRequest anonymous;
  *anonymous.add_reports() = MakeReport(HostileReportId(1), std::vector<double>(d, 0.1));
  v1::SubmitReportsRequest unknown = anonymous;
  unknown.set_collection_id("col_nope");
  v1::SubmitReportsRequest other = anonymous;
  other.set_collection_id("col_other");
  v1::SubmitReportsRequest first = anonymous;
  first.set_collection_id(collection_.id());
  first.mutable_reports(0)->set_report_id(HostileReportId(2));

  struct StreamCase {
    std::string name;
    std::vector<v1::SubmitReportsRequest> batches;
    grpc::StatusCode code;
    std::string part;
    int64_t stored;  // reports committed by earlier batches of the stream
  };
  const std::vector<StreamCase> cases = {
      {"huge-batch", {huge}, grpc::StatusCode::INVALID_ARGUMENT, "send at most 10000", 0},
      {"no-collection", {anonymous}, grpc::StatusCode::INVALID_ARGUMENT,
       "must name the collection", 0},
      {"unknown-collection", {unknown}, grpc::StatusCode::NOT_FOUND, "col_nope", 0},
      {"switches-collection", {first, other}, grpc::StatusCode::INVALID_ARGUMENT,
       "one collection only", 1},
  };
  for (const StreamCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Snapshot before = Take();
    Submitted result = Submit(Device(), c.batches);
    EXPECT_EQ(result.status.error_code(), c.code) << result.status.error_message();
    EXPECT_THAT(result.status.error_message(), HasSubstr(c.part));
    EXPECT_EQ(static_cast<int64_t>(result.acks.size()), c.stored);
    Snapshot expected = before;
    expected.reports += c.stored;
    ExpectServingAndUnchanged(expected, c.name);
  }
}

// --------------------------------------------- releases and sessions ---

struct RequestCase {
  std::string name;
  std::function<grpc::Status(HostileInputTest*)> call;
  grpc::StatusCode code;
  std::string part;
};

TEST_F(HostileInputTest, AbsurdReleaseSessionAndCreateParametersAreRefusedFree) {
  const std::string id = dataset_.id();
  auto release = [this, id](std::function<void(v1::ReleaseRequest*)> edit) {
    return [this, id, edit](HostileInputTest*) {
      v1::ReleaseRequest request = RffRequest(id, 0.5, "hostile-key");
      edit(&request);
      v1::Release response;
      return RequestRelease(request, &response);
    };
  };
  auto charfn = [release](std::function<void(v1::CharfnEmbeddingParams*)> edit) {
    return release([edit](v1::ReleaseRequest* r) {
      r->mutable_charfn_embedding()->set_num_frequencies(20);
      r->mutable_charfn_embedding()->set_seed(7);
      edit(r->mutable_charfn_embedding());
    });
  };
  auto session = [this, id](std::function<void(v1::OpenSessionRequest*)> edit) {
    return [this, id, edit](HostileInputTest*) {
      v1::OpenSessionRequest request;
      request.set_dataset_id(id);
      request.set_idempotency_key("hostile-session");
      request.mutable_params()->set_steps(10);
      request.mutable_params()->set_sampling_rate(0.1);
      request.mutable_params()->set_noise_multiplier(2.0);
      request.mutable_params()->mutable_rff_embedding()->set_num_frequencies(20);
      edit(&request);
      auto analyst = Analyst();
      auto context = analyst.NewContext();
      v1::Session response;
      return analyst.sessions().OpenSession(context.get(), request, &response);
    };
  };
  auto create = [this](std::function<void(v1::CreateDatasetRequest*)> edit) {
    return [this, edit](HostileInputTest*) {
      v1::CreateDatasetRequest request;
      request.set_name("hostile");
      *request.mutable_schema() = DemoSchemaProto();
      request.mutable_budget()->set_epsilon(1.0);
      request.mutable_budget()->set_delta(1e-6);
      edit(&request);
      auto curator = Curator();
      auto context = curator.NewContext();
      v1::Dataset response;
      return curator.datasets().CreateDataset(context.get(), request, &response);
    };
  };
  auto collection = [this](std::function<void(v1::CollectionParams*)> edit) {
    return [this, edit](HostileInputTest*) {
      v1::CollectionParams params = LdpCollectionParams();
      edit(&params);
      v1::Collection response;
      return CreateLdpCollection("hostile-collection", &response, params);
    };
  };
  using C = grpc::StatusCode;
  const std::vector<RequestCase> cases = {
      // One-shot releases.
      {"release-negative-epsilon", release([](auto* r) { r->set_epsilon(-1); }),
       C::INVALID_ARGUMENT, "Epsilon must be finite and positive"},
      {"release-zero-epsilon", release([](auto* r) { r->set_epsilon(0); }), C::INVALID_ARGUMENT,
       "Epsilon must be finite and positive"},
      {"release-nan-epsilon", release([](auto* r) { r->set_epsilon(kNan); }), C::INVALID_ARGUMENT,
       "Epsilon must be finite and positive"},
      {"release-inf-epsilon", release([](auto* r) { r->set_epsilon(kInf); }), C::INVALID_ARGUMENT,
       "Epsilon must be finite and positive"},
      {"release-nan-noise", release([](auto* r) { r->set_noise_multiplier(kNan); }),
       C::INVALID_ARGUMENT, "Noise multiplier must be finite and positive"},
      {"release-zero-noise", release([](auto* r) { r->set_noise_multiplier(0); }),
       C::INVALID_ARGUMENT, "Noise multiplier must be finite and positive"},
      {"release-no-privacy", release([](auto* r) { r->clear_privacy(); }), C::INVALID_ARGUMENT,
       "needs a privacy level"},
      {"release-no-kind", release([](auto* r) { r->clear_kind(); }), C::INVALID_ARGUMENT,
       "names no kind"},
      {"release-huge-k",
       release([](auto* r) { r->mutable_rff_embedding()->set_num_frequencies(1 << 30); }),
       C::INVALID_ARGUMENT, "num_frequencies must be in [1, 20000]"},
      {"release-negative-k",
       release([](auto* r) { r->mutable_rff_embedding()->set_num_frequencies(-5); }),
       C::INVALID_ARGUMENT, "num_frequencies must be in"},
      {"release-nan-length-scale",
       release([](auto* r) { r->mutable_rff_embedding()->set_length_scale(kNan); }),
       C::INVALID_ARGUMENT, "length_scale must be in [1e-06, 1e+06]"},
      {"release-inf-length-scale",
       release([](auto* r) { r->mutable_rff_embedding()->set_length_scale(kInf); }),
       C::INVALID_ARGUMENT, "length_scale must be in [1e-06, 1e+06]"},
      {"release-nan-weight",
       release([](auto* r) {
         r->mutable_rff_embedding()->set_has_numeric_weight(true);
         r->mutable_rff_embedding()->set_numeric_weight(kNan);
       }),
       C::INVALID_ARGUMENT, "numeric_weight must be in [0, 1]"},
      {"release-weight-above-one",
       release([](auto* r) {
         r->mutable_rff_embedding()->set_has_numeric_weight(true);
         r->mutable_rff_embedding()->set_numeric_weight(1.5);
       }),
       C::INVALID_ARGUMENT, "numeric_weight must be in [0, 1]"},
      {"charfn-nan-numeric-length-scale", charfn([](auto* p) { p->set_numeric_length_scale(kNan); }),
       C::INVALID_ARGUMENT, "numeric_length_scale"},
      {"charfn-inf-numeric-length-scale", charfn([](auto* p) { p->set_numeric_length_scale(kInf); }),
       C::INVALID_ARGUMENT, "numeric_length_scale"},
      {"charfn-inf-length-scale", charfn([](auto* p) { p->set_length_scale(kInf); }),
       C::INVALID_ARGUMENT, "length_scale must be in [1e-06, 1e+06]"},
      {"release-over-cap", release([](auto* r) { r->set_epsilon(50.0); }),
       C::RESOURCE_EXHAUSTED, "requested 50"},
      {"release-unknown-dataset", release([](auto* r) { r->set_dataset_id("ds_nope"); }),
       C::NOT_FOUND, "ds_nope"},
      // Sessions.
      {"session-zero-steps", session([](auto* r) { r->mutable_params()->set_steps(0); }),
       C::INVALID_ARGUMENT, "Session steps must be a positive integer"},
      {"session-negative-steps", session([](auto* r) { r->mutable_params()->set_steps(-3); }),
       C::INVALID_ARGUMENT, "Session steps must be a positive integer"},
      {"session-huge-steps",
       session([](auto* r) { r->mutable_params()->set_steps(int64_t{1} << 40); }),
       C::INVALID_ARGUMENT, "Session steps must be at most"},
      {"session-nan-rate", session([](auto* r) { r->mutable_params()->set_sampling_rate(kNan); }),
       C::INVALID_ARGUMENT, "Sampling rate must be in (0, 1]"},
      {"session-rate-above-one",
       session([](auto* r) { r->mutable_params()->set_sampling_rate(1.5); }), C::INVALID_ARGUMENT,
       "Sampling rate must be in (0, 1]"},
      {"session-nan-epsilon", session([](auto* r) { r->mutable_params()->set_epsilon(kNan); }),
       C::INVALID_ARGUMENT, "Epsilon must be finite and positive"},
      {"session-inf-noise",
       session([](auto* r) { r->mutable_params()->set_noise_multiplier(kInf); }),
       C::INVALID_ARGUMENT, "Noise multiplier must be finite and positive"},
      {"session-huge-k",
       session([](auto* r) {
         r->mutable_params()->mutable_rff_embedding()->set_num_frequencies(1 << 30);
       }),
       C::INVALID_ARGUMENT, "num_frequencies must be in"},
      {"session-unknown-dataset", session([](auto* r) { r->set_dataset_id("ds_nope"); }),
       C::NOT_FOUND, "ds_nope"},
      // Datasets.
      {"dataset-nan-epsilon", create([](auto* r) { r->mutable_budget()->set_epsilon(kNan); }),
       C::INVALID_ARGUMENT, "Budget epsilon must be finite and positive"},
      {"dataset-negative-epsilon", create([](auto* r) { r->mutable_budget()->set_epsilon(-2); }),
       C::INVALID_ARGUMENT, "Budget epsilon must be finite and positive"},
      {"dataset-delta-one", create([](auto* r) { r->mutable_budget()->set_delta(1.0); }),
       C::INVALID_ARGUMENT, "Budget delta must be in (0, 1)"},
      {"dataset-empty-name", create([](auto* r) { r->set_name(""); }), C::INVALID_ARGUMENT,
       "1 to 200 characters"},
      {"dataset-no-columns", create([](auto* r) { r->mutable_schema()->clear_columns(); }),
       C::INVALID_ARGUMENT, "at least one column"},
      {"dataset-nan-bound",
       create([](auto* r) { r->mutable_schema()->mutable_columns(1)->set_upper(kNan); }),
       C::INVALID_ARGUMENT, "finite declared bounds"},
      {"dataset-overflowing-bounds",
       create([](auto* r) {
         r->mutable_schema()->mutable_columns(1)->set_lower(-1e308);
         r->mutable_schema()->mutable_columns(1)->set_upper(1e308);
       }),
       C::INVALID_ARGUMENT, "width"},
      {"dataset-padded-category",
       create([](auto* r) { r->mutable_schema()->mutable_columns(0)->set_categories(0, " north"); }),
       C::INVALID_ARGUMENT, "whitespace"},
      // Collections.
      {"collection-nan-epsilon", collection([](auto* p) { p->set_epsilon(kNan); }),
       C::INVALID_ARGUMENT, "Epsilon must be finite and positive"},
      {"collection-zero-epsilon", collection([](auto* p) { p->set_epsilon(0); }),
       C::INVALID_ARGUMENT, "Epsilon must be finite and positive"},
      {"collection-nan-radius", collection([](auto* p) { p->set_radius(kNan); }),
       C::INVALID_ARGUMENT, "radius must be finite"},
      {"collection-inf-radius", collection([](auto* p) { p->set_radius(kInf); }),
       C::INVALID_ARGUMENT, "radius must be finite"},
      {"collection-gaussian-no-delta", collection([](auto* p) { p->set_mechanism("gaussian-l2"); }),
       C::INVALID_ARGUMENT, "Delta must be in (0, 1)"},
      {"collection-unknown-mechanism", collection([](auto* p) { p->set_mechanism("rappor"); }),
       C::INVALID_ARGUMENT, "expected laplace-l1 or gaussian-l2"},
      {"collection-no-schema", collection([](auto* p) { p->clear_schema(); }),
       C::INVALID_ARGUMENT, "at least one column"},
  };
  for (const RequestCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Snapshot before = Take();
    grpc::Status status = c.call(this);
    EXPECT_EQ(status.error_code(), c.code) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.part));
    ExpectServingAndUnchanged(before, c.name);
  }
}

}  // namespace
}  // namespace dpcurator::server::testing
