#ifndef DPCURATOR_PROTO_CONVERT_H_
#define DPCURATOR_PROTO_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/embed/charfn.h"
#include "core/embed/rff.h"
#include "core/privacy/relation.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator {

// Wire <-> core conversions shared by the server and the client.
absl::StatusOr<data::Schema> SchemaFromProto(const v1::TableSchema& proto);
v1::TableSchema SchemaToProto(const data::Schema& schema);

privacy::NeighbouringRelation RelationFromProto(v1::NeighbouringRelation relation);
v1::NeighbouringRelation RelationToProto(privacy::NeighbouringRelation relation);

// Feature-map options, the one place a map's wire fields become core
// options: from a request (the server builds the map it releases through) or
// from an artefact (a trainer rebuilds that same map). Requests use 0 / unset
// for "default"; artefacts record the values the map resolved.
//
// Random features (DP-MERF): an unset numeric_weight asks for the default.
embed::RffOptions RffOptionsFromProto(const v1::RffEmbeddingParams& params);
embed::RffOptions RffOptionsFromProto(const v1::EmbeddingArtefact& artefact);
// Characteristic function (PEARL) with the length-scale the server resolved
// (declared, schema default, or released); the numeric block's scale is the
// declared one, the schema-only default DefaultLengthScale(layout) for 0
// (docs/privacy.md 2.5), or l itself for < 0.
embed::CharfnOptions CharfnOptionsFromProto(const v1::CharfnEmbeddingParams& params,
                                            const data::FeatureLayout& layout,
                                            double length_scale);
// An artefact's numeric_length_scale of 0 means l itself.
embed::CharfnOptions CharfnOptionsFromProto(const v1::EmbeddingArtefact& artefact);

// A wire role's name as tokens, the audit table and the CLI spell it:
// "curator", "analyst", "device"; "" for ROLE_UNSPECIFIED.
const char* RoleProtoName(v1::Role role);
// The inverse: ROLE_UNSPECIFIED for any other text.
v1::Role RoleProtoFromName(absl::string_view name);

// Parses schema JSON text in the TableSchema message's JSON mapping (see
// schemas/adult.schema.json) and validates it as SchemaFromProto does.
// Unknown fields are errors (a misspelt "nullable" must not be ignored).
absl::StatusOr<v1::TableSchema> ParseSchemaJson(absl::string_view json);

// Reads a schema file with ParseSchemaJson; errors name the file.
absl::StatusOr<v1::TableSchema> ReadSchemaFile(const std::string& path);

}  // namespace dpcurator

#endif  // DPCURATOR_PROTO_CONVERT_H_
