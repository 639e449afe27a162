#ifndef DPCURATOR_TESTS_SERVER_SERVER_TEST_UTIL_H_
#define DPCURATOR_TESTS_SERVER_SERVER_TEST_UTIL_H_

// Shared fixture for the server integration tests: a fresh temporary
// directory per test (SQLite file + token file) and a real CuratorServer on
// 127.0.0.1:0, reached over plaintext gRPC.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "client/connection.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "dpcurator/v1/dpcurator.grpc.pb.h"
#include "server/clock.h"
#include "server/curator_server.h"
#include "server/ledger.h"
#include "server/shared_database.h"
#include "server/store.h"
#include "tests/server/fake_clock.h"

namespace dpcurator::server::testing {

inline constexpr char kCuratorToken[] = "curator-token-0123456789abcdef";
inline constexpr char kAnalystToken[] = "analyst-token-0123456789abcdef";
inline constexpr char kDeviceToken[] = "device-token-0123456789abcdef";
inline constexpr char kUnknownToken[] = "unknown-token-0123456789abcdef";
// The delta the tests' datasets and accountant checks use.
inline constexpr double kDelta = 1e-5;
// Method paths that audit and bound tests call with raw metadata.
inline constexpr char kRequestRelease[] = "/dpcurator.v1.ReleaseService/RequestRelease";
inline constexpr char kGetBudget[] = "/dpcurator.v1.DatasetService/GetBudget";

// A fresh directory under ::testing::TempDir() (mkdtemp), removed by the
// destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A Store and a Ledger without a server, wired as CuratorServer wires them:
// one SharedDatabase (migrated by Store::Open), one clock. Members are
// destroyed ledger first, database last.
struct OpenedDatabase {
  std::unique_ptr<SharedDatabase> database;
  std::unique_ptr<Store> store;
  std::unique_ptr<Ledger> ledger;
};
absl::StatusOr<OpenedDatabase> OpenDatabase(const std::string& path,
                                            const Clock* clock = &SystemClock::Get());

// The demo schema as it goes on the wire.
v1::TableSchema DemoSchemaProto();
// The demo table rendered as upload rows (schema column order).
std::vector<v1::Row> DemoRows(const data::Table& table);

// A small local-DP collection: LdpCollectionDimension() numeric columns in
// [0, 1], laplace-l1, epsilon 1, default radius.
v1::CollectionParams LdpCollectionParams();
int LdpCollectionDimension();

// The size of the file at `path` in bytes, 0 when there is none (a WAL
// not yet made).
int64_t FileBytes(const std::string& path);

// One device report: its id and its noised values.
v1::Report MakeReport(std::string id, std::vector<double> values);

// One SubmitReports stream carrying `batches` in order: the acks read back
// and the final status.
struct ReportStreamResult {
  std::vector<v1::SubmitReportsAck> acks;
  grpc::Status status;
};
ReportStreamResult SubmitReportBatches(client::Connection connection,
                                       const std::string& collection_id,
                                       const std::vector<std::vector<v1::Report>>& batches);

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // The options StartServer() uses: the fixture's database and token file,
  // loopback, any port, plaintext, the fixture's failpoint.
  ServerOptions Options() const;
  // Starts a server on the fixture's database (again, after StopServer()).
  void StartServer();
  // Shutdown, then destroy: the database is closed.
  void StopServer();

  std::string address() const;
  client::Connection Curator() const;
  client::Connection Analyst() const;
  client::Connection Device() const;
  client::Connection WithToken(const std::string& token) const;

  // Curator (file token) creates / revokes a token through AdminService.
  grpc::Status CreateToken(v1::Role role, const std::string& label,
                           v1::CreateTokenResponse* response);
  grpc::Status RevokeToken(const std::string& token_id, v1::TokenInfo* info = nullptr);
  // The newest audit rows, newest first (curator).
  grpc::Status ListAudit(int limit, v1::ListAuditResponse* response);

  // Curator creates a demo-schema dataset; the returned status is the RPC's.
  grpc::Status CreateDataset(double epsilon_cap, double delta, v1::NeighbouringRelation relation,
                             v1::Dataset* dataset, const std::string& name = "demo");
  // Curator uploads GenerateDemoTable(num_rows, seed) in one stream.
  grpc::Status UploadDemoRows(const std::string& dataset_id, int64_t num_rows, uint64_t seed,
                              v1::UploadRowsResponse* response = nullptr);
  // Curator uploads the given messages (one stream, one message each).
  grpc::Status UploadMessages(const std::vector<v1::UploadRowsRequest>& messages,
                              v1::UploadRowsResponse* response);
  // Analyst requests a small rff_embedding release at this epsilon.
  static v1::ReleaseRequest RffRequest(const std::string& dataset_id, double epsilon,
                                       const std::string& idempotency_key);
  grpc::Status RequestRelease(const v1::ReleaseRequest& request, v1::Release* release);
  grpc::Status GetBudget(const std::string& dataset_id, v1::BudgetReport* report);
  // The dataset as the curator (or analyst) sees it in ListDatasets.
  grpc::Status FindDataset(const client::Connection& connection, const std::string& dataset_id,
                           v1::Dataset* dataset);

  // Curator creates a collection (LdpCollectionParams() unless given).
  grpc::Status CreateLdpCollection(const std::string& name, v1::Collection* collection,
                                   const v1::CollectionParams& params = LdpCollectionParams());

  std::unique_ptr<TempDir> dir_;
  std::string db_path_;
  // The --tokens file; StartServer() passes none when this is empty.
  std::string tokens_path_;
  // Handed to the server by StartServer() (server/service.h, EngineSeams).
  Failpoint failpoint_;
  NoiseSourceFactory noise_source_;
  // The server's clock (ServerOptions::clock). A test that moves time sets
  // `clock_ = &fake_clock_` and restarts the server.
  const Clock* clock_ = &SystemClock::Get();
  FakeClock fake_clock_;
  std::unique_ptr<CuratorServer> server_;
};

}  // namespace dpcurator::server::testing

#endif  // DPCURATOR_TESTS_SERVER_SERVER_TEST_UTIL_H_
