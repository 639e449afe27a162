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

struct SchemaDraft {
  std::vector<DraftColumn> columns;
  std::optional<std::string> label;
  int64_t rows = 0;
};

// A numeric column whose present values are exactly 0 at least this often
// gets the atom 0 suggested (data-derived, like its bounds): a point mass
// that marginal methods should give its own cell (core/data/discretize.h).
inline constexpr double kDraftZeroAtomShare = 0.2;

// Categorical columns with more distinct values than this are refused as
// likely identifiers or free text (a one-hot block that wide is noise).
inline constexpr int kMaxDraftCategories = 1000;

class SchemaDrafter {
 public:
  // `hints` is empty (infer every column) or one per name.
  SchemaDrafter(std::vector<std::string> names, std::vector<DraftHint> hints,
                std::vector<std::string> missing_tokens = {"", "?"});

  // One row, cells in `names` order. Errors name the column and the value
  // (the caller adds the file and line).
  absl::Status AddRow(const std::vector<std::string>& cells);

  // The draft. `label` must name a column that drafts as categorical with at
  // least two categories and no missing values.
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
  };
  std::vector<std::string> names_;
  std::vector<DraftHint> hints_;
  std::vector<std::string> missing_tokens_;
  std::vector<Stats> stats_;
  int64_t rows_ = 0;
};

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_DRAFT_H_
