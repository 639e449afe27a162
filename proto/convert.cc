#include "proto/convert.h"

#include <fstream>
#include <sstream>

#include <google/protobuf/util/json_util.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpcurator {

absl::StatusOr<data::Schema> SchemaFromProto(const v1::TableSchema& proto) {
  data::Schema::Builder builder;
  for (const auto& column : proto.columns()) {
    if (column.open() && column.type() != v1::ColumnSchema::CATEGORICAL) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Column '", column.name(), "' is declared open; only categorical columns can be "
          "open (issue 38: their category list is fitted on the server)"));
    }
    switch (column.type()) {
      case v1::ColumnSchema::NUMERIC:
        builder.AddNumeric(column.name(), column.lower(), column.upper(), column.integer(),
                           column.nullable());
        if (!column.atoms().empty()) {
          builder.SetAtoms(column.name(),
                           std::vector<double>(column.atoms().begin(), column.atoms().end()));
        }
        if (!column.bins().empty()) {
          builder.SetBins(column.name(),
                          std::vector<double>(column.bins().begin(), column.bins().end()));
        }
        break;
      case v1::ColumnSchema::CATEGORICAL: {
        std::vector<std::string> categories(column.categories().begin(),
                                            column.categories().end());
        if (column.open()) {
          builder.AddOpenCategorical(column.name(), std::move(categories), column.nullable());
        } else {
          builder.AddCategorical(column.name(), std::move(categories), column.nullable());
        }
        // Sorted, so that the schema (and its fingerprint) is canonical.
        std::map<std::string, std::string> aliases(column.aliases().begin(),
                                                   column.aliases().end());
        for (const auto& [token, category] : aliases) {
          builder.AddAlias(column.name(), token, category);
        }
        break;
      }
      case v1::ColumnSchema::IMAGE:
        builder.AddImage(column.name(), column.image().height(), column.image().width(),
                         column.image().channels() == 0 ? 1 : column.image().channels());
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "Column '", column.name(), "' needs a type: NUMERIC, CATEGORICAL or IMAGE"));
    }
  }
  if (!proto.label().empty()) builder.SetLabel(proto.label());
  return builder.Build();
}

v1::TableSchema SchemaToProto(const data::Schema& schema) {
  v1::TableSchema proto;
  for (const data::Column& column : schema.columns()) {
    auto* out = proto.add_columns();
    out->set_name(column.name);
    if (column.type == data::ColumnType::kImage) {
      out->set_type(v1::ColumnSchema::IMAGE);
      out->mutable_image()->set_height(column.image_height);
      out->mutable_image()->set_width(column.image_width);
      out->mutable_image()->set_channels(column.image_channels);
    } else if (column.type == data::ColumnType::kNumeric) {
      out->set_type(v1::ColumnSchema::NUMERIC);
      out->set_lower(column.lower);
      out->set_upper(column.upper);
      out->set_integer(column.integer);
      for (double atom : column.atoms) out->add_atoms(atom);
      for (double edge : column.bins) out->add_bins(edge);
      out->set_nullable(column.nullable);
    } else {
      out->set_type(v1::ColumnSchema::CATEGORICAL);
      for (const auto& category : column.categories) out->add_categories(category);
      for (const auto& [token, category] : column.aliases) (*out->mutable_aliases())[token] = category;
      out->set_nullable(column.nullable);
      // proto3: false is not serialised, so a closed column's bytes stay.
      out->set_open(column.open);
    }
  }
  if (schema.label_index().has_value()) {
    proto.set_label(schema.column(*schema.label_index()).name);
  }
  return proto;
}

privacy::NeighbouringRelation RelationFromProto(v1::NeighbouringRelation relation) {
  return relation == v1::REPLACE_ONE ? privacy::NeighbouringRelation::kReplaceOne
                                     : privacy::NeighbouringRelation::kAddRemove;
}

v1::NeighbouringRelation RelationToProto(privacy::NeighbouringRelation relation) {
  return relation == privacy::NeighbouringRelation::kReplaceOne ? v1::REPLACE_ONE
                                                                : v1::ADD_REMOVE;
}

absl::StatusOr<v1::TableSchema> ParseSchemaJson(absl::string_view json) {
  v1::TableSchema proto;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &proto, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not a valid TableSchema JSON: ",
                                                   std::string(status.message())));
  }
  auto schema = SchemaFromProto(proto);
  if (!schema.ok()) return schema.status();
  return proto;
}

absl::StatusOr<v1::TableSchema> ReadSchemaFile(const std::string& path) {
  std::ifstream input(path);
  if (!input) return absl::NotFoundError(absl::StrCat("cannot open schema file '", path, "'"));
  std::stringstream buffer;
  buffer << input.rdbuf();
  auto proto = ParseSchemaJson(buffer.str());
  if (!proto.ok()) {
    return absl::Status(proto.status().code(),
                        absl::StrCat("schema file '", path, "': ", proto.status().message()));
  }
  return proto;
}

const char* RoleProtoName(v1::Role role) {
  switch (role) {
    case v1::ROLE_CURATOR:
      return "curator";
    case v1::ROLE_ANALYST:
      return "analyst";
    case v1::ROLE_DEVICE:
      return "device";
    default:
      return "";
  }
}

v1::Role RoleProtoFromName(absl::string_view name) {
  for (v1::Role role : {v1::ROLE_CURATOR, v1::ROLE_ANALYST, v1::ROLE_DEVICE}) {
    if (name == RoleProtoName(role)) return role;
  }
  return v1::ROLE_UNSPECIFIED;
}

}  // namespace dpcurator
