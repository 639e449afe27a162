#ifndef DPCURATOR_CORE_PRIVACY_RDP_MATH_H_
#define DPCURATOR_CORE_PRIVACY_RDP_MATH_H_

// Log-space numerics shared by the accountant (internal; not a public API).
// Everything here is thread-safe: no lgamma (which writes the global signgam).

namespace dpcurator::privacy::internal {

// log(exp(a) + exp(b)); either argument may be -inf.
double LogAdd(double a, double b);

// log|exp(a) - exp(b)|, and whether exp(a) >= exp(b) (true also when equal,
// in which case the magnitude is -inf).
struct SignedLog {
  bool positive;
  double log_magnitude;
};
SignedLog LogSubSign(double a, double b);

// log(erfc(x)), accurate in relative terms for all finite x, including
// x >> 26 where erfc(x) underflows (asymptotic expansion, Abramowitz & Stegun
// 7.1.23).
double LogErfc(double x);

// log(Phi(x)) for the standard normal CDF Phi(x) = erfc(-x / sqrt(2)) / 2.
double LogNormalCdf(double x);

}  // namespace dpcurator::privacy::internal

#endif  // DPCURATOR_CORE_PRIVACY_RDP_MATH_H_
