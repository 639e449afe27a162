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

// One body for both precisions: cblas_sgemm or cblas_dgemm.
void BlasGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k,
              const float* a, blasint lda, const float* b, blasint ldb, float beta, float* c,
              blasint ldc) {
  cblas_sgemm(CblasColMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}
void BlasGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k,
              const double* a, blasint lda, const double* b, blasint ldb, double beta, double* c,
              blasint ldc) {
  cblas_dgemm(CblasColMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

template <typename Scalar>
using MatrixOf = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;

template <typename Scalar>
void GemmImpl(bool transpose_a, const Eigen::Ref<const MatrixOf<Scalar>>& a, bool transpose_b,
              const Eigen::Ref<const MatrixOf<Scalar>>& b, Scalar beta,
              Eigen::Ref<MatrixOf<Scalar>> c) {
  const Eigen::Index m = c.rows();
  const Eigen::Index n = c.cols();
  const Eigen::Index k = transpose_a ? a.rows() : a.cols();
  eigen_assert((transpose_a ? a.cols() : a.rows()) == m);
  eigen_assert((transpose_b ? b.rows() : b.cols()) == n);
  eigen_assert((transpose_b ? b.cols() : b.rows()) == k);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // An empty sum: C = beta C, and exactly 0 for beta = 0 (C may hold NaN).
    if (beta == Scalar{0}) {
      c.setZero();
    } else {
      c *= beta;
    }
    return;
  }
  UseOneBlasThread();
  BlasGemm(transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
           static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), a.data(),
           static_cast<blasint>(a.outerStride()), b.data(),
           static_cast<blasint>(b.outerStride()), beta, c.data(),
           static_cast<blasint>(c.outerStride()));
}

}  // namespace

void Gemm(bool transpose_a, const Eigen::Ref<const Eigen::MatrixXf>& a, bool transpose_b,
          const Eigen::Ref<const Eigen::MatrixXf>& b, float beta, Eigen::Ref<Eigen::MatrixXf> c) {
  GemmImpl<float>(transpose_a, a, transpose_b, b, beta, c);
}

void Gemm(bool transpose_a, const Eigen::Ref<const Eigen::MatrixXd>& a, bool transpose_b,
          const Eigen::Ref<const Eigen::MatrixXd>& b, double beta, Eigen::Ref<Eigen::MatrixXd> c) {
  GemmImpl<double>(transpose_a, a, transpose_b, b, beta, c);
}

}  // namespace dpcurator::nn
