#ifndef DPCURATOR_PROTO_RELEASE_KINDS_H_
#define DPCURATOR_PROTO_RELEASE_KINDS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/embed/charfn.h"
#include "core/embed/rff.h"
#include "core/release/charfn_embedding.h"
#include "core/release/marginals.h"
#include "core/release/rff_embedding.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator {

// The wire side of the release kinds (core/release/): the kind's one name,
// the artefact format, and each kind's parameters and results on the wire.
// Shared by the server (which runs kinds) and the client (whose trainers
// rebuild feature maps from artefacts).

// The artefact format this build writes; it reads 1 and 2.
inline constexpr uint32_t kEmbeddingArtefactFormatVersion = 2;

// A kind's one name: its ReleaseKind value in lower case ("rff_embedding"),
// which is also its case in ReleaseRequest.kind. "" for UNSPECIFIED.
std::string ReleaseKindName(v1::ReleaseKind kind);
// The inverse; RELEASE_KIND_UNSPECIFIED for any other text.
v1::ReleaseKind ReleaseKindFromName(absl::string_view name);

// The kind of an artefact: `kind` in format 2; in format 1 (written before
// ReleaseKind existed) its legacy feature-map name. FAILED_PRECONDITION
// naming both versions for a newer format (upgrade the client) and
// DATA_LOSS for a malformed one.
absl::StatusOr<v1::ReleaseKind> ArtefactKind(const v1::EmbeddingArtefact& artefact);

// Parameters: wire -> core unit, and the resolved core parameters back into
// the request that is stored with the release (so a replay is exact).
release::RffEmbeddingKind::Params ParamsFromProto(const v1::RffEmbeddingParams& params);
void ParamsToProto(const release::RffEmbeddingKind::Params& params,
                   v1::RffEmbeddingParams* proto);
release::CharfnEmbeddingKind::Params ParamsFromProto(const v1::CharfnEmbeddingParams& params);
void ParamsToProto(const release::CharfnEmbeddingKind::Params& params,
                   v1::CharfnEmbeddingParams* proto);

// Results: the kind's own fields of the artefact (feature map, and for
// PEARL the released distance), plus the shared embedding fields.
void SetArtefactFields(const release::RffEmbeddingKind::Result& result,
                       v1::EmbeddingArtefact* artefact);
void SetArtefactFields(const release::CharfnEmbeddingKind::Result& result,
                       v1::EmbeddingArtefact* artefact);

// The feature-map options a trainer rebuilds the map from: the values the
// map resolved when the server ran it. An artefact's numeric_length_scale
// of 0 means l itself (charfn).
embed::RffOptions RffOptionsFromProto(const v1::EmbeddingArtefact& artefact);
embed::CharfnOptions CharfnOptionsFromProto(const v1::EmbeddingArtefact& artefact);

// One noisy marginal table of the mst and aim artefacts, both ways (the
// server writes them, the client's fits read them).
v1::NoisyMarginalTable NoisyMarginalToProto(const release::NoisyMarginal& marginal);
release::NoisyMarginal NoisyMarginalFromProto(const v1::NoisyMarginalTable& table);

}  // namespace dpcurator

#endif  // DPCURATOR_PROTO_RELEASE_KINDS_H_
