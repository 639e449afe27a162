#include "core/privacy/analytic_gaussian.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/privacy/rdp_math.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Bracket growth stops here: beyond, eps or mu are not representable usefully.
constexpr int kMaxBracketDoublings = 1100;
constexpr int kMaxBisectionSteps = 4000;

// Thm. 8 of Balle & Wang 2018 in log form:
// log delta = log Phi(a) + log(1 - exp(eps + log Phi(b) - log Phi(a))),
// a = mu/2 - eps/mu, b = -mu/2 - eps/mu.
double LogDelta(double epsilon, double mu) {
  const double la = internal::LogNormalCdf(mu / 2.0 - epsilon / mu);
  const double lb = epsilon + internal::LogNormalCdf(-mu / 2.0 - epsilon / mu);
  if (!(lb < la)) return -kInf;
  return la + std::log(-std::expm1(lb - la));
}

}  // namespace

absl::StatusOr<double> AnalyticGaussianLogDelta(double epsilon, double mu) {
  DPC_RETURN_IF_ERROR(ValidateFiniteNonNegative(epsilon, "Epsilon"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(mu, "Mu"));
  return LogDelta(epsilon, mu);
}

absl::StatusOr<double> AnalyticGaussianDelta(double epsilon, double mu) {
  DPC_ASSIGN_OR_RETURN(double log_delta, AnalyticGaussianLogDelta(epsilon, mu));
  return std::exp(log_delta);
}

absl::StatusOr<double> AnalyticGaussianEpsilon(double delta, double mu) {
  DPC_RETURN_IF_ERROR(ValidateInOpenUnitInterval(delta, "Delta"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(mu, "Mu"));
  const double log_target = std::log(delta);
  // delta(eps; mu) is decreasing in eps (Balle & Wang 2018, Lemma 7).
  if (LogDelta(0.0, mu) <= log_target) return 0.0;
  double lo = 0.0;
  double hi = 1.0;
  int doublings = 0;
  while (LogDelta(hi, mu) > log_target) {
    lo = hi;
    hi *= 2.0;
    if (++doublings > kMaxBracketDoublings) {
      return absl::OutOfRangeError(
          absl::StrCat("No finite epsilon for delta ", delta, " and mu ", mu));
    }
  }
  for (int step = 0; step < kMaxBisectionSteps &&
                     hi - lo > kAnalyticGaussianTolerance * std::fmax(1.0, hi);
       ++step) {
    const double mid = lo + (hi - lo) / 2.0;
    if (mid <= lo || mid >= hi) break;
    if (LogDelta(mid, mu) > log_target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return hi;
}

absl::StatusOr<double> AnalyticGaussianSigma(double epsilon, double delta,
                                             double sensitivity) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(epsilon, "Epsilon"));
  DPC_RETURN_IF_ERROR(ValidateInOpenUnitInterval(delta, "Delta"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(sensitivity, "Sensitivity"));
  const double log_target = std::log(delta);
  // delta(eps; mu) is increasing in mu. Find mu_lo feasible, mu_hi not.
  double mu_lo = 1.0;
  double mu_hi = 1.0;
  int doublings = 0;
  if (LogDelta(epsilon, mu_lo) <= log_target) {
    while (LogDelta(epsilon, mu_hi) <= log_target) {
      mu_lo = mu_hi;
      mu_hi *= 2.0;
      if (++doublings > kMaxBracketDoublings) {
        return absl::OutOfRangeError("Analytic Gaussian bracket diverged");
      }
    }
  } else {
    while (LogDelta(epsilon, mu_lo) > log_target) {
      mu_hi = mu_lo;
      mu_lo /= 2.0;
      if (++doublings > kMaxBracketDoublings) {
        return absl::OutOfRangeError("Analytic Gaussian bracket diverged");
      }
    }
  }
  for (int step = 0;
       step < kMaxBisectionSteps && mu_hi - mu_lo > kAnalyticGaussianTolerance * mu_lo;
       ++step) {
    const double mid = mu_lo + (mu_hi - mu_lo) / 2.0;
    if (mid <= mu_lo || mid >= mu_hi) break;
    if (LogDelta(epsilon, mid) <= log_target) {
      mu_lo = mid;
    } else {
      mu_hi = mid;
    }
  }
  // sigma = sensitivity / mu_lo; round up so that sensitivity / sigma never
  // exceeds the feasible mu.
  double sigma = sensitivity / mu_lo;
  while (sensitivity / sigma > mu_lo) sigma = std::nextafter(sigma, kInf);
  return sigma;
}

}  // namespace dpcurator::privacy
