// Local-DP collections: validated, deduplicated, durable ingestion with acks
// after commit; role checks; free download with the mechanism parameters.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/device.h"
#include "client/methods/registry.h"
#include "client/methods/sinkhorn.h"
#include "core/data/demo.h"
#include "core/privacy/noise_source.h"
#include "proto/collection.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;

std::string Id(int k) {
  std::string id(16, '\0');
  id[0] = static_cast<char>(k & 0xff);
  id[1] = static_cast<char>((k >> 8) & 0xff);
  id[15] = 'x';
  return id;
}

std::vector<double> Row(double v) { return std::vector<double>(LdpCollectionDimension(), v); }

std::vector<std::vector<double>> Sorted(std::vector<std::vector<double>> rows) {
  std::sort(rows.begin(), rows.end());
  return rows;
}

struct Download {
  v1::Collection collection;
  int64_t rows = 0;
  int chunks = 0;
  std::vector<std::vector<double>> values;
  grpc::Status status;
};

Download DownloadAll(client::Connection connection, const std::string& collection_id) {
  Download out;
  auto context = connection.NewContext();
  v1::DownloadReportsRequest request;
  request.set_collection_id(collection_id);
  auto reader = connection.collections().DownloadReports(context.get(), request);
  v1::ReportChunk chunk;
  while (reader->Read(&chunk)) {
    if (out.chunks == 0) out.collection = chunk.collection();
    ++out.chunks;
    const int d = out.collection.dimension();
    EXPECT_EQ(chunk.values_size(), chunk.rows() * d);
    for (int i = 0; i < chunk.rows(); ++i) {
      out.values.emplace_back(chunk.values().begin() + i * d,
                              chunk.values().begin() + (i + 1) * d);
    }
    out.rows += chunk.rows();
  }
  out.status = reader->Finish();
  return out;
}

class CollectionTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    grpc::Status status = CreateLdpCollection("c", &collection_);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  v1::Collection Get(const client::Connection& connection) {
    auto c = connection;
    auto context = c.NewContext();
    v1::GetCollectionRequest request;
    request.set_collection_id(collection_.id());
    v1::Collection collection;
    grpc::Status status = c.collections().GetCollection(context.get(), request, &collection);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return collection;
  }

  v1::Collection collection_;
};

// Image records live in [-1, 1] on the device (2v - 1: the ball is centred
// on mid-grey), tables in their encoding; the trainer's sampler maps back.
TEST(RecordSpaceTest, ImagesMapToMinusOneOneAndBackTablesStay) {
  data::Schema::Builder images;
  images.AddImage("pixels", 2, 2);
  const data::Schema image_schema = images.Build().value();
  const RecordSpace space = CollectionRecordSpace(image_schema);
  EXPECT_EQ(space.low, -1.0);
  EXPECT_EQ(space.high, 1.0);
  data::ImageSet set;
  set.height = set.width = 2;
  set.pixels = {0.0f, 1.0f, 0.5f, 0.2f};
  set.labels = {0};
  auto table = client::ImageTable(image_schema, set, -1);
  ASSERT_TRUE(table.ok()) << table.status();
  const Eigen::MatrixXd records = client::EncodeRows(image_schema, *table);
  ASSERT_EQ(records.cols(), 4);
  EXPECT_DOUBLE_EQ(records(0, 0), -1.0);
  EXPECT_DOUBLE_EQ(records(0, 1), 1.0);
  EXPECT_NEAR(records(0, 2), 2.0 * 128 / 255 - 1, 1e-12);  // level round(127.5) = 128
  EXPECT_NEAR(records(0, 3), 2.0 * 51 / 255 - 1, 1e-12);
  EXPECT_TRUE(FromRecordSpace(space, records).isApprox(
      (records.array() + 1.0).matrix() / 2.0));
  // The default l2 radius is the norm of an all-black or all-white image.
  EXPECT_DOUBLE_EQ(DefaultCollectionRadius(image_schema, ldp::LdpKind::kGaussianL2), 2.0);
  // Only that class's images are a per-class device's records.
  set.pixels.insert(set.pixels.end(), {1.0f, 1.0f, 1.0f, 1.0f});
  set.labels = {0, 3};
  auto class3 = client::ImageTable(image_schema, set, 3);
  ASSERT_TRUE(class3.ok());
  EXPECT_EQ(class3->num_rows(), 1);
  EXPECT_EQ(class3->pixels, std::vector<uint8_t>(4, 255));

  data::Schema::Builder table_builder;
  table_builder.AddNumeric("x", 0, 1);
  const data::Schema table_schema = table_builder.Build().value();
  const RecordSpace identity = CollectionRecordSpace(table_schema);
  EXPECT_EQ(identity.scale, 1.0);
  EXPECT_EQ(identity.offset, 0.0);
  EXPECT_FALSE(identity.low < identity.high);  // unbounded head
  EXPECT_FALSE(client::ImageTable(table_schema, set, -1).ok());
}

// Issue 24, item 3: the report bound is the tail bound of the collection's
// own noise law (docs/privacy.md 2.6 "Report bounds and quotas"), not the
// old 1e6 (R + 1).
ldp::LdpMechanism BuildMechanism(ldp::LdpKind kind, double radius, double epsilon, int d) {
  ldp::LdpMechanism::Builder builder;
  builder.SetKind(kind).SetDimension(d).SetRadius(radius).SetEpsilon(epsilon);
  if (kind == ldp::LdpKind::kGaussianL2) builder.SetDelta(1e-5);
  return builder.Build().value();
}

TEST(ReportBoundTest, IsTheNoiseLawsTailBoundAtSeveralParameters) {
  struct Case {
    ldp::LdpKind kind;
    double radius, epsilon;
    int d;
    double low, high;  // the bound, worked out by hand from the formula
  };
  // Laplace: b = 2R / eps, bound ~ R + b ln(d / 1e-9).
  //   R = 2, eps = 1, d = 4:    2 + 4 ln(4e9) = 2 + 4 * 22.11 = 90.4
  //   R = 4, eps = 1, d = 4:    4 + 8 * 22.11 = 180.9
  //   R = 1, eps = 5, d = 100:  1 + 0.4 ln(1e11) = 1 + 0.4 * 25.33 = 11.1
  // Gaussian: bound ~ R + sigma sqrt(2 ln(2d / 1e-9)), sigma from the RDP
  //   calibration (checked against applied_noise_scale below).
  const std::vector<Case> cases = {
      {ldp::LdpKind::kLaplaceL1, 2.0, 1.0, 4, 90.3, 90.5},
      {ldp::LdpKind::kLaplaceL1, 4.0, 1.0, 4, 180.8, 181.0},
      {ldp::LdpKind::kLaplaceL1, 1.0, 5.0, 100, 11.1, 11.2},
      {ldp::LdpKind::kGaussianL2, 1.5, 2.0, 4, 0.0, 1e300},
      {ldp::LdpKind::kGaussianL2, 2.0, 30.0, 784, 0.0, 1e300},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(ldp::LdpKindName(c.kind), " R=", c.radius, " eps=", c.epsilon,
                              " d=", c.d));
    const ldp::LdpMechanism m = BuildMechanism(c.kind, c.radius, c.epsilon, c.d);
    const double bound = ReportValueBound(m);
    const double s = m.applied_noise_scale();
    const double tail = c.kind == ldp::LdpKind::kLaplaceL1
                            ? s * std::log(c.d / 1e-9)
                            : s * std::sqrt(2.0 * std::log(2.0 * c.d / 1e-9));
    EXPECT_NEAR(bound, c.radius + tail, 3 * m.noise_grid());
    EXPECT_GT(bound, c.low);
    EXPECT_LT(bound, c.high);
    // Far inside the old garbage bound.
    EXPECT_LT(bound, 1e-3 * 1e6 * (c.radius + 1.0));
  }
  // Gaussian at the hand-checkable point: the tail is 6.7-6.8 sigma at d = 4.
  const ldp::LdpMechanism g = BuildMechanism(ldp::LdpKind::kGaussianL2, 1.5, 2.0, 4);
  const double sigmas = (ReportValueBound(g) - 1.5) / g.noise_scale();
  EXPECT_GT(sigmas, 6.7);
  EXPECT_LT(sigmas, 6.8);
}

// 10^5 honest reports of each kind, from records on the ball's surface with
// all their mass on one coordinate (the largest |x_i| an honest record can
// have), privatized by the device path: every one passes.
TEST(ReportBoundTest, HonestReportsOfTheDevicePathAllPass) {
  constexpr int kReports = 100000;
  for (const ldp::LdpKind kind : {ldp::LdpKind::kLaplaceL1, ldp::LdpKind::kGaussianL2}) {
    SCOPED_TRACE(ldp::LdpKindName(kind));
    const int d = 4;
    const ldp::LdpMechanism m = BuildMechanism(kind, 2.0, 1.0, d);
    const double bound = ReportValueBound(m);
    Eigen::MatrixXd records = Eigen::MatrixXd::Zero(kReports, d);
    for (int i = 0; i < kReports; ++i) records(i, i % d) = (i % 2 == 0 ? 1.0 : -1.0) * 2.0;
    privacy::SeededNoiseSource noise(2024 + static_cast<int>(kind));
    auto reports = client::PrivatizeReports(m, records, &noise);
    ASSERT_TRUE(reports.ok()) << reports.status();
    ASSERT_EQ(reports->size(), static_cast<size_t>(kReports));
    int refused = 0;
    double largest = 0.0;
    for (const v1::Report& report : *reports) {
      if (!ValidateReport(report, d, bound).ok()) ++refused;
      for (double v : report.values()) largest = std::max(largest, std::fabs(v));
    }
    EXPECT_EQ(refused, 0);
    // The bound is not vacuous: the reports do reach a good part of it
    // (the largest of 4e5 noise draws is about ln(4e5) / ln(4e9) = 59% of
    // the Laplace tail, sqrt(ln 8e5 / ln 8e9) = 75% of the Gaussian's).
    EXPECT_GT(largest, 0.4 * bound);
  }
}

TEST_F(CollectionTest, ReportsJustAboveTheBoundAreRefusedBeforeStorage) {
  auto mechanism = MechanismFromCollection(collection_);
  ASSERT_TRUE(mechanism.ok()) << mechanism.status();
  const double bound = ReportValueBound(*mechanism);
  // R = 4, b = 8: about 181, where the old bound was 5e6.
  ASSERT_LT(bound, 200.0);
  std::vector<double> at_bound = Row(0.1);
  at_bound[0] = -bound;
  std::vector<double> just_above = Row(0.1);
  just_above[1] = std::nextafter(bound, 1e300);
  std::vector<double> far_above = Row(0.1);
  far_above[2] = -1000.0;  // accepted before issue 24
  v1::Report above = MakeReport(Id(51), just_above);
  EXPECT_EQ(ValidateReport(above, 4, bound).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ValidateReport(above, 4, bound).message(),
              HasSubstr(absl::StrCat("exceeds the public bound ", bound)));
  ReportStreamResult result = SubmitReportBatches(
      Device(), collection_.id(),
      {{MakeReport(Id(50), at_bound), above, MakeReport(Id(52), far_above)}});
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.acks.size(), 1u);
  EXPECT_EQ(result.acks[0].accepted(), 1);
  ASSERT_EQ(result.acks[0].rejections_size(), 2);
  EXPECT_EQ(result.acks[0].rejections(0).index(), 1);
  EXPECT_THAT(result.acks[0].rejections(0).reason(),
              HasSubstr(absl::StrCat("value 1 = ", just_above[1], " exceeds the public bound ",
                                     bound)));
  EXPECT_EQ(result.acks[0].rejections(1).index(), 2);
  EXPECT_THAT(result.acks[0].rejections(1).reason(), HasSubstr("exceeds the public bound"));
  // Only the report at the bound was stored.
  EXPECT_EQ(Get(Curator()).report_count(), 1);
  Download download = DownloadAll(Analyst(), collection_.id());
  ASSERT_TRUE(download.status.ok());
  EXPECT_EQ(download.values, std::vector<std::vector<double>>{at_bound});
}

// Issue 24, item 3: one device token flooding a collection stops at its
// quota, with nothing of the refused batch stored, while another device's
// reports are still accepted; what the collection then holds is exactly the
// honest reports plus at most quota-many of the flooder's, each within the
// bound, so the flooder moves the reports' mean by at most
// quota * bound / n per coordinate.
TEST_F(CollectionTest, AFloodingTokenStopsAtItsQuotaAndOthersAreStillAccepted) {
  EXPECT_EQ(ServerOptions().max_reports_per_token, 10000);
  constexpr int64_t kQuota = 30;
  StopServer();
  {
    ServerOptions options = Options();
    options.max_reports_per_token = kQuota;
    auto started = CuratorServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }
  v1::CreateTokenResponse honest_token;
  ASSERT_TRUE(CreateToken(v1::ROLE_DEVICE, "honest device", &honest_token).ok());
  auto mechanism = MechanismFromCollection(collection_);
  ASSERT_TRUE(mechanism.ok()) << mechanism.status();
  const double bound = ReportValueBound(*mechanism);

  // The flooder: batches of 10 reports at the bound (the worst it may send).
  std::vector<double> poison = Row(0.0);
  poison[0] = bound;
  std::vector<std::vector<v1::Report>> flood;
  for (int b = 0; b < 5; ++b) {
    std::vector<v1::Report> batch;
    for (int i = 0; i < 10; ++i) batch.push_back(MakeReport(Id(1000 + 10 * b + i), poison));
    flood.push_back(std::move(batch));
  }
  ReportStreamResult flooded = SubmitReportBatches(Device(), collection_.id(), flood);
  EXPECT_EQ(flooded.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(flooded.status.error_message(),
              HasSubstr("may store at most 30 reports in collection"));
  EXPECT_THAT(flooded.status.error_message(), HasSubstr("has 30; batch 3 would add 10"));
  EXPECT_THAT(flooded.status.error_message(), HasSubstr("Nothing of this batch was stored"));
  ASSERT_EQ(flooded.acks.size(), 3u);  // batches 0-2, then the refusal
  EXPECT_EQ(Get(Curator()).report_count(), kQuota);
  // A new stream, one more report: refused before storage too.
  ReportStreamResult again =
      SubmitReportBatches(Device(), collection_.id(), {{MakeReport(Id(2000), poison)}});
  EXPECT_EQ(again.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(again.acks.empty());
  // A resend of stored reports adds nothing and is still answered.
  ReportStreamResult resend = SubmitReportBatches(Device(), collection_.id(), {flood[0]});
  ASSERT_TRUE(resend.status.ok()) << resend.status.error_message();
  ASSERT_EQ(resend.acks.size(), 1u);
  EXPECT_EQ(resend.acks[0].duplicates(), 10);

  // Another device token: its honest, privatized reports are all accepted.
  privacy::SeededNoiseSource noise(11);
  const Eigen::MatrixXd records = Eigen::MatrixXd::Constant(kQuota, 4, 0.5);
  auto honest = client::PrivatizeReports(*mechanism, records, &noise);
  ASSERT_TRUE(honest.ok()) << honest.status();
  ReportStreamResult accepted = SubmitReportBatches(
      WithToken(honest_token.token()), collection_.id(),
      {std::vector<v1::Report>(honest->begin(), honest->begin() + 20),
       std::vector<v1::Report>(honest->begin() + 20, honest->end())});
  ASSERT_TRUE(accepted.status.ok()) << accepted.status.error_message();
  ASSERT_EQ(accepted.acks.size(), 2u);
  EXPECT_EQ(accepted.acks[0].accepted() + accepted.acks[1].accepted(), kQuota);

  // Stored: exactly the honest reports and the flooder's first 30.
  Download download = DownloadAll(Analyst(), collection_.id());
  ASSERT_TRUE(download.status.ok()) << download.status.error_message();
  std::vector<std::vector<double>> expected(kQuota, poison);
  for (const v1::Report& r : *honest) expected.emplace_back(r.values().begin(), r.values().end());
  EXPECT_EQ(Sorted(download.values), Sorted(expected));
  for (const auto& row : download.values) {
    for (double v : row) EXPECT_LE(std::fabs(v), bound);
  }
}

// Issue 24, item 4 (streams): a token revoked while its stream is open
// stops the stream at the next message; what came before stays stored.
TEST_F(CollectionTest, RevokedTokenStopsAnOpenReportStreamAtTheNextMessage) {
  v1::CreateTokenResponse created;
  ASSERT_TRUE(CreateToken(v1::ROLE_DEVICE, "revoked mid-stream", &created).ok());
  auto device = WithToken(created.token());
  auto context = device.NewContext();
  auto stream = device.collections().SubmitReports(context.get());
  v1::SubmitReportsRequest first;
  first.set_collection_id(collection_.id());
  *first.add_reports() = MakeReport(Id(60), Row(0.1));
  ASSERT_TRUE(stream->Write(first));
  v1::SubmitReportsAck ack;
  ASSERT_TRUE(stream->Read(&ack));  // committed before the ack
  EXPECT_EQ(ack.accepted(), 1);
  ASSERT_TRUE(RevokeToken(created.info().token_id()).ok());
  v1::SubmitReportsRequest second;
  *second.add_reports() = MakeReport(Id(61), Row(0.2));
  stream->Write(second);  // may fail once the server has ended the call
  stream->WritesDone();
  EXPECT_FALSE(stream->Read(&ack));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(status.error_message(),
            "the token was revoked during the stream; nothing after message 0 was stored");
  EXPECT_EQ(Get(Curator()).report_count(), 1);
  Download download = DownloadAll(Analyst(), collection_.id());
  EXPECT_EQ(download.values, std::vector<std::vector<double>>{Row(0.1)});
}

TEST_F(CollectionTest, RevokedTokenStopsAnOpenUploadStreamAtTheNextMessage) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(1.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  v1::CreateTokenResponse created;
  ASSERT_TRUE(CreateToken(v1::ROLE_CURATOR, "revoked mid-upload", &created).ok());
  auto curator = WithToken(created.token());
  auto context = curator.NewContext();
  v1::UploadRowsResponse response;
  auto writer = curator.datasets().UploadRows(context.get(), &response);
  const std::vector<v1::Row> rows = DemoRows(data::GenerateDemoTable(20, 5));
  v1::UploadRowsRequest first;
  first.set_dataset_id(dataset.id());
  for (int i = 0; i < 10; ++i) *first.add_rows() = rows[i];
  ASSERT_TRUE(writer->Write(first));
  // An upload is one transaction (stored at the end of the stream), so a
  // revocation at any message leaves nothing of it stored.
  ASSERT_TRUE(RevokeToken(created.info().token_id()).ok());
  v1::UploadRowsRequest second;
  for (int i = 10; i < 20; ++i) *second.add_rows() = rows[i];
  writer->Write(second);
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(status.error_message(),
            "the token was revoked during the stream; nothing of this upload was stored");
  v1::Dataset seen;
  ASSERT_TRUE(FindDataset(Curator(), dataset.id(), &seen).ok());
  EXPECT_EQ(seen.row_count(), 0);
}

TEST_F(CollectionTest, CreateResolvesThePublicParameters) {
  EXPECT_EQ(collection_.state(), v1::Collection::OPEN);
  EXPECT_EQ(collection_.dimension(), 4);
  EXPECT_EQ(collection_.params().mechanism(), "laplace-l1");
  // Default l1 radius: d_num = 4; Laplace b = 2R / eps = 8 = lambda, p = 1.
  EXPECT_DOUBLE_EQ(collection_.params().radius(), 4.0);
  EXPECT_DOUBLE_EQ(collection_.noise_scale(), 8.0);
  EXPECT_DOUBLE_EQ(collection_.regularizer(), 8.0);
  EXPECT_EQ(collection_.cost_exponent(), 1);

  v1::CollectionParams bad = LdpCollectionParams();
  bad.set_mechanism("laplace-l3");
  v1::Collection ignored;
  EXPECT_EQ(CreateLdpCollection("bad", &ignored, bad).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  bad = LdpCollectionParams();
  bad.set_epsilon(-1.0);
  EXPECT_EQ(CreateLdpCollection("bad", &ignored, bad).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(CollectionTest, DuplicateReportIdIsStoredOnce) {
  ReportStreamResult first = SubmitReportBatches(Device(), collection_.id(),
                              {{MakeReport(Id(1), Row(0.1)), MakeReport(Id(2), Row(0.2)),
                                MakeReport(Id(1), Row(0.9))}});
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  ASSERT_EQ(first.acks.size(), 1u);
  EXPECT_EQ(first.acks[0].accepted(), 2);
  EXPECT_EQ(first.acks[0].duplicates(), 1);
  // A resend (as after a broken stream) stores nothing new.
  ReportStreamResult again = SubmitReportBatches(Device(), collection_.id(),
                              {{MakeReport(Id(1), Row(0.1))}, {MakeReport(Id(2), Row(0.2))}});
  ASSERT_TRUE(again.status.ok());
  ASSERT_EQ(again.acks.size(), 2u);
  EXPECT_EQ(again.acks[0].batch_index(), 0);
  EXPECT_EQ(again.acks[1].batch_index(), 1);
  EXPECT_EQ(again.acks[0].accepted() + again.acks[1].accepted(), 0);
  EXPECT_EQ(again.acks[0].duplicates() + again.acks[1].duplicates(), 2);
  EXPECT_EQ(Get(Curator()).report_count(), 2);
  Download download = DownloadAll(Analyst(), collection_.id());
  ASSERT_TRUE(download.status.ok()) << download.status.error_message();
  EXPECT_EQ(download.rows, 2);
  // The first copy of report 1 is the one kept.
  EXPECT_EQ(Sorted(download.values), Sorted({Row(0.1), Row(0.2)}));
}

TEST_F(CollectionTest, BadReportsAreNamedAndTheOthersStored) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> with_nan = Row(0.3);
  with_nan[2] = nan;
  std::vector<double> huge = Row(0.3);
  huge[1] = 1e12;
  ReportStreamResult result = SubmitReportBatches(Device(), collection_.id(),
                               {{MakeReport(Id(10), Row(0.1)),        // 0 good
                                 MakeReport(Id(11), with_nan),        // 1 NaN
                                 MakeReport(Id(12), {0.1, 0.2}),      // 2 wrong dimension
                                 MakeReport("short", Row(0.1)),       // 3 bad id
                                 MakeReport(Id(14), huge),            // 4 garbage
                                 MakeReport(Id(15), Row(-0.5))}});    // 5 good
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.acks.size(), 1u);
  const auto& ack = result.acks[0];
  EXPECT_EQ(ack.accepted(), 2);
  EXPECT_EQ(ack.duplicates(), 0);
  ASSERT_EQ(ack.rejections_size(), 4);
  EXPECT_EQ(ack.rejections(0).index(), 1);
  EXPECT_THAT(ack.rejections(0).reason(), HasSubstr("not finite"));
  EXPECT_EQ(ack.rejections(0).report_id_hex(), absl::StrCat("0b", std::string(28, '0'), "78"));
  EXPECT_EQ(ack.rejections(1).index(), 2);
  EXPECT_THAT(ack.rejections(1).reason(), HasSubstr("dimension"));
  EXPECT_EQ(ack.rejections(2).index(), 3);
  EXPECT_THAT(ack.rejections(2).reason(), HasSubstr("16 bytes"));
  EXPECT_EQ(ack.rejections(3).index(), 4);
  EXPECT_THAT(ack.rejections(3).reason(), HasSubstr("bound"));
  Download download = DownloadAll(Analyst(), collection_.id());
  EXPECT_EQ(Sorted(download.values), Sorted({Row(0.1), Row(-0.5)}));
}

TEST_F(CollectionTest, AcknowledgedReportSurvivesRestart) {
  ReportStreamResult result =
      SubmitReportBatches(Device(), collection_.id(), {{MakeReport(Id(20), Row(0.25))},
                                          {MakeReport(Id(21), Row(0.75))}});
  ASSERT_TRUE(result.status.ok());
  ASSERT_EQ(result.acks.size(), 2u);
  StopServer();
  StartServer();
  EXPECT_EQ(Get(Analyst()).report_count(), 2);
  Download download = DownloadAll(Analyst(), collection_.id());
  ASSERT_TRUE(download.status.ok());
  EXPECT_EQ(Sorted(download.values), Sorted({Row(0.25), Row(0.75)}));
  EXPECT_TRUE(server_->integrity_problems().empty());
}

TEST_F(CollectionTest, RolesAreEnforced) {
  // Devices may read the public parameters, nothing else but submitting.
  EXPECT_EQ(Get(Device()).id(), collection_.id());
  {
    auto device = Device();
    auto context = device.NewContext();
    v1::CreateCollectionRequest request;
    request.set_name("by-device");
    *request.mutable_params() = LdpCollectionParams();
    v1::Collection response;
    EXPECT_EQ(device.collections().CreateCollection(context.get(), request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    auto device = Device();
    auto context = device.NewContext();
    v1::CloseCollectionRequest request;
    request.set_collection_id(collection_.id());
    v1::Collection response;
    EXPECT_EQ(device.collections().CloseCollection(context.get(), request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(DownloadAll(Device(), collection_.id()).status.error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  {
    auto device = Device();
    auto context = device.NewContext();
    v1::ListDatasetsResponse response;
    EXPECT_EQ(device.datasets().ListDatasets(context.get(), {}, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // Analysts and curators may not submit.
  for (auto connection : {Analyst(), Curator()}) {
    ReportStreamResult result =
        SubmitReportBatches(connection, collection_.id(), {{MakeReport(Id(30), Row(0.5))}});
    EXPECT_EQ(result.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_TRUE(result.acks.empty());
  }
  EXPECT_EQ(Get(Curator()).report_count(), 0);
  EXPECT_EQ(Get(Curator()).state(), v1::Collection::OPEN);
}

TEST_F(CollectionTest, DownloadReturnsExactlyTheStoredReportsAndTheMechanism) {
  auto mechanism = MechanismFromCollection(collection_);
  ASSERT_TRUE(mechanism.ok()) << mechanism.status();
  privacy::SeededNoiseSource noise(7);
  Eigen::MatrixXd records = Eigen::MatrixXd::Constant(2500, 4, 0.5);
  auto reports = client::PrivatizeReports(*mechanism, records, &noise);
  ASSERT_TRUE(reports.ok()) << reports.status();
  auto device = Device();
  auto summary = client::SubmitReports(device, collection_.id(), *reports, 1000);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->accepted, 2500);
  EXPECT_EQ(summary->duplicates, 0);
  EXPECT_TRUE(summary->rejections.empty());
  EXPECT_EQ(summary->attempts, 1);
  // Resending everything (a retry after a lost ack) stores nothing twice.
  auto resend = client::SubmitReports(device, collection_.id(), *reports, 700);
  ASSERT_TRUE(resend.ok()) << resend.status();
  EXPECT_EQ(resend->accepted, 0);
  EXPECT_EQ(resend->duplicates, 2500);

  Download download = DownloadAll(Analyst(), collection_.id());
  ASSERT_TRUE(download.status.ok()) << download.status.error_message();
  EXPECT_EQ(download.rows, 2500);
  EXPECT_EQ(download.collection.id(), collection_.id());
  EXPECT_EQ(download.collection.params().mechanism(), "laplace-l1");
  EXPECT_DOUBLE_EQ(download.collection.params().epsilon(), 1.0);
  EXPECT_DOUBLE_EQ(download.collection.params().radius(), 4.0);
  EXPECT_DOUBLE_EQ(download.collection.noise_scale(), mechanism->noise_scale());
  EXPECT_DOUBLE_EQ(download.collection.regularizer(), mechanism->regularizer());
  EXPECT_EQ(download.collection.cost_exponent(), 1);
  EXPECT_EQ(download.collection.report_count(), 2500);
  std::vector<std::vector<double>> sent;
  for (const auto& r : *reports) sent.emplace_back(r.values().begin(), r.values().end());
  std::sort(sent.begin(), sent.end());
  std::vector<std::vector<double>> got = download.values;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, sent);  // bit-exact
}

// The trainer path end to end: download -> train sinkhorn -> sample decodes
// rows of the label-less schema (a few steps only; quality is the core
// tests' business).
TEST_F(CollectionTest, DownloadedReportsTrainASinkhornModelThatSamples) {
  auto mechanism = MechanismFromCollection(collection_);
  ASSERT_TRUE(mechanism.ok());
  privacy::SeededNoiseSource noise(3);
  Eigen::MatrixXd records = Eigen::MatrixXd::Constant(300, 4, 0.25);
  auto reports = client::PrivatizeReports(*mechanism, records, &noise);
  ASSERT_TRUE(reports.ok());
  auto device = Device();
  ASSERT_TRUE(client::SubmitReports(device, collection_.id(), *reports, 100).ok());
  Download download = DownloadAll(Analyst(), collection_.id());
  ASSERT_TRUE(download.status.ok());
  v1::ReportsFile file;
  file.set_format_version(client::kReportsFileFormatVersion);
  *file.mutable_collection() = download.collection;
  file.set_rows(download.rows);
  for (const auto& row : download.values) file.mutable_values()->Add(row.begin(), row.end());
  train::SinkhornTrainerOptions options;
  options.steps = 3;
  options.batch_size = 64;
  options.generator.hidden = {16};
  auto model = client::TrainSinkhornModel(file, options, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->method(), "sinkhorn");
  EXPECT_EQ(model->output_dim(), 4);
  EXPECT_EQ(model->collection_id(), collection_.id());
  auto table = client::SampleModel(*model, 50, 9);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->num_rows(), 50);
  ASSERT_EQ(table->cells.cols(), 4);
  EXPECT_GE(table->cells.minCoeff(), 0.0);
  EXPECT_LE(table->cells.maxCoeff(), 1.0);
}

TEST_F(CollectionTest, DownloadOfALargeCollectionIsChunked) {
  v1::CollectionParams params = LdpCollectionParams();
  // 600 columns: 4 MiB holds < 900 rows per chunk.
  params.mutable_schema()->clear_columns();
  for (int j = 0; j < 600; ++j) {
    v1::ColumnSchema* column = params.mutable_schema()->add_columns();
    column->set_name(absl::StrCat("c", j));
    column->set_type(v1::ColumnSchema::NUMERIC);
    column->set_lower(0.0);
    column->set_upper(1.0);
  }
  v1::Collection wide;
  ASSERT_TRUE(CreateLdpCollection("wide", &wide, params).ok());
  std::vector<v1::Report> reports;
  for (int i = 0; i < 2000; ++i) {
    reports.push_back(MakeReport(Id(i), std::vector<double>(600, i * 1e-3)));
  }
  auto device = Device();
  auto summary = client::SubmitReports(device, wide.id(), reports, 500);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->accepted, 2000);
  Download download = DownloadAll(Analyst(), wide.id());
  ASSERT_TRUE(download.status.ok()) << download.status.error_message();
  EXPECT_EQ(download.rows, 2000);
  EXPECT_GE(download.chunks, 3);
}

TEST_F(CollectionTest, ClosedCollectionRefusesReports) {
  ASSERT_TRUE(SubmitReportBatches(Device(), collection_.id(), {{MakeReport(Id(40), Row(0.5))}}).status.ok());
  {
    auto curator = Curator();
    auto context = curator.NewContext();
    v1::CloseCollectionRequest request;
    request.set_collection_id(collection_.id());
    v1::Collection closed;
    ASSERT_TRUE(curator.collections().CloseCollection(context.get(), request, &closed).ok());
    EXPECT_EQ(closed.state(), v1::Collection::CLOSED);
  }
  ReportStreamResult result = SubmitReportBatches(Device(), collection_.id(), {{MakeReport(Id(41), Row(0.5))}});
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(result.status.error_message(), HasSubstr("closed"));
  EXPECT_TRUE(result.acks.empty());
  // The device client does not retry a refusal.
  auto device = Device();
  auto summary =
      client::SubmitReports(device, collection_.id(), {MakeReport(Id(42), Row(0.5))}, 10);
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Get(Analyst()).report_count(), 1);
  EXPECT_EQ(DownloadAll(Analyst(), collection_.id()).rows, 1);
}

}  // namespace
}  // namespace dpcurator::server::testing
