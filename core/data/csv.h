#ifndef DPCURATOR_CORE_DATA_CSV_H_
#define DPCURATOR_CORE_DATA_CSV_H_

#include <cstdint>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/data/schema.h"
#include "core/data/table.h"

namespace dpcurator::data {

struct CsvOptions {
  char delimiter = ',';
  // The first record names the columns; columns are matched to the schema by
  // name (extra columns are ignored). Without a header, fields are taken in
  // schema order.
  bool has_header = true;
  // Longest record accepted, so that a garbage file cannot exhaust memory.
  int64_t max_record_bytes = 1 << 20;
};

// Splits a stream into records (RFC 4180 quoting; surrounding whitespace of
// unquoted fields is kept and trimmed later by Schema::ParseCell). Blank lines
// are skipped. A UTF-8 byte order mark (EF BB BF) at the very start of the
// stream is dropped: spreadsheet exports write one, and it would otherwise
// become part of the first column's name. Streams: holds one record at a
// time.
class CsvRecordReader {
 public:
  CsvRecordReader(std::istream* input, CsvOptions options)
      : input_(input), options_(options) {}

  // Reads the next record into `fields`; returns false at the end of input.
  absl::StatusOr<bool> Next(std::vector<std::string>* fields);
  // Line number (1-based) where the last record returned started.
  int64_t line_number() const { return record_line_; }

 private:
  // The next character, from `pushback_` first (bytes read while looking
  // for a byte order mark that was not one), then from the stream.
  int Get();
  int Peek();

  std::istream* input_;
  CsvOptions options_;
  bool started_ = false;
  std::string pushback_;
  int64_t line_ = 0;
  int64_t record_line_ = 0;
};

// For each schema column, the index of its field in a header record. A
// missing column's error quotes the header as read (every field), so that a
// wrong delimiter or a stray character in a name shows.
absl::StatusOr<std::vector<int>> MapHeader(const Schema& schema,
                                           const std::vector<std::string>& header);

// Builds a Table row by row from text cells in schema column order.
class TableBuilder {
 public:
  explicit TableBuilder(const Schema& schema) : schema_(schema) {}
  // Parses one row; on error nothing is added and the message names the
  // column and value.
  absl::Status AddRow(absl::Span<const std::string> cells);
  int64_t num_rows() const { return num_rows_; }
  Table Finish();

 private:
  const Schema& schema_;
  std::vector<double> values_;  // row-major while building
  std::vector<double> row_;
  int64_t num_rows_ = 0;
  int64_t clamped_cells_ = 0;
};

// Reads CSV text from `input` into a Table under `schema`. Errors start with
// `source` (a file name, for people) and the line. Lines that fail to parse
// are errors, not silently dropped, and so is a record whose field count
// differs from the header's (or, without a header, from the schema's): a
// stray delimiter would otherwise shift every later cell into the wrong
// column.
absl::StatusOr<Table> ReadCsv(const Schema& schema, std::istream* input,
                              const CsvOptions& options, absl::string_view source);

// ReadCsv over the file at `path`.
absl::StatusOr<Table> ReadCsvFile(const Schema& schema, const std::string& path,
                                  const CsvOptions& options = {});

// Writes a table with a header line (unless `header` is false: a further
// chunk of the same file), in the schema's column order. Fields holding a
// delimiter, quote, CR or LF are quoted, so ReadCsv reads back the same
// cells.
void WriteCsv(const Schema& schema, const Table& table, std::ostream* output,
              bool header = true);

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_CSV_H_
