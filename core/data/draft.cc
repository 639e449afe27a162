#include "core/data/draft.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/data/discretize.h"

namespace dpcurator::data {

namespace {

// Reservoir sampling (Vitter's algorithm R) with a fixed hash in place of a
// random draw, so that the same file always drafts the same bins.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// 10^exponent as the nearest double to the decimal (m / 10^k rather than
// m * 0.1^k, so that 0.2 prints as 0.2).
double Decimal(double mantissa, int exponent) {
  return exponent >= 0 ? mantissa * std::pow(10.0, exponent)
                       : mantissa / std::pow(10.0, -exponent);
}

double RoundToSignificant(double x, int digits) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int exponent = static_cast<int>(std::floor(std::log10(std::fabs(x)))) - (digits - 1);
  return exponent >= 0 ? std::round(x / std::pow(10.0, exponent)) * std::pow(10.0, exponent)
                       : std::round(x * std::pow(10.0, -exponent)) / std::pow(10.0, -exponent);
}

// The largest share of `sorted` in one bin [edges[b], edges[b + 1]) (the
// last closed), edges running from the lower to the upper bound.
double FullestShare(const std::vector<double>& sorted, const std::vector<double>& edges) {
  if (sorted.empty() || edges.size() < 2) return 0.0;
  std::ptrdiff_t fullest = 0;
  auto begin = sorted.begin();
  for (size_t b = 1; b < edges.size(); ++b) {
    const auto end = b + 1 == edges.size() ? sorted.end()
                                            : std::lower_bound(begin, sorted.end(), edges[b]);
    fullest = std::max(fullest, end - begin);
    begin = end;
  }
  return static_cast<double>(fullest) / static_cast<double>(sorted.size());
}

// Interior edges strictly inside the bounds, sorted and distinct.
std::vector<double> Interior(std::vector<double> edges, const Column& column) {
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::vector<double> inside;
  for (double e : edges) {
    if (e > column.lower && e < column.upper) inside.push_back(e);
  }
  return inside;
}

std::vector<double> WithBounds(const std::vector<double>& interior, const Column& column) {
  std::vector<double> edges = {column.lower};
  edges.insert(edges.end(), interior.begin(), interior.end());
  edges.push_back(column.upper);
  return edges;
}

}  // namespace

void SchemaDrafter::SampleNumber(double value, Stats* stats) {
  const int64_t seen = stats->numbers++;
  if (stats->sample.size() < kDraftSampleSize) {
    stats->sample.push_back(value);
    return;
  }
  const uint64_t slot = SplitMix64(static_cast<uint64_t>(seen)) % static_cast<uint64_t>(seen + 1);
  if (slot < kDraftSampleSize) stats->sample[slot] = value;
}

DraftBins SuggestDraftBins(const Column& column, std::vector<double> values) {
  DraftBins bins;
  // Atoms have their own cells; the bins share what is left.
  values.erase(std::remove_if(values.begin(), values.end(),
                              [&](double v) {
                                return std::find(column.atoms.begin(), column.atoms.end(), v) !=
                                       column.atoms.end();
                              }),
               values.end());
  if (values.empty() || !(column.lower < column.upper)) return bins;
  // An integer column this narrow gets one cell per integer by default
  // (core/data/discretize.cc): as fine as bins can be.
  if (column.integer &&
      std::floor(column.upper) - std::ceil(column.lower) + 1 <= kMaxDefaultIntegerCells) {
    return bins;
  }
  std::sort(values.begin(), values.end());
  std::vector<double> uniform;
  const double width = (column.upper - column.lower) / kDefaultNumericBins;
  for (int b = 1; b < kDefaultNumericBins; ++b) uniform.push_back(column.lower + b * width);
  bins.default_share = FullestShare(values, WithBounds(uniform, column));
  if (bins.default_share <= kDraftBinShare) return bins;

  const auto quantile = [&](double p) {
    const size_t i = std::min(values.size() - 1, static_cast<size_t>(p * values.size()));
    return values[i];
  };
  // 1-2-5 series from the last step at or below the 1% quantile of the
  // positive values (lower steps would hold under 1% each) to the bound.
  std::vector<double> log_edges;
  const auto positive = std::upper_bound(values.begin(), values.end(), 0.0);
  if (column.lower >= 0 && positive != values.end()) {
    const size_t skip = static_cast<size_t>(0.01 * static_cast<double>(values.end() - positive));
    const double low = *(positive + static_cast<std::ptrdiff_t>(skip));
    const int first = static_cast<int>(std::floor(std::log10(low)));
    const int last = static_cast<int>(std::floor(std::log10(column.upper)));
    double start = Decimal(1, first);
    for (int exponent = first; exponent <= last; ++exponent) {
      for (double mantissa : {1.0, 2.0, 5.0}) {
        const double edge = Decimal(mantissa, exponent);
        if (edge <= low) start = edge;
        log_edges.push_back(edge);
      }
    }
    log_edges.erase(std::remove_if(log_edges.begin(), log_edges.end(),
                                   [&](double e) { return e < start; }),
                    log_edges.end());
    log_edges = Interior(std::move(log_edges), column);
  }
  const double log_share =
      log_edges.empty() ? 1.0 : FullestShare(values, WithBounds(log_edges, column));
  if (log_share <= kDraftBinShare) {
    bins.edges = std::move(log_edges);
    bins.share = log_share;
    bins.log_scale = true;
    return bins;
  }
  std::vector<double> quantile_edges;
  for (int b = 1; b < kDraftQuantileBins; ++b) {
    double edge = RoundToSignificant(quantile(static_cast<double>(b) / kDraftQuantileBins), 2);
    if (column.integer) edge = std::round(edge);
    quantile_edges.push_back(edge);
  }
  quantile_edges = Interior(std::move(quantile_edges), column);
  const double quantile_share =
      quantile_edges.empty() ? 1.0 : FullestShare(values, WithBounds(quantile_edges, column));
  if (quantile_share < bins.default_share) {
    bins.edges = std::move(quantile_edges);
    bins.share = quantile_share;
  }
  return bins;
}

SchemaDrafter::SchemaDrafter(std::vector<std::string> names, std::vector<DraftHint> hints,
                             std::vector<std::string> missing_tokens)
    : names_(std::move(names)),
      hints_(std::move(hints)),
      missing_tokens_(std::move(missing_tokens)),
      stats_(names_.size()) {
  if (hints_.size() != names_.size()) hints_.assign(names_.size(), DraftHint{});
}

absl::Status SchemaDrafter::AddRow(const std::vector<std::string>& cells, int64_t line) {
  if (cells.size() != names_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("row has ", cells.size(), " fields, expected ", names_.size()));
  }
  const std::string where = line > 0 ? absl::StrCat(" (line ", line, ")") : "";
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
      if (stats.bad_values++ == 0) {
        stats.problem = absl::StrCat(
            "'", token, "'", where, " is not one of the values the header declares (",
            absl::StrJoin(hint.categories, ", "),
            "): add it to the header's list, or correct the value");
      }
      continue;
    }
    double value = 0;
    const bool is_number = absl::SimpleAtod(token, &value) && std::isfinite(value);
    if (hint.kind == DraftHint::Kind::kNumeric && !is_number) {
      if (stats.bad_values++ == 0) {
        stats.problem = absl::StrCat(
            "declared numeric, but '", token, "'", where,
            " is not a number: correct the value, or declare the attribute as a string or "
            "{nominal} list");
      }
      continue;
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
      SampleNumber(value, &stats);
    } else {
      stats.all_numeric = false;
      std::vector<double>().swap(stats.sample);
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

namespace {

// Suggested bins go into the column with a note saying why; they are read
// from rows, so they share the column's data_derived marker with the bounds.
void AddDraftBins(const std::vector<double>& sample, DraftColumn* column) {
  const DraftBins bins = SuggestDraftBins(*column, sample);
  if (bins.edges.empty()) return;
  column->bins = bins.edges;
  column->notes.push_back(absl::StrFormat(
      "%d bins suggested (%s): the default %d equal-width bins over [%g, %g] would put %.0f%% of "
      "the values in one bin; these put at most %.0f%%. They are read from your rows "
      "(data-derived, like the bounds): keep them, or replace them with public edges",
      static_cast<int>(bins.edges.size()) + 1,
      bins.log_scale ? "a 1-2-5 log scale" : "quantile-like, rounded to 2 significant digits",
      kDefaultNumericBins, column->lower, column->upper, 100 * bins.default_share,
      100 * bins.share));
}

}  // namespace

absl::StatusOr<SchemaDraft> SchemaDrafter::Finish(const std::optional<std::string>& label) const {
  if (rows_ == 0) return absl::InvalidArgumentError("no data rows to draft a schema from");
  SchemaDraft draft;
  draft.rows = rows_;
  for (size_t c = 0; c < names_.size(); ++c) {
    const Stats& stats = stats_[c];
    const DraftHint& hint = hints_[c];
    if (!stats.problem.empty()) {
      draft.left_out.push_back(DraftProblem{
          names_[c], stats.bad_values > 1 ? absl::StrCat(stats.problem, " (", stats.bad_values,
                                                         " such values)")
                                          : stats.problem});
      continue;
    }
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
      AddDraftBins(stats.sample, &column);
      // A missing cell is its own level in every method (docs/schema.md
      // "Missing values"): no imputation outside the tool (issue 38).
      column.nullable = stats.missing > 0;
    } else {
      column.type = ColumnType::kCategorical;
      if (hint.kind == DraftHint::Kind::kCategorical && !hint.categories.empty()) {
        column.categories = hint.categories;
      } else {
        if (static_cast<int>(stats.counts.size()) > kMaxDraftCategories) {
          draft.left_out.push_back(DraftProblem{
              column.name,
              absl::StrCat("more than ", kMaxDraftCategories,
                           " distinct values: an identifier or free text, not a category; drop "
                           "it from the file, or turn it into a number or a short category "
                           "list")});
          continue;
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
        draft.left_out.push_back(DraftProblem{
            column.name, "no values at all (every cell missing); drop it from the file"});
        continue;
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
    for (const DraftProblem& problem : draft.left_out) {
      if (problem.column == *label) {
        return absl::InvalidArgumentError(
            absl::StrCat("label '", *label, "' cannot be drafted: ", problem.message));
      }
    }
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
  if (draft.columns.empty()) {
    std::vector<std::string> problems;
    for (const DraftProblem& problem : draft.left_out) {
      problems.push_back(absl::StrCat("column '", problem.column, "': ", problem.message));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("no column could be drafted: ", absl::StrJoin(problems, "; ")));
  }
  return draft;
}

}  // namespace dpcurator::data
