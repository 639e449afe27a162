#include "core/release/step_batch.h"

#include <algorithm>
#include <cmath>

#include "core/privacy/discrete_noise.h"

namespace dpcurator::release {

int64_t FixedBatchSize(double sampling_rate, int64_t n) {
  if (!(sampling_rate > 0) || n < 1) return 0;
  const double exact = sampling_rate * static_cast<double>(n);
  if (!(exact < 0x1.0p62)) return n;
  auto size = static_cast<int64_t>(std::floor(exact));
  // m / n * n may land an ulp or so below m: within a relative 1e-12 the
  // next integer is taken, so a resolved rate m / n gives m back.
  if (static_cast<double>(size + 1) - exact <= 1e-12 * std::max(1.0, exact)) ++size;
  return std::min(size, n);
}

std::vector<int64_t> SampleStepIndices(privacy::NeighbouringRelation relation,
                                       double sampling_rate, int64_t n,
                                       privacy::NoiseSource* noise) {
  std::vector<int64_t> chosen;
  if (n < 1) return chosen;
  if (relation == privacy::NeighbouringRelation::kReplaceOne) {
    // PlanSession resolved q to m / n with m = FixedBatchSize(q, n) and
    // checked FixedBatchSize(m / n, n) = m: this is the batch it charged.
    const int64_t size = std::clamp<int64_t>(FixedBatchSize(sampling_rate, n), 1, n);
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
    for (int64_t i = 0; i < size; ++i) {
      const int64_t j =
          i + static_cast<int64_t>(privacy::UniformBelow(noise, static_cast<uint64_t>(n - i)));
      std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
    }
    chosen.assign(order.begin(), order.begin() + size);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      if (noise->UniformOpen() < sampling_rate) chosen.push_back(i);
    }
  }
  return chosen;
}

}  // namespace dpcurator::release
