#include "server/releases.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/data/encoder.h"
#include "core/embed/charfn.h"
#include "core/embed/frequency_bounds.h"
#include "core/embed/labelled_embedding.h"
#include "core/embed/pairwise_distance.h"
#include "core/embed/rff.h"
#include "core/privacy/calibration.h"
#include "core/privacy/grid_gaussian.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/sampled_gaussian.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"
#include "proto/convert.h"

namespace dpcurator::server {
namespace {

constexpr uint32_t kArtefactFormatVersion = 1;
constexpr int kDefaultNumFrequencies = 500;
constexpr int kMaxNumFrequencies = 20000;
constexpr int64_t kMaxSessionSteps = int64_t{1} << 30;

// Defaults and validation shared by the embedding kinds: the number of
// frequencies (0 = default) and a declared length-scale (0 = default).
template <typename Params>
absl::Status ResolveFrequencyParams(Params* params) {
  if (params->num_frequencies() == 0) params->set_num_frequencies(kDefaultNumFrequencies);
  if (params->num_frequencies() < 1 || params->num_frequencies() > kMaxNumFrequencies) {
    return absl::InvalidArgumentError(absl::StrCat("num_frequencies must be in [1, ",
                                                   kMaxNumFrequencies, "], got ",
                                                   params->num_frequencies()));
  }
  // Data-independent bounds (docs/privacy.md 6.2): inside them no row of the
  // declared domain can make a feature non-finite, so nothing the engine
  // does after reading rows can fail on a chosen parameter.
  if (params->length_scale() != 0) {
    DPC_RETURN_IF_ERROR(embed::ValidateLengthScale(params->length_scale(), "length_scale"));
  }
  // Frequencies are public randomness; the server draws the seed when the
  // analyst leaves it to us, and stores it in the artefact.
  if (params->seed() == 0) params->set_seed(privacy::SecureRandomU64() | 1);
  return absl::OkStatus();
}

// Fills defaults of random-feature parameters and validates them.
absl::Status ResolveRffParams(v1::RffEmbeddingParams* params) {
  DPC_RETURN_IF_ERROR(ResolveFrequencyParams(params));
  if (params->has_numeric_weight()) {
    DPC_RETURN_IF_ERROR(ValidateInUnitInterval(params->numeric_weight(), "numeric_weight"));
  }
  return absl::OkStatus();
}

// The noised labelled embedding of `rows` under `feature_map`, wrapped in an
// artefact with the fields every embedding kind shares (the caller adds the
// feature map's own parameters, the release id and epsilon).
absl::StatusOr<v1::EmbeddingArtefact> LabelledArtefactFor(const embed::FeatureMap& feature_map,
                                                          const v1::Dataset& dataset,
                                                          const data::Schema& schema,
                                                          const Eigen::MatrixXd& encoded,
                                                          const Eigen::VectorXi& labels,
                                                          double noise_multiplier,
                                                          int64_t public_n,
                                                          privacy::NoiseSource* noise) {
  DPC_ASSIGN_OR_RETURN(auto accumulator,
                       embed::AccumulateEmbedding(feature_map, encoded, labels,
                                                  schema.num_classes()));
  DPC_ASSIGN_OR_RETURN(auto noisy, embed::ReleaseLabelledEmbedding(
                                       accumulator, RelationFromProto(dataset.relation()),
                                       noise_multiplier, public_n, noise));
  v1::EmbeddingArtefact artefact;
  artefact.set_format_version(kArtefactFormatVersion);
  artefact.set_dataset_id(dataset.id());
  *artefact.mutable_schema() = dataset.schema();
  artefact.set_schema_fingerprint(dataset.schema_fingerprint());
  artefact.set_relation(dataset.relation() == v1::REPLACE_ONE ? v1::REPLACE_ONE : v1::ADD_REMOVE);
  artefact.set_feature_dim(feature_map.output_dim());
  artefact.set_num_classes(schema.num_classes());
  artefact.mutable_class_values()->Assign(noisy.class_values.data(),
                                          noisy.class_values.data() + noisy.class_values.size());
  artefact.mutable_class_totals()->Assign(noisy.class_totals.data(),
                                          noisy.class_totals.data() + noisy.class_totals.size());
  artefact.set_public_n(noisy.public_n);
  artefact.set_sensitivity(noisy.sensitivity);
  artefact.set_noise_multiplier(noisy.noise_multiplier);
  artefact.set_noise_stddev(noisy.noise_stddev);
  artefact.set_delta(dataset.budget().delta());
  return artefact;
}

// DP-MERF: the random-feature map of `params` over `rows`.
absl::StatusOr<v1::EmbeddingArtefact> EmbeddingArtefactFor(
    const v1::RffEmbeddingParams& params, const v1::Dataset& dataset, const data::Schema& schema,
    const data::Table& rows, double noise_multiplier, int64_t public_n,
    privacy::NoiseSource* noise) {
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  DPC_ASSIGN_OR_RETURN(embed::RandomFourierFeatureMap feature_map,
                       embed::RandomFourierFeatureMap::Create(layout, RffOptionsFromProto(params)));
  DPC_ASSIGN_OR_RETURN(
      v1::EmbeddingArtefact artefact,
      LabelledArtefactFor(feature_map, dataset, schema, data::EncodeFeatures(schema, layout, rows),
                          data::ExtractLabels(schema, rows), noise_multiplier, public_n, noise));
  artefact.set_feature_map("rff");
  artefact.set_seed(params.seed());
  artefact.set_num_frequencies(feature_map.num_frequencies());
  artefact.set_length_scale(feature_map.length_scale());
  artefact.set_numeric_weight(feature_map.numeric_weight());
  return artefact;
}

// PEARL: optionally the private mean-distance release (hash-chain
// estimator, docs/privacy.md 2.5), then the characteristic-function
// embedding with that length-scale; both with the same noise multiplier.
absl::StatusOr<v1::EmbeddingArtefact> CharfnArtefactFor(const v1::CharfnEmbeddingParams& params,
                                                        const v1::Dataset& dataset,
                                                        const data::Schema& schema,
                                                        const data::Table& rows,
                                                        double noise_multiplier,
                                                        privacy::NoiseSource* noise) {
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  const Eigen::MatrixXd encoded = data::EncodeFeatures(schema, layout, rows);
  const auto relation = RelationFromProto(dataset.relation());
  double length_scale = params.length_scale() > 0 ? params.length_scale()
                                                  : embed::DefaultCharfnLengthScale(layout);
  std::optional<embed::NoisyDistanceStatistic> distance;
  const double diameter = embed::EncodedRowDiameter(layout);
  if (params.private_length_scale()) {
    DPC_ASSIGN_OR_RETURN(auto chain, embed::ChainDistanceAccumulator::Create(
                                         layout.total_dim(), diameter, params.seed()));
    DPC_RETURN_IF_ERROR(chain.Add(encoded));
    DPC_ASSIGN_OR_RETURN(distance, embed::ReleaseMeanDistance(
                                       chain.Finish(), embed::DistanceEstimator::kHashChain,
                                       relation, diameter, noise_multiplier, rows.num_rows(),
                                       noise));
    length_scale =
        embed::LengthScaleFromMeanDistance(embed::NoisyMeanDistance(*distance), diameter);
  }
  DPC_ASSIGN_OR_RETURN(
      embed::CharacteristicFunctionMap feature_map,
      embed::CharacteristicFunctionMap::Create(
          layout, CharfnOptionsFromProto(params, layout, length_scale)));
  DPC_ASSIGN_OR_RETURN(
      v1::EmbeddingArtefact artefact,
      LabelledArtefactFor(feature_map, dataset, schema, encoded, data::ExtractLabels(schema, rows),
                          noise_multiplier, rows.num_rows(), noise));
  artefact.set_feature_map("charfn");
  artefact.set_seed(params.seed());
  artefact.set_num_frequencies(feature_map.num_frequencies());
  artefact.set_length_scale(feature_map.length_scale());
  artefact.set_row_diameter(diameter);
  artefact.set_numeric_length_scale(feature_map.numeric_length_scale());
  if (distance.has_value()) {
    artefact.set_length_scale_private(true);
    artefact.set_noisy_mean_distance(embed::NoisyMeanDistance(*distance));
    artefact.set_distance_sensitivity(distance->sensitivity);
  }
  return artefact;
}

// The released vector has (features + 1) coordinates per class (the class
// sums and the count). Its length follows from public parameters alone, so
// a length the noise layer cannot take (the grid Gaussian's proof holds up
// to kMaxGridGaussianDimension coordinates, docs/privacy.md 4.6) is refused
// here, before admission, rather than failing after the charge.
absl::Status ValidateReleasedDimension(const v1::Dataset& dataset, int64_t frequencies,
                                       bool with_categorical_block) {
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(dataset.schema()));
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  const int64_t features = 2 * frequencies + (with_categorical_block ? layout.categorical_dim : 0);
  const int64_t classes = schema.num_classes();
  const int64_t dimension = (features + 1) * classes;
  if (dimension > privacy::kMaxGridGaussianDimension) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this release would have ", dimension, " coordinates ((", features, " features + 1) x ",
        classes, " classes); at most ", privacy::kMaxGridGaussianDimension,
        " are supported. Lower num_frequencies to at most ",
        std::max<int64_t>(0, (privacy::kMaxGridGaussianDimension / classes - 1 -
                              (with_categorical_block ? layout.categorical_dim : 0)) / 2),
        "."));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReleasePlan> PlanRelease(const v1::ReleaseRequest& request,
                                        const v1::Dataset& dataset) {
  ReleasePlan plan;
  plan.resolved_request = request;
  switch (request.kind_case()) {
    case v1::ReleaseRequest::kRffEmbedding: {
      plan.kind = "rff_embedding";
      DPC_RETURN_IF_ERROR(ResolveRffParams(plan.resolved_request.mutable_rff_embedding()));
      DPC_RETURN_IF_ERROR(ValidateReleasedDimension(
          dataset, plan.resolved_request.rff_embedding().num_frequencies(), true));
      break;
    }
    case v1::ReleaseRequest::kCharfnEmbedding: {
      plan.kind = "charfn_embedding";
      auto* params = plan.resolved_request.mutable_charfn_embedding();
      DPC_RETURN_IF_ERROR(ResolveFrequencyParams(params));
      if (params->private_length_scale() && params->length_scale() > 0) {
        return absl::InvalidArgumentError(
            "give either a declared length_scale or private_length_scale, not both");
      }
      // NaN would pass as "< 0" (same as length_scale) and inf would fail
      // only in the engine, after the ledger charged: refuse both here.
      if (!std::isfinite(params->numeric_length_scale())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "numeric_length_scale must be finite (> 0 declared, 0 = schema default, < 0 = the "
            "same as length_scale), got ", params->numeric_length_scale()));
      }
      if (params->numeric_length_scale() > 0) {
        DPC_RETURN_IF_ERROR(embed::ValidateLengthScale(params->numeric_length_scale(),
                                                       "numeric_length_scale"));
      }
      DPC_RETURN_IF_ERROR(ValidateReleasedDimension(dataset, params->num_frequencies(), false));
      break;
    }
    // Exhaustive (no default): -Wswitch makes a new, unhandled kind a CI
    // error instead of a fall-through to another kind's engine.
    case v1::ReleaseRequest::KIND_NOT_SET:
      return absl::InvalidArgumentError(
          "release request names no kind; supported: rff_embedding, charfn_embedding");
  }
  if (dataset.row_count() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset '", dataset.id(), "' has no rows; upload rows first"));
  }
  // PEARL's private length-scale is a second Gaussian release with the same
  // noise multiplier (pearl.md section 2, "equal share"); both go in one
  // composed event.
  const bool private_length_scale = request.kind_case() == v1::ReleaseRequest::kCharfnEmbedding &&
                                    request.charfn_embedding().private_length_scale();
  const int gaussians = private_length_scale ? 2 : 1;
  switch (request.privacy_case()) {
    case v1::ReleaseRequest::kEpsilon: {
      DPC_RETURN_IF_ERROR(ValidateFinitePositive(request.epsilon(), "Epsilon"));
      DPC_ASSIGN_OR_RETURN(plan.noise_multiplier,
                           privacy::CalibrateGridGaussianNoiseMultiplier(
                               gaussians, request.epsilon(), dataset.budget().delta()));
      break;
    }
    case v1::ReleaseRequest::kNoiseMultiplier:
      DPC_RETURN_IF_ERROR(ValidateFinitePositive(request.noise_multiplier(), "Noise multiplier"));
      plan.noise_multiplier = request.noise_multiplier();
      break;
    default:
      return absl::InvalidArgumentError(
          "release request needs a privacy level: epsilon or noise_multiplier");
  }
  // One Gaussian mechanism on the whole [embedding ; counts] vector
  // (docs/privacy.md 2.2): a single event of RDP alpha / (2 s^2); with a
  // private length-scale, two such events composed. The noise is the grid's
  // discrete Gaussian (docs/privacy.md 4.2): a GridGaussian event, which
  // alone on a dataset gets the discrete Gaussian's own privacy profile
  // (docs/privacy.md 4.6) and otherwise RDP; the calibration above judges
  // that kind.
  DPC_ASSIGN_OR_RETURN(privacy::PrivacyEvent gaussian,
                       privacy::PrivacyEvent::GridGaussian(plan.noise_multiplier));
  if (gaussians == 1) {
    plan.event = gaussian;
  } else {
    DPC_ASSIGN_OR_RETURN(plan.event, privacy::PrivacyEvent::Compose({gaussian, gaussian}));
  }
  return plan;
}

absl::StatusOr<v1::Release> ComputeRelease(const ReleasePlan& plan, const v1::Dataset& dataset,
                                           const data::Schema& schema, const data::Table& rows,
                                           const std::string& release_id, double epsilon_alone,
                                           privacy::NoiseSource* noise) {
  v1::Release release;
  release.set_id(release_id);
  release.set_dataset_id(dataset.id());
  release.set_idempotency_key(plan.resolved_request.idempotency_key());
  release.set_kind(plan.kind);
  // Exhaustive (no default), like PlanRelease: each kind runs its own engine.
  switch (plan.resolved_request.kind_case()) {
    case v1::ReleaseRequest::kRffEmbedding: {
      DPC_ASSIGN_OR_RETURN(*release.mutable_embedding(),
                           EmbeddingArtefactFor(plan.resolved_request.rff_embedding(), dataset,
                                                schema, rows, plan.noise_multiplier,
                                                rows.num_rows(), noise));
      break;
    }
    case v1::ReleaseRequest::kCharfnEmbedding: {
      DPC_ASSIGN_OR_RETURN(*release.mutable_embedding(),
                           CharfnArtefactFor(plan.resolved_request.charfn_embedding(), dataset,
                                             schema, rows, plan.noise_multiplier, noise));
      break;
    }
    case v1::ReleaseRequest::KIND_NOT_SET:
      return absl::InvalidArgumentError("release plan names no kind");
  }
  release.mutable_embedding()->set_release_id(release_id);
  release.mutable_embedding()->set_epsilon(epsilon_alone);
  return release;
}

absl::StatusOr<SessionPlan> PlanSession(const v1::OpenSessionRequest& request,
                                        const v1::Dataset& dataset) {
  SessionPlan plan;
  plan.resolved_params = request.params();
  v1::SessionParams& params = plan.resolved_params;
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(params.steps(), "Session steps"));
  if (params.steps() > kMaxSessionSteps) {
    return absl::InvalidArgumentError(
        absl::StrCat("Session steps must be at most ", kMaxSessionSteps, ", got ", params.steps()));
  }
  if (!(params.sampling_rate() > 0 && params.sampling_rate() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Sampling rate must be in (0, 1], got ", params.sampling_rate()));
  }
  // The step kind (one case each; -Wswitch makes a new, unhandled case a
  // compile error in CI). Unset: rff_embedding with defaults, as clients
  // from before step kinds sent.
  if (params.step_case() == v1::SessionParams::STEP_NOT_SET) params.mutable_rff_embedding();
  switch (params.step_case()) {
    case v1::SessionParams::kRffEmbedding:
      DPC_RETURN_IF_ERROR(ResolveRffParams(params.mutable_rff_embedding()));
      DPC_RETURN_IF_ERROR(
          ValidateReleasedDimension(dataset, params.rff_embedding().num_frequencies(), true));
      break;
    case v1::SessionParams::STEP_NOT_SET:
      return absl::InternalError("session step kind was not resolved");
  }
  if (dataset.row_count() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset '", dataset.id(), "' has no rows; upload rows first"));
  }
  const auto relation = RelationFromProto(dataset.relation());
  const privacy::SamplingScheme scheme = privacy::SamplingSchemeFor(relation);
  if (relation == privacy::NeighbouringRelation::kReplaceOne) {
    // Fixed-size batches of m = floor(q n) rows: the accountant must see the
    // rate actually used, m / n (never the rounded-up one), or Wang et al.'s
    // bound would be applied to a smaller sampling rate than the real one.
    const int64_t batch = static_cast<int64_t>(
        std::floor(params.sampling_rate() * static_cast<double>(dataset.row_count())));
    if (batch < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sampling rate ", params.sampling_rate(), " times the dataset size ",
          dataset.row_count(), " is below one row; raise --sampling-rate"));
    }
    params.set_sampling_rate(static_cast<double>(batch) /
                             static_cast<double>(dataset.row_count()));
  }
  switch (params.privacy_case()) {
    case v1::SessionParams::kEpsilon: {
      DPC_RETURN_IF_ERROR(ValidateFinitePositive(params.epsilon(), "Epsilon"));
      DPC_ASSIGN_OR_RETURN(plan.noise_multiplier,
                           privacy::CalibrateSampledDiscreteGaussianNoiseMultiplier(
                               scheme, params.sampling_rate(), params.steps(), params.epsilon(),
                               dataset.budget().delta()));
      break;
    }
    case v1::SessionParams::kNoiseMultiplier:
      DPC_RETURN_IF_ERROR(ValidateFinitePositive(params.noise_multiplier(), "Noise multiplier"));
      plan.noise_multiplier = params.noise_multiplier();
      break;
    default:
      return absl::InvalidArgumentError(
          "session needs a privacy level: epsilon (for all steps) or noise_multiplier");
  }
  params.set_noise_multiplier(plan.noise_multiplier);
  plan.steps = params.steps();
  // Steps draw the grid's discrete Gaussian: charged by the bounds proven
  // for it (docs/privacy.md 4.7), stored as discrete_poisson / discrete_wor.
  DPC_ASSIGN_OR_RETURN(plan.step_event,
                       privacy::SampledGaussianEvent(scheme, params.sampling_rate(),
                                                     plan.noise_multiplier,
                                                     privacy::SampledNoise::kDiscrete));
  return plan;
}

absl::Status CheckStepQuery(const v1::SessionParams& params,
                            const v1::SessionStepRequest& request) {
  switch (params.step_case()) {
    case v1::SessionParams::kRffEmbedding:
      if (request.query_case() == v1::SessionStepRequest::QUERY_NOT_SET ||
          request.query_case() == v1::SessionStepRequest::kRffEmbedding) {
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(
          "this session's steps are rff_embedding: send an rff_embedding query or none");
    case v1::SessionParams::STEP_NOT_SET:
      break;
  }
  return absl::FailedPreconditionError("the session has no step kind");
}

namespace {

// One step's batch: fixed size without replacement (REPLACE_ONE, with its
// public size) or Poisson (ADD_REMOVE, size private), drawn with the noise
// source's randomness, which is part of the mechanism. Shared by every step
// kind: the sampling is what the step event's subsampled bound accounts.
struct StepBatch {
  data::Table rows;
  int64_t public_n = 0;
};
StepBatch SampleStepBatch(const v1::SessionParams& params, const v1::Dataset& dataset,
                          const data::Table& rows, privacy::NoiseSource* noise) {
  const int64_t n = rows.num_rows();
  std::vector<int64_t> chosen;
  StepBatch batch;
  if (dataset.relation() == v1::REPLACE_ONE) {
    // Fixed-size batch without replacement (Wang, Balle, Kasiviswanathan
    // 2019): partial Fisher-Yates with the CSPRNG.
    // floor: the batch fraction never exceeds the rate the ledger charged
    // (PlanSession resolved q to m / n exactly).
    const int64_t size = std::max<int64_t>(
        1, static_cast<int64_t>(std::floor(params.sampling_rate() * static_cast<double>(n) + 1e-9)));
    std::vector<int64_t> order(n);
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    for (int64_t i = 0; i < size; ++i) {
      const int64_t j =
          i + static_cast<int64_t>(privacy::UniformBelow(noise, static_cast<uint64_t>(n - i)));
      std::swap(order[i], order[j]);
    }
    chosen.assign(order.begin(), order.begin() + size);
    batch.public_n = size;
  } else {
    // Poisson sampling (Mironov, Talwar, Zhang 2019): each row independently
    // with probability q; the batch size stays private.
    for (int64_t i = 0; i < n; ++i) {
      if (noise->UniformOpen() < params.sampling_rate()) chosen.push_back(i);
    }
  }
  batch.rows.cells.resize(static_cast<Eigen::Index>(chosen.size()), rows.cells.cols());
  for (size_t i = 0; i < chosen.size(); ++i) batch.rows.cells.row(i) = rows.cells.row(chosen[i]);
  return batch;
}

}  // namespace

absl::StatusOr<std::string> ComputeSessionStep(const v1::Session& session,
                                               const v1::Dataset& dataset,
                                               const data::Schema& schema,
                                               const data::Table& rows,
                                               const std::string& step_id,
                                               privacy::NoiseSource* noise) {
  const v1::SessionParams& params = session.params();
  const StepBatch batch = SampleStepBatch(params, dataset, rows, noise);
  switch (params.step_case()) {
    case v1::SessionParams::kRffEmbedding: {
      DPC_ASSIGN_OR_RETURN(v1::EmbeddingArtefact artefact,
                           EmbeddingArtefactFor(params.rff_embedding(), dataset, schema,
                                                batch.rows, session.noise_multiplier(),
                                                batch.public_n, noise));
      artefact.set_release_id(step_id);
      return artefact.SerializeAsString();
    }
    case v1::SessionParams::STEP_NOT_SET:
      break;
  }
  return absl::FailedPreconditionError("the session has no step kind");
}

absl::Status SetStepAnswer(const v1::SessionParams& params, const std::string& answer,
                           v1::SessionStepResponse* response) {
  switch (params.step_case()) {
    case v1::SessionParams::kRffEmbedding:
      if (!response->mutable_batch()->ParseFromString(answer)) {
        return absl::DataLossError("stored session step does not parse");
      }
      return absl::OkStatus();
    case v1::SessionParams::STEP_NOT_SET:
      break;
  }
  return absl::FailedPreconditionError("the session has no step kind");
}

}  // namespace dpcurator::server
