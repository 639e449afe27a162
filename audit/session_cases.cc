#include "audit/session_cases.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/nn/mlp.h"
#include "core/privacy/calibration.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/events.h"
#include "core/privacy/sampled_gaussian.h"
#include "core/release/step_batch.h"
#include "core/release/dp_sgd.h"
#include "core/release/encoded_rows.h"
#include "core/release/kernel_witness.h"
#include "core/release/rff_embedding.h"
#include "core/util/status_macros.h"

namespace dpcurator::audit {
namespace {

using privacy::NeighbouringRelation;
using release::EncodedRows;

// One step of a kind, run as the server runs it on a sampled batch, its
// answer flattened to the vector the distinguisher projects.
using StepFn = std::function<absl::StatusOr<Eigen::VectorXd>(
    const EncodedRows& batch, int64_t public_n, privacy::NoiseSource* noise)>;

struct SessionCase {
  EncodedRows null_row;      // ADD_REMOVE: D0's rows (orthogonal to the canary)
  EncodedRows replaced_row;  // REPLACE_ONE: D0's rows, one replaced in D1
  EncodedRows canary;
  StepFn step;
  // The noise std per output coordinate, s times the output's sensitivity.
  double sigma = 0.0;
};

EncodedRows OneRow(const data::Schema& schema, double x, int label) {
  EncodedRows rows;
  rows.layout = data::FeatureLayout::ForFeatures(schema);
  rows.num_classes = schema.num_classes();
  rows.features = Eigen::MatrixXd::Constant(1, rows.layout.total_dim(), x);
  rows.labels = Eigen::VectorXi::Constant(1, label);
  return rows;
}

// Rows stacked in order (a dataset, or a batch of copies).
EncodedRows Stack(const std::vector<const EncodedRows*>& parts) {
  EncodedRows out;
  out.layout = parts.front()->layout;
  out.num_classes = parts.front()->num_classes;
  Eigen::Index n = 0;
  for (const EncodedRows* p : parts) n += p->features.rows();
  out.features.resize(n, parts.front()->features.cols());
  out.labels.resize(n);
  Eigen::Index at = 0;
  for (const EncodedRows* p : parts) {
    out.features.middleRows(at, p->features.rows()) = p->features;
    out.labels.segment(at, p->labels.size()) = p->labels;
    at += p->features.rows();
  }
  return out;
}

EncodedRows Copies(const EncodedRows& row, int64_t count) {
  std::vector<const EncodedRows*> parts(static_cast<size_t>(count), &row);
  if (parts.empty()) {
    EncodedRows out = row;
    out.features.resize(0, row.features.cols());
    out.labels.resize(0);
    return out;
  }
  return Stack(parts);
}

absl::StatusOr<data::Schema> OneNumericSchema(bool labelled) {
  data::Schema::Builder builder;
  builder.AddNumeric("x", 0.0, 1.0);
  if (labelled) {
    builder.AddCategorical("y", {"a", "b"});
    builder.SetLabel("y");
  }
  return builder.Build();
}

// rff_embedding session: x in [0, 1] with a label {a, b}. Null rows (and
// the replaced row) are (x = 0, a), the canary is (x = 1, b): its features
// and count land in class b's block, which no other row touches, so
// ||v|| = sqrt(||phi||^2 + 1) = sqrt(2) = Delta under ADD_REMOVE and, under
// REPLACE_ONE, v = [-phi(0); phi(1); -1; 1] / m with norm 2 / m = Delta
// (||phi|| = 1 for the cos/sin features).
absl::StatusOr<SessionCase> RffCase(NeighbouringRelation relation, double noise_multiplier,
                                    int64_t batch_size) {
  DPC_ASSIGN_OR_RETURN(const data::Schema schema, OneNumericSchema(/*labelled=*/true));
  using Kind = release::RffEmbeddingKind;
  Kind::Params params;
  params.num_frequencies = kRffCaseFrequencies;
  params.seed = kRffCaseSeed;  // public and fixed: the canary direction is known
  DPC_ASSIGN_OR_RETURN(const Kind::Params resolved, Kind::Resolve(params, schema));
  SessionCase out;
  out.null_row = OneRow(schema, 0.0, 0);
  out.replaced_row = OneRow(schema, 0.0, 0);
  out.canary = OneRow(schema, 1.0, 1);
  out.step = [resolved, relation, noise_multiplier](
                 const EncodedRows& batch, int64_t public_n,
                 privacy::NoiseSource* noise) -> absl::StatusOr<Eigen::VectorXd> {
    DPC_ASSIGN_OR_RETURN(Kind::Result result,
                         Kind::Run(resolved, batch, relation, noise_multiplier, public_n, noise));
    const Eigen::MatrixXd& values = result.embedding.class_values;
    const Eigen::VectorXd& totals = result.embedding.class_totals;
    Eigen::VectorXd flat(values.size() + totals.size());
    flat << Eigen::Map<const Eigen::VectorXd>(values.data(), values.size()), totals;
    return flat;
  };
  if (relation == NeighbouringRelation::kReplaceOne) {
    out.sigma = noise_multiplier * 2.0 / static_cast<double>(batch_size);
  } else {
    out.sigma = noise_multiplier * std::sqrt(2.0);
  }
  return out;
}

// dp_sgd session: x in [0, 1], no label (row width 1), the autoencoder loss
// (BCE of sigmoid(z) against x) on the network 1 -> relu(1) -> 1 with
// parameters W0 = 0, b0 = -1 (the hidden unit is dead: no gradient reaches
// the first layer), W1 = 0, b1 = 0. So z = 0 for every row and the per-
// example gradient is (sigmoid(0) - x) e_{b1} = (0.5 - x) e_{b1}: exactly 0
// for the null rows (x = 0.5), -0.5 e_{b1} for the canary (x = 1) and
// +0.5 e_{b1} for the replaced row (x = 0). With C = 0.5 the canary's
// clipped gradient has norm C (ADD_REMOVE) and the replacement moves the
// sum by 2C (REPLACE_ONE): the sensitivity bound, in a coordinate no null
// row uses.
constexpr double kDpSgdClipNorm = 0.5;
absl::StatusOr<SessionCase> DpSgdCase(NeighbouringRelation relation, double noise_multiplier,
                                      double divisor) {
  DPC_ASSIGN_OR_RETURN(const data::Schema schema, OneNumericSchema(/*labelled=*/false));
  using Kind = release::DpSgdKind;
  Kind::Params params;
  params.hidden = {1};
  params.activation = nn::Activation::kRelu;
  params.loss = release::DpSgdLoss::kReconstructionBce;
  params.clip_norm = kDpSgdClipNorm;
  params.expected_batch_size = divisor;
  DPC_ASSIGN_OR_RETURN(const Kind::Params resolved, Kind::Resolve(params, schema));
  const int width = release::DpSgdRowWidth(schema);
  DPC_ASSIGN_OR_RETURN(nn::Mlp network, nn::Mlp::Create(Kind::Network(resolved, width)));
  network.weight(0).setZero();
  network.bias(0).setConstant(-1.0);
  network.weight(1).setZero();
  network.bias(1).setZero();
  const Eigen::VectorXd parameters = network.parameters().cast<double>();
  SessionCase out;
  out.null_row = OneRow(schema, 0.5, 0);
  out.replaced_row = OneRow(schema, 0.0, 0);
  out.canary = OneRow(schema, 1.0, 0);
  out.step = [resolved, relation, noise_multiplier, parameters](
                 const EncodedRows& batch, int64_t /*public_n*/,
                 privacy::NoiseSource* noise) -> absl::StatusOr<Eigen::VectorXd> {
    DPC_ASSIGN_OR_RETURN(Kind::Result result,
                         Kind::Run(resolved, batch, relation, noise_multiplier, parameters, noise));
    return result.gradient;
  };
  out.sigma = noise_multiplier * Kind::Sensitivity(resolved, relation) / divisor;
  return out;
}

// kernel_witness session: x in [0, 1], no label, one bandwidth 0.05. The
// canary sits at the query point w = 1; null and replaced rows at x = 0,
// where k(0, w) = exp(-200) (zero in double precision). The answer is read
// in the whitened coordinates of its public joint factor (post-processing
// of the release: there the noise is i.i.d. N(0, (s Delta)^2)). ADD_REMOVE
// queries w = 1 alone: v = L^{-1} [1/m; 0], norm 1/m = Delta. REPLACE_ONE
// also queries w = 0, where the replaced row's kernel bump is: v =
// L^{-1} [1/m; -1/m; 0; 0], norm sqrt(2)/m = Delta (docs/privacy.md 2.10).
constexpr double kWitnessBandwidth = 0.05;
absl::StatusOr<SessionCase> KernelWitnessCase(NeighbouringRelation relation,
                                              double noise_multiplier, double divisor) {
  DPC_ASSIGN_OR_RETURN(const data::Schema schema, OneNumericSchema(/*labelled=*/false));
  using Kind = release::KernelWitnessKind;
  Kind::Params params;
  params.bandwidths = {kWitnessBandwidth};
  params.conditional = false;
  params.batch_divisor = divisor;
  DPC_ASSIGN_OR_RETURN(const Kind::Params resolved, Kind::Resolve(params, schema));
  Kind::Query query;
  if (relation == NeighbouringRelation::kReplaceOne) {
    query.points = Eigen::MatrixXd(2, 1);
    query.points << 1.0, 0.0;
  } else {
    query.points = Eigen::MatrixXd::Constant(1, 1, 1.0);
  }
  query.labels = Eigen::VectorXi();  // unconditional: points only
  DPC_ASSIGN_OR_RETURN(release::KernelJointFactor factor,
                       release::KernelJointFactor::Create(query.points, resolved.bandwidths));
  SessionCase out;
  out.null_row = OneRow(schema, 0.0, 0);
  out.replaced_row = OneRow(schema, 0.0, 0);
  out.canary = OneRow(schema, 1.0, 0);
  out.step = [resolved, relation, noise_multiplier, query, factor](
                 const EncodedRows& batch, int64_t /*public_n*/,
                 privacy::NoiseSource* noise) -> absl::StatusOr<Eigen::VectorXd> {
    DPC_ASSIGN_OR_RETURN(Kind::Result result,
                         Kind::Run(resolved, batch, query, relation, noise_multiplier, noise));
    return factor.Whiten(result.values, result.gradients);
  };
  out.sigma = noise_multiplier * Kind::Sensitivity(relation, divisor);
  return out;
}

// The canary direction from the noiseless statistic (ZeroNoiseSource: the
// grid layer returns the exact sum). ADD_REMOVE: v = f(B + canary) - f(B)
// for a batch B of null rows, and the null rows must be orthogonal to v
// (checked on batches of 1 and 3, so c0 does not depend on the private
// batch size). REPLACE_ONE: v = f(m - 1 copies + canary) - f(m copies).
absl::StatusOr<CanaryDirection> CanaryDirectionOf(const SessionCase& c,
                                                  NeighbouringRelation relation,
                                                  int64_t batch_size) {
  privacy::ZeroNoiseSource zero;
  CanaryDirection canary;
  canary.sigma = c.sigma;
  if (relation == NeighbouringRelation::kReplaceOne) {
    const EncodedRows d0 = Copies(c.replaced_row, batch_size);
    const EncodedRows rest = Copies(c.replaced_row, batch_size - 1);
    const EncodedRows d1 = Stack({&rest, &c.canary});
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd f0, c.step(d0, batch_size, &zero));
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd f1, c.step(d1, batch_size, &zero));
    canary.v = f1 - f0;
    canary.offset = f0.dot(canary.v);
  } else {
    const EncodedRows one = c.null_row;
    const EncodedRows three = Copies(c.null_row, 3);
    const EncodedRows with = Stack({&one, &c.canary});
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd f1, c.step(one, 0, &zero));
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd f3, c.step(three, 0, &zero));
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd fc, c.step(with, 0, &zero));
    canary.v = fc - f1;
    canary.offset = f1.dot(canary.v);
    if (std::abs(f3.dot(canary.v) - canary.offset) > 1e-9 * canary.v.squaredNorm()) {
      return absl::InternalError(
          "audit case: the null rows are not orthogonal to the canary's direction");
    }
  }
  if (!(canary.v.norm() > 0.0)) {
    return absl::InternalError("audit case: the canary does not move the step's output");
  }
  return canary;
}

}  // namespace

std::string_view SessionStepKindName(SessionStepKind kind) {
  switch (kind) {
    case SessionStepKind::kRffEmbedding:
      return "rff_embedding_session";
    case SessionStepKind::kDpSgd:
      return "dp_sgd_session";
    case SessionStepKind::kKernelWitness:
      return "kernel_witness_session";
  }
  return "unknown";
}

absl::StatusOr<data::Schema> RffCaseSchema() { return OneNumericSchema(/*labelled=*/true); }

absl::StatusOr<CanaryDirection> RffCanaryDirection(privacy::NeighbouringRelation relation,
                                                   double noise_multiplier, int64_t batch_size) {
  DPC_ASSIGN_OR_RETURN(const SessionCase c, RffCase(relation, noise_multiplier, batch_size));
  return CanaryDirectionOf(c, relation, batch_size);
}

double ProjectionScore(const Eigen::Ref<const Eigen::VectorXd>& output,
                       const CanaryDirection& canary) {
  return (output.dot(canary.v) - canary.offset) / (canary.v.norm() * canary.sigma);
}

double MixtureLogLikelihoodRatio(absl::Span<const double> z, double q, double mu) {
  double total = 0.0;
  for (const double zt : z) {
    // log(1 - q + q e^a) with a = mu z - mu^2/2, without overflow:
    // log(q) + a + log1p((1 - q) e^{-a} / q) for a > 0.
    const double a = mu * zt - 0.5 * mu * mu;
    if (q >= 1.0) {
      total += a;
    } else if (a > 0.0) {
      total += std::log(q) + a + std::log1p((1.0 - q) / q * std::exp(-a));
    } else {
      total += std::log1p(q * std::expm1(a));
    }
  }
  return total;
}

double CltGaussianDpMu(double sampling_rate, int64_t steps, double noise_multiplier) {
  return sampling_rate *
         std::sqrt(static_cast<double>(steps) * std::expm1(1.0 / (noise_multiplier * noise_multiplier)));
}

absl::StatusOr<PreparedSessionAudit> PrepareSessionAudit(const SessionAuditConfig& config) {
  if (config.steps < 1 || config.rows < 2 ||
      !(config.sampling_rate > 0.0 && config.sampling_rate <= 1.0)) {
    return absl::InvalidArgumentError(
        "session audit needs steps >= 1, rows >= 2 and sampling rate in (0, 1]");
  }
  const NeighbouringRelation relation = config.relation;
  const int64_t n = config.rows;
  // The rate the batches are drawn at, resolved as PlanSession does: under
  // REPLACE_ONE the fixed batch m = FixedBatchSize(q, n) and the rate m / n.
  double q = config.sampling_rate;
  int64_t batch_size = 0;
  if (relation == NeighbouringRelation::kReplaceOne) {
    batch_size = release::FixedBatchSize(q, n);
    if (batch_size < 1) {
      return absl::InvalidArgumentError("sampling rate times rows is below one row");
    }
    q = static_cast<double>(batch_size) / static_cast<double>(n);
  }
  const double charged_q =
      config.mutant == SessionMutant::kSamplingRateChargedAtHalf ? q / 2.0 : q;
  double s = config.noise_multiplier;
  if (!(s > 0.0)) {
    DPC_ASSIGN_OR_RETURN(s, privacy::CalibrateSampledDiscreteGaussianNoiseMultiplier(
                                privacy::SamplingSchemeFor(relation), charged_q, config.steps,
                                config.epsilon, config.delta));
  }
  // The public divisor of dp_sgd and kernel_witness: the declared expected
  // batch size q n (ADD_REMOVE), the fixed batch size (REPLACE_ONE).
  const double divisor = relation == NeighbouringRelation::kReplaceOne
                             ? static_cast<double>(batch_size)
                             : std::max(1.0, q * static_cast<double>(n));
  auto c = std::make_shared<SessionCase>();
  switch (config.kind) {
    case SessionStepKind::kRffEmbedding: {
      DPC_ASSIGN_OR_RETURN(*c, RffCase(relation, s, batch_size));
      break;
    }
    case SessionStepKind::kDpSgd: {
      DPC_ASSIGN_OR_RETURN(*c, DpSgdCase(relation, s, divisor));
      break;
    }
    case SessionStepKind::kKernelWitness: {
      DPC_ASSIGN_OR_RETURN(*c, KernelWitnessCase(relation, s, divisor));
      break;
    }
  }
  DPC_ASSIGN_OR_RETURN(const CanaryDirection canary, CanaryDirectionOf(*c, relation, batch_size));
  const double mu_step = canary.v.norm() / canary.sigma;

  // D0 and D1 (the canary last under ADD_REMOVE; first, replacing one copy
  // of r0, under REPLACE_ONE).
  auto data = std::make_shared<std::pair<EncodedRows, EncodedRows>>();
  if (relation == NeighbouringRelation::kReplaceOne) {
    data->first = Copies(c->replaced_row, n);
    const EncodedRows rest = Copies(c->replaced_row, n - 1);
    data->second = Stack({&c->canary, &rest});
  } else {
    data->first = Copies(c->null_row, n);
    data->second = Stack({&data->first, &c->canary});
  }

  PreparedSessionAudit prepared;
  prepared.accounted_epsilon = config.epsilon;
  prepared.delta = config.delta;
  prepared.accounted_mu = CltGaussianDpMu(charged_q, config.steps, s);
  prepared.sampling_rate = q;
  prepared.charged_sampling_rate = charged_q;
  prepared.noise_multiplier = s;
  prepared.canary_attainment = mu_step * s;
  const int64_t steps = config.steps;
  prepared.run_and_score = [c, data, canary, mu_step, q, relation, batch_size, steps](
                               int side,
                               privacy::NoiseSource* noise) -> absl::StatusOr<double> {
    const EncodedRows& rows = side == 0 ? data->first : data->second;
    std::vector<double> z(static_cast<size_t>(steps));
    for (int64_t t = 0; t < steps; ++t) {
      const std::vector<int64_t> chosen = release::SampleStepIndices(relation, q, rows.num_rows(), noise);
      const EncodedRows batch = release::SelectRows(rows, chosen);
      DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd out, c->step(batch, batch_size, noise));
      z[static_cast<size_t>(t)] = ProjectionScore(out, canary);
    }
    return MixtureLogLikelihoodRatio(z, q, mu_step);
  };
  return prepared;
}

absl::StatusOr<SessionAuditResult> RunSessionAudit(const SessionAuditConfig& config) {
  const auto start = std::chrono::steady_clock::now();
  if (config.sessions < 8) {
    return absl::InvalidArgumentError("session audit needs at least 8 sessions per dataset");
  }
  DPC_ASSIGN_OR_RETURN(const PreparedSessionAudit prepared, PrepareSessionAudit(config));
  privacy::SeededNoiseSource noise(config.seed);
  std::vector<double> scores[2];
  for (int side = 0; side < 2; ++side) {
    scores[side].reserve(static_cast<size_t>(config.sessions));
    for (int64_t session = 0; session < config.sessions; ++session) {
      DPC_ASSIGN_OR_RETURN(const double score, prepared.run_and_score(side, &noise));
      scores[side].push_back(score);
    }
  }
  SessionAuditResult result;
  result.kind = std::string(SessionStepKindName(config.kind));
  result.relation = privacy::RelationName(config.relation);
  result.accounted_epsilon = prepared.accounted_epsilon;
  result.delta = prepared.delta;
  result.sampling_rate = prepared.sampling_rate;
  result.charged_sampling_rate = prepared.charged_sampling_rate;
  result.noise_multiplier = prepared.noise_multiplier;
  result.steps = config.steps;
  result.sessions = config.sessions;
  result.canary_attainment = prepared.canary_attainment;
  DPC_ASSIGN_OR_RETURN(result.bound, EmpiricalEpsilonLowerBound(scores[0], scores[1],
                                                                config.delta, config.alpha));
  DPC_ASSIGN_OR_RETURN(result.mu_emp, FittedGaussianDpMu(scores[0], scores[1]));
  result.mu_clt = prepared.accounted_mu;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::vector<SessionAuditConfig> SessionAuditCases(bool quick) {
  std::vector<SessionAuditConfig> cases;
  uint64_t seed = 23001;
  for (const SessionStepKind kind :
       {SessionStepKind::kRffEmbedding, SessionStepKind::kDpSgd, SessionStepKind::kKernelWitness}) {
    for (const NeighbouringRelation relation :
         {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
      SessionAuditConfig config;
      config.kind = kind;
      config.relation = relation;
      config.epsilon = 4.0;
      config.delta = 1e-5;
      config.steps = 10;
      config.rows = 20;
      config.sampling_rate = 0.5;
      config.sessions = quick ? 2000 : 20000;
      config.seed = seed++;
      cases.push_back(config);
    }
  }
  return cases;
}

std::vector<AuditCase> SessionCases() {
  std::vector<AuditCase> cases;
  for (const SessionAuditConfig& base : SessionAuditCases(/*quick=*/true)) {
    AuditCase audit_case;
    audit_case.kind = std::string(SessionStepKindName(base.kind));
    audit_case.relation = privacy::RelationName(base.relation);
    audit_case.tightness = Tightness::kNone;
    audit_case.quick_runs = 2000;
    audit_case.full_runs = 20000;
    audit_case.prepare = [base](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
      SessionAuditConfig config = base;
      config.epsilon = target.epsilon;
      config.delta = target.delta;
      DPC_ASSIGN_OR_RETURN(PreparedSessionAudit prepared, PrepareSessionAudit(config));
      PreparedCase out;
      out.accounted_epsilon = prepared.accounted_epsilon;
      out.delta = prepared.delta;
      out.accounted_mu = prepared.accounted_mu;
      out.run_and_score = std::move(prepared.run_and_score);
      return out;
    };
    cases.push_back(std::move(audit_case));
  }
  return cases;
}

}  // namespace dpcurator::audit
