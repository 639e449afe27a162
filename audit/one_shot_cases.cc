#include "audit/one_shot_cases.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/embed/feature_map.h"
#include "core/embed/rff.h"
#include "core/ldp/mechanism.h"
#include "core/privacy/accounting.h"
#include "core/privacy/calibration.h"
#include "core/privacy/events.h"
#include "core/privacy/exponential_mechanism.h"
#include "core/release/charfn_embedding.h"
#include "core/release/encoded_rows.h"
#include "core/release/labelled_release.h"
#include "core/release/marginals.h"
#include "core/release/mechanism_record.h"
#include "core/release/rff_embedding.h"
#include "core/util/status_macros.h"

namespace dpcurator::audit {
namespace {

using privacy::NeighbouringRelation;

// Tiny data so one run takes microseconds: a few rows, four frequencies.
inline constexpr int kAuditFrequencies = 4;
inline constexpr uint64_t kAuditFeatureSeed = 0x5eed5eed5eedULL;
// The exponential mechanism's game: the canary's candidate against this
// many others (docs/privacy.md 7.1: the selection odds approach e^eps as
// it grows, at the price of rarer selections).
inline constexpr int kOtherCandidates = 20;
// Runs per side of a Gaussian case in CI: mu_emp's standard error is about
// sqrt(2 / N) = 0.007, 2.6% of the smallest mu audited (0.27 at (1, 1e-5)),
// so the 0.9 mu tightness bar sits about 4 standard errors below mu.
inline constexpr int64_t kGaussianQuickRuns = 40000;
// MST's quality sensitivity (core/train/mst.h MstQualitySensitivity): a row
// moves one cell by 1 (ADD_REMOVE) or one down and one up (REPLACE_ONE).
double MstSensitivity(NeighbouringRelation relation) {
  return relation == NeighbouringRelation::kAddRemove ? 1.0 : 2.0;
}

// A released vector of one side: the mechanism's whole output, flattened.
using VectorRelease =
    std::function<absl::StatusOr<Eigen::VectorXd>(int side, privacy::NoiseSource* noise)>;

// The white-box distinguisher of a Gaussian release (audit.md "Gaussian
// DP"): the projection of the output on the direction in which D1's exact
// statistic differs from D0's, <o - v0, v1 - v0> / ||v1 - v0||. It is
// N(0, sigma^2) on D0 and N(||v1 - v0||, sigma^2) on D1, the likelihood
// ratio's own statistic, so mu_emp estimates ||v1 - v0|| / sigma. The exact
// statistics come from the same release with ZeroNoiseSource (which leaves
// the statistic unsnapped and unnoised), i.e. from the algorithm and the
// two datasets, never from a noisy run.
absl::StatusOr<PreparedCase> ProjectionGame(VectorRelease release, PreparedCase prepared) {
  privacy::ZeroNoiseSource zero;
  DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd v0, release(0, &zero));
  DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd v1, release(1, &zero));
  if (v0.size() != v1.size()) return absl::InternalError("audit pair released different shapes");
  Eigen::VectorXd direction = v1 - v0;
  const double gap = direction.norm();
  if (!(gap > 0.0)) return absl::InternalError("audit pair has identical exact statistics");
  direction /= gap;
  prepared.run_and_score = [release = std::move(release), v0,
                            direction](int side, privacy::NoiseSource* noise)
      -> absl::StatusOr<double> {
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd out, release(side, noise));
    return direction.dot(out - v0);
  };
  return prepared;
}

// What the ledger charges for a one-shot record on a fresh dataset, at delta:
// the kind's OneShotEvent through the accountant (server/releases.cc
// PlanRelease -> ledger admission), and the GDP mu of the Gaussians planned.
absl::Status ChargeOneShot(const release::GaussianMechanismRecord& planned,
                           NeighbouringRelation relation, double delta, PreparedCase* prepared) {
  DPC_ASSIGN_OR_RETURN(const privacy::PrivacyEvent event, release::OneShotEvent(planned));
  privacy::AccountantState state(relation);
  DPC_RETURN_IF_ERROR(state.Add(event));
  DPC_ASSIGN_OR_RETURN(const privacy::EpsilonReport report, state.Epsilon(delta));
  prepared->accounted_epsilon = report.epsilon;
  prepared->delta = delta;
  double inverse_variance = 0.0;
  for (const double s : planned.noise_multipliers) inverse_variance += 1.0 / (s * s);
  prepared->accounted_mu = std::sqrt(inverse_variance);
  return absl::OkStatus();
}

Eigen::VectorXd Flatten(const embed::NoisyLabelledEmbedding& embedding) {
  Eigen::VectorXd out(embedding.class_values.size() + embedding.class_totals.size());
  out << Eigen::Map<const Eigen::VectorXd>(embedding.class_values.data(),
                                           embedding.class_values.size()),
      embedding.class_totals;
  return out;
}

// The worst-case pair of an embedding kind (docs/privacy.md 7.1): D0 holds
// `base` rows of class 0; under ADD_REMOVE, D1 adds a canary of class 1;
// under REPLACE_ONE, D1 replaces D0's first row by that canary. Every
// feature vector has norm 1, so the canary moves [sums ; counts] by
// sqrt(1 + 1) (ADD_REMOVE), and the released means and proportions by
// sqrt(4) / n (REPLACE_ONE: its old row leaves class 0, it enters class 1):
// both the sensitivity bound exactly.
struct EmbeddingPair {
  data::Schema schema;
  release::EncodedRows d0;
  release::EncodedRows d1;
};

absl::StatusOr<EmbeddingPair> NumericPair(NeighbouringRelation relation) {
  data::Schema::Builder builder;
  builder.AddNumeric("x0", 0.0, 1.0).AddNumeric("x1", 0.0, 1.0).AddCategorical("y", {"a", "b"});
  builder.SetLabel("y");
  DPC_ASSIGN_OR_RETURN(data::Schema schema, builder.Build());
  const Eigen::MatrixXd base = (Eigen::MatrixXd(3, 3) << 0.2, 0.3, 0, 0.4, 0.5, 0, 0.6, 0.1, 0)
                                   .finished();
  const Eigen::RowVector3d canary(0.9, 0.8, 1);
  data::Table t0;
  t0.cells = base;
  data::Table t1;
  if (relation == NeighbouringRelation::kAddRemove) {
    t1.cells.resize(base.rows() + 1, 3);
    t1.cells << base, canary;
  } else {
    t1.cells = base;
    t1.cells.row(0) = canary;
  }
  EmbeddingPair pair{schema, release::EncodeRows(schema, t0), release::EncodeRows(schema, t1)};
  return pair;
}

absl::StatusOr<EmbeddingPair> ImagePair(NeighbouringRelation relation) {
  data::Schema::Builder builder;
  builder.AddImage("img", 2, 2).AddCategorical("y", {"a", "b"});
  builder.SetLabel("y");
  DPC_ASSIGN_OR_RETURN(data::Schema schema, builder.Build());
  auto table = [](const std::vector<std::vector<uint8_t>>& images, const std::vector<int>& labels) {
    data::Table t;
    t.cells = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(images.size()), 2);
    for (size_t r = 0; r < images.size(); ++r) {
      t.cells(static_cast<Eigen::Index>(r), 1) = labels[r];
      t.pixels.insert(t.pixels.end(), images[r].begin(), images[r].end());
    }
    return t;
  };
  const std::vector<std::vector<uint8_t>> base = {{10, 200, 30, 40}, {90, 80, 70, 60}, {0, 0, 255, 128}};
  const std::vector<uint8_t> canary = {255, 255, 0, 0};
  std::vector<std::vector<uint8_t>> other = base;
  std::vector<int> labels0 = {0, 0, 0};
  std::vector<int> labels1 = labels0;
  if (relation == NeighbouringRelation::kAddRemove) {
    other.push_back(canary);
    labels1.push_back(1);
  } else {
    other[0] = canary;
    labels1[0] = 1;
  }
  EmbeddingPair pair{schema, release::EncodeRows(schema, table(base, labels0)),
                     release::EncodeRows(schema, table(other, labels1))};
  return pair;
}

// The clamp-removed mutant's map: the real map's features times `norm`.
class ScaledFeatureMap final : public embed::FeatureMap {
 public:
  ScaledFeatureMap(std::shared_ptr<const embed::FeatureMap> inner, double norm)
      : inner_(std::move(inner)), norm_(norm) {}
  int input_dim() const override { return inner_->input_dim(); }
  int output_dim() const override { return inner_->output_dim(); }
  void Features(const Eigen::MatrixXd& encoded, Eigen::MatrixXd* features) const override {
    inner_->Features(encoded, features);
    *features *= norm_;
  }
  void Backward(const Eigen::MatrixXd&, const Eigen::MatrixXd&, Eigen::MatrixXd*) const override {}
  void BackwardFromFeatures(const Eigen::MatrixXd&, const Eigen::MatrixXd&,
                            Eigen::MatrixXd*) const override {}

 private:
  std::shared_ptr<const embed::FeatureMap> inner_;
  double norm_;
};

NeighbouringRelation RunRelation(NeighbouringRelation relation, const Mutation& mutation) {
  return mutation.run_as_add_remove ? NeighbouringRelation::kAddRemove : relation;
}

}  // namespace

AuditCase RffEmbeddingCase(NeighbouringRelation relation, bool image, const Mutation& mutation) {
  AuditCase c;
  c.kind = image ? "rff_embedding(image)" : "rff_embedding";
  c.relation = privacy::RelationName(relation);
  c.tightness = Tightness::kGaussianMu;
  c.quick_runs = kGaussianQuickRuns;
  c.full_runs = 200000;
  c.prepare = [relation, image, mutation](const AuditTarget& target)
      -> absl::StatusOr<PreparedCase> {
    DPC_ASSIGN_OR_RETURN(EmbeddingPair pair, image ? ImagePair(relation) : NumericPair(relation));
    using Kind = release::RffEmbeddingKind;
    Kind::Params params;
    params.num_frequencies = kAuditFrequencies;
    params.seed = kAuditFeatureSeed;
    DPC_ASSIGN_OR_RETURN(const Kind::Params resolved, Kind::Resolve(params, pair.schema));
    const int gaussians = static_cast<int>(Kind::Plan(resolved, 1.0).noise_multipliers.size());
    DPC_ASSIGN_OR_RETURN(const double s, privacy::CalibrateGridGaussianNoiseMultiplier(
                                             gaussians, target.epsilon, target.delta));
    const NeighbouringRelation charged = RunRelation(relation, mutation);
    PreparedCase prepared;
    DPC_RETURN_IF_ERROR(ChargeOneShot(Kind::Plan(resolved, s), charged, target.delta, &prepared));
    const double run_s = s * mutation.noise_multiplier_factor;
    std::shared_ptr<const embed::FeatureMap> scaled;
    if (mutation.feature_norm != 1.0) {
      embed::RffOptions options;
      options.num_frequencies = resolved.num_frequencies;
      options.length_scale = resolved.length_scale;
      options.numeric_weight = resolved.numeric_weight.value_or(-1.0);
      options.seed = resolved.seed;
      DPC_ASSIGN_OR_RETURN(embed::RandomFourierFeatureMap map,
                           embed::RandomFourierFeatureMap::Create(pair.d0.layout, options));
      scaled = std::make_shared<ScaledFeatureMap>(
          std::make_shared<embed::RandomFourierFeatureMap>(std::move(map)), mutation.feature_norm);
    }
    auto shared_pair = std::make_shared<const EmbeddingPair>(std::move(pair));
    VectorRelease release = [shared_pair, resolved, charged, run_s, scaled](
                                int side, privacy::NoiseSource* noise)
        -> absl::StatusOr<Eigen::VectorXd> {
      const release::EncodedRows& rows = side == 0 ? shared_pair->d0 : shared_pair->d1;
      if (scaled != nullptr) {
        // The mutant: the same accumulation and noise as Kind::Run, through
        // a map without the norm bound.
        DPC_ASSIGN_OR_RETURN(embed::NoisyLabelledEmbedding embedding,
                             release::NoisyLabelledEmbeddingOf(*scaled, rows, charged, run_s,
                                                               rows.num_rows(), noise));
        return Flatten(embedding);
      }
      // As server/releases.cc ComputeRelease: public_n = rows.num_rows().
      DPC_ASSIGN_OR_RETURN(Kind::Result result,
                           Kind::Run(resolved, rows, charged, run_s, rows.num_rows(), noise));
      return Flatten(result.embedding);
    };
    return ProjectionGame(std::move(release), std::move(prepared));
  };
  return c;
}

AuditCase CharfnEmbeddingCase(NeighbouringRelation relation, const Mutation& mutation) {
  AuditCase c;
  c.kind = "charfn_embedding";
  c.relation = privacy::RelationName(relation);
  c.tightness = Tightness::kGaussianMu;
  c.quick_runs = kGaussianQuickRuns;
  c.full_runs = 200000;
  c.prepare = [relation, mutation](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    DPC_ASSIGN_OR_RETURN(EmbeddingPair pair, NumericPair(relation));
    using Kind = release::CharfnEmbeddingKind;
    Kind::Params params;
    params.num_frequencies = kAuditFrequencies;
    params.length_scale = 0.3;  // declared, public
    params.seed = kAuditFeatureSeed;
    DPC_ASSIGN_OR_RETURN(const Kind::Params resolved, Kind::Resolve(params, pair.schema));
    const int gaussians = static_cast<int>(Kind::Plan(resolved, 1.0).noise_multipliers.size());
    DPC_ASSIGN_OR_RETURN(const double s, privacy::CalibrateGridGaussianNoiseMultiplier(
                                             gaussians, target.epsilon, target.delta));
    const NeighbouringRelation charged = RunRelation(relation, mutation);
    PreparedCase prepared;
    DPC_RETURN_IF_ERROR(ChargeOneShot(Kind::Plan(resolved, s), charged, target.delta, &prepared));
    const double run_s = s * mutation.noise_multiplier_factor;
    auto shared_pair = std::make_shared<const EmbeddingPair>(std::move(pair));
    VectorRelease release = [shared_pair, resolved, charged, run_s](
                                int side, privacy::NoiseSource* noise)
        -> absl::StatusOr<Eigen::VectorXd> {
      const release::EncodedRows& rows = side == 0 ? shared_pair->d0 : shared_pair->d1;
      DPC_ASSIGN_OR_RETURN(Kind::Result result,
                           Kind::Run(resolved, rows, charged, run_s, rows.num_rows(), noise));
      return Flatten(result.embedding);
    };
    return ProjectionGame(std::move(release), std::move(prepared));
  };
  return c;
}

AuditCase ExternalEmbeddingCase(NeighbouringRelation relation, bool charfn) {
  AuditCase c;
  c.kind = charfn ? "charfn_embedding(external)" : "rff_embedding(external)";
  c.relation = privacy::RelationName(relation);
  c.tightness = Tightness::kGaussianMu;
  c.quick_runs = kGaussianQuickRuns;
  c.full_runs = 200000;
  c.prepare = [relation, charfn](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    DPC_ASSIGN_OR_RETURN(EmbeddingPair pair, NumericPair(relation));
    using Rff = release::RffEmbeddingKind;
    using Charfn = release::CharfnEmbeddingKind;
    Rff::Params rff_params;
    rff_params.num_frequencies = kAuditFrequencies;
    rff_params.seed = kAuditFeatureSeed;
    Charfn::Params charfn_params;
    charfn_params.num_frequencies = kAuditFrequencies;
    charfn_params.length_scale = 0.3;  // declared, public
    charfn_params.seed = kAuditFeatureSeed;
    DPC_ASSIGN_OR_RETURN(const Rff::Params rff, Rff::Resolve(rff_params, pair.schema));
    DPC_ASSIGN_OR_RETURN(const Charfn::Params pearl, Charfn::Resolve(charfn_params, pair.schema));
    const release::GaussianMechanismRecord unit =
        charfn ? Charfn::Plan(pearl, 1.0) : Rff::Plan(rff, 1.0);
    DPC_ASSIGN_OR_RETURN(const double s,
                         privacy::CalibrateGridGaussianNoiseMultiplier(
                             static_cast<int>(unit.noise_multipliers.size()), target.epsilon,
                             target.delta));
    PreparedCase prepared;
    DPC_RETURN_IF_ERROR(ChargeOneShot(charfn ? Charfn::Plan(pearl, s) : Rff::Plan(rff, s),
                                      relation, target.delta, &prepared));
    const data::FeatureLayout layout = pair.d0.layout;
    const int classes = pair.d0.num_classes;
    // What the curator's cluster submits for each side: the exact
    // statistic under the plan's map, flattened, with its row count.
    std::vector<Eigen::VectorXd> submitted;
    std::vector<int64_t> rows;
    int64_t feature_dim = 0;
    for (const release::EncodedRows* side : {&pair.d0, &pair.d1}) {
      absl::StatusOr<embed::LabelledEmbeddingAccumulator> exact;
      if (charfn) {
        DPC_ASSIGN_OR_RETURN(Charfn::Prepared map, Charfn::Prepare(pearl, layout));
        DPC_RETURN_IF_ERROR(Charfn::ScaleFeatureMap(pearl, layout,
                                                    Charfn::DeclaredLengthScale(pearl, layout),
                                                    &map.feature_map)
                                .status());
        feature_dim = map.feature_map.output_dim();
        exact = release::ExactLabelledEmbedding(map.feature_map, *side);
      } else {
        DPC_ASSIGN_OR_RETURN(const Rff::Prepared map, Rff::Prepare(rff, layout));
        feature_dim = map.feature_map.output_dim();
        exact = release::ExactLabelledEmbedding(map.feature_map, *side);
      }
      DPC_RETURN_IF_ERROR(exact.status());
      submitted.push_back(release::FlattenExactEmbedding(*exact));
      rows.push_back(side->num_rows());
    }
    // REPLACE_ONE: both sides have the public n, the declared row count.
    const int64_t public_n = pair.d0.num_rows();
    VectorRelease release = [submitted, rows, feature_dim, layout, classes, rff, pearl, charfn,
                             relation, s, public_n](int side, privacy::NoiseSource* noise)
        -> absl::StatusOr<Eigen::VectorXd> {
      const Eigen::VectorXd& vector = submitted[side];
      DPC_ASSIGN_OR_RETURN(const embed::LabelledEmbeddingAccumulator exact,
                           release::ExactEmbeddingFromVector(
                               absl::MakeConstSpan(vector.data(), vector.size()), feature_dim,
                               classes, rows[side]));
      if (charfn) {
        DPC_ASSIGN_OR_RETURN(Charfn::Prepared map, Charfn::Prepare(pearl, layout));
        DPC_ASSIGN_OR_RETURN(const Charfn::Result result,
                             Charfn::ReleaseExact(std::move(map), exact, layout, classes,
                                                  relation, s, public_n, noise));
        return Flatten(result.embedding);
      }
      DPC_ASSIGN_OR_RETURN(const Rff::Prepared map, Rff::Prepare(rff, layout));
      DPC_ASSIGN_OR_RETURN(const Rff::Result result,
                           Rff::ReleaseExact(map, exact, layout, classes, relation, s, public_n,
                                             noise));
      return Flatten(result.embedding);
    };
    return ProjectionGame(std::move(release), std::move(prepared));
  };
  return c;
}

AuditCase MarginalsCase(NeighbouringRelation relation, const Mutation& mutation) {
  AuditCase c;
  c.kind = "marginals";
  c.relation = privacy::RelationName(relation);
  c.tightness = Tightness::kGaussianMu;
  c.quick_runs = kGaussianQuickRuns;
  c.full_runs = 200000;
  c.prepare = [relation, mutation](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    data::Schema::Builder builder;
    builder.AddCategorical("c0", {"a", "b", "c"}).AddCategorical("c1", {"u", "v"});
    DPC_ASSIGN_OR_RETURN(const data::Schema schema, builder.Build());
    using Kind = release::MarginalsKind;
    DPC_ASSIGN_OR_RETURN(const Kind::Params resolved,
                         Kind::Resolve(Kind::Params{{{0}, {1}, {0, 1}}}, schema));
    // D0: rows in cells (a, u) and (b, u); the canary (c, v) is alone in its
    // cell of every clique, so it moves k = 3 cells by 1 (ADD_REMOVE: sqrt 3)
    // or, replacing (a, u), 3 cells down and 3 up (REPLACE_ONE: sqrt 6).
    data::Table t0;
    t0.cells = (Eigen::MatrixXd(3, 2) << 0, 0, 1, 0, 0, 0).finished();
    data::Table t1;
    if (relation == NeighbouringRelation::kAddRemove) {
      t1.cells.resize(4, 2);
      t1.cells << t0.cells, Eigen::RowVector2d(2, 1);
    } else {
      t1.cells = t0.cells;
      t1.cells.row(0) = Eigen::RowVector2d(2, 1);
    }
    const int gaussians = static_cast<int>(Kind::Plan(resolved, 1.0).noise_multipliers.size());
    DPC_ASSIGN_OR_RETURN(const double s, privacy::CalibrateGridGaussianNoiseMultiplier(
                                             gaussians, target.epsilon, target.delta));
    const NeighbouringRelation charged = RunRelation(relation, mutation);
    PreparedCase prepared;
    DPC_RETURN_IF_ERROR(ChargeOneShot(Kind::Plan(resolved, s), charged, target.delta, &prepared));
    const double run_s = s * mutation.noise_multiplier_factor;
    auto tables = std::make_shared<const std::pair<data::Table, data::Table>>(t0, t1);
    VectorRelease release = [schema, resolved, tables, charged, run_s](
                                int side, privacy::NoiseSource* noise)
        -> absl::StatusOr<Eigen::VectorXd> {
      const data::Table& rows = side == 0 ? tables->first : tables->second;
      DPC_ASSIGN_OR_RETURN(Kind::Result result,
                           Kind::Run(resolved, schema, rows, charged, run_s, noise));
      Eigen::Index total = 0;
      for (const auto& m : result.marginals) total += m.counts.size();
      Eigen::VectorXd out(total);
      Eigen::Index offset = 0;
      for (const auto& m : result.marginals) {
        out.segment(offset, m.counts.size()) = m.counts;
        offset += m.counts.size();
      }
      return out;
    };
    return ProjectionGame(std::move(release), std::move(prepared));
  };
  return c;
}

AuditCase ExponentialMechanismCase(NeighbouringRelation relation, const Mutation& mutation) {
  AuditCase c;
  c.kind = "exponential_mechanism";
  c.relation = privacy::RelationName(relation);
  c.tightness = Tightness::kEpsilon;
  c.quick_runs = 100000;
  c.full_runs = 1000000;
  c.targets = {{1.0, 1e-5}};  // pure eps: delta plays no part
  c.prepare = [relation, mutation](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    const double sensitivity = MstSensitivity(relation);
    // The canary moves every quality by the full sensitivity: candidate 0
    // from 0 to Delta, every other one from Delta to 0. Its selection odds
    // then move by e^(eps/2) twice (numerator and normaliser), as close to
    // e^eps as kOtherCandidates allows (docs/privacy.md 7.1).
    std::vector<double> q0(kOtherCandidates + 1, sensitivity);
    q0[0] = 0.0;
    std::vector<double> q1(kOtherCandidates + 1, 0.0);
    q1[0] = sensitivity;
    PreparedCase prepared;
    DPC_ASSIGN_OR_RETURN(const privacy::PrivacyEvent event,
                         privacy::PrivacyEvent::ExponentialMechanism(target.epsilon));
    privacy::AccountantState state(relation);
    DPC_RETURN_IF_ERROR(state.Add(event));
    DPC_ASSIGN_OR_RETURN(const privacy::EpsilonReport report, state.Epsilon(target.delta));
    prepared.accounted_epsilon = report.epsilon;
    prepared.delta = target.delta;
    const double declared = sensitivity * mutation.sensitivity_factor;
    const double epsilon = target.epsilon;
    // The indicator of the canary's candidate.
    prepared.run_and_score = [q0, q1, epsilon, declared](int side, privacy::NoiseSource* noise)
        -> absl::StatusOr<double> {
      DPC_ASSIGN_OR_RETURN(const int pick, privacy::ExponentialMechanismSelect(
                                               side == 0 ? q0 : q1, epsilon, declared, noise));
      return pick == 0 ? 1.0 : 0.0;
    };
    return prepared;
  };
  return c;
}

AuditCase LdpLaplaceCase(const Mutation& mutation) {
  AuditCase c;
  c.kind = "ldp_laplace_l1";
  c.relation = "LOCAL";
  c.tightness = Tightness::kEpsilon;
  c.quick_runs = 40000;
  c.full_runs = 1000000;
  c.targets = {{1.0, 1e-5}};  // pure eps
  c.prepare = [mutation](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    constexpr double kRadius = 1.0;
    DPC_ASSIGN_OR_RETURN(const ldp::LdpMechanism mechanism, ldp::LdpMechanism::Builder()
                                                                .SetKind(ldp::LdpKind::kLaplaceL1)
                                                                .SetDimension(2)
                                                                .SetRadius(kRadius)
                                                                .SetEpsilon(target.epsilon)
                                                                .Build());
    PreparedCase prepared;
    prepared.accounted_epsilon = mechanism.epsilon();
    prepared.delta = target.delta;
    // The two farthest points of the l1 ball: +-R e1 (l1 distance 2R).
    const double at = kRadius * mutation.ldp_record_scale;
    const Eigen::Vector2d x0(at, 0.0);
    const Eigen::Vector2d x1(-at, 0.0);
    const bool project = mutation.ldp_record_scale == 1.0;
    // The log likelihood ratio of D1 to D0 (times b): |y - x0| - |y - x1|
    // in the first coordinate (the second is noise alone under both).
    prepared.run_and_score = [mechanism, x0, x1, project](int side, privacy::NoiseSource* noise)
        -> absl::StatusOr<double> {
      const Eigen::Vector2d& x = side == 0 ? x0 : x1;
      Eigen::VectorXd y;
      if (project) {
        DPC_ASSIGN_OR_RETURN(y, mechanism.Privatize(x, noise));
      } else {
        // The mutant: the device's noise without its projection.
        DPC_ASSIGN_OR_RETURN(y, mechanism.Privatize(Eigen::Vector2d::Zero(), noise));
        y += x;
      }
      return std::abs(y(0) - x0(0)) - std::abs(y(0) - x1(0));
    };
    return prepared;
  };
  return c;
}

AuditCase LdpGaussianCase(const Mutation& mutation) {
  AuditCase c;
  c.kind = "ldp_gaussian_l2";
  c.relation = "LOCAL";
  c.tightness = Tightness::kGaussianMu;
  c.quick_runs = kGaussianQuickRuns;
  c.full_runs = 200000;
  c.prepare = [mutation](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    constexpr double kRadius = 1.0;
    DPC_ASSIGN_OR_RETURN(const ldp::LdpMechanism mechanism, ldp::LdpMechanism::Builder()
                                                                .SetKind(ldp::LdpKind::kGaussianL2)
                                                                .SetDimension(2)
                                                                .SetRadius(kRadius)
                                                                .SetEpsilon(target.epsilon)
                                                                .SetDelta(target.delta)
                                                                .Build());
    PreparedCase prepared;
    prepared.accounted_epsilon = mechanism.epsilon();
    prepared.delta = target.delta;
    // sigma = s * 2R: mu = 2R / sigma.
    prepared.accounted_mu = mechanism.sensitivity() / mechanism.noise_scale();
    const double at = kRadius * mutation.ldp_record_scale;
    const Eigen::Vector2d x0(at, 0.0);
    const Eigen::Vector2d x1(-at, 0.0);
    const bool project = mutation.ldp_record_scale == 1.0;
    // Oriented so D1 scores high: the projection on x1 - x0 is -y(0).
    prepared.run_and_score = [mechanism, x0, x1, project](int side, privacy::NoiseSource* noise)
        -> absl::StatusOr<double> {
      const Eigen::Vector2d& x = side == 0 ? x0 : x1;
      Eigen::VectorXd y;
      if (project) {
        DPC_ASSIGN_OR_RETURN(y, mechanism.Privatize(x, noise));
      } else {
        DPC_ASSIGN_OR_RETURN(y, mechanism.Privatize(Eigen::Vector2d::Zero(), noise));
        y += x;
      }
      return -y(0);
    };
    return prepared;
  };
  return c;
}

std::vector<AuditCase> OneShotCases() {
  std::vector<AuditCase> cases;
  for (const NeighbouringRelation relation :
       {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
    cases.push_back(RffEmbeddingCase(relation, /*image=*/false));
    cases.push_back(CharfnEmbeddingCase(relation));
    cases.push_back(ExternalEmbeddingCase(relation, /*charfn=*/false));
    cases.push_back(ExternalEmbeddingCase(relation, /*charfn=*/true));
    cases.push_back(RffEmbeddingCase(relation, /*image=*/true));
    cases.push_back(MarginalsCase(relation));
    cases.push_back(ExponentialMechanismCase(relation));
  }
  cases.push_back(LdpLaplaceCase());
  cases.push_back(LdpGaussianCase());
  return cases;
}

}  // namespace dpcurator::audit
