// AIM's final fit on Adult (issue 26: education <-> education-num agreement).
// Runs the recipe as the server does (core RunAim against PgmAimModel, the
// default workload and limits) on adult.data with a SEEDED noise source (a
// bench: no release, no privacy claim, reproducible per seed), prints which
// rounds measured education with education-num and at what sigma, and the
// noisy measurement's mass off the 16 real pairs; then fits Private-PGM to
// the run's measurements for each iteration count, refits that fit under
// each zero_below_sigmas (0: none) and prints the model's mass off those
// pairs, and, against the exact tables of the rows, the mean (and largest)
// TV of all 2-way marginals and the mean TV of the 3-way marginals with the
// label (to see what a choice costs elsewhere).
//
//   build/bench/aim_fit_bench [epsilon=1] [seeds=1,2,3] [iterations=500,1000,2000]
//                             [zero_below_sigmas=0,1,2,3]
//
// A negative zero_below_sigmas -k runs k with the label's pairs exempt
// (pgm::EstimateOptions::zero_exempt_attribute, AIM's fit since issue 38).
// "hard0" counts the (column, label) cells the model puts below half a row
// while the rows hold at least one: the hard zeros real data contradicts.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/data/csv.h"
#include "core/data/discretize.h"
#include "core/pgm/graphical_model.h"
#include "core/privacy/noise_source.h"
#include "core/release/marginals.h"
#include "core/train/aim.h"
#include "proto/convert.h"

#ifndef DPC_SOURCE_DIR
#error "DPC_SOURCE_DIR must be defined by the build"
#endif

namespace dpcurator {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

std::vector<double> Numbers(const char* text) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    double v = 0;
    if (absl::SimpleAtod(part, &v)) out.push_back(v);
  }
  return out;
}

double Tv(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  return 0.5 * (a / a.sum() - b / b.sum()).cwiseAbs().sum();
}

int Main(int argc, char** argv) {
  const double epsilon = argc > 1 ? std::atof(argv[1]) : 1.0;
  const std::vector<double> seeds = Numbers(argc > 2 ? argv[2] : "1,2,3");
  const std::vector<double> iteration_list = Numbers(argc > 3 ? argv[3] : "500,1000,2000");
  const std::vector<double> zero_list = Numbers(argc > 4 ? argv[4] : "0,1,2,3");
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
  const int education = *schema.FindColumn("education");
  const int education_num = *schema.FindColumn("education-num");
  const int label = *schema.label_index();
  auto shape_of = [&](const std::vector<int>& clique) {
    std::vector<int> shape;
    for (int c : clique) shape.push_back(sizes[c]);
    return shape;
  };
  const std::vector<int> pair = {education, education_num};
  const Eigen::VectorXd pair_truth = release::ExactMarginal(pair, shape_of(pair), codes);
  std::vector<std::vector<int>> two_way, three_way;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      two_way.push_back({a, b});
      if (a != label && b != label) three_way.push_back({a, b, label});
    }
  }
  std::vector<Eigen::VectorXd> two_truth, three_truth;
  for (const auto& q : two_way) two_truth.push_back(release::ExactMarginal(q, shape_of(q), codes));
  for (const auto& q : three_way) {
    three_truth.push_back(release::ExactMarginal(q, shape_of(q), codes));
  }
  auto off_pairs = [&](const Eigen::VectorXd& table, bool positive_only) {
    double off = 0;
    for (Eigen::Index i = 0; i < table.size(); ++i) {
      if (pair_truth[i] == 0) off += positive_only ? std::max(table[i], 0.0) : table[i];
    }
    return off;
  };

  const auto workload = train::DefaultAimWorkload(n, label);
  const auto candidates = train::AimCandidates(workload, sizes).value();
  const auto budget =
      train::CalibrateAimBudget(n, train::kDefaultAimRoundsPerColumn * n, epsilon, 1e-5).value();
  std::printf("AIM on Adult, epsilon %g (rho %.5g), %lld rows; real pairs of education x "
              "education-num: %lld of %lld cells\n",
              epsilon, budget.rho, static_cast<long long>(codes.rows()),
              static_cast<long long>((pair_truth.array() > 0).count()),
              static_cast<long long>(pair_truth.size()));
  std::printf("%4s %6s %5s %9s %9s %9s %9s %9s %7s %5s\n", "seed", "iters", "zero",
              "off-pair", "agree%", "2way TV", "2way max", "3way TV", "fit s", "hard0");
  for (double seed : seeds) {
    privacy::SeededNoiseSource noise(static_cast<uint64_t>(seed));
    train::PgmAimModel server_model(sizes, train::kAimRoundFitIterations,
                                    train::kDefaultAimMaxModelCells);
    const auto start = std::chrono::steady_clock::now();
    const train::AimRun run =
        train::RunAim(codes, sizes, candidates, budget, train::kDefaultAimMaxModelCells,
                      privacy::NeighbouringRelation::kAddRemove, &server_model, &noise)
            .value();
    std::printf("seed %g: %zu rounds in %.1f s\n", seed, run.rounds.size(), Seconds(start));
    std::vector<release::NoisyMarginal> measurements = run.one_way;
    for (size_t r = 0; r < run.rounds.size(); ++r) {
      const train::AimRound& round = run.rounds[r];
      measurements.push_back(round.measurement);
      const std::set<int> has(round.clique.begin(), round.clique.end());
      if (has.count(education) && has.count(education_num)) {
        // The measurement's margin on the pair (a 3-way sums out its third).
        Eigen::VectorXd margin = Eigen::VectorXd::Zero(pair_truth.size());
        const std::vector<int> shape = round.measurement.shape;
        for (Eigen::Index cell = 0; cell < round.measurement.counts.size(); ++cell) {
          int64_t rem = cell;
          std::vector<int> code(shape.size());
          for (int k = static_cast<int>(shape.size()) - 1; k >= 0; --k) {
            code[k] = static_cast<int>(rem % shape[k]);
            rem /= shape[k];
          }
          int e = 0, en = 0;
          for (size_t k = 0; k < round.clique.size(); ++k) {
            if (round.clique[k] == education) e = code[k];
            if (round.clique[k] == education_num) en = code[k];
          }
          margin[e * sizes[education_num] + en] += round.measurement.counts[cell];
        }
        std::printf("  round %zu measured (%s) at sigma %.2f: off the real pairs %.0f "
                    "(positive parts %.0f) of %.0f\n",
                    r + 1, absl::StrJoin(round.clique, ",").c_str(),
                    round.measurement.noise_std, off_pairs(margin, false),
                    off_pairs(margin, true), margin.sum());
      }
    }
    for (double iterations : iteration_list) {
      pgm::EstimateOptions base_options;
      base_options.iterations = static_cast<int>(iterations);
      const auto base_start = std::chrono::steady_clock::now();
      const pgm::GraphicalModel base =
          pgm::GraphicalModel::Estimate(sizes, measurements, base_options).value();
      const double base_seconds = Seconds(base_start);
      std::printf("  model: %zu junction-tree cliques, %lld cells (the size limit's unit)\n",
                  base.cliques().size(), static_cast<long long>(base.cells()));
      for (double zero : zero_list) {
        // Each threshold refits from the converged fit (Estimate with
        // zero_below_sigmas runs the same refit after its own iterations),
        // so each row costs only the refit.
        pgm::EstimateOptions options;
        options.iterations = 0;
        options.warm_start = &base;
        options.zero_below_sigmas = std::abs(zero);
        if (zero < 0) options.zero_exempt_attribute = label;
        const auto fit_start = std::chrono::steady_clock::now();
        const pgm::GraphicalModel model =
            pgm::GraphicalModel::Estimate(sizes, measurements, options).value();
        const double fit_seconds = base_seconds + Seconds(fit_start);
        const Eigen::VectorXd fitted = model.Marginal(pair);
        for (size_t c = 0; c < model.cliques().size(); ++c) {
          const Eigen::VectorXd& mu = model.clique_marginal(static_cast<int>(c));
          if (!mu.allFinite() || !(mu.sum() > 0)) {
            std::printf("  clique %zu (%s) of %zu: not finite or empty (sum %g)\n", c,
                        absl::StrJoin(model.cliques()[c], ",").c_str(), model.cliques().size(),
                        mu.sum());
          }
        }
        double tv2 = 0, tv3 = 0, worst2 = 0;
        int hard_zeros = 0;
        for (size_t k = 0; k < two_way.size(); ++k) {
          const Eigen::VectorXd marginal = model.Marginal(two_way[k]);
          if (two_way[k][0] == label || two_way[k][1] == label) {
            hard_zeros += ((marginal.array() < 0.5) && (two_truth[k].array() >= 1.0)).count();
          }
          const double tv = Tv(marginal, two_truth[k]);
          tv2 += tv;
          worst2 = std::max(worst2, tv);
        }
        for (size_t k = 0; k < three_way.size(); ++k) {
          tv3 += Tv(model.Marginal(three_way[k]), three_truth[k]);
        }
        std::printf("%4g %6g %5g %9.0f %9.2f %9.4f %9.4f %9.4f %7.2f %5d\n", seed, iterations,
                    zero, off_pairs(fitted, false),
                    100.0 * (1.0 - off_pairs(fitted, false) / fitted.sum()), tv2 / two_way.size(),
                    worst2, tv3 / three_way.size(), fit_seconds, hard_zeros);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace dpcurator

int main(int argc, char** argv) { return dpcurator::Main(argc, argv); }
