#include "core/privacy/grid_gaussian.h"

#include <cmath>
#include <limits>
#include <numbers>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/privacy/analytic_gaussian.h"
#include "core/privacy/rdp_math.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxBracketDoublings = 1100;
constexpr int kMaxBisectionSteps = 4000;
// Relative margin on the evaluated bound (its evaluation rounds; this keeps
// every answer on the conservative side).
constexpr double kLogDeltaMargin = 1e-9;
// The box |y_j| <= K of the lower bound, K = kBoxHalfWidth sigma.
constexpr double kBoxHalfWidth = 30.0;

struct Constants {
  double rho;      // sqrt(d) / (2 sigma): L1 rounding over the L2 shift
  double log_a;    // a: per-coordinate pmf / cube mass, upper
  double b;        // per-coordinate cube mass / pmf in the box, plus eta
  double log_tau;  // mass outside the box
};

Constants MakeConstants() {
  const double d = static_cast<double>(kMaxGridGaussianDimension);
  const double sigma = kMinGridGaussianUnits;
  Constants c;
  c.rho = std::sqrt(d) / (2.0 * sigma);
  c.log_a = d / (8.0 * sigma * sigma);
  // eta = 2 sum_j exp(-2 pi^2 sigma^2 j^2) <= 2 x / (1 - x), x = e^{-2 pi^2 sigma^2}
  // (below the smallest double at sigma = 2^20: it adds nothing here).
  const double x = std::exp(-2.0 * std::numbers::pi * std::numbers::pi * sigma * sigma);
  const double eta = 2.0 * x / (1.0 - x);
  c.b = d * kBoxHalfWidth * kBoxHalfWidth / (8.0 * sigma * sigma) + d * eta;
  // tau = 2 d Phibar((K - 1/2) / sigma) with K = 30 sigma.
  c.log_tau = std::log(2.0 * d) +
              internal::LogNormalCdf(-(kBoxHalfWidth - 0.5 / sigma));
  return c;
}

const Constants& GetConstants() {
  static const Constants kConstants = MakeConstants();
  return kConstants;
}

double LogDelta(double epsilon, double mu) {
  const Constants& c = GetConstants();
  // First term: e^a Phibar(eps/mu - mu/2 - rho) = e^a Phi(mu/2 + rho - eps/mu).
  const double first = c.log_a + internal::LogNormalCdf(mu / 2.0 + c.rho - epsilon / mu);
  // Second: e^{eps - b} max(0, Phibar(eps/mu + mu/2 + rho) - tau).
  const double log_tail = internal::LogNormalCdf(-(epsilon / mu + mu / 2.0 + c.rho));
  double second = -kInf;
  if (log_tail > c.log_tau) {
    second = epsilon - c.b + log_tail + std::log(-std::expm1(c.log_tau - log_tail));
  }
  if (!(second < first)) return -kInf;
  return first + std::log(-std::expm1(second - first));
}

}  // namespace

absl::StatusOr<double> GridGaussianLogDelta(double epsilon, double mu) {
  DPC_RETURN_IF_ERROR(ValidateFiniteNonNegative(epsilon, "Epsilon"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(mu, "Mu"));
  return LogDelta(epsilon, mu);
}

absl::StatusOr<double> GridGaussianEpsilon(double delta, double mu) {
  DPC_RETURN_IF_ERROR(ValidateInOpenUnitInterval(delta, "Delta"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(mu, "Mu"));
  const double log_target = std::log(delta);
  auto feasible = [&](double eps) {
    return LogDelta(eps, mu) + kLogDeltaMargin <= log_target;
  };
  if (feasible(0.0)) return 0.0;
  double lo = 0.0;
  double hi = 1.0;
  int doublings = 0;
  while (!feasible(hi)) {
    lo = hi;
    hi *= 2.0;
    if (++doublings > kMaxBracketDoublings) {
      return absl::OutOfRangeError(
          absl::StrCat("No finite epsilon for delta ", delta, " and mu ", mu));
    }
  }
  for (int step = 0; step < kMaxBisectionSteps && hi - lo > kAnalyticGaussianTolerance;
       ++step) {
    const double mid = lo + (hi - lo) / 2.0;
    if (mid <= lo || mid >= hi) break;
    (feasible(mid) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace dpcurator::privacy
