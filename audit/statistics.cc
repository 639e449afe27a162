#include "audit/statistics.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpcurator::audit {
namespace {

// Continued fraction of the regularised incomplete beta function (Numerical
// Recipes 3rd ed., 6.4, the modified Lentz method).
inline constexpr int kBetaMaxIterations = 10000;
inline constexpr double kBetaEpsilon = 1e-15;
inline constexpr double kBetaTiny = 1e-300;
// Bisection for the Clopper-Pearson bound stops at this bracket width.
inline constexpr double kProportionTolerance = 1e-13;
// mu bisection for GaussianDpMuFor: relative bracket width.
inline constexpr double kMuTolerance = 1e-12;

double BetaContinuedFraction(double a, double b, double x) {
  const double qab = a + b;
  const double qap = a + 1.0;
  const double qam = a - 1.0;
  double c = 1.0;
  double d = 1.0 - qab * x / qap;
  if (std::fabs(d) < kBetaTiny) d = kBetaTiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= kBetaMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kBetaTiny) d = kBetaTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kBetaTiny) c = kBetaTiny;
    d = 1.0 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kBetaTiny) d = kBetaTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kBetaTiny) c = kBetaTiny;
    d = 1.0 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1.0) < kBetaEpsilon) break;
  }
  return h;
}

// I_x(a, b), a, b > 0, x in [0, 1].
double RegularizedIncompleteBeta(double a, double b, double x) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                           a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  if (x < (a + 1.0) / (a + b + 2.0)) return front * BetaContinuedFraction(a, b, x) / a;
  return 1.0 - front * BetaContinuedFraction(b, a, 1.0 - x) / b;
}

// P[Binomial(n, p) <= k] = I_{1-p}(n - k, k + 1) for k < n.
double BinomialCdf(int64_t k, int64_t n, double p) {
  if (k >= n) return 1.0;
  return RegularizedIncompleteBeta(static_cast<double>(n - k), static_cast<double>(k + 1), 1.0 - p);
}

// The standard normal CDF.
double NormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

absl::Status CheckScores(absl::Span<const double> scores, size_t minimum, const char* name) {
  if (scores.size() < minimum) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " needs at least ", minimum, " scores, got ", scores.size()));
  }
  for (const double s : scores) {
    if (!std::isfinite(s)) return absl::InvalidArgumentError(absl::StrCat(name, " must be finite"));
  }
  return absl::OkStatus();
}

// The bound of audit.md "From rates to epsilon" for given rates, floored at 0.
double EpsilonFromRates(double fpr, double fnr, double delta) {
  double best = 0.0;
  if (fnr > 0.0 && 1.0 - delta - fpr > 0.0) best = std::max(best, std::log((1.0 - delta - fpr) / fnr));
  if (fpr > 0.0 && 1.0 - delta - fnr > 0.0) best = std::max(best, std::log((1.0 - delta - fnr) / fpr));
  return best;
}

// Wilson score upper bound on a proportion (Wilson 1927) with normal
// quantile z: (c + z^2/2 + z sqrt(c (n - c) / n + z^2 / 4)) / (n + z^2).
double WilsonUpper(int64_t successes, int64_t trials, double z) {
  const double c = static_cast<double>(successes);
  const double n = static_cast<double>(trials);
  return std::min(1.0, (c + z * z / 2.0 + z * std::sqrt(c * (n - c) / n + z * z / 4.0)) / (n + z * z));
}

// The upper tail quantile of the standard normal, Phi^-1(1 - p), p in
// (0, 1/2], by bisection on erfc (only used to size the Wilson bound).
double NormalUpperQuantile(double p) {
  double lo = 0.0;
  double hi = 40.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (0.5 * std::erfc(mid / std::sqrt(2.0)) > p) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return hi;
}

struct Sample {
  double mean = 0.0;
  double sum_squares = 0.0;  // about the mean
};

Sample Moments(absl::Span<const double> x) {
  Sample s;
  s.mean = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
  for (const double v : x) s.sum_squares += (v - s.mean) * (v - s.mean);
  return s;
}

}  // namespace

absl::StatusOr<double> ClopperPearsonUpper(int64_t successes, int64_t trials, double confidence) {
  if (trials < 1 || successes < 0 || successes > trials) {
    return absl::InvalidArgumentError(absl::StrCat("Clopper-Pearson needs 0 <= successes <= trials and trials >= 1, got ",
                                                   successes, " of ", trials));
  }
  if (!(confidence > 0.0 && confidence < 1.0)) {
    return absl::InvalidArgumentError("Confidence must be in (0, 1)");
  }
  if (successes == trials) return 1.0;
  const double tail = 1.0 - confidence;
  if (successes == 0) {
    // Closed form: (1 - p)^n = tail.
    return -std::expm1(std::log(tail) / static_cast<double>(trials));
  }
  // BinomialCdf(k, n, p) decreases in p from 1 to 0: the root of = tail.
  // The upper end of the final bracket is returned (conservative).
  double lo = static_cast<double>(successes) / static_cast<double>(trials);
  double hi = 1.0;
  while (hi - lo > kProportionTolerance) {
    const double mid = 0.5 * (lo + hi);
    if (BinomialCdf(successes, trials, mid) > tail) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return hi;
}

absl::StatusOr<EpsilonLowerBound> EmpiricalEpsilonLowerBound(absl::Span<const double> scores_d0,
                                                             absl::Span<const double> scores_d1,
                                                             double delta, double alpha) {
  if (absl::Status s = CheckScores(scores_d0, 4, "scores_d0"); !s.ok()) return s;
  if (absl::Status s = CheckScores(scores_d1, 4, "scores_d1"); !s.ok()) return s;
  if (!(delta >= 0.0 && delta < 1.0)) return absl::InvalidArgumentError("Delta must be in [0, 1)");
  if (!(alpha > 0.0 && alpha < 1.0)) return absl::InvalidArgumentError("Alpha must be in (0, 1)");

  const size_t half0 = scores_d0.size() / 2;
  const size_t half1 = scores_d1.size() / 2;
  const absl::Span<const double> select0 = scores_d0.subspan(0, half0);
  const absl::Span<const double> select1 = scores_d1.subspan(0, half1);
  const absl::Span<const double> eval0 = scores_d0.subspan(half0);
  const absl::Span<const double> eval1 = scores_d1.subspan(half1);

  // Selection: sweep tau over every score of the first halves (and below
  // them all), scoring each tau by the bound itself with each rate replaced
  // by its Wilson upper bound at the same confidence on the first halves (a
  // closed-form stand-in for Clopper-Pearson, cheap at every tau). Plain
  // point estimates favour extreme thresholds whose tails hold a handful of
  // scores and then evaluate to nothing on the second halves; the
  // pessimistic estimate picks the tau that is likely to hold up. The choice
  // only has to be a function of the first halves for the second halves'
  // intervals to keep their confidence.
  const double z = NormalUpperQuantile(alpha / 2.0);
  std::vector<std::pair<double, int>> pooled;  // (score, 0 for d0 / 1 for d1)
  pooled.reserve(half0 + half1);
  for (const double s : select0) pooled.emplace_back(s, 0);
  for (const double s : select1) pooled.emplace_back(s, 1);
  std::sort(pooled.begin(), pooled.end());
  const int64_t n0 = static_cast<int64_t>(half0);
  const int64_t n1 = static_cast<int64_t>(half1);
  // tau below every score: all guessed D1; FP = half0, FN = 0.
  double best_tau = pooled.front().first - 1.0;
  double best_value =
      EpsilonFromRates(WilsonUpper(n0, n0, z), WilsonUpper(0, n1, z), delta);
  int64_t fp = n0;
  int64_t fn = 0;
  for (size_t i = 0; i < pooled.size(); ++i) {
    if (pooled[i].second == 0) {
      --fp;
    } else {
      ++fn;
    }
    // tau = pooled[i] only once every equal score is on the <= side.
    if (i + 1 < pooled.size() && pooled[i + 1].first == pooled[i].first) continue;
    const double value = EpsilonFromRates(WilsonUpper(fp, n0, z), WilsonUpper(fn, n1, z), delta);
    if (value > best_value) {
      best_value = value;
      best_tau = pooled[i].first;
    }
  }

  // Evaluation on the second halves, each rate at confidence 1 - alpha/2.
  const int64_t eval_fp = std::count_if(eval0.begin(), eval0.end(), [&](double s) { return s > best_tau; });
  const int64_t eval_fn = std::count_if(eval1.begin(), eval1.end(), [&](double s) { return s <= best_tau; });
  const double confidence = 1.0 - alpha / 2.0;
  absl::StatusOr<double> fpr_upper =
      ClopperPearsonUpper(eval_fp, static_cast<int64_t>(eval0.size()), confidence);
  if (!fpr_upper.ok()) return fpr_upper.status();
  absl::StatusOr<double> fnr_upper =
      ClopperPearsonUpper(eval_fn, static_cast<int64_t>(eval1.size()), confidence);
  if (!fnr_upper.ok()) return fnr_upper.status();

  EpsilonLowerBound bound;
  bound.threshold = best_tau;
  bound.fpr_upper = *fpr_upper;
  bound.fnr_upper = *fnr_upper;
  bound.evaluation_trials = static_cast<int64_t>(std::min(eval0.size(), eval1.size()));
  bound.epsilon = EpsilonFromRates(bound.fpr_upper, bound.fnr_upper, delta);
  return bound;
}

absl::StatusOr<double> FittedGaussianDpMu(absl::Span<const double> scores_d0,
                                          absl::Span<const double> scores_d1) {
  if (absl::Status s = CheckScores(scores_d0, 2, "scores_d0"); !s.ok()) return s;
  if (absl::Status s = CheckScores(scores_d1, 2, "scores_d1"); !s.ok()) return s;
  const Sample a = Moments(scores_d0);
  const Sample b = Moments(scores_d1);
  const double dof = static_cast<double>(scores_d0.size() + scores_d1.size() - 2);
  const double pooled_sd = std::sqrt((a.sum_squares + b.sum_squares) / dof);
  if (!(pooled_sd > 0.0)) {
    return absl::InvalidArgumentError("FittedGaussianDpMu needs scores with positive variance");
  }
  return (b.mean - a.mean) / pooled_sd;
}

double GaussianDpDelta(double epsilon, double mu) {
  // Dong, Roth, Su 2019, Corollary 2.13 (= Balle & Wang 2018, Thm. 8).
  const double first = NormalCdf(-epsilon / mu + mu / 2.0);
  // e^eps Phi(b) in log space, so a large eps meets an underflowed Phi(b)
  // as exp(-inf) = 0 rather than inf * 0.
  const double second = std::exp(epsilon + std::log(NormalCdf(-epsilon / mu - mu / 2.0)));
  return std::max(0.0, first - second);
}

absl::StatusOr<double> GaussianDpMuFor(double epsilon, double delta) {
  if (!(epsilon >= 0.0 && std::isfinite(epsilon))) {
    return absl::InvalidArgumentError("Epsilon must be finite and non-negative");
  }
  if (!(delta > 0.0 && delta < 1.0)) return absl::InvalidArgumentError("Delta must be in (0, 1)");
  // delta(eps; mu) increases in mu: bracket, then bisect keeping the
  // feasible (lower) end.
  double lo = 0.0;
  double hi = 1.0;
  while (GaussianDpDelta(epsilon, hi) <= delta) {
    lo = hi;
    hi *= 2.0;
    if (hi > 1e6) return absl::InvalidArgumentError("No finite mu for this (epsilon, delta)");
  }
  while (hi - lo > kMuTolerance * hi) {
    const double mid = 0.5 * (lo + hi);
    if (GaussianDpDelta(epsilon, mid) <= delta) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace dpcurator::audit
