#ifndef DPCURATOR_CORE_PRIVACY_CONVERSION_H_
#define DPCURATOR_CORE_PRIVACY_CONVERSION_H_

// From RDP curves (and, for plain continuous Gaussians, the exact analytic
// Gaussian) to (eps, delta)-DP statements. PRIVACY.md "Accounting": the
// ledger reports the smaller of valid bounds, never anything else. Discrete
// (grid) Gaussian events never get the continuous exact profile (events.h
// DiscreteGaussianEvent); one GridGaussian event alone gets the discrete
// Gaussian's own profile (grid_gaussian.h).

#include <optional>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/privacy/events.h"

namespace dpcurator::privacy {

// Orders at or below this are skipped by the improved conversion: the bound
// is numerically unstable as alpha -> 1 and useless there (dp_accounting).
inline constexpr double kMinConversionOrder = 1.01;

enum class RdpConversion {
  // eps = min_alpha rdp + log1p(-1/alpha) - log(delta alpha)/(alpha-1)
  // (Canonne, Kamath, Steinke 2020, Prop. 12; Asoodeh et al. 2020, Eq. 20),
  // plus the KL bound delta <= sqrt(1 - exp(-rdp)) that gives eps = 0 for
  // tiny curves. The ledger's conversion.
  kImproved,
  // eps = min_alpha rdp - log(delta)/(alpha-1) (Mironov 2017, Prop. 3): what
  // several papers state; kept for reproducing their numbers.
  kClassic,
};

struct RdpEpsilon {
  double epsilon;        // >= 0, +inf if no order gives a finite bound
  double optimal_order;  // the minimising order
  // The optimum is the first or last of the given orders: a wider grid might
  // give a smaller eps (the bound itself is still valid).
  bool order_at_grid_edge;
};

// orders.size() == rdp.size(); orders > 1; rdp >= 0 or +inf; delta in (0,1).
absl::StatusOr<RdpEpsilon> RdpToEpsilon(
    absl::Span<const double> orders, absl::Span<const double> rdp, double delta,
    RdpConversion conversion = RdpConversion::kImproved);

struct RdpDelta {
  double delta;  // in [0, 1]
  double optimal_order;
};

// The inverse of the improved bound at fixed eps >= 0:
// log delta = min_alpha (alpha-1)(rdp - eps + log1p(-1/alpha)) - log(alpha)
// over alpha > kMinConversionOrder (Canonne, Kamath, Steinke 2020, Prop. 12
// solved for delta), and the KL bound 0.5 log(1 - exp(-rdp)) at every order;
// clamped to <= 1.
absl::StatusOr<RdpDelta> RdpToDelta(absl::Span<const double> orders,
                                    absl::Span<const double> rdp,
                                    double epsilon);

struct ConversionOptions {
  RdpConversion rdp_conversion = RdpConversion::kImproved;
  // When every event is a plain continuous Gaussian (IsPlainGaussian), also
  // use the exact composition and Balle & Wang 2018 Thm. 8 (PRIVACY.md);
  // false gives the RDP bound only. Never applies to discrete Gaussians.
  bool use_exact_gaussian = true;
  // When the whole history is one GridGaussian event, also use the discrete
  // Gaussian's own privacy profile (grid_gaussian.h, docs/privacy.md 4.6).
  bool use_grid_gaussian_profile = true;
};

struct EpsilonReport {
  double epsilon;       // min of the valid bounds below
  double epsilon_rdp;   // RDP conversion on the grid
  // Only when every event is a plain continuous Gaussian; never with a
  // DiscreteGaussian event anywhere in the history.
  std::optional<double> epsilon_exact;
  // Only when the whole history is one GridGaussian event: the discrete
  // Gaussian's privacy profile (grid_gaussian.h).
  std::optional<double> epsilon_grid_exact;
  double optimal_order;                 // of the RDP conversion
  bool order_at_grid_edge;              // of the RDP conversion
  // The summed delta of the history's approximate events (events.h
  // ApproximateEvent): every bound above is at delta minus this, and all
  // are +inf when it reaches delta.
  double approximate_delta = 0.0;
};

// Report for a curve on DefaultRdpOrders() and, when every event was a plain
// continuous Gaussian, sum_i 1/s_i^2 (mu^2 of the equivalent single
// Gaussian; +inf allowed, meaning no exact bound).
absl::StatusOr<EpsilonReport> MakeEpsilonReport(
    absl::Span<const double> rdp_on_default_grid,
    std::optional<double> plain_gaussian_inverse_variance_sum, double delta,
    const ConversionOptions& options = {});
// The same, and when the whole history is one GridGaussian event, its 1/s^2
// (SingleGridGaussianInverseVariance).
absl::StatusOr<EpsilonReport> MakeEpsilonReport(
    absl::Span<const double> rdp_on_default_grid,
    std::optional<double> plain_gaussian_inverse_variance_sum,
    std::optional<double> single_grid_gaussian_inverse_variance, double delta,
    const ConversionOptions& options = {});

// MakeEpsilonReport at delta - approximate_delta (rounded down), the
// history's summed ApproximateEvent deltas; every bound +inf when
// approximate_delta >= delta. The same as MakeEpsilonReport at delta when
// approximate_delta == 0.
absl::StatusOr<EpsilonReport> MakeApproximateEpsilonReport(
    absl::Span<const double> rdp_on_default_grid,
    std::optional<double> plain_gaussian_inverse_variance_sum,
    std::optional<double> single_grid_gaussian_inverse_variance, double approximate_delta,
    double delta, const ConversionOptions& options = {});

// Report for one (typically composed) event on DefaultRdpOrders(), at
// delta - ApproximateDelta(event) (see EpsilonReport::approximate_delta).
absl::StatusOr<EpsilonReport> ComputeEpsilonReport(
    const PrivacyEvent& event, double delta,
    const ConversionOptions& options = {});

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_CONVERSION_H_
