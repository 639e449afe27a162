#include "core/privacy/discrete_noise.h"

#include <bit>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/privacy/grid_gaussian.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::privacy {
namespace {

constexpr uint128 kMaxUint128 = ~uint128{0};

// Number of bits needed to write x (0 for x = 0).
int BitWidth(uint128 x) {
  const uint64_t hi = static_cast<uint64_t>(x >> 64);
  if (hi != 0) return 128 - std::countl_zero(hi);
  return 64 - std::countl_zero(static_cast<uint64_t>(x));
}

// The samplers' preconditions are guaranteed by MakeGridNoise; a violation
// is a programming error, and noise from a wrong scale must never be
// released, so fail closed as SecureNoiseSource does.
void CheckScale(uint64_t scale, const char* sampler) {
  if (scale == 0 || scale > kMaxDiscreteScale) {
    std::fprintf(stderr, "fatal: %s scale %llu outside [1, 2^31]\n", sampler,
                 static_cast<unsigned long long>(scale));
    std::abort();
  }
}

// Bernoulli(exp(-num/den)) for num <= den, i.e. gamma in [0, 1]: CKS20
// Algorithm 1. Draw A_k ~ Bernoulli(gamma / k) for k = 1, 2, ... until the
// first failure at K; P[K > k] = gamma^k / k!, so P[K odd] = exp(-gamma).
bool BernoulliExpNegAtMostOne(NoiseSource* noise, uint128 num, uint128 den) {
  uint64_t k = 1;
  while (true) {
    // Bernoulli(num / (den k)); when den * k would overflow, the same
    // probability as the independent product Bernoulli(1/k) Bernoulli(num/den).
    const bool a = den <= kMaxUint128 / k
                       ? BernoulliRatio(noise, num, den * k)
                       : UniformBelow(noise, k) == 0 && BernoulliRatio(noise, num, den);
    if (!a) break;
    ++k;
  }
  return (k & 1) == 1;
}

}  // namespace

uint128 UniformBelow(NoiseSource* noise, uint128 bound) {
  if (bound <= 1) return 0;
  const uint128 max = bound - 1;
  const int bits = BitWidth(max);
  // Draw exactly `bits` uniform bits and reject values above `max`: every
  // accepted value has the same probability, and a draw is accepted with
  // probability > 1/2.
  while (true) {
    uint128 x;
    if (bits <= 64) {
      x = noise->NextU64() >> (64 - bits);
    } else {
      const uint128 hi = noise->NextU64() >> (128 - bits);
      x = (hi << 64) | noise->NextU64();
    }
    if (x <= max) return x;
  }
}

bool BernoulliRatio(NoiseSource* noise, uint128 num, uint128 den) {
  if (num == 0) return false;
  if (num >= den) return true;
  return UniformBelow(noise, den) < num;
}

bool BernoulliExpNeg(NoiseSource* noise, uint128 num, uint128 den) {
  // CKS20 Algorithm 1, gamma > 1: exp(-gamma) = exp(-1)^floor(gamma) *
  // exp(-(gamma - floor(gamma))), one independent draw per factor, stopping at
  // the first failure.
  const uint128 whole = num / den;
  for (uint128 i = 0; i < whole; ++i) {
    if (!BernoulliExpNegAtMostOne(noise, 1, 1)) return false;
  }
  return BernoulliExpNegAtMostOne(noise, num % den, den);
}

namespace {

// DiscreteLaplace without the public range check: DiscreteGaussian proposes
// with t = sigma + 1, one above kMaxDiscreteScale at the top of its range.
int64_t DiscreteLaplaceWithScale(NoiseSource* noise, uint128 t) {
  // CKS20 Algorithm 2 with s = 1, t = scale: X = U + t V with U uniform in
  // [0, t) accepted with probability exp(-U/t), and V ~ Geometric(1 - 1/e)
  // (the number of Bernoulli(exp(-1)) successes before a failure), has
  // P[X = x] proportional to exp(-x/t) on x >= 0; a random sign, with
  // (negative, 0) rejected so that 0 is not counted twice, gives the
  // two-sided law exp(-|x|/t).
  while (true) {
    const uint128 u = UniformBelow(noise, t);
    if (!BernoulliExpNeg(noise, u, t)) continue;
    uint128 v = 0;
    while (BernoulliExpNeg(noise, 1, 1)) ++v;
    const uint128 x = u + t * v;
    const bool negative = (noise->NextU64() & 1) == 1;
    if (negative && x == 0) continue;
    // |x| >= 2^63 needs v >= 2^32 successive successes (probability below
    // exp(-2^32)); such draws are rejected, which changes the law by less
    // than that in total variation.
    if (x > static_cast<uint128>(std::numeric_limits<int64_t>::max())) continue;
    const int64_t magnitude = static_cast<int64_t>(x);
    return negative ? -magnitude : magnitude;
  }
}

}  // namespace

int64_t DiscreteLaplace(NoiseSource* noise, uint64_t scale) {
  CheckScale(scale, "discrete Laplace");
  return DiscreteLaplaceWithScale(noise, scale);
}

int64_t DiscreteGaussian(NoiseSource* noise, uint64_t sigma) {
  CheckScale(sigma, "discrete Gaussian");
  // CKS20 Algorithm 3: propose Y ~ discrete Laplace with t = floor(sigma) + 1
  // and accept with probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)).
  // With integer sigma everything is rational:
  //   gamma = (|Y| t - sigma^2)^2 / (2 sigma^2 t^2) = a^2 / (2 m^2),
  //   a = | |Y| t - sigma^2 |,  m = sigma t.
  // a^2 can exceed 128 bits, so write a = q m + r (0 <= r < m):
  //   gamma = q^2 / 2 + q r / m + r^2 / (2 m^2),
  // and exp(-gamma) is the product of three independent Bernoulli(exp(-.)).
  // Bounds (sigma <= 2^31, |Y| < 2^63): t <= 2^31 + 1, m < 2^63,
  // 2 m^2 < 2^127, a < 2^95, q <= |Y|/sigma + 1 < 2^64 so q^2 < 2^128,
  // q r < a: every term fits in an unsigned 128-bit integer.
  const uint128 s = sigma;
  const uint128 t = s + 1;
  const uint128 s2 = s * s;
  const uint128 m = s * t;
  const uint128 two_m2 = 2 * m * m;
  while (true) {
    const int64_t y = DiscreteLaplaceWithScale(noise, t);
    const uint128 abs_y = y < 0 ? static_cast<uint128>(-static_cast<__int128>(y))
                                : static_cast<uint128>(y);
    const uint128 yt = abs_y * t;
    const uint128 a = yt >= s2 ? yt - s2 : s2 - yt;
    const uint128 q = a / m;
    const uint128 r = a % m;
    if (BernoulliExpNeg(noise, q * q, 2) && BernoulliExpNeg(noise, q * r, m) &&
        BernoulliExpNeg(noise, r * r, two_m2)) {
      return y;
    }
  }
}

absl::StatusOr<int> GridExponentFor(double nominal_scale) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(nominal_scale, "Noise scale"));
  int e = 0;
  // nominal = f 2^e with f in [1/2, 1): floor(log2 nominal) = e - 1.
  std::frexp(nominal_scale, &e);
  const int exponent = e - 1 - kGridBitsBelowScale;
  // g must be a normal double (so g * integer is exact) and g * 2^53 finite.
  if (exponent < std::numeric_limits<double>::min_exponent - 1 ||
      exponent + 53 > std::numeric_limits<double>::max_exponent - 1) {
    return absl::OutOfRangeError(absl::StrCat("Noise scale ", nominal_scale,
                                              " is outside the range the noise grid supports"));
  }
  return exponent;
}

absl::StatusOr<GridNoise> MakeGridNoise(GridNoiseKind kind, int grid_exponent, double scale) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(scale, "Noise scale"));
  if (grid_exponent < std::numeric_limits<double>::min_exponent - 1 ||
      grid_exponent + 53 > std::numeric_limits<double>::max_exponent - 1) {
    return absl::OutOfRangeError(absl::StrCat("Noise grid 2^", grid_exponent, " is not supported"));
  }
  // scale / g is exact (a power-of-two rescaling). The margin 2^-48 covers
  // the few ulps by which the caller's formula for `scale` may have rounded
  // down, so that scale_units * g is never below the exact requested scale.
  const double units = std::ceil(std::ldexp(scale, -grid_exponent) * (1.0 + 0x1.0p-48));
  if (!(units <= static_cast<double>(kMaxDiscreteScale))) {
    return absl::OutOfRangeError(absl::StrCat(
        "Noise scale ", scale, " is ", units, " grid units of 2^", grid_exponent,
        ", above the sampler's limit 2^31 (the rounding distance dominates the sensitivity)"));
  }
  GridNoise spec;
  spec.kind = kind;
  spec.grid_exponent = grid_exponent;
  spec.grid = std::ldexp(1.0, grid_exponent);
  spec.scale_units = units < 1.0 ? 1 : static_cast<uint64_t>(units);
  spec.inflated_scale = scale;
  return spec;
}

absl::StatusOr<GridNoise> GridGaussianNoise(double noise_multiplier, double l2_sensitivity,
                                            int64_t dimension) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(l2_sensitivity, "Sensitivity"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(dimension, "Dimension"));
  // The GridGaussian event's privacy profile holds up to this dimension
  // (grid_gaussian.h; docs/privacy.md 4.6). d is public: refusing it
  // depends on no row.
  if (dimension > kMaxGridGaussianDimension) {
    return absl::OutOfRangeError(absl::StrCat(
        "Dimension must be at most ", kMaxGridGaussianDimension,
        " for grid Gaussian noise, got ", dimension));
  }
  static_assert(kGridBitsBelowScale == 20 && kMinGridGaussianUnits == 1048576.0,
                "grid_gaussian.h assumes sigma >= 2^kGridBitsBelowScale grid units");
  DPC_ASSIGN_OR_RETURN(const int exponent, GridExponentFor(noise_multiplier * l2_sensitivity));
  const double g = std::ldexp(1.0, exponent);
  // Rounding moves each coordinate by at most g/2, so two neighbours'
  // snapped vectors differ by at most Delta + sqrt(d) g in L2.
  const double inflated_sensitivity =
      l2_sensitivity + std::sqrt(static_cast<double>(dimension)) * g;
  return MakeGridNoise(GridNoiseKind::kGaussian, exponent, noise_multiplier * inflated_sensitivity);
}

absl::StatusOr<GridNoise> GridLaplaceNoise(double epsilon, double l1_sensitivity,
                                           int64_t dimension) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(epsilon, "Epsilon"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(l1_sensitivity, "Sensitivity"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(dimension, "Dimension"));
  DPC_ASSIGN_OR_RETURN(const int exponent, GridExponentFor(l1_sensitivity / epsilon));
  const double g = std::ldexp(1.0, exponent);
  // L1: d coordinates, each moved by at most g/2 in each of the two inputs.
  const double inflated_sensitivity = l1_sensitivity + static_cast<double>(dimension) * g;
  return MakeGridNoise(GridNoiseKind::kLaplace, exponent, inflated_sensitivity / epsilon);
}

double SnapToGrid(double value, int grid_exponent) {
  return std::ldexp(std::round(std::ldexp(value, -grid_exponent)), grid_exponent);
}

absl::Status AddGridNoise(const GridNoise& noise_spec, Eigen::Ref<Eigen::VectorXd> values,
                          NoiseSource* noise) {
  if (noise == nullptr) return absl::InvalidArgumentError("noise source is null");
  if (noise_spec.scale_units == 0 || noise_spec.scale_units > kMaxDiscreteScale ||
      noise_spec.grid != std::ldexp(1.0, noise_spec.grid_exponent)) {
    return absl::InvalidArgumentError("grid noise was not built by MakeGridNoise");
  }
  const int exponent = noise_spec.grid_exponent;
  // Validate everything before touching anything: a failed release must
  // leave no half-noised vector behind. The message names neither the
  // coordinate nor its value: both are functions of private rows
  // (docs/privacy.md 6.1). Callers validate parameters so that a finite
  // statistic is guaranteed; this is the last line of defence.
  for (Eigen::Index i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values(i))) {
      return absl::InvalidArgumentError("the released vector has a non-finite value");
    }
  }
  if (!noise->adds_noise()) return absl::OkStatus();
  // A value beyond 2^52 grid units is clamped to +-2^52 units rather than
  // refused: whether it happens depends on the rows, so a refusal would be a
  // data-dependent output (docs/privacy.md 6.1). Clamping each coordinate
  // to an interval whose ends are grid points is non-expansive and commutes
  // with the snapping, so the snapped vector's sensitivity bound still holds.
  const double max_value = std::ldexp(kMaxGridUnits, exponent);
  // Any |Z| above this is impossible in practice (probability below
  // exp(-2^30) at our scales); refusing it keeps |m + Z| <= 2^53.
  constexpr int64_t kMaxNoiseUnits = int64_t{1} << 52;
  for (Eigen::Index i = 0; i < values.size(); ++i) {
    // Exact: |value / g| <= 2^52, so std::round gives an integer-valued
    // double that converts to int64 without loss.
    const double clamped = std::clamp(values(i), -max_value, max_value);
    const int64_t snapped = static_cast<int64_t>(std::round(std::ldexp(clamped, -exponent)));
    const int64_t z = noise_spec.kind == GridNoiseKind::kGaussian
                          ? DiscreteGaussian(noise, noise_spec.scale_units)
                          : DiscreteLaplace(noise, noise_spec.scale_units);
    if (z > kMaxNoiseUnits || z < -kMaxNoiseUnits) {
      return absl::InternalError("discrete noise draw outside the exact-double range");
    }
    // |snapped + z| <= 2^53: an exact double, and times g exact again.
    values(i) = std::ldexp(static_cast<double>(snapped + z), exponent);
  }
  return absl::OkStatus();
}

absl::StatusOr<GridNoise> AddGridGaussianNoise(Eigen::Ref<Eigen::VectorXd> values,
                                               double noise_multiplier, double l2_sensitivity,
                                               NoiseSource* noise) {
  DPC_ASSIGN_OR_RETURN(GridNoise spec,
                       GridGaussianNoise(noise_multiplier, l2_sensitivity, values.size()));
  DPC_RETURN_IF_ERROR(AddGridNoise(spec, values, noise));
  return spec;
}

absl::StatusOr<GridNoise> AddGridLaplaceNoise(Eigen::Ref<Eigen::VectorXd> values, double epsilon,
                                              double l1_sensitivity, NoiseSource* noise) {
  DPC_ASSIGN_OR_RETURN(GridNoise spec, GridLaplaceNoise(epsilon, l1_sensitivity, values.size()));
  DPC_RETURN_IF_ERROR(AddGridNoise(spec, values, noise));
  return spec;
}

}  // namespace dpcurator::privacy
