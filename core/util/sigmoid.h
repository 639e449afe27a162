// The logistic function 1 / (1 + exp(-x)), evaluated so that exp only ever
// sees a non-positive argument: no overflow, and 0 or 1 (never NaN) in the
// tails. One definition for the evaluators, the trainers and the generators.

#ifndef DPCURATOR_CORE_UTIL_SIGMOID_H_
#define DPCURATOR_CORE_UTIL_SIGMOID_H_

#include <cmath>
#include <type_traits>

namespace dpcurator {

template <typename Real>
inline Real Sigmoid(Real x) {
  static_assert(std::is_floating_point_v<Real>);
  if (x >= Real(0)) return Real(1) / (Real(1) + std::exp(-x));
  const Real e = std::exp(x);
  return e / (Real(1) + e);
}

}  // namespace dpcurator

#endif  // DPCURATOR_CORE_UTIL_SIGMOID_H_
