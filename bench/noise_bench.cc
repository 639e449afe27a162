// Throughput of the privacy noise: exact discrete Gaussian and Laplace
// samplers (core/privacy/discrete_noise.h) at small and at grid scales (the
// grid puts every release's scale at 2^20 to 2^21 units), from the seeded
// test source and from OpenSSL's CSPRNG, the full grid path on a vector
// (validate, snap, draw), and the old floating-point Box-Muller that the
// samplers replaced, for comparison. Reported as items_per_second (samples
// per second).
//
// Usage: noise_bench [--benchmark_filter=...]

#include <cmath>
#include <cstdint>
#include <memory>
#include <numbers>

#include "Eigen/Core"
#include "benchmark/benchmark.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/noise_source.h"

namespace {

using dpcurator::privacy::NoiseSource;

std::unique_ptr<NoiseSource> MakeSource(int64_t secure) {
  if (secure != 0) return dpcurator::privacy::SecureNoiseSource::Create().value();
  return std::make_unique<dpcurator::privacy::SeededNoiseSource>(42);
}

// state.range(0): integer scale; state.range(1): 1 for the secure source.
void BM_DiscreteGaussian(benchmark::State& state) {
  auto noise = MakeSource(state.range(1));
  const auto sigma = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(dpcurator::privacy::DiscreteGaussian(noise.get(), sigma));
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_DiscreteLaplace(benchmark::State& state) {
  auto noise = MakeSource(state.range(1));
  const auto scale = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(dpcurator::privacy::DiscreteLaplace(noise.get(), scale));
  }
  state.SetItemsProcessed(state.iterations());
}

// The whole release path on a 4096-entry vector: grid, validation,
// snapping and one discrete Gaussian per entry.
void BM_AddGridGaussianNoise(benchmark::State& state) {
  auto noise = MakeSource(state.range(1));
  const Eigen::Index size = state.range(0);
  Eigen::VectorXd values = Eigen::VectorXd::LinSpaced(size, -3.0, 3.0);
  for (auto _ : state) {
    auto spec = dpcurator::privacy::AddGridGaussianNoise(values, 1.1, std::sqrt(2.0), noise.get());
    benchmark::DoNotOptimize(spec);
    values = Eigen::VectorXd::LinSpaced(size, -3.0, 3.0);
  }
  state.SetItemsProcessed(state.iterations() * size);
}

// The replaced floating-point sampler (Box-Muller on 53-bit uniforms, both
// outputs used), written out here only as a baseline: releases must never
// use it (Mironov 2012).
void BM_ContinuousBoxMuller(benchmark::State& state) {
  auto noise = MakeSource(state.range(1));
  bool has_spare = false;
  double spare = 0.0;
  for (auto _ : state) {
    double x;
    if (has_spare) {
      x = spare;
      has_spare = false;
    } else {
      const double radius = std::sqrt(-2.0 * std::log(noise->UniformOpen()));
      const double angle = 2.0 * std::numbers::pi * noise->UniformOpen();
      spare = radius * std::sin(angle);
      has_spare = true;
      x = radius * std::cos(angle);
    }
    benchmark::DoNotOptimize(x);
  }
  state.SetItemsProcessed(state.iterations());
}

constexpr int64_t kGridLow = int64_t{1} << 20;
constexpr int64_t kGridHigh = (int64_t{1} << 21) - 1;

BENCHMARK(BM_DiscreteGaussian)
    ->ArgNames({"sigma", "secure"})
    ->ArgsProduct({{1, 7, kGridLow, kGridHigh}, {0, 1}});
BENCHMARK(BM_DiscreteLaplace)
    ->ArgNames({"scale", "secure"})
    ->ArgsProduct({{1, 7, kGridLow, kGridHigh}, {0, 1}});
BENCHMARK(BM_AddGridGaussianNoise)->ArgNames({"size", "secure"})->ArgsProduct({{4096}, {0, 1}});
BENCHMARK(BM_ContinuousBoxMuller)->ArgNames({"secure"})->Args({0})->Args({1});

}  // namespace

BENCHMARK_MAIN();
