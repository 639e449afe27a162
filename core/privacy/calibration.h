#ifndef DPCURATOR_CORE_PRIVACY_CALIBRATION_H_
#define DPCURATOR_CORE_PRIVACY_CALIBRATION_H_

// Calibration (PRIVACY.md "Accounting"): find a noise multiplier, step count
// or sampling rate for a target (eps, delta). Conservative by construction:
// every candidate is judged by the ledger's own path (AccountantState: prior
// state, Add the event, Epsilon), and the search keeps the feasible end of
// its bracket, so the returned value always gives eps <= target under the
// same accountant; it is within the stated tolerance of the boundary.

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "core/privacy/accounting.h"
#include "core/privacy/conversion.h"
#include "core/privacy/sampled_gaussian.h"  // SamplingScheme, SampledNoise

namespace dpcurator::privacy {

struct CalibrationOptions {
  ConversionOptions conversion;
  // Budget already spent on the dataset; nullptr means a fresh state. Its
  // relation must admit the calibrated event.
  const AccountantState* prior = nullptr;
  // Noise multipliers and sampling rates are bracketed until hi/lo - 1 is
  // below this.
  double relative_tolerance = 1e-9;
  // Which events CalibrateSampledGaussianNoiseMultiplier, MaxSteps and
  // MaxSamplingRate judge.
  SampledNoise sampled_noise = SampledNoise::kContinuous;
};

// Noise multipliers are searched within these bounds.
inline constexpr double kMinCalibratedNoiseMultiplier = 1e-4;
inline constexpr double kMaxCalibratedNoiseMultiplier = 1e7;
// MaxSteps never answers more than this.
inline constexpr int64_t kMaxCalibratedSteps = int64_t{1} << 40;

// Smallest s (within tolerance, rounded up) such that num_gaussians plain
// continuous Gaussians with noise multiplier s compose to eps <= epsilon at
// delta: the RDP bound and the exact analytic Gaussian, whichever is smaller
// (unless options.conversion says otherwise). num_gaussians >= 1. For
// continuous noise only; the server's releases use the discrete version.
absl::StatusOr<double> CalibrateGaussianNoiseMultiplier(
    int64_t num_gaussians, double epsilon, double delta,
    const CalibrationOptions& options = {});

// The same for num_gaussians DiscreteGaussian events (discrete_gaussian
// rows: how the server charged releases before GridGaussian): judged by the
// ledger's path, which gives such events the RDP conversion only
// (events.h), so this is never below CalibrateGaussianNoiseMultiplier. E.g.
// 4.0454 at (1, 1e-5) for one event, against 3.7306 for the continuous
// Gaussian's analytic bound.
absl::StatusOr<double> CalibrateDiscreteGaussianNoiseMultiplier(
    int64_t num_gaussians, double epsilon, double delta,
    const CalibrationOptions& options = {});

// The same for num_gaussians GridGaussian events, what the server charges
// its one-shot releases as now: one event on a fresh state is judged by the
// discrete Gaussian's own privacy profile (grid_gaussian.h; the ledger's
// smaller bound), several (or a non-empty prior) by RDP. E.g. 3.75 at
// (1, 1e-5) for one release (docs/privacy.md 4.6), against 4.0454 by RDP
// and 3.7306 for continuous noise.
absl::StatusOr<double> CalibrateGridGaussianNoiseMultiplier(
    int64_t num_gaussians, double epsilon, double delta,
    const CalibrationOptions& options = {});

// The same for any one event make_event(s) whose privacy loss does not grow
// with s, charged on a fresh `relation` state (or options.prior) and judged
// as the ledger would: for events of no fixed shape above, e.g. a
// partitioned release's PartitionedEvent (plan/partition.h).
absl::StatusOr<double> CalibrateEventNoiseMultiplier(
    const std::function<absl::StatusOr<PrivacyEvent>(double)>& make_event,
    NeighbouringRelation relation, double epsilon, double delta,
    const CalibrationOptions& options = {});

// Noise std sigma for one (discrete or continuous) Gaussian mechanism with L2
// sensitivity `sensitivity` (finite, > 0) to be (epsilon, delta)-DP by the
// RDP route: CalibrateDiscreteGaussianNoiseMultiplier(1, ...) on a fresh
// state, times the sensitivity, rounded up so that sigma / sensitivity is
// never below the calibrated multiplier. For the local-DP Gaussian
// (core/ldp/mechanism.h), whose noise is discrete.
absl::StatusOr<double> RdpGaussianSigma(double epsilon, double delta,
                                        double sensitivity);

// Smallest s for `steps` steps of the sampled Gaussian at rate q in (0, 1].
absl::StatusOr<double> CalibrateSampledGaussianNoiseMultiplier(
    SamplingScheme scheme, double sampling_rate, int64_t steps, double epsilon,
    double delta, const CalibrationOptions& options = {});

// The same for the grid's discrete Gaussian steps the server draws
// (PoissonSampledDiscreteGaussian / SampledWithoutReplacementDiscreteGaussian):
// options.sampled_noise is taken as SampledNoise::kDiscrete.
absl::StatusOr<double> CalibrateSampledDiscreteGaussianNoiseMultiplier(
    SamplingScheme scheme, double sampling_rate, int64_t steps, double epsilon,
    double delta, const CalibrationOptions& options = {});

// Largest T in [0, kMaxCalibratedSteps] with eps(T steps) <= epsilon.
absl::StatusOr<int64_t> MaxSteps(SamplingScheme scheme, double sampling_rate,
                                 double noise_multiplier, double epsilon,
                                 double delta,
                                 const CalibrationOptions& options = {});

// Largest q in [0, 1] (within tolerance, rounded down) with eps <= epsilon.
absl::StatusOr<double> MaxSamplingRate(SamplingScheme scheme,
                                       double noise_multiplier, int64_t steps,
                                       double epsilon, double delta,
                                       const CalibrationOptions& options = {});

// The largest budget parameter rho (to a relative 1e-6, from below) whose
// ledger epsilon at the caller's delta, epsilon_of(rho), is at most
// `epsilon`: a doubling search from 1e-3 (by factors of 4, 200 at most each
// way), then bisection in log scale. epsilon_of must be non-decreasing in
// rho. The recipes' budgets (MST, AIM) are calibrated this way; `recipe`
// names one in the refusal when no rho fits.
absl::StatusOr<double> LargestRhoWithin(
    double epsilon, double delta,
    const std::function<absl::StatusOr<double>(double rho)>& epsilon_of,
    const std::string& recipe);

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_CALIBRATION_H_
