#ifndef DPCURATOR_CLIENT_TEXT_UPLOAD_H_
#define DPCURATOR_CLIENT_TEXT_UPLOAD_H_

// `dpcurator upload --csv|--arff`: a text file checked in full on this
// machine, then sent in one stream that the server stores as one
// transaction (all rows or none; server/service.cc UploadRows).
//
// The file is read twice: the first pass parses every record against the
// schema and lists every bad line (up to kMaxReportedBadLines) with its line
// number and why; nothing is sent unless the whole file is good. The second
// pass streams the rows. `--dry-run` stops after the first pass.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// Bad lines listed by one check, at most; the rest are counted.
inline constexpr int kMaxReportedBadLines = 20;
// Lines named per column in the missing-value summary.
inline constexpr int kMissingLinesShown = 5;

enum class TextFormat { kCsv, kArff };

struct TextUploadOptions {
  TextFormat format = TextFormat::kCsv;
  // CSV only: the field separator (one byte).
  char delimiter = ',';
  // CSV only: numeric cells use a decimal comma ("1,5" is 1.5), as in a
  // ';'-separated spreadsheet export. Needs a delimiter other than ','.
  bool decimal_comma = false;
  int rows_per_message = 2000;
  // `upload --append`: rows equal to rows already stored are meant (the
  // server refuses them otherwise; UploadRowsRequest.append).
  bool append = false;
};

// The value of --delimiter: one character, or "tab" (also "\t").
absl::StatusOr<char> ParseDelimiter(const std::string& text);

// What the first pass found in a good file.
struct TextFileCheck {
  int64_t rows = 0;
  // Numeric cells outside the declared bounds (the server clamps them).
  int64_t cells_out_of_bounds = 0;
  // The file's columns that the schema does not name (not uploaded), in
  // the file's order.
  std::vector<std::string> ignored_columns;
};

// The first pass. INVALID_ARGUMENT lists every bad line found ("FILE:LINE:
// why", one a line, at most kMaxReportedBadLines, then how many more);
// NOT_FOUND when the file cannot be opened. Missing values in columns that
// are not nullable are summarised per column instead (how many, and the
// first kMissingLinesShown lines), not listed line by line: a column with
// gaps has them on many lines, and 20 identical lines hid the other
// columns (issue 38).
absl::StatusOr<TextFileCheck> CheckTextFile(const data::Schema& schema, const std::string& path,
                                            const TextUploadOptions& options);

// Both passes: nothing is sent unless the whole file is good. A refusal by
// the server names FILE:LINE where it can; the server stores nothing then.
absl::StatusOr<v1::UploadRowsResponse> UploadTextFile(Connection& connection,
                                                      const std::string& dataset_id,
                                                      const data::Schema& schema,
                                                      const std::string& path,
                                                      const TextUploadOptions& options);

// The format a file's name suggests: ARFF for "*.arff" (any case), CSV
// otherwise. `eval` and `report` read their files by it.
TextFormat TextFormatOfPath(const std::string& path);

// A CSV or ARFF file read into a table on this machine (`eval`, `report`,
// with the reader `upload` uses), for files that are not sent anywhere.
struct LocalTable {
  data::Table table;
  // Rows left out because the schema cannot read them (a stray category in a
  // held-out file, a missing value in a column that is not nullable, a cell
  // that is no number, a line of the wrong width).
  int64_t rows_skipped = 0;
  // Why, for people: "column 'purpose': 'vacation' (2 rows), column 'age':
  // a missing value (1 row), ..." (the first few).
  std::string skipped_detail;
};

// Reads every row of `path` under `schema`. With `skip_unreadable` (a real,
// held-out file: `eval`, `report`), a row the schema cannot read is counted
// and left out, by reason; without it (a synthetic file, the sampler's own),
// any bad line is an error naming FILE:LINE.
absl::StatusOr<LocalTable> ReadLocalTable(const data::Schema& schema, const std::string& path,
                                          const TextUploadOptions& options,
                                          bool skip_unreadable);

// `dpcurator split`: a test split held out on this machine before anything
// is uploaded. Exactly round(test_fraction * rows) records, drawn without
// replacement by a public seeded shuffle, go to the test file, the rest to
// the train file, each in the input's order with its header. Both are CSV
// (an ARFF input's attribute names become the header line) with the
// input's delimiter; cells are written as read, quoted where they must be.
struct SplitCounts {
  int64_t train_rows = 0;
  int64_t test_rows = 0;
};
absl::StatusOr<SplitCounts> SplitTextFile(const std::string& path,
                                          const TextUploadOptions& options,
                                          double test_fraction, uint64_t seed,
                                          const std::string& train_out,
                                          const std::string& test_out);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_TEXT_UPLOAD_H_
