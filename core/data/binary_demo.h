#ifndef DPCURATOR_CORE_DATA_BINARY_DEMO_H_
#define DPCURATOR_CORE_DATA_BINARY_DEMO_H_

// A public stand-in for the binary experiment of DP-auto-GAN (seed 002,
// papers/dp-auto-gan.md §3.3): MIMIC-III's 1,071 binary diagnosis features
// are credentialed, so the benchmark generates rows with the same shape from
// a declared, seeded noisy-OR Bayesian network (docs/demo-data.md,
// "The binary stand-in").
//
// The network: L hidden conditions c_l ~ Bernoulli(pi_l), never released;
// each feature j has a leak lambda_j, one to three condition parents and,
// for about a quarter of the features, one earlier feature as a parent, and
//   P(x_j = 1 | parents) = 1 - (1 - lambda_j) * prod_{active parents p} (1 - w_jp)
// (the noisy-OR of Pearl 1988, §4.3.2). Features that share a condition are
// correlated, so each feature is predictable from the others to a varying
// degree (the dimension-wise prediction has something to find), and the
// prevalences are heavy-tailed like diagnosis codes: most features are rare,
// a few are common.

#include <cstdint>
#include <utility>
#include <vector>

#include "core/data/schema.h"
#include "core/data/table.h"

namespace dpcurator::data {

// MIMIC-III's width in the paper.
inline constexpr int kBinaryDemoFeatures = 1071;
// The network is part of the dataset's public description: one fixed seed.
inline constexpr uint64_t kBinaryDemoStructureSeed = 1071002;

struct BinaryDemoNetwork {
  // pi_l, one per hidden condition.
  std::vector<double> condition_prevalence;
  // lambda_j, one per feature.
  std::vector<double> leak;
  // (condition l, weight w) pairs of feature j.
  std::vector<std::vector<std::pair<int, double>>> condition_parents;
  // (earlier feature j' < j, weight w), or (-1, 0) when none.
  std::vector<std::pair<int, double>> feature_parent;

  int num_features() const { return static_cast<int>(leak.size()); }
};

// The network over `num_features` features (at least 2) with 40 hidden
// conditions, reproducible from `structure_seed`.
BinaryDemoNetwork MakeBinaryDemoNetwork(int num_features = kBinaryDemoFeatures,
                                        uint64_t structure_seed = kBinaryDemoStructureSeed);

// Columns "d0001", "d0002", ... each categorical with levels "0", "1"; no
// label (the experiment is unlabelled).
Schema BinaryDemoSchema(int num_features = kBinaryDemoFeatures);

// `num_rows` rows by ancestral sampling (conditions, then features in index
// order), reproducible from `seed`; cells hold the level index 0 or 1.
Table GenerateBinaryDemoTable(const BinaryDemoNetwork& network, int64_t num_rows, uint64_t seed);

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_BINARY_DEMO_H_
