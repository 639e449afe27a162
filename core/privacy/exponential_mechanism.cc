#include "core/privacy/exponential_mechanism.h"

#include <quadmath.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/privacy/discrete_noise.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::privacy {
namespace {

using Interval = internal::KeyBounds;

// The refinement's arithmetic (docs/privacy.md 2.11, step 5): 113-bit
// significands, from libquadmath (GCC's runtime, libquadmath0 in
// deploy/packages/runtime.txt).
using Quad = __float128;

static_assert(std::numeric_limits<double>::is_iec559 && std::numeric_limits<double>::digits == 53,
              "the first pass's error margins assume IEEE binary64");

// gamma_i is at most kMaxGamma + 1/2 after the gap clamp (MakePlan): a
// candidate that far below the best has relative weight below e^-2048, and
// every key then has a magnitude (below 13,300) that the refinement
// resolves to 2^-85 (docs/privacy.md 2.11, step 5).
constexpr uint64_t kMaxGamma = 2048;
// The first pass trusts a 64-bit draw only when b >= 2^8 (relative
// resolution 2^-8 of X); below that (probability 2^-55) its interval is the
// whole line and the candidate is refined if the winner is undecided.
constexpr uint64_t kMinFirstPassUnits = uint64_t{1} << 8;
// The refinement reads at most this many all-zero words before the leading
// one of X (X < 2^-16064, probability below 2^-16000): far inside
// __float128's normal range (2^-16382).
constexpr int kMaxZeroWords = 250;

// Everything the mechanism needs from its public parameters.
struct Plan {
  int grid_exponent = 0;           // g = 2^grid_exponent
  uint64_t sensitivity_units = 0;  // S = floor(Delta / g) + 1, in [2^20 + 1, 2^21]
  uint64_t epsilon_units = 0;      // eps_num = floor(eps 2^30), in [1, 2^50)
  uint64_t gap_cap = 0;            // C: gaps are clamped to it (docs/privacy.md 2.11, step 2)
  // gamma_i = G_i eps_num / den, den = 2^31 (S + 1) <= 2^52 + 2^31. The one
  // unit over S is the charge's margin for the sampler's relative deviation
  // from this law (docs/privacy.md 2.11, step 6).
  uint128 denominator() const {
    return uint128{sensitivity_units + 1} << (kEpsilonFractionBits + 1);
  }
};

absl::StatusOr<Plan> MakePlan(int num_candidates, double epsilon, double sensitivity) {
  if (num_candidates < 1) {
    return absl::InvalidArgumentError("the exponential mechanism needs at least one candidate");
  }
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(epsilon, "Epsilon"));
  if (epsilon > kMaxExponentialEpsilon) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Epsilon of the exponential mechanism must be at most ", kMaxExponentialEpsilon,
        ", got ", epsilon));
  }
  // eps 2^30 is exact (a power-of-two scale of a double below 2^20), and so
  // is its floor; below 2^-30 it is 0 and the mechanism would be uniform
  // while charged eps.
  const double epsilon_units = std::floor(std::ldexp(epsilon, kEpsilonFractionBits));
  if (epsilon_units < 1.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Epsilon of the exponential mechanism must be at least 2^-", kEpsilonFractionBits,
        " (", std::ldexp(1.0, -kEpsilonFractionBits), "), got ", epsilon));
  }
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(sensitivity, "Sensitivity"));
  if (sensitivity < kMinExponentialSensitivity) {
    return absl::InvalidArgumentError(
        absl::StrCat("Sensitivity of the exponential mechanism must be at least 2^-1000, got ",
                     sensitivity));
  }
  Plan plan;
  // ilogb is floor(log2 Delta) exactly for a normal double; g = 2^(that -
  // 20) is then a normal double (exponent >= -1020), and Delta / g, in
  // [2^20, 2^21), is exact.
  plan.grid_exponent = std::ilogb(sensitivity) - kScoreGridBits;
  const double units = std::ldexp(sensitivity, -plan.grid_exponent);
  // |round(a) - round(b)| <= |a - b| + 1 <= Delta / g + 1 for scores within
  // Delta, and the left side is an integer: at most floor(Delta / g) + 1.
  plan.sensitivity_units = static_cast<uint64_t>(std::floor(units)) + 1;
  plan.epsilon_units = static_cast<uint64_t>(epsilon_units);
  // C = min(2^62, ceil(2048 den / eps_num)): gamma at the cap is in
  // (1023.99, 2048.5) (2^62 eps_num / den >= 2^62 / (2^52 + 2^31); one unit
  // adds eps_num / den < 1/2). 2048 den <= 2^63 + 2^42 fits in 128 bits.
  const uint128 scaled = uint128{kMaxGamma} * plan.denominator();
  const uint128 cap = (scaled + plan.epsilon_units - 1) / plan.epsilon_units;
  plan.gap_cap = static_cast<uint64_t>(std::min<uint128>(cap, kMaxScoreGap));
  return plan;
}

absl::StatusOr<Plan> MakePlan(absl::Span<const double> qualities, double epsilon,
                              double sensitivity) {
  if (qualities.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        "the exponential mechanism takes at most 2^31 - 1 candidates");
  }
  return MakePlan(static_cast<int>(qualities.size()), epsilon, sensitivity);
}

// round(clamp(q / g, -kMaxScoreUnits, kMaxScoreUnits)), ties away from zero,
// NaN to the lowest score. q / g = q 2^-e with 2^-e a normal double (e in
// [-1020, 1003]) is exact except on overflow (to +-inf, which the clamp maps
// where the exact value goes) and below 2^-1022 in magnitude (which rounds
// to 0 either way), so this is the exact rounding of the exactly clamped
// score: non-expansive up to the rounding's g / 2. No libm call and no
// branch on the value (ldexp and round take shortcuts for 0 and small
// values, a timing signal of the scores): adding the largest double below
// 1/2 with the value's sign and truncating rounds half away from zero for
// every double (a sum that reaches the next integer does so only from a tie
// or above; from |v| >= 2^52, already integers, the sum rounds back to v).
int64_t ScoreUnits(double quality, double inverse_grid) {
  constexpr double kLimit = static_cast<double>(kMaxScoreUnits);
  constexpr double kBelowHalf = 0x1.fffffffffffffp-2;
  const double raw = quality * inverse_grid;
  const double scaled = std::isnan(raw) ? -kLimit : std::min(std::max(raw, -kLimit), kLimit);
  return static_cast<int64_t>(scaled + std::copysign(kBelowHalf, scaled));
}

// G_i = min(Q* - Q_i, C): the score gap below the best candidate in grid
// units. Replacing Q_i by max(Q_i, Q* - C) is 1-Lipschitz in the sup norm
// (docs/privacy.md 2.11), so the sensitivity S is kept.
std::vector<uint64_t> ScoreGaps(absl::Span<const double> qualities, const Plan& plan) {
  const double inverse_grid = std::ldexp(1.0, -plan.grid_exponent);
  std::vector<int64_t> units(qualities.size());
  for (size_t i = 0; i < units.size(); ++i) units[i] = ScoreUnits(qualities[i], inverse_grid);
  const int64_t best = *std::max_element(units.begin(), units.end());
  std::vector<uint64_t> gaps(units.size());
  for (size_t i = 0; i < gaps.size(); ++i) {
    // best - units[i] is in [0, 2^63]: exact in unsigned arithmetic.
    const uint64_t gap = static_cast<uint64_t>(best) - static_cast<uint64_t>(units[i]);
    gaps[i] = std::min(gap, plan.gap_cap);
  }
  return gaps;
}

// The exponential race (docs/privacy.md 2.11, step 4). Candidate i's key is
// kappa_i = gamma_i + log E_i with E_i = -log(1 - V_i) ~ Exp(1), V_i uniform
// in (0, 1) given by its infinite binary expansion; the draw reveals V_i's
// bits only as far as it needs them. X_i = min(V_i, 1 - V_i) in (0, 1/2]
// carries the precision: E = -log1p(-X) when V < 1/2, E = -log(X) otherwise.
// On (0, 1/2] both branches have |d log E / d log X| <= 1 / ln 2 (the first's
// slope X / ((1 - X)(-log(1 - X))) increases from 1 to 1 / ln 2, the
// second's is 1 / |log X|), so a relative error r in X moves log E by at
// most 1.4427 (-log(1 - r)) <= 1.5 r / (1 - r).

}  // namespace

namespace internal {

// First pass: one 64-bit word x (the first 64 bits of V). b = x, or ~x when
// the top bit says V >= 1/2, so that X in [b, b + 1] 2^-64. b 2^-64 rounds to
// double with relative error 2^-53 and [b, b + 1] adds 1 / b (X is within r
// of the rounded value, r = 1 / b + 2^-52); glibc lists log and log1p within
// 1-2 ulps on x86_64 (its manual, "Known Maximum Errors in Math Functions";
// its tests refuse any listed error above 9 ulps) and we allow 2^5 ulps
// (2^-48 relative) each; gamma = G (eps_num / den) is three roundings
// (2^-51); the sum one more. The margin is at least 3.5 times the error.
KeyBounds FirstPassKey(uint64_t x, uint64_t gap, double per_unit) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const bool upper = (x >> 63) != 0;
  const uint64_t b = upper ? ~x : x;
  if (b < kMinFirstPassUnits) return {-kInf, kInf};
  // b 2^-64 by a multiplication (exact: a power of two, no underflow), not
  // ldexp, a library call per candidate.
  const double v = static_cast<double>(b) * 0x1p-64;  // in [2^-56, 1/2]
  const double e = upper ? -std::log(v) : -std::log1p(-v);
  const double log_e = std::log(e);
  const double gamma = static_cast<double>(gap) * per_unit;
  const double key = gamma + log_e;
  const double r = 1.0 / static_cast<double>(b) + 0x1p-52;
  const double margin = 1.5 * r / (1.0 - r) + 0x1p-46 * (1.0 + gamma + std::fabs(log_e));
  return {key - margin, key + margin};
}

}  // namespace internal

namespace {

using internal::FirstPassKey;

// Refinement in __float128: the words after x until X's leading one, then
// two more (at least 129 significant bits); M, the 128 bits from the leading
// one, gives X in [M, M + 1] 2^e with M >= 2^127, and (Quad)M is within
// 2^-113 relative, so r = 2^-112 covers both. libquadmath's logq and log1pq
// (glibc's ldbl-128 code) are within 1-2 ulps; we allow 2^9 ulps (2^-104)
// each, and gamma (two roundings, at most 2048.5) and the sum add less than
// 2^-101. Margin 2^-100 (1 + gamma + |log E|) + 2^-111: at least 4 times the
// error. The result is intersected with the first pass's interval (both
// hold the key).
struct QuadInterval {
  Quad lo;
  Quad hi;
};

QuadInterval RefineKey(uint64_t x, uint64_t gap, const Plan& plan, const Interval& first,
                       NoiseSource* noise) {
  const bool upper = (x >> 63) != 0;
  const uint64_t flip = upper ? ~uint64_t{0} : uint64_t{0};
  uint64_t lead = x ^ flip;
  int zero_words = 0;
  while (lead == 0 && zero_words < kMaxZeroWords) {
    lead = noise->NextU64() ^ flip;
    ++zero_words;
  }
  if (lead == 0) return {static_cast<Quad>(first.lo), static_cast<Quad>(first.hi)};
  const uint64_t w1 = noise->NextU64() ^ flip;
  const uint64_t w2 = noise->NextU64() ^ flip;
  const int clz = __builtin_clzll(lead);
  // M = floor(P / 2^(64 - clz)) for P = lead w1 w2 (192 bits): in [2^127, 2^128).
  const uint128 m = (uint128{lead} << (64 + clz)) | (uint128{w1} << clz) |
                    (clz == 0 ? uint128{0} : uint128{w2 >> (64 - clz)});
  // P counts units of 2^-64 n, n = zero_words + 3 words of V.
  const int exponent = 64 - clz - 64 * (zero_words + 3);
  const Quad v = ldexpq(static_cast<Quad>(m), exponent);
  const Quad e = upper ? -logq(v) : -log1pq(-v);
  const Quad log_e = logq(e);
  const Quad gamma =
      static_cast<Quad>(uint128{gap} * plan.epsilon_units) / static_cast<Quad>(plan.denominator());
  const Quad key = gamma + log_e;
  // 2^-111 and 2^-100 are exact doubles (no Q literal suffix in ISO C++).
  const Quad margin =
      static_cast<Quad>(0x1p-111) + static_cast<Quad>(0x1p-100) * (1 + gamma + fabsq(log_e));
  QuadInterval out{key - margin, key + margin};
  out.lo = std::max(out.lo, static_cast<Quad>(first.lo));
  out.hi = std::min(out.hi, static_cast<Quad>(first.hi));
  return out;
}

}  // namespace

absl::Status ValidateExponentialMechanism(int num_candidates, double epsilon,
                                          double sensitivity) {
  return MakePlan(num_candidates, epsilon, sensitivity).status();
}

absl::StatusOr<int> ExponentialMechanismSelect(absl::Span<const double> qualities,
                                               double epsilon, double sensitivity,
                                               NoiseSource* noise) {
  DPC_ASSIGN_OR_RETURN(const Plan plan, MakePlan(qualities, epsilon, sensitivity));
  // From here on nothing fails: the rest is a total function of the scores
  // and the noise.
  const std::vector<uint64_t> gaps = ScoreGaps(qualities, plan);
  if (!noise->adds_noise()) {
    return static_cast<int>(std::find(gaps.begin(), gaps.end(), uint64_t{0}) - gaps.begin());
  }
  // The exponential race (Gumbel-max: Yellott 1977; Maddison, Tarlow & Minka
  // 2014): with E_i iid Exp(1), argmin_i gamma_i + log E_i is i with
  // probability exp(-gamma_i) / sum_j exp(-gamma_j). Pass 1 draws one word
  // per candidate, always K words and the same arithmetic whatever the
  // scores, and bounds each key; the winner is certain when the least upper
  // bound's candidate is the only one whose lower bound lies below it.
  const size_t count = gaps.size();
  const double per_unit = static_cast<double>(plan.epsilon_units) /
                          static_cast<double>(plan.denominator());
  std::vector<uint64_t> words(count);
  std::vector<Interval> keys(count);
  double least_hi = std::numeric_limits<double>::infinity();
  size_t least = 0;
  for (size_t i = 0; i < count; ++i) {
    words[i] = noise->NextU64();
    keys[i] = FirstPassKey(words[i], gaps[i], per_unit);
    if (keys[i].hi < least_hi) {
      least_hi = keys[i].hi;
      least = i;
    }
  }
  // The candidates that may hold the least key (the winner among them).
  std::vector<size_t> open;
  for (size_t i = 0; i < count; ++i) {
    if (keys[i].lo <= least_hi) open.push_back(i);
  }
  // open holds `least` (lo <= hi), so one element is `least` itself: decided.
  if (open.size() <= 1) return static_cast<int>(least);
  // Rare (probability about 2^-40 per selection): refine the open
  // candidates. Those left out have lo > least_hi >= every refined least hi.
  std::vector<QuadInterval> refined(open.size());
  size_t best = 0;
  for (size_t k = 0; k < open.size(); ++k) {
    const size_t i = open[k];
    refined[k] = RefineKey(words[i], gaps[i], plan, keys[i], noise);
    if (refined[k].hi < refined[best].hi) best = k;
  }
  // Decided when no other open lower bound reaches refined[best].hi: then
  // open[best] is the race's winner. Otherwise (probability below 2^-84 per
  // selection, docs/privacy.md 2.11 step 5) it is still returned: the law's
  // relative deviation, which the denominator's extra unit covers (step 6).
  return static_cast<int>(open[best]);
}

absl::StatusOr<std::vector<double>> ExponentialMechanismProbabilities(
    absl::Span<const double> qualities, double epsilon, double sensitivity) {
  DPC_ASSIGN_OR_RETURN(const Plan plan, MakePlan(qualities, epsilon, sensitivity));
  const std::vector<uint64_t> gaps = ScoreGaps(qualities, plan);
  // gamma_i = G_i eps_num / (2^31 (S + 1)); the best candidate's term is
  // exp(0) = 1, so the sum is at least 1 and nothing underflows to 0 / 0.
  const double per_unit = static_cast<double>(plan.epsilon_units) /
                          static_cast<double>(plan.denominator());
  std::vector<double> p(gaps.size());
  double sum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = std::exp(-static_cast<double>(gaps[i]) * per_unit);
    sum += p[i];
  }
  for (double& v : p) v /= sum;
  return p;
}

}  // namespace dpcurator::privacy
