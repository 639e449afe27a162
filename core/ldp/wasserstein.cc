#include "core/ldp/wasserstein.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/ldp/assignment.h"
#include "core/util/status_macros.h"

namespace dpcurator::ldp {
namespace {

// Indices of the first `count` rows labelled `label`, in order; fewer when
// the labels run out.
std::vector<Eigen::Index> RowsOfClass(absl::Span<const int> labels, int label, int count) {
  std::vector<Eigen::Index> rows;
  for (size_t i = 0; i < labels.size() && static_cast<int>(rows.size()) < count; ++i) {
    if (labels[i] == label) rows.push_back(static_cast<Eigen::Index>(i));
  }
  return rows;
}

absl::Status CheckLabels(absl::Span<const int> labels, Eigen::Index rows, int num_classes,
                         const char* side) {
  if (static_cast<Eigen::Index>(labels.size()) != rows) {
    return absl::InvalidArgumentError(absl::StrCat(side, " has ", rows, " rows but ",
                                                   labels.size(), " labels"));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat(side, " row ", i, " has label ", labels[i],
                                                     ", expected one in [0, ", num_classes, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> ExactW2(const Eigen::Ref<const Eigen::MatrixXf>& x,
                               const Eigen::Ref<const Eigen::MatrixXf>& y) {
  if (x.rows() == 0 || x.rows() != y.rows() || x.cols() == 0 || x.cols() != y.cols()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "W2 needs two non-empty samples of equal size and dimension, got ", x.rows(), " x ",
        x.cols(), " and ", y.rows(), " x ", y.cols()));
  }
  if (!x.allFinite() || !y.allFinite()) {
    return absl::InvalidArgumentError("W2 samples must be finite");
  }
  const Eigen::MatrixXd xd = x.cast<double>();
  const Eigen::MatrixXd yd = y.cast<double>();
  // ||x - y||^2 = ||x||^2 + ||y||^2 - 2 <x, y> in double: the float inputs
  // are exact in double, and the cancellation error (~1e-16 ||x||^2) is far
  // below the distances between images.
  Eigen::MatrixXd cost = -2.0 * xd * yd.transpose();
  cost.colwise() += xd.rowwise().squaredNorm();
  cost.rowwise() += yd.rowwise().squaredNorm().transpose();
  cost = cost.cwiseMax(0.0);
  DPC_ASSIGN_OR_RETURN(AssignmentResult assignment, SolveAssignment(cost));
  return std::sqrt(assignment.total_cost / static_cast<double>(x.rows()));
}

absl::StatusOr<ClassConditionalW2Result> ClassConditionalW2(
    const Eigen::Ref<const Eigen::MatrixXf>& x, absl::Span<const int> x_labels,
    const Eigen::Ref<const Eigen::MatrixXf>& y, absl::Span<const int> y_labels, int num_classes,
    int per_class) {
  if (num_classes < 1 || per_class < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "classes and rows per class must be positive, got ", num_classes, " and ", per_class));
  }
  if (x.cols() != y.cols()) {
    return absl::InvalidArgumentError(
        absl::StrCat("samples have dimensions ", x.cols(), " and ", y.cols()));
  }
  DPC_RETURN_IF_ERROR(CheckLabels(x_labels, x.rows(), num_classes, "first sample"));
  DPC_RETURN_IF_ERROR(CheckLabels(y_labels, y.rows(), num_classes, "second sample"));
  ClassConditionalW2Result result;
  Eigen::MatrixXf xc(per_class, x.cols()), yc(per_class, y.cols());
  for (int c = 0; c < num_classes; ++c) {
    const std::vector<Eigen::Index> xr = RowsOfClass(x_labels, c, per_class);
    const std::vector<Eigen::Index> yr = RowsOfClass(y_labels, c, per_class);
    if (static_cast<int>(xr.size()) < per_class || static_cast<int>(yr.size()) < per_class) {
      return absl::InvalidArgumentError(absl::StrCat(
          "class ", c, " has ", xr.size(), " rows in the first sample and ", yr.size(),
          " in the second; ", per_class, " each are needed (lower the rows per class)"));
    }
    for (int i = 0; i < per_class; ++i) {
      xc.row(i) = x.row(xr[i]);
      yc.row(i) = y.row(yr[i]);
    }
    DPC_ASSIGN_OR_RETURN(const double w2, ExactW2(xc, yc));
    result.per_class.push_back(w2);
    result.mean += w2 / num_classes;
  }
  return result;
}

}  // namespace dpcurator::ldp
