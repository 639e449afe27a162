#ifndef DPCURATOR_CORE_TRAIN_TABULAR_GENERATOR_H_
#define DPCURATOR_CORE_TRAIN_TABULAR_GENERATOR_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/nn/activation.h"
#include "core/nn/mlp.h"
#include "core/util/public_rng.h"

namespace dpcurator::train {

// Architecture of a TabularGenerator (besides the FeatureLayout and the
// number of classes). With the flat parameters it rebuilds the model exactly
// (TabularGenerator::FromParameters), so a model file stores these fields.
struct GeneratorOptions {
  // Width of the latent code z ~ N(0, I).
  int noise_dim = 16;
  // Hidden layer widths of the MLP.
  std::vector<int> hidden = {256, 256};
  nn::Activation activation = nn::Activation::kRelu;
  // Per-row layer normalisation of hidden layers, in place of the batch norm
  // of the reference generators (see nn::MlpOptions::layer_norm).
  bool layer_norm = false;
  // Seed of the public randomness for the initial weights.
  uint64_t seed = 0;
};

// The forward and backward passes shared by TabularGenerator (double) and
// FloatGenerator (float); defined in tabular_generator.cc.
template <typename Scalar>
struct GeneratorPass;

// Buffers for one Forward/Backward pair; reuse it across steps (no
// allocation for batches of the same size). One per thread.
template <typename Scalar>
class BasicGeneratorWorkspace {
 public:
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;

  BasicGeneratorWorkspace() = default;

  // Encoded rows of the last Forward (n x layout.total_dim()).
  const Matrix& encoded() const { return encoded_; }

 private:
  template <typename>
  friend struct GeneratorPass;

  Matrix input_;
  Matrix encoded_;
  Matrix grad_logits_;
  Vector row_buffer_;
  nn::BasicMlpWorkspace<Scalar> mlp_;
};
using GeneratorWorkspace = BasicGeneratorWorkspace<double>;
using FloatGeneratorWorkspace = BasicGeneratorWorkspace<float>;

// A conditional generator of encoded tabular rows: an MLP followed by one
// output head per column of a data::FeatureLayout.
//
//   input  = [ z ~ N(0, I_noise_dim) ; one-hot(label) ]   (no one-hot when
//            num_classes == 1)
//   logits = Mlp(input)                                    (n x total_dim)
//   numeric slot j:      x_j = sigmoid(logit_j), in [0, 1], i.e. within the
//                        declared bounds after data::DecodeFeatures;
//   categorical block B: x_B = softmax(logits_B), a distribution over levels.
//
// This is the generator G_theta(z, y) of DP-MERF (Sec. 3.1, G_1(z_x | y);
// dp-merf.md Sec. 1.3-1.5) and PEARL (Alg. 1; pearl.md Sec. 1.2 G), with the
// tabular heads of PEARL's code (softmax per categorical field) and a
// sigmoid in place of tanh/ReLU, because encoded numerics live in [0, 1].
// Label conditioning is a one-hot input (the reference code feeds the class
// index as one scalar; one-hot avoids imposing an order on classes).
// The loss (MMD of random features, characteristic-function distance) is
// the trainer's: it supplies dLoss/dEncoded to Backward.
class TabularGenerator {
 public:
  // Validates the layout (slots tile [0, total_dim) exactly), num_classes
  // (>= 1) and options, and initialises the MLP from options.seed.
  static absl::StatusOr<TabularGenerator> Create(const data::FeatureLayout& layout,
                                                 int num_classes,
                                                 const GeneratorOptions& options);

  // Rebuilds a generator from a model file: architecture plus flat
  // parameters (size must match; options.seed is ignored).
  static absl::StatusOr<TabularGenerator> FromParameters(
      const data::FeatureLayout& layout, int num_classes,
      const GeneratorOptions& options, Eigen::VectorXd parameters);

  // Generates encoded rows (n x total_dim) for latent codes `z`
  // (n x noise_dim) and `labels` (n entries in [0, num_classes); ignored,
  // and may be empty, when num_classes == 1). The result lives in
  // `workspace` until its next use.
  const Eigen::MatrixXd& Forward(const Eigen::Ref<const Eigen::MatrixXd>& z,
                                 const Eigen::VectorXi& labels,
                                 GeneratorWorkspace* workspace) const;

  // Adds dLoss/dParameters to `grad_params` (size num_parameters(); the
  // caller zeroes it) for the last Forward on `workspace`, given
  // `grad_encoded` = dLoss/dEncoded (n x total_dim). Chain rule through
  //   sigmoid:  dx/dl = x (1 - x),
  //   softmax:  dL/dl_k = x_k (g_k - sum_j g_j x_j)   per block and row,
  // then Mlp::Backward.
  void Backward(const Eigen::Ref<const Eigen::MatrixXd>& grad_encoded,
                GeneratorWorkspace* workspace, Eigen::VectorXd* grad_params) const;

  // Synthetic rows in the original schema: draws z ~ N(0, I) from `rng`
  // (block by block, kSampleChunkRows rows at a time), runs Forward, then one
  // uniform per row and categorical block (after all latents) with which
  // data::DecodeFeatures samples each categorical from its softmax. Numerics
  // are mapped back to the declared bounds (rounded for integer columns).
  // Fails if `schema` does not produce this generator's layout or class
  // count, or a label is out of range.
  absl::StatusOr<data::Table> Sample(const data::Schema& schema,
                                     const Eigen::VectorXi& labels,
                                     PublicRng* rng) const;

  // Rows generated per Forward inside Sample (bounds its memory).
  static constexpr Eigen::Index kSampleChunkRows = 4096;

  // Flat parameters of the MLP (the heads have none). Entries may be
  // changed by an optimizer; do not resize.
  Eigen::VectorXd& parameters() { return mlp_.parameters(); }
  const Eigen::VectorXd& parameters() const { return mlp_.parameters(); }
  Eigen::Index num_parameters() const { return mlp_.num_parameters(); }

  // Architecture, for model files.
  const GeneratorOptions& options() const { return options_; }
  const data::FeatureLayout& layout() const { return layout_; }
  int num_classes() const { return num_classes_; }
  int noise_dim() const { return options_.noise_dim; }
  // noise_dim + num_classes (num_classes > 1), else noise_dim.
  int input_dim() const { return mlp_.input_dim(); }
  int output_dim() const { return layout_.total_dim(); }
  const nn::Mlp& mlp() const { return mlp_; }

  // The MLP architecture this generator uses (exposed for model files).
  static nn::MlpOptions MlpOptionsFor(const data::FeatureLayout& layout,
                                      int num_classes, const GeneratorOptions& options);

 private:
  TabularGenerator(const data::FeatureLayout& layout, int num_classes,
                   const GeneratorOptions& options, nn::Mlp mlp);

  static absl::Status Validate(const data::FeatureLayout& layout, int num_classes,
                               const GeneratorOptions& options);

  data::FeatureLayout layout_;
  int num_classes_;
  GeneratorOptions options_;
  nn::Mlp mlp_;
};

// A float32 working copy of a TabularGenerator for the embedding trainers
// (issue 13): the same network and heads, its parameters rounded from the
// double master copy that the optimiser updates (SyncFrom after each step;
// mixed precision keeps Adam's small updates from rounding away). Forward
// and Backward are const and take a workspace, so row shards of one batch
// run on several threads at once.
class FloatGenerator {
 public:
  // A copy of `master`'s architecture and current parameters.
  static absl::StatusOr<FloatGenerator> Create(const TabularGenerator& master);

  // Copies `master`'s parameters (same architecture), rounded to float.
  void SyncFrom(const TabularGenerator& master);

  // TabularGenerator::Forward in float, for rows z (n x noise_dim) with
  // `labels` (n entries; ignored for one class).
  const Eigen::MatrixXf& Forward(const Eigen::Ref<const Eigen::MatrixXf>& z,
                                 const Eigen::Ref<const Eigen::VectorXi>& labels,
                                 FloatGeneratorWorkspace* workspace) const;
  // TabularGenerator::Backward in float: adds dLoss/dParameters to
  // grad_params (size num_parameters(); the caller zeroes it).
  void Backward(const Eigen::Ref<const Eigen::MatrixXf>& grad_encoded,
                FloatGeneratorWorkspace* workspace, Eigen::VectorXf* grad_params) const;

  Eigen::Index num_parameters() const { return mlp_.num_parameters(); }
  const nn::MlpF& mlp() const { return mlp_; }

 private:
  FloatGenerator(const data::FeatureLayout& layout, int num_classes, int noise_dim, nn::MlpF mlp)
      : layout_(layout), num_classes_(num_classes), noise_dim_(noise_dim), mlp_(std::move(mlp)) {}

  data::FeatureLayout layout_;
  int num_classes_;
  int noise_dim_;
  nn::MlpF mlp_;
};

}  // namespace dpcurator::train

#endif  // DPCURATOR_CORE_TRAIN_TABULAR_GENERATOR_H_
