// AIM on the generated steward table (issue 38): the recipe as the server runs
// it (core RunAim against PgmAimModel, the default workload and limits) with a
// SEEDED noise source (a bench: no release, no privacy claim, reproducible per
// seed), then the client's final fit, sampling and the project's evaluator
// (train on synthetic, test on a held-out generated split). Prints, per seed,
// the rounds by kind (1-way, 2-way, 3-way; with the label), whether the label
// was measured with a feature, and each classifier's TSTR ROC-AUC beside
// train-on-real.
//
//   build/bench/steward_aim [epsilon=1] [seeds=1,2,3,4,5] [rows=2000] [paper]
//
// "paper" runs without the label rounds (the budget of Alg. 2 alone), the
// comparison of docs/benchmarks.md.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/data/discretize.h"
#include "core/data/steward.h"
#include "core/eval/evaluator.h"
#include "core/pgm/graphical_model.h"
#include "core/privacy/noise_source.h"
#include "core/train/aim.h"

namespace dpcurator {
namespace {

int Main(int argc, char** argv) {
  const double epsilon = argc > 1 ? std::atof(argv[1]) : 1.0;
  std::vector<int> seeds;
  for (absl::string_view part :
       absl::StrSplit(argc > 2 ? argv[2] : "1,2,3,4,5", ',', absl::SkipEmpty())) {
    int v = 0;
    if (absl::SimpleAtoi(part, &v)) seeds.push_back(v);
  }
  const int64_t rows = argc > 3 ? std::atoll(argv[3]) : data::kStewardDefaultRows;
  const bool paper = argc > 4 && std::string(argv[4]) == "paper";
  const data::Schema schema = data::StewardSchema();
  // The demo's seeds (client/commands/demo.cc): training rows, held-out rows.
  const data::Table train = data::GenerateStewardTable(rows, 20261122);
  const data::Table test = data::GenerateStewardTable(std::max<int64_t>(rows / 4, 1000), 424242);
  const data::Discretizer domain = data::Discretizer::Create(schema).value();
  const Eigen::MatrixXi codes = domain.Encode(train);
  const int n = schema.num_columns();
  const int label = *schema.label_index();
  std::vector<int> sizes;
  for (int c = 0; c < n; ++c) sizes.push_back(domain.domain_size(c));
  const auto candidates =
      train::AimCandidates(train::DefaultAimWorkload(n, label), sizes).value();
  const int label_rounds = paper ? -1 : train::AimLabelForRounds(candidates, label);
  const auto budget = train::CalibrateAimBudget(n, train::kDefaultAimRoundsPerColumn * n, epsilon,
                                                1e-5, label_rounds)
                          .value();
  std::printf("AIM on the steward table, epsilon %g (rho %.5g), %lld rows, label %s, %s\n",
              epsilon, budget.rho, static_cast<long long>(rows), schema.column(label).name.c_str(),
              paper ? "without label rounds" : "with label rounds");
  bool real_printed = false;
  for (int seed : seeds) {
    privacy::SeededNoiseSource noise(static_cast<uint64_t>(seed));
    train::PgmAimModel server_model(sizes, train::kAimRoundFitIterations,
                                    train::kDefaultAimMaxModelCells);
    const train::AimRun run =
        train::RunAim(codes, sizes, candidates, budget, train::kDefaultAimMaxModelCells,
                      privacy::NeighbouringRelation::kAddRemove, &server_model, &noise)
            .value();
    int by_size[4] = {0, 0, 0, 0};
    int with_label = 0;
    std::vector<std::string> label_cliques;
    std::vector<release::NoisyMarginal> measurements = run.one_way;
    for (const train::AimRound& round : run.rounds) {
      measurements.push_back(round.measurement);
      ++by_size[std::min<size_t>(round.clique.size(), 3)];
      bool has_label = false;
      for (int c : round.clique) has_label = has_label || c == label;
      if (has_label && round.clique.size() > 1) {
        ++with_label;
        std::vector<std::string> names;
        for (int c : round.clique) names.push_back(schema.column(c).name);
        label_cliques.push_back(absl::StrCat("(", absl::StrJoin(names, ","), ")"));
      }
    }
    pgm::EstimateOptions options;
    options.iterations = train::kAimFinalFitIterations;
    options.zero_below_sigmas = train::kAimFinalFitZeroBelowSigmas;
    options.max_cells = train::kDefaultAimMaxModelCells;
    const pgm::GraphicalModel model =
        pgm::GraphicalModel::Estimate(sizes, measurements, options).value();
    const data::Table synthetic =
        domain.Decode(model.Sample(rows, 7), 7 ^ 0x9e3779b97f4a7c15ULL);
    const eval::EvalReport report =
        eval::Evaluate(schema, synthetic, test, eval::EvalOptions{},
                       real_printed ? nullptr : &train)
            .value();
    std::printf("seed %d: %zu rounds (1-way %d, 2-way %d, 3-way %d), %d with the label: %s\n",
                seed, run.rounds.size(), by_size[1], by_size[2], by_size[3], with_label,
                absl::StrJoin(label_cliques, " ").c_str());
    for (const auto& row : report.utility) {
      std::printf("  %-20s train %-9s ROC-AUC %.4f\n", row.classifier.c_str(),
                  row.train_source.c_str(), row.roc_auc);
    }
    std::fflush(stdout);
    real_printed = true;
  }
  return 0;
}

}  // namespace
}  // namespace dpcurator

int main(int argc, char** argv) { return dpcurator::Main(argc, argv); }
