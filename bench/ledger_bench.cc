// Admission cost against ledger history: one Ledger::Admit (BEGIN IMMEDIATE,
// composed epsilon with the new event, durable writes with
// synchronous=FULL, COMMIT) on datasets that already hold 10, 10^3 and 10^5
// events, alone and followed by the metrics' refresh (RefreshBudget) as
// RequestRelease does it: together, the ledger's work on a release's path.
// The running totals make the check O(grid) and the refresh reads the
// position, not the report, so the times should not grow with history
// (issue 36, item 6: p50 and p99 at 10^5 events within 1.5x of 10^3).
//
//   build/bench/ledger_bench [--admissions 500]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/privacy/accounting.h"
#include "core/privacy/events.h"
#include "core/privacy/rdp.h"
#include "proto/convert.h"
#include "core/privacy/event_codec.h"
#include "server/clock.h"
#include "server/ledger.h"
#include "server/metrics.h"
#include "server/shared_database.h"
#include "server/store.h"

namespace {

using dpcurator::server::Ledger;
using dpcurator::server::SharedDatabase;
using dpcurator::server::Store;
namespace privacy = dpcurator::privacy;
namespace v1 = dpcurator::v1;

// Writes `count` historical Gaussian events straight into the tables, in one
// transaction (the bench measures admission, not how history was made).
void Populate(SharedDatabase* database, const std::string& dataset_id, int64_t count) {
  auto event = *privacy::PrivacyEvent::Gaussian(1000.0);
  auto curve = *privacy::ComputeRdp(event, privacy::DefaultRdpOrders());
  std::string blob(curve.size() * sizeof(double), '\0');
  std::memcpy(blob.data(), curve.data(), blob.size());
  privacy::AccountantState state(privacy::NeighbouringRelation::kAddRemove);
  auto charge = *privacy::EventCharge::Of(event);
  auto db = database->Lock();
  (void)db->Exec("BEGIN IMMEDIATE");
  auto insert = *db->Prepare(
      "INSERT INTO ledger_events (dataset_id, release_id, kind, description, relation, rdp, "
      "plain_gaussian, inverse_variance_sum, epsilon_alone, refund_of, created_unix) VALUES "
      "(?, 'history', 'rff_embedding', ?, 1, ?, 1, ?, 0.001, NULL, 0)");
  const std::string description = dpcurator::privacy::EncodeEvent(event);
  for (int64_t i = 0; i < count; ++i) {
    insert.Reset();
    (void)insert.Bind(1, dataset_id).Bind(2, description).BindBlob(3, blob).Bind(4, 1e-6).Run();
    (void)state.Add(charge);
  }
  auto totals = *db->Prepare("INSERT INTO ledger_totals VALUES (?, ?, ?)");
  (void)totals.Bind(1, dataset_id).BindBlob(2, state.Serialize()).Bind(3, count).Run();
  (void)db->Exec("COMMIT");
}

struct Latency {
  double p50 = 0.0;
  double p99 = 0.0;
};

Latency Percentiles(std::vector<double> micros) {
  std::sort(micros.begin(), micros.end());
  const size_t n = micros.size();
  return Latency{micros[n / 2], micros[std::min(n - 1, n * 99 / 100)]};
}

}  // namespace

int main(int argc, char** argv) {
  int admissions = 500;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--admissions") == 0) admissions = std::atoi(argv[i + 1]);
  }
  if (admissions < 1) admissions = 1;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("dpcurator-ledger-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto database = SharedDatabase::Open((dir / "bench.db").string());
  if (!database.ok()) {
    std::fprintf(stderr, "%s\n", std::string(database.status().message()).c_str());
    return 1;
  }
  const auto* clock = &dpcurator::server::SystemClock::Get();
  auto store = Store::Open(database->get(), clock);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", std::string(store.status().message()).c_str());
    return 1;
  }
  auto metrics = dpcurator::server::Metrics::Builder().Build();
  if (!metrics.ok()) {
    std::fprintf(stderr, "%s\n", std::string(metrics.status().message()).c_str());
    return 1;
  }
  Ledger ledger(database->get(), clock);
  std::printf("ledger admission vs history (SQLite WAL, synchronous=FULL; %d admissions each)\n",
              admissions);
  std::printf("  admit: Ledger::Admit alone; path: Admit then RefreshBudget (the gauges), as "
              "RequestRelease does\n");
  std::printf("%12s %14s %14s %14s %14s\n", "history", "admit p50 us", "admit p99 us",
              "path p50 us", "path p99 us");
  auto event = *privacy::PrivacyEvent::Gaussian(1000.0);
  const std::vector<int64_t> histories = {10, 1000, 100000};
  std::vector<std::string> datasets;
  for (int64_t history : histories) {
    v1::CreateDatasetRequest create;
    create.set_name("bench");
    auto* column = create.mutable_schema()->add_columns();
    column->set_name("x");
    column->set_type(v1::ColumnSchema::NUMERIC);
    column->set_upper(1);
    create.mutable_budget()->set_epsilon(1e6);
    create.mutable_budget()->set_delta(1e-5);
    auto dataset = (*store)->CreateDataset(create);
    if (!dataset.ok()) {
      std::fprintf(stderr, "%s\n", std::string(dataset.status().message()).c_str());
      return 1;
    }
    Populate(database->get(), dataset->id(), history);
    datasets.push_back(dataset->id());
  }
  // Round robin over the datasets, so that the machine's noise (fsync
  // times, other processes) falls on every history alike.
  std::vector<std::vector<double>> admit_micros(histories.size());
  std::vector<std::vector<double>> path_micros(histories.size());
  for (int i = 0; i < admissions; ++i) {
    for (size_t h = 0; h < histories.size(); ++h) {
      const auto start = std::chrono::steady_clock::now();
      auto admission = ledger.Admit(datasets[h], dpcurator::server::Caller{"bench", false},
                                    "key-" + std::to_string(i), "rff_embedding",
                                    "request-" + std::to_string(i), event);
      const auto admitted = std::chrono::steady_clock::now();
      dpcurator::server::RefreshBudget(ledger, **metrics, datasets[h]);
      const auto refreshed = std::chrono::steady_clock::now();
      if (!admission.ok()) {
        std::fprintf(stderr, "%s\n", std::string(admission.status().message()).c_str());
        return 1;
      }
      ledger.EndAttempt(admission->release_id);
      admit_micros[h].push_back(
          std::chrono::duration<double, std::micro>(admitted - start).count());
      path_micros[h].push_back(
          std::chrono::duration<double, std::micro>(refreshed - start).count());
    }
  }
  std::vector<std::pair<int64_t, std::pair<Latency, Latency>>> rows;
  for (size_t h = 0; h < histories.size(); ++h) {
    const Latency admit = Percentiles(admit_micros[h]);
    const Latency path = Percentiles(path_micros[h]);
    rows.push_back({histories[h], {admit, path}});
    std::printf("%12lld %14.1f %14.1f %14.1f %14.1f\n", static_cast<long long>(histories[h]),
                admit.p50, admit.p99, path.p50, path.p99);
  }
  // The goal: at 10^5 events within 1.5x of 10^3.
  const auto& [small_admit, small_path] = rows[1].second;
  const auto& [large_admit, large_path] = rows[2].second;
  std::printf("ratio 100000 / 1000 events: admit p50 %.2fx, p99 %.2fx; path p50 %.2fx, p99 "
              "%.2fx (goal: within 1.5x)\n",
              large_admit.p50 / small_admit.p50, large_admit.p99 / small_admit.p99,
              large_path.p50 / small_path.p50, large_path.p99 / small_path.p99);
  std::filesystem::remove_all(dir);
  return 0;
}
