// Compiled with -mavx2 -mfma (core/util/CMakeLists.txt); called only where
// the CPU has both (sincos.cc). No Eigen here (sincos.h).
#include <immintrin.h>
#include <sleef.h>

#include "core/util/sincos.h"
#include "core/util/sincos_loop.h"

namespace dpcurator::internal {

void SinCosAvx2(const double* x, int64_t n, double scale, double* sin_out, double* cos_out) {
  SinCosLoop<4>(x, n, scale, sin_out, cos_out, [](const double* in, double k, double* s, double* c) {
    const __m256d factor = _mm256_set1_pd(k);
    const Sleef___m256d_2 r = Sleef_sincosd4_u10avx2(_mm256_loadu_pd(in));
    _mm256_storeu_pd(s, _mm256_mul_pd(factor, r.x));
    _mm256_storeu_pd(c, _mm256_mul_pd(factor, r.y));
  });
}

void SinCosAvx2(const float* x, int64_t n, float scale, float* sin_out, float* cos_out) {
  SinCosLoop<8>(x, n, scale, sin_out, cos_out, [](const float* in, float k, float* s, float* c) {
    const __m256 factor = _mm256_set1_ps(k);
    const Sleef___m256_2 r = Sleef_sincosf8_u35avx2(_mm256_loadu_ps(in));
    _mm256_storeu_ps(s, _mm256_mul_ps(factor, r.x));
    _mm256_storeu_ps(c, _mm256_mul_ps(factor, r.y));
  });
}

}  // namespace dpcurator::internal
