// The x86-64 baseline: SSE2 needs no flag and runs on every CPU Debian
// supports (sincos.cc's fallback). No Eigen here (sincos.h).
#include <emmintrin.h>
#include <sleef.h>

#include "core/util/sincos.h"
#include "core/util/sincos_loop.h"

namespace dpcurator::internal {

void SinCosSse2(const double* x, int64_t n, double scale, double* sin_out, double* cos_out) {
  SinCosLoop<2>(x, n, scale, sin_out, cos_out, [](const double* in, double k, double* s, double* c) {
    const __m128d factor = _mm_set1_pd(k);
    const Sleef___m128d_2 r = Sleef_sincosd2_u10sse2(_mm_loadu_pd(in));
    _mm_storeu_pd(s, _mm_mul_pd(factor, r.x));
    _mm_storeu_pd(c, _mm_mul_pd(factor, r.y));
  });
}

void SinCosSse2(const float* x, int64_t n, float scale, float* sin_out, float* cos_out) {
  SinCosLoop<4>(x, n, scale, sin_out, cos_out, [](const float* in, float k, float* s, float* c) {
    const __m128 factor = _mm_set1_ps(k);
    const Sleef___m128_2 r = Sleef_sincosf4_u35sse2(_mm_loadu_ps(in));
    _mm_storeu_ps(s, _mm_mul_ps(factor, r.x));
    _mm_storeu_ps(c, _mm_mul_ps(factor, r.y));
  });
}

}  // namespace dpcurator::internal
