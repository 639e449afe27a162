#ifndef DPCURATOR_CORE_EMBED_FREQUENCY_BOUNDS_H_
#define DPCURATOR_CORE_EMBED_FREQUENCY_BOUNDS_H_

// Data-independent bounds on the parameters of the frequency feature maps
// (random Fourier features, characteristic functions), checked before a
// release is admitted (docs/privacy.md 6.2). Inside these bounds no row of
// the declared domain can produce a non-finite feature, so the engine has no
// data-dependent failure left to report.

#include <string>

#include "absl/status/status.h"

namespace dpcurator::embed {

// Largest |z| of PublicRng::Normal (Box-Muller with u1 >= 2^-53, so the
// radius is at most sqrt(-2 ln 2^-53) = sqrt(106 ln 2) = 8.5717...): every
// drawn frequency satisfies |w| <= kMaxStandardNormalDraw / length_scale.
inline constexpr double kMaxStandardNormalDraw = 8.5718;

// Accepted length-scales, in the units of the encoded row (numeric columns
// scaled to [0, 1] by their declared bounds, one-hot blocks in {0, 1}).
// With l >= kMinLengthScale every frequency is at most 8.58e6 in magnitude,
// and a phase w.x over an encoded row of d < 2^31 coordinates in [0, 1] is
// at most 8.58e6 * 2^31 < 2^54: finite, so cos and sin are finite and the
// features keep their norm bound. Scales below 1e-6 of a column's declared
// range (or above 1e6 ranges) carry no signal anyway: the kernel is a delta
// (or a constant) at the resolution of the data.
inline constexpr double kMinLengthScale = 1e-6;
inline constexpr double kMaxLengthScale = 1e6;

// OK when `value` lies in [kMinLengthScale, kMaxLengthScale]; otherwise
// INVALID_ARGUMENT naming `name`, the accepted range and why.
absl::Status ValidateLengthScale(double value, const std::string& name);

}  // namespace dpcurator::embed

#endif  // DPCURATOR_CORE_EMBED_FREQUENCY_BOUNDS_H_
