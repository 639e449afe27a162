#include "core/embed/frequency_bounds.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace dpcurator::embed {

absl::Status ValidateLengthScale(double value, const std::string& name) {
  // Written so that NaN fails too.
  if (std::isfinite(value) && value >= kMinLengthScale && value <= kMaxLengthScale) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      name, " must be in [", kMinLengthScale, ", ", kMaxLengthScale, "] (units of the encoded row: ",
      "each numeric column's declared range is 1), got ", value,
      ". Outside this range the frequencies could overflow on some rows of the declared "
      "domain; leave it at 0 for the schema default."));
}

}  // namespace dpcurator::embed
