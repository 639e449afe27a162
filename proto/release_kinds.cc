#include "proto/release_kinds.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace dpcurator {
namespace {

// The fields every labelled-embedding result shares.
void SetEmbeddingFields(const embed::NoisyLabelledEmbedding& noisy,
                        v1::EmbeddingArtefact* artefact) {
  artefact->set_feature_dim(static_cast<int32_t>(noisy.class_values.rows()));
  artefact->set_num_classes(static_cast<int32_t>(noisy.class_totals.size()));
  artefact->mutable_class_values()->Assign(noisy.class_values.data(),
                                           noisy.class_values.data() + noisy.class_values.size());
  artefact->mutable_class_totals()->Assign(noisy.class_totals.data(),
                                           noisy.class_totals.data() + noisy.class_totals.size());
  artefact->set_public_n(noisy.public_n);
  artefact->set_sensitivity(noisy.sensitivity);
  artefact->set_noise_multiplier(noisy.noise_multiplier);
  artefact->set_noise_stddev(noisy.noise_stddev);
}

}  // namespace

std::string ReleaseKindName(v1::ReleaseKind kind) {
  if (kind == v1::RELEASE_KIND_UNSPECIFIED || !v1::ReleaseKind_IsValid(kind)) return "";
  return absl::AsciiStrToLower(v1::ReleaseKind_Name(kind));
}

v1::ReleaseKind ReleaseKindFromName(absl::string_view name) {
  v1::ReleaseKind kind;
  if (name.empty() || name != absl::AsciiStrToLower(name) ||
      !v1::ReleaseKind_Parse(absl::AsciiStrToUpper(name), &kind)) {
    return v1::RELEASE_KIND_UNSPECIFIED;
  }
  return kind;
}

absl::StatusOr<v1::ReleaseKind> ArtefactKind(const v1::EmbeddingArtefact& artefact) {
  switch (artefact.format_version()) {
    case 1: {
      // Format 1 named the feature map instead of the kind.
      const std::string& legacy = artefact.legacy_feature_map();
      if (legacy == "rff") return v1::RFF_EMBEDDING;
      if (legacy == "charfn") return v1::CHARFN_EMBEDDING;
      return absl::DataLossError("format-1 artefact names no known feature map; fetch it again");
    }
    case kEmbeddingArtefactFormatVersion:
      if (artefact.kind() == v1::RELEASE_KIND_UNSPECIFIED) {
        return absl::DataLossError("artefact names no release kind; fetch it again");
      }
      return artefact.kind();
    default:
      break;
  }
  if (artefact.format_version() > kEmbeddingArtefactFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "artefact format ", artefact.format_version(), " is newer than this dpcurator reads (1 to ",
        kEmbeddingArtefactFormatVersion, "); upgrade the dpcurator client"));
  }
  return absl::DataLossError("artefact has no format version; fetch it again");
}

release::RffEmbeddingKind::Params ParamsFromProto(const v1::RffEmbeddingParams& params) {
  release::RffEmbeddingKind::Params core;
  core.num_frequencies = params.num_frequencies();
  core.length_scale = params.length_scale();
  if (params.has_numeric_weight()) core.numeric_weight = params.numeric_weight();
  core.seed = params.seed();
  return core;
}

void ParamsToProto(const release::RffEmbeddingKind::Params& params,
                   v1::RffEmbeddingParams* proto) {
  proto->set_num_frequencies(params.num_frequencies);
  proto->set_length_scale(params.length_scale);
  proto->set_has_numeric_weight(params.numeric_weight.has_value());
  proto->set_numeric_weight(params.numeric_weight.value_or(0.0));
  proto->set_seed(params.seed);
}

release::CharfnEmbeddingKind::Params ParamsFromProto(const v1::CharfnEmbeddingParams& params) {
  release::CharfnEmbeddingKind::Params core;
  core.num_frequencies = params.num_frequencies();
  core.length_scale = params.length_scale();
  core.private_length_scale = params.private_length_scale();
  core.numeric_length_scale = params.numeric_length_scale();
  core.seed = params.seed();
  return core;
}

void ParamsToProto(const release::CharfnEmbeddingKind::Params& params,
                   v1::CharfnEmbeddingParams* proto) {
  proto->set_num_frequencies(params.num_frequencies);
  proto->set_length_scale(params.length_scale);
  proto->set_private_length_scale(params.private_length_scale);
  proto->set_numeric_length_scale(params.numeric_length_scale);
  proto->set_seed(params.seed);
}

void SetArtefactFields(const release::RffEmbeddingKind::Result& result,
                       v1::EmbeddingArtefact* artefact) {
  SetEmbeddingFields(result.embedding, artefact);
  artefact->set_kind(v1::RFF_EMBEDDING);
  artefact->set_seed(result.feature_map.seed);
  artefact->set_num_frequencies(result.feature_map.num_frequencies);
  artefact->set_length_scale(result.feature_map.length_scale);
  artefact->set_numeric_weight(result.feature_map.numeric_weight);
}

void SetArtefactFields(const release::CharfnEmbeddingKind::Result& result,
                       v1::EmbeddingArtefact* artefact) {
  SetEmbeddingFields(result.embedding, artefact);
  artefact->set_kind(v1::CHARFN_EMBEDDING);
  artefact->set_seed(result.feature_map.seed);
  artefact->set_num_frequencies(result.feature_map.num_frequencies);
  artefact->set_length_scale(result.feature_map.length_scale);
  artefact->set_row_diameter(result.row_diameter);
  artefact->set_numeric_length_scale(result.feature_map.numeric_length_scale);
  if (result.distance.has_value()) {
    artefact->set_length_scale_private(true);
    artefact->set_noisy_mean_distance(embed::NoisyMeanDistance(*result.distance));
    artefact->set_distance_sensitivity(result.distance->sensitivity);
  }
}

embed::RffOptions RffOptionsFromProto(const v1::EmbeddingArtefact& artefact) {
  embed::RffOptions options;
  options.num_frequencies = artefact.num_frequencies();
  options.length_scale = artefact.length_scale();
  options.numeric_weight = artefact.numeric_weight();
  options.seed = artefact.seed();
  return options;
}

embed::CharfnOptions CharfnOptionsFromProto(const v1::EmbeddingArtefact& artefact) {
  embed::CharfnOptions options;
  options.num_frequencies = artefact.num_frequencies();
  options.length_scale = artefact.length_scale();
  options.seed = artefact.seed();
  options.numeric_length_scale = artefact.numeric_length_scale();
  return options;
}

v1::NoisyMarginalTable NoisyMarginalToProto(const release::NoisyMarginal& marginal) {
  v1::NoisyMarginalTable table;
  for (const int c : marginal.clique) table.add_clique(c);
  for (const int s : marginal.shape) table.add_shape(s);
  table.mutable_counts()->Add(marginal.counts.data(),
                              marginal.counts.data() + marginal.counts.size());
  table.set_noise_std(marginal.noise_std);
  return table;
}

release::NoisyMarginal NoisyMarginalFromProto(const v1::NoisyMarginalTable& table) {
  release::NoisyMarginal marginal;
  marginal.clique.assign(table.clique().begin(), table.clique().end());
  marginal.shape.assign(table.shape().begin(), table.shape().end());
  marginal.counts = Eigen::Map<const Eigen::VectorXd>(table.counts().data(), table.counts_size());
  marginal.noise_std = table.noise_std();
  return marginal;
}

}  // namespace dpcurator
