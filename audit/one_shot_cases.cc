#include "audit/one_shot_cases.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "audit/plan_fixture.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/embed/feature_map.h"
#include "core/ldp/mechanism.h"
#include "core/privacy/accounting.h"
#include "core/privacy/events.h"
#include "core/privacy/exponential_mechanism.h"
#include "core/release/bin_fit.h"
#include "core/release/charfn_embedding.h"
#include "core/release/encoded_rows.h"
#include "core/release/labelled_release.h"
#include "core/release/mechanism_record.h"
#include "core/release/rff_embedding.h"
#include "core/util/status_macros.h"
#include "dpcurator/v1/dpcurator.pb.h"
#include "plan/category_fit.h"
#include "plan/partition.h"
#include "plan/releases.h"
#include "proto/release_kinds.h"

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

// A released vector of one side: the numbers of the artefact the plan's
// compute function returns (ReleasedValues), as the analyst reads them.
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

// The worst-case pair of an embedding kind (docs/privacy.md 7.1): D0 holds
// `base` rows of class 0; under ADD_REMOVE, D1 adds a canary of class 1;
// under REPLACE_ONE, D1 replaces D0's first row by that canary. Every
// feature vector has norm 1, so the canary moves [sums ; counts] by
// sqrt(1 + 1) (ADD_REMOVE), and the released means and proportions by
// sqrt(4) / n (REPLACE_ONE: its old row leaves class 0, it enters class 1):
// both the sensitivity bound exactly. Held as the server holds a stored
// dataset (plan_fixture.h).
using Pair = std::array<PlanDataset, 2>;

absl::StatusOr<Pair> NumericPair(NeighbouringRelation relation, double delta) {
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
  return InMemoryPair(schema, std::move(t0), std::move(t1), relation, delta);
}

absl::StatusOr<Pair> ImagePair(NeighbouringRelation relation, double delta) {
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
  const std::vector<std::vector<uint8_t>> base = {
      {10, 200, 30, 40}, {90, 80, 70, 60}, {0, 0, 255, 128}};
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
  return InMemoryPair(schema, table(base, labels0), table(other, labels1), relation, delta);
}

// The analyst's requests: a one-shot embedding at the target epsilon, with
// public frequencies (the seed fixed so every run uses one map).
v1::ReleaseRequest RffRequest(const AuditTarget& target) {
  v1::ReleaseRequest request;
  request.set_dataset_id("ds_audit");
  request.set_idempotency_key("audit");
  request.set_epsilon(target.epsilon);
  request.mutable_rff_embedding()->set_num_frequencies(kAuditFrequencies);
  request.mutable_rff_embedding()->set_seed(kAuditFeatureSeed);
  return request;
}

v1::ReleaseRequest CharfnRequest(const AuditTarget& target) {
  v1::ReleaseRequest request;
  request.set_dataset_id("ds_audit");
  request.set_idempotency_key("audit");
  request.set_epsilon(target.epsilon);
  v1::CharfnEmbeddingParams& params = *request.mutable_charfn_embedding();
  params.set_num_frequencies(kAuditFrequencies);
  params.set_length_scale(0.3);  // declared, public
  params.set_seed(kAuditFeatureSeed);
  return request;
}

// The clamp-removed mutant's map: the real map's features times `norm`.
class ScaledFeatureMap final : public embed::FeatureMap {
 public:
  ScaledFeatureMap(const embed::FeatureMap* inner, double norm) : inner_(inner), norm_(norm) {}
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
  const embed::FeatureMap* inner_;
  double norm_;
};

// The exact statistic of `rows` as the curator's scale-out partials compute
// it (release::ExactLabelledEmbedding under the plan's map, flattened in
// the partials' layout: per-class feature sums, then per-class counts):
// what RunnerService.SubmitStatistic receives. `feature_norm` != 1 is the
// clamp-removed mutant, the map's features scaled to that norm.
absl::StatusOr<Eigen::VectorXd> PartialsStatistic(const plan::ReleasePlan& plan,
                                                  const data::Schema& schema,
                                                  const release::EncodedRows& rows,
                                                  double feature_norm = 1.0) {
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  absl::StatusOr<embed::LabelledEmbeddingAccumulator> exact;
  if (plan.resolved_request.kind_case() == v1::ReleaseRequest::kCharfnEmbedding) {
    using Charfn = release::CharfnEmbeddingKind;
    const Charfn::Params params = ParamsFromProto(plan.resolved_request.charfn_embedding());
    DPC_ASSIGN_OR_RETURN(Charfn::Prepared map, Charfn::Prepare(params, layout));
    DPC_RETURN_IF_ERROR(Charfn::ScaleFeatureMap(params, layout,
                                                Charfn::DeclaredLengthScale(params, layout),
                                                &map.feature_map)
                            .status());
    const ScaledFeatureMap scaled(&map.feature_map, feature_norm);
    exact = release::ExactLabelledEmbedding(scaled, rows);
  } else {
    using Rff = release::RffEmbeddingKind;
    DPC_ASSIGN_OR_RETURN(
        const Rff::Prepared map,
        Rff::Prepare(ParamsFromProto(plan.resolved_request.rff_embedding()), layout));
    const ScaledFeatureMap scaled(&map.feature_map, feature_norm);
    exact = release::ExactLabelledEmbedding(scaled, rows);
  }
  DPC_RETURN_IF_ERROR(exact.status());
  return release::FlattenExactEmbedding(*exact);
}

// A one-shot embedding case through the server's plan (plan/releases.h):
// PlanRelease of `request` on D0's record at the target epsilon, the
// ledger's charge of plan.event, and per run PrepareRelease then
// ComputeRelease on the side's rows, read back from the artefact. A
// mutation edits the plan after PlanRelease returns and keeps the event it
// computed: a plan whose mechanism and charge disagree.
absl::StatusOr<PreparedCase> PlannedEmbedding(const v1::ReleaseRequest& request, Pair pair,
                                              NeighbouringRelation relation,
                                              const Mutation& mutation, double delta) {
  DPC_ASSIGN_OR_RETURN(plan::ReleasePlan plan,
                       plan::PlanRelease(request, pair[0].dataset, pair[0].schema));
  if (!plan.event.has_value() || plan.binding == nullptr) {
    return absl::InternalError("the release plan has no one-shot event");
  }
  PreparedCase prepared;
  DPC_RETURN_IF_ERROR(ChargePlanEvent(*plan.event, relation, delta, &prepared));
  prepared.accounted_mu = GaussianMu(plan.planned);
  const double epsilon_alone = prepared.accounted_epsilon;
  if (mutation.noise_multiplier_factor != 1.0) {
    // Runs s * factor; the record is re-planned so the engine's guard
    // (ran == planned) passes, while the event charged stays s's.
    plan.noise_multiplier *= mutation.noise_multiplier_factor;
    plan.planned = plan.binding->Plan(plan.resolved_request, plan.noise_multiplier);
  }
  if (mutation.run_as_add_remove) {
    // The engine runs as on an ADD_REMOVE dataset (noisy sums and counts,
    // sensitivity sqrt 2) while the REPLACE_ONE plan's event is charged.
    for (PlanDataset& side : pair) side.dataset.set_relation(v1::ADD_REMOVE);
  }
  std::array<Eigen::VectorXd, 2> statistics;
  if (mutation.feature_norm != 1.0) {
    // The clamp removed: the engine's noise step (ComputeReleaseFromStatistic,
    // the step Run ends with) over the sums of features of norm feature_norm.
    for (int side = 0; side < 2; ++side) {
      DPC_ASSIGN_OR_RETURN(statistics[side], PartialsStatistic(plan, pair[side].schema,
                                                               pair[side].rows,
                                                               mutation.feature_norm));
    }
  }
  auto shared = std::make_shared<const std::tuple<plan::ReleasePlan, Pair,
                                                  std::array<Eigen::VectorXd, 2>>>(
      std::move(plan), std::move(pair), std::move(statistics));
  const bool from_statistic = mutation.feature_norm != 1.0;
  VectorRelease release = [shared, from_statistic, epsilon_alone](
                              int side, privacy::NoiseSource* noise)
      -> absl::StatusOr<Eigen::VectorXd> {
    const auto& [plan, pair, statistics] = *shared;
    const PlanDataset& data = pair[side];
    DPC_ASSIGN_OR_RETURN(std::unique_ptr<plan::PreparedEngine> engine,
                         plan::PrepareRelease(plan, data.schema));
    absl::StatusOr<v1::Release> released;
    if (from_statistic) {
      const Eigen::VectorXd& statistic = statistics[side];
      released = plan::ComputeReleaseFromStatistic(
          plan, *engine, data.dataset, data.schema,
          absl::MakeConstSpan(statistic.data(), statistic.size()), data.rows.num_rows(),
          "rel_audit", epsilon_alone, noise);
    } else {
      released = plan::ComputeRelease(plan, *engine, data.dataset, data.rows, "rel_audit",
                                      epsilon_alone, noise);
    }
    DPC_RETURN_IF_ERROR(released.status());
    return ReleasedValues(*released);
  };
  return ProjectionGame(std::move(release), std::move(prepared));
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
    DPC_ASSIGN_OR_RETURN(Pair pair, image ? ImagePair(relation, target.delta)
                                          : NumericPair(relation, target.delta));
    return PlannedEmbedding(RffRequest(target), std::move(pair), relation, mutation,
                            target.delta);
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
    DPC_ASSIGN_OR_RETURN(Pair pair, NumericPair(relation, target.delta));
    return PlannedEmbedding(CharfnRequest(target), std::move(pair), relation, mutation,
                            target.delta);
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
    // The rows live in the curator's cluster: the server holds the external
    // record only, with the declared public n under REPLACE_ONE (D0's and
    // D1's row count) and none under ADD_REMOVE (tests/server/
    // external_dataset_test.cc).
    DPC_ASSIGN_OR_RETURN(const Pair pair, NumericPair(relation, target.delta));
    const int64_t public_row_bound =
        relation == NeighbouringRelation::kReplaceOne ? pair[0].rows.num_rows() : 0;
    const v1::Dataset external = ExternalDatasetRecord(pair[0].schema, relation, target.delta,
                                                       public_row_bound);
    const data::Schema schema = pair[0].schema;
    DPC_ASSIGN_OR_RETURN(
        plan::ReleasePlan plan,
        plan::PlanRelease(charfn ? CharfnRequest(target) : RffRequest(target), external, schema));
    if (!plan.event.has_value()) return absl::InternalError("the release plan has no event");
    PreparedCase prepared;
    DPC_RETURN_IF_ERROR(ChargePlanEvent(*plan.event, relation, target.delta, &prepared));
    prepared.accounted_mu = GaussianMu(plan.planned);
    // What the cluster submits for each side: the exact statistic and its
    // row count, computed once (it is a function of the rows alone).
    std::array<Eigen::VectorXd, 2> statistics;
    std::array<int64_t, 2> rows{};
    for (int side = 0; side < 2; ++side) {
      DPC_ASSIGN_OR_RETURN(statistics[side], PartialsStatistic(plan, schema, pair[side].rows));
      rows[side] = pair[side].rows.num_rows();
    }
    const double epsilon_alone = prepared.accounted_epsilon;
    auto shared = std::make_shared<const plan::ReleasePlan>(std::move(plan));
    // Per run, as RunnerService.SubmitStatistic: the engine prepared after
    // admission, then the plan's check of the submission and the engine's
    // noise step over it.
    VectorRelease release = [shared, external, schema, statistics, rows, epsilon_alone](
                                int side, privacy::NoiseSource* noise)
        -> absl::StatusOr<Eigen::VectorXd> {
      DPC_ASSIGN_OR_RETURN(std::unique_ptr<plan::PreparedEngine> engine,
                           plan::PrepareRelease(*shared, schema));
      const Eigen::VectorXd& statistic = statistics[side];
      DPC_ASSIGN_OR_RETURN(const v1::Release released,
                           plan::ComputeReleaseFromStatistic(
                               *shared, *engine, external, schema,
                               absl::MakeConstSpan(statistic.data(), statistic.size()),
                               rows[side], "rel_audit", epsilon_alone, noise));
      return ReleasedValues(released);
    };
    return ProjectionGame(std::move(release), std::move(prepared));
  };
  return c;
}

AuditCase MarginalsCase(NeighbouringRelation relation, bool fit_grid) {
  AuditCase c;
  c.kind = fit_grid ? "marginals_bin_fit" : "marginals";
  // A grid table of 257 cells makes a run ~10x slower than the categorical
  // case's 11 cells (a noise draw per cell): one column and one target keep
  // the quick audit within ~10 s.
  if (fit_grid) c.targets = {{1.0, 1e-2}};
  c.relation = privacy::RelationName(relation);
  c.tightness = Tightness::kGaussianMu;
  c.quick_runs = kGaussianQuickRuns;
  c.full_runs = 200000;
  c.prepare = [relation, fit_grid](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    data::Schema::Builder builder;
    builder.AddCategorical("c0", {"a", "b", "c"}).AddCategorical("c1", {"u", "v"});
    if (fit_grid) {
      // Issue 38's bin fit: the same release over the fine grid of a
      // numeric column (release::FitGridSchema, bounds only), as the server
      // would plan it. Codes 0, 1, 2 of c0 stand for 10, 2,000 and 5e8
      // (three different grid cells: 10 and 2,000 on the log part, 5e8 on
      // the equal-width part); c1 is not measured.
      builder = data::Schema::Builder();
      builder.AddNumeric("c0", 0, 1e9).AddCategorical("c1", {"u", "v"});
    }
    DPC_ASSIGN_OR_RETURN(const data::Schema declared, builder.Build());
    DPC_ASSIGN_OR_RETURN(const data::Schema schema,
                         fit_grid ? release::FitGridSchema(declared, {0})
                                  : absl::StatusOr<data::Schema>(declared));
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
    if (fit_grid) {
      for (data::Table* t : {&t0, &t1}) {
        for (Eigen::Index r = 0; r < t->cells.rows(); ++r) {
          const double c0 = t->cells(r, 0);
          t->cells(r, 0) = c0 == 0 ? 10.0 : c0 == 1 ? 2000.0 : 5e8;
        }
      }
    }
    Pair pair = InMemoryPair(schema, std::move(t0), std::move(t1), relation, target.delta);
    // The analyst's request: cliques {c0}, {c1}, {c0, c1} (MST's 1-way and
    // 2-way measurements in one release), planned by PlanRelease
    // (PlanMarginalsRelease) and run by ComputeMarginalsRelease.
    v1::ReleaseRequest request;
    request.set_dataset_id(pair[0].dataset.id());
    request.set_idempotency_key("audit");
    request.set_epsilon(target.epsilon);
    v1::MarginalsParams& params = *request.mutable_marginals();
    params.add_cliques()->add_columns(std::string("c0"));
    if (!fit_grid) {  // the fit measures c0's 1-way table only: k = 1
      params.add_cliques()->add_columns(std::string("c1"));
      v1::AimClique& both = *params.add_cliques();
      both.add_columns(std::string("c0"));
      both.add_columns(std::string("c1"));
    }
    DPC_ASSIGN_OR_RETURN(plan::ReleasePlan plan,
                         plan::PlanRelease(request, pair[0].dataset, pair[0].schema));
    if (!plan.marginals.has_value() || !plan.event.has_value()) {
      return absl::InternalError("the marginals plan has no event");
    }
    PreparedCase prepared;
    DPC_RETURN_IF_ERROR(ChargePlanEvent(*plan.event, relation, target.delta, &prepared));
    // One grid Gaussian of multiplier s over every clique's table: mu 1/s.
    prepared.accounted_mu =
        GaussianMu(release::GaussianMechanismRecord{{plan.marginals->noise_multiplier}});
    const double epsilon_alone = prepared.accounted_epsilon;
    auto shared = std::make_shared<const std::pair<plan::MarginalsReleasePlan, Pair>>(
        std::move(*plan.marginals), std::move(pair));
    VectorRelease release = [shared, epsilon_alone](int side, privacy::NoiseSource* noise)
        -> absl::StatusOr<Eigen::VectorXd> {
      const PlanDataset& data = shared->second[side];
      DPC_ASSIGN_OR_RETURN(const v1::Release released,
                           plan::ComputeMarginalsRelease(shared->first, data.dataset,
                                                         data.schema, data.table, "rel_audit",
                                                         "audit", epsilon_alone, noise));
      return ReleasedValues(released);
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

AuditCase CategoryFitCase(NeighbouringRelation relation, const Mutation& mutation) {
  AuditCase c;
  c.kind = "category_fit";
  c.relation = privacy::RelationName(relation);
  // An approximate event: neither a Gaussian's mu nor a pure epsilon to be
  // tight against; the game checks the canary's delta_0 and the common
  // count's Gaussian together.
  c.tightness = Tightness::kNone;
  c.quick_runs = 10000;
  c.full_runs = 100000;
  c.prepare = [relation, mutation](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    // The open column as the dataset's schema declares it: a placeholder
    // list (its last level, "other"), and `open` set on the record.
    data::Schema::Builder builder;
    builder.AddCategorical("city", {"other"});
    DPC_ASSIGN_OR_RETURN(const data::Schema schema, builder.Build());
    v1::Dataset d0 = DatasetRecord(schema, relation, target.delta, /*row_count=*/1);
    d0.mutable_schema()->mutable_columns(0)->set_open(true);
    v1::ReleaseRequest request;
    request.set_dataset_id(d0.id());
    request.set_idempotency_key("audit");
    request.set_epsilon(target.epsilon);
    request.mutable_category_fit()->set_column("city");
    DPC_ASSIGN_OR_RETURN(plan::ReleasePlan plan, plan::PlanRelease(request, d0, schema));
    if (!plan.category_fit.has_value() || !plan.event.has_value()) {
      return absl::InternalError("the category_fit plan has no event");
    }
    PreparedCase prepared;
    DPC_RETURN_IF_ERROR(ChargePlanEvent(*plan.event, relation, target.delta, &prepared));
    plan::CategoryFitPlan fit = *std::move(plan.category_fit);
    const int64_t tau = fit.params.tau;
    if (mutation.fit_threshold_factor != 1.0) {
      fit.params.tau = std::max<int64_t>(
          2, static_cast<int64_t>(std::floor(static_cast<double>(tau) *
                                             mutation.fit_threshold_factor)));
    }
    // The column's values on each side, by dictionary index: "common"
    // (index 0) tau times on D0; the canary (index 1) on D1.
    std::array<release::OpenColumnValues, 2> sides;
    for (release::OpenColumnValues& side : sides) {
      side.dictionary = {"common", "canary"};
      side.indices.assign(static_cast<size_t>(tau), 0);
    }
    if (relation == NeighbouringRelation::kAddRemove) {
      sides[1].indices.push_back(1);
    } else {
      sides[1].indices[0] = 1;
    }
    std::array<v1::Dataset, 2> records = {d0, d0};
    for (int side = 0; side < 2; ++side) {
      records[side].set_row_count(static_cast<int64_t>(sides[side].indices.size()));
    }
    records[1].set_id(d0.id() + "_1");
    const double epsilon_alone = prepared.accounted_epsilon;
    auto shared = std::make_shared<const std::tuple<plan::CategoryFitPlan,
                                                    std::array<release::OpenColumnValues, 2>,
                                                    std::array<v1::Dataset, 2>>>(
        std::move(fit), std::move(sides), std::move(records));
    prepared.run_and_score = [shared, epsilon_alone](
                                 int side, privacy::NoiseSource* noise) -> absl::StatusOr<double> {
      const auto& [fit_plan, values, datasets] = *shared;
      const v1::Release released = plan::ComputeCategoryFitRelease(
          fit_plan, datasets[side], values[side], "rel_audit", "audit", epsilon_alone, noise);
      bool canary = false;
      bool common = false;
      for (const std::string& value : released.category_fit().categories()) {
        canary = canary || value == "canary";
        common = common || value == "common";
      }
      return 2.0 * (canary ? 1.0 : 0.0) + (common ? 0.0 : 1.0);
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
    if (relation == NeighbouringRelation::kAddRemove) {
      cases.push_back(MarginalsCase(relation, /*fit_grid=*/true));
    }
    cases.push_back(ExponentialMechanismCase(relation));
    cases.push_back(CategoryFitCase(relation));
  }
  cases.push_back(LdpLaplaceCase());
  cases.push_back(LdpGaussianCase());
  return cases;
}

}  // namespace dpcurator::audit
