#ifndef DPCURATOR_CORE_RELEASE_CATEGORY_FIT_H_
#define DPCURATOR_CORE_RELEASE_CATEGORY_FIT_H_

// Category fitting (issue 38; docs/privacy.md 2.11.2): a steward without a
// public category list gets one from the rows by Gaussian thresholding
// (the "stability-based histogram": Korolova et al. 2009, Bun, Nissim &
// Stemmer 2016; its Gaussian form, Wilkins, Kifer, Zhang & Karrer 2024),
// charged to the dataset's ledger as one approximate event.
//
// The mechanism: count every distinct value of the column (each row adds 1
// to one value's count; missing values count nowhere), add independent
// discrete Gaussian noise Z ~ N_Z(0, sigma^2) to each count, and publish
// the values whose noisy count reaches the integer threshold tau, sorted
// by value (bytes), never in an order of their counts.
//  * A value present in both neighbours: its count moves by at most 1 (one
//    row, one value), so on the values both neighbours have the counts are
//    a discrete Gaussian mechanism of L2 sensitivity 1 (ADD_REMOVE) or
//    sqrt(2) (REPLACE_ONE, one value down and another up): RDP
//    alpha / (2 s^2), s = sigma / Delta (Canonne, Kamath & Steinke 2020,
//    Thm. 4; integer counts, integer shifts).
//  * A value only one neighbour has has count exactly 1 there, and is
//    published with probability P(1 + Z >= tau) <= delta_0. Conditioned on
//    its not being published (probability 1 - that, the same on both
//    sides), the two laws are the first bullet's: the event is
//    delta_0-approximate RDP (events.h ApproximateEvent), under REPLACE_ONE
//    too (each side's own unique value, each side's own condition).
// The list's length is itself part of the output (no fixed shape exists);
// CategoryFitEvent is the ledger's charge.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/privacy/events.h"
#include "core/privacy/noise_source.h"

namespace dpcurator::release {

// An upper bound on P(Z >= k) for Z ~ N_Z(0, sigma^2), the discrete
// Gaussian on the integers, sigma >= 1: 1 for k <= 0, otherwise
//   exp(-k^2 / (2 sigma^2)) / (sigma sqrt(2 pi)) + Q(k / sigma)
// (Q the standard normal upper tail), from the normaliser
// sum_z exp(-z^2 / (2 sigma^2)) >= sigma sqrt(2 pi) (Poisson summation:
// it equals sigma sqrt(2 pi) sum_n exp(-2 pi^2 sigma^2 n^2), every term > 0)
// and the decreasing terms' sum from k <= first term + integral from k.
// Rounded up (a relative 1e-12 margin over erfc's error), at most 1.
double DiscreteGaussianTailBound(double sigma, int64_t k);

// delta_0 for noise sigma and threshold tau: DiscreteGaussianTailBound(
// sigma, tau - 1), the chance that a value of count 1 is published.
double CategoryThresholdDelta(double sigma, int64_t tau);

// The smallest integer tau >= 2 with CategoryThresholdDelta(sigma, tau) <=
// delta_0. sigma an integer in [1, 2^31], delta_0 in (0, 1).
absl::StatusOr<int64_t> CategoryThresholdFor(double sigma, double delta_0);

// The ledger's event: Approximate(DiscreteGaussian(sigma / Delta),
// CategoryThresholdDelta(sigma, tau)), Delta = 1 (ADD_REMOVE) or sqrt(2)
// (REPLACE_ONE).
absl::StatusOr<privacy::PrivacyEvent> CategoryFitEvent(double sigma, int64_t tau,
                                                       privacy::NeighbouringRelation relation);

// The smallest whole sigma (and its tau for delta_0) whose CategoryFitEvent
// alone, on a fresh `relation` ledger, is charged at most `epsilon` at
// `delta`, judged by the ledger's own path (AccountantState: Add, Epsilon;
// so at delta - delta_0). delta_0 in (0, delta); epsilon finite, > 0.
// InvalidArgument when no sigma up to kMaxDiscreteScale suffices.
struct CalibratedCategoryFit {
  double sigma = 1.0;
  int64_t tau = 2;
  double delta_0 = 0.0;  // CategoryThresholdDelta(sigma, tau)
  double epsilon = 0.0;  // the ledger's charge for it alone
};
absl::StatusOr<CalibratedCategoryFit> CalibrateCategoryFit(
    double epsilon, double delta, double delta_0, privacy::NeighbouringRelation relation);

// Each distinct value's count (the mechanism's input; public for the
// brute-force test).
std::map<std::string, int64_t> CountCategoryValues(absl::Span<const std::string> values);

struct CategoryFitParams {
  // Integer noise scale, in [1, 2^31] (the exact sampler's range).
  double sigma = 1.0;
  // Publish a value when count + Z >= tau; tau >= 2.
  int64_t tau = 2;
  // At most this many values are published: when more pass, those of the
  // largest noisy counts (ties: the smaller value), post-processing of the
  // noisy counts (docs/privacy.md 2.11.2). >= 1.
  int64_t max_categories = 1;
};

// Validates the parameters (before admission: public values only).
absl::Status ValidateCategoryFitParams(const CategoryFitParams& params);

// The mechanism on one column's present values (one entry per row with a
// value; missing values excluded by the caller). Total once `params`
// validated: never fails, returns the published values sorted by bytes.
// A source with adds_noise() == false (tests of logic) adds no noise.
std::vector<std::string> FitCategoryList(absl::Span<const std::string> values,
                                         const CategoryFitParams& params,
                                         privacy::NoiseSource* noise);

// One open column's stored values (issue 38; server/store.h
// Store::LoadOpenColumn): the distinct values in the order the store first
// saw them, and each row's index into them (kMissingOpenValue for a missing
// cell), in upload order. The shared contract between the store, which
// keeps them, and the category fit, which counts them.
inline constexpr int32_t kMissingOpenValue = -1;
struct OpenColumnValues {
  std::vector<std::string> dictionary;
  std::vector<int32_t> indices;
};

// The mechanism over a stored open column (FitCategoryList's law and draws,
// counted by dictionary index so no string is built per row): each index's
// count, kMissingOpenValue and any index outside the dictionary counting
// nowhere; entries that name the same value are one value (their counts
// add); a dictionary value no row holds is no value of the column (no draw,
// never published, as FitCategoryList on the rows' values). Equal to
// FitCategoryList of the rows' present values for the same noise source
// state. Total once `params` validated: never fails.
std::vector<std::string> FitOpenColumn(const OpenColumnValues& column,
                                       const CategoryFitParams& params,
                                       privacy::NoiseSource* noise);

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_CATEGORY_FIT_H_
