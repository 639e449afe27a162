#ifndef DPCURATOR_CORE_RELEASE_DP_SGD_H_
#define DPCURATOR_CORE_RELEASE_DP_SGD_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/nn/activation.h"
#include "core/nn/mlp.h"
#include "core/nn/per_example.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/encoded_rows.h"
#include "core/release/mechanism_record.h"

namespace dpcurator::release {

// The rows a DP-SGD network sees (dp-auto-gan.md 1.5): the encoded features
// (one-hot categoricals, numerics scaled to [0, 1] by the declared bounds,
// core/data/encoder.h) followed by the one-hot label when the schema has
// more than one class (the autoencoder models whole rows, label included; a
// single class carries nothing). Depends on the public schema only; the
// trainer builds and decodes the same layout.
int DpSgdRowWidth(const data::FeatureLayout& layout, int num_classes);
int DpSgdRowWidth(const data::Schema& schema);
// rows.num_rows() x DpSgdRowWidth(rows.layout, rows.num_classes).
Eigen::MatrixXd DpSgdRows(const EncodedRows& rows);

// Data-independent limits of a dp_sgd session's network, checked at open so
// that one analyst cannot make a step arbitrarily expensive. Parameters: the
// grid Gaussian's proof covers at most privacy::kMaxGridGaussianDimension
// (2^20) coordinates in one release (docs/privacy.md 4.6), and the noisy
// gradient is one such release.
inline constexpr int64_t kMaxDpSgdParameters = int64_t{1} << 20;
inline constexpr int kMaxDpSgdHiddenLayers = 8;
inline constexpr int kMaxDpSgdWidth = 4096;
inline constexpr double kDefaultLeakyReluSlope = 0.01;

// Bounds that make every step's computation finite on every row the schema
// allows (docs/privacy.md 2.9, "Totality"): with every parameter of
// magnitude at most 2^20, rows in [0, 1]^w and at most 2^20 parameters, no
// forward value, delta or per-example norm can leave the double range, so
// no row can make a step's arithmetic overflow (issue 23's row oracle fed
// parameters of 3e38). Checked on every step's query before any row is read.
inline constexpr double kMaxDpSgdParameterMagnitude = 0x1.0p20;
// The clip norm's range: below 2^-20 the clipped sum is only noise, above
// 1e6 gradients of [0, 1] rows make no sense.
inline constexpr double kMinClipNorm = 0x1.0p-20;
inline constexpr double kMaxClipNorm = 1e6;
// The public divisor's range (the declared expected batch size): at least
// one row, at most 2^40.
inline constexpr double kMinDpSgdDivisor = 1.0;
inline constexpr double kMaxDpSgdDivisor = 0x1.0p40;

// The per-example loss L_i whose gradient is clipped (docs/privacy.md 2.9).
enum class DpSgdLoss {
  // Mean over the D coordinates of BCE(sigmoid(z), x) from the logits z
  // (dp-auto-gan.md 1.3, nn.BCELoss as the reference's Adult code):
  //   L_i = (1/D) sum_j [ max(z_j, 0) - x_j z_j + log(1 + exp(-|z_j|)) ],
  //   dL_i/dz_j = (sigmoid(z_j) - x_j) / D.   Output width D.
  kReconstructionBce,
  // The real part of the WGAN critic loss, mean D(fake) - mean D(real)
  // (standard signs, dp-auto-gan.md pitfall 3): L_i = -D(x_i), so
  // dL_i/dD = -1. Output width 1.
  kWganCriticReal,
};

// DP-SGD (Abadi et al. 2016, Alg. 1; dp-auto-gan.md 1.2 with r = 1) as the
// step of a dp_sgd session: given the trainer's public parameters of one
// declared dense network and the step's subsampled batch, the sum of the
// per-example gradients each clipped to L2 norm C, plus grid discrete
// Gaussian noise of std s * Delta (Delta = C under ADD_REMOVE, 2C under
// REPLACE_ONE), divided by a public divisor. The network is ONE nn::Mlp:
// an autoencoder is encoder and decoder in one, so the JOINT per-example
// gradient is clipped (the fix of dp-auto-gan.md pitfall 2).
class DpSgdKind {
 public:
  static constexpr std::string_view kName = "dp_sgd";

  struct Params {
    std::vector<int> hidden;
    nn::Activation activation = nn::Activation::kRelu;
    double leaky_relu_slope = kDefaultLeakyReluSlope;
    DpSgdLoss loss = DpSgdLoss::kReconstructionBce;
    double clip_norm = 0.0;            // C
    double expected_batch_size = 0.0;  // the public divisor
  };

  struct Result {
    // (clipped sum + noise) / divisor, in Mlp::parameters() layout.
    Eigen::VectorXd gradient;
    double divisor = 0.0;
    // The L2 sensitivity of the clipped sum and the std of the noise drawn
    // (grid scale, before division).
    double sensitivity = 0.0;
    double applied_noise_stddev = 0.0;
    GaussianMechanismRecord ran;
  };

  // Checks every parameter against the limits above and the row width of
  // the public schema (INVALID_ARGUMENT saying what is accepted). Depends
  // on nothing private.
  static absl::StatusOr<Params> Resolve(Params params, const data::Schema& schema);

  // The declared network for rows of width `row_width` (no layer norm:
  // per-example clipping needs rows treated independently, and the server
  // keeps to the one layer type whose per-example norm identity is tested).
  static nn::MlpOptions Network(const Params& params, int row_width);
  static int OutputWidth(const Params& params, int row_width);
  // Its parameter count (the length of every step's query and answer).
  static absl::StatusOr<int64_t> NumParameters(const Params& params, int row_width);

  // The mechanism of one step for noise multiplier s: one Gaussian release.
  static GaussianMechanismRecord Plan(const Params& resolved, double noise_multiplier);

  // The grid noise every step of a session with noise multiplier s draws:
  // privacy::GridGaussianNoise(s, Sensitivity, NumParameters), the very call
  // Run makes, refused (INVALID_ARGUMENT) when s * Delta is outside the
  // grid's range or when the released gradient, divided by the divisor,
  // could leave float's range (answers are float32). The server calls it at
  // session open, before admission, so Run cannot fail on it after the rows
  // are read.
  static absl::StatusOr<privacy::GridNoise> NoiseFor(const Params& resolved,
                                                     privacy::NeighbouringRelation relation,
                                                     double noise_multiplier, int row_width);

  // L2 sensitivity of the clipped sum: C when one row is added or removed
  // (one clipped term of norm <= C appears or disappears), 2C when one row
  // of a fixed-size batch is replaced (one term of norm <= C becomes
  // another: ||g - g'|| <= 2C).
  static double Sensitivity(const Params& resolved, privacy::NeighbouringRelation relation);

  // Before any row is read: the query has the network's length and only
  // finite values of magnitude at most kMaxDpSgdParameterMagnitude
  // (INVALID_ARGUMENT stating the expected length or the bound).
  static absl::Status CheckParameters(const Params& resolved, int row_width,
                                      const Eigen::Ref<const Eigen::VectorXd>& parameters);

  // The noiseless statistic: sum_i min(1, C / ||g_i||) g_i over the rows
  // (rows x row_width, DpSgdRows layout) at `network`'s parameters, by
  // nn::BatchClippedGradientSum: per chunk of rows a Forward, the loss
  // gradient and nn::AddClippedGradientSum (per-example norms by the
  // dense-layer identity, the sum by one GEMM per layer), two row shards on
  // up to kMaxStepThreads threads, added in a fixed order (issue 39).
  // Sets *sum (resized, zeroed first) and, unless `workspace` is null, its
  // norms() and clip_factors() for every row. An empty batch gives zeros.
  // Total: an example with a non-finite value is dropped, and a sum that is
  // still not finite is replaced by zeros (released as noise alone), never
  // an error (docs/privacy.md 2.9).
  static absl::Status ClippedGradientSum(const Params& resolved, const nn::Mlp& network,
                                         const Eigen::Ref<const Eigen::MatrixXd>& rows,
                                         nn::PerExampleWorkspace* workspace,
                                         Eigen::VectorXd* sum);

  // The per-example loss gradient dL_i/dOutput_i for the network's outputs
  // (rows x output width) on `rows`: see DpSgdLoss.
  static Eigen::MatrixXd LossGradient(const Params& resolved,
                                      const Eigen::Ref<const Eigen::MatrixXd>& outputs,
                                      const Eigen::Ref<const Eigen::MatrixXd>& rows);
  // The same into *out (resized; its buffer reused when the shape is).
  static void LossGradient(const Params& resolved, const Eigen::Ref<const Eigen::MatrixXd>& outputs,
                           const Eigen::Ref<const Eigen::MatrixXd>& rows, Eigen::MatrixXd* out);

  // The engine: ClippedGradientSum over the batch, grid Gaussian noise of
  // multiplier s on the whole vector (std s * Sensitivity), divided by the
  // public divisor. `parameters` must have passed CheckParameters and s
  // NoiseFor: then Run returns a finite gradient of the planned length for
  // every batch, and fails only on those public checks, which it repeats
  // before it reads the batch.
  static absl::StatusOr<Result> Run(const Params& resolved, const EncodedRows& batch,
                                    privacy::NeighbouringRelation relation,
                                    double noise_multiplier,
                                    const Eigen::Ref<const Eigen::VectorXd>& parameters,
                                    privacy::NoiseSource* noise);
};

// Stable names: "reconstruction_bce", "wgan_critic_real".
std::string_view DpSgdLossName(DpSgdLoss loss);

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_DP_SGD_H_
