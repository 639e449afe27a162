#include "client/schema_file.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/methods/registry.h"
#include "core/data/schema.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

using Json = nlohmann::json;

constexpr char kTopLevelKeys[] = "columns, label, dp_release";
constexpr char kColumnKeys[] =
    "name, type, lower, upper, integer, atoms, bins, categories, aliases, nullable, open, "
    "data_derived, note, and for "
    "IMAGE columns height, width, channels";
// Type names a schema file accepts beyond data::ParseColumnTypeName's: an
// image column is a schema-file (and wire) type only, never a CSV or ARFF
// column.
constexpr char kImageTypeName[] = "image";

// Finds where a JSON text stops being JSON, without exceptions: a SAX pass
// whose parse_error callback records the byte offset.
struct ErrorPosition : nlohmann::json_sax<Json> {
  size_t position = 0;
  std::string message;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t byte, const std::string&,
                   const nlohmann::detail::exception& error) override {
    position = byte;
    message = error.what();
    return false;
  }
};

std::string LineAndColumn(absl::string_view text, size_t byte) {
  int line = 1;
  int column = 1;
  for (size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return absl::StrCat(line, ":", column);
}

const char* KindName(const Json& value) { return value.type_name(); }

}  // namespace

absl::StatusOr<SchemaFile> ParseSchemaFileText(absl::string_view text, absl::string_view source) {
  auto error = [&](const std::string& where, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", where, what));
  };
  Json json = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    ErrorPosition sax;
    Json::sax_parse(text.begin(), text.end(), &sax);
    std::string detail = sax.message;
    // "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    if (auto colon = detail.find(": "); colon != std::string::npos)
      detail = detail.substr(colon + 2);
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", LineAndColumn(text, sax.position), ": not valid JSON: ", detail));
  }
  if (!json.is_object()) {
    return error("", absl::StrCat("a schema is a JSON object {\"columns\": [...], \"label\": ...}, "
                                  "got ",
                                  KindName(json)));
  }
  SchemaFile file;
  for (const auto& [key, value] : json.items()) {
    // "dp_release": where `schema fit` took the bins from (client-only
    // provenance, never sent).
    if (key == "columns" || (key == "dp_release" && value.is_object())) continue;
    if (key == "label") {
      if (!value.is_string()) return error("", "\"label\" must be a column name (a string)");
      file.schema.set_label(value.get<std::string>());
      continue;
    }
    return error("", absl::StrCat("unknown key \"", key, "\" (accepted: ", kTopLevelKeys, ")"));
  }
  if (!json.contains("columns") || !json["columns"].is_array()) {
    return error("", "\"columns\" must be a list of column objects");
  }
  int index = 0;
  for (const Json& column : json["columns"]) {
    ++index;
    std::string where = absl::StrCat("column ", index);
    if (!column.is_object())
      return error(where, absl::StrCat(": must be an object, got ", KindName(column)));
    if (column.contains("name") && column["name"].is_string()) {
      absl::StrAppend(&where, " ('", column["name"].get<std::string>(), "')");
    }
    absl::StrAppend(&where, ": ");
    v1::ColumnSchema* out = file.schema.add_columns();
    bool has_integer = false;
    for (const auto& [key, value] : column.items()) {
      if (key == "name") {
        if (!value.is_string()) return error(where, "\"name\" must be a string");
        out->set_name(value.get<std::string>());
      } else if (key == "type") {
        if (value.is_number_integer() && (value.get<int>() == v1::ColumnSchema::NUMERIC ||
                                          value.get<int>() == v1::ColumnSchema::CATEGORICAL ||
                                          value.get<int>() == v1::ColumnSchema::IMAGE)) {
          out->set_type(static_cast<v1::ColumnSchema::Type>(value.get<int>()));
          continue;
        }
        if (!value.is_string()) {
          return error(where, absl::StrCat("\"type\" must be a string (accepted: ",
                                           data::kAcceptedColumnTypeNames, ", IMAGE)"));
        }
        if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(value.get<std::string>()),
                                   kImageTypeName)) {
          out->set_type(v1::ColumnSchema::IMAGE);
          continue;
        }
        auto type = data::ParseColumnTypeName(value.get<std::string>());
        if (!type.ok()) {
          return error(where, absl::StrCat(type.status().message(),
                                           "; IMAGE for an image column"));
        }
        out->set_type(type->type == data::ColumnType::kNumeric ? v1::ColumnSchema::NUMERIC
                                                               : v1::ColumnSchema::CATEGORICAL);
        if (type->integer && !has_integer) out->set_integer(true);
      } else if (key == "lower" || key == "upper") {
        if (!value.is_number()) {
          return error(where,
                       absl::StrCat("\"", key, "\" must be a number, got ", KindName(value)));
        }
        if (key == "lower") {
          out->set_lower(value.get<double>());
        } else {
          out->set_upper(value.get<double>());
        }
      } else if (key == "note") {
        // Free text for the reader (`schema fit`'s suggested bounds), never sent.
        if (!value.is_string()) return error(where, "\"note\" must be a string");
      } else if (key == "atoms" || key == "bins") {
        // Public point masses and bin edges of a numeric column (docs/schema.md).
        if (!value.is_array()) {
          return error(where, absl::StrCat("\"", key, "\" must be a list of numbers, got ",
                                           KindName(value)));
        }
        for (const Json& number : value) {
          if (!number.is_number()) {
            return error(where, absl::StrCat("\"", key, "\" must hold numbers only, got ",
                                             number.dump()));
          }
          if (key == "atoms") {
            out->add_atoms(number.get<double>());
          } else {
            out->add_bins(number.get<double>());
          }
        }
      } else if (key == "integer" || key == "nullable" || key == "open" ||
                 key == "data_derived") {
        if (!value.is_boolean()) {
          return error(where,
                       absl::StrCat("\"", key, "\" must be true or false, got ", KindName(value)));
        }
        if (key == "integer") {
          has_integer = true;
          out->set_integer(value.get<bool>());
        } else if (key == "nullable") {
          out->set_nullable(value.get<bool>());
        } else if (key == "open") {
          // Issue 38 (docs/schema.md "Open columns"): a categorical column
          // whose category list is fitted on the server.
          out->set_open(value.get<bool>());
        } else if (value.get<bool>()) {
          file.data_derived.push_back(column.value("name", absl::StrCat("#", index)));
        }
      } else if (key == "height" || key == "width" || key == "channels") {
        if (!value.is_number_integer() || value.get<int64_t>() < 1 ||
            value.get<int64_t>() > data::kMaxImageSide) {
          return error(where, absl::StrCat("\"", key, "\" must be a whole number in [1, ",
                                           data::kMaxImageSide, "], got ", value.dump()));
        }
        const int size = static_cast<int>(value.get<int64_t>());
        if (key == "height") {
          out->mutable_image()->set_height(size);
        } else if (key == "width") {
          out->mutable_image()->set_width(size);
        } else {
          out->mutable_image()->set_channels(size);
        }
      } else if (key == "categories") {
        if (!value.is_array()) return error(where, "\"categories\" must be a list of strings");
        for (const Json& category : value) {
          if (!category.is_string()) {
            return error(where, absl::StrCat("\"categories\" must hold strings; write ",
                                             category.dump(), " as \"", category.dump(), "\""));
          }
          out->add_categories(category.get<std::string>());
        }
      } else if (key == "aliases") {
        if (!value.is_object()) {
          return error(where, "\"aliases\" must be an object {\"spelling\": \"category\"}");
        }
        for (const auto& [token, category] : value.items()) {
          if (!category.is_string()) {
            return error(where, "\"aliases\" values must be declared categories (strings)");
          }
          (*out->mutable_aliases())[token] = category.get<std::string>();
        }
      } else {
        return error(where,
                     absl::StrCat("unknown key \"", key, "\" (accepted: ", kColumnKeys, ")"));
      }
    }
    if (out->type() == v1::ColumnSchema::TYPE_UNSPECIFIED) {
      return error(where, absl::StrCat("\"type\" is missing (accepted: ",
                                       data::kAcceptedColumnTypeNames, ", IMAGE)"));
    }
    if ((out->atoms_size() > 0 || out->bins_size() > 0) &&
        out->type() != v1::ColumnSchema::NUMERIC) {
      return error(where, "\"atoms\" and \"bins\" belong to NUMERIC columns only");
    }
    if (out->open() && out->type() != v1::ColumnSchema::CATEGORICAL) {
      return error(where, "\"open\" belongs to CATEGORICAL columns only");
    }
    if (out->has_image() != (out->type() == v1::ColumnSchema::IMAGE)) {
      return error(where, out->has_image()
                              ? "\"height\", \"width\" and \"channels\" belong to IMAGE columns only"
                              : "an IMAGE column needs \"height\" and \"width\" (pixels)");
    }
    if (out->has_image() && (out->image().height() == 0 || out->image().width() == 0)) {
      return error(where, "an IMAGE column needs both \"height\" and \"width\" (pixels)");
    }
  }
  auto schema = SchemaFromProto(file.schema);
  if (!schema.ok()) return error("", std::string(schema.status().message()));
  return file;
}

absl::StatusOr<SchemaFile> ReadSchemaFileWithMarkers(const std::string& path) {
  std::ifstream input(path);
  if (!input) {
    return absl::NotFoundError(absl::StrCat("cannot open schema file '", path,
                                            "' (write one with `dpcurator schema draft`)"));
  }
  std::stringstream buffer;
  buffer << input.rdbuf();
  absl::StatusOr<SchemaFile> parsed = ParseSchemaFileText(buffer.str(), path);
  if (!parsed.ok()) {
    // A model or release file given as --schema: name it and the command
    // that takes it, not the JSON parser's complaint about its bytes.
    if (const std::string kind = DescribeFileKind(path); !kind.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " is not a schema file (JSON): it is ", kind));
    }
  }
  return parsed;
}

absl::Status CheckDataDerived(const SchemaFile& file, const std::string& path, bool accepted) {
  if (file.data_derived.empty() || accepted) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      path, ": column(s) ", absl::StrJoin(file.data_derived, ", "),
      " still carry \"data_derived\": true. `schema draft` read their bounds or categories from "
      "the rows, and registering the schema publishes them (a maximum can be one person's "
      "value). Replace them with public values (a codebook, a regulation, domain knowledge: "
      "see docs/schema.md) and delete the marker, or pass --",
      kAcceptDataDerivedFlag, " to publish them as they are."));
}

absl::StatusOr<v1::TableSchema> ReadSchemaForPublishing(const std::string& path, bool accepted) {
  auto file = ReadSchemaFileWithMarkers(path);
  if (!file.ok()) return file.status();
  if (auto status = CheckDataDerived(*file, path, accepted); !status.ok()) return status;
  if (!file->data_derived.empty()) {
    std::fprintf(stderr,
                 "dpcurator: publishing the data-derived bounds or categories of %s "
                 "(--accept-data-derived)\n",
                 absl::StrJoin(file->data_derived, ", ").c_str());
  }
  return std::move(file->schema);
}

absl::StatusOr<v1::TableSchema> ReadSchemaForLocalUse(const std::string& path) {
  auto file = ReadSchemaFileWithMarkers(path);
  if (!file.ok()) return file.status();
  return std::move(file->schema);
}

nlohmann::ordered_json SchemaNumberJson(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15) return static_cast<int64_t>(value);
  return value;
}

std::string DraftToSchemaJson(const data::SchemaDraft& draft) {
  nlohmann::ordered_json out;
  out["columns"] = nlohmann::ordered_json::array();
  for (const data::DraftColumn& column : draft.columns) {
    nlohmann::ordered_json c;
    c["name"] = column.name;
    if (column.type == data::ColumnType::kNumeric) {
      c["type"] = "NUMERIC";
      c["lower"] = SchemaNumberJson(column.lower);
      c["upper"] = SchemaNumberJson(column.upper);
      if (column.integer) c["integer"] = true;
      if (!column.atoms.empty()) c["atoms"] = column.atoms;
      // Drafted bins (issue 38) are data-derived with the bounds: the same
      // column marker covers them.
      if (!column.bins.empty()) {
        nlohmann::ordered_json bins = nlohmann::ordered_json::array();
        for (double edge : column.bins) bins.push_back(SchemaNumberJson(edge));
        c["bins"] = std::move(bins);
      }
      if (column.nullable) c["nullable"] = true;
    } else {
      c["type"] = "CATEGORICAL";
      c["categories"] = column.categories;
      if (column.nullable) c["nullable"] = true;
    }
    if (column.data_derived) c["data_derived"] = true;
    out["columns"].push_back(std::move(c));
  }
  if (draft.label.has_value()) out["label"] = *draft.label;
  return out.dump(2) + "\n";
}

}  // namespace dpcurator::client
