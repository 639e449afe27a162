#ifndef DPCURATOR_CORE_UTIL_PUBLIC_RNG_H_
#define DPCURATOR_CORE_UTIL_PUBLIC_RNG_H_

#include <cmath>
#include <cstdint>
#include <numbers>

#include "Eigen/Core"

namespace dpcurator {

// Deterministic generator for *public* randomness: frequencies derived from a
// seed stored in the artefact, generator latents, train/test shuffles. It is
// not for privacy noise (that is privacy::NoiseSource, backed by OpenSSL).
//
// SplitMix64 seeding + xoshiro256** (Blackman & Vigna 2018); normals by the
// Box-Muller transform written out here, because std::normal_distribution is
// not specified bit-for-bit across standard libraries and a trainer must
// rebuild exactly the frequencies the server used.
class PublicRng {
 public:
  explicit PublicRng(uint64_t seed) {
    uint64_t x = seed;
    for (auto& s : state_) s = SplitMix64(&x);
  }

  uint64_t NextU64() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift, unbiased).
  uint64_t UniformInt(uint64_t n) {
    uint64_t x = NextU64();
    __uint128_t m = static_cast<__uint128_t>(x) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        x = NextU64();
        m = static_cast<__uint128_t>(x) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = Uniform();
    while (u1 <= 0.0) u1 = Uniform();
    const double u2 = Uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

  void FillNormal(Eigen::Ref<Eigen::MatrixXd> out) {
    for (Eigen::Index j = 0; j < out.cols(); ++j)
      for (Eigen::Index i = 0; i < out.rows(); ++i) out(i, j) = Normal();
  }

  void FillUniform(Eigen::Ref<Eigen::MatrixXd> out) {
    for (Eigen::Index j = 0; j < out.cols(); ++j)
      for (Eigen::Index i = 0; i < out.rows(); ++i) out(i, j) = Uniform();
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t SplitMix64(uint64_t* x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  uint64_t state_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace dpcurator

#endif  // DPCURATOR_CORE_UTIL_PUBLIC_RNG_H_
