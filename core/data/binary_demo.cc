#include "core/data/binary_demo.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_format.h"
#include "core/util/public_rng.h"

namespace dpcurator::data {
namespace {

constexpr int kConditions = 40;

// exp of a uniform draw on [log lo, log hi]: spreads prevalences over orders
// of magnitude, as diagnosis-code frequencies are.
double LogUniform(PublicRng* rng, double lo, double hi) {
  return std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * rng->Uniform());
}

}  // namespace

BinaryDemoNetwork MakeBinaryDemoNetwork(int num_features, uint64_t structure_seed) {
  PublicRng rng(structure_seed);
  BinaryDemoNetwork network;
  network.condition_prevalence.resize(kConditions);
  for (double& pi : network.condition_prevalence) pi = LogUniform(&rng, 0.02, 0.35);
  network.leak.resize(num_features);
  network.condition_parents.resize(num_features);
  network.feature_parent.assign(num_features, {-1, 0.0});
  for (int j = 0; j < num_features; ++j) {
    // Background rate: median about 0.3%, from 0.01% to 3%.
    network.leak[j] = LogUniform(&rng, 1e-4, 0.03);
    const int parents = 1 + static_cast<int>(rng.UniformInt(3));
    // One feature in 25 is a "hub" that a condition almost always causes
    // (hypertension-like codes, prevalence up to the condition's own).
    const bool hub = rng.UniformInt(25) == 0;
    for (int p = 0; p < parents; ++p) {
      const int condition = static_cast<int>(rng.UniformInt(kConditions));
      const double weight = hub && p == 0 ? 0.6 + 0.35 * rng.Uniform() : LogUniform(&rng, 0.01, 0.5);
      network.condition_parents[j].push_back({condition, weight});
    }
    if (j > 0 && rng.UniformInt(4) == 0) {
      network.feature_parent[j] = {static_cast<int>(rng.UniformInt(j)), 0.2 + 0.5 * rng.Uniform()};
    }
  }
  return network;
}

Schema BinaryDemoSchema(int num_features) {
  Schema::Builder builder;
  for (int j = 0; j < num_features; ++j) {
    builder.AddCategorical(absl::StrFormat("d%04d", j + 1), {"0", "1"});
  }
  return *builder.Build();  // Fixed names and levels: valid for any width >= 1.
}

Table GenerateBinaryDemoTable(const BinaryDemoNetwork& network, int64_t num_rows, uint64_t seed) {
  PublicRng rng(seed);
  const int d = network.num_features();
  Table table;
  table.cells.resize(num_rows, d);
  std::vector<uint8_t> condition(network.condition_prevalence.size());
  std::vector<uint8_t> feature(d);
  for (int64_t i = 0; i < num_rows; ++i) {
    for (size_t l = 0; l < condition.size(); ++l) {
      condition[l] = rng.Uniform() < network.condition_prevalence[l];
    }
    for (int j = 0; j < d; ++j) {
      // Noisy-OR: the feature stays 0 only if the leak and every active
      // parent all fail to switch it on.
      double off = 1.0 - network.leak[j];
      for (const auto& [l, w] : network.condition_parents[j]) {
        if (condition[l]) off *= 1.0 - w;
      }
      const auto& [parent, w] = network.feature_parent[j];
      if (parent >= 0 && feature[parent]) off *= 1.0 - w;
      feature[j] = rng.Uniform() >= off;
      table.cells(i, j) = feature[j];
    }
  }
  return table;
}

}  // namespace dpcurator::data
