#ifndef DPCURATOR_CORE_PRIVACY_EVENT_CODEC_H_
#define DPCURATOR_CORE_PRIVACY_EVENT_CODEC_H_

// The text form of a privacy event, as the ledger stores it (one row per
// charge or refund) and rebuilds its running totals from at start-up. A
// name, once shipped, keeps its meaning forever: an event whose accounting
// changes gets a new name ("discrete_gaussian" beside "gaussian", docs/
// privacy.md 4.2, 4.6, 4.7), so every stored ledger verifies unchanged.
//
//   gaussian(s)  discrete_gaussian(s)  grid_gaussian(s)
//   poisson(q,s)  wor(q,s)  discrete_poisson(q,s)  discrete_wor(q,s)
//   laplace(b)  rr(k,eps)  exponential(eps)  compose(e1;e2;...)  repeat(T;e)
//   partition(add_remove;a1;...;aK)  partition(replace_one;a1;...;aK;r1;...;rK)
//
// Numbers are written with 17 significant digits, so a decoded event has
// exactly the parameters (and the RDP curve) of the encoded one.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/privacy/events.h"

namespace dpcurator::privacy {

std::string EncodeEvent(const PrivacyEvent& event);
// DATA_LOSS for text that is not an event of the list above.
absl::StatusOr<PrivacyEvent> DecodeEvent(absl::string_view text);

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_EVENT_CODEC_H_
