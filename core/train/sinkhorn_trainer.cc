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

}  // namespace

nn::MlpOptions PointGenerator::MlpOptionsFor(int output_dim,
                                             const PointGeneratorOptions& options) {
  nn::MlpOptions mlp;
  mlp.input_dim = options.latent_dim;
  mlp.hidden = options.hidden;
  mlp.output_dim = output_dim;
  mlp.activation = options.activation;
  mlp.seed = options.seed;
  return mlp;
}

absl::StatusOr<PointGenerator> PointGenerator::Create(int output_dim,
                                                      const PointGeneratorOptions& options) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(output_dim, "Output dimension"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.latent_dim, "Latent dimension"));
  DPC_ASSIGN_OR_RETURN(nn::Mlp mlp, nn::Mlp::Create(MlpOptionsFor(output_dim, options)));
  return PointGenerator(options, std::move(mlp));
}

absl::StatusOr<PointGenerator> PointGenerator::FromParameters(
    int output_dim, const PointGeneratorOptions& options, Eigen::VectorXd parameters) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(output_dim, "Output dimension"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.latent_dim, "Latent dimension"));
  DPC_ASSIGN_OR_RETURN(nn::Mlp mlp, nn::Mlp::FromParameters(MlpOptionsFor(output_dim, options),
                                                            std::move(parameters)));
  return PointGenerator(options, std::move(mlp));
}

void PointGenerator::DrawLatents(PublicRng* rng, Eigen::MatrixXd* z) const {
  z->resize(z->rows(), options_.latent_dim);
  rng->FillUniform(*z);
  z->array() = 2.0 * z->array() - 1.0;  // Uniform[-1, 1)
}

Eigen::MatrixXd PointGenerator::Sample(Eigen::Index n, PublicRng* rng) const {
  Eigen::MatrixXd out(n, output_dim());
  nn::MlpWorkspace workspace;
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

absl::StatusOr<TrainedPointGenerator> TrainSinkhornGenerator(
    const Eigen::MatrixXd& reports, const ldp::LdpMechanism& mechanism,
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
  if (reports.rows() == 0 || reports.cols() != mechanism.dimension()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reports must be a non-empty n x ", mechanism.dimension(), " matrix, got ",
        reports.rows(), " x ", reports.cols()));
  }
  if (!reports.allFinite()) return absl::InvalidArgumentError("reports must be finite");

  const int p = mechanism.cost_exponent();
  const int batch = static_cast<int>(std::min<Eigen::Index>(options.batch_size, reports.rows()));
  PointGeneratorOptions generator_options = options.generator;
  generator_options.seed = options.seed;
  DPC_ASSIGN_OR_RETURN(PointGenerator generator,
                       PointGenerator::Create(mechanism.dimension(), generator_options));
  nn::AdamOptions adam_options;
  adam_options.learning_rate = options.learning_rate;
  DPC_ASSIGN_OR_RETURN(nn::Adam adam, nn::Adam::Create(generator.num_parameters(), adam_options));

  PublicRng rng(options.seed ^ 0x51C4C0A7D1E5ULL);
  // Minibatches of reports without replacement within an epoch (a fresh
  // Fisher-Yates shuffle of the indices per pass).
  std::vector<Eigen::Index> order(reports.rows());
  std::iota(order.begin(), order.end(), Eigen::Index{0});
  size_t cursor = order.size();
  Eigen::MatrixXd report_batch(batch, reports.cols());
  Eigen::MatrixXd z(batch, generator.latent_dim());
  Eigen::VectorXd grad_params(generator.num_parameters());
  nn::MlpWorkspace workspace;

  TrainedPointGenerator trained{std::move(generator)};
  PointGenerator& g = trained.generator;
  for (int step = 1; step <= options.steps; ++step) {
    const double progress = static_cast<double>(step - 1) / options.steps;
    DPC_RETURN_IF_ERROR(adam.SetLearningRate(
        options.learning_rate * (1.0 - (1.0 - options.final_learning_rate_fraction) * progress)));
    for (int r = 0; r < batch; ++r) {
      if (cursor == order.size()) {
        for (size_t i = order.size() - 1; i > 0; --i) {
          std::swap(order[i], order[rng.UniformInt(i + 1)]);
        }
        cursor = 0;
      }
      report_batch.row(r) = reports.row(order[cursor++]);
    }
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
    trained.final_loss = loss.loss;
    trained.lambda = lambda;
    trained.sinkhorn_iterations += loss.sinkhorn_iterations;
    if (!loss.converged) ++trained.unconverged_steps;
    if (options.progress &&
        (step % std::max(1, options.progress_every) == 0 || step == options.steps)) {
      options.progress(step, loss.loss);
    }
  }
  trained.steps = options.steps;
  return trained;
}

}  // namespace dpcurator::train
