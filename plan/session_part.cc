#include "plan/session_part.h"

#include <utility>

#include "absl/status/status.h"
#include "core/util/status_macros.h"

namespace dpcurator::plan {

absl::StatusOr<privacy::PrivacyEvent> SessionEvent(const privacy::PrivacyEvent& step_event,
                                                   int64_t steps) {
  return privacy::PrivacyEvent::SelfCompose(step_event, steps);
}

absl::StatusOr<privacy::PrivacyEvent> PartitionedSessionsEvent(
    absl::Span<const privacy::PrivacyEvent> step_events, absl::Span<const int64_t> steps) {
  if (step_events.size() != steps.size()) {
    return absl::InvalidArgumentError("one step count per part of a partitioned group");
  }
  std::vector<privacy::PrivacyEvent> parts;
  parts.reserve(step_events.size());
  for (size_t k = 0; k < step_events.size(); ++k) {
    if (steps[k] == 0) {
      DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent nothing, privacy::PrivacyEvent::Compose({}));
      parts.push_back(std::move(nothing));
    } else {
      DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent ran, SessionEvent(step_events[k], steps[k]));
      parts.push_back(std::move(ran));
    }
  }
  return privacy::PrivacyEvent::PartitionedAddRemove(std::move(parts));
}

}  // namespace dpcurator::plan
