#ifndef DPCURATOR_AUDIT_STATISTICS_H_
#define DPCURATOR_AUDIT_STATISTICS_H_

// The statistics of an empirical privacy audit (../shared/design/audit.md,
// docs/privacy.md "Empirical audit"): two samples of a distinguisher's score,
// one from runs of a mechanism on D0 and one on its neighbour D1, turned into
//   * a rigorous lower bound on epsilon at a stated delta, from one-sided
//     Clopper-Pearson upper bounds on the false-positive and false-negative
//     rates of a threshold test (the threshold is chosen on the first half of
//     each sample and evaluated on the second, so choosing it costs no
//     confidence), and
//   * the fitted Gaussian-DP mu_emp (Dong, Roth, Su 2019), the tightness
//     number to set beside the mu the accounting implies.
// Pure functions of the scores: no mechanism, no randomness.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dpcurator::audit {

// One-sided Clopper-Pearson upper confidence bound on a binomial proportion:
// the p with P[Binomial(trials, p) <= successes] = 1 - confidence (1 when
// successes == trials). 0 <= successes <= trials, trials >= 1, confidence in
// (0, 1).
absl::StatusOr<double> ClopperPearsonUpper(int64_t successes, int64_t trials, double confidence);

// The epsilon lower bound of a threshold test "guess D1 when score > tau".
struct EpsilonLowerBound {
  double epsilon = 0.0;  // >= 0; 0 when no threshold shows anything
  double threshold = 0.0;
  // Clopper-Pearson upper bounds, each at confidence 1 - alpha/2, on the
  // evaluation halves.
  double fpr_upper = 1.0;
  double fnr_upper = 1.0;
  int64_t evaluation_trials = 0;  // per side
};

// Picks tau on the first half of each sample (the tau maximising an
// estimate of the bound below on the first halves, each rate replaced by its
// Wilson upper bound so that thin tails are not chosen), then on the second
// halves, with FPR and FNR
// replaced by their Clopper-Pearson upper bounds at confidence 1 - alpha/2
// each, returns the larger of
//   log((1 - delta - FPR) / FNR)  and  log((1 - delta - FNR) / FPR)
// (audit.md "From rates to epsilon"), floored at 0. Holds with confidence
// 1 - alpha. Each sample needs at least 4 scores; scores must be finite.
absl::StatusOr<EpsilonLowerBound> EmpiricalEpsilonLowerBound(absl::Span<const double> scores_d0,
                                                             absl::Span<const double> scores_d1,
                                                             double delta, double alpha = 0.05);

// mu_emp: (mean(d1) - mean(d0)) / pooled standard deviation, the mu of the
// Gaussian trade-off curve whose two normals have the samples' means and
// variance. Exact for a projection of a Gaussian mechanism's output onto the
// canary's direction (audit.md "Gaussian DP"). At least 2 scores each.
absl::StatusOr<double> FittedGaussianDpMu(absl::Span<const double> scores_d0,
                                          absl::Span<const double> scores_d1);

// delta(eps) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).
double GaussianDpDelta(double epsilon, double mu);

// The mu of the GDP curve that is (epsilon, delta)-DP with equality: the
// largest mu with GaussianDpDelta(epsilon, mu) <= delta (bisection).
absl::StatusOr<double> GaussianDpMuFor(double epsilon, double delta);

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_STATISTICS_H_
