#include "core/nn/gemm.h"

#include <cblas.h>

#include <mutex>

namespace dpcurator::nn {
namespace {

// OpenBLAS's own threads would compete with the trainers' shard threads for
// the same cores (see gemm.h); one thread per call, set once per process.
void UseOneBlasThread() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

}  // namespace

void Gemm(bool transpose_a, const Eigen::Ref<const Eigen::MatrixXf>& a, bool transpose_b,
          const Eigen::Ref<const Eigen::MatrixXf>& b, float beta, Eigen::Ref<Eigen::MatrixXf> c) {
  const Eigen::Index m = c.rows();
  const Eigen::Index n = c.cols();
  const Eigen::Index k = transpose_a ? a.rows() : a.cols();
  eigen_assert((transpose_a ? a.cols() : a.rows()) == m);
  eigen_assert((transpose_b ? b.rows() : b.cols()) == n);
  eigen_assert((transpose_b ? b.cols() : b.rows()) == k);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // An empty sum: C = beta C, and exactly 0 for beta = 0 (C may hold NaN).
    if (beta == 0.0f) {
      c.setZero();
    } else {
      c *= beta;
    }
    return;
  }
  UseOneBlasThread();
  cblas_sgemm(
      CblasColMajor, transpose_a ? CblasTrans : CblasNoTrans,
      transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
      static_cast<blasint>(k), 1.0f, a.data(), static_cast<blasint>(a.outerStride()), b.data(),
      static_cast<blasint>(b.outerStride()), beta, c.data(), static_cast<blasint>(c.outerStride()));
}

void Gemm(bool transpose_a, const Eigen::Ref<const Eigen::MatrixXd>& a, bool transpose_b,
          const Eigen::Ref<const Eigen::MatrixXd>& b, double beta, Eigen::Ref<Eigen::MatrixXd> c) {
  if (beta == 0.0) {
    if (!transpose_a && !transpose_b) c.noalias() = a * b;
    if (!transpose_a && transpose_b) c.noalias() = a * b.transpose();
    if (transpose_a && !transpose_b) c.noalias() = a.transpose() * b;
    if (transpose_a && transpose_b) c.noalias() = a.transpose() * b.transpose();
    return;
  }
  if (beta != 1.0) c *= beta;
  if (!transpose_a && !transpose_b) c.noalias() += a * b;
  if (!transpose_a && transpose_b) c.noalias() += a * b.transpose();
  if (transpose_a && !transpose_b) c.noalias() += a.transpose() * b;
  if (transpose_a && transpose_b) c.noalias() += a.transpose() * b.transpose();
}

}  // namespace dpcurator::nn
