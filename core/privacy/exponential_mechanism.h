#ifndef DPCURATOR_CORE_PRIVACY_EXPONENTIAL_MECHANISM_H_
#define DPCURATOR_CORE_PRIVACY_EXPONENTIAL_MECHANISM_H_

// The exponential mechanism (McSherry & Talwar 2007): choose candidate i
// with probability proportional to exp(eps q_i / (2 Delta)), Delta the
// sensitivity of the quality scores q under the dataset's relation. It is
// eps-DP and eps-bounded-range, hence (eps^2 / 8)-zCDP (Cesar & Rogers
// 2021, bounded range; MST Sec. 4); the ledger charges it as
// PrivacyEvent::ExponentialMechanism(eps) (docs/privacy.md 2.11).
//
// Sampled by the Gumbel-max trick: argmax_i eps q_i / (2 Delta) + G_i with
// G_i = -log(-log U_i) i.i.d. standard Gumbel, U_i uniform from the
// NoiseSource (the CSPRNG in production), which has exactly the
// exponential mechanism's law (Yellott 1977; Durfee & Rogers 2019). The
// draw is in floating point, unlike the grid noise: a selection reveals an
// index, never a perturbed value, so the low-order-bit attacks on
// floating-point Laplace noise (Mironov 2012) have no released value to read.

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/privacy/noise_source.h"

namespace dpcurator::privacy {

// Index of the chosen candidate. qualities non-empty and finite; epsilon and
// sensitivity finite and > 0. With a source that adds no noise
// (ZeroNoiseSource) the choice is the first best candidate (tests of logic).
absl::StatusOr<int> ExponentialMechanismSelect(absl::Span<const double> qualities,
                                               double epsilon, double sensitivity,
                                               NoiseSource* noise);

// The mechanism's selection probabilities (softmax of eps q / (2 Delta)),
// for tests and for people.
absl::StatusOr<std::vector<double>> ExponentialMechanismProbabilities(
    absl::Span<const double> qualities, double epsilon, double sensitivity);

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_EXPONENTIAL_MECHANISM_H_
