#include "plan/footprint.h"

#include <algorithm>
#include <limits>

namespace dpcurator::plan {
namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
}  // namespace

int64_t SaturatingMul(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  if (a > kMax / b) return kMax;
  return a * b;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  a = std::max<int64_t>(a, 0);
  b = std::max<int64_t>(b, 0);
  return a > kMax - b ? kMax : a + b;
}

}  // namespace dpcurator::plan
