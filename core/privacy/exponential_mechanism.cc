#include "core/privacy/exponential_mechanism.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::privacy {
namespace {

absl::Status Validate(absl::Span<const double> qualities, double epsilon, double sensitivity) {
  if (qualities.empty()) {
    return absl::InvalidArgumentError("the exponential mechanism needs at least one candidate");
  }
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(epsilon, "Epsilon"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(sensitivity, "Sensitivity"));
  for (double q : qualities) {
    // No index or value in the message: scores are computed from private rows.
    if (!std::isfinite(q)) {
      return absl::InternalError("a quality score of the exponential mechanism is not finite");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> ExponentialMechanismSelect(absl::Span<const double> qualities,
                                               double epsilon, double sensitivity,
                                               NoiseSource* noise) {
  DPC_RETURN_IF_ERROR(Validate(qualities, epsilon, sensitivity));
  const double scale = epsilon / (2.0 * sensitivity);
  int best = 0;
  double best_value = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < qualities.size(); ++i) {
    double value = scale * qualities[i];
    if (noise->adds_noise()) {
      // U in (0, 1) never 0 (NoiseSource::UniformOpen), so both logs finite.
      value += -std::log(-std::log(noise->UniformOpen()));
    }
    if (value > best_value) {
      best_value = value;
      best = static_cast<int>(i);
    }
  }
  return best;
}

absl::StatusOr<std::vector<double>> ExponentialMechanismProbabilities(
    absl::Span<const double> qualities, double epsilon, double sensitivity) {
  DPC_RETURN_IF_ERROR(Validate(qualities, epsilon, sensitivity));
  const double scale = epsilon / (2.0 * sensitivity);
  const double top = *std::max_element(qualities.begin(), qualities.end());
  std::vector<double> p(qualities.size());
  double sum = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = std::exp(scale * (qualities[i] - top));
    sum += p[i];
  }
  for (double& v : p) v /= sum;
  return p;
}

}  // namespace dpcurator::privacy
