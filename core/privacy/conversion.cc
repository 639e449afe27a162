#include "core/privacy/conversion.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/privacy/analytic_gaussian.h"
#include "core/privacy/grid_gaussian.h"
#include "core/privacy/rdp.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

absl::Status ValidateCurve(absl::Span<const double> orders,
                           absl::Span<const double> rdp) {
  if (orders.size() != rdp.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Orders and RDP values must have the same length, got ",
                     orders.size(), " and ", rdp.size()));
  }
  if (orders.empty()) {
    return absl::InvalidArgumentError("At least one RDP order is required");
  }
  for (size_t i = 0; i < orders.size(); ++i) {
    if (!std::isfinite(orders[i]) || orders[i] <= 1.0) {
      return absl::InvalidArgumentError(
          absl::StrCat("RDP order must be finite and > 1, got ", orders[i]));
    }
    if (std::isnan(rdp[i]) || rdp[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("RDP values must be non-negative or +inf, got ", rdp[i],
                       " at order ", orders[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RdpEpsilon> RdpToEpsilon(absl::Span<const double> orders,
                                        absl::Span<const double> rdp,
                                        double delta, RdpConversion conversion) {
  DPC_RETURN_IF_ERROR(ValidateInOpenUnitInterval(delta, "Delta"));
  DPC_RETURN_IF_ERROR(ValidateCurve(orders, rdp));
  const double log_delta = std::log(delta);
  size_t best = 0;
  double best_eps = kInf;
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i];
    const double r = rdp[i];
    double eps = kInf;
    if (std::isinf(r)) {
      eps = kInf;
    } else if (conversion == RdpConversion::kClassic) {
      // Mironov 2017, Prop. 3.
      eps = r - log_delta / (a - 1.0);
    } else if (delta * delta + std::expm1(-r) > 0) {
      // delta <= sqrt(1 - exp(-KL)) and KL <= rdp(alpha): eps = 0 suffices.
      eps = 0.0;
    } else if (a > kMinConversionOrder) {
      // Canonne, Kamath, Steinke 2020, Prop. 12.
      eps = r + std::log1p(-1.0 / a) - (log_delta + std::log(a)) / (a - 1.0);
    }
    if (eps < best_eps) {
      best_eps = eps;
      best = i;
    }
  }
  return RdpEpsilon{std::max(0.0, best_eps), orders[best],
                    best == 0 || best + 1 == orders.size()};
}

absl::StatusOr<RdpDelta> RdpToDelta(absl::Span<const double> orders,
                                    absl::Span<const double> rdp,
                                    double epsilon) {
  DPC_RETURN_IF_ERROR(ValidateFiniteNonNegative(epsilon, "Epsilon"));
  DPC_RETURN_IF_ERROR(ValidateCurve(orders, rdp));
  size_t best = 0;
  double best_log_delta = kInf;
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i];
    const double r = rdp[i];
    if (std::isinf(r)) continue;
    // KL bound: delta <= sqrt(1 - exp(-rdp)).
    double log_delta =
        r == 0.0 ? -kInf : 0.5 * std::log(-std::expm1(-r));
    if (a > kMinConversionOrder) {
      // Canonne, Kamath, Steinke 2020, Prop. 12, solved for delta.
      log_delta = std::min(
          log_delta, (a - 1.0) * (r - epsilon + std::log1p(-1.0 / a)) - std::log(a));
    }
    if (log_delta < best_log_delta) {
      best_log_delta = log_delta;
      best = i;
    }
  }
  return RdpDelta{std::min(1.0, std::exp(best_log_delta)), orders[best]};
}

absl::StatusOr<EpsilonReport> MakeEpsilonReport(
    absl::Span<const double> rdp_on_default_grid,
    std::optional<double> plain_gaussian_inverse_variance_sum, double delta,
    const ConversionOptions& options) {
  return MakeEpsilonReport(rdp_on_default_grid, plain_gaussian_inverse_variance_sum,
                           std::nullopt, delta, options);
}

absl::StatusOr<EpsilonReport> MakeEpsilonReport(
    absl::Span<const double> rdp_on_default_grid,
    std::optional<double> plain_gaussian_inverse_variance_sum,
    std::optional<double> single_grid_gaussian_inverse_variance, double delta,
    const ConversionOptions& options) {
  DPC_ASSIGN_OR_RETURN(RdpEpsilon rdp_eps,
                       RdpToEpsilon(DefaultRdpOrders(), rdp_on_default_grid,
                                    delta, options.rdp_conversion));
  EpsilonReport report{rdp_eps.epsilon,      rdp_eps.epsilon,
                       std::nullopt,         std::nullopt,
                       rdp_eps.optimal_order, rdp_eps.order_at_grid_edge};
  if (options.use_grid_gaussian_profile &&
      single_grid_gaussian_inverse_variance.has_value()) {
    const double v = *single_grid_gaussian_inverse_variance;
    if (!(v > 0) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Inverse squared noise multiplier must be finite and > 0, got ", v));
    }
    // One grid Gaussian release: the discrete Gaussian's privacy profile
    // with hat_mu = 1/s (grid_gaussian.h; docs/privacy.md 4.6).
    DPC_ASSIGN_OR_RETURN(double eps, GridGaussianEpsilon(delta, std::sqrt(v)));
    report.epsilon_grid_exact = eps;
    report.epsilon = std::min(report.epsilon, eps);
  }
  if (options.use_exact_gaussian &&
      plain_gaussian_inverse_variance_sum.has_value()) {
    const double sum = *plain_gaussian_inverse_variance_sum;
    if (std::isnan(sum) || sum < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Sum of inverse squared noise multipliers must be >= 0, got ", sum));
    }
    if (sum == 0.0) {
      report.epsilon_exact = 0.0;  // nothing released
    } else if (std::isfinite(sum)) {
      // Exact composition: one Gaussian with mu = sqrt(sum 1/s_i^2)
      // (Dong, Roth, Su 2019, Cor. 3.3), converted by Balle & Wang 2018 Thm. 8.
      DPC_ASSIGN_OR_RETURN(double eps,
                           AnalyticGaussianEpsilon(delta, std::sqrt(sum)));
      report.epsilon_exact = eps;
    }
    if (report.epsilon_exact.has_value()) {
      report.epsilon = std::min(report.epsilon, *report.epsilon_exact);
    }
  }
  return report;
}

absl::StatusOr<EpsilonReport> MakeApproximateEpsilonReport(
    absl::Span<const double> rdp_on_default_grid,
    std::optional<double> plain_gaussian_inverse_variance_sum,
    std::optional<double> single_grid_gaussian_inverse_variance, double approximate_delta,
    double delta, const ConversionOptions& options) {
  if (!(delta > 0) || !(delta < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("delta must be in (0, 1), got ", delta));
  }
  if (std::isnan(approximate_delta) || approximate_delta < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Approximate delta must be >= 0, got ", approximate_delta));
  }
  if (approximate_delta == 0) {
    return MakeEpsilonReport(rdp_on_default_grid, plain_gaussian_inverse_variance_sum,
                             single_grid_gaussian_inverse_variance, delta, options);
  }
  if (!(approximate_delta < delta)) {
    // No finite epsilon at this delta: the failures alone may cost it all.
    constexpr double kInf = std::numeric_limits<double>::infinity();
    return EpsilonReport{kInf, kInf, std::nullopt, std::nullopt,
                         DefaultRdpOrders().front(), true, approximate_delta};
  }
  // As for Bun & Steinke 2016's approximate zCDP: with the laws
  // mixtures (1 - d) A + d B on both neighbours and A, A' (eps, delta')-
  // indistinguishable, P[M(x) in S] <= (1 - d) P[A in S] + d
  // <= (1 - d)(e^eps P[A' in S] + delta') + d <= e^eps P[M(x') in S] +
  // delta' + d. So each bound at delta' = delta - d is one at delta. The
  // subtraction is rounded down (a smaller delta' only raises epsilon):
  // stepped down while the exact sum reduced + approximate_delta, from
  // Knuth's TwoSum, exceeds delta.
  double reduced = delta - approximate_delta;
  for (;;) {
    const double sum = reduced + approximate_delta;
    const double b = sum - reduced;
    const double error = (reduced - (sum - b)) + (approximate_delta - b);
    if (sum < delta || (sum == delta && error <= 0)) break;
    reduced = std::nextafter(reduced, 0.0);
  }
  DPC_ASSIGN_OR_RETURN(EpsilonReport report,
                       MakeEpsilonReport(rdp_on_default_grid,
                                         plain_gaussian_inverse_variance_sum,
                                         single_grid_gaussian_inverse_variance, reduced, options));
  report.approximate_delta = approximate_delta;
  return report;
}

absl::StatusOr<EpsilonReport> ComputeEpsilonReport(
    const PrivacyEvent& event, double delta, const ConversionOptions& options) {
  DPC_ASSIGN_OR_RETURN(std::vector<double> rdp,
                       ComputeRdp(event, DefaultRdpOrders()));
  return MakeApproximateEpsilonReport(rdp, PlainGaussianInverseVarianceSum(event),
                                      SingleGridGaussianInverseVariance(event),
                                      ApproximateDelta(event), delta, options);
}

}  // namespace dpcurator::privacy
