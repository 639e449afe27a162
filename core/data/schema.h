#ifndef DPCURATOR_CORE_DATA_SCHEMA_H_
#define DPCURATOR_CORE_DATA_SCHEMA_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpcurator::data {

// A public table schema, declared by the curator. Everything here is public
// metadata (PRIVACY.md, "Metadata is public only when the curator declares
// it"): bounds and category lists are never learned from rows.
enum class ColumnType { kNumeric, kCategorical, kImage };

struct Column {
  std::string name;
  ColumnType type = ColumnType::kNumeric;
  // Numeric: declared bounds; values outside are clamped (and counted).
  double lower = 0.0;
  double upper = 1.0;
  // Numeric: synthetic values are rounded to integers when sampled.
  bool integer = false;
  // Numeric: public point masses inside the bounds (for example 0 for a
  // capital gain, 40 for weekly hours), sorted and distinct; integers for an
  // integer column. Marginal methods give each its own cell
  // (core/data/discretize.h).
  std::vector<double> atoms;
  // Numeric: public interior bin edges, strictly increasing and strictly
  // inside (lower, upper); the bins are [lower, e_1), [e_1, e_2), ...,
  // [e_m, upper]. Empty: core/data/discretize.h's data-independent default.
  std::vector<double> bins;
  // Categorical: the public category list, in declared order.
  std::vector<std::string> categories;
  // Categorical, issue 38 (docs/schema.md "Open columns"): the category list
  // is not public. The server keeps each row's value and publishes a list
  // only through a charged CATEGORY_FIT release. Without categories the
  // column has no level yet (ParseCell gives NaN, and nothing may read it:
  // Schema::RequireCategoriesForOpenColumns); with them, the LAST category is
  // the catch-all every unlisted value reads as ("other").
  bool open = false;
  // Categorical: extra spellings mapped to a declared category (for example
  // Adult's test file writes ">50K." for ">50K").
  std::vector<std::pair<std::string, std::string>> aliases;
  // A missing value is allowed. Categorical: it is its own level, after the
  // declared ones. Numeric: it is stored as NaN (core/data/table.h), and
  // every method gives it its own cell or indicator (docs/schema.md).
  bool nullable = false;
  // Image: the declared shape. Pixels lie in the declared range [0, 1] and
  // are stored as 8-bit levels (value = level / 255); grey only for now
  // (channels = 1).
  int image_height = 0;
  int image_width = 0;
  int image_channels = 0;
  int64_t pixels_per_image() const {
    return int64_t{image_height} * image_width * image_channels;
  }
};

// Data-independent bounds on a declared image shape (Schema::Builder::Build).
inline constexpr int kMaxImageSide = 4096;
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 20;
// Data-independent bounds on a numeric column's declared atoms and bin
// edges, so that a marginal's domain stays small (core/data/discretize.h).
inline constexpr int kMaxAtoms = 64;
inline constexpr int kMaxBinEdges = 1024;
// Data-independent bounds on an open categorical column (issue 38): one
// value's bytes (trimmed), checked as a cell is parsed; server/limits.h
// bounds the distinct values a column stores.
inline constexpr int kMaxOpenValueBytes = 256;
// At most this many open columns in one schema (server/limits.h: each
// stores up to kMaxOpenValuesPerColumn distinct values).
inline constexpr int kMaxOpenColumns = 16;
// An image pixel's 8-bit level l stands for the value l / kImageLevels.
inline constexpr double kImageLevels = 255.0;

// A column type as a schema file or an ARFF header spells it. Accepted,
// case-insensitive: "numeric", "real", "integer" (numeric with integer
// rounding), "categorical", "nominal". Errors list the accepted names.
struct ColumnTypeName {
  ColumnType type = ColumnType::kNumeric;
  bool integer = false;
};
inline constexpr char kAcceptedColumnTypeNames[] =
    "NUMERIC, CATEGORICAL, and the ARFF spellings REAL, INTEGER (numeric, integer: true), "
    "NOMINAL (categorical); case-insensitive";
absl::StatusOr<ColumnTypeName> ParseColumnTypeName(absl::string_view name);

// The result of parsing one cell.
struct ParsedCell {
  double value = 0.0;    // numeric value, or level index for categoricals
  bool clamped = false;  // numeric value was outside the declared bounds
};

class Schema {
 public:
  class Builder {
   public:
    Builder& AddNumeric(std::string name, double lower, double upper,
                        bool integer = false, bool nullable = false);
    Builder& AddCategorical(std::string name,
                            std::vector<std::string> categories,
                            bool nullable = false);
    // An open categorical column (Column::open): `categories` empty (no
    // level yet) or the published values then the catch-all, last.
    Builder& AddOpenCategorical(std::string name, std::vector<std::string> categories,
                                bool nullable = false);
    // An image column of height x width x channels pixels in [0, 1]. A
    // schema with an image column holds only it and, optionally, a
    // categorical label column.
    Builder& AddImage(std::string name, int height, int width, int channels = 1);
    Builder& AddAlias(absl::string_view column, std::string token,
                      std::string category);
    Builder& SetLabel(std::string name);
    // Public atoms and bin edges of a numeric column (Column::atoms, bins).
    Builder& SetAtoms(absl::string_view column, std::vector<double> atoms);
    Builder& SetBins(absl::string_view column, std::vector<double> edges);
    // Tokens read as "missing" (default: "" and "?").
    Builder& SetMissingTokens(std::vector<std::string> tokens);
    // Validates names (unique, non-empty), bounds (finite, lower < upper),
    // categories (non-empty, unique), aliases (target declared), label
    // (categorical, not nullable, at least two categories), images (at most
    // one; sides in [1, kMaxImageSide], at most kMaxImagePixels pixels, one
    // channel; beside it only the label column), atoms (numeric column;
    // finite, inside the bounds, strictly increasing, integers for an integer
    // column; at most kMaxAtoms) and bin edges (numeric column; finite,
    // strictly increasing, strictly inside the bounds; at most kMaxBinEdges).
    // An open column may declare no categories; with some, at least two (the
    // published values, then the catch-all); it cannot be the label.
    absl::StatusOr<Schema> Build() const;

   private:
    std::vector<Column> columns_;
    std::vector<std::tuple<std::string, std::string, std::string>> aliases_;
    std::optional<std::string> label_;
    std::vector<std::string> missing_tokens_ = {"", "?"};
    std::vector<std::pair<std::string, std::vector<double>>> atoms_;
    std::vector<std::pair<std::string, std::vector<double>>> bins_;
  };

  const std::vector<Column>& columns() const { return columns_; }
  int num_columns() const { return static_cast<int>(columns_.size()); }
  const Column& column(int index) const { return columns_[index]; }
  // Index of the label column, if the schema has one.
  std::optional<int> label_index() const { return label_index_; }
  // Index of the image column, if the schema has one.
  std::optional<int> image_index() const { return image_index_; }
  // Pixels of one image (height x width x channels); 0 without an image column.
  int64_t pixels_per_image() const {
    return image_index_.has_value() ? columns_[*image_index_].pixels_per_image() : 0;
  }
  // Number of label classes; 1 for an unlabelled schema.
  int num_classes() const;
  // Indices of all columns except the label, in declared order.
  const std::vector<int>& feature_indices() const { return feature_indices_; }
  // Levels of a categorical column: its categories, plus one if nullable.
  int NumLevels(int column) const;
  // Display name of level `level` of a categorical column ("" for missing).
  const std::string& LevelName(int column, int level) const;
  const std::vector<std::string>& missing_tokens() const { return missing_tokens_; }
  // Index of a column by name.
  std::optional<int> FindColumn(absl::string_view name) const;
  // Whether any column is open (Column::open).
  bool has_open_columns() const;
  // FAILED_PRECONDITION naming the first open column without categories
  // and the commands that give it some; OK when there is none. Every
  // release kind but CATEGORY_FIT, and every session, needs it OK: such a
  // column has no level for a method to read (issue 38).
  absl::Status RequireCategoriesForOpenColumns() const;

  // Parses one cell (surrounding whitespace trimmed). Errors name the column
  // and the offending token; numeric values outside the bounds are clamped.
  // A missing token of a nullable numeric column gives NaN (Table's
  // convention), of a nullable categorical its missing level. An open
  // column without categories accepts any value of at most
  // kMaxOpenValueBytes bytes and gives NaN (no level exists); with
  // categories, an unlisted value gives the last (catch-all) level.
  absl::StatusOr<ParsedCell> ParseCell(int column, absl::string_view token) const;
  // Formats a stored value for CSV output (level names, integers rounded);
  // a missing value (NaN of a numeric column, the missing level of a
  // categorical) as the first missing token, so that it parses back as
  // missing.
  std::string FormatCell(int column, double value) const;

  // Stable 64-bit fingerprint of the canonical schema text (FNV-1a), so an
  // artefact or model can say which schema it belongs to.
  uint64_t Fingerprint() const;
  std::string FingerprintHex() const;

 private:
  std::vector<Column> columns_;
  std::optional<int> label_index_;
  std::optional<int> image_index_;
  std::vector<int> feature_indices_;
  std::vector<std::string> missing_tokens_;
  static const std::string kMissingLevelName;
};

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_SCHEMA_H_
