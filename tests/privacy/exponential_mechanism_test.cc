// The exponential mechanism (core/privacy/exponential_mechanism.h) and its
// event: RDP and codec against hand values; the exact sampler's law against
// 200k seeded draws (chi-square at a fixed level, with a power check); eps-DP
// and eps-bounded-range of the exact law on brute-forced neighbours; totality
// on non-finite and huge scores; the public checks (docs/privacy.md 2.11).

#include "core/privacy/exponential_mechanism.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "core/privacy/conversion.h"
#include "core/privacy/event_codec.h"
#include "core/privacy/events.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/rdp.h"
#include "gtest/gtest.h"
#include "tests/privacy/test_util.h"

namespace dpcurator::privacy {
namespace {

using testing::ChiSquare;
using testing::ChiSquareCritical;
using testing::NormalUpperQuantile;

TEST(ExponentialMechanismEventTest, RdpIsMinOfZcdpAndPureDp) {
  // rho = eps^2 / 8: eps = 1 gives 0.125 alpha, capped at eps = 1.
  EXPECT_DOUBLE_EQ(ExponentialMechanismRdp(1.0, 2.0), 0.25);
  EXPECT_DOUBLE_EQ(ExponentialMechanismRdp(1.0, 8.0), 1.0);
  EXPECT_DOUBLE_EQ(ExponentialMechanismRdp(1.0, 20.0), 1.0);
  EXPECT_DOUBLE_EQ(ExponentialMechanismRdp(0.2, 10.0), 10 * 0.04 / 8);
  const PrivacyEvent event = PrivacyEvent::ExponentialMechanism(0.2).value();
  EXPECT_TRUE(event.IsValidFor(NeighbouringRelation::kAddRemove));
  EXPECT_TRUE(event.IsValidFor(NeighbouringRelation::kReplaceOne));
  const auto& orders = DefaultRdpOrders();
  const std::vector<double> rdp = ComputeRdp(event, orders).value();
  for (size_t i = 0; i < orders.size(); ++i) {
    EXPECT_DOUBLE_EQ(rdp[i], std::min(orders[i] * 0.005, 0.2));
  }
  // 14 such steps (MST on 15 columns) compose to rho = 14 x 0.005.
  const PrivacyEvent steps = PrivacyEvent::SelfCompose(event, 14).value();
  EXPECT_NEAR(ComputeRdp(steps, {{3.0}}).value()[0], 3.0 * 14 * 0.005, 1e-15);
  EXPECT_FALSE(PrivacyEvent::ExponentialMechanism(0.0).ok());
  EXPECT_FALSE(PrivacyEvent::ExponentialMechanism(INFINITY).ok());
}

TEST(ExponentialMechanismEventTest, CodecRoundTrip) {
  const PrivacyEvent event = PrivacyEvent::ExponentialMechanism(0.125).value();
  EXPECT_EQ(EncodeEvent(event), "exponential(0.125)");
  const PrivacyEvent decoded = DecodeEvent("repeat(3;exponential(0.125))").value();
  EXPECT_EQ(EncodeEvent(decoded), "repeat(3;exponential(0.125))");
  EXPECT_EQ(Describe(event), "ExponentialMechanism(eps=0.125)");
  EXPECT_FALSE(DecodeEvent("exponential(-1)").ok());
}

// Pearson's chi-square of candidate counts against a law p: one bin per
// candidate with expected count >= 5, the others pooled into one bin
// (merged into the largest bin when the pool's expectation is below 5).
ChiSquare ChiSquareAgainst(const std::vector<int64_t>& counts, const std::vector<double>& p) {
  double n = 0.0;
  for (int64_t c : counts) n += static_cast<double>(c);
  std::vector<std::pair<double, double>> bins;  // (observed, expected)
  double pool_observed = 0.0, pool_expected = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (n * p[i] >= 5.0) {
      bins.push_back({static_cast<double>(counts[i]), n * p[i]});
    } else {
      pool_observed += static_cast<double>(counts[i]);
      pool_expected += n * p[i];
    }
  }
  if (pool_expected >= 5.0) {
    bins.push_back({pool_observed, pool_expected});
  } else if (!bins.empty()) {
    auto largest = std::max_element(bins.begin(), bins.end(), [](const auto& a, const auto& b) {
      return a.second < b.second;
    });
    largest->first += pool_observed;
    largest->second += pool_expected;
  }
  ChiSquare result;
  for (const auto& [o, e] : bins) result.statistic += (o - e) * (o - e) / e;
  result.df = static_cast<int>(bins.size()) - 1;
  return result;
}

std::vector<int64_t> Draw(const std::vector<double>& q, double epsilon, double sensitivity,
                          uint64_t seed, int draws) {
  SeededNoiseSource noise(seed);
  std::vector<int64_t> counts(q.size(), 0);
  for (int i = 0; i < draws; ++i) {
    const absl::StatusOr<int> pick = ExponentialMechanismSelect(q, epsilon, sensitivity, &noise);
    EXPECT_TRUE(pick.ok()) << pick.status();
    if (!pick.ok()) break;
    EXPECT_GE(*pick, 0);
    EXPECT_LT(*pick, static_cast<int>(q.size()));
    ++counts[*pick];
  }
  return counts;
}

// The textbook law softmax(eps q / (2 Delta)), independent of the code under
// test (no grid, no rounding of eps).
std::vector<double> NominalLaw(const std::vector<double>& q, double epsilon, double sensitivity) {
  const double top = *std::max_element(q.begin(), q.end());
  std::vector<double> p(q.size());
  double sum = 0.0;
  for (size_t i = 0; i < q.size(); ++i) {
    p[i] = std::exp(epsilon * (q[i] - top) / (2.0 * sensitivity));
    sum += p[i];
  }
  for (double& v : p) v /= sum;
  return p;
}

TEST(ExponentialMechanismTest, ProbabilitiesByHand) {
  // q = (0, 1), eps = 2, Delta = 1: the grid is g = 2^-20, the scores 0 and
  // 2^20 grid units, S = 2^20 + 1, and gamma's denominator 2^31 (S + 1)
  // (one unit of margin for the sampler, docs/privacy.md 2.11 step 6);
  // eps_num / 2^30 = 2, so the weights are 1 and exp(2 2^20 / (2 (2^20 + 2))).
  const double unit = 1048576.0;
  const auto p = ExponentialMechanismProbabilities({0.0, 1.0}, 2.0, 1.0).value();
  const double w = std::exp(unit / (unit + 2.0));
  EXPECT_NEAR(p[1], w / (1.0 + w), 1e-15);
  // ... which is the textbook e / (1 + e) up to the 2^-20 of the grid.
  EXPECT_NEAR(p[1], std::exp(1.0) / (1.0 + std::exp(1.0)), 1e-6);
  // Sensitivity 2 halves the exponent: g = 2^-19, q = 1 is 2^19 units.
  const auto half = ExponentialMechanismProbabilities({0.0, 1.0}, 2.0, 2.0).value();
  const double wh = std::exp(0.5 * unit / (unit + 2.0));
  EXPECT_NEAR(half[1], wh / (1.0 + wh), 1e-15);
  // Sensitivity 3 (not a power of two): g = 2^-19, Delta / g = 3 2^19, so
  // S = 3 2^19 + 1; q = 3 is 3 2^19 units.
  const auto three = ExponentialMechanismProbabilities({0.0, 3.0}, 2.0, 3.0).value();
  const double w3 = std::exp(1.5 * unit / (1.5 * unit + 2.0));
  EXPECT_NEAR(three[1], w3 / (1.0 + w3), 1e-15);
  // Epsilon is rounded down to a multiple of 2^-30: 0.1 becomes
  // floor(0.1 2^30) 2^-30.
  const auto tenth = ExponentialMechanismProbabilities({0.0, 1.0}, 0.1, 1.0).value();
  const double eps_down = std::floor(0.1 * 1073741824.0) / 1073741824.0;
  const double wt = std::exp(eps_down / 2.0 * unit / (unit + 2.0));
  EXPECT_NEAR(tenth[1], wt / (1.0 + wt), 1e-15);
  // The eps-DP ratio: shifting one score by Delta changes no probability by
  // more than e^eps.
  const auto a = ExponentialMechanismProbabilities({0.0, 3.0, 1.0}, 0.7, 1.0).value();
  const auto b = ExponentialMechanismProbabilities({1.0, 3.0, 1.0}, 0.7, 1.0).value();
  for (int i = 0; i < 3; ++i) EXPECT_LE(std::fabs(std::log(a[i] / b[i])), 0.7 + 1e-12);
}

// The sampler draws its exact law: 200k seeded draws per case, Pearson's
// chi-square at level 1e-7 per case (7 cases: family-wise false alarm below
// 1e-6, and the seeds are fixed, so the verdict is deterministic).
TEST(ExponentialMechanismTest, ExactSamplerDrawsItsLaw) {
  constexpr int kDraws = 200000;
  constexpr double kLevel = 1e-7;
  struct Case {
    std::vector<double> q;
    double epsilon;
    double sensitivity;
  };
  const double g = std::ldexp(1.0, -20);  // the grid for Delta in [1, 2)
  std::vector<double> many(50);
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> score(0.0, 30.0);
  for (double& v : many) v = score(rng);
  const std::vector<Case> cases = {
      {{0.0, 1.0, 2.0, 0.5}, 1.5, 1.0},
      // Ties (three best, two equal below).
      {{3.0, 3.0, 0.0, 3.0, 1.0, 1.0}, 2.0, 1.0},
      // Huge gaps: near 1e12 (inside the grid range), an enormous negative,
      // a NaN; only the first three have mass.
      {{1e12, 1e12 - 2.0, 1e12 - 5.0, 0.0, -1e300, NAN}, 1.0, 1.0},
      // Sensitivity not a power of two.
      {{0.0, 3.0, 6.0, 1.5, 7.0}, 0.8, 3.0},
      // Small epsilon: nearly uniform.
      {{0.0, 100.0, 50.0}, 1e-3, 1.0},
      // The largest epsilon: the grid matters (0.48 nats per grid unit).
      {{0.0, 1.4 * g, 2.6 * g, 3.45 * g, 6.0 * g}, 1e6, 1.0},
      // Many candidates.
      {many, 0.5, 1.0},
  };
  uint64_t seed = 2300;
  for (const Case& c : cases) {
    const std::vector<int64_t> counts = Draw(c.q, c.epsilon, c.sensitivity, ++seed, kDraws);
    const std::vector<double> p =
        ExponentialMechanismProbabilities(c.q, c.epsilon, c.sensitivity).value();
    double total = 0.0;
    for (size_t i = 0; i < p.size(); ++i) {
      total += p[i];
      // A candidate of negligible mass is never drawn (P[any] < 2e-8).
      if (p[i] < 1e-13) {
        EXPECT_EQ(counts[i], 0) << "seed " << seed << " candidate " << i;
      }
    }
    EXPECT_NEAR(total, 1.0, 1e-12);
    const ChiSquare chi = ChiSquareAgainst(counts, p);
    if (chi.df == 0) continue;
    EXPECT_LT(chi.statistic, ChiSquareCritical(chi.df, kLevel))
        << "seed " << seed << ": chi-square " << chi.statistic << " with " << chi.df
        << " degrees of freedom";
  }
}

// The chi-square test has power: at eps = 1e6 the grid changes the law, and
// the same draws are rejected against the textbook softmax (which ignores
// the grid), so the test above can fail on a sampler of the wrong law.
TEST(ExponentialMechanismTest, ChiSquareRejectsAWrongLaw) {
  const double g = std::ldexp(1.0, -20);
  const std::vector<double> q = {0.0, 1.4 * g, 2.6 * g, 3.45 * g, 6.0 * g};
  const std::vector<int64_t> counts = Draw(q, 1e6, 1.0, 2306, 200000);
  const ChiSquare chi = ChiSquareAgainst(counts, NominalLaw(q, 1e6, 1.0));
  ASSERT_GE(chi.df, 1);
  EXPECT_GT(chi.statistic, ChiSquareCritical(chi.df, 1e-7));
}

// The race's law on the three shapes of issue 37: flat scores (K = 500),
// skewed scores (a linear ramp over 200 candidates, weights from 1 down to
// e^-6), and one score far ahead (the leader holds 0.9, 99 others share 0.1;
// and a leader 60 nats ahead of 199 others, who must never be drawn).
// 10^5 seeded draws each, Pearson's chi-square at level 1e-7 per case. A
// sampler that ignores gamma (uniform) or halves it fails every case but the
// flat one; a sampler that favours early indices fails the flat one.
TEST(ExponentialMechanismTest, RaceDrawsItsLawOnFlatSkewedAndFarAheadScores) {
  constexpr int kDraws = 100000;
  constexpr double kLevel = 1e-7;
  struct Case {
    std::vector<double> q;
    double epsilon;
  };
  std::vector<Case> cases;
  cases.push_back({std::vector<double>(500, 5.0), 1.0});
  std::vector<double> ramp(200);
  for (int i = 0; i < 200; ++i) ramp[i] = 12.0 * i / 199.0;  // eps / 2 = 1 nat per unit
  cases.push_back({ramp, 2.0});
  // Leader at p = 0.9: exp(d) = 9 * 99, d = eps q / 2 with eps = 2.
  std::vector<double> ahead(100, 0.0);
  ahead[37] = std::log(9.0 * 99.0);
  cases.push_back({ahead, 2.0});
  std::vector<double> far(200, 0.0);
  far[150] = 60.0;
  cases.push_back({far, 2.0});
  uint64_t seed = 3700;
  for (const Case& c : cases) {
    const std::vector<int64_t> counts = Draw(c.q, c.epsilon, 1.0, ++seed, kDraws);
    const std::vector<double> p = ExponentialMechanismProbabilities(c.q, c.epsilon, 1.0).value();
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i] < 1e-20) {
        EXPECT_EQ(counts[i], 0) << "seed " << seed << " candidate " << i;
      }
    }
    const ChiSquare chi = ChiSquareAgainst(counts, p);
    if (chi.df == 0) {
      EXPECT_EQ(counts[150], kDraws);
      continue;
    }
    EXPECT_LT(chi.statistic, ChiSquareCritical(chi.df, kLevel))
        << "seed " << seed << ": chi-square " << chi.statistic << " with " << chi.df
        << " degrees of freedom";
  }
}

// A source that starts with a script of words, then seeded bits; counts what
// it hands out.
class ScriptedNoiseSource final : public NoiseSource {
 public:
  ScriptedNoiseSource(std::vector<uint64_t> script, uint64_t seed)
      : script_(std::move(script)), rest_(seed) {}
  uint64_t NextU64() override {
    ++drawn_;
    if (next_ < script_.size()) return script_[next_++];
    return rest_.NextU64();
  }
  int64_t drawn() const { return drawn_; }

 private:
  std::vector<uint64_t> script_;
  size_t next_ = 0;
  SeededNoiseSource rest_;
  int64_t drawn_ = 0;
};

// The refinement (rare in real draws: about 2^-40 a selection) forced: both
// candidates get the same first word, so their first-pass intervals
// coincide, and the winner is decided by the following bits. With equal
// scores each wins half the time (both branches of X, and first words that
// carry no information: 0 and ~0, whose leading one lies in a later word);
// with scores one grid unit apart at the smallest epsilon (gamma differs by
// 2^-51, below the first pass's margin, far above the refinement's) and a
// first word that fixes X to a relative 2^-56, the better one always wins.
// A refinement that ignored its new bits or gamma fails.
TEST(ExponentialMechanismTest, RefinementDecidesEqualFirstWords) {
  constexpr int kDraws = 4000;
  const double g = std::ldexp(1.0, -20);  // the grid for Delta = 1
  const uint64_t words[] = {0x123456789abcdefULL, 0xfedcba9876543210ULL, 0, ~uint64_t{0},
                           uint64_t{1} << 63};
  for (uint64_t word : words) {
    int first = 0;
    for (int d = 0; d < kDraws; ++d) {
      ScriptedNoiseSource noise({word, word}, 5000 + d);
      const int pick = ExponentialMechanismSelect({1.0, 1.0}, 1.0, 1.0, &noise).value();
      ASSERT_TRUE(pick == 0 || pick == 1);
      first += pick == 0 ? 1 : 0;
      // Refined: more than the two first words were read.
      ASSERT_GT(noise.drawn(), 2) << std::hex << word;
    }
    // Binomial(4000, 1/2): sd 31.6; 6 sd is a false alarm below 1e-8.
    EXPECT_NEAR(first, kDraws / 2, 190) << std::hex << word;
    // Only a first word that fixes X to a relative 2^-56 or better decides
    // a gamma difference of 2^-51; 0 and ~0 leave X's scale to later words.
    if (word == 0 || word == ~uint64_t{0}) continue;
    for (int d = 0; d < 200; ++d) {
      ScriptedNoiseSource noise({word, word}, 9000 + d);
      EXPECT_EQ(ExponentialMechanismSelect({0.0, g}, std::ldexp(1.0, -30), 1.0, &noise).value(),
                1)
          << std::hex << word;
      ScriptedNoiseSource again({word, word}, 9000 + d);
      EXPECT_EQ(ExponentialMechanismSelect({g, 0.0}, std::ldexp(1.0, -30), 1.0, &again).value(),
                0)
          << std::hex << word;
    }
  }
}

// The work does not depend on the scores: every selection reads exactly K
// words (the first pass) unless a refinement happens, which these seeded
// draws never need. The rejection sampler this replaced read between a few
// and thousands of words, by the scores.
TEST(ExponentialMechanismTest, WordsReadDoNotDependOnTheScores) {
  constexpr int kCandidates = 4000;
  std::vector<double> flat(kCandidates, 1.0);
  std::vector<double> ahead(kCandidates, 0.0);
  ahead[1234] = 1e6;
  std::vector<double> random(kCandidates);
  std::mt19937_64 rng(37);
  std::uniform_real_distribution<double> score(0.0, 50.0);
  for (double& v : random) v = score(rng);
  for (const auto* q : {&flat, &ahead, &random}) {
    for (double eps : {std::ldexp(1.0, -30), 0.1, 2.0, 1e6}) {
      ScriptedNoiseSource noise({}, 4242);
      for (int d = 0; d < 20; ++d) {
        const int64_t before = noise.drawn();
        ASSERT_TRUE(ExponentialMechanismSelect(*q, eps, 1.0, &noise).ok());
        EXPECT_EQ(noise.drawn() - before, kCandidates) << "eps " << eps;
      }
    }
  }
}

// Totality against a hostile source: constant words (all zeros, all ones,
// the top bit only) that are not ZeroNoiseSource still give an index, in
// bounded time (the refinement reads at most 253 words a candidate).
TEST(ExponentialMechanismTest, ConstantWordsStillGiveAnIndex) {
  class ConstantSource final : public NoiseSource {
   public:
    explicit ConstantSource(uint64_t word) : word_(word) {}
    uint64_t NextU64() override { return word_; }

   private:
    uint64_t word_;
  };
  for (uint64_t word : {uint64_t{0}, ~uint64_t{0}, uint64_t{1} << 63, uint64_t{12345}}) {
    ConstantSource noise(word);
    for (const std::vector<double>& q :
         {std::vector<double>{1.0}, std::vector<double>{1.0, 1.0, 1.0},
          std::vector<double>{NAN, INFINITY, -INFINITY, 0.0}}) {
      const absl::StatusOr<int> pick = ExponentialMechanismSelect(q, 1.0, 1.0, &noise);
      ASSERT_TRUE(pick.ok());
      EXPECT_GE(*pick, 0);
      EXPECT_LT(*pick, static_cast<int>(q.size()));
    }
  }
}

// eps-DP and eps-bounded-range of the exact law (Cesar & Rogers 2021), by
// brute force on random neighbouring score vectors: every score moved by at
// most Delta, with worst cases (moves of exactly +-Delta, scores on the
// grid's half points so that rounding adds a whole unit). Every number is a
// short dyadic rational, so q and q' are exact and |q_i - q'_i| <= Delta
// holds exactly.
TEST(ExponentialMechanismTest, NeighboursAreWithinEpsilon) {
  std::mt19937_64 rng(23);
  const std::vector<double> sensitivities = {1.0, 3.0, 0.75, 5.0 / 1024.0, 1024.0};
  const std::vector<double> epsilons = {0.05, 0.5, 1.0, 4.0};
  std::uniform_int_distribution<int> size(2, 6);
  std::uniform_int_distribution<int64_t> score(-(int64_t{1} << 24), int64_t{1} << 24);
  std::uniform_int_distribution<int> move(-1024, 1024);
  std::uniform_int_distribution<int> coin(0, 3);
  double largest_range = 0.0;  // over all trials, relative to eps
  for (int trial = 0; trial < 20000; ++trial) {
    const double delta = sensitivities[trial % sensitivities.size()];
    const double eps = epsilons[(trial / sensitivities.size()) % epsilons.size()];
    const double g = std::ldexp(1.0, std::ilogb(delta) - 20);
    const int k = size(rng);
    std::vector<double> q(k), r(k);
    for (int i = 0; i < k; ++i) {
      const int kind = coin(rng);
      if (kind == 0) {
        // A half point of the grid, moved by exactly +-Delta.
        q[i] = (static_cast<double>(score(rng) / 8) + 0.5) * g;
        r[i] = q[i] + (move(rng) >= 0 ? delta : -delta);
      } else {
        // Scores within +-8 Delta, moved by j Delta / 1024.
        q[i] = static_cast<double>(score(rng)) * std::ldexp(delta, -21);
        r[i] = q[i] + move(rng) * delta / 1024.0;
      }
      ASSERT_LE(std::fabs(q[i] - r[i]), delta);
    }
    const auto p = ExponentialMechanismProbabilities(q, eps, delta).value();
    const auto p2 = ExponentialMechanismProbabilities(r, eps, delta).value();
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < k; ++i) {
      const double log_ratio = std::log(p[i]) - std::log(p2[i]);
      ASSERT_LE(std::fabs(log_ratio), eps + 1e-9)
          << "trial " << trial << " candidate " << i << " eps " << eps << " Delta " << delta;
      lo = std::min(lo, log_ratio);
      hi = std::max(hi, log_ratio);
    }
    ASSERT_LE(hi - lo, eps + 1e-9) << "trial " << trial << " eps " << eps << " Delta " << delta;
    largest_range = std::max(largest_range, (hi - lo) / eps);
  }
  // Not vacuous: the worst cases come within 1e-3 of the bound.
  EXPECT_GT(largest_range, 0.999);
}

// Totality: non-finite and huge scores give a valid index, never an error.
TEST(ExponentialMechanismTest, NonFiniteAndHugeScoresGiveAnIndex) {
  const std::vector<std::vector<double>> inputs = {
      {NAN},
      {INFINITY},
      {-INFINITY, NAN},
      {NAN, 1.0, INFINITY, -INFINITY, 1e308, -1e308, DBL_MAX, -DBL_MAX, 0.0},
      {DBL_MAX, -DBL_MAX},
      {1e300, 1e300 - 1e285, 4.9e-324},
  };
  SeededNoiseSource noise(2323);
  ZeroNoiseSource zero;
  for (const auto& q : inputs) {
    for (double eps : {std::ldexp(1.0, -30), 1.0, 1e6}) {
      for (double delta : {kMinExponentialSensitivity, 1.0, DBL_MAX}) {
        for (int i = 0; i < 20; ++i) {
          const absl::StatusOr<int> pick = ExponentialMechanismSelect(q, eps, delta, &noise);
          ASSERT_TRUE(pick.ok()) << pick.status();
          EXPECT_GE(*pick, 0);
          EXPECT_LT(*pick, static_cast<int>(q.size()));
        }
        const absl::StatusOr<int> mode = ExponentialMechanismSelect(q, eps, delta, &zero);
        ASSERT_TRUE(mode.ok()) << mode.status();
        const auto p = ExponentialMechanismProbabilities(q, eps, delta).value();
        double total = 0.0;
        for (double v : p) {
          EXPECT_TRUE(std::isfinite(v));
          total += v;
        }
        EXPECT_NEAR(total, 1.0, 1e-12);
      }
    }
  }
  // NaN is the lowest score; +inf and DBL_MAX are both clamped to the top of
  // the grid range, so they tie.
  const auto nan_low = ExponentialMechanismProbabilities({NAN, 0.0}, 1.0, 1.0).value();
  EXPECT_LT(nan_low[0], 1e-300);
  const auto tied = ExponentialMechanismProbabilities({INFINITY, DBL_MAX, 0.0}, 1.0, 1.0).value();
  EXPECT_DOUBLE_EQ(tied[0], 0.5);
  EXPECT_DOUBLE_EQ(tied[1], 0.5);
  EXPECT_EQ(ExponentialMechanismSelect({NAN, -INFINITY}, 1.0, 1.0, &zero).value(), 0);
}

TEST(ExponentialMechanismTest, NoNoiseGivesTheFirstBestCandidate) {
  ZeroNoiseSource zero;
  EXPECT_EQ(ExponentialMechanismSelect({0.0, 1.0, 2.0, 0.5}, 1.5, 1.0, &zero).value(), 2);
  EXPECT_EQ(ExponentialMechanismSelect({1.0, 3.0, 3.0}, 1.5, 1.0, &zero).value(), 1);
  EXPECT_EQ(ExponentialMechanismSelect({NAN, -5.0}, 1.5, 1.0, &zero).value(), 1);
}

// The public checks, and Select and Probabilities fail exactly when they do.
TEST(ExponentialMechanismTest, PublicValidation) {
  EXPECT_TRUE(ValidateExponentialMechanism(1, 1.0, 1.0).ok());
  EXPECT_TRUE(ValidateExponentialMechanism(3, std::ldexp(1.0, -30), 1.0).ok());
  EXPECT_TRUE(ValidateExponentialMechanism(3, kMaxExponentialEpsilon, 1.0).ok());
  EXPECT_TRUE(ValidateExponentialMechanism(3, 1.0, kMinExponentialSensitivity).ok());
  EXPECT_TRUE(ValidateExponentialMechanism(3, 1.0, DBL_MAX).ok());
  struct Bad {
    int candidates;
    double epsilon;
    double sensitivity;
  };
  const std::vector<Bad> bad = {
      {0, 1.0, 1.0},
      {-1, 1.0, 1.0},
      {2, 0.0, 1.0},
      {2, -1.0, 1.0},
      {2, 1e-10, 1.0},                                      // eps_num == 0
      {2, std::nextafter(std::ldexp(1.0, -30), 0.0), 1.0},  // just below 2^-30
      {2, NAN, 1.0},
      {2, INFINITY, 1.0},
      {2, 2e6, 1.0},
      {2, 1.0, 0.0},
      {2, 1.0, -1.0},
      {2, 1.0, NAN},
      {2, 1.0, INFINITY},
      {2, 1.0, std::ldexp(1.0, -1001)},
  };
  SeededNoiseSource noise(5);
  for (const Bad& b : bad) {
    const absl::Status status =
        ValidateExponentialMechanism(b.candidates, b.epsilon, b.sensitivity);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << b.candidates << " " << b.epsilon << " " << b.sensitivity;
    const std::vector<double> q(std::max(b.candidates, 0), 1.0);
    const absl::StatusOr<int> pick =
        ExponentialMechanismSelect(q, b.epsilon, b.sensitivity, &noise);
    EXPECT_EQ(pick.status(), status);
    EXPECT_EQ(ExponentialMechanismProbabilities(q, b.epsilon, b.sensitivity).status(), status);
  }
  EXPECT_EQ(ValidateExponentialMechanism(2, 0.0, 1.0).message(),
            "Epsilon must be finite and positive, got 0");
}

}  // namespace
}  // namespace dpcurator::privacy
