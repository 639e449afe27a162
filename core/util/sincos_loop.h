#ifndef DPCURATOR_CORE_UTIL_SINCOS_LOOP_H_
#define DPCURATOR_CORE_UTIL_SINCOS_LOOP_H_

#include <cstdint>

namespace dpcurator::internal {

// The loop every ISA variant of SinCos shares (included by sincos_<isa>.cc
// only, each compiled for its ISA): whole vectors of kLanes through
// `kernel`, then the tail through a zero-padded copy. kernel(in, scale,
// sin_out, cos_out) computes exactly kLanes values.
template <int kLanes, typename T, typename Kernel>
inline void SinCosLoop(const T* x, int64_t n, T scale, T* sin_out, T* cos_out, Kernel kernel) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) kernel(x + i, scale, sin_out + i, cos_out + i);
  if (i == n) return;
  alignas(64) T in[kLanes] = {};
  alignas(64) T s[kLanes];
  alignas(64) T c[kLanes];
  const int64_t rest = n - i;
  for (int64_t j = 0; j < rest; ++j) in[j] = x[i + j];
  kernel(in, scale, s, c);
  for (int64_t j = 0; j < rest; ++j) {
    sin_out[i + j] = s[j];
    cos_out[i + j] = c[j];
  }
}

}  // namespace dpcurator::internal

#endif  // DPCURATOR_CORE_UTIL_SINCOS_LOOP_H_
