#ifndef DPCURATOR_CORE_PRIVACY_GRID_GAUSSIAN_H_
#define DPCURATOR_CORE_PRIVACY_GRID_GAUSSIAN_H_

// The (epsilon, delta) privacy profile of one release of the grid's discrete
// Gaussian (docs/privacy.md 4.2, 4.6): a d-coordinate vector snapped to the
// grid, plus i.i.d. N_Z(0, sigma^2) noise in grid units, with
//   * d <= kMaxGridGaussianDimension (GridGaussianNoise refuses more),
//   * sigma >= kMinGridGaussianUnits grid units (the grid sits
//     kGridBitsBelowScale = 20 binary orders below s * Delta),
//   * neighbours' snapped vectors differing by an integer vector mu with
//     ||mu||_2 / sigma <= 1/s.
//
// Theorem (docs/privacy.md 4.6, proved there). With hat_mu = 1/s, rho =
// sqrt(d_max) / (2 sigma_min), a = d_max / (8 sigma_min^2),
// b = 112.5 d_max / sigma_min^2 + d_max eta, eta = 2 sum_{j>=1}
// exp(-2 pi^2 sigma_min^2 j^2), tau = 2 d_max Phibar(30 - 1/(2 sigma_min)):
//   delta(eps) <= e^a Phibar(eps/hat_mu - hat_mu/2 - rho)
//                 - e^(eps - b) max(0, Phibar(eps/hat_mu + hat_mu/2 + rho) - tau).
// It is the exact continuous profile (Balle & Wang 2018, Thm. 8) with each
// threshold moved by rho (the L1 rounding of the lattice cubes) and each
// term scaled by the per-coordinate ratio of the discrete pmf to the
// Gaussian mass of its unit cube (Poisson summation for the normaliser,
// as in Canonne, Kamath, Steinke 2020, Sec. 2); at the constants below
// rho = 2^-11, a = 2^-23, b < 1.1e-4, tau < 1e-190.
//
// Only for ONE such release: adaptive composition of several is not
// covered by this statement, so the ledger uses it only while the net
// history is exactly one GridGaussian event (accounting.h).

#include <cstdint>

#include "absl/status/statusor.h"

namespace dpcurator::privacy {

inline constexpr int64_t kMaxGridGaussianDimension = int64_t{1} << 20;
inline constexpr double kMinGridGaussianUnits = 1048576.0;  // 2^20

// log of the theorem's bound on delta at eps >= 0 for hat_mu = 1/s > 0 (may
// be -inf when the bound is 0).
absl::StatusOr<double> GridGaussianLogDelta(double epsilon, double mu);

// The smallest eps >= 0 whose bound is <= delta (the bound is decreasing in
// eps), by bisection to kAnalyticGaussianTolerance; the upper end of the
// bracket is returned, and the bound is compared after multiplying it by
// (1 + 1e-9) to absorb the rounding of its evaluation, so the answer is
// never below the eps the theorem gives. delta in (0, 1), mu > 0.
absl::StatusOr<double> GridGaussianEpsilon(double delta, double mu);

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_GRID_GAUSSIAN_H_
