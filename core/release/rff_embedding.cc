#include "core/release/rff_embedding.h"

#include "core/release/labelled_release.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::release {
namespace {

embed::RffOptions OptionsOf(const RffEmbeddingKind::Params& params) {
  embed::RffOptions options;
  options.num_frequencies = params.num_frequencies;
  options.length_scale = params.length_scale;  // 0: the schema default
  options.numeric_weight = params.numeric_weight.value_or(-1.0);  // < 0: the default
  options.seed = params.seed;
  return options;
}

}  // namespace

absl::StatusOr<RffEmbeddingKind::Params> RffEmbeddingKind::Resolve(Params params,
                                                                   const data::Schema& schema) {
  const int default_frequencies =
      schema.image_index().has_value() ? kImageRffFrequencies : kDefaultNumFrequencies;
  DPC_RETURN_IF_ERROR(ResolveFrequencyParams(&params.num_frequencies, default_frequencies,
                                             params.length_scale, &params.seed));
  if (params.numeric_weight.has_value()) {
    DPC_RETURN_IF_ERROR(ValidateInUnitInterval(*params.numeric_weight, "numeric_weight"));
  }
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  DPC_RETURN_IF_ERROR(ValidateReleasedDimension(params.num_frequencies, layout.categorical_dim,
                                                schema.num_classes()));
  // W is num_frequencies x numeric_dim (embed::RandomFourierFeatureMap).
  DPC_RETURN_IF_ERROR(ValidateFrequencyMatrix(params.num_frequencies, layout.numeric_dim));
  return params;
}

GaussianMechanismRecord RffEmbeddingKind::Plan(const Params& /*resolved*/,
                                               double noise_multiplier) {
  return GaussianMechanismRecord{{noise_multiplier}};
}

absl::Status RffEmbeddingKind::CheckNoise(const Params& resolved,
                                         const data::FeatureLayout& layout, int num_classes,
                                         privacy::NeighbouringRelation relation,
                                         double noise_multiplier, int64_t public_n) {
  // RandomFourierFeatureMap::output_dim(): cos and sin per frequency, and
  // the categorical block.
  const int64_t feature_dim = 2 * int64_t{resolved.num_frequencies} + layout.categorical_dim;
  return LabelledEmbeddingNoise(relation, noise_multiplier, public_n, feature_dim, num_classes)
      .status();
}

absl::StatusOr<RffEmbeddingKind::Prepared> RffEmbeddingKind::Prepare(
    const Params& resolved, const data::FeatureLayout& layout) {
  DPC_ASSIGN_OR_RETURN(embed::RandomFourierFeatureMap feature_map,
                       embed::RandomFourierFeatureMap::Create(layout, OptionsOf(resolved)));
  return Prepared{resolved, std::move(feature_map)};
}

absl::StatusOr<RffEmbeddingKind::Result> RffEmbeddingKind::Run(
    const Params& resolved, const EncodedRows& rows, privacy::NeighbouringRelation relation,
    double noise_multiplier, int64_t public_n, privacy::NoiseSource* noise) {
  DPC_ASSIGN_OR_RETURN(const Prepared prepared, Prepare(resolved, rows.layout));
  return Run(prepared, rows, relation, noise_multiplier, public_n, noise);
}

absl::StatusOr<RffEmbeddingKind::Result> RffEmbeddingKind::Run(
    const Prepared& prepared, const EncodedRows& rows, privacy::NeighbouringRelation relation,
    double noise_multiplier, int64_t public_n, privacy::NoiseSource* noise) {
  // The plan's own check (a no-op after PlanRelease / PlanSession passed),
  // before the rows are embedded.
  DPC_RETURN_IF_ERROR(CheckNoise(prepared.resolved, rows.layout, rows.num_classes, relation,
                                 noise_multiplier, public_n));
  DPC_ASSIGN_OR_RETURN(const embed::LabelledEmbeddingAccumulator exact,
                       ExactLabelledEmbedding(prepared.feature_map, rows));
  return ReleaseExact(prepared, exact, rows.layout, rows.num_classes, relation, noise_multiplier,
                      public_n, noise);
}

absl::StatusOr<RffEmbeddingKind::Result> RffEmbeddingKind::ReleaseExact(
    const Prepared& prepared, const embed::LabelledEmbeddingAccumulator& exact,
    const data::FeatureLayout& layout, int num_classes, privacy::NeighbouringRelation relation,
    double noise_multiplier, int64_t public_n, privacy::NoiseSource* noise) {
  const Params& resolved = prepared.resolved;
  const embed::RandomFourierFeatureMap& feature_map = prepared.feature_map;
  DPC_RETURN_IF_ERROR(
      CheckNoise(resolved, layout, num_classes, relation, noise_multiplier, public_n));
  if (exact.sums().rows() != feature_map.output_dim() || exact.sums().cols() != num_classes ||
      exact.counts().size() != num_classes) {
    return absl::InvalidArgumentError(
        "the exact statistic's shape is not this release's (features x classes)");
  }
  Result result;
  DPC_ASSIGN_OR_RETURN(result.embedding, embed::ReleaseLabelledEmbedding(
                                             exact, relation, noise_multiplier, public_n, noise));
  result.feature_map.num_frequencies = feature_map.num_frequencies();
  result.feature_map.length_scale = feature_map.length_scale();
  result.feature_map.numeric_weight = feature_map.numeric_weight();
  result.feature_map.seed = resolved.seed;
  result.ran.noise_multipliers = {result.embedding.noise_multiplier};
  return result;
}

absl::StatusOr<embed::RandomFourierFeatureMap> RffEmbeddingKind::FeatureMap(
    const data::FeatureLayout& layout, const embed::RffOptions& released) {
  return embed::RandomFourierFeatureMap::Create(layout, released);
}

}  // namespace dpcurator::release
