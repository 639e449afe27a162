#include "core/util/sincos.h"

namespace dpcurator {
namespace {

struct Selected {
  void (*double_kernel)(const double*, int64_t, double, double*, double*);
  void (*float_kernel)(const float*, int64_t, float, float*, float*);
  const char* name;
};

// __builtin_cpu_supports reads CPUID (and the OS's XSAVE state for AVX);
// chosen once, on first use.
Selected Select() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    return {internal::SinCosAvx512, internal::SinCosAvx512, "avx512"};
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return {internal::SinCosAvx2, internal::SinCosAvx2, "avx2"};
  }
  return {internal::SinCosSse2, internal::SinCosSse2, "sse2"};
}

const Selected& Chosen() {
  static const Selected selected = Select();
  return selected;
}

}  // namespace

void SinCos(const double* x, int64_t n, double scale, double* sin_out, double* cos_out) {
  Chosen().double_kernel(x, n, scale, sin_out, cos_out);
}

void SinCos(const float* x, int64_t n, float scale, float* sin_out, float* cos_out) {
  Chosen().float_kernel(x, n, scale, sin_out, cos_out);
}

const char* SinCosVariant() { return Chosen().name; }

}  // namespace dpcurator
