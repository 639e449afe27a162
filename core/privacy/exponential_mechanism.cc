#include "core/privacy/exponential_mechanism.h"

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

// Everything the mechanism needs from its public parameters.
struct Plan {
  int grid_exponent = 0;           // g = 2^grid_exponent
  uint64_t sensitivity_units = 0;  // S = floor(Delta / g) + 1, in [2^20 + 1, 2^21]
  uint64_t epsilon_units = 0;      // eps_num = floor(eps 2^30), in [1, 2^50)
  // gamma_i = G_i eps_num / den, den = 2^31 S <= 2^52.
  uint128 denominator() const {
    return uint128{sensitivity_units} << (kEpsilonFractionBits + 1);
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

// round(clamp(q / g, -kMaxScoreUnits, kMaxScoreUnits)), NaN to the lowest
// score. q / g = ldexp(q, -e) is exact except on overflow (to +-inf, which
// the clamp maps where the exact value goes) and below 2^-1022 in
// magnitude (which rounds to 0 either way), so this is the exact rounding
// of the exactly clamped score: non-expansive up to the rounding's g / 2.
int64_t ScoreUnits(double quality, int grid_exponent) {
  constexpr double kLimit = static_cast<double>(kMaxScoreUnits);
  if (std::isnan(quality)) return -kMaxScoreUnits;
  const double scaled = std::clamp(std::ldexp(quality, -grid_exponent), -kLimit, kLimit);
  return static_cast<int64_t>(std::round(scaled));
}

// G_i = min(Q* - Q_i, kMaxScoreGap): the score gap below the best candidate
// in grid units. Replacing Q_i by max(Q_i, Q* - cap) is 1-Lipschitz in the
// sup norm (docs/privacy.md 2.11), so the sensitivity S is kept.
std::vector<uint64_t> ScoreGaps(absl::Span<const double> qualities, const Plan& plan) {
  std::vector<int64_t> units(qualities.size());
  for (size_t i = 0; i < units.size(); ++i) units[i] = ScoreUnits(qualities[i], plan.grid_exponent);
  const int64_t best = *std::max_element(units.begin(), units.end());
  std::vector<uint64_t> gaps(units.size());
  for (size_t i = 0; i < gaps.size(); ++i) {
    // best - units[i] is in [0, 2^63]: exact in unsigned arithmetic.
    const uint64_t gap = static_cast<uint64_t>(best) - static_cast<uint64_t>(units[i]);
    gaps[i] = std::min(gap, kMaxScoreGap);
  }
  return gaps;
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
  // Rejection sampling: propose i uniformly, accept with probability
  // exp(-gamma_i). One round picks i with probability exp(-gamma_i) / K, so
  // the accepted index has law exp(-gamma_i) / sum_j exp(-gamma_j) exactly;
  // a round accepts with probability >= 1 / K (the best has gamma = 0).
  // G_i eps_num <= 2^62 2^50 and den <= 2^52 fit in 128 bits.
  const uint128 denominator = plan.denominator();
  const uint128 count = gaps.size();
  while (true) {
    const size_t i = static_cast<size_t>(UniformBelow(noise, count));
    if (BernoulliExpNeg(noise, uint128{gaps[i]} * plan.epsilon_units, denominator)) {
      return static_cast<int>(i);
    }
  }
}

absl::StatusOr<std::vector<double>> ExponentialMechanismProbabilities(
    absl::Span<const double> qualities, double epsilon, double sensitivity) {
  DPC_ASSIGN_OR_RETURN(const Plan plan, MakePlan(qualities, epsilon, sensitivity));
  const std::vector<uint64_t> gaps = ScoreGaps(qualities, plan);
  // gamma_i = G_i eps_num / (2^31 S); the best candidate's term is exp(0) = 1,
  // so the sum is at least 1 and nothing underflows to 0 / 0.
  const double per_unit = static_cast<double>(plan.epsilon_units) /
                          std::ldexp(static_cast<double>(plan.sensitivity_units),
                                     kEpsilonFractionBits + 1);
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
