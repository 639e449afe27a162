#ifndef DPCURATOR_CORE_UTIL_VALIDATION_H_
#define DPCURATOR_CORE_UTIL_VALIDATION_H_

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpcurator {

// Uniform validation messages, used by every Builder so that tests can match
// them ("Epsilon must be finite and positive, got -1").

inline absl::Status ValidateFinitePositive(double value, const std::string& name) {
  if (!std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be finite and positive, got ", value));
  }
  return absl::OkStatus();
}

inline absl::Status ValidateFiniteNonNegative(double value, const std::string& name) {
  if (!std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be finite and non-negative, got ", value));
  }
  return absl::OkStatus();
}

inline absl::Status ValidateInOpenUnitInterval(double value, const std::string& name) {
  if (!std::isfinite(value) || value <= 0 || value >= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be in (0, 1), got ", value));
  }
  return absl::OkStatus();
}

inline absl::Status ValidateInUnitInterval(double value, const std::string& name) {
  if (!std::isfinite(value) || value < 0 || value > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be in [0, 1], got ", value));
  }
  return absl::OkStatus();
}

inline absl::Status ValidatePositiveInt(long long value, const std::string& name) {
  if (value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be a positive integer, got ", value));
  }
  return absl::OkStatus();
}

}  // namespace dpcurator

#endif  // DPCURATOR_CORE_UTIL_VALIDATION_H_
