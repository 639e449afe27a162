#include "core/release/dp_sgd.h"

#include <cmath>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/privacy/discrete_noise.h"
#include "core/util/shard_pool.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::release {
int DpSgdRowWidth(const data::FeatureLayout& layout, int num_classes) {
  return layout.total_dim() + (num_classes > 1 ? num_classes : 0);
}

int DpSgdRowWidth(const data::Schema& schema) {
  return DpSgdRowWidth(data::FeatureLayout::ForFeatures(schema), schema.num_classes());
}

namespace {

// Rows [first, first + count) of DpSgdRows(rows), into *out.
void DpSgdRowRange(const EncodedRows& rows, Eigen::Index first, Eigen::Index count,
                   Eigen::MatrixXd* out) {
  const int features = rows.layout.total_dim();
  const int width = DpSgdRowWidth(rows.layout, rows.num_classes);
  out->resize(count, width);
  out->leftCols(features) = rows.features.middleRows(first, count);
  if (width > features) {
    out->rightCols(width - features).setZero();
    for (Eigen::Index i = 0; i < count; ++i) {
      (*out)(i, features + rows.labels(first + i)) = 1.0;
    }
  }
}

}  // namespace

Eigen::MatrixXd DpSgdRows(const EncodedRows& rows) {
  Eigen::MatrixXd out;
  DpSgdRowRange(rows, 0, rows.num_rows(), &out);
  return out;
}

std::string_view DpSgdLossName(DpSgdLoss loss) {
  switch (loss) {
    case DpSgdLoss::kReconstructionBce:
      return "reconstruction_bce";
    case DpSgdLoss::kWganCriticReal:
      return "wgan_critic_real";
  }
  return "unknown";
}

absl::StatusOr<DpSgdKind::Params> DpSgdKind::Resolve(Params params, const data::Schema& schema) {
  if (params.hidden.size() > static_cast<size_t>(kMaxDpSgdHiddenLayers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dp_sgd network has ", params.hidden.size(), " hidden layers; at most ",
                     kMaxDpSgdHiddenLayers, " are accepted"));
  }
  for (size_t i = 0; i < params.hidden.size(); ++i) {
    if (params.hidden[i] < 1 || params.hidden[i] > kMaxDpSgdWidth) {
      return absl::InvalidArgumentError(
          absl::StrCat("dp_sgd hidden layer ", i, " has width ", params.hidden[i],
                       "; widths must be in [1, ", kMaxDpSgdWidth, "]"));
    }
  }
  if (params.activation == nn::Activation::kLeakyRelu) {
    if (params.leaky_relu_slope == 0.0) params.leaky_relu_slope = kDefaultLeakyReluSlope;
    DPC_RETURN_IF_ERROR(
        ValidateInOpenUnitInterval(params.leaky_relu_slope, "dp_sgd leaky_relu_slope"));
  }
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(params.clip_norm, "dp_sgd clip_norm"));
  if (params.clip_norm < kMinClipNorm || params.clip_norm > kMaxClipNorm) {
    return absl::InvalidArgumentError(absl::StrCat("dp_sgd clip_norm must be in [2^-20, ",
                                                   kMaxClipNorm, "], got ", params.clip_norm));
  }
  // The divisor is public: declared here, never the batch's true size
  // (which Poisson sampling keeps private; docs/privacy.md 2.9).
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(
      params.expected_batch_size,
      "dp_sgd expected_batch_size (the public divisor, e.g. sampling rate x dataset size)"));
  if (params.expected_batch_size < kMinDpSgdDivisor ||
      params.expected_batch_size > kMaxDpSgdDivisor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dp_sgd expected_batch_size (the public divisor) must be in [1, 2^40], got ",
        params.expected_batch_size));
  }
  const int width = DpSgdRowWidth(schema);
  DPC_ASSIGN_OR_RETURN(const int64_t count, NumParameters(params, width));
  if (count > kMaxDpSgdParameters) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dp_sgd network has ", count, " parameters (rows of width ", width,
        "); at most ", kMaxDpSgdParameters, " are accepted. Use fewer or narrower hidden layers"));
  }
  return params;
}

int DpSgdKind::OutputWidth(const Params& params, int row_width) {
  return params.loss == DpSgdLoss::kWganCriticReal ? 1 : row_width;
}

nn::MlpOptions DpSgdKind::Network(const Params& params, int row_width) {
  nn::MlpOptions options;
  options.input_dim = row_width;
  options.hidden = params.hidden;
  options.output_dim = OutputWidth(params, row_width);
  options.activation = params.activation;
  options.leaky_relu_slope =
      params.activation == nn::Activation::kLeakyRelu ? params.leaky_relu_slope
                                                      : kDefaultLeakyReluSlope;
  options.layer_norm = false;
  return options;
}

absl::StatusOr<int64_t> DpSgdKind::NumParameters(const Params& params, int row_width) {
  // Counted in 64 bits before nn::Mlp sees it, so an absurd declaration is
  // refused by our limit rather than by an overflow.
  int64_t count = 0;
  int64_t fan_in = row_width;
  for (int width : params.hidden) {
    count += (fan_in + 1) * int64_t{width};
    fan_in = width;
  }
  count += (fan_in + 1) * int64_t{OutputWidth(params, row_width)};
  if (count > kMaxDpSgdParameters) return count;
  DPC_ASSIGN_OR_RETURN(const Eigen::Index checked,
                       nn::Mlp::CountParameters(Network(params, row_width)));
  if (checked != count) {
    return absl::InternalError("dp_sgd parameter count disagrees with the network's layout");
  }
  return count;
}

GaussianMechanismRecord DpSgdKind::Plan(const Params& /*resolved*/, double noise_multiplier) {
  return GaussianMechanismRecord{{noise_multiplier}};
}

double DpSgdKind::Sensitivity(const Params& resolved, privacy::NeighbouringRelation relation) {
  return relation == privacy::NeighbouringRelation::kAddRemove ? resolved.clip_norm
                                                               : 2.0 * resolved.clip_norm;
}

absl::Status DpSgdKind::CheckParameters(const Params& resolved, int row_width,
                                        const Eigen::Ref<const Eigen::VectorXd>& parameters) {
  DPC_ASSIGN_OR_RETURN(const int64_t expected, NumParameters(resolved, row_width));
  if (parameters.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dp_sgd step parameters have length ", parameters.size(), "; the network declared at "
        "open has ", expected, " (nn::Mlp::parameters() layout)"));
  }
  if (!parameters.allFinite()) {
    return absl::InvalidArgumentError(
        "dp_sgd step parameters contain a NaN or infinite value; send finite parameters");
  }
  if (parameters.size() > 0 && parameters.cwiseAbs().maxCoeff() > kMaxDpSgdParameterMagnitude) {
    return absl::InvalidArgumentError(
        "dp_sgd step parameters must have magnitude at most 2^20 = 1048576 (a bound that keeps "
        "every step's arithmetic finite; docs/privacy.md 2.9); rescale the network");
  }
  return absl::OkStatus();
}

absl::StatusOr<privacy::GridNoise> DpSgdKind::NoiseFor(const Params& resolved,
                                                       privacy::NeighbouringRelation relation,
                                                       double noise_multiplier, int row_width) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  DPC_ASSIGN_OR_RETURN(const int64_t count, NumParameters(resolved, row_width));
  absl::StatusOr<privacy::GridNoise> spec =
      privacy::GridGaussianNoise(noise_multiplier, Sensitivity(resolved, relation), count);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dp_sgd noise multiplier ", noise_multiplier, " with clip norm ", resolved.clip_norm,
        " cannot be drawn on the noise grid (", spec.status().message(),
        "); choose a noise multiplier between 1e-3 and 1e6"));
  }
  // A released coordinate is g (m + Z) with |m|, |Z| <= 2^52 grid units
  // (AddGridNoise clamps m, and refuses Z beyond), g <= 2^-20 s Delta', so
  // |answer| <= 2^33 scale / divisor; the answer is float32.
  const double largest = std::ldexp(spec->scale(), 34) / resolved.expected_batch_size;
  if (!(largest <= static_cast<double>(std::numeric_limits<float>::max()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dp_sgd noise multiplier ", noise_multiplier, " times the sensitivity is too large for "
        "the float32 answer; choose a smaller noise multiplier or clip norm"));
  }
  return spec;
}

Eigen::MatrixXd DpSgdKind::LossGradient(const Params& resolved,
                                        const Eigen::Ref<const Eigen::MatrixXd>& outputs,
                                        const Eigen::Ref<const Eigen::MatrixXd>& rows) {
  Eigen::MatrixXd out;
  LossGradient(resolved, outputs, rows, &out);
  return out;
}

void DpSgdKind::LossGradient(const Params& resolved,
                             const Eigen::Ref<const Eigen::MatrixXd>& outputs,
                             const Eigen::Ref<const Eigen::MatrixXd>& rows,
                             Eigen::MatrixXd* out) {
  switch (resolved.loss) {
    case DpSgdLoss::kReconstructionBce: {
      // d/dz [max(z,0) - x z + log(1 + e^-|z|)] = sigmoid(z) - x, averaged
      // over the D coordinates (nn.BCELoss of the reference, per example).
      const double inv_width = 1.0 / static_cast<double>(outputs.cols());
      out->resize(outputs.rows(), outputs.cols());
      out->array() = ((1.0 / (1.0 + (-outputs.array()).exp())) - rows.array()) * inv_width;
      return;
    }
    case DpSgdLoss::kWganCriticReal:
      // L_i = -D(x_i): the critic lowers mean D(fake) - mean D(real).
      out->setConstant(outputs.rows(), 1, -1.0);
      return;
  }
  out->setZero(outputs.rows(), outputs.cols());
}

namespace {

// The clipped sum of `num_rows` rows given a chunk at a time (see
// DpSgdKind::ClippedGradientSum): nn::BatchClippedGradientSum on the
// step's threads (core/util/shard_pool.h, kMaxStepThreads).
absl::Status ClippedSumOfRows(
    const DpSgdKind::Params& resolved, const nn::Mlp& network, Eigen::Index num_rows,
    const std::function<void(Eigen::Index, Eigen::Index, Eigen::MatrixXd*)>& rows,
    nn::PerExampleWorkspace* workspace, Eigen::VectorXd* sum) {
  auto loss_gradient = [&resolved](const Eigen::MatrixXd& outputs, const Eigen::MatrixXd& chunk,
                                   Eigen::MatrixXd* out) {
    // Into the shard's buffer: a fresh matrix per chunk would fault in new
    // pages every time.
    DpSgdKind::LossGradient(resolved, outputs, chunk, out);
  };
  DPC_RETURN_IF_ERROR(nn::BatchClippedGradientSum(network, num_rows, rows, loss_gradient,
                                                  resolved.clip_norm, kMaxStepThreads, sum,
                                                  workspace));
  // Every kept term has norm <= C, so the sum is finite; should it still not
  // be (it cannot under the parameter bounds), it is released as noise
  // alone, by selection, never as an error (issue 23).
  if (!sum->allFinite()) sum->setZero();
  return absl::OkStatus();
}

}  // namespace

absl::Status DpSgdKind::ClippedGradientSum(const Params& resolved, const nn::Mlp& network,
                                           const Eigen::Ref<const Eigen::MatrixXd>& rows,
                                           nn::PerExampleWorkspace* workspace,
                                           Eigen::VectorXd* sum) {
  return ClippedSumOfRows(
      resolved, network, rows.rows(),
      [&rows](Eigen::Index first, Eigen::Index count, Eigen::MatrixXd* out) {
        *out = rows.middleRows(first, count);
      },
      workspace, sum);
}

absl::StatusOr<DpSgdKind::Result> DpSgdKind::Run(
    const Params& resolved, const EncodedRows& batch, privacy::NeighbouringRelation relation,
    double noise_multiplier, const Eigen::Ref<const Eigen::VectorXd>& parameters,
    privacy::NoiseSource* noise) {
  // Public checks first, the same ones the server made before admission
  // (NoiseFor at open, CheckParameters on the query): nothing below them
  // can fail, whatever the batch holds.
  const int width = DpSgdRowWidth(batch.layout, batch.num_classes);
  DPC_ASSIGN_OR_RETURN(const privacy::GridNoise grid_noise,
                       NoiseFor(resolved, relation, noise_multiplier, width));
  DPC_RETURN_IF_ERROR(CheckParameters(resolved, width, parameters));
  DPC_ASSIGN_OR_RETURN(nn::Mlp network,
                       nn::Mlp::FromParameters(Network(resolved, width), parameters));
  Result result;
  // The batch's rows are read a chunk at a time (DpSgdRowRange), never
  // copied whole: a 4,096-row batch of 2,142-wide rows is 70 MB.
  DPC_RETURN_IF_ERROR(ClippedSumOfRows(
      resolved, network, batch.num_rows(),
      [&batch](Eigen::Index first, Eigen::Index count, Eigen::MatrixXd* out) {
        DpSgdRowRange(batch, first, count, out);
      },
      /*workspace=*/nullptr, &result.gradient));
  // One Gaussian release of the whole clipped sum, snapped to the grid of
  // s * Delta with discrete Gaussian noise (docs/privacy.md 4.2): the same
  // noise path as the embedding kinds. The sum is finite (above), so
  // AddGridNoise's finiteness check cannot trip.
  result.sensitivity = Sensitivity(resolved, relation);
  DPC_RETURN_IF_ERROR(privacy::AddGridNoise(grid_noise, result.gradient, noise));
  result.applied_noise_stddev = grid_noise.scale();
  // Public divisor: post-processing of the noisy sum.
  result.divisor = resolved.expected_batch_size;
  result.gradient /= result.divisor;
  result.ran.noise_multipliers = {noise_multiplier};
  return result;
}

}  // namespace dpcurator::release
