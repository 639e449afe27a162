#include "core/release/mechanism_record.h"

#include "absl/status/status.h"
#include "core/util/status_macros.h"

namespace dpcurator::release {

absl::StatusOr<privacy::PrivacyEvent> OneShotEvent(const GaussianMechanismRecord& record) {
  if (record.noise_multipliers.empty()) {
    return absl::InternalError("a release kind planned no Gaussian release");
  }
  std::vector<privacy::PrivacyEvent> events;
  events.reserve(record.noise_multipliers.size());
  for (double s : record.noise_multipliers) {
    DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent event, privacy::PrivacyEvent::GridGaussian(s));
    events.push_back(std::move(event));
  }
  if (events.size() == 1) return events.front();
  return privacy::PrivacyEvent::Compose(std::move(events));
}

}  // namespace dpcurator::release
