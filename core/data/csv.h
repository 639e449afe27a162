#ifndef DPCURATOR_CORE_DATA_CSV_H_
#define DPCURATOR_CORE_DATA_CSV_H_

#include <cstdint>
#include <istream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/data/schema.h"
#include "core/data/table.h"

namespace dpcurator::data {

// Bytes the record reader asks its stream for at a time.
inline constexpr size_t kCsvReadBlockBytes = size_t{1} << 16;

struct CsvOptions {
  char delimiter = ',';
  // The first record names the columns; columns are matched to the schema by
  // name (extra columns are ignored). Without a header, fields are taken in
  // schema order.
  bool has_header = true;
  // Longest record accepted, so that a garbage file cannot exhaust memory.
  int64_t max_record_bytes = 1 << 20;
  // Bytes read from the stream at a time (tests make it tiny, so that
  // records and quote pairs straddle blocks).
  size_t read_block_bytes = kCsvReadBlockBytes;
  // The scale-out partials' reading (python/src/partials.h; docs/privacy.md
  // 6.5): a record is one line (a quoted field may not hold a line end),
  // and a record that cannot be read (a field count other than the
  // header's, a cell Schema::ParseCell refuses, longer than
  // max_record_bytes, a quoted field not closed on its line) is dropped and
  // counted (CsvTableReader::malformed_records) instead of ending the read,
  // so that the read is a total function of the records and the number of
  // records, kept or dropped, is the number of non-blank lines whatever
  // they hold. An upload leaves it false: a stored dataset never holds such
  // a row, and a quoted field there may span lines (RFC 4180).
  bool drop_malformed_records = false;
};

// A record that CsvOptions::drop_malformed_records dropped: its line and
// the reader's message (which may quote a cell: for the curator only).
struct MalformedRecord {
  int64_t line = 0;
  std::string detail;
};
// Dropped records a CsvTableReader keeps the line and message of (it
// counts them all).
inline constexpr size_t kMaxMalformedExamples = 8;

// Splits a stream into records (RFC 4180 quoting; surrounding whitespace of
// unquoted fields is kept and trimmed later by Schema::ParseCell; with
// CsvOptions::drop_malformed_records a record is one line). Blank lines
// (nothing but CRs) are skipped. A UTF-8 byte order mark (EF BB BF) at the very start of the
// stream is dropped: spreadsheet exports write one, and it would otherwise
// become part of the first column's name. Streams: reads the input in blocks
// of kCsvReadBlockBytes and holds one record's fields at a time (in one
// reused buffer, so a record costs no allocation once the buffer has grown).
class CsvRecordReader {
 public:
  CsvRecordReader(std::istream* input, CsvOptions options);

  // Reads the next record into `fields`; returns false at the end of input.
  // With options.drop_malformed_records a record ends at the end of its
  // line, inside quotes too (its error is then returned), and a record
  // longer than max_record_bytes is skipped to the end of its line (holding
  // none of its bytes) before its error is returned, so that the next call
  // starts at the next line.
  absl::StatusOr<bool> Next(std::vector<std::string>* fields);
  // The same record as views into the reader's buffer, valid until the next
  // call (the bulk readers' path: no string per field).
  absl::StatusOr<bool> NextViews(std::vector<absl::string_view>* fields);
  // Line number (1-based) where the last record returned started.
  int64_t line_number() const { return record_line_; }

 private:
  // Reads the next block of input (at least `at_least` bytes unless the
  // input ends first) into block_; false at the end of input.
  bool Fill(size_t at_least = 1);

  std::istream* input_;
  CsvOptions options_;
  bool started_ = false;
  std::string block_;
  size_t pos_ = 0;
  size_t end_ = 0;
  bool at_end_ = false;
  // is_special_[byte]: a byte that ends a run of plain field bytes outside
  // quotes (the delimiter, CR, LF, the double quote).
  bool is_special_[256] = {};
  // The record's field bytes, one after the other, and where each ends.
  std::string record_;
  std::vector<size_t> field_ends_;
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

// Reads CSV text into Tables under `schema`, a block of rows at a time, so
// a large file is read in bounded memory (the scale-out partials,
// python/src/partials.h, accumulate chunk by chunk). ReadCsv is this reader
// over the whole input: one set of rules for every CSV path. A cell is parsed
// by Schema::ParseCell; a column's distinct short texts are parsed once and
// remembered (equal text parses equally, so the result is the same).
class CsvTableReader {
 public:
  // Reads the header (when options.has_header). Errors start with `source`.
  static absl::StatusOr<std::unique_ptr<CsvTableReader>> Open(const Schema& schema,
                                                              std::istream* input,
                                                              const CsvOptions& options,
                                                              std::string source);
  ~CsvTableReader();
  CsvTableReader(const CsvTableReader&) = delete;
  CsvTableReader& operator=(const CsvTableReader&) = delete;

  // Replaces *table with the next rows, at most `max_rows` (>= 1); false
  // when no row was left (*table then has none). Errors are ReadCsv's.
  // With options.drop_malformed_records a record that cannot be read is
  // dropped and counted instead, and only a header error is an error; true
  // then means that records were read, kept or dropped (a chunk may keep
  // none).
  absl::StatusOr<bool> Next(int64_t max_rows, Table* table);
  // Records dropped so far (drop_malformed_records), and the first
  // kMaxMalformedExamples of them in file order.
  int64_t malformed_records() const { return malformed_records_; }
  const std::vector<MalformedRecord>& malformed_examples() const { return malformed_examples_; }

 private:
  struct CellMemo;

  CsvTableReader(const Schema& schema, std::istream* input, const CsvOptions& options,
                 std::string source);
  absl::StatusOr<ParsedCell> Parse(int column, absl::string_view token);

  const Schema& schema_;
  CsvOptions options_;
  std::string source_;
  CsvRecordReader reader_;
  std::vector<int> mapping_;
  size_t expected_fields_ = 0;
  std::vector<CellMemo> memos_;
  std::vector<absl::string_view> fields_;
  std::vector<double> values_;  // row-major while reading
  int64_t malformed_records_ = 0;
  std::vector<MalformedRecord> malformed_examples_;
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
