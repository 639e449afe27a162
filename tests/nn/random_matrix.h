// Seeded standard-normal matrices for the nn tests' inputs and gradients.

#ifndef DPCURATOR_TESTS_NN_RANDOM_MATRIX_H_
#define DPCURATOR_TESTS_NN_RANDOM_MATRIX_H_

#include <cstdint>

#include <Eigen/Dense>

#include "core/util/public_rng.h"

namespace dpcurator::nn::test_util {

inline Eigen::MatrixXd RandomMatrix(Eigen::Index rows, Eigen::Index cols, uint64_t seed) {
  PublicRng rng(seed);
  Eigen::MatrixXd m(rows, cols);
  rng.FillNormal(m);
  return m;
}

}  // namespace dpcurator::nn::test_util

#endif  // DPCURATOR_TESTS_NN_RANDOM_MATRIX_H_
