#ifndef DPCURATOR_CORE_DATA_DRAFT_H_
#define DPCURATOR_CORE_DATA_DRAFT_H_

// A first schema drafted from a curator's own file, on the curator's own
// machine (`dpcurator schema draft`). Everything it reads from rows (numeric
// bounds, category lists) is data-derived: publishing it as the schema would
// leak the data's extremes and rare categories, so each such column is marked
// and the curator replaces the values with public ones, or accepts that they
// are published. Nothing here is ever sent to a server.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/schema.h"

namespace dpcurator::data {

// What the file's own header declares about a column.
struct DraftHint {
  enum class Kind {
    kInfer,        // CSV: numeric when every present value is a number
    kNumeric,      // ARFF numeric / real / integer
    kCategorical,  // ARFF nominal (declared values) or string (values read)
  };
  Kind kind = Kind::kInfer;
  bool integer = false;
  // Declared category list (ARFF nominal). Empty: read from the rows.
  std::vector<std::string> categories;
};

// A schema column (name, type, bounds or categories, nullable) as drafted,
// with what the draft knows about where its values came from.
struct DraftColumn : Column {
  // True when the bounds (numeric) or the categories (categorical) were read
  // from the rows rather than declared by the file's header.
  bool data_derived = false;
  int64_t missing = 0;
  // Categorical: how often each category occurs in the rows, parallel to
  // `categories`, so that a stray spelling shows as a rare one. For the
  // curator's eyes only: never written into the schema.
  std::vector<int64_t> category_counts;
  // Advice for people (missing numerics, suspected identifiers, ...).
  std::vector<std::string> notes;
};

// A column the draft leaves out (issue 38: the draft no longer stops at the
// first one), with what to do about it.
struct DraftProblem {
  std::string column;
  std::string message;
};

struct SchemaDraft {
  std::vector<DraftColumn> columns;
  std::optional<std::string> label;
  int64_t rows = 0;
  // Columns that could not be drafted, in file order; `columns` holds the
  // others, so the draft is usable once the file drops these.
  std::vector<DraftProblem> left_out;
};

// A numeric column whose present values are exactly 0 at least this often
// gets the atom 0 suggested (data-derived, like its bounds): a point mass
// that marginal methods should give its own cell (core/data/discretize.h).
inline constexpr double kDraftZeroAtomShare = 0.2;

// Categorical columns with more distinct values than this are refused as
// likely identifiers or free text (a one-hot block that wide is noise).
inline constexpr int kMaxDraftCategories = 1000;

// Bins for heavy-tailed numeric columns (issue 38). The data-independent
// default (core/data/discretize.h: kDefaultNumericBins equal-width bins over
// the bounds) is decided against directly: when its fullest bin would hold
// more than kDraftBinShare of the column's values (atoms left out), bins are
// drafted. Measured on 2,000-row example columns, the default's fullest bin
// holds: uniform 8%, normal 17%, lognormal sigma 0.5 27% (left alone);
// exponential 45%, lognormal sigma 1 81%, Pareto alpha 3 82%, Pareto 1.5
// 93%, lognormal sigma 1.5 (a money column) 97%, and a normal column with one
// far outlier 100% (drafted). A rule on p99/p50 alone would miss the last
// (p99/p50 1.5, max/p90 80): what hurts is one bin holding most rows, so
// that is what is tested.
inline constexpr double kDraftBinShare = 0.4;
// Quantile-like edges: this many bins at equal shares before rounding.
inline constexpr int kDraftQuantileBins = 16;
// Bins are drafted from a deterministic reservoir sample of this many
// values per column (memory stays bounded on large files).
inline constexpr size_t kDraftSampleSize = 100000;

struct DraftBins {
  // Interior edges for Column::bins; empty when the default is kept.
  std::vector<double> edges;
  // Fullest bin's share of the values (atoms left out): the default's, and
  // the drafted edges'.
  double default_share = 0.0;
  double share = 0.0;
  // True: a round 1-2-5 log series (1, 2, 5, 10, 20, ...), which reveals
  // only the orders of magnitude the values span; false: quantile-like edges
  // rounded to 2 significant digits.
  bool log_scale = false;
};

// The bins to suggest for numeric `column` (its bounds, integer flag and
// atoms as drafted) given its present values (any order). Prefers the 1-2-5
// series when the column is non-negative and that series keeps every bin at
// or below kDraftBinShare; otherwise quantile-like edges, when they do
// better than the default.
DraftBins SuggestDraftBins(const Column& column, std::vector<double> values);

class SchemaDrafter {
 public:
  // `hints` is empty (infer every column) or one per name.
  SchemaDrafter(std::vector<std::string> names, std::vector<DraftHint> hints,
                std::vector<std::string> missing_tokens = {"", "?"});

  // One row, cells in `names` order; `line` (the file's line, 0 if unknown)
  // is quoted in problems. An error only for a row with the wrong number of
  // fields (the caller adds the file and line): a bad value (a non-number in
  // a declared numeric column, a value outside a declared category list)
  // marks its column, which Finish leaves out and reports.
  absl::Status AddRow(const std::vector<std::string>& cells, int64_t line = 0);

  // The draft of every column that can be drafted; the others are listed in
  // SchemaDraft::left_out with what to do. An error when no column is left
  // or the label is unusable: `label` must name a column that drafts as
  // categorical with at least two categories and no missing values.
  absl::StatusOr<SchemaDraft> Finish(const std::optional<std::string>& label) const;

 private:
  struct Stats {
    bool all_numeric = true;
    bool all_integer = true;
    double min = 0.0;
    double max = 0.0;
    int64_t present = 0;
    int64_t missing = 0;
    int64_t zeros = 0;
    std::map<std::string, int64_t> counts;  // capped at kMaxDraftCategories + 1 keys
    // Reservoir sample of the numbers read (while the column is numeric).
    std::vector<double> sample;
    int64_t numbers = 0;
    // The first bad value's description, and how many bad values.
    std::string problem;
    int64_t bad_values = 0;
  };
  static void SampleNumber(double value, Stats* stats);
  std::vector<std::string> names_;
  std::vector<DraftHint> hints_;
  std::vector<std::string> missing_tokens_;
  std::vector<Stats> stats_;
  int64_t rows_ = 0;
};

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_DRAFT_H_
