#include "core/data/csv.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"

namespace dpcurator::data {

CsvRecordReader::CsvRecordReader(std::istream* input, CsvOptions options)
    : input_(input), options_(options) {
  for (const char special : {options_.delimiter, '\r', '\n', '"'}) {
    is_special_[static_cast<unsigned char>(special)] = true;
  }
}

bool CsvRecordReader::Fill(size_t at_least) {
  if (at_end_) return false;
  block_.resize(std::max({options_.read_block_bytes, at_least, size_t{1}}));
  input_->read(block_.data(), static_cast<std::streamsize>(block_.size()));
  pos_ = 0;
  end_ = static_cast<size_t>(input_->gcount());
  if (end_ == 0) at_end_ = true;
  return end_ > 0;
}

absl::StatusOr<bool> CsvRecordReader::Next(std::vector<std::string>* fields) {
  std::vector<absl::string_view> views;
  absl::StatusOr<bool> has = NextViews(&views);
  fields->clear();
  if (has.ok() && *has) {
    for (const absl::string_view view : views) fields->emplace_back(view);
  }
  return has;
}

// The rules, byte by byte (the runs below only skip bytes that have no rule
// of their own): outside quotes CR is dropped, LF ends the record (or is a
// blank line when the record has no byte yet but CRs), the delimiter ends a
// field, and a double quote opens a quoted field when the field holds only
// whitespace so far and was not quoted before (the whitespace is dropped);
// any other byte, a later quote included, is the field's. Inside quotes a
// doubled quote is one quote and a single one closes the quotes. Every byte
// read counts towards max_record_bytes, blank lines before the record
// included, except the second quote of a pair.
//
// With drop_malformed_records a record is one line (docs/privacy.md 6.5):
// an LF ends it inside quotes too, and the record is then malformed (its
// error is returned and the next call starts at the next line), as it is
// when the input ends inside quotes. A record past max_record_bytes is
// `overflowing`: the rest of its line is skipped, none of it kept (so
// memory stays bounded), and its error is returned at the line's end. The
// records are thus the non-blank lines whatever they hold. A blank line
// resets the count there: blank lines are not records.
absl::StatusOr<bool> CsvRecordReader::NextViews(std::vector<absl::string_view>* fields) {
  fields->clear();
  record_.clear();
  field_ends_.clear();
  if (!started_) {
    started_ = true;
    // The UTF-8 byte order mark, EF BB BF. istream::read stops short only
    // at the end of input, so the first block holds the first 3 bytes when
    // there are 3 (tests' tiny blocks included).
    Fill(3);
    if (end_ >= 3 && block_.compare(0, 3, "\xEF\xBB\xBF") == 0) pos_ = 3;
  }
  bool in_quotes = false;
  bool field_was_quoted = false;
  bool any_char = false;
  size_t field_start = 0;
  int64_t record_bytes = 0;
  const int64_t max_bytes = options_.max_record_bytes;
  const char delimiter = options_.delimiter;
  const bool by_line = options_.drop_malformed_records;
  bool overflowing = false;
  const auto too_long = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", record_line_, ": record longer than ", max_bytes, " bytes"));
  };
  const auto unclosed_on_line = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", record_line_, ": quoted field not closed on its line"));
  };
  record_line_ = line_ + 1;
  while (true) {
    if (pos_ == end_ && !Fill()) {
      if (!any_char) return false;
      if (overflowing) return too_long();
      if (in_quotes) {
        if (by_line) return unclosed_on_line();
        return absl::InvalidArgumentError(
            absl::StrCat("line ", record_line_, ": unterminated quoted field at end of input"));
      }
      field_ends_.push_back(record_.size());
      ++line_;
      break;
    }
    if (record_bytes >= max_bytes && !overflowing) {
      if (!by_line) return too_long();
      overflowing = true;
    }
    const char* const begin = block_.data() + pos_;
    if (overflowing) {
      // The rest of the line, kept nowhere. Only CRs so far: a blank line
      // unless a later byte of it is something else.
      const void* const newline = std::memchr(begin, '\n', end_ - pos_);
      const size_t run = newline == nullptr
                             ? end_ - pos_
                             : static_cast<size_t>(static_cast<const char*>(newline) - begin);
      if (!any_char) {
        any_char = std::any_of(begin, begin + run, [](char c) { return c != '\r'; });
      }
      pos_ += run;
      if (newline == nullptr) continue;
      ++pos_;
      ++line_;
      if (any_char) return too_long();
      record_line_ = line_ + 1;
      record_bytes = 0;
      overflowing = false;
      continue;
    }
    // Bytes that may be read before the record is too long.
    const size_t room = static_cast<size_t>(
        std::min<int64_t>(static_cast<int64_t>(end_ - pos_), max_bytes - record_bytes));
    if (in_quotes) {
      // A run up to the next quote: the field's, LFs counted as lines (by
      // line: up to an LF, which ends the record).
      const void* quote = std::memchr(begin, '"', room);
      size_t run =
          quote == nullptr ? room : static_cast<size_t>(static_cast<const char*>(quote) - begin);
      if (by_line) {
        const void* const newline = std::memchr(begin, '\n', run);
        if (newline != nullptr) {
          pos_ += static_cast<size_t>(static_cast<const char*>(newline) - begin) + 1;
          ++line_;
          return unclosed_on_line();
        }
      }
      if (run > 0) {
        record_.append(begin, run);
        line_ += std::count(begin, begin + run, '\n');
        pos_ += run;
        record_bytes += static_cast<int64_t>(run);
        continue;
      }
      ++pos_;
      ++record_bytes;
      if (pos_ == end_) Fill();
      if (pos_ < end_ && block_[pos_] == '"') {
        ++pos_;  // not counted (the reader has always counted a pair as one byte)
        record_.push_back('"');
      } else {
        in_quotes = false;
      }
      continue;
    }
    size_t run = 0;
    while (run < room && !is_special_[static_cast<unsigned char>(begin[run])]) ++run;
    if (run > 0) {
      record_.append(begin, run);
      any_char = true;
      pos_ += run;
      record_bytes += static_cast<int64_t>(run);
      continue;
    }
    const char c = *begin;
    ++pos_;
    ++record_bytes;
    if (c == '\r') continue;
    if (c == '\n') {
      ++line_;
      if (!any_char) {  // blank line
        record_line_ = line_ + 1;
        if (by_line) record_bytes = 0;
        continue;
      }
      field_ends_.push_back(record_.size());
      break;
    }
    any_char = true;
    if (c == delimiter) {
      field_ends_.push_back(record_.size());
      field_start = record_.size();
      field_was_quoted = false;
    } else if (c == '"' && !field_was_quoted &&
               absl::StripAsciiWhitespace(absl::string_view(record_).substr(field_start))
                   .empty()) {
      in_quotes = true;
      field_was_quoted = true;
      record_.resize(field_start);
    } else {
      record_.push_back(c);
    }
  }
  size_t start = 0;
  for (const size_t field_end : field_ends_) {
    fields->push_back(absl::string_view(record_).substr(start, field_end - start));
    start = field_end;
  }
  return true;
}

absl::StatusOr<std::vector<int>> MapHeader(const Schema& schema,
                                           const std::vector<std::string>& header) {
  std::vector<int> mapping(schema.num_columns(), -1);
  for (int f = 0; f < static_cast<int>(header.size()); ++f) {
    auto column = schema.FindColumn(absl::StripAsciiWhitespace(header[f]));
    if (column.has_value()) {
      if (mapping[*column] != -1) {
        return absl::InvalidArgumentError(
            absl::StrCat("header names column '", header[f], "' twice"));
      }
      mapping[*column] = f;
    }
  }
  for (int c = 0; c < schema.num_columns(); ++c) {
    if (mapping[c] == -1) {
      std::string read;
      for (size_t f = 0; f < header.size(); ++f) {
        absl::StrAppend(&read, f > 0 ? ", " : "", "'", header[f], "'");
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "header has no column '", schema.column(c).name,
          "' (the schema declares it; the header must name every schema column). The header "
          "read has ", header.size(), header.size() == 1 ? " field: " : " fields: ", read,
          header.size() == 1 ? " (a file separated by another character than the delimiter reads as one field)"
                             : ""));
    }
  }
  return mapping;
}

absl::Status TableBuilder::AddRow(absl::Span<const std::string> cells) {
  if (static_cast<int>(cells.size()) != schema_.num_columns()) {
    return absl::InvalidArgumentError(absl::StrCat("row has ", cells.size(),
                                                   " fields, the schema declares ",
                                                   schema_.num_columns()));
  }
  row_.resize(cells.size());
  int64_t clamped = 0;
  for (int c = 0; c < schema_.num_columns(); ++c) {
    DPC_ASSIGN_OR_RETURN(ParsedCell cell, schema_.ParseCell(c, cells[c]));
    row_[c] = cell.value;
    clamped += cell.clamped ? 1 : 0;
  }
  values_.insert(values_.end(), row_.begin(), row_.end());
  clamped_cells_ += clamped;
  ++num_rows_;
  return absl::OkStatus();
}

Table TableBuilder::Finish() {
  Table table;
  table.cells = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic,
                                               Eigen::RowMajor>>(values_.data(), num_rows_,
                                                                 schema_.num_columns());
  table.clamped_cells = clamped_cells_;
  values_.clear();
  num_rows_ = 0;
  clamped_cells_ = 0;
  return table;
}

// A column's parsed cells by their text (untrimmed, as read), so that a
// text seen before is not parsed again. Bounded: texts longer than
// kMaxTextBytes are not kept, and a column whose texts rarely repeat (more
// than kMinTexts held, and more than one per kMinLookupsPerText lookups: a
// column of measurements) stops using it, so that it pays neither an insert
// nor a failed lookup per cell.
struct CsvTableReader::CellMemo {
  static constexpr size_t kMinTexts = 64;
  static constexpr size_t kMinLookupsPerText = 4;
  static constexpr size_t kMaxTexts = 4096;
  static constexpr size_t kMaxTextBytes = 64;
  bool enabled = true;
  size_t lookups = 0;
  absl::flat_hash_map<std::string, absl::StatusOr<ParsedCell>> parsed;
};

CsvTableReader::CsvTableReader(const Schema& schema, std::istream* input,
                               const CsvOptions& options, std::string source)
    : schema_(schema),
      options_(options),
      source_(std::move(source)),
      reader_(input, options),
      memos_(static_cast<size_t>(schema.num_columns())) {}

CsvTableReader::~CsvTableReader() = default;

absl::StatusOr<std::unique_ptr<CsvTableReader>> CsvTableReader::Open(const Schema& schema,
                                                                     std::istream* input,
                                                                     const CsvOptions& options,
                                                                     std::string source) {
  std::unique_ptr<CsvTableReader> reader(
      new CsvTableReader(schema, input, options, std::move(source)));
  reader->mapping_.resize(static_cast<size_t>(schema.num_columns()));
  for (int c = 0; c < schema.num_columns(); ++c) reader->mapping_[static_cast<size_t>(c)] = c;
  reader->expected_fields_ = static_cast<size_t>(schema.num_columns());
  if (options.has_header) {
    std::vector<std::string> header;
    auto has = reader->reader_.Next(&header);
    if (!has.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(reader->source_, ": ", has.status().message()));
    }
    if (!*has) return absl::InvalidArgumentError(absl::StrCat(reader->source_, ": empty file"));
    auto mapped = MapHeader(schema, header);
    if (!mapped.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(reader->source_, ": ", mapped.status().message()));
    }
    reader->mapping_ = *std::move(mapped);
    reader->expected_fields_ = header.size();
  }
  return reader;
}

absl::StatusOr<ParsedCell> CsvTableReader::Parse(int column, absl::string_view token) {
  CellMemo& memo = memos_[static_cast<size_t>(column)];
  if (!memo.enabled || token.size() > CellMemo::kMaxTextBytes) {
    return schema_.ParseCell(column, token);
  }
  ++memo.lookups;
  const auto found = memo.parsed.find(token);
  if (found != memo.parsed.end()) return found->second;
  absl::StatusOr<ParsedCell> cell = schema_.ParseCell(column, token);
  const size_t held = memo.parsed.size();
  if (held >= CellMemo::kMaxTexts ||
      (held >= CellMemo::kMinTexts && held * CellMemo::kMinLookupsPerText > memo.lookups)) {
    memo.enabled = false;
    memo.parsed = {};
  } else {
    memo.parsed.emplace(std::string(token), cell);
  }
  return cell;
}

absl::StatusOr<bool> CsvTableReader::Next(int64_t max_rows, Table* table) {
  const int num_columns = schema_.num_columns();
  values_.clear();
  // A chunk's cells in one allocation (ReadCsv's unbounded read grows).
  constexpr int64_t kReserveRows = int64_t{1} << 20;
  if (max_rows <= kReserveRows) values_.reserve(static_cast<size_t>(max_rows * num_columns));
  int64_t rows = 0;
  int64_t clamped_cells = 0;
  int64_t dropped = 0;
  const bool drop = options_.drop_malformed_records;
  // A record that cannot be read: the error, or (drop) counted and skipped.
  // `detail` is the message after "<source>:<line>: ".
  const auto malformed = [&](int64_t line, absl::string_view detail) {
    if (drop) {
      ++dropped;
      ++malformed_records_;
      if (malformed_examples_.size() < kMaxMalformedExamples) {
        malformed_examples_.push_back(MalformedRecord{line, std::string(detail)});
      }
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", line, ": ", detail));
  };
  while (rows < max_rows) {
    auto has = reader_.NextViews(&fields_);
    if (!has.ok()) {
      if (!drop) {
        return absl::InvalidArgumentError(absl::StrCat(source_, ": ", has.status().message()));
      }
      // The record reader's message starts "line N: "; it has read past
      // the record (CsvRecordReader::Next), so reading goes on.
      absl::string_view detail = has.status().message();
      const size_t colon = detail.find(": ");
      if (colon != absl::string_view::npos) detail.remove_prefix(colon + 2);
      DPC_RETURN_IF_ERROR(malformed(reader_.line_number(), detail));
      continue;
    }
    if (!*has) break;
    if (fields_.size() != expected_fields_) {
      DPC_RETURN_IF_ERROR(malformed(
          reader_.line_number(),
          absl::StrCat("row has ", fields_.size(), " fields, expected ", expected_fields_,
                       options_.has_header ? " (as many as the header)"
                                           : " (one per schema column)",
                       "; quote fields that contain the delimiter")));
      continue;
    }
    int64_t row_clamped = 0;
    bool kept = true;
    for (int c = 0; c < num_columns; ++c) {
      absl::StatusOr<ParsedCell> cell =
          Parse(c, fields_[static_cast<size_t>(mapping_[static_cast<size_t>(c)])]);
      if (!cell.ok()) {
        // The row is not kept (TableBuilder::AddRow adds a row whole).
        values_.resize(static_cast<size_t>(rows * num_columns));
        DPC_RETURN_IF_ERROR(malformed(reader_.line_number(), cell.status().message()));
        kept = false;
        break;
      }
      values_.push_back(cell->value);
      row_clamped += cell->clamped ? 1 : 0;
    }
    if (!kept) continue;
    clamped_cells += row_clamped;
    ++rows;
  }
  table->cells = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic,
                                                Eigen::RowMajor>>(values_.data(), rows,
                                                                  num_columns);
  table->pixels.clear();
  table->clamped_cells = clamped_cells;
  return rows > 0 || dropped > 0;
}

absl::StatusOr<Table> ReadCsv(const Schema& schema, std::istream* input,
                              const CsvOptions& options, absl::string_view source) {
  DPC_ASSIGN_OR_RETURN(std::unique_ptr<CsvTableReader> reader,
                       CsvTableReader::Open(schema, input, options, std::string(source)));
  Table table;
  DPC_RETURN_IF_ERROR(reader->Next(std::numeric_limits<int64_t>::max(), &table).status());
  return table;
}

absl::StatusOr<Table> ReadCsvFile(const Schema& schema, const std::string& path,
                                  const CsvOptions& options) {
  std::ifstream input(path);
  if (!input) {
    return absl::NotFoundError(absl::StrCat("cannot open '", path, "' for reading"));
  }
  return ReadCsv(schema, &input, options, path);
}

namespace {

// RFC 4180 quoting where the reader needs it. CR must be quoted too: outside
// quotes the reader drops it (CRLF line ends).
void WriteField(absl::string_view text, std::ostream* output) {
  if (text.find_first_of(",\"\n\r") == absl::string_view::npos) {
    *output << text;
    return;
  }
  *output << '"';
  for (char ch : text) {
    if (ch == '"') *output << '"';
    *output << ch;
  }
  *output << '"';
}

}  // namespace

void WriteCsv(const Schema& schema, const Table& table, std::ostream* output, bool header) {
  if (header) {
    for (int c = 0; c < schema.num_columns(); ++c) {
      if (c > 0) *output << ',';
      WriteField(schema.column(c).name, output);
    }
    *output << '\n';
  }
  for (Eigen::Index i = 0; i < table.cells.rows(); ++i) {
    for (int c = 0; c < schema.num_columns(); ++c) {
      if (c > 0) *output << ',';
      const std::string text = schema.FormatCell(c, table.cells(i, c));
      // A lone empty field would be a blank line, which the reader skips.
      if (text.empty() && schema.num_columns() == 1) {
        *output << "\"\"";
      } else {
        WriteField(text, output);
      }
    }
    *output << '\n';
  }
}

}  // namespace dpcurator::data
