#ifndef DPCURATOR_CORE_PRIVACY_NOISE_SOURCE_H_
#define DPCURATOR_CORE_PRIVACY_NOISE_SOURCE_H_

#include <array>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "core/util/public_rng.h"

namespace dpcurator::privacy {

// The one interface through which every release draws its privacy noise.
// Production code uses SecureNoiseSource (OpenSSL's CSPRNG); tests inject a
// SeededNoiseSource (reproducible) or ZeroNoiseSource (logic only), as the
// google/differential-privacy builders do.
class NoiseSource {
 public:
  virtual ~NoiseSource() = default;
  // 64 uniformly random bits.
  virtual uint64_t NextU64() = 0;
  // Uniform in (0, 1): 53 random bits, never exactly 0. For sampling
  // decisions (Poisson subsampling), never for noise on released values.
  double UniformOpen();
  // False only for ZeroNoiseSource: the grid-noise layer then leaves values
  // exactly as they are (core/privacy/discrete_noise.h, AddGridNoise).
  virtual bool adds_noise() const { return true; }
  // Privacy noise itself is drawn only by the exact integer samplers of
  // core/privacy/discrete_noise.h (discrete Gaussian and Laplace on a
  // power-of-two grid), from NextU64: there are deliberately no
  // floating-point Gaussian or Laplace samplers here (Mironov 2012).
};

// OpenSSL RAND_bytes, buffered. Fails closed: if the CSPRNG reports an error
// the process aborts rather than release under-noised values.
class SecureNoiseSource final : public NoiseSource {
 public:
  // Checks that the CSPRNG is seeded.
  static absl::StatusOr<std::unique_ptr<SecureNoiseSource>> Create();
  uint64_t NextU64() override;

 private:
  SecureNoiseSource() = default;
  void Refill();
  std::array<uint64_t, 512> buffer_{};
  size_t next_ = buffer_.size();
};

// Reproducible noise for statistical tests.
class SeededNoiseSource final : public NoiseSource {
 public:
  explicit SeededNoiseSource(uint64_t seed) : rng_(seed) {}
  uint64_t NextU64() override { return rng_.NextU64(); }

 private:
  PublicRng rng_;
};

// No noise at all: for tests of release logic only. Releases through the
// grid-noise layer return the exact statistic (neither snapped nor noised).
// Never pass it to the samplers of discrete_noise.h directly: its constant
// bits can make their rejection loops run forever.
class ZeroNoiseSource final : public NoiseSource {
 public:
  uint64_t NextU64() override { return 0x8000000000000000ULL; }
  bool adds_noise() const override { return false; }
};

// Fresh 64-bit value from the CSPRNG, for public seeds and identifiers.
uint64_t SecureRandomU64();

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_NOISE_SOURCE_H_
