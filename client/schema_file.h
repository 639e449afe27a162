#ifndef DPCURATOR_CLIENT_SCHEMA_FILE_H_
#define DPCURATOR_CLIENT_SCHEMA_FILE_H_

// Schema files as the command line reads and writes them (docs/schema.md):
// the TableSchema JSON mapping, with column type names case-insensitive
// (data::ParseColumnTypeName) and a client-only per-column marker,
// `"data_derived": true`, that `schema draft` writes on every bound and
// category list it read from rows. The marker never reaches a server:
// commands that publish a schema refuse one that still carries markers
// unless the curator passes --accept-data-derived.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/draft.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

struct SchemaFile {
  v1::TableSchema schema;  // markers stripped, validated
  // Columns still marked "data_derived": true, in declared order.
  std::vector<std::string> data_derived;
};

// Parses schema JSON. Errors start with `source`, name the column (index
// and name) and field, and list the accepted keys or type names.
absl::StatusOr<SchemaFile> ParseSchemaFileText(absl::string_view json, absl::string_view source);
absl::StatusOr<SchemaFile> ReadSchemaFileWithMarkers(const std::string& path);

// The flag that accepts marked columns, for commands that publish a schema.
inline constexpr char kAcceptDataDerivedFlag[] = "accept-data-derived";

// OK when no column is marked or `accepted`; otherwise FailedPrecondition
// naming the columns and saying how to proceed.
absl::Status CheckDataDerived(const SchemaFile& file, const std::string& path, bool accepted);

// Reads a schema a command is about to publish (datasets create, collections
// create): ReadSchemaFileWithMarkers, then CheckDataDerived; marked columns
// that are accepted are named on stderr.
absl::StatusOr<v1::TableSchema> ReadSchemaForPublishing(const std::string& path, bool accepted);
// Reads a schema for local use only (demo, eval): markers are ignored.
absl::StatusOr<v1::TableSchema> ReadSchemaForLocalUse(const std::string& path);

// A number as schema files write bounds, atoms and bin edges: a whole number
// as a JSON integer (500, not 500.0), any other as a double.
nlohmann::ordered_json SchemaNumberJson(double value);

// The draft as schema JSON (two-space indent), data-derived columns marked.
std::string DraftToSchemaJson(const data::SchemaDraft& draft);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_SCHEMA_FILE_H_
