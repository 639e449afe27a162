#ifndef DPCURATOR_CORE_RELEASE_KERNEL_WITNESS_H_
#define DPCURATOR_CORE_RELEASE_KERNEL_WITNESS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include <Eigen/Core>
#include <Eigen/Cholesky>

#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/events.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/encoded_rows.h"
#include "core/release/mechanism_record.h"

namespace dpcurator::release {

// DP-kernel's release (dp-kernel-frdp.md sec. 2; docs/privacy.md 2.10): the
// kernel mean ("witness") function of a subsampled batch,
//   f(w) = (1/m) sum_{i in B} k(x_i, w),
// perturbed by sigma * Delta times ONE sample path G of the Gaussian process
// whose covariance is k (the functional Gaussian mechanism, Hall, Rinaldo,
// Wasserman 2013), and read, together with its gradient, at the M points
// the trainer chose. The values and gradients of that one path are drawn
// jointly with their exact covariance (KernelJointFactor below), so the
// released gradient is the derivative of the released function: the trainer
// post-processes one function release (pitfall 2 of the notes).
//
// The kernel is the normalised sum of Gaussians over declared bandwidths,
//   k(x, w) = (1/K) sum_{h} exp(-||x - w||^2 / (2 h^2)),  so k(x, x) = 1
// (the reference code's sum without the 1/K has k(x, x) = K; dividing by K
// makes the RKHS sensitivity 1/m independent of K, and the noise scales
// with it, so nothing else changes). The conditional variant multiplies
// by the label kernel 1[y = y'] (one-hot labels, order-1 polynomial).
//
// One unit like the one-shot kinds (release_kind.h): Params, Resolve against
// data-independent bounds, Plan (the per-step mechanism), Run. It is a
// session step: the server (a later change) Poisson-samples the batch and
// charges StepEvent per step.
class KernelWitnessKind {
 public:
  static constexpr std::string_view kName = "kernel_witness";

  // Bounds that depend on nothing private.
  static constexpr int kMaxBandwidths = 16;
  // A bandwidth in [kMinBandwidth, kMaxBandwidth] times sqrt(total_dim):
  // below it 1/h^2 would exceed ~1e12 / total_dim (gradients and the
  // whitening lose their digits), above it the kernel is flat at 1.
  static constexpr double kMinBandwidthPerSqrtDim = 1e-4;
  static constexpr double kMaxBandwidthPerSqrtDim = 1e4;
  // Points per independent GP group: all the points unconditionally, the
  // points of one label in the conditional variant (k* is 0 across labels,
  // so each label's points get their own factor). A group of M_g points
  // has a dense span block of M_g (1 + min(d, M_g - 1)) coordinates (at
  // most 4096 here: one Cholesky of that size, about 2e10 flops).
  static constexpr int kMaxGroupPoints = 64;
  // M per step: conditionally up to kMaxGroupPoints per label; more points
  // cost no privacy (the charge depends on (q, s) only) and average the
  // GP's gradient noise over more generated samples (bench/fmnist).
  static constexpr int kMaxQueryPoints = 1024;
  // The most points one step may send: kMaxGroupPoints unconditionally;
  // conditionally kMaxGroupPoints per label, so at most that many per class
  // (points spread evenly over the labels, as the trainer's balanced labels
  // do) and kMaxQueryPoints in all. Public: the schema's class count only.
  static int MaxQueryPoints(bool conditional, int num_classes);
  // Query coordinates are trainer-chosen (public) but bounded, so that no
  // distance to a row of the declared domain can overflow.
  static constexpr double kMaxQueryCoordinate = 1e6;
  // The declared divisor m (expected batch size) is at most 2^40 rows: a
  // larger one would make the sensitivity 1/m so small that s / m leaves the
  // noise grid, and every step would fail after the read (docs/privacy.md
  // 6.4). No dataset we serve has 10^12 rows.
  static constexpr double kMaxBatchDivisor = 0x1.0p40;

  struct Params {
    // Empty: DefaultBandwidths(layout).
    std::vector<double> bandwidths;
    // Product with the label kernel: query points carry labels.
    bool conditional = false;
    // The public divisor m of the witness (pitfall 4): under ADD_REMOVE the
    // declared expected batch size (never the realised |B|, which is never
    // revealed either); under REPLACE_ONE the fixed batch size, which the
    // server's one batch-size function makes equal to the batch by
    // construction (checked at plan time, never after the read).
    double batch_divisor = 0.0;
  };

  // The trainer's points (public: they never depend on private rows except
  // through earlier releases).
  struct Query {
    Eigen::MatrixXd points;  // M x total_dim
    Eigen::VectorXi labels;  // M, in [0, num_classes); conditional only
  };

  struct Result {
    Eigen::VectorXd values;     // M: f~(w_j)
    Eigen::MatrixXd gradients;  // M x total_dim: grad f~(w_j), row j
    GaussianMechanismRecord ran;
  };

  // The paper's {1, 2, 4, 8, 16} on [-1, 1]^1024 are diameter/64 .. /4;
  // ours are the same fractions of our domain's diameter sqrt(total_dim)
  // ([0, 1]^d): sqrt(d) * {1/64, 1/32, 1/16, 1/8, 1/4}.
  static std::vector<double> DefaultBandwidths(const data::FeatureLayout& layout);

  // Fills defaults and checks every parameter against data-independent
  // bounds (INVALID_ARGUMENT stating the accepted range).
  static absl::StatusOr<Params> Resolve(Params params, const data::Schema& schema);

  // The RKHS sensitivity of f (docs/privacy.md 2.10): 1/m under ADD_REMOVE,
  // sqrt(2)/m under REPLACE_ONE (k >= 0 and k(x, x) = 1).
  static double Sensitivity(privacy::NeighbouringRelation relation, double batch_divisor);

  // The grid Gaussian noise of a step whose whitened vector has
  // `whitened_size` coordinates (privacy::GridGaussianNoise at s and the
  // whitened sensitivity): what Run draws.
  static absl::StatusOr<privacy::GridNoise> NoiseFor(const Params& resolved,
                                                     privacy::NeighbouringRelation relation,
                                                     double noise_multiplier,
                                                     int64_t whitened_size);
  // The largest whitened vector a step may send (ValidateQuery's bound for
  // max_points points of total_dim coordinates).
  static int64_t MaxWhitenedSize(int max_points, int total_dim);
  // Before admission: NoiseFor at the largest step a session can send. The
  // grid's integer scale only grows with the dimension, so a step that
  // passes ValidateQuery can never fail its noise step (docs/privacy.md 6.4).
  static absl::Status CheckNoise(const Params& resolved, privacy::NeighbouringRelation relation,
                                 double noise_multiplier, int max_points, int total_dim);

  // One grid Gaussian release with multiplier s per step.
  static GaussianMechanismRecord Plan(const Params& resolved, double noise_multiplier);

  // What one step is charged as: the subsampled discrete Gaussian at (q, s)
  // under the relation's sampling scheme (sampled_gaussian.h).
  static absl::StatusOr<privacy::PrivacyEvent> StepEvent(privacy::NeighbouringRelation relation,
                                                         double sampling_rate,
                                                         double noise_multiplier);

  // Checks a query against public bounds only (shape, finiteness, range,
  // labels); Run calls it before reading any row.
  static absl::Status ValidateQuery(const Params& resolved, const Query& query, int total_dim,
                                    int num_classes);

  // The engine. `batch` is the step's sampled rows.
  static absl::StatusOr<Result> Run(const Params& resolved, const EncodedRows& batch,
                                    const Query& query, privacy::NeighbouringRelation relation,
                                    double noise_multiplier, privacy::NoiseSource* noise);
};

// k(x, w) of the kind (normalised sum of Gaussians).
double SumGaussianKernel(const Eigen::Ref<const Eigen::VectorXd>& x,
                         const Eigen::Ref<const Eigen::VectorXd>& w,
                         const std::vector<double>& bandwidths);

// The noiseless witness of `rows` (unconditional: all rows) at the points,
// divided by `divisor`: values (M) and gradients (M x d).
void KernelWitness(const Eigen::MatrixXd& rows, const Eigen::MatrixXd& points,
                   const std::vector<double>& bandwidths, double divisor,
                   Eigen::VectorXd* values, Eigen::MatrixXd* gradients);

// The joint law of (G(w_j), grad G(w_j))_{j=1..M} for a GP G with the sum
// kernel (docs/privacy.md 2.10), factored without the dense M(d+1) matrix:
// with Q = [U V] orthonormal and U (d x r, r = min(d, M-1)) spanning every
// w_j - w_1, all cross terms live in U; along V the gradients are
// uncorrelated with everything else and have covariance C (x) I, C_jl =
// (1/K) sum_h k_h(w_j, w_l) / h^2. So one dense Cholesky of the span block
// (M + M r coordinates: values and U^T gradients) and one of C (M x M).
// V is never formed: the complement part is P_V G = (I - U U^T) G in all d
// coordinates (same norm as V^T G), and coloring projects its noise with
// P_V, which has the law of V times i.i.d. noise. This costs O(d M r) a
// factor instead of O(d^2 M) for a full Q.
// A relative jitter kJitter is added to every diagonal: it only adds
// noise (the covariance grows, the whitened sensitivity shrinks).
//
// Coordinates of a whitened vector: [span block (M + M r); complement block
// (d x M, column-major; absent when r = d)]. Color(Whiten(x)) = x for every
// (values, gradients); Whiten(Color(z)) is z with its complement block
// projected by P_V.
class KernelJointFactor {
 public:
  static constexpr double kJitter = 1e-9;

  // points: M x d, finite; bandwidths positive. Fails (data-independent:
  // it reads only the points) if a factor is not positive definite even
  // after raising the jitter to 1e-3.
  static absl::StatusOr<KernelJointFactor> Create(const Eigen::MatrixXd& points,
                                                  const std::vector<double>& bandwidths);

  int num_points() const { return num_points_; }
  int dimension() const { return dimension_; }
  int span_rank() const { return rank_; }
  // M (1 + r) + M d (M (1 + d) when r = d: no complement block).
  int64_t whitened_size() const {
    const int64_t m = num_points_;
    return m * (1 + rank_) + (has_complement() ? m * dimension_ : 0);
  }
  bool has_complement() const { return dimension_ > rank_; }
  double jitter() const { return jitter_; }

  // L^{-1} [values; gradients] in the coordinates above.
  Eigen::VectorXd Whiten(const Eigen::VectorXd& values, const Eigen::MatrixXd& gradients) const;
  // L z: for z ~ N(0, I), (values, gradients) has the joint covariance.
  void Color(const Eigen::VectorXd& z, Eigen::VectorXd* values, Eigen::MatrixXd* gradients) const;

 private:
  KernelJointFactor() = default;

  int num_points_ = 0;
  int dimension_ = 0;
  int rank_ = 0;
  double jitter_ = 0.0;
  Eigen::MatrixXd span_basis_;  // U, d x r: spans the differences
  Eigen::LLT<Eigen::MatrixXd> span_llt_;
  Eigen::LLT<Eigen::MatrixXd> complement_llt_;
};

// For tests: the dense joint covariance of [G(w_1..w_M); grad G(w_1); ...;
// grad G(w_M)] ((M + M d) square), from the kernel's derivatives directly.
Eigen::MatrixXd DenseJointCovariance(const Eigen::MatrixXd& points,
                                     const std::vector<double>& bandwidths);

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_KERNEL_WITNESS_H_
