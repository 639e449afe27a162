#include "core/train/kernel_trainer.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"

namespace dpcurator::train {

absl::StatusOr<KernelWitnessAnswer> InProcessKernelWitnessOracle::Step(
    const Eigen::MatrixXd& points, const Eigen::VectorXi& labels) {
  // Poisson sampling as the server's ADD_REMOVE sessions do it (3.4).
  std::vector<int64_t> batch;
  for (int64_t i = 0; i < rows_->num_rows(); ++i) {
    if (noise_->UniformOpen() < sampling_rate_) batch.push_back(i);
  }
  release::KernelWitnessKind::Query query;
  query.points = points;
  query.labels = labels;
  DPC_ASSIGN_OR_RETURN(
      release::KernelWitnessKind::Result result,
      release::KernelWitnessKind::Run(params_, release::SelectRows(*rows_, batch), query,
                                      privacy::NeighbouringRelation::kAddRemove,
                                      noise_multiplier_, noise_));
  ++steps_;
  return KernelWitnessAnswer{std::move(result.values), std::move(result.gradients)};
}

MmdStep MmdLossAndGradient(const Eigen::MatrixXd& points, const Eigen::VectorXi& labels,
                           const std::vector<double>& bandwidths,
                           const KernelWitnessAnswer& answer) {
  const Eigen::Index m = points.rows();
  const double mm = static_cast<double>(m);
  const double kk = static_cast<double>(bandwidths.size());
  MmdStep step;
  step.point_gradients = Eigen::MatrixXd::Zero(m, points.cols());
  double gen_gen = 0.0;
  for (Eigen::Index j = 0; j < m; ++j) {
    for (Eigen::Index l = 0; l < m; ++l) {
      if (labels.size() == m && labels(j) != labels(l)) continue;  // k* = 0
      const Eigen::RowVectorXd diff = points.row(j) - points.row(l);
      const double d2 = diff.squaredNorm();
      double value = 0.0;
      double over_h2 = 0.0;
      for (double h : bandwidths) {
        const double e = std::exp(-d2 / (2.0 * h * h));
        value += e;
        over_h2 += e / (h * h);
      }
      gen_gen += value / kk;
      // grad_1 k(y_j, y_l) = -(1/K) sum_h k_h (y_j - y_l) / h^2.
      step.point_gradients.row(j) -= (2.0 / (mm * mm)) * (over_h2 / kk) * diff;
    }
  }
  step.loss = gen_gen / (mm * mm) - 2.0 * answer.values.sum() / mm;
  step.point_gradients -= (2.0 / mm) * answer.gradients;
  return step;
}

absl::Status TrainKernelGenerator(const KernelTrainerOptions& options,
                                  const std::vector<double>& bandwidths,
                                  KernelWitnessOracle* oracle, PointGenerator* generator,
                                  const std::function<void(const KernelTrainerProgress&)>& progress) {
  if (options.steps < 1 || options.points_per_step < 1 ||
      options.points_per_step > release::KernelWitnessKind::kMaxQueryPoints) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel trainer needs steps >= 1 and 1 to ", release::KernelWitnessKind::kMaxQueryPoints,
        " points per step, got ", options.steps, " and ", options.points_per_step));
  }
  PublicRng rng(options.seed);
  Eigen::MatrixXd points;
  Eigen::VectorXi labels;
  for (int t = 0; t < options.steps; ++t) {
    generator->Sample(options.points_per_step, &rng, &points, &labels);
    DPC_ASSIGN_OR_RETURN(KernelWitnessAnswer answer, oracle->Step(points, labels));
    const MmdStep step = MmdLossAndGradient(points, labels, bandwidths, answer);
    generator->Update(step.point_gradients);
    if (progress) progress(KernelTrainerProgress{t + 1, step.loss});
  }
  return absl::OkStatus();
}

}  // namespace dpcurator::train
