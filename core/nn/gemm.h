#ifndef DPCURATOR_CORE_NN_GEMM_H_
#define DPCURATOR_CORE_NN_GEMM_H_

#include "Eigen/Core"

namespace dpcurator::nn {

// C = op(A) op(B) + beta C, op(M) = M or M^T, for column-major operands
// whose shapes agree (C is not resized).
//
// Both precisions go to the BLAS (OpenBLAS sgemm, dgemm): it picks its
// kernels by CPU at run time, so the portable (baseline x86-64) build
// multiplies at AVX-512 speed where the machine has it. Eigen's own products
// are compiled for the baseline ISA (SSE2) and reach about 35 GFLOP/s per
// core in float on the CI machine against OpenBLAS's 95 (bench/perf), and
// 9 against 23 in double (bench/step_bench, issue 39). OpenBLAS is held to
// one thread: the trainers and the dp_sgd step parallelise over row shards
// themselves (ShardPool), and two thread pools on two cores would
// oversubscribe them.
//
// Double (DP-SGD's per-example gradients, tested to 1e-10 against a naive
// loop) moved to dgemm in issue 39: a dp_sgd step on 2,142-wide rows spent
// most of its time in Eigen's products. The sums are ordered differently
// from Eigen's, so results differ from before in the last bits, never by
// more than rounding. For a given shape and CPU, single-threaded OpenBLAS
// is deterministic (its blocking depends on the shape, not on timing), so
// a fixed input gives a fixed result.
void Gemm(bool transpose_a, const Eigen::Ref<const Eigen::MatrixXf>& a, bool transpose_b,
          const Eigen::Ref<const Eigen::MatrixXf>& b, float beta, Eigen::Ref<Eigen::MatrixXf> c);
void Gemm(bool transpose_a, const Eigen::Ref<const Eigen::MatrixXd>& a, bool transpose_b,
          const Eigen::Ref<const Eigen::MatrixXd>& b, double beta, Eigen::Ref<Eigen::MatrixXd> c);

}  // namespace dpcurator::nn

#endif  // DPCURATOR_CORE_NN_GEMM_H_
