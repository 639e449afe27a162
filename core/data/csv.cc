#include "core/data/csv.h"

#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"

namespace dpcurator::data {

int CsvRecordReader::Get() {
  if (!pushback_.empty()) {
    const int ch = static_cast<unsigned char>(pushback_.front());
    pushback_.erase(0, 1);
    return ch;
  }
  return input_->get();
}

int CsvRecordReader::Peek() {
  if (!pushback_.empty()) return static_cast<unsigned char>(pushback_.front());
  return input_->peek();
}

absl::StatusOr<bool> CsvRecordReader::Next(std::vector<std::string>* fields) {
  fields->clear();
  if (!started_) {
    started_ = true;
    // The UTF-8 byte order mark, EF BB BF; any other bytes read are kept.
    constexpr unsigned char kBom[] = {0xEF, 0xBB, 0xBF};
    for (unsigned char expected : kBom) {
      const int ch = input_->peek();
      if (ch != expected) break;
      pushback_.push_back(static_cast<char>(input_->get()));
    }
    if (pushback_.size() == sizeof(kBom)) pushback_.clear();
  }
  std::string field;
  bool in_quotes = false;
  bool field_was_quoted = false;
  bool any_char = false;
  int64_t record_bytes = 0;
  int ch;
  record_line_ = line_ + 1;
  while (true) {
    ch = Get();
    if (ch == std::char_traits<char>::eof()) {
      if (in_quotes) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", record_line_, ": unterminated quoted field at end of input"));
      }
      if (!any_char) return false;
      fields->push_back(std::move(field));
      ++line_;
      return true;
    }
    if (++record_bytes > options_.max_record_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", record_line_, ": record longer than ", options_.max_record_bytes, " bytes"));
    }
    const char c = static_cast<char>(ch);
    if (in_quotes) {
      if (c == '"') {
        if (Peek() == '"') {
          Get();
          field.push_back('"');
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line_;
        field.push_back(c);
      }
      continue;
    }
    if (c == '\r') continue;
    if (c == '\n') {
      ++line_;
      if (!any_char) {  // blank line
        record_line_ = line_ + 1;
        continue;
      }
      fields->push_back(std::move(field));
      return true;
    }
    any_char = true;
    if (c == options_.delimiter) {
      fields->push_back(std::move(field));
      field.clear();
      field_was_quoted = false;
    } else if (c == '"' && absl::StripAsciiWhitespace(field).empty() && !field_was_quoted) {
      in_quotes = true;
      field_was_quoted = true;
      field.clear();
    } else {
      field.push_back(c);
    }
  }
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

absl::StatusOr<Table> ReadCsv(const Schema& schema, std::istream* input,
                              const CsvOptions& options, absl::string_view source) {
  CsvRecordReader reader(input, options);
  std::vector<std::string> fields;
  std::vector<int> mapping(schema.num_columns());
  for (int c = 0; c < schema.num_columns(); ++c) mapping[c] = c;
  size_t expected_fields = static_cast<size_t>(schema.num_columns());
  if (options.has_header) {
    auto has = reader.Next(&fields);
    if (!has.ok()) return absl::InvalidArgumentError(absl::StrCat(source, ": ", has.status().message()));
    if (!*has) return absl::InvalidArgumentError(absl::StrCat(source, ": empty file"));
    auto mapped = MapHeader(schema, fields);
    if (!mapped.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", mapped.status().message()));
    }
    mapping = *std::move(mapped);
    expected_fields = fields.size();
  }
  TableBuilder builder(schema);
  std::vector<std::string> ordered(schema.num_columns());
  while (true) {
    auto has = reader.Next(&fields);
    if (!has.ok()) return absl::InvalidArgumentError(absl::StrCat(source, ": ", has.status().message()));
    if (!*has) break;
    if (fields.size() != expected_fields) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", reader.line_number(), ": row has ", fields.size(), " fields, expected ",
          expected_fields, options.has_header ? " (as many as the header)" : " (one per schema column)",
          "; quote fields that contain the delimiter"));
    }
    for (int c = 0; c < schema.num_columns(); ++c) {
      ordered[c] = std::move(fields[mapping[c]]);
    }
    absl::Status status = builder.AddRow(ordered);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", reader.line_number(), ": ", status.message()));
    }
  }
  return builder.Finish();
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
