#ifndef DPCURATOR_BENCH_RELEASE_PERF_H_
#define DPCURATOR_BENCH_RELEASE_PERF_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "Eigen/Core"

namespace dpcurator::bench {

// bench/perf's release rows (issue 13): DP-MERF (rff_embedding) and PEARL
// (charfn_embedding) releases, engine only (core/release units, the
// server's code path after the rows are loaded), over generated rows of
// each size in `sizes`: demo-table rows (5 numeric columns: the products
// are thin and sin/cos bound) or 28 x 28 images (784 pixels: the products
// dominate). Each size runs in a child process so that its
// peak RSS is its own. Prints one table: rows/s, the GFLOP/s of the
// release's two products (phases X W^T and the per-class sums), the
// in-process dgemm peak measured just before on the release's threads, the
// ratio, the sin+cos throughput, and peak RSS beside the encoded table's
// own size. Returns false when a release failed.
enum class ReleaseRows { kDemo, kImages };
bool PrintReleaseTable(ReleaseRows shape, const std::vector<int64_t>& sizes, double seconds);

// GFLOP/s of square n x n products with Eigen's own kernels (compiled for
// the baseline ISA) on the calling thread, for at least `seconds`.
template <typename Scalar>
double EigenGemmGflops(int n, double seconds) {
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  using Clock = std::chrono::steady_clock;
  const Matrix a = Matrix::Random(n, n), b = Matrix::Random(n, n);
  Matrix c(n, n);
  int reps = 0;
  const Clock::time_point start = Clock::now();
  double elapsed = 0;
  do {
    c.noalias() = a * b;
    ++reps;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return 2.0 * n * n * static_cast<double>(n) * reps / elapsed / 1e9;
}

}  // namespace dpcurator::bench

#endif  // DPCURATOR_BENCH_RELEASE_PERF_H_
