#include "core/privacy/rdp_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace dpcurator::privacy::internal {
namespace {

// Beyond this argument erfc is evaluated by its asymptotic series; below it
// std::erfc keeps full relative accuracy (it underflows only near x = 26.5).
constexpr double kLogErfcAsymptoticThreshold = 20.0;
// Terms of the asymptotic series; at x >= 20 the first omitted term is below
// 21!! / 800^11 < 1e-22 relative.
constexpr int kLogErfcAsymptoticTerms = 11;

}  // namespace

double LogAdd(double a, double b) {
  const double lo = std::min(a, b);
  const double hi = std::max(a, b);
  if (lo == -std::numeric_limits<double>::infinity()) return hi;
  return hi + std::log1p(std::exp(lo - hi));
}

SignedLog LogSubSign(double a, double b) {
  if (a > b) return {true, a + std::log1p(-std::exp(b - a))};
  if (a < b) return {false, b + std::log1p(-std::exp(a - b))};
  return {true, -std::numeric_limits<double>::infinity()};
}

double LogErfc(double x) {
  if (x < kLogErfcAsymptoticThreshold) return std::log(std::erfc(x));
  // erfc(x) = exp(-x^2) / (x sqrt(pi)) * sum_n (-1)^n (2n-1)!! / (2x^2)^n
  // (Abramowitz & Stegun 7.1.23).
  const double inv_two_x2 = 1.0 / (2.0 * x * x);
  double term = 1.0;
  double sum = 1.0;
  for (int n = 1; n < kLogErfcAsymptoticTerms; ++n) {
    term *= -(2.0 * n - 1.0) * inv_two_x2;
    sum += term;
  }
  return -x * x - std::log(x) - 0.5 * std::log(std::numbers::pi) +
         std::log(sum);
}

double LogNormalCdf(double x) {
  return std::log(0.5) + LogErfc(-x / std::numbers::sqrt2);
}

}  // namespace dpcurator::privacy::internal
