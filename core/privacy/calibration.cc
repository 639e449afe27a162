#include "core/privacy/calibration.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::privacy {
namespace {

constexpr int kMaxSearchSteps = 400;
constexpr double kInfinity = std::numeric_limits<double>::infinity();

absl::Status ValidateTarget(double epsilon, double delta,
                            const CalibrationOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(epsilon, "Epsilon"));
  DPC_RETURN_IF_ERROR(ValidateInOpenUnitInterval(delta, "Delta"));
  if (!(options.relative_tolerance > 0 && options.relative_tolerance < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Relative tolerance must be in (0, 1), got ", options.relative_tolerance));
  }
  return absl::OkStatus();
}

// eps of prior + charge, judged exactly as the ledger would.
absl::StatusOr<double> EpsilonWith(const EventCharge& charge,
                                   NeighbouringRelation natural_relation,
                                   double delta,
                                   const CalibrationOptions& options) {
  const AccountantState state = options.prior != nullptr
                                    ? *options.prior
                                    : AccountantState(natural_relation);
  DPC_ASSIGN_OR_RETURN(EpsilonReport report,
                       state.EpsilonIfAdded(charge, delta, options.conversion));
  return report.epsilon;
}

// Feasibility of a candidate: eps <= target.
using Feasible = std::function<absl::StatusOr<bool>(double)>;

// Smallest s in [kMin, kMax] with feasible(s), assuming feasibility grows
// with s; returns the feasible end of the final bracket.
absl::StatusOr<double> SearchNoiseMultiplier(const Feasible& feasible,
                                             double relative_tolerance) {
  double lo = 1.0;  // infeasible end, once found
  double hi = 1.0;  // feasible end, once found
  DPC_ASSIGN_OR_RETURN(bool ok, feasible(1.0));
  if (ok) {
    while (true) {
      lo = hi / 2.0;
      if (lo < kMinCalibratedNoiseMultiplier) return hi;
      DPC_ASSIGN_OR_RETURN(bool lo_ok, feasible(lo));
      if (!lo_ok) break;
      hi = lo;
    }
  } else {
    while (true) {
      hi = lo * 2.0;
      if (hi > kMaxCalibratedNoiseMultiplier) {
        return absl::OutOfRangeError(absl::StrCat(
            "Target not reachable with noise multiplier up to ",
            kMaxCalibratedNoiseMultiplier));
      }
      DPC_ASSIGN_OR_RETURN(bool hi_ok, feasible(hi));
      if (hi_ok) break;
      lo = hi;
    }
  }
  for (int step = 0; step < kMaxSearchSteps && hi / lo - 1.0 > relative_tolerance;
       ++step) {
    const double mid = std::sqrt(lo * hi);
    if (mid <= lo || mid >= hi) break;
    DPC_ASSIGN_OR_RETURN(bool mid_ok, feasible(mid));
    (mid_ok ? hi : lo) = mid;
  }
  return hi;
}

// eps of T steps: SelfCompose(step, T), whose curve is the step's curve times
// T exactly as ComputeRdp forms it, so one curve serves every T.
absl::StatusOr<double> EpsilonOfSteps(const PrivacyEvent& step,
                                      const std::vector<double>& step_rdp,
                                      int64_t steps, NeighbouringRelation relation,
                                      double delta,
                                      const CalibrationOptions& options) {
  DPC_ASSIGN_OR_RETURN(PrivacyEvent event, PrivacyEvent::SelfCompose(step, steps));
  std::vector<double> values = step_rdp;
  for (double& v : values) v *= static_cast<double>(steps);
  DPC_ASSIGN_OR_RETURN(RdpCurve curve, RdpCurve::FromValues(std::move(values)));
  DPC_ASSIGN_OR_RETURN(EventCharge charge, EventCharge::WithCurve(event, curve));
  return EpsilonWith(charge, relation, delta, options);
}

// Whether `steps` sampled Gaussian steps at rate q and multiplier s stay
// within epsilon at delta, judged as the ledger would (EpsilonOfSteps).
absl::StatusOr<bool> SampledStepsWithin(SamplingScheme scheme, double q, double s,
                                        int64_t steps, double epsilon, double delta,
                                        const CalibrationOptions& options) {
  DPC_ASSIGN_OR_RETURN(PrivacyEvent step,
                       SampledGaussianEvent(scheme, q, s, options.sampled_noise));
  DPC_ASSIGN_OR_RETURN(std::vector<double> rdp, ComputeRdp(step, DefaultRdpOrders()));
  DPC_ASSIGN_OR_RETURN(double eps, EpsilonOfSteps(step, rdp, steps, RelationOf(scheme),
                                                  delta, options));
  return eps <= epsilon;
}

// num_gaussians events made by `make_event` (a Gaussian factory) with
// multiplier s, judged as the ledger would.
absl::StatusOr<double> CalibrateRepeatedGaussian(
    absl::StatusOr<PrivacyEvent> (*make_event)(double), int64_t num_gaussians,
    double epsilon, double delta, const CalibrationOptions& options) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(num_gaussians, "Number of Gaussians"));
  DPC_RETURN_IF_ERROR(ValidateTarget(epsilon, delta, options));
  Feasible feasible = [&](double s) -> absl::StatusOr<bool> {
    DPC_ASSIGN_OR_RETURN(PrivacyEvent one, make_event(s));
    // One event stays bare, as the server charges it (a GridGaussian's
    // profile applies to a bare event only; for the other kinds the charge
    // is bit for bit that of SelfCompose(one, 1)).
    PrivacyEvent all = one;
    if (num_gaussians > 1) {
      DPC_ASSIGN_OR_RETURN(all, PrivacyEvent::SelfCompose(one, num_gaussians));
    }
    DPC_ASSIGN_OR_RETURN(EventCharge charge, EventCharge::Of(all));
    DPC_ASSIGN_OR_RETURN(double eps, EpsilonWith(charge, NeighbouringRelation::kAddRemove,
                                                 delta, options));
    return eps <= epsilon;
  };
  return SearchNoiseMultiplier(feasible, options.relative_tolerance);
}

}  // namespace

absl::StatusOr<double> CalibrateGaussianNoiseMultiplier(
    int64_t num_gaussians, double epsilon, double delta,
    const CalibrationOptions& options) {
  return CalibrateRepeatedGaussian(&PrivacyEvent::Gaussian, num_gaussians, epsilon,
                                   delta, options);
}

absl::StatusOr<double> CalibrateDiscreteGaussianNoiseMultiplier(
    int64_t num_gaussians, double epsilon, double delta,
    const CalibrationOptions& options) {
  return CalibrateRepeatedGaussian(&PrivacyEvent::DiscreteGaussian, num_gaussians,
                                   epsilon, delta, options);
}

absl::StatusOr<double> CalibrateGridGaussianNoiseMultiplier(
    int64_t num_gaussians, double epsilon, double delta,
    const CalibrationOptions& options) {
  return CalibrateRepeatedGaussian(&PrivacyEvent::GridGaussian, num_gaussians, epsilon,
                                   delta, options);
}

absl::StatusOr<double> CalibrateEventNoiseMultiplier(
    const std::function<absl::StatusOr<PrivacyEvent>(double)>& make_event,
    NeighbouringRelation relation, double epsilon, double delta,
    const CalibrationOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateTarget(epsilon, delta, options));
  Feasible feasible = [&](double s) -> absl::StatusOr<bool> {
    DPC_ASSIGN_OR_RETURN(PrivacyEvent event, make_event(s));
    DPC_ASSIGN_OR_RETURN(EventCharge charge, EventCharge::Of(event));
    DPC_ASSIGN_OR_RETURN(double eps, EpsilonWith(charge, relation, delta, options));
    return eps <= epsilon;
  };
  return SearchNoiseMultiplier(feasible, options.relative_tolerance);
}

absl::StatusOr<double> RdpGaussianSigma(double epsilon, double delta,
                                        double sensitivity) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(sensitivity, "Sensitivity"));
  DPC_ASSIGN_OR_RETURN(const double s,
                       CalibrateDiscreteGaussianNoiseMultiplier(1, epsilon, delta));
  // RDP scales with (sensitivity / sigma)^2, so the multiplier for unit
  // sensitivity serves every sensitivity. One step up from the rounded
  // product makes sigma >= s * sensitivity exactly, hence
  // fl(sigma / sensitivity) >= s (division rounds monotonically).
  const double sigma = std::nextafter(s * sensitivity, kInfinity);
  if (!std::isfinite(sigma)) {
    return absl::OutOfRangeError(absl::StrCat(
        "Gaussian sigma overflows for sensitivity ", sensitivity));
  }
  return sigma;
}

absl::StatusOr<double> CalibrateSampledGaussianNoiseMultiplier(
    SamplingScheme scheme, double sampling_rate, int64_t steps, double epsilon,
    double delta, const CalibrationOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateInUnitInterval(sampling_rate, "Sampling rate"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(steps, "Steps"));
  DPC_RETURN_IF_ERROR(ValidateTarget(epsilon, delta, options));
  Feasible feasible = [&](double s) {
    return SampledStepsWithin(scheme, sampling_rate, s, steps, epsilon, delta, options);
  };
  return SearchNoiseMultiplier(feasible, options.relative_tolerance);
}

absl::StatusOr<double> CalibrateSampledDiscreteGaussianNoiseMultiplier(
    SamplingScheme scheme, double sampling_rate, int64_t steps, double epsilon,
    double delta, const CalibrationOptions& options) {
  CalibrationOptions discrete = options;
  discrete.sampled_noise = SampledNoise::kDiscrete;
  return CalibrateSampledGaussianNoiseMultiplier(scheme, sampling_rate, steps, epsilon,
                                                 delta, discrete);
}

absl::StatusOr<int64_t> MaxSteps(SamplingScheme scheme, double sampling_rate,
                                 double noise_multiplier, double epsilon,
                                 double delta, const CalibrationOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateTarget(epsilon, delta, options));
  DPC_ASSIGN_OR_RETURN(PrivacyEvent step,
                       SampledGaussianEvent(scheme, sampling_rate, noise_multiplier,
                                            options.sampled_noise));
  DPC_ASSIGN_OR_RETURN(std::vector<double> rdp, ComputeRdp(step, DefaultRdpOrders()));
  auto feasible = [&](int64_t t) -> absl::StatusOr<bool> {
    DPC_ASSIGN_OR_RETURN(double eps, EpsilonOfSteps(step, rdp, t, RelationOf(scheme),
                                                    delta, options));
    return eps <= epsilon;
  };
  DPC_ASSIGN_OR_RETURN(bool one_ok, feasible(1));
  if (!one_ok) return 0;
  int64_t lo = 1;  // feasible
  int64_t hi = 2;  // infeasible, once found
  while (true) {
    if (hi > kMaxCalibratedSteps) return kMaxCalibratedSteps;
    DPC_ASSIGN_OR_RETURN(bool ok, feasible(hi));
    if (!ok) break;
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    DPC_ASSIGN_OR_RETURN(bool ok, feasible(mid));
    (ok ? lo : hi) = mid;
  }
  return lo;
}

absl::StatusOr<double> MaxSamplingRate(SamplingScheme scheme,
                                       double noise_multiplier, int64_t steps,
                                       double epsilon, double delta,
                                       const CalibrationOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(steps, "Steps"));
  DPC_RETURN_IF_ERROR(ValidateTarget(epsilon, delta, options));
  auto feasible = [&](double q) {
    return SampledStepsWithin(scheme, q, noise_multiplier, steps, epsilon, delta, options);
  };
  DPC_ASSIGN_OR_RETURN(bool all_ok, feasible(1.0));
  if (all_ok) return 1.0;
  // Halve until feasible; below 2^-60 only q = 0 is left.
  double hi = 1.0;  // infeasible
  double lo = 0.5;  // feasible, once found
  while (true) {
    if (lo < 0x1p-60) {
      DPC_ASSIGN_OR_RETURN(bool zero_ok, feasible(0.0));
      if (zero_ok) return 0.0;
      return absl::OutOfRangeError("Target not reachable even at sampling rate 0");
    }
    DPC_ASSIGN_OR_RETURN(bool ok, feasible(lo));
    if (ok) break;
    hi = lo;
    lo /= 2.0;
  }
  for (int step = 0; step < kMaxSearchSteps && hi / lo - 1.0 > options.relative_tolerance;
       ++step) {
    const double mid = lo + (hi - lo) / 2.0;
    if (mid <= lo || mid >= hi) break;
    DPC_ASSIGN_OR_RETURN(bool ok, feasible(mid));
    (ok ? lo : hi) = mid;
  }
  return lo;
}

absl::StatusOr<double> LargestRhoWithin(
    double epsilon, double delta,
    const std::function<absl::StatusOr<double>(double rho)>& epsilon_of,
    const std::string& recipe) {
  double lo = 1e-3;
  double hi = 1e-3;
  for (int i = 0; i < 200; ++i) {
    DPC_ASSIGN_OR_RETURN(double e, epsilon_of(lo));
    if (e <= epsilon) break;
    hi = lo;
    lo /= 4.0;
  }
  for (int i = 0; i < 200; ++i) {
    DPC_ASSIGN_OR_RETURN(double e, epsilon_of(hi));
    if (e > epsilon) break;
    lo = hi;
    hi *= 4.0;
  }
  while (hi / lo > 1.0 + 1e-6) {
    const double mid = std::sqrt(lo * hi);
    DPC_ASSIGN_OR_RETURN(double e, epsilon_of(mid));
    (e <= epsilon ? lo : hi) = mid;
  }
  DPC_ASSIGN_OR_RETURN(double e, epsilon_of(lo));
  if (!(e <= epsilon)) {
    return absl::InvalidArgumentError(absl::StrCat("no ", recipe, " budget fits epsilon ",
                                                   epsilon, " at delta ", delta,
                                                   "; raise epsilon"));
  }
  return lo;
}

}  // namespace dpcurator::privacy
