#include "core/privacy/rdp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/privacy/rdp_math.h"
#include "core/util/status_macros.h"

namespace dpcurator::privacy {
namespace {

using internal::LogAdd;
using internal::LogErfc;
using internal::LogSubSign;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Cap on the terms of the fractional-order series (dp_accounting's
// _MAX_STEPS_LOG_A_FRAC); a series that has not converged by then makes the
// order +inf, so the conversion skips it.
constexpr int kMaxFractionalSeriesTerms = 1000;
// The fractional series stops once both tails decrease and the newest terms
// are below exp(-30) of the running total.
constexpr double kFractionalSeriesLogTolerance = 30.0;
// Below this, log A_alpha from the fractional series is dominated by
// rounding (absolute error ~1e-16 from O(1) partial sums): 1e-6 relative.
constexpr double kFractionalSeriesPrecisionFloor = 1e-10;
// Above this order the WOR bound drops the forward-difference branch, whose
// bookkeeping is O(alpha^2) (dp_accounting's max_alpha).
constexpr int kWorExactMaxOrder = 256;

bool IsInteger(double x) { return std::floor(x) == x; }

// log|C(alpha, i)| for i = 0..n, by the product recurrence
// C(alpha, i) = C(alpha, i-1) (alpha - i + 1) / i (no lgamma: thread-safe).
std::vector<double> LogAbsBinomials(double alpha, int n) {
  std::vector<double> out(n + 1);
  out[0] = 0.0;
  for (int i = 1; i <= n; ++i) {
    out[i] = out[i - 1] + std::log(std::fabs(alpha - i + 1)) -
             std::log(static_cast<double>(i));
  }
  return out;
}

// log A_alpha for integer alpha (Mironov, Talwar, Zhang 2019, Sec. 3.3):
// A_alpha = sum_{i=0}^{alpha} C(alpha,i) (1-q)^{alpha-i} q^i
//           exp((i^2 - i) / (2 s^2)),
// summed by log-sum-exp around the largest term.
double LogAInteger(double q, double s, int alpha) {
  const std::vector<double> log_binom = LogAbsBinomials(alpha, alpha);
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  std::vector<double> terms(alpha + 1);
  int argmax = 0;
  for (int i = 0; i <= alpha; ++i) {
    const double di = i;
    terms[i] = log_binom[i] + di * log_q + (alpha - di) * log_1mq +
               (di * di - di) / (2.0 * s * s);
    if (terms[i] > terms[argmax]) argmax = i;
  }
  // max + log1p(sum of the others relative to it): when A_alpha = 1 + O(q^2)
  // the O(q^2) survives (log of a sum near 1 would round it away).
  double rest = 0.0;
  for (int i = 0; i <= alpha; ++i) {
    if (i != argmax) rest += std::exp(terms[i] - terms[argmax]);
  }
  return terms[argmax] + std::log1p(rest);
}

// log A_alpha for fractional alpha (Mironov, Talwar, Zhang 2019, Sec. 3.3):
// A_alpha = A_0 + A_1, the integrals over (-inf, z0] and [z0, inf) with
// z0 = s^2 log(1/q - 1) + 1/2, each expanded as a binomial series
//   A_0 = sum_i |C(alpha,i)| q^i (1-q)^{alpha-i} e^{(i^2-i)/(2s^2)}
//         erfc((i - z0)/(sqrt 2 s)) / 2,
//   A_1 = sum_i |C(alpha,i)| q^{alpha-i} (1-q)^i e^{(j^2-j)/(2s^2)}
//         erfc((z0 - j)/(sqrt 2 s)) / 2,  j = alpha - i.
// Returns +inf if the series has not converged after the cap.
double LogAFractional(double q, double s, double alpha) {
  const double z0 = s * s * std::log(1.0 / q - 1.0) + 0.5;
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double log_half = std::log(0.5);
  const double sqrt2_s = std::numbers::sqrt2 * s;
  double log_a0 = -kInf;
  double log_a1 = -kInf;
  double last_s0 = -kInf;
  double last_s1 = -kInf;
  double log_binom = 0.0;  // log|C(alpha, i)|
  for (int i = 0; i < kMaxFractionalSeriesTerms; ++i) {
    if (i > 0) {
      log_binom += std::log(std::fabs(alpha - i + 1)) -
                   std::log(static_cast<double>(i));
    }
    const double di = i;
    const double j = alpha - di;
    const double log_t0 = log_binom + di * log_q + j * log_1mq;
    const double log_t1 = log_binom + j * log_q + di * log_1mq;
    const double log_e0 = log_half + LogErfc((di - z0) / sqrt2_s);
    const double log_e1 = log_half + LogErfc((z0 - j) / sqrt2_s);
    const double log_s0 = log_t0 + (di * di - di) / (2.0 * s * s) + log_e0;
    const double log_s1 = log_t1 + (j * j - j) / (2.0 * s * s) + log_e1;
    log_a0 = LogAdd(log_a0, log_s0);
    log_a1 = LogAdd(log_a1, log_s1);
    const double total = LogAdd(log_a0, log_a1);
    if (log_s0 < last_s0 && log_s1 < last_s1 &&
        std::max(log_s0, log_s1) < total - kFractionalSeriesLogTolerance) {
      return total;
    }
    last_s0 = log_s0;
    last_s1 = log_s1;
  }
  return kInf;
}

// The same A_alpha series with signed binomial coefficients, as Opacus and
// the original tf-privacy sum it (stop once both new terms are below e^-30
// in absolute terms). Returns NaN if a partial sum would turn negative.
double LogAFractionalSigned(double q, double s, double alpha) {
  const double z0 = s * s * std::log(1.0 / q - 1.0) + 0.5;
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double log_half = std::log(0.5);
  const double sqrt2_s = std::numbers::sqrt2 * s;
  double log_a0 = -kInf;
  double log_a1 = -kInf;
  double log_binom = 0.0;
  bool positive = true;  // sign of C(alpha, i)
  auto log_sub = [](double x, double y) {
    if (y == -kInf) return x;
    if (x < y) return std::numeric_limits<double>::quiet_NaN();
    if (x == y) return -kInf;
    return x + std::log1p(-std::exp(y - x));
  };
  for (int i = 0; i < kMaxFractionalSeriesTerms; ++i) {
    if (i > 0) {
      log_binom += std::log(std::fabs(alpha - i + 1)) -
                   std::log(static_cast<double>(i));
      if (alpha - i + 1 < 0) positive = !positive;
    }
    const double di = i;
    const double j = alpha - di;
    const double log_s0 = log_binom + di * log_q + j * log_1mq +
                          (di * di - di) / (2.0 * s * s) + log_half +
                          LogErfc((di - z0) / sqrt2_s);
    const double log_s1 = log_binom + j * log_q + di * log_1mq +
                          (j * j - j) / (2.0 * s * s) + log_half +
                          LogErfc((z0 - j) / sqrt2_s);
    if (positive) {
      log_a0 = LogAdd(log_a0, log_s0);
      log_a1 = LogAdd(log_a1, log_s1);
    } else {
      log_a0 = log_sub(log_a0, log_s0);
      log_a1 = log_sub(log_a1, log_s1);
    }
    if (std::isnan(log_a0) || std::isnan(log_a1)) return log_a0 + log_a1;
    if (std::max(log_s0, log_s1) < -kFractionalSeriesLogTolerance) break;
  }
  return LogAdd(log_a0, log_a1);
}

// log|Delta^{k} F(0)| for k = 1..n+2 (index k-1), F(x) = exp((x-1) eps(x))
// with eps(x) = x / (2 s^2) the Gaussian RDP; forward differences taken in
// place in signed log form (Wang, Balle, Kasiviswanathan 2019, Thm. 27 of
// arXiv:1808.00087; dp_accounting's _get_forward_diffs).
std::vector<double> LogForwardDifferences(double s, int n) {
  auto cgf = [s](double x) { return x * (x + 1.0) / (2.0 * s * s); };
  std::vector<double> vec(n + 3, 0.0);
  std::vector<bool> positive(n + 3, true);
  // vec[0] = log F(0) = log 1; vec[i] = log F(i) = cgf(i - 1).
  for (int i = 1; i < n + 3; ++i) vec[i] = cgf(i - 1.0);
  std::vector<double> deltas(n + 2);
  for (int i = 0; i < n + 2; ++i) {
    const int count = n + 2 - i;
    for (int j = 0; j < count; ++j) {
      if (positive[j] == positive[j + 1]) {
        const internal::SignedLog d = LogSubSign(vec[j + 1], vec[j]);
        vec[j] = d.log_magnitude;
        positive[j] = positive[j + 1] ? d.positive : !d.positive;
      } else {
        vec[j] = LogAdd(vec[j], vec[j + 1]);
        positive[j] = positive[j + 1];
      }
    }
    deltas[i] = vec[0];
  }
  return deltas;
}

// log of the Thm. 9 bound of Wang, Balle, Kasiviswanathan 2019 at integer
// alpha >= 2 for the subsampled Gaussian (the CGF (alpha-1) * RDP):
// log(1 + q^2 C(a,2) min(4(e^{eps(2)}-1), 2 e^{eps(2)})
//       + sum_{j=3}^{a} q^j C(a,j) min(4 sqrt(Delta^{2 floor(j/2)}
//         Delta^{2 ceil(j/2)}), 2 e^{(j-1) eps(j)})).
// With `gaussian_moments` false only Thm. 9's general terms are used (any
// mechanism with RDP eps(j) = j/(2 s^2) and eps(inf) = inf).
double LogWorBoundInteger(double q, double s, int alpha, bool gaussian_moments = true) {
  if (alpha == 1) return 0.0;
  auto cgf = [s](double x) { return x * (x + 1.0) / (2.0 * s * s); };
  const double eps2 = 2.0 / (2.0 * s * s);
  const double log_f2m1 = eps2 + std::log1p(-std::exp(-eps2));
  const double log_q = std::log(q);
  const double log2 = std::numbers::ln2;
  const double log4 = 2.0 * std::numbers::ln2;
  const std::vector<double> log_binom = LogAbsBinomials(alpha, alpha);
  const bool use_moments = gaussian_moments && alpha <= kWorExactMaxOrder;
  std::vector<double> deltas;
  if (use_moments) deltas = LogForwardDifferences(s, alpha);
  double log_a = 0.0;
  for (int i = 2; i <= alpha; ++i) {
    double term;
    if (i == 2) {
      term = 2.0 * log_q + log_binom[2] +
             std::min(log4 + log_f2m1, eps2 + log2);
    } else {
      term = log2 + cgf(i - 1.0);
      if (use_moments) {
        const double lo = deltas[2 * (i / 2) - 1];
        const double hi = deltas[2 * ((i + 1) / 2) - 1];
        term = std::min(log4 + 0.5 * (lo + hi), term);
      }
      term += i * log_q + log_binom[i];
    }
    log_a = LogAdd(log_a, term);
  }
  return log_a;
}

// log(1 + e^x) without overflow, and accurate for very negative x.
double Log1pExp(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// E[(L-1)^4] = e^{6c} - 4 e^{3c} + 6 e^{c} - 3 for the likelihood ratio L of
// two Gaussians (or discrete Gaussians with an integer shift) with
// c = ||mu||^2 / sigma^2 (from E[L^k] = e^{k(k-1) c/2}); increasing in c.
// For small c by its power series sum_{n>=2} (6^n - 4 3^n + 6) c^n / n!,
// whose terms are all positive (no cancellation).
double FourthCentralMoment(double c) {
  if (c >= 0.5) return std::exp(6.0 * c) - 4.0 * std::exp(3.0 * c) + 6.0 * std::exp(c) - 3.0;
  double sum = 0.0;
  double term = 1.0;  // c^n / n!
  double six = 1.0, three = 1.0;
  for (int n = 1; n < 60; ++n) {
    term *= c / n;
    six *= 6.0;
    three *= 3.0;
    if (n >= 2) sum += (six - 4.0 * three + 6.0) * term;
  }
  return sum;
}

// Upper bound on the cumulant (alpha-1) D_alpha, both directions, of one
// Poisson-sampled discrete Gaussian step at integer alpha >= 2
// (rdp.h PoissonSampledDiscreteGaussianRdp; docs/privacy.md 4.7), capped
// by the unsampled (alpha-1) alpha/(2 s^2).
double LogPoissonDiscreteBoundInteger(double q, double s, int alpha) {
  const double a = alpha;
  const double cap = (a - 1.0) * a / (2.0 * s * s);
  // Forward: A_alpha of Mironov, Talwar, Zhang 2019, Sec. 3.3.
  const double forward = LogAInteger(q, s, alpha);
  // Reverse: log(1 + C(a,2) q^2 w + C(a+1,3) q^3 (1-q)^-(a+2) min(1, w)),
  // w = expm1(1/s^2), evaluated in log space.
  const double inv_var = 1.0 / (s * s);
  const double log_w = inv_var > 1.0 ? inv_var + std::log1p(-std::exp(-inv_var))
                                      : std::log(std::expm1(inv_var));
  const double log_q = std::log(q);
  const double second = std::log(a * (a - 1.0) / 2.0) + 2.0 * log_q + log_w;
  const double third = std::log((a + 1.0) * a * (a - 1.0) / 6.0) + 3.0 * log_q -
                       (a + 2.0) * std::log1p(-q) + std::min(0.0, log_w);
  // Or the fourth-order version: the cubic term E[(L-1)^3] >= 0 enters with
  // a minus sign and is dropped, the remainder is
  // C(a+2,4) q^4 (1-q)^-(a+3) E[(L-1)^4].
  const double fourth = std::log((a + 2.0) * (a + 1.0) * a * (a - 1.0) / 24.0) +
                        4.0 * log_q - (a + 3.0) * std::log1p(-q) +
                        std::log(FourthCentralMoment(inv_var));
  const double reverse = Log1pExp(LogAdd(second, std::min(third, fourth)));
  return std::min(cap, std::max(forward, reverse));
}

absl::Status ValidateOrder(double order) {
  if (!std::isfinite(order) || order <= 1.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RDP order must be finite and > 1, got ", order));
  }
  return absl::OkStatus();
}

struct RdpVisitor {
  absl::Span<const double> orders;

  template <typename F>
  std::vector<double> Map(F f) const {
    std::vector<double> out(orders.size());
    for (size_t i = 0; i < orders.size(); ++i) {
      out[i] = std::max(0.0, f(orders[i]));
    }
    return out;
  }

  absl::StatusOr<std::vector<double>> operator()(const GaussianEvent& e) const {
    return Map([&](double a) { return GaussianRdp(e.noise_multiplier, a); });
  }
  // Same curve: CKS20 Thm. 4 / Prop. 5 (integer shifts; docs/privacy.md 4.2).
  absl::StatusOr<std::vector<double>> operator()(const DiscreteGaussianEvent& e) const {
    return Map([&](double a) { return GaussianRdp(e.noise_multiplier, a); });
  }
  absl::StatusOr<std::vector<double>> operator()(const GridGaussianEvent& e) const {
    return Map([&](double a) { return GaussianRdp(e.noise_multiplier, a); });
  }
  absl::StatusOr<std::vector<double>> operator()(
      const PoissonSampledGaussianEvent& e) const {
    return Map([&](double a) {
      return PoissonSampledGaussianRdp(e.sampling_rate, e.noise_multiplier, a);
    });
  }
  absl::StatusOr<std::vector<double>> operator()(
      const SampledWithoutReplacementGaussianEvent& e) const {
    return Map([&](double a) {
      return SampledWithoutReplacementGaussianRdp(e.sampling_rate,
                                                  e.noise_multiplier, a);
    });
  }
  absl::StatusOr<std::vector<double>> operator()(
      const PoissonSampledDiscreteGaussianEvent& e) const {
    return Map([&](double a) {
      return PoissonSampledDiscreteGaussianRdp(e.sampling_rate, e.noise_multiplier, a);
    });
  }
  absl::StatusOr<std::vector<double>> operator()(
      const SampledWithoutReplacementDiscreteGaussianEvent& e) const {
    return Map([&](double a) {
      return SampledWithoutReplacementDiscreteGaussianRdp(e.sampling_rate,
                                                          e.noise_multiplier, a);
    });
  }
  absl::StatusOr<std::vector<double>> operator()(const LaplaceEvent& e) const {
    return Map([&](double a) { return LaplaceRdp(e.noise_multiplier, a); });
  }
  absl::StatusOr<std::vector<double>> operator()(
      const RandomizedResponseEvent& e) const {
    return Map([&](double a) {
      return RandomizedResponseRdp(e.num_categories, e.epsilon, a);
    });
  }
  absl::StatusOr<std::vector<double>> operator()(const ExponentialMechanismEvent& e) const {
    return Map([&](double a) { return ExponentialMechanismRdp(e.epsilon, a); });
  }
  // rho-zCDP is RDP alpha * rho at every order alpha > 1 (Bun & Steinke
  // 2016, Def. 1.1).
  absl::StatusOr<std::vector<double>> operator()(const ZcdpEvent& e) const {
    return Map([&](double a) { return a * e.rho; });
  }
  // Composition adds RDP order by order (Mironov 2017, Prop. 1).
  absl::StatusOr<std::vector<double>> operator()(const ComposedEvent& e) const {
    std::vector<double> total(orders.size(), 0.0);
    for (const PrivacyEvent& part : e.events) {
      DPC_ASSIGN_OR_RETURN(std::vector<double> rdp, ComputeRdp(part, orders));
      for (size_t i = 0; i < total.size(); ++i) total[i] += rdp[i];
    }
    return total;
  }
  // The curve of the mixture's good part (events.h ApproximateEvent); the
  // delta is the accountant's, apart.
  absl::StatusOr<std::vector<double>> operator()(const ApproximateEvent& e) const {
    return ComputeRdp(*e.event, orders);
  }
  absl::StatusOr<std::vector<double>> operator()(
      const SelfComposedEvent& e) const {
    DPC_ASSIGN_OR_RETURN(std::vector<double> rdp, ComputeRdp(*e.event, orders));
    for (double& v : rdp) v *= static_cast<double>(e.count);
    return rdp;
  }
  // Parallel composition over a public partition (events.h, docs/privacy.md
  // 3.7; McSherry 2009, Thm. 2). RDP is a supremum over neighbouring pairs
  // taken order by order, so the worst case may be a different pair of
  // parts at each order: per order, the worst single part under ADD_REMOVE;
  // under REPLACE_ONE also a part's own replace-one value and the two
  // largest add/remove values summed (a row leaving one part for another:
  // two independent add/remove neighbours, Mironov 2017, Prop. 1).
  absl::StatusOr<std::vector<double>> operator()(const PartitionedEvent& e) const {
    std::vector<double> largest(orders.size(), 0.0);
    std::vector<double> second(orders.size(), 0.0);
    for (const PrivacyEvent& part : e.add_remove) {
      DPC_ASSIGN_OR_RETURN(std::vector<double> rdp, ComputeRdp(part, orders));
      for (size_t i = 0; i < rdp.size(); ++i) {
        if (rdp[i] > largest[i]) {
          second[i] = largest[i];
          largest[i] = rdp[i];
        } else if (rdp[i] > second[i]) {
          second[i] = rdp[i];
        }
      }
    }
    if (e.relation == NeighbouringRelation::kAddRemove) return largest;
    // With one part, `second` is 0 and the sum is that part's own value (a
    // row moving between the part and an unopened value).
    std::vector<double> total(orders.size());
    for (size_t i = 0; i < total.size(); ++i) total[i] = largest[i] + second[i];
    for (const PrivacyEvent& part : e.replace_one) {
      DPC_ASSIGN_OR_RETURN(std::vector<double> rdp, ComputeRdp(part, orders));
      for (size_t i = 0; i < total.size(); ++i) total[i] = std::max(total[i], rdp[i]);
    }
    return total;
  }
};

}  // namespace

const std::vector<double>& DefaultRdpOrders() {
  static const std::vector<double>* const kOrders = [] {
    auto* orders = new std::vector<double>;
    // 1 + x / 10.0 exactly as dp_accounting builds it, so the doubles match.
    for (int x = 1; x < 100; ++x) orders->push_back(1.0 + x / 10.0);
    for (int a = 11; a < 64; ++a) orders->push_back(a);
    for (double a : {128.0, 256.0, 512.0, 1024.0}) orders->push_back(a);
    return orders;
  }();
  return *kOrders;
}

double ExponentialMechanismRdp(double epsilon, double order) {
  // zCDP rho = eps^2 / 8 (bounded range; Cesar & Rogers 2021) gives
  // alpha rho; pure eps-DP bounds every order by eps (Mironov 2017, Prop. 3's
  // premise: D_alpha <= D_inf).
  return std::min(order * epsilon * epsilon / 8.0, epsilon);
}

double GaussianRdp(double noise_multiplier, double order) {
  return order / (2.0 * noise_multiplier * noise_multiplier);
}

double PoissonSampledGaussianRdp(double sampling_rate, double noise_multiplier,
                                 double order) {
  if (sampling_rate == 0.0) return 0.0;
  const double unsampled = GaussianRdp(noise_multiplier, order);
  if (sampling_rate == 1.0) return unsampled;
  double rdp;
  if (IsInteger(order) && order <= std::numeric_limits<int>::max()) {
    rdp = LogAInteger(sampling_rate, noise_multiplier, static_cast<int>(order)) /
          (order - 1.0);
  } else {
    double log_a = LogAFractional(sampling_rate, noise_multiplier, order);
    if (log_a < kFractionalSeriesPrecisionFloor) {
      // The series' partial sums are O(1) in log space, so log A_alpha below
      // this floor is rounding noise (it can even come out negative). Use the
      // convexity bound instead: log A_alpha is convex in alpha (a cumulant
      // generating function), so it lies below the chord between the exact
      // integer orders floor(alpha) and ceil(alpha) (log A_1 = 0), as in
      // Wang, Balle, Kasiviswanathan 2019, Cor. 10. Precise and conservative.
      const int lo = static_cast<int>(std::floor(order));
      const double t = order - lo;
      const double log_lo =
          lo <= 1 ? 0.0 : LogAInteger(sampling_rate, noise_multiplier, lo);
      const double log_hi = LogAInteger(sampling_rate, noise_multiplier, lo + 1);
      log_a = (1.0 - t) * log_lo + t * log_hi;
    }
    rdp = log_a / (order - 1.0);
  }
  // Subsampling never hurts: couple the subsamples of neighbours so they are
  // equal or neighbours; by joint quasi-convexity of the Renyi divergence
  // (van Erven & Harremoes 2014, Thm. 13) the sampled mechanism's RDP is at
  // most the unsampled one's. This only bites where the |C(alpha,i)| series
  // is loose or has not converged (+inf).
  return std::max(0.0, std::min(rdp, unsampled));
}

double PoissonSampledGaussianRdpSignedSeries(double sampling_rate,
                                             double noise_multiplier,
                                             double order) {
  if (sampling_rate == 0.0) return 0.0;
  if (sampling_rate == 1.0) return GaussianRdp(noise_multiplier, order);
  if (IsInteger(order) && order <= std::numeric_limits<int>::max()) {
    return LogAInteger(sampling_rate, noise_multiplier,
                       static_cast<int>(order)) /
           (order - 1.0);
  }
  return LogAFractionalSigned(sampling_rate, noise_multiplier, order) /
         (order - 1.0);
}

double SampledWithoutReplacementGaussianRdp(double sampling_rate,
                                            double noise_multiplier,
                                            double order) {
  if (sampling_rate == 0.0) return 0.0;
  const double unsampled = GaussianRdp(noise_multiplier, order);
  if (sampling_rate == 1.0) return unsampled;
  // As for Poisson sampling, the unsampled Gaussian's RDP is also a bound
  // (coupled subsamples differ in at most one replaced row; van Erven &
  // Harremoes 2014, Thm. 13); Thm. 9 exceeds it for large q.
  if (IsInteger(order)) {
    return std::min(unsampled, LogWorBoundInteger(sampling_rate, noise_multiplier,
                                                  static_cast<int>(order)) /
                                   (order - 1.0));
  }
  // Cor. 10 of Wang, Balle, Kasiviswanathan 2019: the CGF (alpha-1) RDP is
  // bounded by linear interpolation between floor(alpha) and ceil(alpha)
  // (for alpha in (1, 2) the floor term is the CGF at 1, which is 0).
  const double lo = std::floor(order);
  const double t = order - lo;
  const double x = LogWorBoundInteger(sampling_rate, noise_multiplier,
                                      static_cast<int>(lo));
  const double y = LogWorBoundInteger(sampling_rate, noise_multiplier,
                                      static_cast<int>(lo) + 1);
  return std::min(unsampled, ((1.0 - t) * x + t * y) / (order - 1.0));
}

double PoissonSampledDiscreteGaussianRdp(double sampling_rate,
                                         double noise_multiplier, double order) {
  if (sampling_rate == 0.0) return 0.0;
  const double unsampled = GaussianRdp(noise_multiplier, order);
  if (sampling_rate == 1.0) return unsampled;
  // Chord of the convex cumulant between floor and ceil (the cumulant is 0
  // at order 1); at an integer order this is the integer bound itself.
  const int lo = static_cast<int>(std::floor(order));
  const double t = order - lo;
  const double at_lo =
      lo <= 1 ? 0.0 : LogPoissonDiscreteBoundInteger(sampling_rate, noise_multiplier, lo);
  const double at_hi =
      t == 0.0 ? 0.0
               : LogPoissonDiscreteBoundInteger(sampling_rate, noise_multiplier, lo + 1);
  const double rdp = ((1.0 - t) * at_lo + t * at_hi) / (order - 1.0);
  return std::max(0.0, std::min(rdp, unsampled));
}

double SampledWithoutReplacementDiscreteGaussianRdp(double sampling_rate,
                                                    double noise_multiplier,
                                                    double order) {
  if (sampling_rate == 0.0) return 0.0;
  const double unsampled = GaussianRdp(noise_multiplier, order);
  if (sampling_rate == 1.0) return unsampled;
  // Thm. 9 (general terms only) at the integer orders around `order`, and
  // Cor. 10 in between, as in SampledWithoutReplacementGaussianRdp.
  const int lo = static_cast<int>(std::floor(order));
  const double t = order - lo;
  const double at_lo = LogWorBoundInteger(sampling_rate, noise_multiplier, lo,
                                          /*gaussian_moments=*/false);
  const double at_hi =
      t == 0.0 ? 0.0
               : LogWorBoundInteger(sampling_rate, noise_multiplier, lo + 1,
                                    /*gaussian_moments=*/false);
  return std::max(0.0, std::min(unsampled, ((1.0 - t) * at_lo + t * at_hi) / (order - 1.0)));
}

double LaplaceRdp(double noise_multiplier, double order) {
  const double eps = 1.0 / noise_multiplier;
  const double a = order;
  // c = (exp((1-2a) eps) - 1) / (2a - 1); RDP = eps + log1p((a-1) c)/(a-1).
  const double c = std::expm1(eps * (1.0 - 2.0 * a)) / (2.0 * a - 1.0);
  if (a < 1.1) {
    // log1p(c x)/x by its Taylor series in x = a - 1 (0 <= -c x <= 0.1),
    // which stays accurate as a -> 1.
    const double v = -c * (a - 1.0);
    double sum = 0.0;
    double power = 1.0;
    for (int k = 1; k < 100; ++k) {
      sum += power / k;
      power *= v;
    }
    return eps + c * sum;
  }
  return eps + std::log1p((a - 1.0) * c) / (a - 1.0);
}

double RandomizedResponseRdp(int64_t num_categories, double epsilon,
                             double order) {
  // With b = 1/(e^eps + k - 1) and a = e^eps b, the sum inside the log is
  // b (e^{alpha eps} + e^{(1-alpha) eps} + (k-2)).
  const double k = static_cast<double>(num_categories);
  const double log_b = -(epsilon + std::log1p((k - 1.0) * std::exp(-epsilon)));
  double log_sum = LogAdd(order * epsilon, (1.0 - order) * epsilon);
  if (num_categories > 2) log_sum = LogAdd(log_sum, std::log(k - 2.0));
  return (log_b + log_sum) / (order - 1.0);
}

absl::StatusOr<std::vector<double>> ComputeRdp(const PrivacyEvent& event,
                                               absl::Span<const double> orders) {
  for (double order : orders) DPC_RETURN_IF_ERROR(ValidateOrder(order));
  return std::visit(RdpVisitor{orders}, event.variant());
}

RdpCurve::RdpCurve() : values_(DefaultRdpOrders().size(), 0.0) {}

absl::StatusOr<RdpCurve> RdpCurve::FromEvent(const PrivacyEvent& event) {
  DPC_ASSIGN_OR_RETURN(std::vector<double> values,
                       ComputeRdp(event, DefaultRdpOrders()));
  return RdpCurve(std::move(values));
}

absl::StatusOr<RdpCurve> RdpCurve::FromValues(std::vector<double> values) {
  if (values.size() != DefaultRdpOrders().size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RDP curve must have ", DefaultRdpOrders().size(),
                     " values (one per default order), got ", values.size()));
  }
  for (double v : values) {
    if (std::isnan(v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RDP values must be non-negative or +inf, got ", v));
    }
  }
  return RdpCurve(std::move(values));
}

RdpCurve& RdpCurve::operator+=(const RdpCurve& other) {
  for (size_t i = 0; i < values_.size(); ++i) values_[i] += other.values_[i];
  return *this;
}

RdpCurve& RdpCurve::operator*=(double factor) {
  for (double& v : values_) v = factor == 0.0 ? 0.0 : v * factor;
  return *this;
}

}  // namespace dpcurator::privacy
