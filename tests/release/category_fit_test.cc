// Category fitting by Gaussian thresholding (issue 38; docs/privacy.md
// 2.11.2; core/release/category_fit.h): the sensitivity by brute force on
// random neighbouring datasets, the tail bound against the exact discrete
// Gaussian tail, the publication frequencies of a unique and a common value
// against the exact law, and the ledger's event.

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/privacy/conversion.h"
#include "core/privacy/events.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/rdp.h"
#include "core/release/category_fit.h"
#include "absl/strings/str_cat.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::release {
namespace {

using privacy::NeighbouringRelation;

// P(Z >= k) for Z ~ N_Z(0, sigma^2), by direct summation (sigma small).
double ExactTail(double sigma, int64_t k) {
  double total = 0.0;
  double tail = 0.0;
  const auto reach = static_cast<int64_t>(60 * sigma) + 60;
  for (int64_t z = -reach; z <= reach; ++z) {
    const double w = std::exp(-static_cast<double>(z * z) / (2 * sigma * sigma));
    total += w;
    if (z >= k) tail += w;
  }
  return tail / total;
}

std::vector<std::string> RandomRows(PublicRng& rng, int n, int levels) {
  std::vector<std::string> rows;
  for (int i = 0; i < n; ++i) {
    // Skewed: many values of count 1 and a few common ones.
    const uint64_t level = rng.NextU64() % static_cast<uint64_t>(levels);
    const uint64_t value = rng.NextU64() % 2 == 0 ? level % 4 : level;
    rows.push_back(absl::StrCat("v", value));
  }
  return rows;
}

// Brute force on random neighbouring pairs: on the values both datasets
// have, the count vectors differ by at most 1 (ADD_REMOVE) or sqrt(2)
// (REPLACE_ONE) in L2; values only one side has number at most 1 (or 1 per
// side) and have count exactly 1 there.
TEST(CategoryFitTest, SensitivityByBruteForceOnNeighbours) {
  PublicRng rng(38);
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<std::string> rows = RandomRows(rng, 1 + trial % 40, 12);
    for (NeighbouringRelation relation :
         {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
      std::vector<std::string> other = rows;
      const size_t i = rng.NextU64() % rows.size();
      if (relation == NeighbouringRelation::kAddRemove) {
        if (rng.NextU64() % 2 == 0) {
          other.erase(other.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          other.push_back(absl::StrCat("v", rng.NextU64() % 16));
        }
      } else {
        other[i] = absl::StrCat("v", rng.NextU64() % 16);
      }
      const auto a = CountCategoryValues(rows);
      const auto b = CountCategoryValues(other);
      double squared = 0.0;
      int only_a = 0;
      int only_b = 0;
      for (const auto& [value, count] : a) {
        const auto it = b.find(value);
        if (it == b.end()) {
          ++only_a;
          EXPECT_EQ(count, 1);
        } else {
          squared += static_cast<double>((count - it->second) * (count - it->second));
        }
      }
      for (const auto& [value, count] : b) {
        if (a.count(value) == 0) {
          ++only_b;
          EXPECT_EQ(count, 1);
        }
      }
      if (relation == NeighbouringRelation::kAddRemove) {
        EXPECT_LE(squared, 1.0);
        EXPECT_LE(only_a + only_b, 1);
        // A value only one side has means no common count moved.
        if (only_a + only_b == 1) {
          EXPECT_EQ(squared, 0.0);
        }
      } else {
        EXPECT_LE(squared, 2.0);
        EXPECT_LE(only_a, 1);
        EXPECT_LE(only_b, 1);
      }
    }
  }
}

// The bound is never below the exact tail and close to it
// where it matters (at most 35% above it from 1e-3 down: the first term
// f(k) / (sigma sqrt(2 pi)) is the excess), and the threshold search
// returns the smallest tau.
TEST(CategoryFitTest, TailBoundAgainstTheExactTailAndThreshold) {
  for (double sigma : {1.0, 2.0, 5.0, 13.0}) {
    for (int64_t k = -2; k <= static_cast<int64_t>(8 * sigma); ++k) {
      const double exact = ExactTail(sigma, k);
      const double bound = DiscreteGaussianTailBound(sigma, k);
      EXPECT_GE(bound, exact) << sigma << " " << k;
      if (exact < 1e-3 && exact > 1e-250) {
        EXPECT_LE(bound, exact * 1.35) << sigma << " " << k;
      }
    }
    for (double delta_0 : {1e-3, 1e-6, 1e-9, 1e-12}) {
      const int64_t tau = CategoryThresholdFor(sigma, delta_0).value();
      EXPECT_LE(CategoryThresholdDelta(sigma, tau), delta_0);
      if (tau > 2) {
        EXPECT_GT(CategoryThresholdDelta(sigma, tau - 1), delta_0);
      }
      EXPECT_LE(ExactTail(sigma, tau - 1), delta_0);
    }
  }
  EXPECT_EQ(CategoryThresholdFor(10.0, 1e-9).value(), 62);
  EXPECT_FALSE(CategoryThresholdFor(2.5, 1e-9).ok());
  EXPECT_FALSE(CategoryThresholdFor(0.0, 1e-9).ok());
  EXPECT_FALSE(CategoryThresholdFor(3.0, 0.0).ok());
}

// The noise, statistically: a unique value (count 1) is published with
// probability P(1 + Z >= tau) and a value of count c with P(c + Z >= tau),
// the exact discrete Gaussian law, within 4.5 binomial standard deviations
// over 20,000 seeded runs; and the output is sorted.
TEST(CategoryFitTest, PublicationFrequenciesMatchTheExactLaw) {
  const CategoryFitParams params{/*sigma=*/3.0, /*tau=*/7, /*max_categories=*/100};
  ASSERT_TRUE(ValidateCategoryFitParams(params).ok());
  std::vector<std::string> rows = {"unique"};
  for (int i = 0; i < 5; ++i) rows.push_back("five");
  for (int i = 0; i < 9; ++i) rows.push_back("nine");
  privacy::SeededNoiseSource noise(2038);
  constexpr int kRuns = 20000;
  std::map<std::string, int> published;
  for (int run = 0; run < kRuns; ++run) {
    const std::vector<std::string> list = FitCategoryList(rows, params, &noise);
    EXPECT_TRUE(std::is_sorted(list.begin(), list.end()));
    for (const std::string& value : list) ++published[value];
  }
  const std::map<std::string, int64_t> counts = {{"unique", 1}, {"five", 5}, {"nine", 9}};
  for (const auto& [value, count] : counts) {
    const double p = ExactTail(3.0, params.tau - count);
    const double sd = std::sqrt(kRuns * p * (1 - p));
    EXPECT_NEAR(published[value], kRuns * p, 4.5 * sd + 1) << value << " p=" << p;
  }
  // The unique value's probability is delta_0's (the bound is above it).
  EXPECT_GE(CategoryThresholdDelta(3.0, params.tau), ExactTail(3.0, params.tau - 1));
  EXPECT_GT(published["unique"], 0);
}

// Without noise: exactly the values at or above tau, sorted by bytes; the
// cap keeps the largest counts, ties to the smaller value, still sorted.
TEST(CategoryFitTest, ThresholdCapAndOrderWithoutNoise) {
  std::vector<std::string> rows;
  auto add = [&rows](const std::string& value, int count) {
    for (int i = 0; i < count; ++i) rows.push_back(value);
  };
  add("b", 5);
  add("a", 2);
  add("c", 9);
  add("d", 5);
  add("e", 1);
  privacy::ZeroNoiseSource zero;
  EXPECT_EQ(FitCategoryList(rows, {1.0, 2, 10}, &zero),
            (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(FitCategoryList(rows, {1.0, 5, 10}, &zero),
            (std::vector<std::string>{"b", "c", "d"}));
  EXPECT_EQ(FitCategoryList(rows, {1.0, 2, 2}, &zero), (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(FitCategoryList({}, {1.0, 2, 2}, &zero).empty());
  EXPECT_FALSE(ValidateCategoryFitParams({1.5, 2, 2}).ok());
  EXPECT_FALSE(ValidateCategoryFitParams({1.0, 1, 2}).ok());
  EXPECT_FALSE(ValidateCategoryFitParams({1.0, 2, 0}).ok());
}

// The ledger's event: the counts' discrete Gaussian at sigma / Delta, and
// delta_0 = P(1 + Z >= tau) (not doubled under REPLACE_ONE: each side's
// unique value is conditioned on its own side, docs/privacy.md 2.11.2).
TEST(CategoryFitTest, EventIsTheCountsGaussianWithDeltaZero) {
  const double sigma = 10.0;
  const int64_t tau = CategoryThresholdFor(sigma, 1e-9).value();
  const double delta_0 = CategoryThresholdDelta(sigma, tau);
  const auto add_remove = CategoryFitEvent(sigma, tau, NeighbouringRelation::kAddRemove).value();
  const auto replace_one =
      CategoryFitEvent(sigma, tau, NeighbouringRelation::kReplaceOne).value();
  EXPECT_EQ(privacy::ApproximateDelta(add_remove), delta_0);
  EXPECT_EQ(privacy::ApproximateDelta(replace_one), delta_0);
  EXPECT_EQ(privacy::ComputeRdp(add_remove, {2.0}).value()[0], 2.0 / (2 * sigma * sigma));
  EXPECT_NEAR(privacy::ComputeRdp(replace_one, {2.0}).value()[0], 2.0 * 2.0 / (2 * sigma * sigma),
              1e-15);
  // eps at 1e-5 is the discrete Gaussian's at 1e-5 - delta_0.
  const auto report = privacy::ComputeEpsilonReport(add_remove, 1e-5).value();
  EXPECT_EQ(report.approximate_delta, delta_0);
  EXPECT_LT(report.epsilon, 0.6);
  EXPECT_FALSE(CategoryFitEvent(sigma, 1, NeighbouringRelation::kAddRemove).ok());
}

// Calibration: the smallest whole sigma whose charge fits, judged by the
// ledger's path; one less does not fit.
TEST(CategoryFitTest, CalibrationIsConservativeAndMinimal) {
  for (NeighbouringRelation relation :
       {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
    for (double epsilon : {0.1, 1.0}) {
      const CalibratedCategoryFit fit =
          CalibrateCategoryFit(epsilon, 1e-5, 1e-6, relation).value();
      EXPECT_LE(fit.epsilon, epsilon);
      EXPECT_LE(fit.delta_0, 1e-6);
      EXPECT_EQ(fit.tau, CategoryThresholdFor(fit.sigma, 1e-6).value());
      if (fit.sigma > 1) {
        const int64_t tau = CategoryThresholdFor(fit.sigma - 1, 1e-6).value();
        const auto event = CategoryFitEvent(fit.sigma - 1, tau, relation).value();
        EXPECT_GT(privacy::ComputeEpsilonReport(event, 1e-5).value().epsilon, epsilon);
      }
    }
  }
  EXPECT_FALSE(CalibrateCategoryFit(1.0, 1e-5, 1e-5, NeighbouringRelation::kAddRemove).ok());
  EXPECT_FALSE(CalibrateCategoryFit(0.0, 1e-5, 1e-6, NeighbouringRelation::kAddRemove).ok());
}

// The engine over a stored open column (indices into a dictionary) is
// FitCategoryList over the rows' present values: the same list for the same
// seed, on random columns with missing cells, out-of-range indices, repeated
// dictionary entries and dictionary values no row holds; and it never
// publishes a value only the dictionary has, whatever the noise.
TEST(CategoryFitTest, OpenColumnEngineEqualsTheListOfItsValues) {
  PublicRng rng(3838);
  for (int trial = 0; trial < 200; ++trial) {
    OpenColumnValues column;
    const int size = 1 + static_cast<int>(rng.NextU64() % 12);
    for (int i = 0; i < size; ++i) {
      // Some entries repeat a value (the engine adds their counts).
      column.dictionary.push_back(absl::StrCat("v", rng.NextU64() % 10));
    }
    column.dictionary.push_back("only-in-the-dictionary");
    std::vector<std::string> present;
    const int n = static_cast<int>(rng.NextU64() % 60);
    for (int r = 0; r < n; ++r) {
      const uint64_t pick = rng.NextU64() % static_cast<uint64_t>(size + 3);
      int32_t index = static_cast<int32_t>(pick);
      if (pick == static_cast<uint64_t>(size)) index = kMissingOpenValue;
      if (pick == static_cast<uint64_t>(size) + 1) index = size + 7;  // out of range
      if (pick == static_cast<uint64_t>(size) + 2) index = 0;
      column.indices.push_back(index);
      if (index >= 0 && index < size) present.push_back(column.dictionary[index]);
    }
    const CategoryFitParams params{/*sigma=*/2.0, /*tau=*/1 + trial % 4 + 1,
                                   /*max_categories=*/1 + trial % 6};
    privacy::SeededNoiseSource a(trial);
    privacy::SeededNoiseSource b(trial);
    const std::vector<std::string> from_indices = FitOpenColumn(column, params, &a);
    EXPECT_EQ(from_indices, FitCategoryList(present, params, &b)) << "trial " << trial;
    EXPECT_TRUE(std::is_sorted(from_indices.begin(), from_indices.end()));
    EXPECT_EQ(std::count(from_indices.begin(), from_indices.end(), "only-in-the-dictionary"), 0);
    privacy::ZeroNoiseSource zero;
    EXPECT_EQ(FitOpenColumn(column, params, &zero), FitCategoryList(present, params, &zero));
  }
  // All missing, and no row at all: nothing published, no failure.
  privacy::SeededNoiseSource noise(1);
  EXPECT_TRUE(FitOpenColumn({{"a"}, {kMissingOpenValue, kMissingOpenValue}}, {1.0, 2, 5}, &noise)
                  .empty());
  EXPECT_TRUE(FitOpenColumn({}, {1.0, 2, 5}, &noise).empty());
}

}  // namespace
}  // namespace dpcurator::release
