#ifndef DPCURATOR_CORE_PRIVACY_ANALYTIC_GAUSSIAN_H_
#define DPCURATOR_CORE_PRIVACY_ANALYTIC_GAUSSIAN_H_

// The analytic Gaussian mechanism (Balle & Wang 2018, "Improving the Gaussian
// Mechanism for Differential Privacy", Thm. 8): the Gaussian mechanism with
// mu = sensitivity / sigma is (eps, delta)-DP exactly for
//   delta(eps; mu) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),
// and not for any smaller delta. A composition of plain Gaussians with noise
// multipliers s_i is one Gaussian with mu = sqrt(sum 1/s_i^2).

#include "absl/status/statusor.h"

namespace dpcurator::privacy {

// Bisection stops when the bracket is this narrow (absolute, in epsilon; in
// mu it is relative).
inline constexpr double kAnalyticGaussianTolerance = 1e-12;

// delta(eps; mu) of Thm. 8, evaluated in log space (stable for large eps and
// tiny delta). eps >= 0, mu > 0.
absl::StatusOr<double> AnalyticGaussianDelta(double epsilon, double mu);
// log of the same (may be -inf when delta underflows to 0).
absl::StatusOr<double> AnalyticGaussianLogDelta(double epsilon, double mu);

// The smallest eps >= 0 with delta(eps; mu) <= delta, by bracketing and
// bisection to kAnalyticGaussianTolerance; the upper end of the final bracket
// is returned, so the answer is never below the true eps. delta in (0, 1).
absl::StatusOr<double> AnalyticGaussianEpsilon(double delta, double mu);

// The smallest noise std sigma for which the Gaussian mechanism with this L2
// sensitivity is (eps, delta)-DP (Balle & Wang 2018, Alg. 1 solved by
// bisection); the feasible end of the bracket is returned.
absl::StatusOr<double> AnalyticGaussianSigma(double epsilon, double delta,
                                             double sensitivity);

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_ANALYTIC_GAUSSIAN_H_
