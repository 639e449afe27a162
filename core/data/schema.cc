#include "core/data/schema.h"

#include "core/data/clamp.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace dpcurator::data {

const std::string Schema::kMissingLevelName = "";

namespace {

// Cells and header names are trimmed before they are matched (ParseCell,
// MapHeader), so a declared name with surrounding whitespace could never be
// matched by any upload: refuse it when the schema is built.
bool HasSurroundingWhitespace(absl::string_view text) {
  return absl::StripAsciiWhitespace(text).size() != text.size();
}

}  // namespace

absl::StatusOr<ColumnTypeName> ParseColumnTypeName(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
  if (lower == "numeric" || lower == "real") return ColumnTypeName{ColumnType::kNumeric, false};
  if (lower == "integer") return ColumnTypeName{ColumnType::kNumeric, true};
  if (lower == "categorical" || lower == "nominal") {
    return ColumnTypeName{ColumnType::kCategorical, false};
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown type '", absl::CHexEscape(name),
                                                 "' (accepted: ", kAcceptedColumnTypeNames, ")"));
}

Schema::Builder& Schema::Builder::AddNumeric(std::string name, double lower,
                                             double upper, bool integer, bool nullable) {
  Column column;
  column.name = std::move(name);
  column.type = ColumnType::kNumeric;
  column.lower = lower;
  column.upper = upper;
  column.integer = integer;
  column.nullable = nullable;
  columns_.push_back(std::move(column));
  return *this;
}

Schema::Builder& Schema::Builder::AddCategorical(std::string name,
                                                 std::vector<std::string> categories,
                                                 bool nullable) {
  Column column;
  column.name = std::move(name);
  column.type = ColumnType::kCategorical;
  column.categories = std::move(categories);
  column.nullable = nullable;
  columns_.push_back(std::move(column));
  return *this;
}

Schema::Builder& Schema::Builder::AddOpenCategorical(std::string name,
                                                     std::vector<std::string> categories,
                                                     bool nullable) {
  AddCategorical(std::move(name), std::move(categories), nullable);
  columns_.back().open = true;
  return *this;
}

Schema::Builder& Schema::Builder::AddImage(std::string name, int height, int width,
                                           int channels) {
  Column column;
  column.name = std::move(name);
  column.type = ColumnType::kImage;
  column.image_height = height;
  column.image_width = width;
  column.image_channels = channels;
  // The declared pixel range (the encoder reads level / 255 into [0, 1]).
  column.lower = 0.0;
  column.upper = 1.0;
  columns_.push_back(std::move(column));
  return *this;
}

Schema::Builder& Schema::Builder::AddAlias(absl::string_view column, std::string token,
                                           std::string category) {
  aliases_.emplace_back(std::string(column), std::move(token), std::move(category));
  return *this;
}

Schema::Builder& Schema::Builder::SetLabel(std::string name) {
  label_ = std::move(name);
  return *this;
}

Schema::Builder& Schema::Builder::SetAtoms(absl::string_view column,
                                           std::vector<double> atoms) {
  atoms_.emplace_back(std::string(column), std::move(atoms));
  return *this;
}

Schema::Builder& Schema::Builder::SetBins(absl::string_view column, std::vector<double> edges) {
  bins_.emplace_back(std::string(column), std::move(edges));
  return *this;
}

Schema::Builder& Schema::Builder::SetMissingTokens(std::vector<std::string> tokens) {
  missing_tokens_ = std::move(tokens);
  return *this;
}

absl::StatusOr<Schema> Schema::Builder::Build() const {
  if (columns_.empty()) {
    return absl::InvalidArgumentError("Schema must have at least one column");
  }
  Schema schema;
  schema.columns_ = columns_;
  schema.missing_tokens_ = missing_tokens_;
  // Name -> column index and, per categorical column, its category set:
  // the alias and atom checks below look names up in these, so building a
  // schema (which every release plan does, from the stored schema) costs
  // time linear in its size. A scan per alias was O(aliases x categories):
  // 65,536 of each on one column is 4e9 comparisons per plan (issue 24,
  // item 4).
  absl::flat_hash_map<std::string, int> names;
  std::vector<absl::flat_hash_set<std::string>> category_sets(schema.columns_.size());
  for (const Column& column : schema.columns_) {
    if (column.name.empty()) {
      return absl::InvalidArgumentError("Column names must be non-empty");
    }
    if (HasSurroundingWhitespace(column.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Column name '", absl::CHexEscape(column.name),
          "' has leading or trailing whitespace; CSV headers are trimmed, so remove it"));
    }
    const int column_index = static_cast<int>(&column - schema.columns_.data());
    if (!names.try_emplace(column.name, column_index).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("Column name '", column.name, "' is declared twice"));
    }
    if (column.type == ColumnType::kImage) {
      // Data-independent bounds: a shape is public, declared, and must not
      // make the server allocate without limit.
      if (column.image_height < 1 || column.image_height > kMaxImageSide ||
          column.image_width < 1 || column.image_width > kMaxImageSide) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Image column '", column.name, "' declares ", column.image_height, " x ",
            column.image_width, " pixels; height and width must each be in [1, ", kMaxImageSide,
            "]"));
      }
      if (column.image_channels != 1) {
        return absl::UnimplementedError(absl::StrCat(
            "Image column '", column.name, "' declares ", column.image_channels,
            " channels; only grey images (1 channel) are supported: convert colour images to "
            "grey"));
      }
      if (column.pixels_per_image() > kMaxImagePixels) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Image column '", column.name, "' declares ", column.pixels_per_image(),
            " pixels per image; at most ", kMaxImagePixels,
            " (height x width x channels) are accepted"));
      }
      if (column.nullable) {
        return absl::InvalidArgumentError(
            absl::StrCat("Image column '", column.name, "' cannot be nullable"));
      }
      if (schema.image_index_.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Image column '", column.name, "' is the schema's second image column; declare at "
            "most one"));
      }
      schema.image_index_ = static_cast<int>(&column - schema.columns_.data());
    } else if (column.type == ColumnType::kNumeric) {
      if (!std::isfinite(column.lower) || !std::isfinite(column.upper) ||
          !(column.lower < column.upper)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Numeric column '", column.name,
            "' needs finite declared bounds with lower < upper, got [", column.lower,
            ", ", column.upper, "]"));
      }
      // The encoder scales by 1 / (upper - lower) (core/data/encoder.cc): a
      // width that overflows to inf, or whose inverse does, would turn
      // in-domain values into NaN features.
      const double width = column.upper - column.lower;
      if (!std::isfinite(width) || !std::isfinite(1.0 / width)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Numeric column '", column.name, "' has declared bounds [", column.lower, ", ",
            column.upper, "] whose width is not a usable finite number; declare narrower "
            "(or, if tiny, wider) bounds"));
      }
      if (column.integer && std::ceil(column.lower) > std::floor(column.upper)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Integer column '", column.name, "' has no integer within its bounds [",
            column.lower, ", ", column.upper, "]"));
      }
    } else {
      if (column.open) {
        // No level yet (before its category fit), or the published values
        // then the catch-all: one level alone would be the catch-all only,
        // a column that says nothing.
        if (column.categories.size() == 1) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Open column '", column.name, "' declares one category; declare none (before "
              "its category fit) or the published values then the catch-all (\"other\"), last"));
        }
      } else if (column.categories.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Categorical column '", column.name, "' must declare its categories"));
      }
      absl::flat_hash_set<std::string>& seen = category_sets[column_index];
      for (const std::string& category : column.categories) {
        if (HasSurroundingWhitespace(category)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Categorical column '", column.name, "' declares category '",
              absl::CHexEscape(category),
              "' with leading or trailing whitespace; cells are trimmed, so remove it"));
        }
        if (!seen.insert(category).second) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Categorical column '", column.name, "' declares category '", category,
              "' twice"));
        }
        for (const std::string& missing : missing_tokens_) {
          if (category == missing) {
            return absl::InvalidArgumentError(absl::StrCat(
                "Categorical column '", column.name, "' declares category '", category,
                "', which is a missing-value token; declare the column nullable instead"));
          }
        }
      }
    }
  }
  int open_columns = 0;
  for (const Column& column : schema.columns_) open_columns += column.open ? 1 : 0;
  if (open_columns > kMaxOpenColumns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "The schema declares ", open_columns, " open columns; at most ", kMaxOpenColumns,
        " (kMaxOpenColumns) are accepted: declare the others' categories"));
  }
  const auto find_column = [&names](const std::string& name) -> std::optional<int> {
    auto it = names.find(name);
    return it == names.end() ? std::nullopt : std::optional<int>(it->second);
  };
  // (column, alias) pairs seen: a hash set keeps this linear too.
  absl::flat_hash_set<std::pair<int, std::string>> alias_tokens;
  for (const auto& [column_name, token, category] : aliases_) {
    auto index = find_column(column_name);
    if (!index.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Alias refers to unknown column '", column_name, "'"));
    }
    Column& column = schema.columns_[*index];
    if (column.type != ColumnType::kCategorical) {
      return absl::InvalidArgumentError(
          absl::StrCat("Alias on column '", column_name, "', which is not categorical"));
    }
    if (!category_sets[*index].contains(category)) {
      return absl::InvalidArgumentError(absl::StrCat("Alias '", token, "' of column '",
                                                     column_name, "' targets undeclared category '",
                                                     category, "'"));
    }
    if (HasSurroundingWhitespace(token)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Alias '", absl::CHexEscape(token), "' of column '", column_name,
          "' has leading or trailing whitespace; cells are trimmed, so remove it"));
    }
    // An alias spelled like a declared category would map one declared
    // category onto another: a cell with that text is the category itself
    // (ParseCell looks categories up first), so the schema would say two
    // things about one cell (issue 36, item 9).
    if (category_sets[*index].contains(token)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Alias '", absl::CHexEscape(token), "' of column '", column_name,
          "' is itself a declared category; an alias must be another spelling, not map one "
          "declared category onto another"));
    }
    if (!alias_tokens.emplace(*index, token).second) {
      return absl::InvalidArgumentError(absl::StrCat("Alias '", absl::CHexEscape(token),
                                                     "' of column '", column_name,
                                                     "' is declared twice"));
    }
    column.aliases.emplace_back(token, category);
  }
  // Atoms and bin edges are public metadata like the bounds (docs/schema.md):
  // checked here so that every discretisation of a built schema is valid.
  for (const auto& [declared, is_atoms] :
       {std::pair{&atoms_, true}, std::pair{&bins_, false}}) {
    const char* what = is_atoms ? "atoms" : "bins";
    for (const auto& [column_name, values] : *declared) {
      auto index = find_column(column_name);
      if (!index.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "\"", what, "\" declared for unknown column '", column_name, "'"));
      }
      Column& column = schema.columns_[*index];
      if (column.type != ColumnType::kNumeric) {
        return absl::InvalidArgumentError(
            absl::StrCat("Column '", column_name, "' declares \"", what,
                         "\", which only numeric columns may declare"));
      }
      const size_t limit = is_atoms ? kMaxAtoms : kMaxBinEdges;
      if (values.size() > limit) {
        return absl::InvalidArgumentError(absl::StrCat("Column '", column_name, "' declares ",
                                                       values.size(), " ", what, "; at most ",
                                                       limit, " are accepted"));
      }
      for (size_t i = 0; i < values.size(); ++i) {
        const double v = values[i];
        const bool inside = is_atoms ? (v >= column.lower && v <= column.upper)
                                     : (v > column.lower && v < column.upper);
        if (!std::isfinite(v) || !inside) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Column '", column_name, "': ", what, " value ", v, " must be finite and ",
              is_atoms ? "inside" : "strictly inside", " the declared bounds [", column.lower,
              ", ", column.upper, "]"));
        }
        if (i > 0 && !(values[i - 1] < v)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Column '", column_name, "': \"", what,
              "\" must be strictly increasing (sorted, no repeats); ", values[i - 1],
              " is followed by ", v));
        }
        if (is_atoms && column.integer && v != std::floor(v)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Integer column '", column_name, "' declares atom ", v,
              ", which no integer value can equal; declare whole numbers"));
        }
      }
      (is_atoms ? column.atoms : column.bins) = values;
    }
  }
  if (label_.has_value()) {
    auto index = find_column(*label_);
    if (!index.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Label column '", *label_, "' is not declared"));
    }
    const Column& column = schema.columns_[*index];
    if (column.open) {
      // A label's classes are public (conditional methods, partitions,
      // per-class sums are shaped by them): never learned from rows.
      return absl::InvalidArgumentError(absl::StrCat(
          "Label column '", *label_, "' is open; a label needs its public category list, "
          "declare it as an ordinary categorical column"));
    }
    if (column.type != ColumnType::kCategorical || column.nullable ||
        column.categories.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Label column '", *label_,
          "' must be categorical, not nullable, with at least two categories"));
    }
    schema.label_index_ = *index;
  }
  if (schema.image_index_.has_value()) {
    for (int i = 0; i < schema.num_columns(); ++i) {
      if (i == *schema.image_index_ || (schema.label_index_.has_value() &&
                                        i == *schema.label_index_)) {
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "Column '", schema.columns_[i].name, "' is declared beside the image column '",
          schema.columns_[*schema.image_index_].name,
          "'; an image schema holds the image column and, optionally, its label column only"));
    }
  }
  for (int i = 0; i < schema.num_columns(); ++i) {
    if (!schema.label_index_.has_value() || i != *schema.label_index_) {
      schema.feature_indices_.push_back(i);
    }
  }
  if (schema.feature_indices_.empty()) {
    return absl::InvalidArgumentError("Schema must have at least one feature column");
  }
  return schema;
}

int Schema::num_classes() const {
  return label_index_.has_value() ? NumLevels(*label_index_) : 1;
}

int Schema::NumLevels(int column) const {
  const Column& c = columns_[column];
  return static_cast<int>(c.categories.size()) + (c.nullable ? 1 : 0);
}

const std::string& Schema::LevelName(int column, int level) const {
  const Column& c = columns_[column];
  if (level >= 0 && level < static_cast<int>(c.categories.size())) {
    return c.categories[level];
  }
  return kMissingLevelName;
}

std::optional<int> Schema::FindColumn(absl::string_view name) const {
  for (int i = 0; i < num_columns(); ++i) {
    if (columns_[i].name == name) return i;
  }
  return std::nullopt;
}

bool Schema::has_open_columns() const {
  for (const Column& c : columns_) {
    if (c.open) return true;
  }
  return false;
}

absl::Status Schema::RequireCategoriesForOpenColumns() const {
  for (const Column& c : columns_) {
    if (c.open && c.categories.empty()) {
      // The column's name is public metadata; no value is named.
      return absl::FailedPreconditionError(absl::StrCat(
          "column '", c.name, "' is open and has no categories yet: run `dpcurator schema fit "
          "--dataset ID --categories ", c.name, "`, then `dpcurator datasets set-categories` "
          "(docs/schema.md \"Open columns\"). Nothing was charged"));
    }
  }
  return absl::OkStatus();
}

ParsedCell ClampNumeric(const Column& c, double value) {
  ParsedCell cell;
  if (value < c.lower) {
    value = c.lower;
    cell.clamped = true;
  } else if (value > c.upper) {
    value = c.upper;
    cell.clamped = true;
  }
  cell.value = value;
  return cell;
}

absl::StatusOr<ParsedCell> Schema::ParseCell(int column, absl::string_view token) const {
  if (column < 0 || column >= num_columns()) {
    return absl::OutOfRangeError(absl::StrCat("Column index ", column, " out of range"));
  }
  const Column& c = columns_[column];
  if (c.type == ColumnType::kImage) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Column '", c.name, "' is an image column and has no text cells: upload images with "
        "`dpcurator upload --idx IMAGES --labels LABELS` or `--png-folder DIR`"));
  }
  token = absl::StripAsciiWhitespace(token);
  bool missing = false;
  for (const std::string& m : missing_tokens_) missing = missing || token == m;
  ParsedCell cell;
  if (c.type == ColumnType::kNumeric) {
    if (missing) {
      if (!c.nullable) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Column '", c.name, "': missing value, and the column is not nullable"));
      }
      // Table's convention for a missing numeric cell; never clamped.
      cell.value = std::numeric_limits<double>::quiet_NaN();
      return cell;
    }
    double value;
    if (!absl::SimpleAtod(token, &value) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Column '", c.name, "': '", absl::CHexEscape(token.substr(0, 64)),
          "' is not a finite number"));
    }
    return ClampNumeric(c, value);
  }
  if (missing) {
    if (!c.nullable) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Column '", c.name, "': missing value, and the column is not nullable"));
    }
    // An open column before its fit has no level, the missing one neither.
    cell.value = c.open && c.categories.empty() ? std::numeric_limits<double>::quiet_NaN()
                                                : static_cast<double>(c.categories.size());
    return cell;
  }
  if (c.open && c.categories.empty()) {
    // No level exists before the category fit: the server stores the value
    // itself (server/store.h), and nothing reads this cell.
    if (token.size() > static_cast<size_t>(kMaxOpenValueBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Column '", c.name, "': a value of ", token.size(), " bytes; an open column's "
          "values are at most ", kMaxOpenValueBytes, " bytes (kMaxOpenValueBytes): shorten "
          "or code them"));
    }
    cell.value = std::numeric_limits<double>::quiet_NaN();
    return cell;
  }
  for (size_t i = 0; i < c.categories.size(); ++i) {
    if (c.categories[i] == token) {
      cell.value = static_cast<double>(i);
      return cell;
    }
  }
  for (const auto& [alias, target] : c.aliases) {
    if (alias == token) {
      for (size_t i = 0; i < c.categories.size(); ++i) {
        if (c.categories[i] == target) {
          cell.value = static_cast<double>(i);
          return cell;
        }
      }
    }
  }
  if (c.open) {
    // Every value the category fit did not publish is the catch-all, last.
    if (token.size() > static_cast<size_t>(kMaxOpenValueBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Column '", c.name, "': a value of ", token.size(), " bytes; an open column's "
          "values are at most ", kMaxOpenValueBytes, " bytes (kMaxOpenValueBytes): shorten "
          "or code them"));
    }
    cell.value = static_cast<double>(c.categories.size() - 1);
    return cell;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "Column '", c.name, "': '", absl::CHexEscape(token.substr(0, 64)),
      "' is not a declared category (declare it in the schema; categories are never "
      "learned from rows)"));
}

std::string Schema::FormatCell(int column, double value) const {
  const Column& c = columns_[column];
  if (c.type == ColumnType::kImage) return "";  // pixels are not text cells
  if (c.type == ColumnType::kCategorical) {
    // A table built by hand may hold anything; only a valid level index is
    // a category (the comparison is false for NaN, and no cast overflows).
    if (value >= 0 && value < static_cast<double>(c.categories.size())) {
      return c.categories[static_cast<size_t>(value)];
    }
    // The first missing token ("" by default): synthetic files show a
    // missing value as an empty cell, as spreadsheets and pandas expect,
    // not as "?" (issue 25 item 2); and it always parses back as missing.
    return missing_tokens_.empty() ? std::string() : missing_tokens_[0];
  }
  if (std::isnan(value)) {
    // A missing numeric cell, written as a categorical's missing level is.
    return missing_tokens_.empty() ? std::string() : missing_tokens_[0];
  }
  if (c.integer) {
    // Not llround: declared bounds may exceed the range of long long.
    double rounded = std::round(value);
    if (rounded == 0) rounded = 0;  // no "-0"
    return absl::StrFormat("%.0f", rounded);
  }
  return absl::StrFormat("%.6g", value);
}

uint64_t Schema::Fingerprint() const {
  // Canonical text: one line per column with every declared property.
  std::string canonical;
  for (const Column& c : columns_) {
    const char* type = c.type == ColumnType::kNumeric       ? "num"
                       : c.type == ColumnType::kCategorical ? "cat"
                                                            : "img";
    absl::StrAppend(&canonical, c.name, "|", type, "|");
    if (c.type == ColumnType::kImage) {
      absl::StrAppend(&canonical, c.image_height, "x", c.image_width, "x", c.image_channels);
    } else if (c.type == ColumnType::kNumeric) {
      absl::StrAppend(&canonical, absl::StrFormat("%.17g|%.17g|%d", c.lower, c.upper,
                                                  c.integer ? 1 : 0));
      // Only when declared, so that schemas without them keep the
      // fingerprints they always had.
      auto append_list = [&canonical](const char* tag, const std::vector<double>& values) {
        if (values.empty()) return;
        absl::StrAppend(&canonical, "|", tag);
        for (double v : values) absl::StrAppend(&canonical, absl::StrFormat(",%.17g", v));
      };
      append_list("atoms", c.atoms);
      append_list("bins", c.bins);
      // Likewise only when set: non-nullable numerics keep their prints.
      if (c.nullable) absl::StrAppend(&canonical, "|nullable");
    } else {
      absl::StrAppend(&canonical, absl::StrJoin(c.categories, "\x1f"), "|",
                      c.nullable ? 1 : 0);
      // Only when set, so that other schemas keep the prints they had.
      if (c.open) absl::StrAppend(&canonical, "|open");
    }
    canonical.push_back('\n');
  }
  absl::StrAppend(&canonical, "label=", label_index_.has_value() ? *label_index_ : -1);
  // FNV-1a, 64 bit.
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char ch : canonical) {
    hash ^= ch;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string Schema::FingerprintHex() const {
  return absl::StrFormat("%016x", Fingerprint());
}

}  // namespace dpcurator::data
