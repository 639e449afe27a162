#ifndef DPCURATOR_CORE_LDP_MECHANISM_H_
#define DPCURATOR_CORE_LDP_MECHANISM_H_

// Local differential privacy at the device (ldp-sinkhorn.md Sec. 1.1, 2;
// PRIVACY.md "Local DP"): each record is projected onto a public ball of
// radius R and perturbed with i.i.d. noise per coordinate,
//   Y = M(X) = Proj_R(X) + N                      (Reshetova et al., Sec. 2.1)
// and the trainer later deconvolves the noise with the entropic OT loss
// W_{p, p sigma^p} (Thm. 1, eq. 10). Training is post-processing (Remark 1):
// the guarantee is paid once per record-holder, here.
//
// Sensitivity. Local DP compares any two inputs x, x' of the ball, so the
// sensitivity is the diameter 2R, not the radius R the paper uses
// (ldp-sinkhorn.md Sec. 5 pitfall 1; calibrating to R gives only 2 eps).

#include <optional>
#include <string>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/noise_source.h"

namespace dpcurator::ldp {

enum class LdpKind {
  // Pure eps-LDP: projection onto the l1 ball, Laplace(0, b) per coordinate
  // with b = Delta_1 / eps = 2R / eps (Sec. 1.1 "Laplace mechanism"). The
  // trainer uses the l1 cost ||x - y||_1 (p = 1) and lambda = b (Cor. 1 read
  // as W_{1, Delta/eps}; pitfall 2).
  kLaplaceL1,
  // (eps, delta)-LDP: projection onto the l2 ball, discrete Gaussian noise of
  // scale sigma per coordinate with sigma = RdpGaussianSigma(eps, delta, 2R)
  // (the RDP route, which is what is proven for discrete noise; the paper
  // uses eq. (5)). The trainer uses the squared l2 cost (p = 2) and
  // lambda = 2 sigma^2 (Cor. 2).
  kGaussianL2,
};

// Stable names: "laplace-l1", "gaussian-l2".
std::string LdpKindName(LdpKind kind);
absl::StatusOr<LdpKind> ParseLdpKind(absl::string_view name);

// Euclidean projection onto the l2 ball of radius `radius` > 0:
// v * min(1, R / ||v||_2) (ldp-sinkhorn.md Sec. 1.1 "Projections").
Eigen::VectorXd ProjectL2Ball(const Eigen::VectorXd& v, double radius);

// Exact Euclidean projection onto the l1 ball of radius `radius` > 0,
// argmin_{||w||_1 <= R} ||w - v||_2, by the sort-based algorithm of Duchi,
// Shalev-Shwartz, Singer & Chandra 2008 ("Efficient projections onto the
// l1-ball for learning in high dimensions", Fig. 1 and Sec. 4), O(d log d):
// the identity when ||v||_1 <= R, otherwise
//   w_i = sign(v_i) max(|v_i| - theta, 0),
// with theta the soft threshold that makes ||w||_1 = R.
Eigen::VectorXd ProjectL1Ball(const Eigen::VectorXd& v, double radius);

// The probability, at most, that ReportCoordinateBound refuses an honest
// report (one report, all its coordinates together).
inline constexpr double kHonestReportRejection = 1e-9;

// A local randomiser with public parameters. Everything the trainer needs
// (cost exponent p and regulariser lambda) is a deterministic function of
// them (pitfall 13), so an artefact ships kind, d, R, eps and delta.
class LdpMechanism {
 public:
  class Builder {
   public:
    Builder& SetKind(LdpKind kind);
    // Dimension d of a (projected) record, >= 1.
    Builder& SetDimension(int dimension);
    // Public radius R > 0 of the l1 (Laplace) or l2 (Gaussian) ball.
    Builder& SetRadius(double radius);
    // eps > 0.
    Builder& SetEpsilon(double epsilon);
    // delta in (0, 1); required for kGaussianL2, must be unset (or 0) for
    // kLaplaceL1, which is pure eps-LDP.
    Builder& SetDelta(double delta);

    // Validates the parameters and derives the noise scale:
    //   Laplace:  b = 2R / eps                       (Sec. 1.1, Delta_1 = 2R)
    //   Gaussian: sigma = RdpGaussianSigma(eps, delta, 2R)
    // and the grid noise actually drawn (docs/privacy.md 4.2): reports are
    // snapped to g = 2^(floor(log2 scale) - 20), which moves each of the d
    // coordinates by at most g/2, so the noise is inflated to
    //   Laplace:  b' = (2R + d g) / eps                        (L1)
    //   Gaussian: sigma' = RdpGaussianSigma(eps, delta, 2R + sqrt(d) g)
    // and rounded up to whole grid units.
    absl::StatusOr<LdpMechanism> Build() const;

   private:
    std::optional<LdpKind> kind_;
    int dimension_ = 0;
    double radius_ = 0.0;
    double epsilon_ = 0.0;
    double delta_ = 0.0;
  };

  LdpKind kind() const { return kind_; }
  int dimension() const { return dimension_; }
  double radius() const { return radius_; }
  double epsilon() const { return epsilon_; }
  // 0 for kLaplaceL1.
  double delta() const { return delta_; }
  // The diameter of the ball, 2R (l1 for Laplace, l2 for Gaussian).
  double sensitivity() const { return 2.0 * radius_; }
  // The per-coordinate noise parameter: Laplace scale b, or Gaussian sigma,
  // as the mechanism's formula gives it (before the grid's inflation; the
  // trainer's regulariser uses this value, a relative 1e-4 or less from the
  // applied one).
  double noise_scale() const { return noise_scale_; }
  // Reports are exact multiples of this power of two.
  double noise_grid() const { return grid_noise_.grid; }
  // The scale of the discrete noise actually drawn (>= noise_scale()).
  double applied_noise_scale() const { return grid_noise_.scale(); }
  // Per-coordinate standard deviation: sqrt(2) b (Var Laplace = 2 b^2), or
  // sigma.
  double noise_stddev() const;
  // The largest |value| an honest report coordinate takes except with
  // probability at most kHonestReportRejection for the whole report (union
  // bound over the d coordinates; docs/privacy.md 2.6 "Report bounds and
  // quotas"). A report is x + z with |x_i| <= ||x|| <= R, x snapped to the
  // grid (moves x_i by <= g/2), and z i.i.d. grid noise of applied scale s:
  //   Laplace:  P(|z_i| > g + t) <= exp(-t / s)     (discrete Laplace tail)
  //             t = s ln(d / p)
  //   Gaussian: P(|z_i| > t) <= 2 exp(-t^2 / (2 s^2))  (the discrete
  //             Gaussian is s^2-subgaussian, CKS20 Prop. 25)
  //             t = s sqrt(2 ln(2 d / p))
  // and the bound is R + 2 g + t (g/2 for the snap, g for the discrete
  // Laplace tail, the same slack for both kinds). A function of the public
  // parameters only.
  double ReportCoordinateBound() const;
  // Exponent p of the transport cost ||x - y||_p^p: 1 (Laplace), 2 (Gaussian).
  int cost_exponent() const { return kind_ == LdpKind::kLaplaceL1 ? 1 : 2; }
  // The entropic regulariser that turns the Gibbs kernel exp(-C / lambda)
  // into the noise likelihood f_N (Thm. 1, eq. 10): lambda = p sigma^p with
  // f_N(x) ∝ exp(-||x||_p^p / (p sigma^p)), i.e. lambda = b (Laplace, where
  // the density's sigma is b) and lambda = 2 sigma^2 (Gaussian).
  double regularizer() const;

  // The projection of this mechanism (l1 or l2 ball of radius R).
  Eigen::VectorXd Project(const Eigen::VectorXd& record) const;

  // The device side: Project, snap to the grid, then add i.i.d. grid noise
  // per coordinate drawn from `noise` in coordinate order (discrete Laplace
  // or discrete Gaussian at applied_noise_scale()). Fails on a record of the
  // wrong dimension or with a non-finite entry.
  absl::StatusOr<Eigen::VectorXd> Privatize(const Eigen::VectorXd& record,
                                            privacy::NoiseSource* noise) const;

  // Privatize for every row of `records` (n x d), row by row.
  absl::StatusOr<Eigen::MatrixXd> PrivatizeRows(const Eigen::MatrixXd& records,
                                                privacy::NoiseSource* noise) const;

 private:
  LdpMechanism(LdpKind kind, int dimension, double radius, double epsilon,
               double delta, double noise_scale, const privacy::GridNoise& grid_noise)
      : kind_(kind),
        dimension_(dimension),
        radius_(radius),
        epsilon_(epsilon),
        delta_(delta),
        noise_scale_(noise_scale),
        grid_noise_(grid_noise) {}

  LdpKind kind_;
  int dimension_;
  double radius_;
  double epsilon_;
  double delta_;
  double noise_scale_;
  privacy::GridNoise grid_noise_;
};

}  // namespace dpcurator::ldp

#endif  // DPCURATOR_CORE_LDP_MECHANISM_H_
