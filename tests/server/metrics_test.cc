// Operations (issue 6): the Prometheus endpoint, scraped over a plain TCP
// socket and parsed as text exposition, counts exactly what happened, its
// budget gauges agree with the ledger's report (also after a restart), and
// the structured log is JSON lines that never carry a record value, a report
// value, a token or a request payload.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/data/demo.h"
#include "nlohmann/json.hpp"
#include "proto/release_kinds.h"
#include "server/log.h"
#include "server/metrics.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {


// ---- A scraper: HTTP/1.0 GET over a socket, then the text format parsed ----

// The whole HTTP response, or the reason there is none.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  // A hung endpoint fails the test instead of hanging it.
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to 127.0.0.1:", port));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("short send");
  }
  std::string response;
  char buffer[4096];
  while (true) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0) {
      close(fd);
      return absl::DeadlineExceededError("recv failed or timed out");
    }
    if (n == 0) break;  // HTTP/1.0: the server closes after the body
    response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return response;
}

// One sample: metric name and labels (sorted by the map).
struct Series {
  std::string name;
  std::map<std::string, std::string> labels;
  bool operator<(const Series& other) const {
    return std::tie(name, labels) < std::tie(other.name, other.labels);
  }
};

// Parses the text exposition format (0.0.4): comment lines, then
// `name{k="v",...} value [timestamp]` with \\, \" and \n escapes in values.
// Any line it cannot read is a test failure.
std::map<Series, double> ParseExposition(const std::string& body) {
  std::map<Series, double> samples;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (line.empty() || line.front() == '#') continue;
    Series series;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    series.name = std::string(line.substr(0, i));
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        if (eq == absl::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          ADD_FAILURE() << "bad label in: " << line;
          return samples;
        }
        std::string key(line.substr(i, eq - i));
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            ++j;
            value.push_back(line[j] == 'n' ? '\n' : line[j]);
          } else {
            value.push_back(line[j]);
          }
        }
        if (j >= line.size()) {
          ADD_FAILURE() << "unterminated label value in: " << line;
          return samples;
        }
        series.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) {
        ADD_FAILURE() << "unterminated label set in: " << line;
        return samples;
      }
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') {
      ADD_FAILURE() << "no value in: " << line;
      return samples;
    }
    std::vector<std::string> rest = absl::StrSplit(line.substr(i + 1), ' ', absl::SkipEmpty());
    if (rest.empty() || rest.size() > 2) {
      ADD_FAILURE() << "bad value in: " << line;
      return samples;
    }
    char* end = nullptr;
    const double value = std::strtod(rest[0].c_str(), &end);
    if (end == rest[0].c_str() || *end != '\0') {
      ADD_FAILURE() << "bad number '" << rest[0] << "' in: " << line;
      return samples;
    }
    if (!samples.emplace(series, value).second) ADD_FAILURE() << "duplicate series: " << line;
  }
  return samples;
}

class Scrape {
 public:
  explicit Scrape(std::map<Series, double> samples) : samples_(std::move(samples)) {}
  // The sample with exactly these labels, if exported.
  std::optional<double> Get(const std::string& name,
                            std::map<std::string, std::string> labels = {}) const {
    auto it = samples_.find(Series{name, std::move(labels)});
    if (it == samples_.end()) return std::nullopt;
    return it->second;
  }
  // Counters start when first touched: absent reads as 0.
  double Count(const std::string& name, std::map<std::string, std::string> labels = {}) const {
    return Get(name, std::move(labels)).value_or(0.0);
  }
  // Sum over every series of `name` whose labels include `subset`.
  double Sum(const std::string& name, const std::map<std::string, std::string>& subset) const {
    double total = 0.0;
    for (const auto& [series, value] : samples_) {
      if (series.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : subset) {
        auto it = series.labels.find(k);
        match = match && it != series.labels.end() && it->second == v;
      }
      if (match) total += value;
    }
    return total;
  }
  size_t size() const { return samples_.size(); }

 private:
  std::map<Series, double> samples_;
};

// ---- Log capture ----

class LogCapture {
 public:
  LogCapture() {
    previous_ = SetLogSink([this](absl::string_view line) {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.emplace_back(line);
    });
  }
  ~LogCapture() { SetLogSink(previous_); }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 private:
  LogSink previous_;
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

// The in-process server, restarted with its metrics endpoint on a free port.
class MetricsTest : public ServerTest {
 protected:
  void SetUp() override {
    capture_ = std::make_unique<LogCapture>();
    ServerTest::SetUp();
    StartWithMetrics();
  }
  void TearDown() override {
    ServerTest::TearDown();
    capture_.reset();
  }

  void StartWithMetrics() {
    StopServer();
    ServerOptions options = Options();
    options.metrics_listen_address = "127.0.0.1:0";
    auto started = CuratorServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    ASSERT_GT(server_->metrics()->port(), 0);
  }

  Scrape ScrapeMetrics() {
    auto response = HttpGet(server_->metrics()->port(), "/metrics");
    if (!response.ok()) {
      ADD_FAILURE() << response.status();
      return Scrape({});
    }
    const size_t blank = response->find("\r\n\r\n");
    if (blank == std::string::npos) {
      ADD_FAILURE() << "no end of HTTP headers in: " << *response;
      return Scrape({});
    }
    const std::string status_line = response->substr(0, response->find("\r\n"));
    EXPECT_TRUE(status_line.rfind("HTTP/1.", 0) == 0 &&
                status_line.find(" 200") != std::string::npos)
        << status_line;
    return Scrape(ParseExposition(response->substr(blank + 4)));
  }

  // A demo dataset with `rows` rows uploaded.
  v1::Dataset MakeDataset(double cap, int64_t rows = 300) {
    v1::Dataset dataset;
    EXPECT_TRUE(CreateDataset(cap, kDelta, v1::ADD_REMOVE, &dataset).ok());
    EXPECT_TRUE(UploadDemoRows(dataset.id(), rows, /*seed=*/7).ok());
    return dataset;
  }

  std::unique_ptr<LogCapture> capture_;
};

TEST_F(MetricsTest, ReleaseCountsOnceAndGaugesFollowTheLedger) {
  const v1::Dataset dataset = MakeDataset(3.0);
  const Scrape before = ScrapeMetrics();
  // Set at creation, before any GetBudget: remaining = cap, nothing spent.
  ASSERT_TRUE(before.Get("dpcurator_epsilon_remaining", {{"dataset", dataset.id()}}).has_value());
  EXPECT_DOUBLE_EQ(*before.Get("dpcurator_epsilon_remaining", {{"dataset", dataset.id()}}), 3.0);
  EXPECT_DOUBLE_EQ(before.Count("dpcurator_epsilon_spent", {{"dataset", dataset.id()}}), 0.0);

  v1::Release release;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.7, "key-1"), &release).ok());
  const Scrape after = ScrapeMetrics();
  const std::map<std::string, std::string> labels = {{"kind", ReleaseKindName(release.kind())},
                                                     {"dataset", dataset.id()}};
  EXPECT_EQ(after.Count("dpcurator_releases_total", labels),
            before.Count("dpcurator_releases_total", labels) + 1);
  EXPECT_EQ(after.Sum("dpcurator_releases_total", {{"dataset", dataset.id()}}), 1.0);

  // Scraped first, the report read after: the gauge was set by the release
  // itself, not by this GetBudget.
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  ASSERT_GT(report.epsilon_spent(), 0.0);
  EXPECT_DOUBLE_EQ(*after.Get("dpcurator_epsilon_remaining", {{"dataset", dataset.id()}}),
                   report.epsilon_remaining());
  EXPECT_DOUBLE_EQ(*after.Get("dpcurator_epsilon_spent", {{"dataset", dataset.id()}}),
                   report.epsilon_spent());

  // A replay is free and is not a new release.
  v1::Release replay;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.7, "key-1"), &replay).ok());
  ASSERT_TRUE(replay.replayed());
  const Scrape replayed = ScrapeMetrics();
  EXPECT_EQ(replayed.Count("dpcurator_releases_total", labels),
            after.Count("dpcurator_releases_total", labels));

  // Every RequestRelease went through the interceptor: 2 OK, timed.
  const std::map<std::string, std::string> ok = {{"method", "ReleaseService/RequestRelease"},
                                                 {"code", "OK"}};
  EXPECT_EQ(replayed.Count("dpcurator_rpcs_total", ok), 2.0);
  EXPECT_EQ(replayed.Count("dpcurator_rpc_duration_seconds_count",
                           {{"method", "ReleaseService/RequestRelease"}}),
            2.0);
}

TEST_F(MetricsTest, RefusalsCountedByReason) {
  const v1::Dataset dataset = MakeDataset(1.0);
  v1::Release release;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.8, "first"), &release).ok());
  const Scrape before = ScrapeMetrics();

  // Over the cap: refused by the ledger.
  grpc::Status refused = RequestRelease(RffRequest(dataset.id(), 0.8, "second"), &release);
  ASSERT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  // A device may not ask for releases.
  {
    client::Connection device = Device();
    auto context = device.NewContext();
    v1::Release ignored;
    grpc::Status denied = device.releases().RequestRelease(
        context.get(), RffRequest(dataset.id(), 0.1, "device"), &ignored);
    ASSERT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }

  const Scrape after = ScrapeMetrics();
  const std::string refusals = "dpcurator_release_refusals_total";
  EXPECT_EQ(after.Count(refusals, {{"reason", "budget"}}),
            before.Count(refusals, {{"reason", "budget"}}) + 1);
  EXPECT_EQ(after.Count(refusals, {{"reason", "auth"}}),
            before.Count(refusals, {{"reason", "auth"}}) + 1);
  EXPECT_EQ(after.Sum(refusals, {}), before.Sum(refusals, {}) + 2);
  EXPECT_EQ(after.Count("dpcurator_rpcs_total", {{"method", "ReleaseService/RequestRelease"},
                                                 {"code", "RESOURCE_EXHAUSTED"}}),
            1.0);
  // Nothing was released, the gauge did not move, and it is the ledger's.
  EXPECT_EQ(after.Sum("dpcurator_releases_total", {{"dataset", dataset.id()}}), 1.0);
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  EXPECT_DOUBLE_EQ(*after.Get("dpcurator_epsilon_remaining", {{"dataset", dataset.id()}}),
                   report.epsilon_remaining());
}

// Issue 24 (streams brief, item 3): a call refused by the input-limits
// interceptor is counted with the status the client got. In a client
// stream the handler never sees the refusal (it reads cleared messages and
// may return OK); the authorizer rewrites the status the client gets, so
// the metrics interceptor must count that status, not the handler's.
TEST_F(MetricsTest, InputLimitRefusalsCountedWithTheirRealCode) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(1.0, kDelta, v1::ADD_REMOVE, &dataset).ok());
  const std::vector<v1::Row> rows = DemoRows(data::GenerateDemoTable(20, 7));
  std::vector<v1::UploadRowsRequest> messages(2);
  messages[0].set_dataset_id(dataset.id());
  for (int i = 0; i < 10; ++i) *messages[0].add_rows() = rows[i];
  for (int i = 10; i < 20; ++i) *messages[1].add_rows() = rows[i];
  messages[1].mutable_rows(2)->set_cells(0, std::string(300, '1'));
  const Scrape before = ScrapeMetrics();
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages(messages, &response);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  // Unary: an oversized idempotency key on the admission method.
  v1::Release release;
  status = RequestRelease(RffRequest(dataset.id(), 0.5, std::string(300, 'k')), &release);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();

  const Scrape after = ScrapeMetrics();
  const std::string rpcs = "dpcurator_rpcs_total";
  const std::map<std::string, std::string> upload_refused = {
      {"method", "DatasetService/UploadRows"}, {"code", "INVALID_ARGUMENT"}};
  const std::map<std::string, std::string> upload_ok = {{"method", "DatasetService/UploadRows"},
                                                        {"code", "OK"}};
  EXPECT_EQ(after.Count(rpcs, upload_refused), before.Count(rpcs, upload_refused) + 1);
  EXPECT_EQ(after.Count(rpcs, upload_ok), before.Count(rpcs, upload_ok));
  EXPECT_EQ(after.Count(rpcs, {{"method", "ReleaseService/RequestRelease"},
                               {"code", "INVALID_ARGUMENT"}}),
            before.Count(rpcs, {{"method", "ReleaseService/RequestRelease"},
                                {"code", "INVALID_ARGUMENT"}}) +
                1);
  const std::string refusals = "dpcurator_release_refusals_total";
  EXPECT_EQ(after.Count(refusals, {{"reason", "invalid"}}),
            before.Count(refusals, {{"reason", "invalid"}}) + 1);
  // The log line of the refused upload says the same code.
  bool logged = false;
  for (const std::string& line : capture_->lines()) {
    const nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (event.is_object() && event.value("event", "") == "rpc" &&
        event.value("method", "") == "DatasetService/UploadRows" &&
        event.value("code", "") == "INVALID_ARGUMENT") {
      logged = true;
    }
  }
  EXPECT_TRUE(logged);
}

TEST_F(MetricsTest, GaugesLoadedFromTheLedgerAtStartUp) {
  const v1::Dataset dataset = MakeDataset(2.0);
  v1::Release release;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.5, "k"), &release).ok());
  StartWithMetrics();  // a new process would see the same database
  const Scrape scrape = ScrapeMetrics();
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  ASSERT_TRUE(scrape.Get("dpcurator_epsilon_remaining", {{"dataset", dataset.id()}}).has_value());
  EXPECT_DOUBLE_EQ(*scrape.Get("dpcurator_epsilon_remaining", {{"dataset", dataset.id()}}),
                   report.epsilon_remaining());
  EXPECT_DOUBLE_EQ(*scrape.Get("dpcurator_epsilon_spent", {{"dataset", dataset.id()}}),
                   report.epsilon_spent());
  EXPECT_LT(report.epsilon_remaining(), 2.0);
}

TEST_F(MetricsTest, SessionsOpenFollowsOpenAndClose) {
  const v1::Dataset dataset = MakeDataset(5.0);
  v1::OpenSessionRequest request;
  request.set_dataset_id(dataset.id());
  request.set_idempotency_key("session");
  request.mutable_params()->set_steps(5);
  request.mutable_params()->set_sampling_rate(0.1);
  request.mutable_params()->set_noise_multiplier(2.0);
  request.mutable_params()->mutable_rff_embedding()->set_num_frequencies(10);
  client::Connection analyst = Analyst();
  v1::Session session;
  {
    auto context = analyst.NewContext();
    grpc::Status status = analyst.sessions().OpenSession(context.get(), request, &session);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(ScrapeMetrics().Count("dpcurator_sessions_open"), 1.0);
  {
    auto context = analyst.NewContext();
    v1::CloseSessionRequest close;
    close.set_session_id(session.id());
    v1::Session closed;
    ASSERT_TRUE(analyst.sessions().CloseSession(context.get(), close, &closed).ok());
  }
  const Scrape scrape = ScrapeMetrics();
  EXPECT_EQ(scrape.Count("dpcurator_sessions_open"), 0.0);
  // The unused steps were refunded, and the gauge shows the refund.
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  EXPECT_DOUBLE_EQ(*scrape.Get("dpcurator_epsilon_remaining", {{"dataset", dataset.id()}}),
                   report.epsilon_remaining());
}

// ---- LDP reports ----

v1::Report MakeReport(int k, std::vector<double> values) {
  v1::Report report;
  std::string id(16, 'r');
  id[0] = static_cast<char>(k);
  report.set_report_id(id);
  for (double v : values) report.add_values(v);
  return report;
}

std::vector<v1::SubmitReportsAck> SubmitBatches(client::Connection connection,
                                                const std::string& collection_id,
                                                const std::vector<std::vector<v1::Report>>& batches,
                                                grpc::Status* status) {
  ReportStreamResult result = SubmitReportBatches(std::move(connection), collection_id, batches);
  *status = result.status;
  return std::move(result.acks);
}

// A value no honest report carries: far outside the public bound
// (ReportValueBound: R + 22 b, about 180 for this collection).
constexpr double kRejectedMarker = 987654321.0;
// An in-bound value that would only appear in a log if report values did.
constexpr double kAcceptedMarker = 0.4837261;

TEST_F(MetricsTest, ReportsCountedByOutcome) {
  v1::Collection collection;
  ASSERT_TRUE(CreateLdpCollection("metrics", &collection).ok());
  const int d = LdpCollectionDimension();
  const std::vector<double> good(d, kAcceptedMarker);
  std::vector<double> too_far(d, 0.0);
  too_far[0] = kRejectedMarker;
  const std::vector<double> short_row(d - 1, 0.5);
  // Batch 1: 3 new, 2 invalid. Batch 2: 1 duplicate of batch 1, 1 new.
  const std::vector<std::vector<v1::Report>> batches = {
      {MakeReport(1, good), MakeReport(2, too_far), MakeReport(3, good), MakeReport(4, short_row),
       MakeReport(5, good)},
      {MakeReport(3, good), MakeReport(6, good)}};
  grpc::Status status;
  auto acks = SubmitBatches(Device(), collection.id(), batches, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(acks.size(), 2u);
  int64_t accepted = 0, rejected = 0, duplicates = 0;
  for (const auto& ack : acks) {
    accepted += ack.accepted();
    rejected += ack.rejections_size();
    duplicates += ack.duplicates();
  }
  // The server's own acks and the construction above agree...
  ASSERT_EQ(accepted, 4);
  ASSERT_EQ(rejected, 2);
  ASSERT_EQ(duplicates, 1);
  // ...and so does the endpoint.
  const Scrape scrape = ScrapeMetrics();
  const std::string name = "dpcurator_ldp_reports_total";
  EXPECT_EQ(scrape.Count(name, {{"collection", collection.id()}, {"outcome", "accepted"}}), 4.0);
  EXPECT_EQ(scrape.Count(name, {{"collection", collection.id()}, {"outcome", "rejected"}}), 2.0);
  EXPECT_EQ(scrape.Count(name, {{"collection", collection.id()}, {"outcome", "duplicate"}}), 1.0);
  EXPECT_EQ(scrape.Sum(name, {}), 7.0);
}

// ---- Logs ----

TEST_F(MetricsTest, LogsAreJsonLinesWithoutRecordValuesTokensOrPayloads) {
  // A row whose income cell is a distinctive, valid value, and a row whose
  // region is a distinctive, invalid category (the server's error message to
  // the client quotes it; the log must not).
  constexpr double kCellValue = 243.987654;
  const std::string kCellMarker = "243.987654";
  const std::string kCategoryMarker = "zz-marker-region-91731";
  const std::string kKeyMarker = "idempotency-marker-55821";
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(2.0, kDelta, v1::ADD_REMOVE, &dataset).ok());
  std::vector<v1::Row> rows = DemoRows(data::GenerateDemoTable(50, 3));
  const std::optional<int> income_column = data::DemoSchema().FindColumn("income");
  const std::optional<int> region_column = data::DemoSchema().FindColumn("region");
  ASSERT_TRUE(income_column.has_value() && region_column.has_value());
  const int income = *income_column;
  const int region = *region_column;
  rows[7].set_cells(income, kCellMarker);
  v1::UploadRowsRequest good;
  good.set_dataset_id(dataset.id());
  for (const auto& row : rows) *good.add_rows() = row;
  v1::UploadRowsResponse uploaded;
  ASSERT_TRUE(UploadMessages({good}, &uploaded).ok());
  ASSERT_EQ(uploaded.rows_accepted(), 50);

  v1::UploadRowsRequest bad;
  bad.set_dataset_id(dataset.id());
  *bad.add_rows() = rows[0];
  bad.mutable_rows(0)->set_cells(region, kCategoryMarker);
  v1::UploadRowsResponse refused_upload;
  grpc::Status refused = UploadMessages({bad}, &refused_upload);
  ASSERT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The precondition that makes this test able to fail: the marker is in an
  // error message the server produced.
  ASSERT_NE(refused.error_message().find(kCategoryMarker), std::string::npos)
      << refused.error_message();

  v1::Release release;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.5, kKeyMarker), &release).ok());

  v1::Collection collection;
  ASSERT_TRUE(CreateLdpCollection("log-markers", &collection).ok());
  std::vector<double> too_far(LdpCollectionDimension(), 0.0);
  too_far[0] = kRejectedMarker;
  grpc::Status submitted;
  auto acks = SubmitBatches(
      Device(), collection.id(),
      {{MakeReport(1, std::vector<double>(LdpCollectionDimension(), kAcceptedMarker)),
        MakeReport(2, too_far)}},
      &submitted);
  ASSERT_TRUE(submitted.ok());
  ASSERT_EQ(acks.size(), 1u);
  ASSERT_EQ(acks[0].rejections_size(), 1);
  const std::string rejected_text = absl::StrCat(kRejectedMarker);
  ASSERT_NE(acks[0].rejections(0).reason().find(rejected_text), std::string::npos)
      << acks[0].rejections(0).reason();

  StopServer();  // every handler has returned: the log is complete
  const std::vector<std::string> lines = capture_->lines();
  ASSERT_FALSE(lines.empty());
  // Text that must not appear anywhere in a line: the markers as sent and
  // as the server formats them (StrCat, 6 significant digits), the tokens.
  const std::vector<std::string> secrets = {
      kCellMarker,         absl::StrCat(kCellValue),      kCategoryMarker,
      kKeyMarker,          rejected_text,                 absl::StrCat(kAcceptedMarker),
      kCuratorToken,       kAnalystToken,                 kDeviceToken};
  // Numbers that must not be a logged value (compared as numbers, so that a
  // duration cannot collide with a digit string by chance).
  const std::vector<double> secret_numbers = {kCellValue, kRejectedMarker, kAcceptedMarker};
  std::map<std::string, int> events;
  int refused_upload_lines = 0;
  for (const std::string& line : lines) {
    for (const std::string& secret : secrets) {
      EXPECT_EQ(line.find(secret), std::string::npos) << "'" << secret << "' in log: " << line;
    }
    // One JSON object per line, with the fixed fields first.
    const auto parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(parsed.is_object()) << line;
    for (const auto& [key, value] : parsed.items()) {
      if (!value.is_number()) continue;
      for (double secret : secret_numbers) {
        EXPECT_GT(std::abs(value.get<double>() - secret), 1e-9 * std::abs(secret))
            << key << " carries a record value: " << line;
      }
    }
    ASSERT_TRUE(parsed.contains("time") && parsed["time"].is_string()) << line;
    ASSERT_TRUE(parsed.contains("level") && parsed["level"].is_string()) << line;
    ASSERT_TRUE(parsed.contains("event") && parsed["event"].is_string()) << line;
    ++events[parsed["event"].get<std::string>()];
    if (parsed["event"] == "rows_uploaded") {
      EXPECT_EQ(parsed.value("dataset", ""), dataset.id());
      EXPECT_EQ(parsed.value("rows", -1), 50);
    }
    if (parsed["event"] == "release") {
      EXPECT_EQ(parsed.value("dataset", ""), dataset.id());
      EXPECT_EQ(parsed.value("role", ""), "analyst");
      EXPECT_GT(parsed.value("epsilon", 0.0), 0.0);
    }
    if (parsed["event"] == "rpc" && parsed.value("method", "") == "DatasetService/UploadRows" &&
        parsed.value("code", "") != "OK") {
      ++refused_upload_lines;
      EXPECT_EQ(parsed.value("code", ""), "INVALID_ARGUMENT");
      EXPECT_EQ(parsed.value("role", ""), "curator");
      // The token file's principal id, not the token.
      EXPECT_EQ(parsed.value("principal", "").rfind("file:", 0), 0u) << line;
      EXPECT_TRUE(parsed.contains("duration_ms"));
    }
  }
  // The capture saw the events it was meant to see (it is not vacuous).
  EXPECT_EQ(events["rows_uploaded"], 1);
  EXPECT_EQ(events["release"], 1);
  EXPECT_EQ(events["reports_submitted"], 1);
  EXPECT_GE(events["rpc"], 5);
  EXPECT_EQ(refused_upload_lines, 1);
}

// ---- The endpoint's own errors ----

TEST(MetricsBuilderTest, RefusesBadAndBusyAddresses) {
  EXPECT_EQ(Metrics::Builder().SetListenAddress("no-port").Build().status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Metrics::Builder().SetListenAddress("127.0.0.1:99999").Build().status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = Metrics::Builder().SetListenAddress("127.0.0.1:0").Build();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_GT((*first)->port(), 0);
  auto busy =
      Metrics::Builder().SetListenAddress(absl::StrCat("127.0.0.1:", (*first)->port())).Build();
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kUnavailable);
  // No address: kept, not served.
  auto off = Metrics::Builder().Build();
  ASSERT_TRUE(off.ok());
  EXPECT_EQ((*off)->port(), 0);
  (*off)->RecordRefusal(absl::StatusCode::kResourceExhausted);
  const Scrape scrape(ParseExposition((*off)->Scrape()));
  EXPECT_EQ(scrape.Count("dpcurator_release_refusals_total", {{"reason", "budget"}}), 1.0);
  EXPECT_EQ(scrape.Sum("dpcurator_release_refusals_total", {}), 1.0);
}

TEST(MetricsBuilderTest, LabelsStayBounded) {
  EXPECT_EQ(Metrics::MethodLabel("/dpcurator.v1.ReleaseService/RequestRelease"),
            "ReleaseService/RequestRelease");
  EXPECT_EQ(Metrics::MethodLabel("/grpc.health.v1.Health/Check"), "Health/Check");
  // Issue 36, item 1: one label for every path outside the server's own
  // method table, the health prefix included.
  EXPECT_EQ(Metrics::MethodLabel("/evil.Service/attacker-chosen-name"), "unknown");
  EXPECT_EQ(Metrics::MethodLabel("/grpc.health.v1.Health/attacker-chosen-name"), "unknown");
  EXPECT_STREQ(Metrics::RefusalReason(absl::StatusCode::kResourceExhausted), "budget");
  EXPECT_STREQ(Metrics::RefusalReason(absl::StatusCode::kPermissionDenied), "auth");
  EXPECT_STREQ(Metrics::RefusalReason(absl::StatusCode::kFailedPrecondition), "invalid");
  EXPECT_STREQ(Metrics::RefusalReason(absl::StatusCode::kInternal), "error");
}

}  // namespace
}  // namespace dpcurator::server::testing
