// Admission cost against ledger history: one Ledger::Admit (BEGIN IMMEDIATE,
// composed epsilon with the new event, durable writes with
// synchronous=FULL, COMMIT) on datasets that already hold 10, 10^3 and 10^5
// events. The running totals make the check O(grid), so the times should
// not grow with history.
//
//   build/bench/ledger_bench [--admissions 100]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/privacy/accounting.h"
#include "core/privacy/events.h"
#include "core/privacy/rdp.h"
#include "proto/convert.h"
#include "core/privacy/event_codec.h"
#include "server/clock.h"
#include "server/ledger.h"
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

}  // namespace

int main(int argc, char** argv) {
  int admissions = 100;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--admissions") == 0) admissions = std::atoi(argv[i + 1]);
  }
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
  Ledger ledger(database->get(), clock);
  std::printf("ledger admission vs history (SQLite WAL, synchronous=FULL; median of %d)\n",
              admissions);
  std::printf("%12s %14s %14s %14s\n", "history", "median (us)", "p10 (us)", "p90 (us)");
  auto event = *privacy::PrivacyEvent::Gaussian(1000.0);
  for (int64_t history : {int64_t{10}, int64_t{1000}, int64_t{100000}}) {
    v1::CreateDatasetRequest create;
    create.set_name("bench");
    auto* column = create.mutable_schema()->add_columns();
    column->set_name("x");
    column->set_type(v1::ColumnSchema::NUMERIC);
    column->set_upper(1);
    create.mutable_budget()->set_epsilon(1e6);
    create.mutable_budget()->set_delta(1e-5);
    auto dataset = (*store)->CreateDataset(create);
    Populate(database->get(), dataset->id(), history);
    std::vector<double> micros;
    for (int i = 0; i < admissions; ++i) {
      const auto start = std::chrono::steady_clock::now();
      auto admission = ledger.Admit(dataset->id(), dpcurator::server::Caller{"bench", false},
                                    "key-" + std::to_string(i), "rff_embedding",
                                    "request-" + std::to_string(i), event);
      const auto end = std::chrono::steady_clock::now();
      if (!admission.ok()) {
        std::fprintf(stderr, "%s\n", std::string(admission.status().message()).c_str());
        return 1;
      }
      micros.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    std::sort(micros.begin(), micros.end());
    std::printf("%12lld %14.1f %14.1f %14.1f\n", static_cast<long long>(history),
                micros[micros.size() / 2], micros[micros.size() / 10],
                micros[micros.size() * 9 / 10]);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
