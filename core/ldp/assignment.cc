#include "core/ldp/assignment.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/ldp/sinkhorn.h"
#include "core/util/status_macros.h"

namespace dpcurator::ldp {

absl::StatusOr<AssignmentResult> SolveAssignment(const Eigen::MatrixXd& cost) {
  const int n = static_cast<int>(cost.rows());
  if (n == 0 || cost.cols() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "assignment needs a non-empty square cost matrix, got ", cost.rows(), " x ", cost.cols()));
  }
  if (!cost.allFinite()) return absl::InvalidArgumentError("cost matrix is not finite");
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // The search scans one row at a time: keep the rows contiguous.
  const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> rows = cost;
  // 1-based arrays; index 0 is the virtual column of the augmenting search.
  // u, v: dual potentials of rows and columns (u_i + v_j <= cost(i, j));
  // match[j]: the row matched to column j; way[j]: predecessor column on the
  // shortest alternating path. Each row is added by one Dijkstra-like search
  // over reduced costs cost(i, j) - u_i - v_j >= 0 (Jonker & Volgenant 1987).
  std::vector<double> u(n + 1, 0.0), v(n + 1, 0.0), min_slack(n + 1);
  std::vector<int> match(n + 1, 0), way(n + 1, 0);
  std::vector<char> used(n + 1);
  for (int row = 1; row <= n; ++row) {
    match[0] = row;
    int j0 = 0;
    std::fill(min_slack.begin(), min_slack.end(), kInf);
    std::fill(used.begin(), used.end(), 0);
    do {
      used[j0] = 1;
      const int i0 = match[j0];
      double delta = kInf;
      int j1 = 0;
      const double* cost_row = rows.data() + static_cast<Eigen::Index>(i0 - 1) * n - 1;
      const double u_i0 = u[i0];
      for (int j = 1; j <= n; ++j) {
        if (used[j]) continue;
        const double reduced = cost_row[j] - u_i0 - v[j];
        if (reduced < min_slack[j]) {
          min_slack[j] = reduced;
          way[j] = j0;
        }
        if (min_slack[j] < delta) {
          delta = min_slack[j];
          j1 = j;
        }
      }
      for (int j = 0; j <= n; ++j) {
        if (used[j]) {
          u[match[j]] += delta;
          v[j] -= delta;
        } else {
          min_slack[j] -= delta;
        }
      }
      j0 = j1;
    } while (match[j0] != 0);
    do {  // augment along the path
      const int j1 = way[j0];
      match[j0] = match[j1];
      j0 = j1;
    } while (j0 != 0);
  }
  AssignmentResult result;
  result.column.assign(n, -1);
  for (int j = 1; j <= n; ++j) result.column[match[j] - 1] = j - 1;
  for (int i = 0; i < n; ++i) result.total_cost += cost(i, result.column[i]);
  return result;
}

absl::StatusOr<double> EmpiricalW2(const Eigen::MatrixXd& x, const Eigen::MatrixXd& y) {
  if (x.rows() != y.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("EmpiricalW2 needs equal sample sizes, got ", x.rows(), " and ", y.rows()));
  }
  DPC_ASSIGN_OR_RETURN(Eigen::MatrixXd cost, TransportCostMatrix(x, y, 2));
  DPC_ASSIGN_OR_RETURN(AssignmentResult assignment, SolveAssignment(cost));
  return std::sqrt(assignment.total_cost / static_cast<double>(x.rows()));
}

}  // namespace dpcurator::ldp
