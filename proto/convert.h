#ifndef DPCURATOR_PROTO_CONVERT_H_
#define DPCURATOR_PROTO_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/privacy/relation.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator {

// Wire <-> core conversions shared by the server and the client.
absl::StatusOr<data::Schema> SchemaFromProto(const v1::TableSchema& proto);
v1::TableSchema SchemaToProto(const data::Schema& schema);

privacy::NeighbouringRelation RelationFromProto(v1::NeighbouringRelation relation);
v1::NeighbouringRelation RelationToProto(privacy::NeighbouringRelation relation);

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
