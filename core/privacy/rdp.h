#ifndef DPCURATOR_CORE_PRIVACY_RDP_H_
#define DPCURATOR_CORE_PRIVACY_RDP_H_

// Renyi-DP curves of privacy events (Mironov 2017, "Renyi Differential
// Privacy"). RDP at order alpha is D_alpha(M(X) || M(X')) maximised over
// neighbours; composition adds curves order by order (Mironov 2017, Prop. 1).
//
// Every value is computed in log space: orders up to 1024 and sampling rates
// down to 1e-10 neither overflow nor lose relative precision. Values are >= 0
// (a Renyi divergence is never negative; rounding residue below 0 is clamped
// up) and may be +inf where a bound does not exist or does not converge (the
// conversion then ignores that order).

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/privacy/events.h"

namespace dpcurator::privacy {

// dp_accounting's grid: 1.1, 1.2, ..., 10.9 (as 1 + x/10), 11, 12, ..., 63,
// 128, 256, 512, 1024. 156 orders. The ledger stores curves on this grid.
const std::vector<double>& DefaultRdpOrders();

// RDP of `event` at each of `orders` (each finite and > 1).
absl::StatusOr<std::vector<double>> ComputeRdp(const PrivacyEvent& event,
                                               absl::Span<const double> orders);

// Single-mechanism RDP at one order (> 1); arguments are assumed validated
// (the PrivacyEvent factories do it). Exposed for tests and calibration.
//
// Gaussian: alpha / (2 s^2) (Mironov 2017, Prop. 7).
double GaussianRdp(double noise_multiplier, double order);
// Mironov, Talwar, Zhang 2019, "Renyi Differential Privacy of the Sampled
// Gaussian Mechanism": integer orders by Sec. 3.3 Eq. (integer alpha binomial
// expansion), fractional orders by the two-series expansion of Sec. 3.3
// (dp_accounting's _compute_log_a_frac). q = 0 gives 0, q = 1 the Gaussian.
// The result is also capped by the unsampled Gaussian's alpha/(2 s^2), a
// valid bound that only matters where the fractional series is loose or
// fails to converge (there dp_accounting reports +inf). Precision: integer
// orders keep full relative accuracy for tiny q (log1p around the largest
// term). The fractional series has ~1e-16 absolute error, so where it gives
// log A_alpha < 1e-10 (tiny q) the order is bounded instead by the chord of
// the convex log A between the neighbouring integer orders (conservative,
// accurate to the bound; dp_accounting returns rounding noise there).
double PoissonSampledGaussianRdp(double sampling_rate, double noise_multiplier,
                                 double order);
// The same quantity with the fractional-order series summed with signed
// binomial coefficients, as Opacus (and the original tf-privacy) evaluate it.
// Mathematically this is A_alpha itself, while PoissonSampledGaussianRdp's
// |C(alpha,i)| series is an upper bound (dp_accounting since 2023); the two
// differ by ~1e-4 relative at fractional orders. Only for cross-checking
// Opacus' published numbers; the ledger uses PoissonSampledGaussianRdp.
// Returns NaN if a partial sum turns negative (numerical failure).
double PoissonSampledGaussianRdpSignedSeries(double sampling_rate,
                                             double noise_multiplier,
                                             double order);
// Wang, Balle, Kasiviswanathan 2019, "Subsampled Renyi Differential Privacy
// and Analytical Moments Accountant", Thm. 9 (arXiv v3 Thm. 27) for the
// Gaussian, exact up to order 256 and with the 2 e^{(j-1) eps(j)} branch
// only above; fractional orders by Cor. 10 (linear interpolation of the CGF
// between floor and ceil). As dp_accounting's _compute_rdp_sample_wor_gaussian,
// then capped by the unsampled Gaussian's alpha/(2 s^2) (Thm. 9 exceeds it
// for large q; dp_accounting does not cap).
double SampledWithoutReplacementGaussianRdp(double sampling_rate,
                                            double noise_multiplier,
                                            double order);
// Session steps with the grid's discrete Gaussian noise (docs/privacy.md
// 4.7). The step adds N_Z(0, sigma^2) i.i.d. to a snapped vector whose
// neighbouring batches differ by an integer vector mu with
// ||mu|| / sigma <= 1/s. Each bound below is for that mechanism, both
// directions of the Renyi divergence; fractional orders by the chord of
// (alpha-1) RDP between the neighbouring integer orders (a cumulant
// generating function is convex, so the chord of valid integer bounds is a
// valid bound; Wang, Balle, Kasiviswanathan 2019, Cor. 10), and everything
// capped by the unsampled alpha/(2 s^2) (CKS20 Prop. 5 and joint
// quasi-convexity, van Erven & Harremoes 2014, Thm. 13).
//
// Poisson (ADD_REMOVE), integer alpha >= 2: (alpha-1) RDP <= max of
//  * forward, D(mix || base): log A_alpha, A_alpha the binomial sum of
//    Mironov, Talwar, Zhang 2019 Sec. 3.3. Exact for an integer shift: the
//    moments E_base[(P_mu/P_0)^k] = exp(k(k-1)||mu||^2/(2 sigma^2)) are the
//    continuous ones (the shifted normaliser equals the unshifted one);
//  * reverse, D(base || mix): log(1 + C(a,2) q^2 w + C(a+1,3) q^3
//    (1-q)^-(a+2) min(1, w)), w = e^{1/s^2} - 1, from the third-order
//    Taylor bound of (1+x)^{1-a} with x = q(L-1) >= -q, E[L-1] = 0 and
//    E[(L-1)^2] = e^{||mu||^2/sigma^2} - 1 <= w; or the fourth-order one,
//    C(a+2,4) q^4 (1-q)^-(a+3) E[(L-1)^4] in place of the cubic term,
//    whichever is smaller (docs/privacy.md 4.7).
double PoissonSampledDiscreteGaussianRdp(double sampling_rate,
                                         double noise_multiplier, double order);
// Without replacement (REPLACE_ONE): Wang, Balle, Kasiviswanathan 2019,
// Thm. 9 for a general mechanism with RDP eps(j) = j/(2 s^2) (CKS20 Prop. 5)
// and eps(inf) = inf, i.e. without the Gaussian-specific forward-difference
// terms that SampledWithoutReplacementGaussianRdp uses up to order 256.
double SampledWithoutReplacementDiscreteGaussianRdp(double sampling_rate,
                                                    double noise_multiplier,
                                                    double order);
// Mironov 2017, Prop. 6 with eps = 1/b:
// eps + log(1 + (a-1)(exp((1-2a) eps) - 1)/(2a-1)) / (a-1).
double LaplaceRdp(double noise_multiplier, double order);
// k-ary randomized response, worst pair of inputs x != x' (output laws
// differ in two coordinates, p_x(x) = e^eps/(e^eps+k-1) = a, else b):
// (1/(a-1)) log(a^alpha b^(1-alpha) + b^alpha a^(1-alpha) + (k-2) b)
// (the Renyi divergence of Mironov 2017, Def. 3, evaluated in closed form).
double RandomizedResponseRdp(int64_t num_categories, double epsilon,
                             double order);

// The exponential mechanism with eps = 2 Delta x (its exp(eps q / (2 Delta))
// weight): eps-DP and eps-bounded-range, so (eps^2 / 8)-zCDP (Cesar &
// Rogers 2021, "Bounding, Concentrating, and Truncating: Unifying Privacy
// Loss Composition for Data Analytics": bounded range), and
// D_alpha <= D_inf <= eps: min(alpha eps^2 / 8, eps).
double ExponentialMechanismRdp(double epsilon, double order);

// An RDP curve on DefaultRdpOrders(). Composition is `+=`; `count`-fold
// self-composition is `*= count`.
class RdpCurve {
 public:
  // The zero curve (no privacy loss).
  RdpCurve();
  static absl::StatusOr<RdpCurve> FromEvent(const PrivacyEvent& event);
  // values.size() must equal DefaultRdpOrders().size(); values >= 0 or +inf.
  static absl::StatusOr<RdpCurve> FromValues(std::vector<double> values);

  const std::vector<double>& values() const { return values_; }
  const std::vector<double>& orders() const { return DefaultRdpOrders(); }

  RdpCurve& operator+=(const RdpCurve& other);
  // Multiplies every value by factor (finite, >= 0; 0 * inf is taken as 0:
  // zero repetitions cost nothing).
  RdpCurve& operator*=(double factor);
  friend RdpCurve operator+(RdpCurve a, const RdpCurve& b) { return a += b; }
  friend RdpCurve operator*(RdpCurve a, double factor) { return a *= factor; }

 private:
  explicit RdpCurve(std::vector<double> values) : values_(std::move(values)) {}
  std::vector<double> values_;
};

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_RDP_H_
