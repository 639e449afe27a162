#ifndef DPCURATOR_CORE_LDP_ASSIGNMENT_H_
#define DPCURATOR_CORE_LDP_ASSIGNMENT_H_

// Exact (unregularised) optimal transport between two equal-size uniform
// point clouds, for evaluation: by Birkhoff's theorem an optimal plan of
// the uniform-to-uniform problem is a permutation (Peyre & Cuturi 2019,
// Prop. 2.1), so W_2^2 = min_sigma (1/n) sum_i ||x_i - y_sigma(i)||^2 is a
// linear assignment problem. Solved exactly by the Hungarian method (Kuhn
// 1955) in its shortest-augmenting-path form with dual potentials (Jonker &
// Volgenant 1987), O(n^3) worst case.

#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"

namespace dpcurator::ldp {

struct AssignmentResult {
  // column[i]: the column assigned to row i (a permutation of 0..n-1).
  std::vector<int> column;
  // sum_i cost(i, column[i]), minimal.
  double total_cost = 0.0;
};

// Minimum-cost perfect matching of a square, finite cost matrix.
absl::StatusOr<AssignmentResult> SolveAssignment(const Eigen::MatrixXd& cost);

// The 2-Wasserstein distance between the uniform measures on the rows of X
// and Y (n x d each, equal n): sqrt(min_sigma (1/n) sum_i ||x_i - y_sigma(i)||_2^2).
absl::StatusOr<double> EmpiricalW2(const Eigen::MatrixXd& x, const Eigen::MatrixXd& y);

}  // namespace dpcurator::ldp

#endif  // DPCURATOR_CORE_LDP_ASSIGNMENT_H_
