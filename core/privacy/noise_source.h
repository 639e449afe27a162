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
  // Uniform in (0, 1): 53 random bits, never exactly 0.
  double UniformOpen();
  // N(0, stddev^2) by the Box-Muller transform over UniformOpen. (The exact
  // grid-snapped sampler of PRIVACY.md "Noise generation" replaces this in
  // the hardening milestone; every caller already goes through here.)
  virtual double Gaussian(double stddev);
  // Laplace(0, scale) by inversion.
  virtual double Laplace(double scale);

 private:
  bool has_spare_ = false;
  double spare_ = 0.0;
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

// No noise at all: for tests of release logic only.
class ZeroNoiseSource final : public NoiseSource {
 public:
  uint64_t NextU64() override { return 0x8000000000000000ULL; }
  double Gaussian(double) override { return 0.0; }
  double Laplace(double) override { return 0.0; }
};

// Fresh 64-bit value from the CSPRNG, for public seeds and identifiers.
uint64_t SecureRandomU64();

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_NOISE_SOURCE_H_
