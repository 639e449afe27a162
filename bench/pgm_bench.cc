// Speed of the Private-PGM estimator (core/pgm) on Adult's discrete domain
// (the bins MST uses), in the pattern AIM runs it (issue 26): every 1-way
// marginal, then rounds that each add one marginal (a 2-way, or a 3-way with
// the label) and re-estimate from the previous model (warm start). Marginals
// are the exact counts plus public-RNG Gaussian noise: a timing bench, no
// release and no privacy claim. Prints one line per round and a summary.
//
//   build/bench/pgm_bench [rounds=100] [iterations_per_round=100] [sigma=50]
//                         [final_iterations=1000] [max_cells=1000000]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

#include "core/data/csv.h"
#include "core/data/discretize.h"
#include "core/pgm/graphical_model.h"
#include "core/release/marginals.h"
#include "core/util/public_rng.h"
#include "proto/convert.h"

#ifndef DPC_SOURCE_DIR
#error "DPC_SOURCE_DIR must be defined by the build"
#endif

namespace dpcurator {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 100;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 100;
  const double sigma = argc > 3 ? std::atof(argv[3]) : 50.0;
  const int final_iterations = argc > 4 ? std::atoi(argv[4]) : 1000;
  const int64_t max_cells = argc > 5 ? std::atoll(argv[5]) : 1'000'000;
  auto proto = ReadSchemaFile(DPC_SOURCE_DIR "/schemas/adult.schema.json");
  if (!proto.ok()) return std::fprintf(stderr, "%s\n", proto.status().ToString().c_str()), 1;
  const data::Schema schema = SchemaFromProto(*proto).value();
  auto train = data::ReadCsvFile(schema, DPC_SOURCE_DIR "/../shared/data/adult/adult.data",
                                 data::CsvOptions{});
  if (!train.ok()) return std::fprintf(stderr, "%s\n", train.status().ToString().c_str()), 1;
  const data::Discretizer domain = data::Discretizer::Create(schema).value();
  const Eigen::MatrixXi codes = domain.Encode(*train);
  const int n = schema.num_columns();
  std::vector<int> sizes;
  for (int c = 0; c < n; ++c) sizes.push_back(domain.domain_size(c));
  const int label = n - 1;
  PublicRng rng(1);
  auto measure = [&](const std::vector<int>& clique) {
    release::NoisyMarginal m;
    m.clique = clique;
    for (int v : clique) m.shape.push_back(sizes[v]);
    m.counts = release::ExactMarginal(clique, m.shape, codes);
    for (Eigen::Index i = 0; i < m.counts.size(); ++i) m.counts[i] += sigma * rng.Normal();
    m.noise_std = sigma;
    return m;
  };
  std::printf("Private-PGM on Adult's domain: %d columns (sizes", n);
  for (int s : sizes) std::printf(" %d", s);
  std::printf("), %lld rows, sigma %g, %d iterations per round, model limit %lld cells\n",
              static_cast<long long>(codes.rows()), sigma, iterations,
              static_cast<long long>(max_cells));
  std::vector<release::NoisyMarginal> measurements;
  std::vector<std::vector<int>> cliques;
  for (int c = 0; c < n; ++c) {
    measurements.push_back(measure({c}));
    cliques.push_back({c});
  }
  pgm::EstimateOptions options;
  options.iterations = iterations;
  options.max_cells = max_cells;
  auto start = std::chrono::steady_clock::now();
  pgm::GraphicalModel model = pgm::GraphicalModel::Estimate(sizes, measurements, options).value();
  std::printf("%6s %8s %10s %10s  %s\n", "round", "cliques", "cells", "ms", "added");
  std::printf("%6d %8zu %10lld %10.1f  (1-way marginals)\n", 0, model.cliques().size(),
              static_cast<long long>(model.cells()), 1e3 * Seconds(start));
  double estimate_seconds = Seconds(start);
  double cells_check_seconds = 0.0;
  std::set<std::vector<int>> taken;
  for (int round = 1; round <= rounds; ++round) {
    // A candidate the size limit admits (as AIM filters), chosen at random:
    // AIM's choice depends on the data, its cost on the model does not.
    std::vector<int> pick;
    for (int attempt = 0; attempt < 200 && pick.empty(); ++attempt) {
      std::vector<int> c;
      const int a = static_cast<int>(rng.UniformInt(n));
      const int b = static_cast<int>(rng.UniformInt(n));
      if (a == b) continue;
      c = {std::min(a, b), std::max(a, b)};
      if (rng.Uniform() < 0.3 && a != label && b != label) c.push_back(label);
      std::sort(c.begin(), c.end());
      if (taken.count(c)) continue;
      cliques.push_back(c);
      const auto check = std::chrono::steady_clock::now();
      const int64_t cells = pgm::JunctionTreeCells(sizes, cliques);
      cells_check_seconds += Seconds(check);
      cliques.pop_back();
      if (cells <= max_cells) pick = c;
    }
    if (pick.empty()) break;
    taken.insert(pick);
    cliques.push_back(pick);
    measurements.push_back(measure(pick));
    options.warm_start = &model;
    start = std::chrono::steady_clock::now();
    pgm::GraphicalModel next = pgm::GraphicalModel::Estimate(sizes, measurements, options).value();
    const double s = Seconds(start);
    estimate_seconds += s;
    model = std::move(next);
    std::printf("%6d %8zu %10lld %10.1f  {", round, model.cliques().size(),
                static_cast<long long>(model.cells()), 1e3 * s);
    for (size_t k = 0; k < pick.size(); ++k) {
      std::printf("%s%s", k ? ", " : "", schema.column(pick[k]).name.c_str());
    }
    std::printf("}\n");
  }
  options.warm_start = &model;
  options.iterations = final_iterations;
  start = std::chrono::steady_clock::now();
  pgm::GraphicalModel final_model =
      pgm::GraphicalModel::Estimate(sizes, measurements, options).value();
  const double final_seconds = Seconds(start);
  // AIM scores every candidate of its workload each round on the current
  // model: all 2-way marginals and the 3-way ones with the label.
  start = std::chrono::steady_clock::now();
  int queries = 0;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      queries += final_model.Marginal({a, b}).size() > 0;
      if (a != label && b != label) queries += final_model.Marginal({a, b, label}).size() > 0;
    }
  }
  const double query_seconds = Seconds(start);
  start = std::chrono::steady_clock::now();
  const Eigen::MatrixXi sample = final_model.Sample(codes.rows(), 7);
  const double sample_seconds = Seconds(start);
  std::printf("\nrounds' estimates %.2f s (%d iterations each), JunctionTreeCells checks %.3f s, "
              "final estimate %.2f s (%d iterations), %lld rows sampled in %.3f s\n",
              estimate_seconds, iterations, cells_check_seconds, final_seconds, final_iterations,
              static_cast<long long>(sample.rows()), sample_seconds);
  std::printf("the workload's %d marginals (2-way, 3-way with the label) of the final model in "
              "%.3f s\n",
              queries, query_seconds);
  return 0;
}

}  // namespace
}  // namespace dpcurator

int main(int argc, char** argv) { return dpcurator::Main(argc, argv); }
