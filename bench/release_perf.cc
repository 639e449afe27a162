#include "bench/release_perf.h"

#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "Eigen/Core"
#include "core/data/demo.h"
#include "core/privacy/noise_source.h"
#include "core/release/charfn_embedding.h"
#include "core/release/encoded_rows.h"
#include "core/release/rff_embedding.h"
#include "core/util/public_rng.h"
#include "core/util/shard_pool.h"
#include "core/util/sincos.h"

namespace dpcurator::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The release path's threads (core/embed/labelled_embedding.cc).
int ReleaseThreads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 2u));
}

// GFLOP/s of square n x n double products with Eigen, as the release
// multiplies (its own kernels, baseline ISA), on the release's threads at
// once.
double DgemmPeak(int n, double seconds) {
  const int threads = ReleaseThreads();
  std::vector<double> rates(threads);
  ShardPool pool(threads);
  pool.Run(threads, [&](int t) { rates[t] = EigenGemmGflops<double>(n, seconds); });
  double total = 0;
  for (double rate : rates) total += rate;
  return total;
}

// Nanoseconds per value of double sin+cos (SinCos, one thread).
double SinCosNanoseconds(double seconds) {
  const int64_t n = 1 << 16;
  std::vector<double> x(n), s(n), c(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 0.001 * static_cast<double>(i) - 30;
  int reps = 0;
  const Clock::time_point start = Clock::now();
  double elapsed = 0;
  do {
    SinCos(x.data(), n, 1.0, s.data(), c.data());
    ++reps;
    elapsed = SecondsSince(start);
  } while (elapsed < seconds);
  return elapsed * 1e9 / (static_cast<double>(n) * reps);
}

struct Measurement {
  double rows_per_second = 0;
  double gflops = 0;        // of the two products
  double sincos_share = 0;  // seconds in sin+cos at SinCos's rate / wall seconds
  double peak_rss_mb = 0;
  double encoded_mb = 0;
  bool ok = false;
};

constexpr int kFrequencies = 500;

// The process's peak resident set (VmHWM), in MiB.
double PeakRssMb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024;  // kB
  }
  return 0;
}

// Starts a new peak: writing 5 to clear_refs resets VmHWM (Linux >= 4.0),
// so the peak read after the release is the release's, not the data
// generation's.
void ResetPeakRss() {
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";
}

// The image rows' schema: 28 x 28 grey images, ten classes (Fashion-MNIST's
// shape).
data::Schema ImageSchema() {
  std::vector<std::string> classes;
  for (int c = 0; c < 10; ++c) classes.push_back(std::to_string(c));
  data::Schema::Builder builder;
  builder.AddImage("image", 28, 28).AddCategorical("label", classes).SetLabel("label");
  return builder.Build().value();
}

// n random 8-bit images (level / 255, as the store decodes them) with
// random labels, generated straight into the encoded form.
release::EncodedRows GenerateImageRows(const data::Schema& schema, int64_t n) {
  release::EncodedRows rows;
  rows.layout = data::FeatureLayout::ForFeatures(schema);
  rows.num_classes = schema.num_classes();
  rows.features.resize(n, rows.layout.total_dim());
  rows.labels.resize(n);
  PublicRng rng(42);
  double* pixels = rows.features.data();
  for (int64_t i = 0; i < rows.features.size(); ++i) {
    pixels[i] = static_cast<double>(rng.NextU64() & 0xff) / 255.0;
  }
  for (int64_t i = 0; i < n; ++i) rows.labels(i) = static_cast<int>(rng.UniformInt(10));
  return rows;
}

// Runs in the child: one release of `kind` (0 rff, 1 charfn) over n rows of
// the demo table or of images.
Measurement Measure(int kind, ReleaseRows shape, int64_t n, double sincos_ns) {
  Measurement m;
  const data::Schema schema = shape == ReleaseRows::kImages ? ImageSchema() : data::DemoSchema();
  release::EncodedRows rows;
  if (shape == ReleaseRows::kImages) {
    rows = GenerateImageRows(schema, n);
  } else {
    const data::Table table = data::GenerateDemoTable(n, 42);
    rows = release::EncodeRows(schema, table);
  }
  m.encoded_mb = static_cast<double>(rows.bytes()) / (1 << 20);
  privacy::SeededNoiseSource noise(7);
  ResetPeakRss();
  const auto relation = privacy::NeighbouringRelation::kAddRemove;
  const double classes = rows.num_classes;
  double multiply_adds = 0, sincos_values = 0;
  const Clock::time_point start = Clock::now();
  if (kind == 0) {
    release::RffEmbeddingKind::Params params;
    params.num_frequencies = kFrequencies;
    params.seed = 5;
    auto resolved = release::RffEmbeddingKind::Resolve(params, schema);
    m.ok = resolved.ok() &&
           release::RffEmbeddingKind::Run(*resolved, rows, relation, 2.0, n, &noise).ok();
    const double features = 2.0 * kFrequencies + rows.layout.categorical_dim;
    multiply_adds = static_cast<double>(n) *
                    (rows.layout.numeric_dim * kFrequencies + features * classes);
  } else {
    release::CharfnEmbeddingKind::Params params;
    params.num_frequencies = kFrequencies;
    params.seed = 5;
    auto resolved = release::CharfnEmbeddingKind::Resolve(params, schema);
    m.ok = resolved.ok() &&
           release::CharfnEmbeddingKind::Run(*resolved, rows, relation, 2.0, n, &noise).ok();
    multiply_adds = static_cast<double>(n) * (rows.layout.total_dim() * kFrequencies +
                                              2.0 * kFrequencies * classes);
  }
  sincos_values = static_cast<double>(n) * kFrequencies;
  const double seconds = SecondsSince(start);
  m.rows_per_second = static_cast<double>(n) / seconds;
  m.gflops = 2.0 * multiply_adds / seconds / 1e9;
  m.sincos_share = sincos_values * sincos_ns * 1e-9 / ReleaseThreads() / seconds;
  m.peak_rss_mb = PeakRssMb();
  return m;
}

// Measure() in a fresh child process, so its peak RSS is its own.
Measurement MeasureInChild(int kind, ReleaseRows shape, int64_t n, double sincos_ns) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const Measurement m = Measure(kind, shape, n, sincos_ns);
    const ssize_t written = write(fds[1], &m, sizeof(m));
    _exit(written == static_cast<ssize_t>(sizeof(m)) ? 0 : 1);
  }
  close(fds[1]);
  Measurement m;
  const bool read_all = pid > 0 && read(fds[0], &m, sizeof(m)) == static_cast<ssize_t>(sizeof(m));
  close(fds[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  if (!read_all || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};
  return m;
}

}  // namespace

bool PrintReleaseTable(ReleaseRows shape, const std::vector<int64_t>& sizes, double seconds) {
  const double sincos_ns = SinCosNanoseconds(std::min(seconds, 1.0) / 2);
  std::printf(
      "\nrelease speed (engine only), %s, %d frequencies, %d threads; dgemm peak: "
      "square 1024 Eigen products on every release thread at once, measured before each row\n\n",
      shape == ReleaseRows::kImages ? "28 x 28 images (784 pixels), 10 classes"
                                    : "demo table",
      kFrequencies, ReleaseThreads());
  std::printf("%-8s %10s %12s %10s %10s %7s %8s %10s %10s\n", "kind", "rows", "rows/s",
              "GEMM GF/s", "dgemm GF/s", "ratio", "sincos", "RSS MB", "table MB");
  bool all_ok = true;
  for (int64_t n : sizes) {
    for (int kind = 0; kind < 2; ++kind) {
      const double peak = DgemmPeak(1024, std::min(seconds, 1.0) / 4);
      const Measurement m = MeasureInChild(kind, shape, n, sincos_ns);
      all_ok = all_ok && m.ok;
      std::printf("%-8s %10lld %12.0f %10.1f %10.1f %6.0f%% %7.0f%% %10.0f %10.0f%s\n",
                  kind == 0 ? "dp-merf" : "pearl", static_cast<long long>(n), m.rows_per_second,
                  m.gflops, peak, 100.0 * m.gflops / peak, 100.0 * m.sincos_share,
                  m.peak_rss_mb, m.encoded_mb, m.ok ? "" : "  FAILED");
    }
  }
  std::printf(
      "\nratio = the release's GEMM GF/s / dgemm GF/s; sincos = the share of the wall time that\n"
      "its %d sin+cos per row take at SinCos's own rate (%s, %.2f ns/value on one thread).\n"
      "RSS MB = peak resident set during the release (the data generation's peak excluded);\n"
      "table MB = the encoded rows the store caches; RSS beyond it is the engine's working set.\n",
      kFrequencies, SinCosVariant(), sincos_ns);
  return all_ok;
}

}  // namespace dpcurator::bench
