#include "tests/server/server_test_util.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/data/demo.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"

namespace dpcurator::server::testing {

absl::StatusOr<OpenedDatabase> OpenDatabase(const std::string& path, const Clock* clock) {
  OpenedDatabase opened;
  DPC_ASSIGN_OR_RETURN(opened.database, SharedDatabase::Open(path));
  DPC_ASSIGN_OR_RETURN(opened.store, Store::Open(opened.database.get(), clock));
  opened.ledger = std::make_unique<Ledger>(opened.database.get(), clock);
  return opened;
}

TempDir::TempDir() {
  std::string base = ::testing::TempDir();
  if (base.empty()) base = "/tmp/";
  if (base.back() != '/') base.push_back('/');
  std::string pattern = absl::StrCat(base, "dpc_server_test_XXXXXX");
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  const char* made = mkdtemp(buffer.data());
  EXPECT_NE(made, nullptr) << "mkdtemp failed for " << pattern;
  path_ = made != nullptr ? std::string(made) : pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

v1::TableSchema DemoSchemaProto() { return SchemaToProto(data::DemoSchema()); }

int LdpCollectionDimension() { return 4; }

int64_t FileBytes(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 ? static_cast<int64_t>(info.st_size) : 0;
}

v1::Report MakeReport(std::string id, std::vector<double> values) {
  v1::Report report;
  report.set_report_id(std::move(id));
  for (double v : values) report.add_values(v);
  return report;
}

v1::CollectionParams LdpCollectionParams() {
  v1::CollectionParams params;
  for (int j = 0; j < LdpCollectionDimension(); ++j) {
    v1::ColumnSchema* column = params.mutable_schema()->add_columns();
    column->set_name(absl::StrCat("x", j));
    column->set_type(v1::ColumnSchema::NUMERIC);
    column->set_lower(0.0);
    column->set_upper(1.0);
  }
  params.set_mechanism("laplace-l1");
  params.set_epsilon(1.0);
  return params;
}

grpc::Status ServerTest::CreateLdpCollection(const std::string& name, v1::Collection* collection,
                                             const v1::CollectionParams& params) {
  auto curator = Curator();
  auto context = curator.NewContext();
  v1::CreateCollectionRequest request;
  request.set_name(name);
  *request.mutable_params() = params;
  return curator.collections().CreateCollection(context.get(), request, collection);
}

std::vector<v1::Row> DemoRows(const data::Table& table) {
  const data::Schema schema = data::DemoSchema();
  std::vector<v1::Row> rows;
  rows.reserve(table.num_rows());
  for (int64_t i = 0; i < table.num_rows(); ++i) {
    v1::Row row;
    for (int c = 0; c < schema.num_columns(); ++c) {
      row.add_cells(schema.FormatCell(c, table.cells(i, c)));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

void ServerTest::SetUp() {
  dir_ = std::make_unique<TempDir>();
  db_path_ = dir_->File("curator.db");
  tokens_path_ = dir_->File("tokens.txt");
  {
    std::ofstream tokens(tokens_path_);
    tokens << "# test tokens\n"
           << "curator " << kCuratorToken << "\n"
           << "analyst " << kAnalystToken << "\n"
           << "device " << kDeviceToken << "\n";
    ASSERT_TRUE(tokens.good());
  }
  StartServer();
}

void ServerTest::TearDown() {
  StopServer();
  dir_.reset();
}

ServerOptions ServerTest::Options() const {
  ServerOptions options;
  options.db_path = db_path_;
  options.listen_address = "127.0.0.1:0";
  options.tokens_path = tokens_path_;
  options.insecure_dev = true;
  options.failpoint = failpoint_;
  options.noise_source = noise_source_;
  options.clock = clock_;
  return options;
}

void ServerTest::StartServer() {
  auto started = CuratorServer::Start(Options());
  ASSERT_TRUE(started.ok()) << started.status();
  server_ = std::move(started).value();
  ASSERT_GT(server_->port(), 0);
}

void ServerTest::StopServer() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::milliseconds(500));
  server_.reset();
}

std::string ServerTest::address() const {
  return absl::StrCat("127.0.0.1:", server_ != nullptr ? server_->port() : 0);
}

client::Connection ServerTest::Curator() const {
  return client::Connection::Plaintext(address(), kCuratorToken, std::chrono::seconds(30));
}
client::Connection ServerTest::Analyst() const {
  return client::Connection::Plaintext(address(), kAnalystToken, std::chrono::seconds(30));
}
client::Connection ServerTest::Device() const {
  return client::Connection::Plaintext(address(), kDeviceToken, std::chrono::seconds(30));
}

client::Connection ServerTest::WithToken(const std::string& token) const {
  return client::Connection::Plaintext(address(), token, std::chrono::seconds(30));
}

grpc::Status ServerTest::CreateToken(v1::Role role, const std::string& label,
                                     v1::CreateTokenResponse* response) {
  auto connection = Curator();
  auto context = connection.NewContext();
  v1::CreateTokenRequest request;
  request.set_role(role);
  request.set_label(label);
  return connection.admin().CreateToken(context.get(), request, response);
}

grpc::Status ServerTest::RevokeToken(const std::string& token_id, v1::TokenInfo* info) {
  auto connection = Curator();
  auto context = connection.NewContext();
  v1::RevokeTokenRequest request;
  request.set_token_id(token_id);
  v1::TokenInfo local;
  return connection.admin().RevokeToken(context.get(), request, info != nullptr ? info : &local);
}

grpc::Status ServerTest::ListAudit(int limit, v1::ListAuditResponse* response) {
  auto connection = Curator();
  auto context = connection.NewContext();
  v1::ListAuditRequest request;
  request.set_limit(limit);
  return connection.admin().ListAudit(context.get(), request, response);
}

grpc::Status ServerTest::CreateDataset(double epsilon_cap, double delta,
                                       v1::NeighbouringRelation relation, v1::Dataset* dataset,
                                       const std::string& name) {
  v1::CreateDatasetRequest request;
  request.set_name(name);
  *request.mutable_schema() = DemoSchemaProto();
  request.mutable_budget()->set_epsilon(epsilon_cap);
  request.mutable_budget()->set_delta(delta);
  request.set_relation(relation);
  auto connection = Curator();
  auto context = connection.NewContext();
  return connection.datasets().CreateDataset(context.get(), request, dataset);
}

grpc::Status ServerTest::UploadMessages(const std::vector<v1::UploadRowsRequest>& messages,
                                        v1::UploadRowsResponse* response) {
  auto connection = Curator();
  auto context = connection.NewContext();
  auto writer = connection.datasets().UploadRows(context.get(), response);
  for (const auto& message : messages) {
    if (!writer->Write(message)) break;  // the server ended the stream; Finish says why
  }
  writer->WritesDone();
  return writer->Finish();
}

grpc::Status ServerTest::UploadDemoRows(const std::string& dataset_id, int64_t num_rows,
                                        uint64_t seed, v1::UploadRowsResponse* response) {
  v1::UploadRowsRequest message;
  message.set_dataset_id(dataset_id);
  for (auto& row : DemoRows(data::GenerateDemoTable(num_rows, seed))) {
    *message.add_rows() = std::move(row);
  }
  v1::UploadRowsResponse local;
  return UploadMessages({message}, response != nullptr ? response : &local);
}

v1::ReleaseRequest ServerTest::RffRequest(const std::string& dataset_id, double epsilon,
                                          const std::string& idempotency_key) {
  v1::ReleaseRequest request;
  request.set_dataset_id(dataset_id);
  request.set_idempotency_key(idempotency_key);
  request.set_epsilon(epsilon);
  request.mutable_rff_embedding()->set_num_frequencies(50);
  request.mutable_rff_embedding()->set_seed(12345);
  return request;
}

grpc::Status ServerTest::RequestRelease(const v1::ReleaseRequest& request, v1::Release* release) {
  auto connection = Analyst();
  auto context = connection.NewContext();
  return connection.releases().RequestRelease(context.get(), request, release);
}

grpc::Status ServerTest::GetBudget(const std::string& dataset_id, v1::BudgetReport* report) {
  auto connection = Analyst();
  auto context = connection.NewContext();
  v1::GetBudgetRequest request;
  request.set_dataset_id(dataset_id);
  return connection.datasets().GetBudget(context.get(), request, report);
}

grpc::Status ServerTest::FindDataset(const client::Connection& connection,
                                     const std::string& dataset_id, v1::Dataset* dataset) {
  // Connection's stubs are shared pointers; a copy is cheap.
  client::Connection copy = connection;
  // Every page (server/paging.h).
  auto listed = client::ListAllDatasets(&copy);
  if (!listed.ok()) {
    return grpc::Status(static_cast<grpc::StatusCode>(listed.status().code()),
                        std::string(listed.status().message()));
  }
  for (const auto& d : *listed) {
    if (d.id() == dataset_id) {
      *dataset = d;
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::NOT_FOUND, "dataset not listed: " + dataset_id);
}

ReportStreamResult SubmitReportBatches(client::Connection connection,
                                       const std::string& collection_id,
                                       const std::vector<std::vector<v1::Report>>& batches) {
  ReportStreamResult result;
  auto context = connection.NewContext();
  auto stream = connection.collections().SubmitReports(context.get());
  for (const auto& reports : batches) {
    v1::SubmitReportsRequest batch;
    batch.set_collection_id(collection_id);
    for (const auto& r : reports) *batch.add_reports() = r;
    if (!stream->Write(batch)) break;
  }
  stream->WritesDone();
  v1::SubmitReportsAck ack;
  while (stream->Read(&ack)) result.acks.push_back(ack);
  result.status = stream->Finish();
  return result;
}

}  // namespace dpcurator::server::testing
