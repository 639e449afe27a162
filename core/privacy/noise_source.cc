#include "core/privacy/noise_source.h"

#include <cstdio>
#include <cstdlib>

#include <openssl/rand.h>

#include "absl/status/status.h"

namespace dpcurator::privacy {

double NoiseSource::UniformOpen() {
  uint64_t bits;
  do {
    bits = NextU64() >> 11;
  } while (bits == 0);
  return static_cast<double>(bits) * 0x1.0p-53;
}

absl::StatusOr<std::unique_ptr<SecureNoiseSource>> SecureNoiseSource::Create() {
  if (RAND_status() != 1) {
    return absl::FailedPreconditionError(
        "OpenSSL's CSPRNG is not seeded; refusing to generate privacy noise");
  }
  return std::unique_ptr<SecureNoiseSource>(new SecureNoiseSource());
}

void SecureNoiseSource::Refill() {
  if (RAND_bytes(reinterpret_cast<unsigned char*>(buffer_.data()),
                 static_cast<int>(sizeof(buffer_))) != 1) {
    std::fputs("fatal: OpenSSL RAND_bytes failed; aborting rather than releasing "
               "under-noised values\n",
               stderr);
    std::abort();
  }
  next_ = 0;
}

uint64_t SecureNoiseSource::NextU64() {
  if (next_ == buffer_.size()) Refill();
  return buffer_[next_++];
}

uint64_t SecureRandomU64() {
  uint64_t value;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&value), sizeof(value)) != 1) {
    std::fputs("fatal: OpenSSL RAND_bytes failed\n", stderr);
    std::abort();
  }
  return value;
}

}  // namespace dpcurator::privacy
