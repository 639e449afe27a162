#ifndef DPCURATOR_CORE_NN_GEMM_H_
#define DPCURATOR_CORE_NN_GEMM_H_

#include "Eigen/Core"

namespace dpcurator::nn {

// C = op(A) op(B) + beta C, op(M) = M or M^T, for column-major operands
// whose shapes agree (C is not resized).
//
// float goes to the BLAS sgemm (OpenBLAS): it picks its kernels by CPU at
// run time, so the portable (baseline x86-64) build multiplies at AVX-512
// speed where the machine has it. Eigen's own products are compiled for the
// baseline ISA (SSE2) and reach about 35 GFLOP/s per core on the CI machine
// against OpenBLAS's 95 (bench/perf). OpenBLAS is held to one thread: the
// trainers parallelise over row shards themselves (ShardPool), and
// two thread pools on two cores would oversubscribe them.
//
// double stays on Eigen, so every double result (DP-SGD's per-example
// gradients, tested to 1e-10) is computed as before.
void Gemm(bool transpose_a, const Eigen::Ref<const Eigen::MatrixXf>& a, bool transpose_b,
          const Eigen::Ref<const Eigen::MatrixXf>& b, float beta, Eigen::Ref<Eigen::MatrixXf> c);
void Gemm(bool transpose_a, const Eigen::Ref<const Eigen::MatrixXd>& a, bool transpose_b,
          const Eigen::Ref<const Eigen::MatrixXd>& b, double beta, Eigen::Ref<Eigen::MatrixXd> c);

}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_GEMM_H_
