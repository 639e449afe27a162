#ifndef DPCURATOR_CORE_RELEASE_MECHANISM_RECORD_H_
#define DPCURATOR_CORE_RELEASE_MECHANISM_RECORD_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/privacy/events.h"

namespace dpcurator::release {

// What a one-shot release's mechanism does, as far as accounting sees it:
// one grid Gaussian release per entry, each with its noise multiplier
// s = noise std / L2 sensitivity (docs/privacy.md 2.2, 4.2). A kind states
// it twice: planned, from the resolved parameters before any row is read
// (what the ledger charges), and ran, from the engine's own record (what the
// artefact was made with). The two must be equal or nothing is released.
struct GaussianMechanismRecord {
  std::vector<double> noise_multipliers;

  bool operator==(const GaussianMechanismRecord&) const = default;
};

// The accounting event of a record: one GridGaussian event (docs/privacy.md
// 4.6: alone on a dataset it gets the discrete Gaussian's own privacy
// profile, otherwise RDP alpha / (2 s^2)) per release, composed when there
// are several. The only place a one-shot release's event is built.
absl::StatusOr<privacy::PrivacyEvent> OneShotEvent(const GaussianMechanismRecord& record);

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_MECHANISM_RECORD_H_
