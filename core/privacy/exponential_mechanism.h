#ifndef DPCURATOR_CORE_PRIVACY_EXPONENTIAL_MECHANISM_H_
#define DPCURATOR_CORE_PRIVACY_EXPONENTIAL_MECHANISM_H_

// The exponential mechanism (McSherry & Talwar 2007) with a certified
// exponential-race sampler whose work does not depend on the scores
// (docs/privacy.md 2.11, "The exponential mechanism's exact sampler").
//
// Quality scores q (sensitivity Delta under the dataset's relation) are
// snapped to the public power-of-two grid g = 2^(floor(log2 Delta) -
// kScoreGridBits): Q_i = round(q_i / g), an integer, after clamping q_i / g to
// [-kMaxScoreUnits, kMaxScoreUnits]. q / g is exact (a power-of-two scale),
// and rounding moves a score by at most g / 2, so the integer scores have
// sensitivity S = floor(Delta / g) + 1 grid units (S g <= Delta + g, i.e. at
// most a relative 2^-20 more than Delta). The target law picks candidate i
// with probability proportional to exp(-gamma_i),
//   gamma_i = G_i eps_num / (2^(kEpsilonFractionBits + 1) (S + 1)),
//   G_i = min(Q* - Q_i, C),  Q* = max_j Q_j,
//   C = min(kMaxScoreGap, ceil(2048 2^31 (S + 1) / eps_num)),
// eps_num = floor(eps 2^kEpsilonFractionBits): the exponential mechanism with
// epsilon eps'' = eps' S / (S + 1), eps' = eps_num 2^-30 <= eps, on the clamped
// integer scores of sensitivity S.
//
// The draw is the exponential race (Gumbel-max; Yellott 1977, Maddison,
// Tarlow & Minka 2014): argmin_i gamma_i + log E_i for E_i iid Exp(1). One
// 64-bit word per candidate, always K words and the same double-precision
// arithmetic whatever the scores, bounds every key with a certified margin;
// when the least upper bound is not clear of every other lower bound
// (probability about 2^-40), the few overlapping candidates are refined in
// __float128 with more bits of the same uniforms. The returned index differs
// from the race's winner with probability below 2^-84, and its law is
// within a relative 2^-84 of the target law for every candidate; the one
// unit over S in gamma's denominator (a relative 2^-21 of epsilon) covers
// that deviation, so the sampler's law is eps'-DP and eps'-bounded-range,
// hence (eps^2 / 8)-zCDP (Cesar & Rogers 2021; MST Sec. 4), as the ledger
// charges it (PrivacyEvent::ExponentialMechanism(eps)).
//
// Totality (docs/privacy.md 6.1): after the public checks of
// ValidateExponentialMechanism, selection never fails. Huge finite and
// infinite scores are clamped to the grid range (non-expansive); a NaN score
// (a caller's bug: scores should be finite) counts as the lowest score.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/privacy/noise_source.h"

namespace dpcurator::privacy {

// The score grid sits this many binary orders below the sensitivity.
inline constexpr int kScoreGridBits = 20;
// Epsilon is rounded down to a multiple of 2^-kEpsilonFractionBits.
inline constexpr int kEpsilonFractionBits = 30;
// Public bounds on the parameters (docs/privacy.md 2.11): epsilon in
// [2^-30, kMaxExponentialEpsilon], sensitivity in
// [kMinExponentialSensitivity, DBL_MAX] (keeps the grid a normal double).
inline constexpr double kMaxExponentialEpsilon = 1e6;
inline constexpr double kMinExponentialSensitivity = 0x1.0p-1000;
// Scores are clamped to +-kMaxScoreUnits grid units, and their gaps below
// the best to at most kMaxScoreGap units (C above): every gap times eps_num
// (< 2^50) fits in 128 bits, and at the gap cap gamma is in (1023.99, 2048.5)
// for every accepted epsilon.
inline constexpr int64_t kMaxScoreUnits = int64_t{1} << 62;
inline constexpr uint64_t kMaxScoreGap = uint64_t{1} << 62;

// The public checks the mechanism makes, for callers to run before
// admission: num_candidates >= 1; epsilon finite, at least 2^-30 and at most
// kMaxExponentialEpsilon; sensitivity finite and in
// [kMinExponentialSensitivity, DBL_MAX]. ExponentialMechanismSelect fails
// exactly when this fails for (qualities.size(), epsilon, sensitivity).
absl::Status ValidateExponentialMechanism(int num_candidates, double epsilon,
                                          double sensitivity);

// Index of the chosen candidate (the law above). Fails only on the public
// checks (ValidateExponentialMechanism, and at most INT_MAX candidates);
// never on the values of `qualities`. With a source that adds no noise
// (ZeroNoiseSource) the choice is the first candidate with the best grid
// score (the mode of the law; tests of logic).
absl::StatusOr<int> ExponentialMechanismSelect(absl::Span<const double> qualities,
                                               double epsilon, double sensitivity,
                                               NoiseSource* noise);

// The target law of ExponentialMechanismSelect (softmax of -gamma_i from the
// clamped integer scores), in double precision, for tests and for people;
// the sampler's law is within a relative 2^-84 of it.
// Fails exactly when ExponentialMechanismSelect does.
absl::StatusOr<std::vector<double>> ExponentialMechanismProbabilities(
    absl::Span<const double> qualities, double epsilon, double sensitivity);

namespace internal {

// Bounds on one candidate's race key gamma + log E (docs/privacy.md 2.11,
// step 4), from the first 64 bits of its uniform and its gap G in grid
// units, gamma = G per_unit: the first pass's certified interval, exposed
// for tests of its margin. The whole line when the word fixes X to less
// than 2^-8.
struct KeyBounds {
  double lo;
  double hi;
};
KeyBounds FirstPassKey(uint64_t word, uint64_t gap, double per_unit);

}  // namespace internal
}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_EXPONENTIAL_MECHANISM_H_
