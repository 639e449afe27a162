// Compiled with -mavx512f (core/util/CMakeLists.txt); called only where the
// CPU has AVX-512F (sincos.cc). No Eigen here (sincos.h).
#include <immintrin.h>
#include <sleef.h>

#include "core/util/sincos.h"
#include "core/util/sincos_loop.h"

namespace dpcurator::internal {

void SinCosAvx512(const double* x, int64_t n, double scale, double* sin_out, double* cos_out) {
  SinCosLoop<8>(x, n, scale, sin_out, cos_out, [](const double* in, double k, double* s, double* c) {
    const __m512d factor = _mm512_set1_pd(k);
    const Sleef___m512d_2 r = Sleef_sincosd8_u10avx512f(_mm512_loadu_pd(in));
    _mm512_storeu_pd(s, _mm512_mul_pd(factor, r.x));
    _mm512_storeu_pd(c, _mm512_mul_pd(factor, r.y));
  });
}

void SinCosAvx512(const float* x, int64_t n, float scale, float* sin_out, float* cos_out) {
  SinCosLoop<16>(x, n, scale, sin_out, cos_out, [](const float* in, float k, float* s, float* c) {
    const __m512 factor = _mm512_set1_ps(k);
    const Sleef___m512_2 r = Sleef_sincosf16_u35avx512f(_mm512_loadu_ps(in));
    _mm512_storeu_ps(s, _mm512_mul_ps(factor, r.x));
    _mm512_storeu_ps(c, _mm512_mul_ps(factor, r.y));
  });
}

}  // namespace dpcurator::internal
