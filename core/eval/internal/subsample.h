#ifndef DPCURATOR_CORE_EVAL_INTERNAL_SUBSAMPLE_H_
#define DPCURATOR_CORE_EVAL_INTERNAL_SUBSAMPLE_H_

// Row subsets for the evaluators (paper_metrics.cc, binary_metrics.cc): all
// rows, or a seeded uniform subset of them.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "core/util/public_rng.h"

namespace dpcurator::eval::internal {

inline std::vector<int64_t> AllRows(int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  return rows;
}

// min(n, cap) distinct rows, uniformly (partial Fisher-Yates), in row order.
inline std::vector<int64_t> Subsample(int64_t n, int64_t cap, PublicRng* rng) {
  std::vector<int64_t> rows = AllRows(n);
  if (n <= cap) return rows;
  for (int64_t i = 0; i < cap; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng->UniformInt(static_cast<uint64_t>(n - i)));
    std::swap(rows[static_cast<size_t>(i)], rows[static_cast<size_t>(j)]);
  }
  rows.resize(static_cast<size_t>(cap));
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace dpcurator::eval::internal

#endif  // DPCURATOR_CORE_EVAL_INTERNAL_SUBSAMPLE_H_
