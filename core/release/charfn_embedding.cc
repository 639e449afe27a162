#include "core/release/charfn_embedding.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/embed/frequency_bounds.h"
#include "core/embed/rff.h"
#include "core/release/labelled_release.h"
#include "core/util/status_macros.h"

namespace dpcurator::release {

absl::StatusOr<CharfnEmbeddingKind::Params> CharfnEmbeddingKind::Resolve(
    Params params, const data::Schema& schema) {
  const int default_frequencies =
      schema.image_index().has_value() ? kImageCharfnFrequencies : kDefaultNumFrequencies;
  DPC_RETURN_IF_ERROR(ResolveFrequencyParams(&params.num_frequencies, default_frequencies,
                                             params.length_scale, &params.seed));
  if (params.private_length_scale && params.length_scale > 0) {
    return absl::InvalidArgumentError(
        "give either a declared length_scale or private_length_scale, not both");
  }
  // NaN would pass as "< 0" (the same as length_scale) and inf would fail
  // only in the engine, after the ledger charged: refuse both here.
  if (!std::isfinite(params.numeric_length_scale)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "numeric_length_scale must be finite (> 0 declared, 0 = schema default, < 0 = the "
        "same as length_scale), got ",
        params.numeric_length_scale));
  }
  if (params.numeric_length_scale > 0) {
    DPC_RETURN_IF_ERROR(
        embed::ValidateLengthScale(params.numeric_length_scale, "numeric_length_scale"));
  }
  DPC_RETURN_IF_ERROR(
      ValidateReleasedDimension(params.num_frequencies, 0, schema.num_classes()));
  // T is num_frequencies x total_dim (embed::CharacteristicFunctionMap).
  DPC_RETURN_IF_ERROR(ValidateFrequencyMatrix(
      params.num_frequencies, data::FeatureLayout::ForFeatures(schema).total_dim()));
  return params;
}

GaussianMechanismRecord CharfnEmbeddingKind::Plan(const Params& resolved,
                                                  double noise_multiplier) {
  GaussianMechanismRecord planned;
  if (resolved.private_length_scale) planned.noise_multipliers.push_back(noise_multiplier);
  planned.noise_multipliers.push_back(noise_multiplier);
  return planned;
}

absl::Status CharfnEmbeddingKind::CheckNoise(const Params& resolved,
                                            const data::FeatureLayout& layout, int num_classes,
                                            privacy::NeighbouringRelation relation,
                                            double noise_multiplier, int64_t public_n) {
  if (resolved.private_length_scale) {
    DPC_RETURN_IF_ERROR(embed::MeanDistanceNoise(embed::DistanceEstimator::kHashChain, relation,
                                                 embed::EncodedRowDiameter(layout),
                                                 noise_multiplier, public_n)
                            .status());
  }
  // CharacteristicFunctionMap::output_dim(): cos and sin per frequency.
  return LabelledEmbeddingNoise(relation, noise_multiplier, public_n,
                                2 * int64_t{resolved.num_frequencies}, num_classes)
      .status();
}

namespace {

// The map's options but for l (declared, default, or released later).
embed::CharfnOptions OptionsOf(const CharfnEmbeddingKind::Params& resolved,
                               const data::FeatureLayout& layout) {
  embed::CharfnOptions options;
  options.num_frequencies = resolved.num_frequencies;
  options.seed = resolved.seed;
  if (resolved.numeric_length_scale > 0) {
    options.numeric_length_scale = resolved.numeric_length_scale;
  } else if (resolved.numeric_length_scale == 0) {
    options.numeric_length_scale = embed::DefaultLengthScale(layout);
  }  // < 0: 0, the numeric block uses l itself
  return options;
}

// The noise step both Run and ReleaseExact end with: the labelled
// embedding's one Gaussian over the exact statistic (docs/privacy.md 2.2),
// recorded in `ran`.
absl::Status NoiseEmbedding(const embed::CharacteristicFunctionMap& feature_map,
                            const embed::LabelledEmbeddingAccumulator& exact, int num_classes,
                            privacy::NeighbouringRelation relation, double noise_multiplier,
                            int64_t public_n, privacy::NoiseSource* noise,
                            CharfnEmbeddingKind::Result* result) {
  if (exact.sums().rows() != feature_map.output_dim() || exact.sums().cols() != num_classes ||
      exact.counts().size() != num_classes) {
    return absl::InvalidArgumentError(
        "the exact statistic's shape is not this release's (features x classes)");
  }
  DPC_ASSIGN_OR_RETURN(result->embedding, embed::ReleaseLabelledEmbedding(
                                              exact, relation, noise_multiplier, public_n, noise));
  result->ran.noise_multipliers.push_back(result->embedding.noise_multiplier);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CharfnEmbeddingKind::Prepared> CharfnEmbeddingKind::Prepare(
    const Params& resolved, const data::FeatureLayout& layout) {
  DPC_ASSIGN_OR_RETURN(embed::CharacteristicFunctionMap feature_map,
                       embed::CharacteristicFunctionMap::CreateUnscaled(
                           layout, OptionsOf(resolved, layout)));
  return Prepared{resolved, std::move(feature_map)};
}

absl::StatusOr<CharfnEmbeddingKind::Result> CharfnEmbeddingKind::Run(
    const Params& resolved, const EncodedRows& rows, privacy::NeighbouringRelation relation,
    double noise_multiplier, int64_t public_n, privacy::NoiseSource* noise) {
  DPC_ASSIGN_OR_RETURN(Prepared prepared, Prepare(resolved, rows.layout));
  return Run(std::move(prepared), rows, relation, noise_multiplier, public_n, noise);
}

absl::StatusOr<CharfnEmbeddingKind::Result> CharfnEmbeddingKind::Run(
    Prepared prepared, const EncodedRows& rows, privacy::NeighbouringRelation relation,
    double noise_multiplier, int64_t public_n, privacy::NoiseSource* noise) {
  const Params& resolved = prepared.resolved;
  const data::FeatureLayout& layout = rows.layout;
  // The plan's own check (a no-op after PlanRelease passed it).
  DPC_RETURN_IF_ERROR(
      CheckNoise(resolved, layout, rows.num_classes, relation, noise_multiplier, public_n));
  Result result;
  result.row_diameter = embed::EncodedRowDiameter(layout);
  double length_scale = DeclaredLengthScale(resolved, layout);
  if (resolved.private_length_scale) {
    // The hash-chain mean distance (docs/privacy.md 2.5), released first;
    // its noisy value sets l (pearl.md 1.2 B).
    DPC_ASSIGN_OR_RETURN(auto chain,
                         embed::ChainDistanceAccumulator::Create(
                             layout.total_dim(), result.row_diameter, resolved.seed));
    DPC_RETURN_IF_ERROR(chain.Add(rows.features));
    DPC_ASSIGN_OR_RETURN(result.distance,
                         embed::ReleaseMeanDistance(chain.Finish(),
                                                    embed::DistanceEstimator::kHashChain, relation,
                                                    result.row_diameter, noise_multiplier,
                                                    public_n, noise));
    // Always inside the accepted range (LengthScaleFromMeanDistance), so
    // SetLengthScale below cannot refuse it.
    length_scale = embed::LengthScaleFromMeanDistance(embed::NoisyMeanDistance(*result.distance),
                                                      result.row_diameter);
    result.ran.noise_multipliers.push_back(result.distance->noise_multiplier);
  }
  embed::CharacteristicFunctionMap& feature_map = prepared.feature_map;
  DPC_ASSIGN_OR_RETURN(result.feature_map,
                       ScaleFeatureMap(resolved, layout, length_scale, &feature_map));
  DPC_ASSIGN_OR_RETURN(const embed::LabelledEmbeddingAccumulator exact,
                       ExactLabelledEmbedding(feature_map, rows));
  DPC_RETURN_IF_ERROR(NoiseEmbedding(feature_map, exact, rows.num_classes, relation,
                                     noise_multiplier, public_n, noise, &result));
  return result;
}

absl::StatusOr<CharfnEmbeddingKind::Result> CharfnEmbeddingKind::ReleaseExact(
    Prepared prepared, const embed::LabelledEmbeddingAccumulator& exact,
    const data::FeatureLayout& layout, int num_classes, privacy::NeighbouringRelation relation,
    double noise_multiplier, int64_t public_n, privacy::NoiseSource* noise) {
  const Params& resolved = prepared.resolved;
  if (resolved.private_length_scale) {
    return absl::FailedPreconditionError(
        "charfn_embedding with private_length_scale releases its length-scale from the rows "
        "first; an exact statistic computed elsewhere cannot be released with it");
  }
  DPC_RETURN_IF_ERROR(
      CheckNoise(resolved, layout, num_classes, relation, noise_multiplier, public_n));
  Result result;
  result.row_diameter = embed::EncodedRowDiameter(layout);
  embed::CharacteristicFunctionMap& feature_map = prepared.feature_map;
  DPC_ASSIGN_OR_RETURN(result.feature_map,
                       ScaleFeatureMap(resolved, layout, DeclaredLengthScale(resolved, layout),
                                       &feature_map));
  DPC_RETURN_IF_ERROR(NoiseEmbedding(feature_map, exact, num_classes, relation, noise_multiplier,
                                     public_n, noise, &result));
  return result;
}

double CharfnEmbeddingKind::DeclaredLengthScale(const Params& resolved,
                                                const data::FeatureLayout& layout) {
  return resolved.length_scale > 0 ? resolved.length_scale
                                   : embed::DefaultCharfnLengthScale(layout);
}

absl::StatusOr<embed::CharfnOptions> CharfnEmbeddingKind::ScaleFeatureMap(
    const Params& resolved, const data::FeatureLayout& layout, double length_scale,
    embed::CharacteristicFunctionMap* feature_map) {
  embed::CharfnOptions options = OptionsOf(resolved, layout);
  options.length_scale = length_scale;
  DPC_RETURN_IF_ERROR(feature_map->SetLengthScale(options.length_scale,
                                                  options.numeric_length_scale));
  options.length_scale = feature_map->length_scale();
  options.numeric_length_scale = feature_map->numeric_length_scale();
  options.num_frequencies = feature_map->num_frequencies();
  return options;
}

absl::StatusOr<embed::CharacteristicFunctionMap> CharfnEmbeddingKind::FeatureMap(
    const data::FeatureLayout& layout, const embed::CharfnOptions& released) {
  return embed::CharacteristicFunctionMap::Create(layout, released);
}

}  // namespace dpcurator::release
