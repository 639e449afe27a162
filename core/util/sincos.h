#ifndef DPCURATOR_CORE_UTIL_SINCOS_H_
#define DPCURATOR_CORE_UTIL_SINCOS_H_

#include <cstdint>

namespace dpcurator {

// sin_out[i] = scale * sin(x[i]) and cos_out[i] = scale * cos(x[i]) for
// i < n: the cost of every random-feature and characteristic-function map.
//
// SLEEF (Shibata & Petrogalli 2020, Debian libsleef-dev) in the widest
// variant the CPU supports, chosen once at run time: AVX-512 (8 doubles or
// 16 floats a vector), AVX2+FMA (4 or 8) or SSE2 (2 or 4, the x86-64
// baseline). The variants live in translation units compiled for their ISA
// that include no Eigen (sincos_<isa>.cc), so no template compiled for
// AVX-512 can be picked by the linker for code that runs on older CPUs.
//
// Accuracy. double: SLEEF's 1.0-ULP functions (u10), used by the releases,
// whose feature-norm bound rests on it (docs/privacy.md 2.7). float: the
// 3.5-ULP functions (u35), for the trainers (post-processing): their phases
// are rounded to float before this, which costs more than 3.5 ULP already.
// sin_out may be x itself (computed in place: every variant loads a vector
// of x before it stores that vector's results); cos_out must overlap
// neither.
void SinCos(const double* x, int64_t n, double scale, double* sin_out, double* cos_out);
void SinCos(const float* x, int64_t n, float scale, float* sin_out, float* cos_out);

// The variant SinCos uses on this CPU: "avx512", "avx2" or "sse2".
const char* SinCosVariant();

namespace internal {
// Per-ISA kernels (sincos_<isa>.cc); call only where the CPU has them.
void SinCosAvx512(const double* x, int64_t n, double scale, double* sin_out, double* cos_out);
void SinCosAvx512(const float* x, int64_t n, float scale, float* sin_out, float* cos_out);
void SinCosAvx2(const double* x, int64_t n, double scale, double* sin_out, double* cos_out);
void SinCosAvx2(const float* x, int64_t n, float scale, float* sin_out, float* cos_out);
void SinCosSse2(const double* x, int64_t n, double scale, double* sin_out, double* cos_out);
void SinCosSse2(const float* x, int64_t n, float scale, float* sin_out, float* cos_out);
}  // namespace internal

}  // namespace dpcurator

#endif  // DPCURATOR_CORE_UTIL_SINCOS_H_
