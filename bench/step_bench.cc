// The dp_sgd session step's speed on the binary benchmark's shapes (issue
// 39): steps per second of release::DpSgdKind::Run, the engine of every
// dp_sgd step the server answers (plan::ComputeSessionStep: forward,
// per-example norms, clipped sum, grid Gaussian noise, the divisor), on
// batches of 2,142-wide one-hot rows (bench/binary.sh's MIMIC stand-in),
// next to the machine's dgemm peak measured in the same process.
//
//   build/bench/step_bench [--quick] [--seconds S] [--only TEXT]
//
// --quick: short runs of batch 512 alone (a smoke run); --only: the rows
// whose "network/hidden/batch" contains TEXT (e.g. autoencoder/64-32-64/2048).
//
// One row per network and batch: steps/s; the shares of the step spent in
// the clipped sum (DpSgdKind::ClippedGradientSum) and in drawing the noise
// (SecureNoiseSource, as the server), each timed apart; GFLOP/s of the
// step's GEMMs (their multiply-adds x 2, divided by the whole step's time,
// so a lower bound of the GEMMs' own rate); and that GFLOP/s as a
// percentage of the dgemm peak: square 1024 products through OpenBLAS's
// cblas_dgemm (one BLAS thread) on every step thread at once, measured
// before the table and again before each row (the machine is shared; the
// row's ratio uses the row's peak). Eigen's own
// double product, the path the step used before issue 39, is shown too.
// The rows are random one-hot pairs, a benchmark input, never released.

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/nn/mlp.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/noise_source.h"
#include "core/release/dp_sgd.h"
#include "core/util/public_rng.h"
#include "core/util/shard_pool.h"

namespace dpcurator {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The binary stand-in's width: 1,071 binary columns, one-hot.
constexpr int kBinaryColumns = 1071;
// Threads one step may use (the server's bound: core/util/shard_pool.h).
constexpr int kThreads = 2;

// `rows` one-hot pairs with per-column prevalences in (0.02, 0.5).
release::EncodedRows BinaryRows(int rows, uint64_t seed) {
  release::EncodedRows out;
  out.layout.categorical_dim = 2 * kBinaryColumns;
  for (int c = 0; c < kBinaryColumns; ++c) {
    out.layout.categorical.push_back({c, 2 * c, 2});
  }
  out.features = Eigen::MatrixXd::Zero(rows, 2 * kBinaryColumns);
  out.labels = Eigen::VectorXi::Zero(rows);
  out.num_classes = 1;
  PublicRng rng(seed);
  std::vector<double> prevalence(kBinaryColumns);
  for (double& p : prevalence) p = 0.02 + 0.48 * rng.Uniform();
  for (int i = 0; i < rows; ++i) {
    for (int c = 0; c < kBinaryColumns; ++c) {
      out.features(i, 2 * c + (rng.Uniform() < prevalence[c] ? 1 : 0)) = 1.0;
    }
  }
  return out;
}

// GFLOP/s of square n x n double products on `threads` threads at once
// (each its own operands), through cblas_dgemm or Eigen's own product.
double DgemmPeak(int n, double seconds, bool blas) {
  ShardPool pool(kThreads);
  std::vector<Eigen::MatrixXd> a(kThreads), b(kThreads), c(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    a[t] = Eigen::MatrixXd::Random(n, n);
    b[t] = Eigen::MatrixXd::Random(n, n);
    c[t] = Eigen::MatrixXd::Zero(n, n);
  }
  auto multiply = [&](int t) {
    if (blas) {
      cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a[t].data(), n,
                  b[t].data(), n, 0.0, c[t].data(), n);
    } else {
      c[t].noalias() = a[t] * b[t];
    }
  };
  int reps = 0;
  const Clock::time_point start = Clock::now();
  double elapsed = 0;
  do {
    pool.Run(kThreads, multiply);
    ++reps;
    elapsed = SecondsSince(start);
  } while (elapsed < seconds);
  return 2.0 * n * n * static_cast<double>(n) * reps * kThreads / elapsed / 1e9;
}

struct Row {
  std::string name;  // "autoencoder" or "critic"
  std::vector<int> hidden;
  release::DpSgdLoss loss;
  int batch;
};

// Multiply-adds of one step's GEMMs: the forward X W per layer, dH W^T
// below every layer but the first, and the clipped sum X^T diag(c) dH per
// layer (nn::AddClippedGradientSum).
double StepMultiplyAdds(const release::DpSgdKind::Params& params, int width, int rows) {
  std::vector<int> widths = {width};
  for (int h : params.hidden) widths.push_back(h);
  widths.push_back(release::DpSgdKind::OutputWidth(params, width));
  double total = 0;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const double layer = static_cast<double>(rows) * widths[l] * widths[l + 1];
    total += l == 0 ? 2 * layer : 3 * layer;
  }
  return total;
}

struct Timing {
  double steps_per_second = 0;
  double noise_share = 0;
  double sum_share = 0;
  bool ok = false;
};

Timing TimeStep(const Row& row, double seconds) {
  release::DpSgdKind::Params params;
  params.hidden = row.hidden;
  params.activation = nn::Activation::kLeakyRelu;
  params.leaky_relu_slope = 0.2;
  params.loss = row.loss;
  params.clip_norm = 1.0;
  params.expected_batch_size = row.batch;
  const int width = 2 * kBinaryColumns;
  nn::MlpOptions options = release::DpSgdKind::Network(params, width);
  options.seed = 3;
  auto network = nn::Mlp::Create(options);
  if (!network.ok()) return {};
  const release::EncodedRows batch = BinaryRows(row.batch, 11);
  auto noise = privacy::SecureNoiseSource::Create();
  if (!noise.ok()) return {};
  const auto relation = privacy::NeighbouringRelation::kAddRemove;
  constexpr double kNoiseMultiplier = 1.0;
  auto step = [&] {
    return release::DpSgdKind::Run(params, batch, relation, kNoiseMultiplier,
                                   network->parameters(), noise->get())
        .ok();
  };
  // A short run sizes the timed one to about `seconds`.
  Clock::time_point start = Clock::now();
  if (!step()) return {};
  const double per_step = std::max(1e-5, SecondsSince(start));
  const int steps = std::max(3, static_cast<int>(seconds / per_step));
  start = Clock::now();
  for (int s = 0; s < steps; ++s) {
    if (!step()) return {};
  }
  Timing timing;
  timing.steps_per_second = steps / SecondsSince(start);
  // The noise alone, on a vector of the answer's length.
  auto grid = release::DpSgdKind::NoiseFor(params, relation, kNoiseMultiplier, width);
  if (!grid.ok()) return {};
  Eigen::VectorXd values = Eigen::VectorXd::Zero(network->num_parameters());
  start = Clock::now();
  for (int s = 0; s < steps; ++s) {
    if (!privacy::AddGridNoise(*grid, values, noise->get()).ok()) return {};
  }
  timing.noise_share = SecondsSince(start) / steps * timing.steps_per_second;
  // The clipped sum alone (DpSgdKind::ClippedGradientSum on the batch's rows).
  const Eigen::MatrixXd matrix = release::DpSgdRows(batch);
  Eigen::VectorXd sum;
  start = Clock::now();
  for (int s = 0; s < steps; ++s) {
    nn::PerExampleWorkspace workspace;  // one per step, as Run's
    if (!release::DpSgdKind::ClippedGradientSum(params, *network, matrix, &workspace, &sum)
             .ok()) {
      return {};
    }
  }
  timing.sum_share = SecondsSince(start) / steps * timing.steps_per_second;
  timing.ok = true;
  return timing;
}

int Main(int argc, char** argv) {
  double seconds = 2.0;
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
      seconds = 0.2;
    } else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: step_bench [--quick] [--seconds S] [--only TEXT]\n");
      return 2;
    }
  }
  // One BLAS thread per caller (core/nn/gemm.h): the step threads are ours.
  openblas_set_num_threads(1);
  const double peak_seconds = std::min(seconds, 1.0);
  const double dgemm = DgemmPeak(1024, peak_seconds, true);
  const double eigen = DgemmPeak(1024, peak_seconds, false);
  std::printf(
      "dp_sgd step on %d-wide one-hot rows; dgemm peak (OpenBLAS, square 1024 on %d threads)"
      " %.1f GFLOP/s, Eigen's double product %.1f GFLOP/s\n\n",
      2 * kBinaryColumns, kThreads, dgemm, eigen);
  std::printf("%-12s %-13s %6s %9s %6s %6s %9s %10s %7s\n", "network", "hidden", "batch",
              "steps/s", "sum", "noise", "GEMM GF/s", "dgemm GF/s", "ratio");
  std::vector<Row> rows;
  for (int width : {64, 128}) {
    for (int batch : {512, 2048, 4096}) {
      if (quick && batch != 512) continue;
      rows.push_back({"autoencoder", {width, width / 2, width},
                      release::DpSgdLoss::kReconstructionBce, batch});
    }
    rows.push_back({"critic", {width}, release::DpSgdLoss::kWganCriticReal, quick ? 512 : 2048});
  }
  for (const Row& row : rows) {
    const std::string label =
        absl::StrCat(row.name, "/", absl::StrJoin(row.hidden, "-"), "/", row.batch);
    if (label.find(only) == std::string::npos) continue;
    const double peak = DgemmPeak(1024, peak_seconds / 4, true);
    const Timing timing = TimeStep(row, seconds);
    if (!timing.ok) {
      std::printf("%-12s failed\n", row.name.c_str());
      return 1;
    }
    release::DpSgdKind::Params params;
    params.hidden = row.hidden;
    params.loss = row.loss;
    const double gflops =
        2.0 * StepMultiplyAdds(params, 2 * kBinaryColumns, row.batch) *
        timing.steps_per_second / 1e9;
    std::printf("%-12s %-13s %6d %9.2f %5.0f%% %5.0f%% %9.1f %10.1f %6.1f%%\n",
                row.name.c_str(), absl::StrJoin(row.hidden, "-").c_str(), row.batch,
                timing.steps_per_second, 100.0 * timing.sum_share, 100.0 * timing.noise_share,
                gflops, peak, 100.0 * gflops / peak);
  }
  std::printf("\nratio = GEMM GF/s / dgemm GF/s measured just before the row; sum, noise = "
              "share of the step's time in the clipped sum alone and in drawing the grid "
              "Gaussian alone\n");
  return 0;
}

}  // namespace
}  // namespace dpcurator

int main(int argc, char** argv) { return dpcurator::Main(argc, argv); }
