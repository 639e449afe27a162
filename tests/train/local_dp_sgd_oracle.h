#ifndef DPCURATOR_TESTS_TRAIN_LOCAL_DP_SGD_ORACLE_H_
#define DPCURATOR_TESTS_TRAIN_LOCAL_DP_SGD_ORACLE_H_

// A test-only, in-process DP-SGD oracle for the DP-auto-GAN trainer: Poisson
// batches of the given rows, per-example clipping (nn::AddClippedGradientSum),
// continuous Gaussian noise from a PublicRng. NOT a privacy path (public
// randomness, no accounting): it exists so the trainer can be tested and
// tuned without a server.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/nn/mlp.h"
#include "core/nn/per_example.h"
#include "core/train/autogan_trainer.h"
#include "core/util/public_rng.h"

namespace dpcurator::train {

class LocalDpSgdOracle : public DpSgdGradientOracle {
 public:
  // `rows`: DP-SGD rows; q: Poisson rate; sigma: noise multiplier.
  LocalDpSgdOracle(const DpSgdPhaseSpec& spec, const Eigen::MatrixXd* rows, double q,
                   double sigma, uint64_t seed)
      : spec_(spec), rows_(rows), q_(q), sigma_(sigma), rng_(seed) {}

  absl::StatusOr<Eigen::VectorXd> Step(int64_t index, const Eigen::VectorXd& parameters) override {
    if (closed_) return absl::FailedPreconditionError("step after close");
    if (index < 0 || index >= spec_.steps) return absl::OutOfRangeError("step beyond T");
    ++calls_;
    if (index == last_index_) return last_answer_;  // replay: no second draw
    auto mlp = nn::Mlp::FromParameters(spec_.network, parameters);
    if (!mlp.ok()) return mlp.status();
    std::vector<Eigen::Index> batch;
    for (Eigen::Index i = 0; i < rows_->rows(); ++i) {
      if (rng_.Uniform() < q_) batch.push_back(i);
    }
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(mlp->num_parameters());
    if (!batch.empty()) {
      Eigen::MatrixXd x(static_cast<Eigen::Index>(batch.size()), rows_->cols());
      for (size_t b = 0; b < batch.size(); ++b) x.row(b) = rows_->row(batch[b]);
      nn::PerExampleWorkspace ws;
      const Eigen::MatrixXd& out = mlp->Forward(x, ws.mlp_workspace());
      Eigen::MatrixXd grad_out;
      if (spec_.loss == DpSgdLossKind::kReconstructionBce) {
        grad_out = out.unaryExpr([](double v) { return 1.0 / (1.0 + std::exp(-v)); }) - x;
        grad_out /= static_cast<double>(x.cols());
      } else {
        grad_out = Eigen::MatrixXd::Constant(x.rows(), 1, -1.0);
      }
      auto status = nn::AddClippedGradientSum(*mlp, grad_out, spec_.clip_norm, &ws, &sum);
      if (!status.ok()) return status;
      if (ws.norms().size() > 0) last_median_norm_ = Median(ws.norms());
    }
    for (Eigen::Index k = 0; k < sum.size(); ++k) {
      sum(k) += sigma_ * spec_.clip_norm * rng_.Normal();
    }
    sum /= spec_.expected_batch_size;
    last_index_ = index;
    last_answer_ = sum;
    return sum;
  }
  absl::Status Close() override {
    closed_ = true;
    return absl::OkStatus();
  }
  double epsilon_spent() const override { return static_cast<double>(last_index_ + 1); }

  int64_t calls() const { return calls_; }
  double last_median_norm() const { return last_median_norm_; }

 private:
  static double Median(Eigen::VectorXd v) {
    std::sort(v.data(), v.data() + v.size());
    return v(v.size() / 2);
  }

  DpSgdPhaseSpec spec_;
  const Eigen::MatrixXd* rows_;
  double q_;
  double sigma_;
  PublicRng rng_;
  bool closed_ = false;
  int64_t last_index_ = -1;
  int64_t calls_ = 0;
  Eigen::VectorXd last_answer_;
  double last_median_norm_ = 0.0;
};

}  // namespace dpcurator::train

#endif  // DPCURATOR_TESTS_TRAIN_LOCAL_DP_SGD_ORACLE_H_
