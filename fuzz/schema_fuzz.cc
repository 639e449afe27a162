// Fuzz target: schema parsing, as JSON (schema files, ParseSchemaJson) and
// as a binary TableSchema (what CreateDataset and CreateCollection receive).
//
// Input: text starting with '{' (after optional whitespace) is JSON; anything
// else is parsed as a serialized TableSchema.
//
// Invariants of an accepted schema, beyond "no crash":
// - SchemaToProto / SchemaFromProto round-trips: same columns, bounds,
//   categories, aliases, label and fingerprint;
// - every declared category and alias parses (ParseCell) to its level, every
//   level's FormatCell text parses back to that level, and a nullable
//   column's missing token lands on the missing level;
// - the declared bounds parse to themselves without clamping;
// - encoding the rows at the bounds gives finite features in [0, 1] with
//   one 1 per categorical block, whose norm is within the collection's
//   default radius (proto/collection.cc), and a collection built on the
//   schema has the encoder's dimension.

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "absl/strings/ascii.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "fuzz/fuzz_check.h"
#include "proto/collection.h"
#include "proto/convert.h"

namespace {

using dpcurator::data::ColumnType;
using dpcurator::data::Schema;

void CheckSameSchema(const Schema& a, const Schema& b) {
  DPC_FUZZ_CHECK(a.num_columns() == b.num_columns(), "%d vs %d columns", a.num_columns(),
                 b.num_columns());
  DPC_FUZZ_CHECK(a.label_index() == b.label_index(), "label differs");
  DPC_FUZZ_CHECK(a.Fingerprint() == b.Fingerprint(), "fingerprint differs");
  for (int c = 0; c < a.num_columns(); ++c) {
    const auto& x = a.column(c);
    const auto& y = b.column(c);
    DPC_FUZZ_CHECK(x.name == y.name && x.type == y.type && x.nullable == y.nullable &&
                       x.categories == y.categories,
                   "column %d differs", c);
    if (x.type == ColumnType::kNumeric) {
      DPC_FUZZ_CHECK(x.lower == y.lower && x.upper == y.upper && x.integer == y.integer,
                     "bounds of column %d differ", c);
    }
    std::map<std::string, std::string> ax(x.aliases.begin(), x.aliases.end());
    std::map<std::string, std::string> ay(y.aliases.begin(), y.aliases.end());
    DPC_FUZZ_CHECK(ax == ay, "aliases of column %d differ", c);
  }
}

void CheckCells(const Schema& schema) {
  for (int c = 0; c < schema.num_columns(); ++c) {
    const auto& column = schema.column(c);
    if (column.type == ColumnType::kNumeric) {
      for (double bound : {column.lower, column.upper}) {
        // Through text, as an upload carries it ("%.17g" is exact).
        char text[64];
        std::snprintf(text, sizeof(text), "%.17g", bound);
        auto cell = schema.ParseCell(c, text);
        DPC_FUZZ_CHECK(cell.ok() && cell->value == bound && !cell->clamped,
                       "bound %s of column '%s' does not parse to itself", text,
                       column.name.c_str());
      }
      continue;
    }
    const int levels = schema.NumLevels(c);
    DPC_FUZZ_CHECK(levels == static_cast<int>(column.categories.size()) + (column.nullable ? 1 : 0),
                   "levels of column '%s'", column.name.c_str());
    for (int level = 0; level < static_cast<int>(column.categories.size()); ++level) {
      auto cell = schema.ParseCell(c, column.categories[level]);
      DPC_FUZZ_CHECK(cell.ok() && cell->value == level,
                     "category %d of column '%s' does not parse to its level", level,
                     column.name.c_str());
      auto formatted = schema.ParseCell(c, schema.FormatCell(c, level));
      DPC_FUZZ_CHECK(formatted.ok() && formatted->value == level,
                     "FormatCell of level %d of column '%s' does not parse back", level,
                     column.name.c_str());
    }
    for (const auto& [token, target] : column.aliases) {
      const auto it = std::find(column.categories.begin(), column.categories.end(), target);
      DPC_FUZZ_CHECK(it != column.categories.end(), "alias to an undeclared category");
      auto cell = schema.ParseCell(c, token);
      // A token that is itself a category or a missing token wins over the
      // alias (ParseCell's order); otherwise the alias decides.
      if (cell.ok()) continue;
      bool shadowed = false;
      for (const auto& m : schema.missing_tokens()) shadowed = shadowed || m == token;
      DPC_FUZZ_CHECK(shadowed, "alias '%s' of column '%s' does not parse", token.c_str(),
                     column.name.c_str());
    }
    if (column.nullable) {
      auto missing = schema.ParseCell(c, "?");
      DPC_FUZZ_CHECK(missing.ok() && missing->value == levels - 1, "missing level of '%s'",
                     column.name.c_str());
    }
  }
}

void CheckEncoding(const Schema& schema) {
  const auto layout = dpcurator::data::FeatureLayout::ForFeatures(schema);
  DPC_FUZZ_CHECK(layout.total_dim() > 0, "empty encoding");
  // Two rows: every numeric at its lower bound and every categorical at
  // level 0; every numeric at its upper bound and every categorical at its
  // last level.
  dpcurator::data::Table table;
  table.cells.resize(2, schema.num_columns());
  for (int c = 0; c < schema.num_columns(); ++c) {
    const auto& column = schema.column(c);
    if (column.type == ColumnType::kNumeric) {
      table.cells(0, c) = column.lower;
      table.cells(1, c) = column.upper;
    } else {
      table.cells(0, c) = 0;
      table.cells(1, c) = schema.NumLevels(c) - 1;
    }
  }
  const Eigen::MatrixXd encoded = dpcurator::data::EncodeFeatures(schema, layout, table);
  DPC_FUZZ_CHECK(encoded.cols() == layout.total_dim(), "encoded width");
  DPC_FUZZ_CHECK(encoded.allFinite(), "non-finite features");
  DPC_FUZZ_CHECK((encoded.array() >= 0).all() && (encoded.array() <= 1).all(),
                 "features outside [0, 1]");
  for (const auto& slot : layout.categorical) {
    for (int i = 0; i < 2; ++i) {
      DPC_FUZZ_CHECK(encoded.row(i).segment(slot.offset, slot.levels).sum() == 1.0,
                     "one-hot block of column %d", slot.column);
    }
  }
  // A labelled schema's features exclude the label; the collection encodes
  // every column. Its default radius must bound the encoded rows' norm.
  dpcurator::v1::CollectionParams params;
  *params.mutable_schema() = dpcurator::SchemaToProto(schema);
  params.set_mechanism("gaussian-l2");
  params.set_epsilon(1.0);
  params.set_delta(1e-6);
  dpcurator::v1::CollectionParams resolved;
  auto mechanism = dpcurator::MechanismFromParams(params, &resolved);
  DPC_FUZZ_CHECK(mechanism.ok(), "a valid schema makes no collection: %s",
                 std::string(mechanism.status().message()).c_str());
  auto label_free = dpcurator::CollectionSchema(params);
  DPC_FUZZ_CHECK(label_free.ok(), "label-free schema");
  DPC_FUZZ_CHECK(mechanism->dimension() == dpcurator::CollectionDimension(*label_free),
                 "collection dimension");
  DPC_FUZZ_CHECK(std::isfinite(resolved.radius()) && resolved.radius() > 0, "radius %g",
                 resolved.radius());
  const auto full = dpcurator::data::FeatureLayout::ForFeatures(*label_free);
  const Eigen::MatrixXd rows = dpcurator::data::EncodeFeatures(*label_free, full, table);
  for (int i = 0; i < 2; ++i) {
    DPC_FUZZ_CHECK(rows.row(i).norm() <= resolved.radius() * (1 + 1e-12),
                   "row norm %g above the default radius %g", rows.row(i).norm(),
                   resolved.radius());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Protobuf logs every string field with invalid UTF-8 it refuses; the
  // refusal itself is what matters here.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const absl::string_view stripped = absl::StripLeadingAsciiWhitespace(input);
  dpcurator::v1::TableSchema proto;
  if (!stripped.empty() && stripped.front() == '{') {
    auto parsed = dpcurator::ParseSchemaJson(input);
    if (!parsed.ok()) {
      DPC_FUZZ_CHECK(!parsed.status().message().empty(), "an error without a message");
      return 0;
    }
    proto = *std::move(parsed);
  } else if (!proto.ParseFromString(input)) {
    return 0;
  }
  auto schema = dpcurator::SchemaFromProto(proto);
  if (!schema.ok()) {
    DPC_FUZZ_CHECK(!schema.status().message().empty(), "an error without a message");
    return 0;
  }
  // Keep one input cheap: the checks below are linear in the categories.
  if (proto.ByteSizeLong() > (1 << 16)) return 0;
  auto again = dpcurator::SchemaFromProto(dpcurator::SchemaToProto(*schema));
  DPC_FUZZ_CHECK(again.ok(), "SchemaToProto output is refused: %s",
                 std::string(again.status().message()).c_str());
  CheckSameSchema(*schema, *again);
  CheckCells(*schema);
  CheckEncoding(*schema);
  return 0;
}
