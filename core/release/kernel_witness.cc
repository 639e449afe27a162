#include "core/release/kernel_witness.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <Eigen/Householder>
#include <Eigen/QR>

#include "absl/strings/str_cat.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/grid_gaussian.h"
#include "core/privacy/sampled_gaussian.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::release {
namespace {

// The whitened statistic's sensitivity is planned as Delta times this: a
// margin for the floating-point error of the triangular solves in
// KernelJointFactor::Whiten (docs/privacy.md 2.10, "Floating point"). It
// costs 0.01% more noise.
constexpr double kWhiteningMargin = 1.0 + 1e-4;

// The largest jitter tried before giving up (relative to each diagonal).
constexpr double kMaxJitter = 1e-3;

// (1/K) sum_h exp(-d2 / (2 h^2)) and (1/K) sum_h exp(-d2 / (2 h^2)) / h^2.
struct KernelTerms {
  double value = 0.0;
  double over_h2 = 0.0;
};

KernelTerms TermsAt(double squared_distance, const std::vector<double>& bandwidths) {
  KernelTerms terms;
  const double d2 = std::max(0.0, squared_distance);
  for (double h : bandwidths) {
    const double h2 = h * h;
    const double e = std::exp(-d2 / (2.0 * h2));
    terms.value += e;
    terms.over_h2 += e / h2;
  }
  const double k = static_cast<double>(bandwidths.size());
  terms.value /= k;
  terms.over_h2 /= k;
  return terms;
}

// (1/K) sum_h 1/h^2: the gradient variance Var(d G / d w_a) at any w.
double GradientVariance(const std::vector<double>& bandwidths) {
  double sum = 0.0;
  for (double h : bandwidths) sum += 1.0 / (h * h);
  return sum / static_cast<double>(bandwidths.size());
}

// Rows of `points` (and their indices) carrying `label`; all when label < 0.
std::vector<int> IndicesWithLabel(const Eigen::VectorXi& labels, int64_t count, int label) {
  std::vector<int> indices;
  for (int64_t i = 0; i < count; ++i) {
    if (label < 0 || labels(i) == label) indices.push_back(static_cast<int>(i));
  }
  return indices;
}

Eigen::MatrixXd RowsAt(const Eigen::MatrixXd& matrix, const std::vector<int>& indices) {
  Eigen::MatrixXd out(static_cast<Eigen::Index>(indices.size()), matrix.cols());
  for (size_t i = 0; i < indices.size(); ++i) out.row(static_cast<Eigen::Index>(i)) = matrix.row(indices[i]);
  return out;
}

}  // namespace

double SumGaussianKernel(const Eigen::Ref<const Eigen::VectorXd>& x,
                         const Eigen::Ref<const Eigen::VectorXd>& w,
                         const std::vector<double>& bandwidths) {
  return TermsAt((x - w).squaredNorm(), bandwidths).value;
}

void KernelWitness(const Eigen::MatrixXd& rows, const Eigen::MatrixXd& points,
                   const std::vector<double>& bandwidths, double divisor, Eigen::VectorXd* values,
                   Eigen::MatrixXd* gradients) {
  const Eigen::Index m = points.rows();
  // V(i, j) = k(x_i, w_j), A(i, j) = (1/K) sum_h k_h(x_i, w_j) / h^2, so
  // grad_w k(x_i, w_j) = A(i, j) (x_i - w_j). Distances by differences,
  // not |x|^2 + |w|^2 - 2 x.w (no cancellation).
  Eigen::MatrixXd v(rows.rows(), m);
  Eigen::MatrixXd a(rows.rows(), m);
  for (Eigen::Index i = 0; i < rows.rows(); ++i) {
    for (Eigen::Index j = 0; j < m; ++j) {
      const KernelTerms terms = TermsAt((rows.row(i) - points.row(j)).squaredNorm(), bandwidths);
      v(i, j) = terms.value;
      a(i, j) = terms.over_h2;
    }
  }
  *values = v.colwise().sum().transpose() / divisor;
  const Eigen::VectorXd a_sums = a.colwise().sum().transpose();
  *gradients = (a.transpose() * rows - a_sums.asDiagonal() * points) / divisor;
}

absl::StatusOr<KernelJointFactor> KernelJointFactor::Create(
    const Eigen::MatrixXd& points, const std::vector<double>& bandwidths) {
  if (points.rows() < 1 || points.cols() < 1 || bandwidths.empty()) {
    return absl::InvalidArgumentError(
        "KernelJointFactor needs at least one point, one dimension and one bandwidth");
  }
  KernelJointFactor factor;
  const int m = static_cast<int>(points.rows());
  const int d = static_cast<int>(points.cols());
  const int r = std::min(d, m - 1);
  factor.num_points_ = m;
  factor.dimension_ = d;
  factor.rank_ = r;

  // U: the first r columns of the Householder Q of the differences
  // w_j - w_1 (a superset of their span is fine, only V^T (w_j - w_l) = 0
  // matters). Only U is formed (d x r): the complement V enters through the
  // projector I - U U^T (see Whiten), never as a d x (d - r) matrix.
  if (r > 0) {
    Eigen::MatrixXd differences(d, m - 1);
    for (int j = 1; j < m; ++j) differences.col(j - 1) = (points.row(j) - points.row(0)).transpose();
    Eigen::HouseholderQR<Eigen::MatrixXd> qr(differences);
    factor.span_basis_ = qr.householderQ() * Eigen::MatrixXd::Identity(d, r);
  } else {
    factor.span_basis_.resize(d, 0);
  }
  // P_j = U^T (w_j - w_1): U^T (w_j - w_l) = P_j - P_l.
  Eigen::MatrixXd projected(r, m);
  for (int j = 0; j < m; ++j) {
    projected.col(j) =
        factor.span_basis_.transpose() * (points.row(j) - points.row(0)).transpose();
  }

  // The span block: [G(w_1..w_M); U^T grad G(w_1); ...; U^T grad G(w_M)].
  //   Cov(G(w_j), G(w_l))            = k(w_j, w_l)
  //   Cov(U^T grad G(w_j), G(w_l))   = -(1/K) sum_h k_h D / h^2
  //   Cov(U^T grad G(w_j), U^T grad G(w_l))
  //                                  = (1/K) sum_h k_h (I / h^2 - D D^T / h^4)
  // with D = P_j - P_l (docs/privacy.md 2.10, (K1)-(K3)).
  const int span_size = m * (1 + r);
  Eigen::MatrixXd span = Eigen::MatrixXd::Zero(span_size, span_size);
  Eigen::MatrixXd complement(m, m);
  for (int j = 0; j < m; ++j) {
    for (int l = 0; l < m; ++l) {
      const double d2 = (points.row(j) - points.row(l)).squaredNorm();
      const Eigen::VectorXd diff = projected.col(j) - projected.col(l);
      double value = 0.0;
      double over_h2 = 0.0;
      double over_h4 = 0.0;
      for (double h : bandwidths) {
        const double h2 = h * h;
        const double e = std::exp(-d2 / (2.0 * h2));
        value += e;
        over_h2 += e / h2;
        over_h4 += e / (h2 * h2);
      }
      const double kk = static_cast<double>(bandwidths.size());
      value /= kk;
      over_h2 /= kk;
      over_h4 /= kk;
      span(j, l) = value;
      complement(j, l) = over_h2;
      if (r == 0) continue;
      const Eigen::VectorXd cross = -over_h2 * diff;  // Cov(U^T grad G(w_j), G(w_l))
      span.block(m + j * r, l, r, 1) = cross;
      span.block(l, m + j * r, 1, r) = cross.transpose();
      Eigen::MatrixXd grad_grad = -over_h4 * diff * diff.transpose();
      grad_grad.diagonal().array() += over_h2;
      span.block(m + j * r, m + l * r, r, r) = grad_grad;
    }
  }

  // Jitter on every diagonal, relative to its scale (1 for values, the
  // gradient variance for gradients): the noise covariance becomes
  // Sigma + diag(lambda) >= Sigma, which only adds noise.
  const double gradient_variance = GradientVariance(bandwidths);
  for (double jitter = kJitter; jitter <= kMaxJitter; jitter *= 10.0) {
    Eigen::MatrixXd span_jittered = span;
    span_jittered.diagonal().head(m).array() += jitter;
    span_jittered.diagonal().tail(span_size - m).array() += jitter * gradient_variance;
    Eigen::MatrixXd complement_jittered = complement;
    complement_jittered.diagonal().array() += jitter * gradient_variance;
    factor.span_llt_.compute(span_jittered);
    factor.complement_llt_.compute(complement_jittered);
    if (factor.span_llt_.info() == Eigen::Success &&
        factor.complement_llt_.info() == Eigen::Success) {
      factor.jitter_ = jitter;
      return factor;
    }
  }
  return absl::InvalidArgumentError(
      "The query points' joint kernel covariance is not positive definite even with jitter "
      "1e-3: send finite, distinct generated points");
}

Eigen::VectorXd KernelJointFactor::Whiten(const Eigen::VectorXd& values,
                                          const Eigen::MatrixXd& gradients) const {
  const int m = num_points_;
  const int r = rank_;
  const Eigen::MatrixXd gradients_t = gradients.transpose();               // d x M
  const Eigen::MatrixXd in_span = span_basis_.transpose() * gradients_t;  // r x M
  Eigen::VectorXd span(m * (1 + r));
  span.head(m) = values;
  for (int j = 0; j < m; ++j) span.segment(m + j * r, r) = in_span.col(j);
  Eigen::VectorXd out(whitened_size());
  out.head(m * (1 + r)) = span_llt_.matrixL().solve(span);
  if (has_complement()) {
    // The complement part P_V g = g - U U^T g in all d coordinates, its
    // columns whitened over the points: W = (P_V G) L_C^{-T}, i.e.
    // W^T = L_C^{-1} (P_V G)^T. ||P_V x|| = ||V^T x||, so W has the norm of
    // the coordinates V^T G L_C^{-T} of docs/privacy.md 2.10 (same
    // sensitivity) without forming V.
    const Eigen::MatrixXd complement = gradients_t - span_basis_ * in_span;  // d x M
    const Eigen::MatrixXd whitened_t =
        complement_llt_.matrixL().solve(complement.transpose());  // M x d
    Eigen::Map<Eigen::MatrixXd>(out.data() + m * (1 + r), dimension_, m) =
        whitened_t.transpose();
  }
  return out;
}

void KernelJointFactor::Color(const Eigen::VectorXd& z, Eigen::VectorXd* values,
                              Eigen::MatrixXd* gradients) const {
  const int m = num_points_;
  const int r = rank_;
  const Eigen::VectorXd span = span_llt_.matrixL() * z.head(m * (1 + r));
  *values = span.head(m);
  Eigen::MatrixXd in_span(r, m);
  for (int j = 0; j < m; ++j) in_span.col(j) = span.segment(m + j * r, r);
  Eigen::MatrixXd gradients_t = span_basis_ * in_span;  // d x M
  if (has_complement()) {
    // P_V (Z L_C^T): for Z with i.i.d. N(0, 1) entries, V^T Z is i.i.d.
    // N(0, 1) in (d - r) x M, so this has the law of V B, B = u L_C^T, of
    // the factorisation; on a whitened statistic it returns P_V G exactly
    // (P_V is idempotent).
    const Eigen::Map<const Eigen::MatrixXd> u(z.data() + m * (1 + r), dimension_, m);
    const Eigen::MatrixXd colored = u * complement_llt_.matrixL().transpose();  // d x M
    gradients_t += colored - span_basis_ * (span_basis_.transpose() * colored);
  }
  *gradients = gradients_t.transpose();
}

Eigen::MatrixXd DenseJointCovariance(const Eigen::MatrixXd& points,
                                     const std::vector<double>& bandwidths) {
  const Eigen::Index m = points.rows();
  const Eigen::Index d = points.cols();
  const double kk = static_cast<double>(bandwidths.size());
  Eigen::MatrixXd cov = Eigen::MatrixXd::Zero(m * (1 + d), m * (1 + d));
  for (Eigen::Index j = 0; j < m; ++j) {
    for (Eigen::Index l = 0; l < m; ++l) {
      const Eigen::VectorXd diff = (points.row(j) - points.row(l)).transpose();
      for (double h : bandwidths) {
        const double h2 = h * h;
        const double e = std::exp(-diff.squaredNorm() / (2.0 * h2)) / kk;
        cov(j, l) += e;
        // d/dw_j of k(w_j, w_l): -e (w_j - w_l) / h^2.
        cov.block(m + j * d, l, d, 1) += -e * diff / h2;
        cov.block(l, m + j * d, 1, d) += (-e * diff / h2).transpose();
        Eigen::MatrixXd hess = -e * diff * diff.transpose() / (h2 * h2);
        hess.diagonal().array() += e / h2;
        cov.block(m + j * d, m + l * d, d, d) += hess;
      }
    }
  }
  return cov;
}

std::vector<double> KernelWitnessKind::DefaultBandwidths(const data::FeatureLayout& layout) {
  const double diameter = std::sqrt(static_cast<double>(std::max(1, layout.total_dim())));
  if (layout.image.has_value()) {
    // Images: sqrt(d) {3/28, 3/14, 3/7} (3, 6, 12 at 28 x 28). The paper's
    // fractions below put two bandwidths under 1 at Fashion-MNIST's image
    // distances (about 5-10), where the kernel carries almost no signal but
    // the released gradient most of its noise: bench/fmnist's DP-kernel row
    // at epsilon 1 reached 22% with them and 68-77% with these or the
    // neighbouring {3.5, 7, 14} and {4, 8, 16} (docs/benchmarks.md, bench/fmnist.cc).
    return {diameter * 3.0 / 28.0, diameter * 3.0 / 14.0, diameter * 3.0 / 7.0};
  }
  return {diameter / 64.0, diameter / 32.0, diameter / 16.0, diameter / 8.0, diameter / 4.0};
}

absl::StatusOr<KernelWitnessKind::Params> KernelWitnessKind::Resolve(Params params,
                                                                     const data::Schema& schema) {
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  if (layout.total_dim() < 1) {
    return absl::InvalidArgumentError(
        "kernel_witness needs at least one feature column in the dataset's schema");
  }
  if (params.bandwidths.empty()) params.bandwidths = DefaultBandwidths(layout);
  if (static_cast<int>(params.bandwidths.size()) > kMaxBandwidths) {
    return absl::InvalidArgumentError(absl::StrCat("kernel_witness takes at most ",
                                                   kMaxBandwidths, " bandwidths, got ",
                                                   params.bandwidths.size()));
  }
  const double root_dim = std::sqrt(static_cast<double>(layout.total_dim()));
  const double low = kMinBandwidthPerSqrtDim * root_dim;
  const double high = kMaxBandwidthPerSqrtDim * root_dim;
  for (double h : params.bandwidths) {
    if (!std::isfinite(h) || h < low || h > high) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kernel_witness bandwidths must lie in [", low, ", ", high,
          "] (1e-4 to 1e4 times sqrt of the ", layout.total_dim(),
          " encoded feature dimensions), got ", h));
    }
  }
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(params.batch_divisor, "kernel_witness batch_divisor"));
  if (params.batch_divisor < 1.0 || params.batch_divisor > kMaxBatchDivisor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel_witness batch_divisor (the declared expected batch size) must be in [1, 2^40], "
        "got ",
        params.batch_divisor));
  }
  return params;
}

int KernelWitnessKind::MaxQueryPoints(bool conditional, int num_classes) {
  if (!conditional) return kMaxGroupPoints;
  return static_cast<int>(
      std::min<int64_t>(kMaxQueryPoints, int64_t{kMaxGroupPoints} * std::max(1, num_classes)));
}

double KernelWitnessKind::Sensitivity(privacy::NeighbouringRelation relation,
                                      double batch_divisor) {
  // ADD_REMOVE: f_D' - f_D = +-(1/m) k(x, .), norm sqrt(k(x, x)) / m = 1/m.
  // REPLACE_ONE: (1/m)(k(x', .) - k(x, .)), norm^2 = (2 - 2 k(x, x')) / m^2
  // <= 2/m^2 since k >= 0 (docs/privacy.md 2.10).
  return relation == privacy::NeighbouringRelation::kReplaceOne
             ? std::sqrt(2.0) / batch_divisor
             : 1.0 / batch_divisor;
}

absl::StatusOr<privacy::GridNoise> KernelWitnessKind::NoiseFor(
    const Params& resolved, privacy::NeighbouringRelation relation, double noise_multiplier,
    int64_t whitened_size) {
  const double sensitivity = Sensitivity(relation, resolved.batch_divisor) * kWhiteningMargin;
  return privacy::GridGaussianNoise(noise_multiplier, sensitivity, whitened_size);
}

int64_t KernelWitnessKind::MaxWhitenedSize(int max_points, int total_dim) {
  // ValidateQuery's bound: M (1 + min(d, M_g - 1)) + M d, itself at most
  // kMaxGridGaussianDimension.
  const int64_t m = std::max(max_points, 1);
  const int64_t span_rank =
      std::min<int64_t>(total_dim, std::min<int64_t>(m, kMaxGroupPoints) - 1);
  return std::min<int64_t>(m * (1 + span_rank) + m * static_cast<int64_t>(total_dim),
                           privacy::kMaxGridGaussianDimension);
}

absl::Status KernelWitnessKind::CheckNoise(const Params& resolved,
                                           privacy::NeighbouringRelation relation,
                                           double noise_multiplier, int max_points,
                                           int total_dim) {
  return NoiseFor(resolved, relation, noise_multiplier, MaxWhitenedSize(max_points, total_dim))
      .status();
}

GaussianMechanismRecord KernelWitnessKind::Plan(const Params& /*resolved*/,
                                                double noise_multiplier) {
  return GaussianMechanismRecord{{noise_multiplier}};
}

absl::StatusOr<privacy::PrivacyEvent> KernelWitnessKind::StepEvent(
    privacy::NeighbouringRelation relation, double sampling_rate, double noise_multiplier) {
  return privacy::SampledGaussianEvent(privacy::SamplingSchemeFor(relation), sampling_rate,
                                       noise_multiplier, privacy::SampledNoise::kDiscrete);
}

absl::Status KernelWitnessKind::ValidateQuery(const Params& resolved, const Query& query,
                                              int total_dim, int num_classes) {
  const Eigen::Index m = query.points.rows();
  const int max_points = MaxQueryPoints(resolved.conditional, num_classes);
  if (m < 1 || m > max_points) {
    return absl::InvalidArgumentError(absl::StrCat(
        resolved.conditional ? "conditional" : "unconditional", " kernel_witness takes 1 to ",
        max_points, " query points per step (at most ", kMaxGroupPoints,
        " per Gaussian-process factor: ",
        resolved.conditional ? "one factor per label" : "one factor over all points",
        "), got ", m));
  }
  if (query.points.cols() != total_dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel_witness query points must have the dataset's ", total_dim,
                     " encoded feature dimensions, got ", query.points.cols()));
  }
  for (Eigen::Index j = 0; j < m; ++j) {
    for (Eigen::Index a = 0; a < total_dim; ++a) {
      const double v = query.points(j, a);
      if (!std::isfinite(v) || std::abs(v) > kMaxQueryCoordinate) {
        return absl::InvalidArgumentError(absl::StrCat(
            "kernel_witness query point ", j, " coordinate ", a,
            " must be finite with magnitude at most 1e6, got ", v));
      }
    }
  }
  // The whitened vector's size (sum of KernelJointFactor::whitened_size
  // over the groups): at most M (1 + min(d, M_g - 1)) + M d.
  const int64_t span_rank =
      std::min<int64_t>(total_dim, std::min<int64_t>(m, kMaxGroupPoints) - 1);
  if (m * (1 + span_rank) + m * static_cast<int64_t>(total_dim) >
      privacy::kMaxGridGaussianDimension) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel_witness releases M (1 + min(d, M - 1)) + M d numbers per step, at most ",
        privacy::kMaxGridGaussianDimension, ": send fewer query points"));
  }
  if (resolved.conditional) {
    if (query.labels.size() != m) {
      return absl::InvalidArgumentError(absl::StrCat(
          "conditional kernel_witness needs one label per query point: got ", query.labels.size(),
          " labels for ", m, " points"));
    }
    for (Eigen::Index j = 0; j < m; ++j) {
      if (query.labels(j) < 0 || query.labels(j) >= num_classes) {
        return absl::InvalidArgumentError(
            absl::StrCat("kernel_witness query label ", j, " must be in [0, ", num_classes,
                         "), got ", query.labels(j)));
      }
    }
    std::vector<int> per_label(static_cast<size_t>(num_classes), 0);
    for (Eigen::Index j = 0; j < m; ++j) {
      if (++per_label[static_cast<size_t>(query.labels(j))] > kMaxGroupPoints) {
        return absl::InvalidArgumentError(absl::StrCat(
            "conditional kernel_witness takes at most ", kMaxGroupPoints,
            " query points per label per step (one Gaussian-process factor per label), got more "
            "for label ", query.labels(j)));
      }
    }
  } else if (query.labels.size() != 0) {
    return absl::InvalidArgumentError(
        "unconditional kernel_witness takes no query labels: open the session with "
        "conditional set, or send points only");
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelWitnessKind::Result> KernelWitnessKind::Run(
    const Params& resolved, const EncodedRows& batch, const Query& query,
    privacy::NeighbouringRelation relation, double noise_multiplier,
    privacy::NoiseSource* noise) {
  const int total_dim = batch.layout.total_dim();
  DPC_RETURN_IF_ERROR(ValidateQuery(resolved, query, total_dim, batch.num_classes));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "noise multiplier"));
  // Under REPLACE_ONE the batch has the fixed public size batch_divisor by
  // construction (the server's one FixedBatchSize gives both, and PlanSession
  // checks they agree before admission). No check of the batch here: a
  // failure decided after the rows are read would be a privacy channel
  // (docs/privacy.md 6.4).

  // Groups of query points sharing one independent GP: all of them, or one
  // per label (the product kernel is 0 across labels, so the joint
  // covariance is block diagonal over labels).
  const int m = static_cast<int>(query.points.rows());
  std::vector<std::vector<int>> groups;
  if (resolved.conditional) {
    for (int c = 0; c < batch.num_classes; ++c) {
      std::vector<int> group = IndicesWithLabel(query.labels, m, c);
      if (!group.empty()) groups.push_back(std::move(group));
    }
  } else {
    groups.push_back(IndicesWithLabel(query.labels, m, -1));
  }
  // Every factor before any row is read: a failure here depends on the
  // public points only.
  std::vector<KernelJointFactor> factors;
  std::vector<Eigen::MatrixXd> group_points;
  int64_t whitened_size = 0;
  for (const std::vector<int>& group : groups) {
    group_points.push_back(RowsAt(query.points, group));
    DPC_ASSIGN_OR_RETURN(KernelJointFactor factor,
                         KernelJointFactor::Create(group_points.back(), resolved.bandwidths));
    whitened_size += factor.whitened_size();
    factors.push_back(std::move(factor));
  }

  // The noiseless witness per group, whitened: u = L^{-1} F. For neighbours
  // ||u_D - u_D'|| <= ||f_D - f_D'||_H <= Delta (docs/privacy.md 2.10), so
  // this is one Gaussian mechanism on u, and the release is L (u + noise),
  // post-processing by the public factor.
  Eigen::VectorXd whitened(whitened_size);
  int64_t offset = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    Eigen::MatrixXd rows;
    if (resolved.conditional) {
      const int label = query.labels(groups[g].front());
      rows = RowsAt(batch.features, IndicesWithLabel(batch.labels, batch.num_rows(), label));
    } else {
      rows = batch.features;
    }
    Eigen::VectorXd values;
    Eigen::MatrixXd gradients;
    KernelWitness(rows, group_points[g], resolved.bandwidths, resolved.batch_divisor, &values,
                  &gradients);
    whitened.segment(offset, factors[g].whitened_size()) = factors[g].Whiten(values, gradients);
    offset += factors[g].whitened_size();
  }
  DPC_ASSIGN_OR_RETURN(const privacy::GridNoise grid,
                       NoiseFor(resolved, relation, noise_multiplier, whitened.size()));
  DPC_RETURN_IF_ERROR(privacy::AddGridNoise(grid, whitened, noise));

  Result result;
  result.values.resize(m);
  result.gradients.resize(m, total_dim);
  offset = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    Eigen::VectorXd values;
    Eigen::MatrixXd gradients;
    factors[g].Color(whitened.segment(offset, factors[g].whitened_size()), &values, &gradients);
    offset += factors[g].whitened_size();
    for (size_t i = 0; i < groups[g].size(); ++i) {
      result.values(groups[g][i]) = values(static_cast<Eigen::Index>(i));
      result.gradients.row(groups[g][i]) = gradients.row(static_cast<Eigen::Index>(i));
    }
  }
  result.ran.noise_multipliers = {noise_multiplier};
  return result;
}

}  // namespace dpcurator::release
