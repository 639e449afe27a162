#include "core/train/normal_draws.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/util/sincos.h"

namespace dpcurator::train {
namespace {

constexpr int kChunk = 256;  // pairs per vectorised sin/cos pass

}  // namespace

void FillStandardNormal(PublicRng* rng, Eigen::Ref<Eigen::MatrixXf> out) {
  // Column by column: each column of a column-major Ref is contiguous.
  float radius[kChunk], angle[kChunk], sin_part[kChunk], cos_part[kChunk];
  for (Eigen::Index col = 0; col < out.cols(); ++col) {
    float* values = out.col(col).data();
    const Eigen::Index n = out.rows();
    for (Eigen::Index start = 0; start < n; start += 2 * kChunk) {
      const int pairs = static_cast<int>(std::min<Eigen::Index>(kChunk, (n - start + 1) / 2));
      for (int i = 0; i < pairs; ++i) {
        // Two 24-bit uniforms from one 64-bit draw: u1 in (0, 1] so that
        // log(u1) is finite, u2 in [0, 1).
        const uint64_t bits = rng->NextU64();
        const float u1 = static_cast<float>((bits >> 40) + 1) * 0x1.0p-24f;
        const float u2 = static_cast<float>((bits >> 16) & 0xFFFFFF) * 0x1.0p-24f;
        radius[i] = std::sqrt(-2.0f * std::log(u1));
        angle[i] = 2.0f * std::numbers::pi_v<float> * u2;
      }
      SinCos(angle, pairs, 1.0f, sin_part, cos_part);
      for (int i = 0; i < pairs; ++i) {
        const Eigen::Index at = start + 2 * i;
        values[at] = radius[i] * cos_part[i];
        if (at + 1 < n) values[at + 1] = radius[i] * sin_part[i];
      }
    }
  }
}

}  // namespace dpcurator::train
