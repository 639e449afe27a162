#ifndef DPCURATOR_BENCH_RELEASE_PERF_H_
#define DPCURATOR_BENCH_RELEASE_PERF_H_

#include <cstdint>
#include <vector>

namespace dpcurator::bench {

// bench/perf's release rows (issue 13): DP-MERF (rff_embedding) and PEARL
// (charfn_embedding) releases, engine only (core/release units, the
// server's code path after the rows are loaded), over generated demo rows
// of each size in `sizes`. Each size runs in a child process so that its
// peak RSS is its own. Prints one table: rows/s, the GFLOP/s of the
// release's two products (phases X W^T and the per-class sums), the
// in-process dgemm peak measured just before on the release's threads, the
// ratio, the sin+cos throughput, and peak RSS beside the encoded table's
// own size. Returns false when a release failed.
bool PrintReleaseTable(const std::vector<int64_t>& sizes, double seconds);

}  // namespace dpcurator::bench

#endif  // DPCURATOR_BENCH_RELEASE_PERF_H_
