#ifndef DPCURATOR_CORE_PRIVACY_DISCRETE_NOISE_H_
#define DPCURATOR_CORE_PRIVACY_DISCRETE_NOISE_H_

// Grid-snapped discrete noise (PRIVACY.md "Noise generation";
// docs/privacy.md sec. 4). Every released number is an exact multiple of a
// power-of-two grid g, and its noise is g times an exact discrete Gaussian or
// discrete Laplace integer, so the set of values a release can take does not
// depend on the data's low-order bits (Mironov 2012).
//
// Two layers:
//  * exact samplers over the integers (Canonne, Kamath & Steinke 2020, "The
//    Discrete Gaussian for Differential Privacy", Algorithms 1-3), driven
//    only by NoiseSource::NextU64, in exact integer arithmetic (no floating
//    point at all inside the samplers);
//  * the grid: GridNoise fixes g and the integer scale from public
//    parameters only, with the rounding distance added to the sensitivity,
//    and AddGridNoise snaps and noises a vector in place.

#include <cstdint>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/privacy/noise_source.h"

namespace dpcurator::privacy {

using uint128 = unsigned __int128;

// --- Exact samplers (CKS20) ------------------------------------------------

// Uniform integer in [0, bound), bound >= 1, by rejection on the bits of
// bound - 1 (exact: no modulo bias).
uint128 UniformBelow(NoiseSource* noise, uint128 bound);

// Bernoulli(num / den), 0 <= num <= den, den >= 1.
bool BernoulliRatio(NoiseSource* noise, uint128 num, uint128 den);

// Bernoulli(exp(-num / den)), num >= 0, den >= 1 (CKS20 Algorithm 1: the
// series of Bernoulli(gamma / k) draws for gamma in [0, 1], and floor(gamma)
// Bernoulli(exp(-1)) draws followed by the fractional part for gamma > 1).
bool BernoulliExpNeg(NoiseSource* noise, uint128 num, uint128 den);

// Largest integer scale the samplers accept: keeps every intermediate of the
// discrete Gaussian below 2^128 (see DiscreteGaussian in the .cc).
inline constexpr uint64_t kMaxDiscreteScale = uint64_t{1} << 31;

// Discrete Laplace: P(x) proportional to exp(-|x| / scale) on the integers,
// scale in [1, kMaxDiscreteScale] (CKS20 Algorithm 2 with s = 1, t = scale).
int64_t DiscreteLaplace(NoiseSource* noise, uint64_t scale);

// Discrete Gaussian: P(x) proportional to exp(-x^2 / (2 sigma^2)) on the
// integers, sigma in [1, kMaxDiscreteScale] (CKS20 Algorithm 3, proposal a
// discrete Laplace of scale t = sigma + 1).
int64_t DiscreteGaussian(NoiseSource* noise, uint64_t sigma);

// --- The grid ------------------------------------------------------------

// The grid sits this many binary orders below the noise scale: scale / g is
// in [2^20, 2^21). Why 20 (docs/privacy.md 4.2): the discretisation changes
// the noise by a relative 2^-20 (ceil to an integer scale) plus
// sqrt(d) * 2^-20 * s (rounding distance in the sensitivity), negligible
// for every release we make; integer scales stay below 2^22 (far inside the
// samplers' 2^31); and released values stay exact doubles up to
// |value| < 2^52 g, i.e. about 2^31 = 2.1e9 noise standard deviations.
inline constexpr int kGridBitsBelowScale = 20;

// A value is snapped only while |value / g| <= 2^52: then value / g rounds to
// an integer m with |m + Z| < 2^53 for any noise Z we can draw, and g (m + Z)
// is an exact double.
inline constexpr double kMaxGridUnits = 0x1.0p52;

enum class GridNoiseKind { kGaussian, kLaplace };

// Discrete noise on a power-of-two grid, fixed by public parameters only.
struct GridNoise {
  GridNoiseKind kind = GridNoiseKind::kGaussian;
  int grid_exponent = 0;   // g = 2^grid_exponent
  double grid = 1.0;       // g
  uint64_t scale_units = 1;  // sigma (Gaussian) or b (Laplace) in grid units
  // The requested continuous-equivalent scale after the rounding distance is
  // added to the sensitivity (before rounding up to whole grid units).
  double inflated_scale = 0.0;
  // scale_units * g >= inflated_scale: the scale of the noise actually drawn.
  double scale() const { return grid * static_cast<double>(scale_units); }
};

// g = 2^(floor(log2 nominal_scale) - kGridBitsBelowScale); nominal_scale
// finite and positive, and g a normal double with g * 2^53 finite.
absl::StatusOr<int> GridExponentFor(double nominal_scale);

// Noise of continuous-equivalent `scale` on the grid 2^grid_exponent:
// scale_units = ceil(scale / g) (after a 2^-48 relative margin that absorbs
// the rounding of the caller's floating-point scale formula), at least 1 and
// at most kMaxDiscreteScale.
absl::StatusOr<GridNoise> MakeGridNoise(GridNoiseKind kind, int grid_exponent, double scale);

// The Gaussian mechanism with noise multiplier s on a d-coordinate vector
// of L2 sensitivity Delta, snapped to the grid of s * Delta: snapping moves
// each coordinate by at most g/2, so the snapped vector has L2 sensitivity
// at most Delta + sqrt(d) g and the noise is inflated to
// sigma = s (Delta + sqrt(d) g). Its RDP curve is still alpha / (2 s^2)
// (docs/privacy.md 4.2), so the ledger's event is unchanged.
absl::StatusOr<GridNoise> GridGaussianNoise(double noise_multiplier, double l2_sensitivity,
                                            int64_t dimension);

// The Laplace mechanism with pure epsilon on a d-coordinate vector of L1
// sensitivity Delta_1, on the grid of Delta_1 / epsilon: L1 sensitivity of the
// snapped vector at most Delta_1 + d g, so b = (Delta_1 + d g) / epsilon.
absl::StatusOr<GridNoise> GridLaplaceNoise(double epsilon, double l1_sensitivity,
                                           int64_t dimension);

// g * round(value / g) for g = 2^grid_exponent (ties away from zero), exact
// when |value / g| <= kMaxGridUnits. The rounding moves a value by at most
// g/2.
double SnapToGrid(double value, int grid_exponent);

// Snaps every value to g * round(value / g) and adds g * Z with Z i.i.d.
// discrete Gaussian (sigma = scale_units) or discrete Laplace
// (b = scale_units); the results are exact multiples of g. A value with
// |value / g| > kMaxGridUnits is first clamped to +-kMaxGridUnits grid units
// (non-expansive: the sensitivity bound holds, and no data-dependent failure
// exists). Fails, before touching `values`, if a value is not finite; the
// message names no coordinate and no value.
// A source with adds_noise() == false (ZeroNoiseSource) leaves `values`
// exactly as they are, neither snapped nor noised: tests of release logic
// compare against the exact statistic.
absl::Status AddGridNoise(const GridNoise& noise_spec, Eigen::Ref<Eigen::VectorXd> values,
                          NoiseSource* noise);

// GridGaussianNoise for values.size() coordinates, then AddGridNoise.
// Returns the grid and scale used (for the release's record).
absl::StatusOr<GridNoise> AddGridGaussianNoise(Eigen::Ref<Eigen::VectorXd> values,
                                               double noise_multiplier, double l2_sensitivity,
                                               NoiseSource* noise);

// GridLaplaceNoise for values.size() coordinates, then AddGridNoise.
absl::StatusOr<GridNoise> AddGridLaplaceNoise(Eigen::Ref<Eigen::VectorXd> values, double epsilon,
                                              double l1_sensitivity, NoiseSource* noise);

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_DISCRETE_NOISE_H_
