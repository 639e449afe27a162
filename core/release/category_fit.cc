#include "core/release/category_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/privacy/accounting.h"
#include "core/privacy/discrete_noise.h"
#include "core/util/status_macros.h"

namespace dpcurator::release {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

absl::Status ValidateSigma(double sigma) {
  if (!(sigma >= 1) || !(sigma <= static_cast<double>(privacy::kMaxDiscreteScale)) ||
      sigma != std::floor(sigma)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "The category fit's noise sigma must be a whole number in [1, ",
        privacy::kMaxDiscreteScale, "], got ", sigma));
  }
  return absl::OkStatus();
}

}  // namespace

double DiscreteGaussianTailBound(double sigma, int64_t k) {
  if (k <= 0) return 1.0;
  const double x = static_cast<double>(k) / sigma;
  // exp(-k^2 / (2 sigma^2)) / (sigma sqrt(2 pi)): the first term over the
  // normaliser's lower bound; then the integral over it, Q(k / sigma).
  const double first = std::exp(-0.5 * x * x) / (sigma * std::sqrt(2.0 * M_PI));
  const double integral = 0.5 * std::erfc(x / std::sqrt(2.0));
  const double bound = (first + integral) * (1.0 + 1e-12);
  return std::min(1.0, std::nextafter(bound, kInf));
}

double CategoryThresholdDelta(double sigma, int64_t tau) {
  return DiscreteGaussianTailBound(sigma, tau - 1);
}

absl::StatusOr<int64_t> CategoryThresholdFor(double sigma, double delta_0) {
  DPC_RETURN_IF_ERROR(ValidateSigma(sigma));
  if (!(delta_0 > 0) || !(delta_0 < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("delta_0 must be in (0, 1), got ", delta_0));
  }
  // The bound decreases in tau; at tau - 1 = 40 sigma it is below 1e-300
  // (every delta_0 a double above the subnormals can name).
  int64_t low = 2;
  int64_t high = 2 + static_cast<int64_t>(40 * sigma);
  if (CategoryThresholdDelta(sigma, high) > delta_0) {
    return absl::InvalidArgumentError(
        absl::StrCat("delta_0 ", delta_0, " is too small for any threshold"));
  }
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (CategoryThresholdDelta(sigma, mid) <= delta_0) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return low;
}

absl::StatusOr<privacy::PrivacyEvent> CategoryFitEvent(double sigma, int64_t tau,
                                                       privacy::NeighbouringRelation relation) {
  DPC_RETURN_IF_ERROR(ValidateSigma(sigma));
  if (tau < 2) return absl::InvalidArgumentError(absl::StrCat("tau must be >= 2, got ", tau));
  // Delta_2 = 1 (one count moves by 1) or sqrt(2) (one down, one up).
  const double sensitivity =
      relation == privacy::NeighbouringRelation::kAddRemove ? 1.0 : std::sqrt(2.0);
  DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent counts,
                       privacy::PrivacyEvent::DiscreteGaussian(sigma / sensitivity));
  return privacy::PrivacyEvent::Approximate(std::move(counts),
                                            CategoryThresholdDelta(sigma, tau));
}

absl::StatusOr<CalibratedCategoryFit> CalibrateCategoryFit(
    double epsilon, double delta, double delta_0, privacy::NeighbouringRelation relation) {
  if (!(epsilon > 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(absl::StrCat("epsilon must be > 0, got ", epsilon));
  }
  if (!(delta > 0) || !(delta < 1) || !(delta_0 > 0) || !(delta_0 < delta)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "delta_0 must be in (0, delta) and delta in (0, 1), got ", delta_0, " and ", delta));
  }
  // The ledger's charge for sigma, its tau and its delta_0.
  auto judge = [&](double sigma) -> absl::StatusOr<CalibratedCategoryFit> {
    DPC_ASSIGN_OR_RETURN(int64_t tau, CategoryThresholdFor(sigma, delta_0));
    DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent event, CategoryFitEvent(sigma, tau, relation));
    privacy::AccountantState state(relation);
    DPC_RETURN_IF_ERROR(state.Add(event));
    DPC_ASSIGN_OR_RETURN(privacy::EpsilonReport report, state.Epsilon(delta));
    return CalibratedCategoryFit{sigma, tau, CategoryThresholdDelta(sigma, tau), report.epsilon};
  };
  // The charge does not grow with sigma (the curve falls, and delta_0 stays
  // at most the target), so a doubling search, then bisection on integers,
  // keeping the feasible end.
  const auto max_sigma = static_cast<double>(privacy::kMaxDiscreteScale);
  double high = 1.0;
  for (;;) {
    DPC_ASSIGN_OR_RETURN(CalibratedCategoryFit fit, judge(high));
    if (fit.epsilon <= epsilon) break;
    if (high >= max_sigma) {
      return absl::InvalidArgumentError(absl::StrCat(
          "No noise is large enough for a category fit at epsilon ", epsilon));
    }
    high = std::min(max_sigma, 2 * high);
  }
  double low = std::max(1.0, std::floor(high / 2));  // infeasible unless high == 1
  while (high - low > 1) {
    const double mid = std::floor((low + high) / 2);
    DPC_ASSIGN_OR_RETURN(CalibratedCategoryFit fit, judge(mid));
    if (fit.epsilon <= epsilon) {
      high = mid;
    } else {
      low = mid;
    }
  }
  return judge(high);
}

std::map<std::string, int64_t> CountCategoryValues(absl::Span<const std::string> values) {
  std::map<std::string, int64_t> counts;
  for (const std::string& value : values) ++counts[value];
  return counts;
}

absl::Status ValidateCategoryFitParams(const CategoryFitParams& params) {
  DPC_RETURN_IF_ERROR(ValidateSigma(params.sigma));
  if (params.tau < 2) {
    return absl::InvalidArgumentError(absl::StrCat("tau must be >= 2, got ", params.tau));
  }
  if (params.max_categories < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_categories must be >= 1, got ", params.max_categories));
  }
  return absl::OkStatus();
}

namespace {

// The thresholding over each distinct value's count (> 0), in value order.
std::vector<std::string> ThresholdCounts(const std::map<std::string, int64_t>& counts,
                                         const CategoryFitParams& params,
                                         privacy::NoiseSource* noise) {
  const auto sigma = static_cast<uint64_t>(params.sigma);
  // (noisy count, value) of every value that passes. One draw per distinct
  // value, in value order; the draws' number is not part of the output.
  std::vector<std::pair<int64_t, const std::string*>> passed;
  for (const auto& [value, count] : counts) {
    const int64_t z = noise->adds_noise() ? privacy::DiscreteGaussian(noise, sigma) : 0;
    const int64_t noisy = count + z;
    if (noisy >= params.tau) passed.emplace_back(noisy, &value);
  }
  // Post-processing of the noisy counts: the largest max_categories.
  if (static_cast<int64_t>(passed.size()) > params.max_categories) {
    std::sort(passed.begin(), passed.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : *a.second < *b.second;
    });
    passed.resize(static_cast<size_t>(params.max_categories));
  }
  std::vector<std::string> published;
  published.reserve(passed.size());
  for (const auto& entry : passed) published.push_back(*entry.second);
  std::sort(published.begin(), published.end());
  return published;
}

}  // namespace

std::vector<std::string> FitCategoryList(absl::Span<const std::string> values,
                                         const CategoryFitParams& params,
                                         privacy::NoiseSource* noise) {
  return ThresholdCounts(CountCategoryValues(values), params, noise);
}

std::vector<std::string> FitOpenColumn(const OpenColumnValues& column,
                                       const CategoryFitParams& params,
                                       privacy::NoiseSource* noise) {
  // One counter per dictionary entry: a row adds 1 to its own entry (a
  // missing or out-of-range index to none), without a branch the output
  // shows: the comparison only selects which counter, never whether to go on.
  const auto size = static_cast<int64_t>(column.dictionary.size());
  std::vector<int64_t> by_index(column.dictionary.size() + 1, 0);
  for (const int32_t index : column.indices) {
    const bool present = index >= 0 && index < size;
    ++by_index[present ? static_cast<size_t>(index) : column.dictionary.size()];
  }
  // By value, as FitCategoryList counts: the same map, the same draw order.
  std::map<std::string, int64_t> counts;
  for (size_t i = 0; i < column.dictionary.size(); ++i) {
    if (by_index[i] > 0) counts[column.dictionary[i]] += by_index[i];
  }
  return ThresholdCounts(counts, params, noise);
}

}  // namespace dpcurator::release
