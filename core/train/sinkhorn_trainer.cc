#include "core/train/sinkhorn_trainer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/ldp/assignment.h"
#include "core/ldp/sinkhorn.h"
#include "core/nn/adam.h"
#include "core/nn/gemm.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::train {
namespace {

// Median of all entries (the naive baseline's lambda reference).
double MedianEntry(const Eigen::MatrixXd& matrix) {
  std::vector<double> values(matrix.data(), matrix.data() + matrix.size());
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + middle, values.end());
  return values[middle];
}

absl::Status ValidateHead(const LdpPointGeneratorOptions& options) {
  if (!options.bounded()) return absl::OkStatus();
  if (!std::isfinite(options.output_low) || !std::isfinite(options.output_high) ||
      !(options.output_low < options.output_high)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the bounded output head needs finite output_low < output_high, got [",
        options.output_low, ", ", options.output_high, "]"));
  }
  return absl::OkStatus();
}

// The bounded head x = low + (high - low) sigmoid(h) on the MLP output h
// (the identity for the linear head).
template <typename Scalar>
const Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>& HeadForward(
    const LdpPointGeneratorOptions& options,
    const Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>& pre,
    BasicLdpPointGeneratorWorkspace<Scalar>* workspace) {
  if (!options.bounded()) return pre;
  const Scalar low = static_cast<Scalar>(options.output_low);
  const Scalar span = static_cast<Scalar>(options.output_high - options.output_low);
  // 1 / (1 + exp(-h)): exp overflows to +inf for very negative h, giving
  // exactly 0, never NaN.
  workspace->points.resize(pre.rows(), pre.cols());
  workspace->points.array() = ((-pre.array()).exp() + Scalar(1)).inverse() * span + low;
  return workspace->points;
}

// dLoss/dh from dLoss/dx: sigmoid' = s (1 - s), and with s = (x - low) / span
// the factor is (x - low) (high - x) / span, computed from the stored output.
template <typename Scalar>
const Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>& HeadBackward(
    const LdpPointGeneratorOptions& options,
    const Eigen::Ref<const Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>>& grad_points,
    BasicLdpPointGeneratorWorkspace<Scalar>* workspace) {
  const Scalar low = static_cast<Scalar>(options.output_low);
  const Scalar high = static_cast<Scalar>(options.output_high);
  const Scalar inv_span = Scalar(1) / (high - low);
  workspace->grad_pre.resize(grad_points.rows(), grad_points.cols());
  workspace->grad_pre.array() = grad_points.array() * (workspace->points.array() - low) *
                                (high - workspace->points.array()) * inv_span;
  return workspace->grad_pre;
}

}  // namespace

const Eigen::MatrixXd& LdpPointGenerator::Forward(const Eigen::Ref<const Eigen::MatrixXd>& z,
                                               LdpPointGeneratorWorkspace* workspace) const {
  return HeadForward<double>(options_, mlp_.Forward(z, &workspace->mlp), workspace);
}

void LdpPointGenerator::Backward(const Eigen::Ref<const Eigen::MatrixXd>& grad_points,
                              LdpPointGeneratorWorkspace* workspace,
                              Eigen::VectorXd* grad_params) const {
  if (!options_.bounded()) {
    mlp_.Backward(grad_points, &workspace->mlp, grad_params);
    return;
  }
  mlp_.Backward(HeadBackward<double>(options_, grad_points, workspace), &workspace->mlp,
                grad_params);
}

absl::StatusOr<FloatLdpPointGenerator> FloatLdpPointGenerator::Create(const LdpPointGenerator& master) {
  DPC_ASSIGN_OR_RETURN(
      nn::MlpF mlp,
      nn::MlpF::FromParameters(master.mlp().options(), master.parameters().cast<float>()));
  return FloatLdpPointGenerator(master.options(), std::move(mlp));
}

void FloatLdpPointGenerator::SyncFrom(const LdpPointGenerator& master) {
  mlp_.parameters() = master.parameters().cast<float>();
}

const Eigen::MatrixXf& FloatLdpPointGenerator::Forward(const Eigen::Ref<const Eigen::MatrixXf>& z,
                                                    LdpPointGeneratorWorkspaceF* workspace) const {
  return HeadForward<float>(options_, mlp_.Forward(z, &workspace->mlp), workspace);
}

void FloatLdpPointGenerator::Backward(const Eigen::Ref<const Eigen::MatrixXf>& grad_points,
                                   LdpPointGeneratorWorkspaceF* workspace,
                                   Eigen::VectorXf* grad_params) const {
  if (!options_.bounded()) {
    mlp_.Backward(grad_points, &workspace->mlp, grad_params);
    return;
  }
  mlp_.Backward(HeadBackward<float>(options_, grad_points, workspace), &workspace->mlp,
                grad_params);
}

nn::MlpOptions LdpPointGenerator::MlpOptionsFor(int output_dim,
                                             const LdpPointGeneratorOptions& options) {
  nn::MlpOptions mlp;
  mlp.input_dim = options.latent_dim;
  mlp.hidden = options.hidden;
  mlp.output_dim = output_dim;
  mlp.activation = options.activation;
  mlp.seed = options.seed;
  return mlp;
}

absl::StatusOr<LdpPointGenerator> LdpPointGenerator::Create(int output_dim,
                                                      const LdpPointGeneratorOptions& options) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(output_dim, "Output dimension"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.latent_dim, "Latent dimension"));
  DPC_RETURN_IF_ERROR(ValidateHead(options));
  DPC_ASSIGN_OR_RETURN(nn::Mlp mlp, nn::Mlp::Create(MlpOptionsFor(output_dim, options)));
  return LdpPointGenerator(options, std::move(mlp));
}

absl::StatusOr<LdpPointGenerator> LdpPointGenerator::FromParameters(
    int output_dim, const LdpPointGeneratorOptions& options, Eigen::VectorXd parameters) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(output_dim, "Output dimension"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.latent_dim, "Latent dimension"));
  DPC_RETURN_IF_ERROR(ValidateHead(options));
  DPC_ASSIGN_OR_RETURN(nn::Mlp mlp, nn::Mlp::FromParameters(MlpOptionsFor(output_dim, options),
                                                            std::move(parameters)));
  return LdpPointGenerator(options, std::move(mlp));
}

void LdpPointGenerator::DrawLatents(PublicRng* rng, Eigen::MatrixXd* z) const {
  z->resize(z->rows(), options_.latent_dim);
  rng->FillUniform(*z);
  z->array() = 2.0 * z->array() - 1.0;  // Uniform[-1, 1)
}

Eigen::MatrixXd LdpPointGenerator::Sample(Eigen::Index n, PublicRng* rng) const {
  Eigen::MatrixXd out(n, output_dim());
  LdpPointGeneratorWorkspace workspace;
  Eigen::MatrixXd z;
  for (Eigen::Index start = 0; start < n; start += kSampleChunkRows) {
    const Eigen::Index rows = std::min(kSampleChunkRows, n - start);
    z.resize(rows, options_.latent_dim);
    DrawLatents(rng, &z);
    out.middleRows(start, rows) = Forward(z, &workspace);
  }
  return out;
}

absl::StatusOr<MinibatchLoss> EntropicOtLoss(const Eigen::MatrixXd& generated,
                                             const Eigen::MatrixXd& reports, int p,
                                             double lambda, double tolerance,
                                             int max_iterations, double annealing) {
  ldp::SinkhornOptions sinkhorn;
  sinkhorn.p = p;
  sinkhorn.lambda = lambda;
  sinkhorn.tolerance = tolerance;
  sinkhorn.max_iterations = max_iterations;
  sinkhorn.annealing = annealing;
  DPC_ASSIGN_OR_RETURN(ldp::SinkhornResult result,
                       ldp::Sinkhorn(generated, reports, sinkhorn));
  MinibatchLoss loss;
  loss.loss = result.cost;
  // Envelope theorem (ldp-sinkhorn.md Sec. 1.4): grad = sum_j P_ij dC_ij/dx_i.
  loss.grad_generated = ldp::TransportGradient(generated, reports, result.plan, p);
  loss.sinkhorn_iterations = result.iterations;
  loss.converged = result.converged;
  return loss;
}

absl::StatusOr<MinibatchLoss> ExactOtLoss(const Eigen::MatrixXd& generated,
                                          const Eigen::MatrixXd& reports, int p) {
  if (generated.rows() != reports.rows()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "exact OT needs equal batch sizes, got ", generated.rows(), " and ", reports.rows()));
  }
  DPC_ASSIGN_OR_RETURN(Eigen::MatrixXd cost, ldp::TransportCostMatrix(generated, reports, p));
  DPC_ASSIGN_OR_RETURN(ldp::AssignmentResult assignment, ldp::SolveAssignment(cost));
  const Eigen::Index n = generated.rows();
  // P = permutation / n; the envelope gradient is as for the entropic plan.
  Eigen::MatrixXd plan = Eigen::MatrixXd::Zero(n, n);
  for (Eigen::Index i = 0; i < n; ++i) plan(i, assignment.column[i]) = 1.0 / n;
  MinibatchLoss loss;
  loss.loss = assignment.total_cost / static_cast<double>(n);
  loss.grad_generated = ldp::TransportGradient(generated, reports, plan, p);
  loss.converged = true;
  return loss;
}

namespace {

// Options and reports, checked before any training (both precisions).
template <typename Matrix>
absl::Status ValidateTraining(const Matrix& reports, const ldp::LdpMechanism& mechanism,
                              const SinkhornTrainerOptions& options) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.steps, "Steps"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.batch_size, "Batch size"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(options.learning_rate, "Learning rate"));
  DPC_RETURN_IF_ERROR(
      ValidateInUnitInterval(options.final_learning_rate_fraction, "Final learning-rate fraction"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(options.sinkhorn_tolerance, "Sinkhorn tolerance"));
  DPC_RETURN_IF_ERROR(
      ValidatePositiveInt(options.sinkhorn_max_iterations, "Sinkhorn iterations"));
  if (options.naive) {
    DPC_RETURN_IF_ERROR(
        ValidateFinitePositive(options.naive_lambda_fraction, "Naive lambda fraction"));
    if (!(options.naive_annealing >= 0 && options.naive_annealing < 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Naive annealing must be in [0, 1), got ", options.naive_annealing));
    }
  }
  if (!(options.parameter_averaging >= 0 && options.parameter_averaging < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Parameter averaging must be in [0, 1), got ", options.parameter_averaging));
  }
  if (reports.rows() == 0 || reports.cols() != mechanism.dimension()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reports must be a non-empty n x ", mechanism.dimension(), " matrix, got ",
        reports.rows(), " x ", reports.cols()));
  }
  if (!reports.allFinite()) return absl::InvalidArgumentError("reports must be finite");
  return absl::OkStatus();
}

// The iterate average of SinkhornTrainerOptions::parameter_averaging.
class IterateAverage {
 public:
  IterateAverage(double beta, const Eigen::VectorXd& initial)
      : beta_(beta), average_(beta > 0 ? initial : Eigen::VectorXd()) {}
  void Update(int step, const Eigen::VectorXd& parameters) {
    if (beta_ == 0) return;
    const double beta_t = std::min(beta_, (1.0 + step) / (10.0 + step));
    average_ = beta_t * average_ + (1.0 - beta_t) * parameters;
  }
  // Replaces the trained parameters with the average.
  void Apply(Eigen::VectorXd* parameters) const {
    if (beta_ > 0) *parameters = average_;
  }

 private:
  double beta_;
  Eigen::VectorXd average_;
};

// Minibatches of reports without replacement within an epoch: a fresh
// Fisher-Yates shuffle of the row indices per pass, drawn from the
// trainer's one PublicRng (so the double and float paths see the same
// batches for the same seed).
class EpochBatcher {
 public:
  explicit EpochBatcher(Eigen::Index rows) : order_(static_cast<size_t>(rows)) {
    std::iota(order_.begin(), order_.end(), Eigen::Index{0});
    cursor_ = order_.size();
  }
  // Copies the next batch.rows() reports into `batch`.
  template <typename Matrix>
  void Next(const Matrix& reports, PublicRng* rng, Matrix* batch) {
    for (Eigen::Index r = 0; r < batch->rows(); ++r) {
      if (cursor_ == order_.size()) {
        for (size_t i = order_.size() - 1; i > 0; --i) {
          std::swap(order_[i], order_[rng->UniformInt(i + 1)]);
        }
        cursor_ = 0;
      }
      batch->row(r) = reports.row(order_[cursor_++]);
    }
  }

 private:
  std::vector<Eigen::Index> order_;
  size_t cursor_ = 0;
};

// The learning rate of step `step` (1-based): linear decay to
// final_learning_rate_fraction over the run.
double StepLearningRate(const SinkhornTrainerOptions& options, int step) {
  const double progress = static_cast<double>(step - 1) / options.steps;
  return options.learning_rate * (1.0 - (1.0 - options.final_learning_rate_fraction) * progress);
}

}  // namespace

absl::StatusOr<TrainedPointGenerator> TrainSinkhornGenerator(
    const Eigen::MatrixXd& reports, const ldp::LdpMechanism& mechanism,
    const SinkhornTrainerOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateTraining(reports, mechanism, options));

  const int p = mechanism.cost_exponent();
  const int batch = static_cast<int>(std::min<Eigen::Index>(options.batch_size, reports.rows()));
  LdpPointGeneratorOptions generator_options = options.generator;
  generator_options.seed = options.seed;
  DPC_ASSIGN_OR_RETURN(LdpPointGenerator generator,
                       LdpPointGenerator::Create(mechanism.dimension(), generator_options));
  nn::AdamOptions adam_options;
  adam_options.learning_rate = options.learning_rate;
  DPC_ASSIGN_OR_RETURN(nn::Adam adam, nn::Adam::Create(generator.num_parameters(), adam_options));

  PublicRng rng(options.seed ^ 0x51C4C0A7D1E5ULL);
  // Minibatches of reports without replacement within an epoch (a fresh
  // Fisher-Yates shuffle of the indices per pass).
  EpochBatcher batcher(reports.rows());
  Eigen::MatrixXd report_batch(batch, reports.cols());
  Eigen::MatrixXd z(batch, generator.latent_dim());
  Eigen::VectorXd grad_params(generator.num_parameters());
  LdpPointGeneratorWorkspace workspace;

  IterateAverage average(options.parameter_averaging, generator.parameters());
  TrainedPointGenerator trained{std::move(generator)};
  LdpPointGenerator& g = trained.generator;
  for (int step = 1; step <= options.steps; ++step) {
    DPC_RETURN_IF_ERROR(adam.SetLearningRate(StepLearningRate(options, step)));
    batcher.Next(reports, &rng, &report_batch);
    g.DrawLatents(&rng, &z);
    const Eigen::MatrixXd& generated = g.Forward(z, &workspace);

    double lambda = mechanism.regularizer();  // p sigma^p (Thm. 1, eq. 10)
    MinibatchLoss loss;
    if (!options.naive) {
      DPC_ASSIGN_OR_RETURN(loss, EntropicOtLoss(generated, report_batch, p, lambda,
                                                options.sinkhorn_tolerance,
                                                options.sinkhorn_max_iterations));
    } else if (options.naive_solver == SinkhornTrainerOptions::NaiveSolver::kExactAssignment) {
      lambda = 0.0;
      DPC_ASSIGN_OR_RETURN(loss, ExactOtLoss(generated, report_batch, p));
    } else {
      DPC_ASSIGN_OR_RETURN(Eigen::MatrixXd cost,
                           ldp::TransportCostMatrix(generated, report_batch, p));
      lambda = options.naive_lambda_fraction * MedianEntry(cost);
      if (!(lambda > 0)) lambda = options.naive_lambda_fraction;  // degenerate batch
      DPC_ASSIGN_OR_RETURN(
          loss, EntropicOtLoss(generated, report_batch, p, lambda, options.sinkhorn_tolerance,
                               options.sinkhorn_max_iterations, options.naive_annealing));
    }
    grad_params.setZero();
    g.Backward(loss.grad_generated, &workspace, &grad_params);
    if (!grad_params.allFinite()) {
      return absl::InternalError(absl::StrCat("training diverged at step ", step,
                                              " (non-finite gradient); lower the learning rate"));
    }
    DPC_RETURN_IF_ERROR(adam.Step(g.parameters(), grad_params));
    average.Update(step, g.parameters());
    trained.final_loss = loss.loss;
    trained.lambda = lambda;
    trained.sinkhorn_iterations += loss.sinkhorn_iterations;
    if (!loss.converged) ++trained.unconverged_steps;
    if (options.progress &&
        (step % std::max(1, options.progress_every) == 0 || step == options.steps)) {
      options.progress(step, loss.loss);
    }
  }
  average.Apply(&g.parameters());
  trained.steps = options.steps;
  return trained;
}

absl::StatusOr<TrainedPointGenerator> TrainSinkhornGeneratorFloat(
    const Eigen::MatrixXf& reports, const ldp::LdpMechanism& mechanism,
    const SinkhornTrainerOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateTraining(reports, mechanism, options));

  const int p = mechanism.cost_exponent();
  const Eigen::Index d = reports.cols();
  const int batch = static_cast<int>(std::min<Eigen::Index>(options.batch_size, reports.rows()));
  LdpPointGeneratorOptions generator_options = options.generator;
  generator_options.seed = options.seed;
  DPC_ASSIGN_OR_RETURN(LdpPointGenerator generator,
                       LdpPointGenerator::Create(mechanism.dimension(), generator_options));
  DPC_ASSIGN_OR_RETURN(FloatLdpPointGenerator replica, FloatLdpPointGenerator::Create(generator));
  nn::AdamOptions adam_options;
  adam_options.learning_rate = options.learning_rate;
  DPC_ASSIGN_OR_RETURN(nn::Adam adam, nn::Adam::Create(generator.num_parameters(), adam_options));

  // The same random streams as the double path: one PublicRng for the
  // epoch shuffles and the latents.
  PublicRng rng(options.seed ^ 0x51C4C0A7D1E5ULL);
  EpochBatcher batcher(reports.rows());

  // Every per-step buffer, allocated once (the Sinkhorn solver and the
  // assignment keep their own B x B buffers per call).
  Eigen::MatrixXf report_batch(batch, d);
  Eigen::MatrixXf z(batch, generator.latent_dim());
  Eigen::MatrixXf cross(batch, batch);
  Eigen::MatrixXd cost(batch, batch);
  Eigen::VectorXd generated_norms(batch), report_norms(batch);
  Eigen::MatrixXf plan(batch, batch);
  Eigen::VectorXf row_mass(batch);
  Eigen::MatrixXf grad_generated(batch, d);
  Eigen::VectorXf grad_params_float(replica.num_parameters());
  Eigen::VectorXd grad_params(generator.num_parameters());
  Eigen::MatrixXd generated_double, reports_double;  // p = 1 only
  LdpPointGeneratorWorkspaceF workspace;

  IterateAverage average(options.parameter_averaging, generator.parameters());
  TrainedPointGenerator trained{std::move(generator)};
  LdpPointGenerator& g = trained.generator;
  for (int step = 1; step <= options.steps; ++step) {
    DPC_RETURN_IF_ERROR(adam.SetLearningRate(StepLearningRate(options, step)));
    batcher.Next(reports, &rng, &report_batch);
    // Uniform[-1, 1) latents, column by column as PublicRng::FillUniform.
    for (Eigen::Index j = 0; j < z.cols(); ++j) {
      for (Eigen::Index i = 0; i < z.rows(); ++i) {
        z(i, j) = static_cast<float>(2.0 * rng.Uniform() - 1.0);
      }
    }
    const Eigen::MatrixXf& generated = replica.Forward(z, &workspace);

    // C_ij = ||g_i - y_j||_p^p, rows generated, columns reports (pitfall 7).
    if (p == 2) {
      nn::Gemm(false, generated, true, report_batch, 0.0f, cross);
      generated_norms = generated.cast<double>().rowwise().squaredNorm();
      report_norms = report_batch.cast<double>().rowwise().squaredNorm();
      cost = (-2.0 * cross.cast<double>()).colwise() + generated_norms;
      cost.rowwise() += report_norms.transpose();
      cost = cost.cwiseMax(0.0);  // cancellation
    } else {
      generated_double = generated.cast<double>();
      reports_double = report_batch.cast<double>();
      DPC_ASSIGN_OR_RETURN(cost, ldp::TransportCostMatrix(generated_double, reports_double, 1));
    }

    double lambda = mechanism.regularizer();  // p sigma^p (Thm. 1, eq. 10)
    double loss = 0.0;
    if (options.naive && options.naive_solver == SinkhornTrainerOptions::NaiveSolver::kExactAssignment) {
      lambda = 0.0;
      DPC_ASSIGN_OR_RETURN(ldp::AssignmentResult assignment, ldp::SolveAssignment(cost));
      plan.setZero();
      for (int i = 0; i < batch; ++i) plan(i, assignment.column[i]) = 1.0f / batch;
      loss = assignment.total_cost / batch;
    } else {
      ldp::SinkhornOptions sinkhorn;
      sinkhorn.p = p;
      sinkhorn.lambda = lambda;
      sinkhorn.tolerance = options.sinkhorn_tolerance;
      sinkhorn.max_iterations = options.sinkhorn_max_iterations;
      // Matrix-vector iterations where the shifted kernel allows them (the
      // deconvolving loss at image scale); log domain otherwise.
      sinkhorn.scaling_domain = true;
      if (options.naive) {
        lambda = options.naive_lambda_fraction * MedianEntry(cost);
        if (!(lambda > 0)) lambda = options.naive_lambda_fraction;  // degenerate batch
        sinkhorn.lambda = lambda;
        sinkhorn.annealing = options.naive_annealing;
      }
      DPC_ASSIGN_OR_RETURN(ldp::SinkhornResult result, ldp::SinkhornFromCost(cost, sinkhorn));
      plan = result.plan.cast<float>();
      loss = result.cost;
      trained.sinkhorn_iterations += result.iterations;
      if (!result.converged) ++trained.unconverged_steps;
    }

    // Envelope gradient with the plan fixed (ldp-sinkhorn.md Sec. 1.4):
    // p = 2: 2 (g_i sum_j P_ij - sum_j P_ij y_j), the second term one sgemm.
    if (p == 2) {
      row_mass = plan.rowwise().sum();
      nn::Gemm(false, plan, false, report_batch, 0.0f, grad_generated);
      grad_generated = 2.0f * ((generated.array().colwise() * row_mass.array()).matrix() -
                               grad_generated);
    } else {
      grad_generated =
          ldp::TransportGradient(generated_double, reports_double, plan.cast<double>(), 1)
              .cast<float>();
    }
    grad_params_float.setZero();
    replica.Backward(grad_generated, &workspace, &grad_params_float);
    grad_params = grad_params_float.cast<double>();
    if (!grad_params.allFinite()) {
      return absl::InternalError(absl::StrCat("training diverged at step ", step,
                                              " (non-finite gradient); lower the learning rate"));
    }
    DPC_RETURN_IF_ERROR(adam.Step(g.parameters(), grad_params));
    average.Update(step, g.parameters());
    replica.SyncFrom(g);
    trained.final_loss = loss;
    trained.lambda = lambda;
    if (options.progress &&
        (step % std::max(1, options.progress_every) == 0 || step == options.steps)) {
      options.progress(step, loss);
    }
  }
  average.Apply(&g.parameters());
  trained.steps = options.steps;
  return trained;
}

}  // namespace dpcurator::train
