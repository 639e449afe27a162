// Trainer speed (issue 13): generator steps per second of DP-MERF and PEARL
// at the reference papers' Adult configurations and at dpcurator's
// defaults, on Adult and on the synthetic demo table, next to the
// machine's GEMM peak measured in the same process just before.
//
//   build/bench/perf [--quick] [--seconds S] [--only METHOD/DATA/CONFIG]
//
// --quick: about 0.4 s per row (the ctest smoke run); --only release: the
// release table alone; --only: otherwise the trainer rows whose
// "method/data/config" contains the text (e.g. pearl/adult/reference).
//
// One table: method, data, config, steps/s, GFLOP/s of the step's GEMMs
// (their multiply-adds x 2 per step, divided by the whole step's time, so a
// lower bound of the GEMMs' own rate), the sgemm and dgemm peaks (square
// 1024 products on every trainer thread at once, through nn::Gemm: the
// trainer's own path) and GEMM GFLOP/s / sgemm peak. The target of each
// run is the exact (non-private) class-mean embedding of the table: a
// benchmark input, never released.
//
// Then the releases (bench/release_perf.h): rows/s and peak RSS of DP-MERF
// and PEARL releases at 32,561 (Adult's size), 1M and 10M generated rows;
// --quick runs one small size.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

// GCC 12 raises -Wuninitialized inside its AVX-512 intrinsics when Eigen's
// float sin/cos is inlined for AVX-512 (GCC bug 105593, fixed in GCC 13): a
// false positive, seen only in -march=native builds of SinCosEigen below.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/release_perf.h"
#include "core/data/csv.h"
#include "core/data/demo.h"
#include "core/data/encoder.h"
#include "core/embed/charfn.h"
#include "core/embed/rff.h"
#include "core/train/embedding_trainer.h"
#include "core/train/pearl_trainer.h"
#include "proto/convert.h"

// Built against the double trainers too (the "before" column of issue 13).
#if __has_include("core/train/float_features.h")
#define DPC_PERF_FLOAT_TRAINERS 1
#include "core/nn/gemm.h"
#include "core/util/shard_pool.h"
#include "core/util/sincos.h"
#endif

namespace dpcurator {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Dataset {
  std::string name;
  data::Schema schema;
  data::FeatureLayout layout;
  Eigen::MatrixXd encoded;
  Eigen::VectorXi labels;
};

absl::StatusOr<Dataset> LoadAdult() {
  const std::string source = DPC_SOURCE_DIR;
  auto proto = ReadSchemaFile(source + "/schemas/adult.schema.json");
  if (!proto.ok()) return proto.status();
  auto schema = SchemaFromProto(*proto);
  if (!schema.ok()) return schema.status();
  auto table = data::ReadCsvFile(*schema, source + "/../shared/data/adult/adult.data");
  if (!table.ok()) return table.status();
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(*schema);
  return Dataset{"adult", *schema, layout, data::EncodeFeatures(*schema, layout, *table),
                 data::ExtractLabels(*schema, *table)};
}

Dataset LoadDemo() {
  const data::Schema schema = data::DemoSchema();
  const data::Table table = data::GenerateDemoTable(20000, 1);
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  return Dataset{"demo", schema, layout, data::EncodeFeatures(schema, layout, table),
                 data::ExtractLabels(schema, table)};
}

// The exact class-mean embedding of the table under `map` (no noise).
embed::EmbeddingTarget ExactTarget(const Dataset& data, const embed::FeatureMap& map) {
  const int classes = data.schema.num_classes();
  Eigen::MatrixXd features;
  map.Features(data.encoded, &features);
  embed::EmbeddingTarget target;
  target.class_means = Eigen::MatrixXd::Zero(map.output_dim(), classes);
  target.class_weights = Eigen::VectorXd::Zero(classes);
  for (Eigen::Index i = 0; i < features.rows(); ++i) {
    target.class_means.col(data.labels(i)) += features.row(i).transpose();
    target.class_weights(data.labels(i)) += 1.0;
  }
  for (int c = 0; c < classes; ++c) {
    target.class_means.col(c) /= std::max(1.0, target.class_weights(c));
  }
  target.class_weights /= target.class_weights.sum();
  return target;
}

struct Config {
  std::string method;  // "dp-merf" or "pearl"
  std::string name;    // "reference" or "default"
  std::vector<int> hidden;
  int batch_size;
  int noise_dim;
  int num_frequencies;  // k: 2k real features
};

// Multiply-adds of one generator step's GEMMs: the MLP forward (X W per
// layer), its backward (X^T dH per layer, dH W^T below the first), and the
// feature map's phases x_P W^T and (dL/dA) W; PEARL adds a forward on a
// fresh batch every 10th step (its critic step).
double StepMultiplyAdds(const Config& config, const Dataset& data, int rows) {
  const int classes = data.schema.num_classes();
  std::vector<int> widths = {config.noise_dim + (classes > 1 ? classes : 0)};
  for (int h : config.hidden) widths.push_back(h);
  widths.push_back(data.layout.total_dim());
  double forward = 0, backward = 0;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const double layer = static_cast<double>(rows) * widths[l] * widths[l + 1];
    forward += layer;
    backward += l == 0 ? layer : 2 * layer;
  }
  const int phase_dim =
      config.method == "pearl" ? data.layout.total_dim() : data.layout.numeric_dim;
  const double features = static_cast<double>(rows) * config.num_frequencies * phase_dim;
  double total = forward + backward + 2 * features;
  if (config.method == "pearl") total += (forward + features) / 10.0;
  return total;
}

struct RunResult {
  double steps_per_second = 0;
  bool ok = false;
};

RunResult TimeTrainer(const Config& config, const Dataset& data, double seconds) {
  train::PearlTrainerOptions options;
  options.batch_size = config.batch_size;
  options.generator.hidden = config.hidden;
  options.generator.noise_dim = config.noise_dim;
  options.learning_rate = 2e-3;
  // The map and its exact target are built once, outside the timing.
  std::function<bool()> train;
  absl::StatusOr<embed::CharacteristicFunctionMap> charfn_map = absl::UnknownError("not built");
  absl::StatusOr<embed::RandomFourierFeatureMap> rff_map = absl::UnknownError("not built");
  embed::EmbeddingTarget target;
  if (config.method == "pearl") {
    embed::CharfnOptions charfn;
    charfn.num_frequencies = config.num_frequencies;
    charfn.length_scale = embed::DefaultCharfnLengthScale(data.layout);
    charfn.seed = 7;
    charfn_map = embed::CharacteristicFunctionMap::Create(data.layout, charfn);
    if (!charfn_map.ok()) return {};
    target = ExactTarget(data, *charfn_map);
    train = [&] {
      return train::TrainPearlGenerator(data.layout, *charfn_map, target, options).ok();
    };
  } else {
    embed::RffOptions rff;
    rff.num_frequencies = config.num_frequencies;
    rff.seed = 7;
    rff_map = embed::RandomFourierFeatureMap::Create(data.layout, rff);
    if (!rff_map.ok()) return {};
    target = ExactTarget(data, *rff_map);
    train = [&] {
      return train::TrainEmbeddingGenerator(data.layout, *rff_map, target, options).ok();
    };
  }
  // A short run sizes the timed one to about `seconds`.
  options.steps = 10;
  Clock::time_point start = Clock::now();
  if (!train()) return {};
  const double per_step = std::max(1e-5, SecondsSince(start) / options.steps);
  options.steps = std::max(20, static_cast<int>(seconds / per_step));
  start = Clock::now();
  if (!train()) return {};
  return {options.steps / SecondsSince(start), true};
}

// GFLOP/s of square n x n products through the trainer's GEMM path on every
// trainer thread at once (each thread its own operands).
template <typename Scalar>
double GemmPeak(int n, double seconds) {
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
#ifdef DPC_PERF_FLOAT_TRAINERS
  ShardPool pool(0);
  const int threads = pool.threads();
#else
  const int threads = 1;
#endif
  std::vector<Matrix> a(threads), b(threads), c(threads);
  for (int t = 0; t < threads; ++t) {
    a[t] = Matrix::Random(n, n);
    b[t] = Matrix::Random(n, n);
    c[t] = Matrix::Zero(n, n);
  }
  auto multiply = [&](int t) {
#ifdef DPC_PERF_FLOAT_TRAINERS
    nn::Gemm(false, a[t], false, b[t], Scalar{0}, c[t]);
#else
    c[t].noalias() = a[t] * b[t];
#endif
  };
  int reps = 0;
  const Clock::time_point start = Clock::now();
  double elapsed = 0;
  do {
#ifdef DPC_PERF_FLOAT_TRAINERS
    pool.Run(threads, multiply);
#else
    multiply(0);
#endif
    ++reps;
    elapsed = SecondsSince(start);
  } while (elapsed < seconds);
  return 2.0 * n * n * static_cast<double>(n) * reps * threads / elapsed / 1e9;
}

#ifdef DPC_PERF_FLOAT_TRAINERS
// Eigen's own vectorised float sin/cos (Eigen 3.4, ArrayXf::sin/cos),
// compiled for the baseline ISA: the alternative to SLEEF that issue 13 asked
// to measure.
void SinCosEigen(const float* x, int64_t n, float scale, float* sin_out, float* cos_out) {
  const Eigen::Map<const Eigen::ArrayXf> in(x, n);
  Eigen::Map<Eigen::ArrayXf>(sin_out, n) = scale * in.sin();
  Eigen::Map<Eigen::ArrayXf>(cos_out, n) = scale * in.cos();
}

void SinCosSleef(const float* x, int64_t n, float scale, float* sin_out, float* cos_out) {
  SinCos(x, n, scale, sin_out, cos_out);
}
#endif

// ns per value of float sin+cos through `kernel` on one thread.
template <typename Kernel>
double SinCosNanoseconds(Kernel kernel, double seconds) {
  const int n = 1 << 16;
  const Eigen::ArrayXf x = 20.0f * Eigen::ArrayXf::Random(n);
  Eigen::ArrayXf s(n), c(n);
  int reps = 0;
  const Clock::time_point start = Clock::now();
  double elapsed = 0;
  do {
    kernel(x.data(), n, 1.0f, s.data(), c.data());
    ++reps;
    elapsed = SecondsSince(start);
  } while (elapsed < seconds);
  return elapsed / reps / n * 1e9;
}

int Main(int argc, char** argv) {
  double seconds = 3.0;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      seconds = 0.4;
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: perf [--quick] [--seconds S] [--only METHOD/DATA/CONFIG]\n");
      return 2;
    }
  }
  auto adult = LoadAdult();
  if (!adult.ok()) {
    std::fprintf(stderr, "perf: cannot load Adult: %s\n", adult.status().ToString().c_str());
    return 1;
  }
  const std::vector<Dataset> datasets = {*std::move(adult), LoadDemo()};
  // Reference: Harder et al. 2021 and Liew et al. 2022 code on Adult
  // (dp-merf.md, pearl.md Sec. 4); default: dpcurator's CLI defaults
  // (client/model_cmd.cc: hidden 128,128, noise 16, batch 1024, k 500).
  const std::vector<Config> configs = {
      {"dp-merf", "reference", {56, 28}, 1108, 11, 500},
      {"dp-merf", "default", {128, 128}, 1024, 16, 500},
      {"pearl", "reference", {428, 214}, 1108, 11, 500},
      {"pearl", "default", {128, 128}, 1024, 16, 500},
  };

  const double sgemm = GemmPeak<float>(1024, std::min(seconds, 1.0));
  const double dgemm = GemmPeak<double>(1024, std::min(seconds, 1.0));
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::printf(
      "trainer speed, %u hardware threads; GEMM peaks: square 1024 products on every "
      "trainer thread at once\n\n",
      threads);
  std::printf("%-8s %-6s %-10s %-18s %10s %10s %10s %10s %7s\n", "method", "data", "config",
              "hidden/batch/k", "steps/s", "GEMM GF/s", "sgemm GF/s", "dgemm GF/s", "ratio");
  bool all_ok = true;
  for (const Dataset& data : datasets) {
    for (const Config& config : configs) {
      if (absl::StrCat(config.method, "/", data.name, "/", config.name).find(only) ==
          std::string::npos) {
        continue;
      }
      // The sgemm peak measured just before each row (the machine may have
      // changed its clock since the last).
      const double peak = GemmPeak<float>(1024, std::min(seconds, 1.0) / 4);
      const RunResult result = TimeTrainer(config, data, seconds);
      all_ok = all_ok && result.ok;
      const double gflops =
          2.0 * StepMultiplyAdds(config, data, config.batch_size) * result.steps_per_second / 1e9;
      const std::string shape = absl::StrCat(absl::StrJoin(config.hidden, ","), "/",
                                             config.batch_size, "/", config.num_frequencies);
      std::printf("%-8s %-6s %-10s %-18s %10.1f %10.1f %10.1f %10.1f %6.0f%%\n",
                  config.method.c_str(), data.name.c_str(), config.name.c_str(), shape.c_str(),
                  result.steps_per_second, gflops, peak, dgemm, 100.0 * gflops / peak);
    }
  }
  std::printf("\nsgemm peak at start %.1f GFLOP/s; ratio = GEMM GF/s / sgemm GF/s\n", sgemm);
  std::printf("Eigen's own sgemm (baseline ISA), one thread: %.1f GFLOP/s\n",
              bench::EigenGemmGflops<float>(1024, std::min(seconds, 1.0) / 2));
#ifdef DPC_PERF_FLOAT_TRAINERS
  const double sleef = SinCosNanoseconds(SinCosSleef, std::min(seconds, 1.0) / 2);
  const double eigen = SinCosNanoseconds(SinCosEigen, std::min(seconds, 1.0) / 2);
  std::printf(
      "float sin+cos, one thread: SLEEF (%s) %.3f ns/value, Eigen 3.4 (baseline ISA) "
      "%.3f ns/value\n",
      SinCosVariant(), sleef, eigen);
#endif
  const bool quick = seconds < 1.0;
  if (only.empty() || only.find("release") != std::string::npos) {
    const std::vector<int64_t> sizes =
        quick ? std::vector<int64_t>{20000}
              : std::vector<int64_t>{32561, 1000000, 10000000};
    all_ok = bench::PrintReleaseTable(bench::ReleaseRows::kDemo, sizes, seconds) && all_ok;
    // Image rows: 60,000 (Fashion-MNIST's training set) and 1M (6.3 GB of
    // encoded pixels).
    const std::vector<int64_t> image_sizes =
        quick ? std::vector<int64_t>{2000} : std::vector<int64_t>{60000, 1000000};
    all_ok = bench::PrintReleaseTable(bench::ReleaseRows::kImages, image_sizes, seconds) && all_ok;
  }
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace dpcurator

int main(int argc, char** argv) { return dpcurator::Main(argc, argv); }
