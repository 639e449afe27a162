// Local-DP report ingestion: how much of the raw SQLite insert rate survives
// the full server path (gRPC bidi stream over loopback, auth, validation,
// one transaction per batch, ack after commit).
//
//   (raw sql)  INSERT OR IGNORE of N 16-dimensional reports into ldp_reports
//              with one prepared statement, one transaction per batch,
//              synchronous=FULL (the lower bound of what ingestion costs);
//   (store)    Store::IngestReports: the same plus validation, dedup counting
//              and the report_count update;
//   (server)   client::SubmitReports to an in-process CuratorServer on
//              127.0.0.1 (device token), batches acked after their commit.
//
//   build/bench/ingest_bench [--reports 200000] [--batch 1000]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/connection.h"
#include "client/device.h"
#include "core/privacy/noise_source.h"
#include "proto/collection.h"
#include "server/curator_server.h"
#include "server/shared_database.h"
#include "server/store.h"

namespace {

namespace v1 = dpcurator::v1;
using dpcurator::server::Store;
using Clock = std::chrono::steady_clock;

constexpr int kDimension = 16;

v1::CollectionParams Params() {
  v1::CollectionParams params;
  for (int j = 0; j < kDimension; ++j) {
    v1::ColumnSchema* column = params.mutable_schema()->add_columns();
    column->set_name(absl::StrCat("x", j));
    column->set_type(v1::ColumnSchema::NUMERIC);
    column->set_lower(0.0);
    column->set_upper(1.0);
  }
  params.set_mechanism("gaussian-l2");
  params.set_epsilon(1.0);
  params.set_delta(1e-5);
  return params;
}

void Die(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "ingest_bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 200000;
  int batch = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--reports") == 0) n = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--batch") == 0) batch = std::atoi(argv[i + 1]);
  }
  char pattern[] = "/tmp/ingest_bench_XXXXXX";
  if (mkdtemp(pattern) == nullptr) return 1;
  const std::string dir = pattern;

  // Privatised reports, made once (device-side cost is not measured here).
  v1::CollectionParams resolved;
  auto mechanism = dpcurator::MechanismFromParams(Params(), &resolved);
  if (!mechanism.ok()) Die("mechanism", mechanism.status());
  dpcurator::privacy::SeededNoiseSource noise(1);
  Eigen::MatrixXd records = Eigen::MatrixXd::Constant(n, kDimension, 0.5);
  auto reports = dpcurator::client::PrivatizeReports(*mechanism, records, &noise);
  if (!reports.ok()) Die("privatize", reports.status());
  std::vector<v1::SubmitReportsRequest> batches;
  for (int64_t begin = 0; begin < n; begin += batch) {
    v1::SubmitReportsRequest& request = batches.emplace_back();
    for (int64_t i = begin; i < std::min<int64_t>(n, begin + batch); ++i) {
      *request.add_reports() = (*reports)[i];
    }
  }

  // (raw sql) and (store): one Store, two collections.
  double raw_seconds = 0.0;
  double store_seconds = 0.0;
  {
    auto database = dpcurator::server::SharedDatabase::Open(dir + "/store.db");
    if (!database.ok()) Die("open", database.status());
    const auto& clock = dpcurator::server::SystemClock::Get();
    auto store = Store::Open(database->get(), &clock);
    if (!store.ok()) Die("open", store.status());
    auto raw_collection = (*store)->CreateCollection(
        "raw", resolved, mechanism->dimension(), mechanism->noise_scale(),
        mechanism->regularizer(), mechanism->cost_exponent());
    auto collection = (*store)->CreateCollection(
        "store", resolved, mechanism->dimension(), mechanism->noise_scale(),
        mechanism->regularizer(), mechanism->cost_exponent());
    if (!raw_collection.ok()) Die("create", raw_collection.status());
    if (!collection.ok()) Die("create", collection.status());

    auto start = Clock::now();
    {
      // Held for the raw loop only: IngestReports below takes it itself.
      auto db = (*database)->Lock();
      auto insert = db->Prepare(
          "INSERT OR IGNORE INTO ldp_reports (collection_id, report_id, report, created_unix) "
          "VALUES (?, ?, ?, ?)");
      if (!insert.ok()) Die("prepare", insert.status());
      const int64_t now = clock.UnixNow();
      start = Clock::now();
      for (const auto& request : batches) {
        auto transaction = dpcurator::server::Transaction::BeginImmediate(db.get());
        if (!transaction.ok()) Die("begin", transaction.status());
        for (const auto& report : request.reports()) {
          insert->Reset();
          absl::string_view bytes(reinterpret_cast<const char*>(report.values().data()),
                                  kDimension * sizeof(double));
          auto status = insert->Bind(1, raw_collection->id())
                            .BindBlob(2, report.report_id())
                            .BindBlob(3, bytes)
                            .Bind(4, now)
                            .Run();
          if (!status.ok()) Die("insert", status);
        }
        insert->Reset();
        if (auto status = transaction->Commit(); !status.ok()) Die("commit", status);
      }
      raw_seconds = Seconds(start);
    }

    start = Clock::now();
    int64_t index = 0;
    int64_t stored = 0;
    for (const auto& request : batches) {
      auto ack = (*store)->IngestReports(collection->id(), request, index++, "bench", n);
      if (!ack.ok()) Die("ingest", ack.status());
      stored += ack->accepted();
    }
    store_seconds = Seconds(start);
    if (stored != n) Die("store", absl::InternalError("not every report was stored"));
  }

  // (server): in-process CuratorServer over loopback.
  double server_seconds = 0.0;
  {
    const std::string tokens = dir + "/tokens";
    std::ofstream(tokens) << "curator curator-token-0123456789abcdef\n"
                          << "device device-token-0123456789abcdef\n";
    dpcurator::server::ServerOptions options;
    options.db_path = dir + "/server.db";
    options.tokens_path = tokens;
    options.listen_address = "127.0.0.1:0";
    options.insecure_dev = true;
    // One device token sends all n reports: lift the per-token quota.
    options.max_reports_per_token = n;
    auto server = dpcurator::server::CuratorServer::Start(options);
    if (!server.ok()) Die("server", server.status());
    const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
    auto curator = dpcurator::client::Connection::Plaintext(address,
                                                            "curator-token-0123456789abcdef");
    auto context = curator.NewContext();
    v1::CreateCollectionRequest create;
    create.set_name("bench");
    *create.mutable_params() = Params();
    v1::Collection collection;
    grpc::Status status = curator.collections().CreateCollection(context.get(), create,
                                                                 &collection);
    if (!status.ok()) Die("create", absl::InternalError(status.error_message()));
    auto device = dpcurator::client::Connection::Plaintext(
        address, "device-token-0123456789abcdef", std::chrono::seconds(600));
    const auto start = Clock::now();
    auto summary = dpcurator::client::SubmitReports(device, collection.id(), *reports, batch);
    server_seconds = Seconds(start);
    if (!summary.ok()) Die("submit", summary.status());
    if (summary->accepted != n) Die("submit", absl::InternalError("not every report stored"));
    (*server)->Shutdown();
  }
  std::filesystem::remove_all(dir);

  const double raw_rate = n / raw_seconds;
  const double store_rate = n / store_seconds;
  const double server_rate = n / server_seconds;
  std::printf("ingest_bench: %lld reports of dimension %d, batches of %d, synchronous=FULL\n",
              static_cast<long long>(n), kDimension, batch);
  std::printf("  %-34s %10.2f s %12.0f reports/s\n", "(a) raw sqlite insert", raw_seconds,
              raw_rate);
  std::printf("  %-34s %10.2f s %12.0f reports/s\n", "(a') Store::IngestReports", store_seconds,
              store_rate);
  std::printf("  %-34s %10.2f s %12.0f reports/s\n", "(b) server, loopback, ack after commit",
              server_seconds, server_rate);
  std::printf("  ratio server / raw: %.1f%% (target >= 50%%)\n", 100.0 * server_rate / raw_rate);
  return 0;
}
