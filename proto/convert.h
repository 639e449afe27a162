#ifndef DPCURATOR_PROTO_CONVERT_H_
#define DPCURATOR_PROTO_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/privacy/relation.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator {

// Wire <-> core conversions shared by the server and the client.
absl::StatusOr<data::Schema> SchemaFromProto(const v1::TableSchema& proto);
v1::TableSchema SchemaToProto(const data::Schema& schema);

privacy::NeighbouringRelation RelationFromProto(v1::NeighbouringRelation relation);
v1::NeighbouringRelation RelationToProto(privacy::NeighbouringRelation relation);

// Reads a schema file: JSON in the TableSchema message's JSON mapping (see
// schemas/adult.schema.json), validated.
absl::StatusOr<v1::TableSchema> ReadSchemaFile(const std::string& path);

}  // namespace dpcurator

#endif  // DPCURATOR_PROTO_CONVERT_H_
