#include "core/data/draft.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dpcurator::data {

SchemaDrafter::SchemaDrafter(std::vector<std::string> names, std::vector<DraftHint> hints,
                             std::vector<std::string> missing_tokens)
    : names_(std::move(names)),
      hints_(std::move(hints)),
      missing_tokens_(std::move(missing_tokens)),
      stats_(names_.size()) {
  if (hints_.size() != names_.size()) hints_.assign(names_.size(), DraftHint{});
}

absl::Status SchemaDrafter::AddRow(const std::vector<std::string>& cells) {
  if (cells.size() != names_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("row has ", cells.size(), " fields, expected ", names_.size()));
  }
  for (size_t c = 0; c < cells.size(); ++c) {
    const absl::string_view token = absl::StripAsciiWhitespace(cells[c]);
    Stats& stats = stats_[c];
    const DraftHint& hint = hints_[c];
    if (std::find(missing_tokens_.begin(), missing_tokens_.end(), token) != missing_tokens_.end()) {
      ++stats.missing;
      continue;
    }
    if (hint.kind == DraftHint::Kind::kCategorical && !hint.categories.empty() &&
        std::find(hint.categories.begin(), hint.categories.end(), token) == hint.categories.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "column '", names_[c], "': '", token, "' is not one of the values the header declares (",
          absl::StrJoin(hint.categories, ", "), ")"));
    }
    double value = 0;
    const bool is_number = absl::SimpleAtod(token, &value) && std::isfinite(value);
    if (hint.kind == DraftHint::Kind::kNumeric && !is_number) {
      return absl::InvalidArgumentError(absl::StrCat(
          "column '", names_[c], "' is declared numeric, but '", token, "' is not a number"));
    }
    if (is_number && stats.all_numeric) {
      if (stats.present == 0) {
        stats.min = stats.max = value;
      } else {
        stats.min = std::min(stats.min, value);
        stats.max = std::max(stats.max, value);
      }
      stats.all_integer =
          stats.all_integer && value == std::floor(value) && std::fabs(value) < 9e15;
      if (value == 0) ++stats.zeros;
    } else {
      stats.all_numeric = false;
    }
    ++stats.present;
    if (hint.kind != DraftHint::Kind::kNumeric &&
        static_cast<int>(stats.counts.size()) <= kMaxDraftCategories) {
      ++stats.counts[std::string(token)];
    }
  }
  ++rows_;
  return absl::OkStatus();
}

absl::StatusOr<SchemaDraft> SchemaDrafter::Finish(const std::optional<std::string>& label) const {
  if (rows_ == 0) return absl::InvalidArgumentError("no data rows to draft a schema from");
  SchemaDraft draft;
  draft.rows = rows_;
  for (size_t c = 0; c < names_.size(); ++c) {
    const Stats& stats = stats_[c];
    const DraftHint& hint = hints_[c];
    DraftColumn column;
    column.name = names_[c];
    column.missing = stats.missing;
    const bool numeric =
        hint.kind == DraftHint::Kind::kNumeric ||
        (hint.kind == DraftHint::Kind::kInfer && stats.all_numeric && stats.present > 0);
    if (numeric) {
      column.type = ColumnType::kNumeric;
      column.integer = hint.integer || (stats.present > 0 && stats.all_integer);
      column.lower = stats.present > 0 ? stats.min : 0.0;
      column.upper = stats.present > 0 ? stats.max : 1.0;
      if (!(column.lower < column.upper)) column.upper = column.lower + 1.0;
      column.data_derived = true;
      if (stats.present > 0 &&
          static_cast<double>(stats.zeros) >= kDraftZeroAtomShare * stats.present &&
          column.lower <= 0 && 0 <= column.upper) {
        // Marked data-derived with the bounds (the share came from rows).
        column.atoms = {0.0};
        column.notes.push_back(absl::StrCat(
            "atom 0 suggested: ", stats.zeros, " of ", stats.present,
            " values are exactly 0 (a point mass such as a capital gain); keep it if 0 is a "
            "public, meaningful value"));
      }
      // A missing cell is its own level in every method (docs/schema.md
      // "Missing values"): no imputation outside the tool (issue 38).
      column.nullable = stats.missing > 0;
    } else {
      column.type = ColumnType::kCategorical;
      if (hint.kind == DraftHint::Kind::kCategorical && !hint.categories.empty()) {
        column.categories = hint.categories;
      } else {
        if (static_cast<int>(stats.counts.size()) > kMaxDraftCategories) {
          return absl::InvalidArgumentError(absl::StrCat(
              "column '", column.name, "' has more than ", kMaxDraftCategories,
              " distinct values: an identifier or free text, not a category; drop it from "
              "the file"));
        }
        for (const auto& [value, count] : stats.counts) column.categories.push_back(value);
        column.data_derived = true;
        if (stats.present > 0 && stats.counts.size() * 2 > static_cast<size_t>(stats.present) &&
            stats.counts.size() > 20) {
          column.notes.push_back(
              "most values occur once: an identifier or free text? drop it before upload");
        }
      }
      if (column.categories.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("column '", column.name, "' has no values at all; drop it from the file"));
      }
      for (const std::string& category : column.categories) {
        auto found = stats.counts.find(category);
        column.category_counts.push_back(found == stats.counts.end() ? 0 : found->second);
      }
      column.nullable = stats.missing > 0;
      if (stats.all_numeric && stats.present > 0 && hint.kind == DraftHint::Kind::kCategorical) {
        column.notes.push_back("values are numbers but the header declares them nominal");
      }
    }
    draft.columns.push_back(std::move(column));
  }
  if (label.has_value()) {
    const DraftColumn* found = nullptr;
    std::vector<std::string> names;
    for (const DraftColumn& column : draft.columns) {
      if (column.name == *label) found = &column;
      names.push_back(column.name);
    }
    if (found == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("label '", *label, "' is not a column (", absl::StrJoin(names, ", "), ")"));
    }
    if (found->type != ColumnType::kCategorical || found->categories.size() < 2 ||
        found->nullable) {
      return absl::InvalidArgumentError(
          absl::StrCat("label '", *label,
                       "' must be a categorical column with at least two values and none missing"));
    }
    draft.label = *label;
  }
  return draft;
}

}  // namespace dpcurator::data
