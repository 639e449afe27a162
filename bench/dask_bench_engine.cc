// The C++ side of bench/dask_bench.py (issue 28, "Done when": 10M rows in
// 20 CSV shards on 2 Dask workers against the in-process engine on the
// same 2 cores).
//
//   dask_bench_engine gen DIR ROWS SHARDS
//     writes DIR/shard-NN.csv: ROWS rows of the project's demo table
//     (core/data/demo.h) split into SHARDS files, each from its own seed,
//     in the upload's CSV form (data::WriteCsv). bench/dask_bench.py
//     declares the same schema as JSON for the module; the two statistics
//     agreeing to 1e-12 checks that it is the same.
//   dask_bench_engine engine DIR FREQUENCIES SEED STATISTIC_OUT
//     the in-process engine over the same rows, timed step by step as the
//     server runs a release: read every shard with the upload's reader
//     (data::ReadCsvFile), encode (release::EncodeRows: the store does this
//     once per dataset and caches the result, server/store.cc), then the
//     rff_embedding kind's Run on its release threads (2 on this machine)
//     with a zero noise source, which is the exact statistic. Prints one
//     JSON line of timings and writes the statistic (raw little-endian f64,
//     the module's Partial layout) for the Python side to compare.
//   dask_bench_engine recipe DIR KIND ROUNDS SEED ARTEFACT_OUT REQUEST_OUT
//     issue 41: the mst or aim recipe (KIND) as the server runs it on a
//     stored dataset of the same rows: read the shards with the upload's
//     reader, plan (plan::PlanRelease, epsilon 1, aim with ROUNDS rounds or
//     the default at 0), then ComputeMstRelease / ComputeAimRelease over the
//     rows under a SeededNoiseSource(SEED). Writes the artefact's bytes, and
//     the request as an external dataset's plan resolves and stores it (the
//     job's request, which dpcurator.Plan.from_request takes).
//   dask_bench_engine recipe-tables KIND ROUNDS SEED TABLES_F64 ARTEFACT_OUT
//     the same recipe on an external dataset of the same id: the runner's
//     merged partial (raw f64, the plan's tables) through
//     plan::ComputeRecipeReleaseFromTables, the submission's path, under
//     the same seeded noise. The artefacts must be the same bytes.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/data/csv.h"
#include "core/data/demo.h"
#include "core/privacy/noise_source.h"
#include "core/release/encoded_rows.h"
#include "core/release/rff_embedding.h"
#include "plan/releases.h"
#include "proto/convert.h"

namespace dpcurator::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The process's CPU seconds so far, every thread's: on a shared machine the
// CPU a step used says more than its wall time (bench/dask_bench.py
// compares it with the Dask workers' CPU).
double CpuSeconds() {
  timespec now;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "dask_bench_engine: %s\n", message.c_str());
  return 1;
}

// Every CSV shard under `dir` (sorted by name) read with the upload's reader
// into one table: the in-process runs read the rows as an upload would.
absl::StatusOr<data::Table> ReadShards(const fs::path& dir, const data::Schema& schema,
                                       size_t* num_shards = nullptr) {
  std::vector<fs::path> shards;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".csv") shards.push_back(entry.path());
  }
  std::sort(shards.begin(), shards.end());
  if (num_shards != nullptr) *num_shards = shards.size();
  std::vector<data::Table> parts;
  int64_t total = 0;
  for (const fs::path& path : shards) {
    absl::StatusOr<data::Table> part = data::ReadCsvFile(schema, path.string());
    if (!part.ok()) return part.status();
    total += part->num_rows();
    parts.push_back(*std::move(part));
  }
  data::Table table;
  table.cells.resize(total, schema.num_columns());
  int64_t offset = 0;
  for (data::Table& part : parts) {
    table.cells.middleRows(offset, part.num_rows()) = part.cells;
    offset += part.num_rows();
    part = data::Table();
  }
  return table;
}

int Generate(const fs::path& dir, int64_t rows, int shards) {
  fs::create_directories(dir);
  const data::Schema schema = data::DemoSchema();
  for (int s = 0; s < shards; ++s) {
    const int64_t n = rows * (s + 1) / shards - rows * s / shards;
    const data::Table table = data::GenerateDemoTable(n, 20261127 + static_cast<uint64_t>(s));
    const fs::path path = dir / absl::StrFormat("shard-%02d.csv", s);
    std::ofstream out(path);
    data::WriteCsv(schema, table, &out);
    if (!out) return Fail("cannot write " + path.string());
  }
  return 0;
}

int Engine(const fs::path& dir, int frequencies, uint64_t seed, const std::string& statistic_out) {
  const absl::StatusOr<data::Schema> schema = data::DemoSchema();
  // Read: every shard with the upload's reader, into one table.
  Clock::time_point start = Clock::now();
  double cpu_start = CpuSeconds();
  size_t num_shards = 0;
  absl::StatusOr<data::Table> read = ReadShards(dir, *schema, &num_shards);
  if (!read.ok()) return Fail(std::string(read.status().message()));
  data::Table table = *std::move(read);
  const double read_s = SecondsSince(start);
  const double read_cpu_s = CpuSeconds() - cpu_start;

  start = Clock::now();
  const release::EncodedRows encoded = release::EncodeRows(*schema, table);
  const double encode_s = SecondsSince(start);
  table = data::Table();

  // Run: the release's engine step, as server/release_kinds.cc calls it
  // (Prepare from public values, then Run over the encoded rows).
  release::RffEmbeddingKind::Params params;
  params.num_frequencies = frequencies;
  params.seed = seed;
  absl::StatusOr<release::RffEmbeddingKind::Params> resolved =
      release::RffEmbeddingKind::Resolve(params, *schema);
  if (!resolved.ok()) return Fail(std::string(resolved.status().message()));
  start = Clock::now();
  cpu_start = CpuSeconds();
  absl::StatusOr<release::RffEmbeddingKind::Prepared> prepared =
      release::RffEmbeddingKind::Prepare(*resolved, encoded.layout);
  if (!prepared.ok()) return Fail(std::string(prepared.status().message()));
  privacy::ZeroNoiseSource zero;
  absl::StatusOr<release::RffEmbeddingKind::Result> result =
      release::RffEmbeddingKind::Run(*prepared, encoded,
                                     privacy::NeighbouringRelation::kAddRemove, 1.0, 0, &zero);
  const double run_s = SecondsSince(start);
  const double run_cpu_s = CpuSeconds() - cpu_start;
  if (!result.ok()) return Fail(std::string(result.status().message()));

  const Eigen::MatrixXd& sums = result->embedding.class_values;
  const Eigen::VectorXd& counts = result->embedding.class_totals;
  std::ofstream out(statistic_out, std::ios::binary);
  out.write(reinterpret_cast<const char*>(sums.data()),
            static_cast<std::streamsize>(sizeof(double) * sums.size()));
  out.write(reinterpret_cast<const char*>(counts.data()),
            static_cast<std::streamsize>(sizeof(double) * counts.size()));
  if (!out) return Fail("cannot write " + statistic_out);
  std::printf(
      "{\"rows\": %lld, \"shards\": %zu, \"read_s\": %.4f, \"encode_s\": %.4f, \"run_s\": %.4f, "
      "\"read_cpu_s\": %.4f, \"run_cpu_s\": %.4f, \"hardware_threads\": %u}\n",
      static_cast<long long>(table.num_rows()), num_shards, read_s, encode_s, run_s, read_cpu_s,
      run_cpu_s, std::thread::hardware_concurrency());
  return 0;
}

// The bench's dataset: the demo schema, epsilon 10, ADD_REMOVE; stored
// (its row count) or external, under one id so that the artefacts compare.
v1::Dataset BenchDataset(bool external, int64_t rows) {
  v1::Dataset dataset;
  dataset.set_id("ds_bench");
  *dataset.mutable_schema() = SchemaToProto(data::DemoSchema());
  dataset.mutable_budget()->set_epsilon(10.0);
  dataset.mutable_budget()->set_delta(1e-5);
  dataset.set_relation(v1::ADD_REMOVE);
  dataset.set_external(external);
  if (!external) dataset.set_row_count(rows);
  return dataset;
}

v1::ReleaseRequest RecipeRequest(const std::string& kind, int rounds) {
  v1::ReleaseRequest request;
  request.set_dataset_id("ds_bench");
  request.set_idempotency_key("bench");
  request.set_epsilon(1.0);
  if (kind == "aim") {
    request.mutable_aim()->set_rounds(rounds);
  } else {
    request.mutable_mst();
  }
  return request;
}

std::string ArtefactBytes(const v1::Release& release) {
  return release.has_aim() ? release.aim().SerializeAsString()
                           : release.mst().SerializeAsString();
}

bool WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

int Recipe(const fs::path& dir, const std::string& kind, int rounds, uint64_t seed,
           const std::string& artefact_out, const std::string& request_out) {
  const data::Schema schema = data::DemoSchema();
  Clock::time_point start = Clock::now();
  absl::StatusOr<data::Table> read = ReadShards(dir, schema);
  if (!read.ok()) return Fail(std::string(read.status().message()));
  const data::Table table = *std::move(read);
  const double read_s = SecondsSince(start);
  const v1::Dataset stored = BenchDataset(false, table.num_rows());
  absl::StatusOr<plan::ReleasePlan> planned =
      plan::PlanRelease(RecipeRequest(kind, rounds), stored, schema);
  if (!planned.ok()) return Fail(std::string(planned.status().message()));
  absl::StatusOr<plan::ReleasePlan> external =
      plan::PlanRelease(RecipeRequest(kind, rounds), BenchDataset(true, 0), schema);
  if (!external.ok()) return Fail(std::string(external.status().message()));
  privacy::SeededNoiseSource noise(seed);
  start = Clock::now();
  const double cpu_start = CpuSeconds();
  absl::StatusOr<v1::Release> release =
      kind == "aim" ? plan::ComputeAimRelease(*planned, stored, schema, table, "rel_bench", 1.0,
                                              &noise)
                    : plan::ComputeMstRelease(*planned, stored, schema, table, "rel_bench", 1.0,
                                              &noise);
  const double run_s = SecondsSince(start);
  const double run_cpu_s = CpuSeconds() - cpu_start;
  if (!release.ok()) return Fail(std::string(release.status().message()));
  if (!WriteFile(artefact_out, ArtefactBytes(*release)) ||
      !WriteFile(request_out, external->resolved_request.SerializeAsString())) {
    return Fail("cannot write " + artefact_out + " or " + request_out);
  }
  std::printf(
      "{\"rows\": %lld, \"read_s\": %.4f, \"run_s\": %.4f, \"run_cpu_s\": %.4f, "
      "\"tables\": %zu, \"table_cells\": %lld}\n",
      static_cast<long long>(table.num_rows()), read_s, run_s, run_cpu_s,
      external->external_tables.size(),
      static_cast<long long>(external->external_table_cells));
  return 0;
}

int RecipeFromTables(const std::string& kind, int rounds, uint64_t seed,
                     const std::string& tables_path, const std::string& artefact_out) {
  const data::Schema schema = data::DemoSchema();
  std::ifstream in(tables_path, std::ios::binary | std::ios::ate);
  if (!in) return Fail("cannot read " + tables_path);
  const std::streamsize bytes = in.tellg();
  in.seekg(0);
  std::vector<double> tables(static_cast<size_t>(bytes) / sizeof(double));
  in.read(reinterpret_cast<char*>(tables.data()), bytes);
  const v1::Dataset external = BenchDataset(true, 0);
  absl::StatusOr<plan::ReleasePlan> planned =
      plan::PlanRelease(RecipeRequest(kind, rounds), external, schema);
  if (!planned.ok()) return Fail(std::string(planned.status().message()));
  privacy::SeededNoiseSource noise(seed);
  const Clock::time_point start = Clock::now();
  const double cpu_start = CpuSeconds();
  // The rows' count is not used by the recipe (ADD_REMOVE): 0 here.
  absl::StatusOr<v1::Release> release = plan::ComputeRecipeReleaseFromTables(
      *planned, external, schema, tables, 0, "rel_bench", 1.0, &noise);
  const double run_s = SecondsSince(start);
  const double run_cpu_s = CpuSeconds() - cpu_start;
  if (!release.ok()) return Fail(std::string(release.status().message()));
  if (!WriteFile(artefact_out, ArtefactBytes(*release))) {
    return Fail("cannot write " + artefact_out);
  }
  std::printf("{\"run_s\": %.4f, \"run_cpu_s\": %.4f}\n", run_s, run_cpu_s);
  return 0;
}

}  // namespace
}  // namespace dpcurator::bench

int main(int argc, char** argv) {
  using dpcurator::bench::Engine;
  using dpcurator::bench::Fail;
  using dpcurator::bench::Generate;
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 4 && args[0] == "gen") {
    return Generate(args[1], std::stoll(args[2]), std::stoi(args[3]));
  }
  if (args.size() == 5 && args[0] == "engine") {
    return Engine(args[1], std::stoi(args[2]), std::stoull(args[3]), args[4]);
  }
  if (args.size() == 7 && args[0] == "recipe") {
    return dpcurator::bench::Recipe(args[1], args[2], std::stoi(args[3]), std::stoull(args[4]),
                                    args[5], args[6]);
  }
  if (args.size() == 6 && args[0] == "recipe-tables") {
    return dpcurator::bench::RecipeFromTables(args[1], std::stoi(args[2]), std::stoull(args[3]),
                                              args[4], args[5]);
  }
  return Fail(
      "usage: dask_bench_engine gen DIR ROWS SHARDS | engine DIR FREQUENCIES SEED STATISTIC_OUT"
      " | recipe DIR mst|aim ROUNDS SEED ARTEFACT_OUT REQUEST_OUT"
      " | recipe-tables mst|aim ROUNDS SEED TABLES_F64 ARTEFACT_OUT");
}
