#ifndef DPCURATOR_CORE_TRAIN_SINKHORN_TRAINER_H_
#define DPCURATOR_CORE_TRAIN_SINKHORN_TRAINER_H_

// The local-DP deconvolving trainer (Reshetova, Chen & Ozgur, "Training
// generative models from privatized data", Algorithm 1; ldp-sinkhorn.md
// Sec. 1.4): fit a generator G by minimising, over minibatches, the
// entropy-regularised OT W_{p, lambda}(Q_G^B, Q_Y^B) between B generated
// points and B privatised reports, with p and lambda = p sigma^p taken from
// the public mechanism (Thm. 1, eq. 10), so that the Gibbs kernel equals the
// noise likelihood and the loss deconvolves the noise. No critic; the plan
// is computed by Sinkhorn and held fixed for the gradient (envelope).
// Post-processing of the reports only (Remark 1).

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/ldp/mechanism.h"
#include "core/nn/activation.h"
#include "core/nn/mlp.h"
#include "core/util/public_rng.h"

namespace dpcurator::train {

// Architecture of an LdpPointGenerator; with the flat parameters it rebuilds the
// model (LdpPointGenerator::FromParameters).
struct LdpPointGeneratorOptions {
  // Width of the latent code z ~ Uniform[-1, 1]^latent_dim (the paper's
  // synthetic-data prior, ldp-sinkhorn.md Sec. 4).
  int latent_dim = 2;
  // Hidden widths (the paper's synthetic generator: 2 x 256).
  std::vector<int> hidden = {256, 256};
  nn::Activation activation = nn::Activation::kRelu;
  uint64_t seed = 0;
  // Output head. Both 0 (the default): linear, unbounded. output_low <
  // output_high: the bounded head x = low + (high - low) sigmoid(Mlp(z)),
  // for records that the public domain confines to a box, e.g. images with
  // pixels in [-1, 1]: the ball projection shrinks towards the origin, so a
  // projected image stays in the box and the deconvolved distribution does
  // too (ldp-sinkhorn.md Sec. 4 "MNIST": pixels in [-1, 1]). The noisy
  // reports themselves leave the box; only the naive baseline would want to.
  double output_low = 0.0;
  double output_high = 0.0;

  bool bounded() const { return output_low != 0.0 || output_high != 0.0; }
};

// Buffers of one LdpPointGenerator Forward/Backward pair (one per thread);
// reused for batches of one size, they allocate nothing.
template <typename Scalar>
struct BasicLdpPointGeneratorWorkspace {
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  nn::BasicMlpWorkspace<Scalar> mlp;
  Matrix points;    // output of the bounded head
  Matrix grad_pre;  // dLoss / dMlp(z) through the bounded head
};
using LdpPointGeneratorWorkspace = BasicLdpPointGeneratorWorkspace<double>;
using LdpPointGeneratorWorkspaceF = BasicLdpPointGeneratorWorkspace<float>;

// An unconditional generator of points in R^d: x = Mlp(z) with a linear
// output. Unlike TabularGenerator (sigmoid/softmax heads bounded to the
// encoded box), its outputs are unbounded: the reports it is fitted to are
// records scaled into the public ball plus unbounded noise, and the
// deconvolved distribution lives in (a neighbourhood of) the ball.
class LdpPointGenerator {
 public:
  // output_dim >= 1; options validated by nn::Mlp.
  static absl::StatusOr<LdpPointGenerator> Create(int output_dim,
                                               const LdpPointGeneratorOptions& options);
  static absl::StatusOr<LdpPointGenerator> FromParameters(int output_dim,
                                                       const LdpPointGeneratorOptions& options,
                                                       Eigen::VectorXd parameters);

  // Fills `z` (n x latent_dim) with Uniform[-1, 1) draws from `rng`.
  void DrawLatents(PublicRng* rng, Eigen::MatrixXd* z) const;

  // Points (n x output_dim) for latents `z`, valid until the workspace's
  // next use.
  const Eigen::MatrixXd& Forward(const Eigen::Ref<const Eigen::MatrixXd>& z,
                                 LdpPointGeneratorWorkspace* workspace) const;
  // Adds dLoss/dParameters for the last Forward on `workspace`.
  void Backward(const Eigen::Ref<const Eigen::MatrixXd>& grad_points,
                LdpPointGeneratorWorkspace* workspace, Eigen::VectorXd* grad_params) const;

  // n synthetic points (latents from `rng`), in chunks of kSampleChunkRows.
  Eigen::MatrixXd Sample(Eigen::Index n, PublicRng* rng) const;
  static constexpr Eigen::Index kSampleChunkRows = 4096;

  Eigen::VectorXd& parameters() { return mlp_.parameters(); }
  const Eigen::VectorXd& parameters() const { return mlp_.parameters(); }
  Eigen::Index num_parameters() const { return mlp_.num_parameters(); }
  const LdpPointGeneratorOptions& options() const { return options_; }
  int latent_dim() const { return options_.latent_dim; }
  int output_dim() const { return mlp_.output_dim(); }
  const nn::Mlp& mlp() const { return mlp_; }

  static nn::MlpOptions MlpOptionsFor(int output_dim, const LdpPointGeneratorOptions& options);

 private:
  LdpPointGenerator(LdpPointGeneratorOptions options, nn::Mlp mlp)
      : options_(std::move(options)), mlp_(std::move(mlp)) {}

  LdpPointGeneratorOptions options_;
  nn::Mlp mlp_;
};

// A float32 replica of an LdpPointGenerator, for the image path of the trainer
// (784-d outputs): its products go to the BLAS sgemm (core/nn/gemm.h), and
// the generator is post-processing of the reports, so float costs no
// privacy. The double LdpPointGenerator stays the model (Adam updates it, in
// double); SyncFrom copies its parameters after each step.
class FloatLdpPointGenerator {
 public:
  static absl::StatusOr<FloatLdpPointGenerator> Create(const LdpPointGenerator& master);
  // Copies the master's parameters (same architecture; no allocation).
  void SyncFrom(const LdpPointGenerator& master);

  const Eigen::MatrixXf& Forward(const Eigen::Ref<const Eigen::MatrixXf>& z,
                                 LdpPointGeneratorWorkspaceF* workspace) const;
  void Backward(const Eigen::Ref<const Eigen::MatrixXf>& grad_points,
                LdpPointGeneratorWorkspaceF* workspace, Eigen::VectorXf* grad_params) const;
  Eigen::Index num_parameters() const { return mlp_.num_parameters(); }

 private:
  FloatLdpPointGenerator(LdpPointGeneratorOptions options, nn::MlpF mlp)
      : options_(std::move(options)), mlp_(std::move(mlp)) {}

  LdpPointGeneratorOptions options_;
  nn::MlpF mlp_;
};

struct SinkhornTrainerOptions {
  int steps = 2000;
  // B: generated points and reports per step (equal, as in Algorithm 1).
  int batch_size = 512;
  double learning_rate = 1e-3;
  // The learning rate decays linearly to this fraction over the run.
  double final_learning_rate_fraction = 0.1;
  LdpPointGeneratorOptions generator;
  uint64_t seed = 1;

  // Baseline (the paper's objective (2), min_G W_p^p(P_G, Q_Y), the
  // "unregularised p-WGAN on privatised data" of Sec. 4.2): fit the noisy
  // reports without deconvolution. It learns P_Y = M # P_X, not P_X. Same
  // cost exponent p as the mechanism; the minibatch OT is solved by
  // `naive_solver`.
  bool naive = false;
  enum class NaiveSolver {
    // Unregularised OT approximated by Sinkhorn with a small lambda,
    // recomputed every step as
    //   lambda_naive = naive_lambda_fraction * median_ij C_ij
    // of that step's cost matrix, with epsilon scaling from max C
    // (naive_annealing) and the sinkhorn_* stopping rule. Default.
    kSmallLambdaSinkhorn,
    // Unregularised OT solved exactly: for equal-size uniform batches the
    // optimal plan is a permutation (Birkhoff), found by ldp::SolveAssignment;
    // P = permutation / B. lambda is reported as 0.
    kExactAssignment,
  };
  NaiveSolver naive_solver = NaiveSolver::kSmallLambdaSinkhorn;
  double naive_lambda_fraction = 0.01;
  double naive_annealing = 0.9;

  // Sinkhorn stopping rule per step (ldp::SinkhornOptions). The paper runs a
  // fixed L = 200-400 iterations; with the matched lambda the marginal
  // tolerance is usually met far earlier.
  double sinkhorn_tolerance = 1e-6;
  int sinkhorn_max_iterations = 500;

  // Polyak-Ruppert averaging of the iterates (Polyak & Juditsky 1992), as
  // an exponential moving average: after each step
  //   avg <- beta_t avg + (1 - beta_t) theta,  beta_t = min(beta, (1 + t) / (10 + t)),
  // and the returned generator carries avg (training itself follows theta).
  // With the deconvolving loss at image scale each minibatch's barycentric
  // targets carry the report noise (sigma / sqrt(effective reports)), so the
  // iterates jitter around the fit; averaging removes most of that jitter.
  // 0 (the default) returns the last iterate; otherwise in (0, 1).
  double parameter_averaging = 0.0;

  // Called every `progress_every` steps and at the end with the step's
  // entropic OT value (the minibatch loss).
  std::function<void(int step, double loss)> progress;
  int progress_every = 100;
};

struct TrainedPointGenerator {
  LdpPointGenerator generator;
  // The loss of the last step, and the lambda it used.
  double final_loss = 0.0;
  double lambda = 0.0;
  int steps = 0;
  // Sinkhorn iterations summed over all steps, and the steps whose Sinkhorn
  // hit the iteration cap before the tolerance.
  int64_t sinkhorn_iterations = 0;
  int unconverged_steps = 0;
};

// One loss evaluation of Algorithm 1: W_{p,lambda} between `generated`
// (B x d) and `reports` (B' x d), and dLoss/dGenerated with the plan fixed
// (ldp::TransportGradient). Exposed for tests.
struct MinibatchLoss {
  double loss = 0.0;
  Eigen::MatrixXd grad_generated;
  int sinkhorn_iterations = 0;
  bool converged = false;
};
absl::StatusOr<MinibatchLoss> EntropicOtLoss(const Eigen::MatrixXd& generated,
                                             const Eigen::MatrixXd& reports, int p,
                                             double lambda, double tolerance,
                                             int max_iterations, double annealing = 0.0);

// Unregularised W_p^p between equal-size batches by exact assignment, and its
// gradient with the optimal permutation fixed (the naive kExactAssignment
// baseline).
absl::StatusOr<MinibatchLoss> ExactOtLoss(const Eigen::MatrixXd& generated,
                                          const Eigen::MatrixXd& reports, int p);

// Algorithm 1 with Adam: `reports` (n x d) are privatised rows from
// `mechanism` (d = mechanism.dimension()); p = mechanism.cost_exponent() and
// lambda = mechanism.regularizer() (or the naive baseline's small lambda).
absl::StatusOr<TrainedPointGenerator> TrainSinkhornGenerator(
    const Eigen::MatrixXd& reports, const ldp::LdpMechanism& mechanism,
    const SinkhornTrainerOptions& options);

// The same algorithm on the float32 path, for high-dimensional records
// (images: d = 784): the generator runs as a FloatLdpPointGenerator replica,
// the cross term of the squared-l2 cost and the plan-weighted gradient are
// sgemm products (nn::Gemm), the minibatch buffers are allocated once, and
// only the B x B cost matrix, the Sinkhorn iterations and Adam stay in
// double (pitfall 6: the potentials need the precision, C / lambda reaches
// hundreds). The cost is formed as ||g||^2 + ||y||^2 - 2 <g, y> with the
// norms in double; its float cross term is off by about 1e-7 of the cost,
// far below lambda. p = 1 (Laplace) is accepted and computed through the
// double cost and gradient. Each call is single-threaded: run independent
// collections (e.g. one per class) on separate threads. Same seed, same
// result.
absl::StatusOr<TrainedPointGenerator> TrainSinkhornGeneratorFloat(
    const Eigen::MatrixXf& reports, const ldp::LdpMechanism& mechanism,
    const SinkhornTrainerOptions& options);

}  // namespace dpcurator::train

#endif  // DPCURATOR_CORE_TRAIN_SINKHORN_TRAINER_H_
