// AIM's core (core/train/aim.h; docs/privacy.md 2.12): the budget and its
// one zcdp event, the workload's candidates and weights, the score's
// sensitivity by brute force on neighbouring datasets, the schedule's exact
// stop at rho in conservative arithmetic, annealing, the size filter, and
// the private loop's totality.

#include "core/train/aim.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/privacy/event_codec.h"
#include "core/privacy/rdp.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::train {
namespace {

using privacy::NeighbouringRelation;

// The real zCDP cost of a schedule's parameters, in long double.
long double RealCost(double noise_multiplier, double selection_epsilon) {
  const long double s = noise_multiplier;
  const long double e = selection_epsilon;
  return 1.0L / (2.0L * s * s) + e * e / 8.0L;
}

long double RunCost(const AimBudget& b, const AimRun& run) {
  long double total = RealCost(b.one_way_noise_multiplier, 0.0);
  for (const AimRound& r : run.rounds) total += RealCost(r.noise_multiplier, r.selection_epsilon);
  return total;
}

TEST(AimBudgetTest, CalibrationPinsRho) {
  // rho with min over the ledger's orders of alpha rho + log1p(-1/alpha)
  // - log(delta alpha) / (alpha - 1) = epsilon, solved by hand (bisection in
  // Python over the same order grid): 0.0305527429 at (1, 1e-5),
  // 0.00154178966 at (0.2, 1e-5).
  const AimBudget one = CalibrateAimBudget(15, 240, 1.0, 1e-5).value();
  EXPECT_LE(one.rho, 0.0305527430);
  EXPECT_GE(one.rho, 0.0305527429 * (1 - 2e-6));
  const AimBudget fifth = CalibrateAimBudget(15, 240, 0.2, 1e-5).value();
  EXPECT_LE(fifth.rho, 0.00154178967);
  EXPECT_GE(fifth.rho, 0.00154178966 * (1 - 2e-6));
  // Alg. 2's initial parameters: each round rho / T, 0.9 / 0.1 split; the
  // 1-way release costs d of them at 0.9.
  const double rho = one.rho;
  EXPECT_NEAR(1.0 / (2 * one.noise_multiplier * one.noise_multiplier), 0.9 * rho / 240, 1e-15);
  EXPECT_NEAR(one.selection_epsilon * one.selection_epsilon / 8, 0.1 * rho / 240, 1e-15);
  EXPECT_NEAR(1.0 / (2 * one.one_way_noise_multiplier * one.one_way_noise_multiplier),
              15 * 0.9 * rho / 240, 1e-14);
  // One event: RDP alpha rho at every order.
  const privacy::PrivacyEvent event = AimEvent(one).value();
  const std::vector<double> rdp = privacy::ComputeRdp(event, {{2.0, 10.0, 1024.0}}).value();
  EXPECT_DOUBLE_EQ(rdp[0], 2 * rho);
  EXPECT_DOUBLE_EQ(rdp[1], 10 * rho);
  EXPECT_DOUBLE_EQ(rdp[2], 1024 * rho);
  EXPECT_EQ(privacy::EncodeEvent(privacy::PrivacyEvent::Zcdp(0.125).value()), "zcdp(0.125)");
  const auto decoded = privacy::DecodeEvent("zcdp(0.125)").value();
  EXPECT_EQ(privacy::ComputeRdp(decoded, {{3.0}}).value()[0], 0.375);
  EXPECT_FALSE(privacy::DecodeEvent("zcdp(-1)").ok());
  EXPECT_TRUE(event.IsValidFor(NeighbouringRelation::kReplaceOne));
}

TEST(AimBudgetTest, RefusesShapes) {
  EXPECT_FALSE(AimBudgetForRho(0, 16, 0.1).ok());
  EXPECT_FALSE(AimBudgetForRho(kMaxAimWideColumns + 1, 4096, 0.1).ok());
  EXPECT_FALSE(AimBudgetForRho(15, 14, 0.1).ok());  // rounds < columns
  EXPECT_FALSE(AimBudgetForRho(15, kMaxAimRounds + 1, 0.1).ok());
  EXPECT_FALSE(AimBudgetForRho(15, 240, 0.0).ok());
  EXPECT_FALSE(CalibrateAimBudget(15, 240, -1.0, 1e-5).ok());
}

TEST(AimWorkloadTest, DefaultWorkloadAndWeights) {
  const auto workload = DefaultAimWorkload(4, 3);
  ASSERT_EQ(workload.size(), 9u);  // 6 pairs + 3 triples with the label
  EXPECT_EQ(workload[6], (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(DefaultAimWorkload(4, std::nullopt).size(), 6u);
  const std::vector<int> domain = {3, 2, 4, 3};
  const auto candidates = AimCandidates(workload, domain).value();
  ASSERT_EQ(candidates.size(), 13u);  // 4 singles, 6 pairs, 3 triples
  std::map<std::vector<int>, AimCandidate> by;
  for (const auto& c : candidates) by[c.clique] = c;
  // w_r = sum_W |r intersect W|, by hand.
  EXPECT_EQ(by[{0}].weight, 5.0);      // 3 pairs + 2 triples hold column 0
  EXPECT_EQ(by[{3}].weight, 6.0);      // the label: 3 pairs + 3 triples
  EXPECT_EQ((by[{0, 1}].weight), 10.0);  // pairs 2+1+1+1+1+0, triples 2+1+1
  EXPECT_EQ((by[{0, 1, 3}].weight), 16.0);
  EXPECT_EQ((by[{0, 1, 3}].cells), 18);
  EXPECT_EQ(AimScoreSensitivity(candidates, NeighbouringRelation::kAddRemove), 16.0);
  EXPECT_EQ(AimScoreSensitivity(candidates, NeighbouringRelation::kReplaceOne), 32.0);
  // Singles first, then pairs, then triples.
  EXPECT_EQ(candidates.front().clique.size(), 1u);
  EXPECT_EQ(candidates.back().clique.size(), 3u);
  // A column outside every workload clique is still a candidate (weight 0).
  const auto lone = AimCandidates({{0, 1}}, domain).value();
  EXPECT_EQ(lone.size(), 5u);
}

TEST(AimWorkloadTest, RefusesBadCliques) {
  const std::vector<int> domain = {3, 2, 4, 3};
  EXPECT_FALSE(AimCandidates({}, domain).ok());
  EXPECT_FALSE(AimCandidates({{0, 4}}, domain).ok());
  EXPECT_FALSE(AimCandidates({{1, 1}}, domain).ok());
  EXPECT_FALSE(AimCandidates({{0, 1, 2, 3}}, domain).ok());
  EXPECT_FALSE(AimCandidates({{0, 1}}, {300, 300, 2, 2}).ok());  // 90,000 cells
}

Eigen::MatrixXi RandomCodes(int rows, const std::vector<int>& domain, PublicRng& rng) {
  Eigen::MatrixXi codes(rows, static_cast<int>(domain.size()));
  for (int r = 0; r < rows; ++r) {
    for (size_t c = 0; c < domain.size(); ++c) {
      codes(r, static_cast<int>(c)) = static_cast<int>(rng.UniformInt(domain[c]));
    }
  }
  return codes;
}

// Scores of every candidate on `codes` against fixed (released) estimates.
std::vector<double> Scores(const std::vector<AimCandidate>& candidates,
                           const std::vector<int>& domain, const Eigen::MatrixXi& codes,
                           const std::vector<Eigen::VectorXd>& estimates, double sigma) {
  std::vector<double> out;
  for (size_t k = 0; k < candidates.size(); ++k) {
    std::vector<int> shape;
    for (int c : candidates[k].clique) shape.push_back(domain[c]);
    out.push_back(AimScore(release::ExactMarginal(candidates[k].clique, shape, codes),
                           estimates[k], candidates[k].weight, sigma));
  }
  return out;
}

TEST(AimScoreTest, SensitivityByBruteForceOnNeighbours) {
  const std::vector<int> domain = {3, 2, 4, 3};
  const auto candidates = AimCandidates(DefaultAimWorkload(4, 3), domain).value();
  PublicRng rng(7);
  for (const auto relation : {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
    const double bound = AimScoreSensitivity(candidates, relation);
    double worst = 0.0;
    for (int trial = 0; trial < 300; ++trial) {
      const Eigen::MatrixXi d0 = RandomCodes(1 + static_cast<int>(rng.UniformInt(12)), domain, rng);
      Eigen::MatrixXi d1;
      const Eigen::MatrixXi extra = RandomCodes(1, domain, rng);
      if (relation == NeighbouringRelation::kAddRemove) {
        d1.resize(d0.rows() + 1, d0.cols());
        d1 << d0, extra;
      } else {
        d1 = d0;
        d1.row(rng.UniformInt(d0.rows())) = extra.row(0);
      }
      // Released estimates: zero half the time (the add/remove bound is
      // attained there), random counts otherwise.
      std::vector<Eigen::VectorXd> estimates;
      for (const auto& c : candidates) {
        Eigen::VectorXd e = Eigen::VectorXd::Zero(c.cells);
        if (trial % 2) {
          for (Eigen::Index i = 0; i < e.size(); ++i) e[i] = 3.0 * rng.Uniform();
        }
        estimates.push_back(e);
      }
      const auto s0 = Scores(candidates, domain, d0, estimates, 1.5);
      const auto s1 = Scores(candidates, domain, d1, estimates, 1.5);
      for (size_t k = 0; k < s0.size(); ++k) worst = std::max(worst, std::fabs(s1[k] - s0[k]));
    }
    EXPECT_LE(worst, bound + 1e-9);
    // The bound is the max weight times 1 or 2, and it is reached.
    EXPECT_GE(worst, bound - 1e-9) << privacy::RelationName(relation);
  }
}

TEST(AimScoreTest, BiasCorrection) {
  const Eigen::VectorXd truth = Eigen::VectorXd::Constant(4, 10.0);
  const Eigen::VectorXd estimate = Eigen::VectorXd::Constant(4, 8.0);
  // 2 (8 - sqrt(2 / pi) 1.5 4)
  EXPECT_NEAR(AimScore(truth, estimate, 2.0, 1.5), 2 * (8 - std::sqrt(2 / M_PI) * 6), 1e-12);
}

TEST(AimScheduleTest, StopsExactlyAtRho) {
  PublicRng rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int d = 1 + static_cast<int>(rng.UniformInt(30));
    const int rounds = d + static_cast<int>(rng.UniformInt(16 * d));
    const double rho = std::exp(-12.0 + 14.0 * rng.Uniform());
    // Half the trials with label rounds (issue 38), on a random column.
    const int label = d >= 2 && trial % 2 ? static_cast<int>(rng.UniformInt(d)) : -1;
    const AimBudget b = AimBudgetForRho(d, rounds, rho, label).value();
    EXPECT_EQ(b.label_rounds, label >= 0 ? kAimLabelRounds : 0);
    const double anneal = rng.Uniform();
    AimSchedule schedule(b);
    AimRun run;
    while (!schedule.done()) {
      const auto p = schedule.Next();
      AimRound r;
      r.noise_multiplier = p.noise_multiplier;
      r.selection_epsilon = p.selection_epsilon;
      run.rounds.push_back(r);
      if (!p.last && rng.Uniform() < anneal) schedule.Anneal();
    }
    const long double total = RunCost(b, run);
    EXPECT_LE(total, static_cast<long double>(rho)) << trial;
    EXPECT_GE(total, static_cast<long double>(rho) * (1 - 1e-9L)) << trial;
    EXPECT_LE(schedule.used(), rho);
    EXPECT_LE(static_cast<int>(run.rounds.size()), rounds + 1 + b.label_rounds);
    EXPECT_GE(static_cast<int>(run.rounds.size()), 1);
    // Every round's selection epsilon is at least the plan's lower bound.
    for (const AimRound& r : run.rounds) EXPECT_GE(r.selection_epsilon, AimMinSelectionEpsilon(b));
  }
}

TEST(AimScheduleTest, WithoutAnnealingRunsAboutTMinusOneWayRounds) {
  const AimBudget b = AimBudgetForRho(15, 240, 0.03).value();
  AimSchedule schedule(b);
  int n = 0;
  while (!schedule.done()) {
    schedule.Next();
    ++n;
  }
  // 1-way: 0.05625 rho; rounds of rho / 240: 226 full rounds leave 0.0021
  // rho... the last round takes what is below two rounds' worth.
  EXPECT_GE(n, 225);
  EXPECT_LE(n, 227);
}

// Chain data: x0 uniform over 3, each next copies the previous w.p. 0.8.
Eigen::MatrixXi ChainCodes(int rows, int columns, uint64_t seed) {
  PublicRng rng(seed);
  Eigen::MatrixXi codes(rows, columns);
  for (int r = 0; r < rows; ++r) {
    codes(r, 0) = static_cast<int>(rng.UniformInt(3));
    for (int c = 1; c < columns; ++c) {
      codes(r, c) = rng.Uniform() < 0.8 ? codes(r, c - 1) : static_cast<int>(rng.UniformInt(3));
    }
  }
  return codes;
}

TEST(AimRunTest, NoiselessRunSelectsTheWorstPairAndAnneals) {
  const std::vector<int> domain = {3, 3, 3, 3};
  const Eigen::MatrixXi codes = ChainCodes(2000, 4, 3);
  const auto candidates = AimCandidates(DefaultAimWorkload(4, std::nullopt), domain).value();
  const AimBudget b = AimBudgetForRho(4, 64, 0.5).value();
  IndependentAimModel model(domain);
  privacy::ZeroNoiseSource zero;
  const AimRun run = RunAim(codes, domain, candidates, b, kDefaultAimMaxModelCells,
                            NeighbouringRelation::kAddRemove, &model, &zero)
                         .value();
  ASSERT_GE(run.rounds.size(), 2u);
  // The first selection is the mode of the law: the best score against
  // the independent model fitted to the exact 1-ways, computed here.
  IndependentAimModel reference(domain);
  reference.Fit(run.one_way);
  int best = -1;
  double best_score = -1e300;
  for (size_t k = 0; k < candidates.size(); ++k) {
    std::vector<int> shape(candidates[k].clique.size(), 3);
    const double score =
        AimScore(release::ExactMarginal(candidates[k].clique, shape, codes),
                 reference.Marginal(candidates[k].clique), candidates[k].weight,
                 run.rounds[0].noise_multiplier);
    if (score > best_score) {
      best_score = score;
      best = static_cast<int>(k);
    }
  }
  EXPECT_EQ(run.rounds[0].clique, candidates[best].clique);
  EXPECT_EQ(run.rounds[0].clique.size(), 2u);  // a chain's pair, not a 1-way
  // The independent model's answer on a pair does not move when the pair is
  // measured (its 1-way margins are exact already): every round but the
  // last anneals, halving s.
  for (size_t r = 0; r + 1 < run.rounds.size(); ++r) {
    EXPECT_TRUE(run.rounds[r].annealed) << r;
    if (r > 0) {
      EXPECT_DOUBLE_EQ(run.rounds[r].noise_multiplier, run.rounds[r - 1].noise_multiplier / 2);
    }
  }
  EXPECT_FALSE(run.rounds.back().annealed);
  const long double total = RunCost(b, run);
  EXPECT_LE(total, 0.5L);
  EXPECT_GE(total, 0.5L * (1 - 1e-9L));
  EXPECT_LE(run.rounds.back().rho_used, 0.5);
}

// A model whose answers move a lot at every fit (released values only).
class RestlessModel final : public AimModel {
 public:
  explicit RestlessModel(std::vector<int> domain) : inner_(std::move(domain)) {}
  void Fit(const std::vector<release::NoisyMarginal>& m) override {
    inner_.Fit(m);
    ++fits_;
  }
  Eigen::VectorXd Marginal(const std::vector<int>& clique) const override {
    return inner_.Marginal(clique) * (1.0 + fits_ % 2) + Eigen::VectorXd::Constant(
        inner_.Marginal(clique).size(), 1e6 * fits_);
  }
  int64_t CellsWith(const std::vector<std::vector<int>>& cliques) const override {
    return inner_.CellsWith(cliques);
  }

 private:
  IndependentAimModel inner_;
  int fits_ = 0;
};

TEST(AimRunTest, NoAnnealingWhenTheModelMoves) {
  const std::vector<int> domain = {3, 3, 3, 3};
  const Eigen::MatrixXi codes = ChainCodes(500, 4, 5);
  const auto candidates = AimCandidates(DefaultAimWorkload(4, std::nullopt), domain).value();
  const AimBudget b = AimBudgetForRho(4, 16, 0.5).value();
  RestlessModel model(domain);
  privacy::SeededNoiseSource noise(1);
  const AimRun run = RunAim(codes, domain, candidates, b, kDefaultAimMaxModelCells,
                            NeighbouringRelation::kAddRemove, &model, &noise)
                         .value();
  for (const AimRound& r : run.rounds) EXPECT_FALSE(r.annealed);
  // 1-way 0.225 rho, rounds of rho / 16: 11 or 12 rounds.
  EXPECT_GE(run.rounds.size(), 11u);
  EXPECT_LE(run.rounds.size(), 13u);
  const long double total = RunCost(b, run);
  EXPECT_LE(total, 0.5L);
  EXPECT_GE(total, 0.5L * (1 - 1e-9L));
}

TEST(AimRunTest, SizeFilterAtTheOneWayModelKeepsOneWays) {
  const std::vector<int> domain = {3, 3, 3, 3};
  const Eigen::MatrixXi codes = ChainCodes(500, 4, 5);
  const auto candidates = AimCandidates(DefaultAimWorkload(4, std::nullopt), domain).value();
  const AimBudget b = AimBudgetForRho(4, 16, 0.5).value();
  IndependentAimModel model(domain);
  privacy::SeededNoiseSource noise(2);
  const AimRun run = RunAim(codes, domain, candidates, b, /*max_model_cells=*/12,
                            NeighbouringRelation::kReplaceOne, &model, &noise)
                         .value();
  for (const AimRound& r : run.rounds) EXPECT_EQ(r.clique.size(), 1u);
  // Below the 1-way model: refused, before any row is read.
  EXPECT_FALSE(CheckAimRunnable(domain, candidates, b, 11, NeighbouringRelation::kAddRemove).ok());
  EXPECT_TRUE(CheckAimRunnable(domain, candidates, b, 12, NeighbouringRelation::kAddRemove).ok());
}

TEST(AimRunTest, RefusesUselessOneWayNoise) {
  const std::vector<int> domain = {3, 3, 3, 3};
  const auto candidates = AimCandidates(DefaultAimWorkload(4, std::nullopt), domain).value();
  // s0 = sqrt(T / (1.8 rho)) > 1e4 at rho = 1e-8.
  const AimBudget b = AimBudgetForRho(4, 16, 1e-8).value();
  const absl::Status refused =
      CheckAimRunnable(domain, candidates, b, kDefaultAimMaxModelCells,
                       NeighbouringRelation::kAddRemove);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("1-way"), std::string::npos);
}

constexpr int kSmallRows = 300;
constexpr int kSmallRounds = 6;
constexpr double kSmallRho = 0.002;

// Issue 38: with a label, the first round measures one of the label's pairs
// (the mode of the label round's law, noiseless: the label's strongest
// partner), whatever the paper's schedule would have picked, and the budget
// is still spent exactly.
TEST(AimRunTest, LabelRoundMeasuresTheLabelsStrongestPairFirst) {
  const std::vector<int> domain = {3, 3, 3, 3};
  // Column 3 (the label) copies column 2 w.p. 0.8 (ChainCodes).
  const Eigen::MatrixXi codes = ChainCodes(2000, 4, 5);
  const auto candidates = AimCandidates(DefaultAimWorkload(4, 3), domain).value();
  const AimBudget b =
      AimBudgetForRho(4, 64, 0.5, AimLabelForRounds(candidates, 3)).value();
  ASSERT_EQ(b.label, 3);
  ASSERT_EQ(b.label_rounds, kAimLabelRounds);
  IndependentAimModel model(domain);
  privacy::ZeroNoiseSource zero;
  const AimRun run = RunAim(codes, domain, candidates, b, kDefaultAimMaxModelCells,
                            NeighbouringRelation::kAddRemove, &model, &zero)
                         .value();
  ASSERT_GE(run.rounds.size(), 2u);
  EXPECT_TRUE(run.rounds[0].label);
  EXPECT_EQ(run.rounds[0].clique, (std::vector<int>{2, 3}));
  // 2,000 rows against a first-round noise of 8.4 rows per cell (over
  // kAimLabelRoundRowsPerSigma): the label round runs at the first round's
  // parameters, not at the label share.
  EXPECT_EQ(run.rounds[0].noise_multiplier, b.noise_multiplier);
  EXPECT_EQ(run.rounds[0].selection_epsilon, b.selection_epsilon);
  EXPECT_FALSE(run.rounds[1].label);
  const long double total = RunCost(b, run);
  EXPECT_LE(total, static_cast<long double>(b.rho));
  EXPECT_GE(total, static_cast<long double>(b.rho) * (1 - 1e-9L));
  // Public facts only: no label, or a workload without the label's pairs,
  // means no label round.
  EXPECT_EQ(AimLabelForRounds(candidates, std::nullopt), -1);
  EXPECT_EQ(AimLabelForRounds(AimCandidates({{0, 1}, {2, 3}}, domain).value(), 3), 3);
  EXPECT_EQ(AimLabelForRounds(AimCandidates({{0, 1}, {1, 2}}, domain).value(), 3), -1);
}

// Issue 38: at a budget where the paper's schedule (no label round) misses
// the label on some runs (a small table, a small rho, a label only weakly
// tied to the other columns), every run with the label round measures the
// label with a feature, and spends its budget exactly.
TEST(AimRunTest, SmallTableRunsAlwaysMeasureTheLabelWithAFeature) {
  const std::vector<int> domain = {3, 3, 3, 3, 3, 3};
  Eigen::MatrixXi codes = ChainCodes(kSmallRows, 6, 9);
  PublicRng rng(21);
  // The label (column 5) copies column 4 w.p. 0.3, else uniform.
  for (int r = 0; r < codes.rows(); ++r) {
    codes(r, 5) = rng.Uniform() < 0.3 ? codes(r, 4) : static_cast<int>(rng.UniformInt(3));
  }
  const int label = 5;
  const auto candidates = AimCandidates(DefaultAimWorkload(6, label), domain).value();
  auto measures_label = [&](const AimRun& run) {
    for (const AimRound& r : run.rounds) {
      if (r.clique.size() > 1 &&
          std::find(r.clique.begin(), r.clique.end(), label) != r.clique.end()) {
        return true;
      }
    }
    return false;
  };
  int paper_misses = 0;
  for (int seed = 1; seed <= 5; ++seed) {
    for (const bool label_round : {false, true}) {
      const int label_for_rounds = label_round ? AimLabelForRounds(candidates, label) : -1;
      const AimBudget b = AimBudgetForRho(6, kSmallRounds, kSmallRho, label_for_rounds).value();
      IndependentAimModel model(domain);
      privacy::SeededNoiseSource noise(seed);
      const AimRun run = RunAim(codes, domain, candidates, b, kDefaultAimMaxModelCells,
                                NeighbouringRelation::kAddRemove, &model, &noise)
                             .value();
      if (label_round) {
        EXPECT_TRUE(measures_label(run)) << "seed " << seed;
        // 300 rows against 41 rows of first-round noise: the label share.
        EXPECT_EQ(run.rounds[0].noise_multiplier, b.label_noise_multiplier);
        EXPECT_EQ(run.rounds[0].selection_epsilon, b.label_selection_epsilon);
      } else {
        paper_misses += measures_label(run) ? 0 : 1;
      }
      EXPECT_LE(RunCost(b, run), static_cast<long double>(b.rho));
      EXPECT_GE(RunCost(b, run), static_cast<long double>(b.rho) * (1 - 1e-9L));
    }
  }
  // The case is one the label round is for: without it some runs miss.
  EXPECT_GE(paper_misses, 1);
}

TEST(AimRunTest, TotalOnRandomAndEmptyData) {
  const std::vector<int> domain = {2, 5, 3, 4, 2};
  const auto candidates = AimCandidates(DefaultAimWorkload(5, 4), domain).value();
  PublicRng rng(13);
  for (int trial = 0; trial < 6; ++trial) {
    const int rows = trial == 0 ? 0 : static_cast<int>(rng.UniformInt(300));
    const Eigen::MatrixXi codes = RandomCodes(rows, domain, rng);
    // Label rounds on every other trial (issue 38).
    const AimBudget b =
        AimBudgetForRho(5, 80, 0.01 + rng.Uniform(), trial % 2 ? 4 : -1).value();
    IndependentAimModel model(domain);
    privacy::SeededNoiseSource noise(trial);
    const auto run = RunAim(codes, domain, candidates, b, kDefaultAimMaxModelCells,
                            trial % 2 ? NeighbouringRelation::kReplaceOne
                                      : NeighbouringRelation::kAddRemove,
                            &model, &noise);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->one_way.size(), 5u);
    EXPECT_LE(run->rounds.size(), 81u + b.label_rounds);
    for (const AimRound& r : run->rounds) {
      EXPECT_TRUE(r.measurement.counts.allFinite());
      EXPECT_EQ(r.measurement.counts.size(), CliqueCells(r.clique, domain));
      EXPECT_GT(r.measurement.noise_std, 0.0);
    }
    EXPECT_LE(RunCost(b, *run), static_cast<long double>(b.rho));
  }
}

TEST(IndependentAimModelTest, MarginalsAndCells) {
  IndependentAimModel model({3, 2, 4});
  release::NoisyMarginal a;
  a.clique = {0};
  a.shape = {3};
  a.counts = Eigen::Vector3d(10, 20, 70);
  release::NoisyMarginal b;
  b.clique = {1};
  b.shape = {2};
  b.counts = Eigen::Vector2d(25, 75);
  model.Fit({a, b});
  const Eigen::VectorXd pair = model.Marginal({0, 1});
  ASSERT_EQ(pair.size(), 6);
  EXPECT_NEAR(pair[0], 100 * 0.1 * 0.25, 1e-9);  // row-major: (0, 0)
  EXPECT_NEAR(pair[5], 100 * 0.7 * 0.75, 1e-9);
  EXPECT_EQ(model.CellsWith({{0}, {1}, {2}}), 9);
  EXPECT_EQ(model.CellsWith({{0}, {1}, {2}, {0, 1}}), 6 + 4);
  EXPECT_EQ(model.CellsWith({{0}, {1}, {2}, {1, 0}, {0, 1, 2}}), 24);
}

TEST(MeasuredTablesAimModelTest, AnswersMeasuredCliquesFromTheirTables) {
  MeasuredTablesAimModel model({2, 2});
  release::NoisyMarginal a;
  a.clique = {0};
  a.shape = {2};
  a.counts = Eigen::Vector2d(50, 50);
  a.noise_std = 1.0;
  release::NoisyMarginal b = a;
  b.clique = {1};
  release::NoisyMarginal pair;
  pair.clique = {0, 1};
  pair.shape = {2, 2};
  pair.counts = Eigen::Vector4d(50, 0, 0, 50);  // perfectly dependent
  pair.noise_std = 1.0;
  model.Fit({a, b});
  EXPECT_NEAR(model.Marginal({0, 1})[1], 25.0, 1e-9);  // independent
  model.Fit({a, b, pair});
  const Eigen::VectorXd answered = model.Marginal({0, 1});
  EXPECT_NEAR(answered[0], 50.0, 1e-6);
  EXPECT_NEAR(answered[1], 0.0, 1e-6);
  EXPECT_NEAR(model.Marginal({1, 0})[1], 25.0, 1e-9);  // another clique: independent
}


// ---------------------------------------------------------- wide tables ---
// Issue 41: past kMaxAimColumns the recipe runs in its wide form (aim.h).

// 70 columns: 0 and 1 ternary, the rest binary; each odd column copies its
// even neighbour but for 10% of rows (pairs (2m, 2m + 1) dependent), the
// rest independent.
constexpr int kWide = 70;

std::vector<int> WideDomain() {
  std::vector<int> domain(kWide, 2);
  domain[0] = domain[1] = 3;
  return domain;
}

Eigen::MatrixXi WideCodes(int rows, uint64_t seed) {
  const std::vector<int> domain = WideDomain();
  PublicRng rng(seed);
  Eigen::MatrixXi codes(rows, kWide);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < kWide; c += 2) {
      codes(r, c) = static_cast<int>(rng.UniformInt(domain[c]));
      codes(r, c + 1) = rng.Uniform() < 0.9 ? codes(r, c) % domain[c + 1]
                                            : static_cast<int>(rng.UniformInt(domain[c + 1]));
    }
  }
  return codes;
}

TEST(AimWideTest, WorkloadIsPairsAndWeightsAreLinear) {
  EXPECT_TRUE(IsWideAim(kMaxAimColumns + 1));
  EXPECT_FALSE(IsWideAim(kMaxAimColumns));
  const auto workload = DefaultAimWorkload(kWide, 3);  // no label triples
  ASSERT_EQ(workload.size(), static_cast<size_t>(kWide * (kWide - 1) / 2));
  for (const auto& clique : workload) EXPECT_EQ(clique.size(), 2u);
  const std::vector<int> domain = WideDomain();
  const auto candidates = AimCandidates(workload, domain).value();
  ASSERT_EQ(candidates.size(), static_cast<size_t>(kWide + kWide * (kWide - 1) / 2));
  // w_r = sum_W |r intersect W|: each column lies in d - 1 pairs.
  for (const AimCandidate& c : candidates) {
    EXPECT_EQ(c.weight, (kWide - 1.0) * static_cast<double>(c.clique.size()));
  }
  // A partial workload, by hand: (0, 1), (0, 2), (1, 2).
  const auto few = AimCandidates({{0, 1}, {0, 2}, {2, 1}}, domain).value();
  for (const AimCandidate& c : few) {
    EXPECT_EQ(c.weight, c.clique.size() == 1 ? (c.clique[0] <= 2 ? 2.0 : 0.0) : 4.0);
  }
  // Triples are refused on a wide schema (the model is a forest of pairs),
  // accepted on a narrow one.
  EXPECT_FALSE(AimCandidates({{0, 1, 2}}, domain).ok());
  EXPECT_TRUE(AimCandidates({{0, 1, 2}}, std::vector<int>(kMaxAimColumns, 2)).ok());
  // The budget takes up to kMaxAimWideColumns columns.
  EXPECT_TRUE(AimBudgetForRho(kMaxAimWideColumns, 2 * kMaxAimWideColumns, 0.1).ok());
  // The wide split: each round's rho / T half to the measurement, half to
  // the selection; the 1-way release d of those halves.
  const AimBudget b = AimBudgetForRho(kWide, 2 * kWide, 0.1).value();
  EXPECT_EQ(b.measurement_share, kAimWideMeasurementShare);
  const double per_round = 0.1 / (2 * kWide);
  EXPECT_NEAR(1.0 / (2 * b.noise_multiplier * b.noise_multiplier), 0.5 * per_round, 1e-15);
  EXPECT_NEAR(b.selection_epsilon * b.selection_epsilon / 8, 0.5 * per_round, 1e-15);
  EXPECT_NEAR(1.0 / (2 * b.one_way_noise_multiplier * b.one_way_noise_multiplier),
              kWide * 0.5 * per_round, 1e-14);
  EXPECT_EQ(AimBudgetForRho(kMaxAimColumns, 2 * kMaxAimColumns, 0.1)->measurement_share,
            kAimMeasurementShare);
}

// The forest's all-pairs answers are the model's own marginals (pgm
// Marginal by variable elimination), in either column order, within a tree
// and across trees.
TEST(AimWideTest, ForestPairMarginalsMatchTheModel) {
  const std::vector<int> domain = WideDomain();
  const Eigen::MatrixXi codes = WideCodes(3000, 3);
  std::vector<release::NoisyMarginal> measurements;
  auto add = [&](std::vector<int> clique, double sigma) {
    release::NoisyMarginal m;
    for (int c : clique) m.shape.push_back(domain[c]);
    m.counts = release::ExactMarginal(clique, m.shape, codes);
    m.clique = std::move(clique);
    m.noise_std = sigma;
    measurements.push_back(std::move(m));
  };
  for (int c = 0; c < kWide; ++c) add({c}, 5.0);
  // Trees: 0 - 1 - 2 - 3 (1 ternary with 2 binary), 7 - 6 - 40, 12 - 13.
  add({0, 1}, 5.0);
  add({2, 1}, 5.0);
  add({2, 3}, 5.0);
  add({6, 7}, 5.0);
  add({40, 6}, 5.0);
  add({12, 13}, 5.0);
  PgmAimModel model(domain, 30, kDefaultAimMaxModelCells);
  model.Fit(measurements);
  pgm::EstimateOptions options;
  options.iterations = 30;
  options.max_cells = kDefaultAimMaxModelCells;
  const pgm::GraphicalModel reference =
      pgm::GraphicalModel::Estimate(domain, measurements, options).value();
  for (const std::vector<int>& pair :
       std::vector<std::vector<int>>{{0, 3}, {3, 0}, {1, 2}, {2, 1}, {0, 1}, {7, 40}, {40, 7},
                                     {0, 13}, {13, 0}, {5, 9}, {12, 13}, {3, 12}}) {
    const Eigen::VectorXd got = model.Marginal(pair);
    const Eigen::VectorXd want = reference.Marginal(pair);
    ASSERT_EQ(got.size(), want.size());
    for (Eigen::Index i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-6 * reference.total()) << pair[0] << "," << pair[1];
    }
  }
  for (int c : {0, 1, 20}) {
    const Eigen::VectorXd got = model.Marginal({c});
    const Eigen::VectorXd want = reference.Marginal({c});
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LT((got - want).cwiseAbs().maxCoeff(), 1e-6 * reference.total());
  }
}

// A noiseless wide run: every measurement is the exact table (the bit-count
// path for binary pairs, the row pass for the ternary ones), the measured
// pairs stay a forest, the first pair round picks a dependent pair, and the
// schedule still spends exactly rho.
TEST(AimWideTest, NoiselessRunMeasuresDependentPairsAsAForest) {
  const std::vector<int> domain = WideDomain();
  const Eigen::MatrixXi codes = WideCodes(2000, 5);
  const auto candidates = AimCandidates(DefaultAimWorkload(kWide, std::nullopt), domain).value();
  const AimBudget b = AimBudgetForRho(kWide, 2 * kWide, 2.0).value();
  PgmAimModel model(domain, 20, kDefaultAimMaxModelCells);
  privacy::ZeroNoiseSource zero;
  const AimRun run = RunAim(codes, domain, candidates, b, kDefaultAimMaxModelCells,
                            NeighbouringRelation::kAddRemove, &model, &zero)
                         .value();
  ASSERT_GE(run.rounds.size(), 2u);
  std::vector<int> tree(kWide);
  for (int c = 0; c < kWide; ++c) tree[c] = c;
  auto find = [&](int x) {
    while (tree[x] != x) x = tree[x];
    return x;
  };
  std::set<std::vector<int>> pairs;
  bool first_pair = true;
  for (const AimRound& r : run.rounds) {
    std::vector<int> shape;
    for (int c : r.clique) shape.push_back(domain[c]);
    EXPECT_EQ(r.measurement.counts, release::ExactMarginal(r.clique, shape, codes));
    if (r.clique.size() != 2) continue;
    if (first_pair) {
      EXPECT_EQ(r.clique[0] % 2, 0);
      EXPECT_EQ(r.clique[1], r.clique[0] + 1);
      first_pair = false;
    }
    if (!pairs.insert(r.clique).second) continue;  // a re-measurement
    const int a = find(r.clique[0]);
    const int z = find(r.clique[1]);
    EXPECT_NE(a, z) << "pair (" << r.clique[0] << ", " << r.clique[1] << ") closes a cycle";
    tree[std::max(a, z)] = std::min(a, z);
  }
  EXPECT_FALSE(first_pair);  // some pair was measured
  const long double total = RunCost(b, run);
  EXPECT_LE(total, 2.0L);
  EXPECT_GE(total, 2.0L * (1 - 1e-9L));
}

// With noise, on the same table: total, finite, within rho.
TEST(AimWideTest, NoisyRunIsTotalAndWithinRho) {
  const std::vector<int> domain = WideDomain();
  const Eigen::MatrixXi codes = WideCodes(500, 7);
  const auto candidates = AimCandidates(DefaultAimWorkload(kWide, std::nullopt), domain).value();
  const AimBudget b = AimBudgetForRho(kWide, 2 * kWide, 0.05).value();
  PgmAimModel model(domain, 20, kDefaultAimMaxModelCells);
  privacy::SeededNoiseSource noise(4);
  const auto run = RunAim(codes, domain, candidates, b, kDefaultAimMaxModelCells,
                          NeighbouringRelation::kReplaceOne, &model, &noise);
  ASSERT_TRUE(run.ok()) << run.status();
  for (const AimRound& r : run->rounds) {
    EXPECT_LE(r.clique.size(), 2u);
    EXPECT_TRUE(r.measurement.counts.allFinite());
  }
  EXPECT_LE(RunCost(b, *run), static_cast<long double>(b.rho));
}

}  // namespace
}  // namespace dpcurator::train
