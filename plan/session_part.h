#ifndef DPCURATOR_PLAN_SESSION_PART_H_
#define DPCURATOR_PLAN_SESSION_PART_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "core/privacy/events.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::plan {

// One part of a partitioned open: the level of the label column whose
// rows its steps read, its resolved params, step event (ADD_REMOVE:
// Poisson-subsampled) and reservation.
struct SessionPart {
  int32_t level = 0;
  v1::SessionParams params;
  std::optional<privacy::PrivacyEvent> step_event;
  int64_t steps = 0;
  double noise_multiplier = 0.0;
};

// What one ordinary session is charged (docs/privacy.md 3.4): its step
// event composed `steps` times (PrivacyEvent::SelfCompose; T steps of a
// subsampled Gaussian, 4.7). The ledger reserves it at open with the
// reserved steps, refunds that exact event and charges it again with the
// steps run at close; the empirical audit charges its session cases with
// it, so the two cannot drift apart.
absl::StatusOr<privacy::PrivacyEvent> SessionEvent(const privacy::PrivacyEvent& step_event,
                                                   int64_t steps);

// What a partitioned group is charged (docs/privacy.md 3.7): parallel
// composition (PrivacyEvent::PartitionedAddRemove) of each part's step
// event composed steps[k] times; a part that ran 0 steps is the empty
// composition (it released nothing). The ledger charges it at open with
// the reserved steps and settles it with the steps run at the last
// member's close; the empirical audit charges its partitioned-session case
// with it, so the two cannot drift apart.
absl::StatusOr<privacy::PrivacyEvent> PartitionedSessionsEvent(
    absl::Span<const privacy::PrivacyEvent> step_events, absl::Span<const int64_t> steps);

}  // namespace dpcurator::plan

#endif  // DPCURATOR_PLAN_SESSION_PART_H_
