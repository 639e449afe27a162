#include "client/text_upload.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/progress.h"
#include "client/upload.h"
#include "core/data/arff.h"
#include "core/data/csv.h"

namespace dpcurator::client {
namespace {

// One file's records, the same way for both passes: the header (CSV first
// record, ARFF @attribute names) and then records with their 1-based line.
class RecordFile {
 public:
  static absl::StatusOr<std::unique_ptr<RecordFile>> Open(const std::string& path,
                                                          const TextUploadOptions& options) {
    auto file = std::unique_ptr<RecordFile>(new RecordFile(path, options));
    file->input_.open(path, std::ios::binary);
    if (!file->input_) {
      return absl::NotFoundError(absl::StrCat("cannot open '", path, "' for reading"));
    }
    if (options.format == TextFormat::kArff) {
      file->arff_ = std::make_unique<data::ArffReader>(&file->input_, path);
      auto header = file->arff_->ReadHeader();
      if (!header.ok()) return header.status();
      for (const auto& attribute : header->attributes) file->header_.push_back(attribute.name);
    } else {
      data::CsvOptions csv;
      csv.delimiter = options.delimiter;
      file->csv_ = std::make_unique<data::CsvRecordReader>(&file->input_, csv);
      auto has = file->csv_->Next(&file->header_);
      if (!has.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", has.status().message()));
      }
      if (!*has) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
    }
    return file;
  }

  const std::vector<std::string>& header() const { return header_; }

  // The next record; false at the end. An error is a line the reader could
  // not split: `recoverable()` says whether reading can go on after it
  // (ARFF reads line by line; a CSV quote left open swallows the rest).
  absl::StatusOr<bool> Next(std::vector<std::string>* fields, int64_t* line) {
    if (arff_ != nullptr) {
      auto more = arff_->Next(fields);
      *line = arff_->line_number();
      return more;
    }
    auto more = csv_->Next(fields);
    *line = csv_->line_number();
    if (!more.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": ", more.status().message()));
    }
    return more;
  }
  bool recoverable() const { return arff_ != nullptr; }

 private:
  RecordFile(std::string path, const TextUploadOptions& options)
      : path_(std::move(path)), options_(options) {}

  std::string path_;
  TextUploadOptions options_;
  std::ifstream input_;
  std::unique_ptr<data::ArffReader> arff_;
  std::unique_ptr<data::CsvRecordReader> csv_;
  std::vector<std::string> header_;
};

absl::Status CheckOptions(const TextUploadOptions& options) {
  if (options.format == TextFormat::kCsv && options.decimal_comma && options.delimiter == ',') {
    return absl::InvalidArgumentError(
        "--decimal-comma needs another field separator: a ','-separated file cannot also use "
        "',' inside numbers (give --delimiter ';')");
  }
  return absl::OkStatus();
}

// The header's field of each schema column; the error names the file.
absl::StatusOr<std::vector<int>> MapFileHeader(const data::Schema& schema,
                                               const std::string& path,
                                               const std::vector<std::string>& header,
                                               const TextUploadOptions& options) {
  auto mapping = data::MapHeader(schema, header);
  if (mapping.ok()) return mapping;
  std::string hint;
  if (options.format == TextFormat::kCsv && header.size() == 1) {
    for (char candidate : {';', '\t', '|'}) {
      if (candidate != options.delimiter &&
          header[0].find(candidate) != std::string::npos) {
        hint = candidate == '\t' ? " Try --delimiter tab."
                                 : absl::StrCat(" Try --delimiter '", std::string(1, candidate),
                                                "'.");
        break;
      }
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ":1: ", mapping.status().message(), hint));
}

// The cells of one record in schema order, as they will be sent (decimal
// commas turned into points in numeric columns), or why the line is bad.
absl::Status RowCells(const data::Schema& schema, const std::vector<int>& mapping,
                      const std::vector<std::string>& header,
                      const std::vector<std::string>& fields, const TextUploadOptions& options,
                      std::vector<std::string>* cells, int64_t* out_of_bounds) {
  if (fields.size() != header.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "row has ", fields.size(), " fields, the header has ", header.size(),
        options.format == TextFormat::kCsv
            ? absl::StrCat("; quote fields that contain the delimiter '",
                           std::string(1, options.delimiter), "'")
            : ""));
  }
  cells->resize(schema.num_columns());
  for (int c = 0; c < schema.num_columns(); ++c) {
    std::string cell = fields[mapping[c]];
    if (options.decimal_comma && schema.column(c).type == data::ColumnType::kNumeric) {
      for (char& ch : cell) {
        if (ch == ',') ch = '.';
      }
    }
    auto parsed = schema.ParseCell(c, cell);
    if (!parsed.ok()) return parsed.status();
    if (parsed->clamped) ++*out_of_bounds;
    (*cells)[c] = std::move(cell);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<char> ParseDelimiter(const std::string& text) {
  if (text == "tab" || text == "\\t" || text == "\t") return '\t';
  if (text.size() != 1 || text[0] == '"' || text[0] == '\n' || text[0] == '\r') {
    return absl::InvalidArgumentError(absl::StrCat(
        "--delimiter '", text, "' is not one character: give e.g. ',' ';' '|' or tab"));
  }
  return text[0];
}

absl::StatusOr<TextFileCheck> CheckTextFile(const data::Schema& schema, const std::string& path,
                                            const TextUploadOptions& options) {
  if (auto status = CheckOptions(options); !status.ok()) return status;
  auto file = RecordFile::Open(path, options);
  if (!file.ok()) return file.status();
  auto mapping = MapFileHeader(schema, path, (*file)->header(), options);
  if (!mapping.ok()) return mapping.status();
  TextFileCheck check;
  {
    std::vector<bool> used((*file)->header().size(), false);
    for (int field : *mapping) used[static_cast<size_t>(field)] = true;
    for (size_t i = 0; i < used.size(); ++i) {
      if (!used[i]) check.ignored_columns.push_back((*file)->header()[i]);
    }
  }
  // Per schema column: lines whose cell is a missing-value token the column
  // does not accept (not nullable), counted, the first few kept.
  std::vector<int64_t> missing_count(static_cast<size_t>(schema.num_columns()), 0);
  std::vector<std::vector<int64_t>> missing_lines(static_cast<size_t>(schema.num_columns()));
  auto refuses_missing = [&](int c, absl::string_view field) {
    const absl::string_view token = absl::StripAsciiWhitespace(field);
    const auto& tokens = schema.missing_tokens();
    return std::find(tokens.begin(), tokens.end(), token) != tokens.end() &&
           !schema.ParseCell(c, token).ok();
  };
  std::vector<std::string> fields;
  std::vector<std::string> cells;
  std::vector<std::string> bad_lines;
  int64_t bad = 0;    // bad lines, summarised ones included
  int64_t noted = 0;  // bad lines to list one by one
  auto note = [&](std::string text) {
    ++bad;
    ++noted;
    if (bad_lines.size() < static_cast<size_t>(kMaxReportedBadLines)) {
      bad_lines.push_back(std::move(text));
    }
  };
  while (true) {
    int64_t line = 0;
    auto more = (*file)->Next(&fields, &line);
    if (!more.ok()) {
      note(std::string(more.status().message()));
      if ((*file)->recoverable()) continue;
      break;
    }
    if (!*more) break;
    auto row = RowCells(schema, *mapping, (*file)->header(), fields, options, &cells,
                        &check.cells_out_of_bounds);
    if (!row.ok()) {
      // A line whose only fault may be missing values goes to the per-column
      // summary (its other faults, if any, show once the gaps are filled).
      bool summarised = false;
      if (fields.size() == (*file)->header().size()) {
        for (int c = 0; c < schema.num_columns(); ++c) {
          if (!refuses_missing(c, fields[static_cast<size_t>((*mapping)[c])])) continue;
          const auto column = static_cast<size_t>(c);
          if (++missing_count[column] <= kMissingLinesShown) {
            missing_lines[column].push_back(line);
          }
          summarised = true;
        }
      }
      if (summarised) {
        ++bad;
      } else {
        note(absl::StrCat(path, ":", line, ": ", row.message()));
      }
      continue;
    }
    ++check.rows;
  }
  if (bad > 0) {
    std::string text = absl::StrCat(bad, bad == 1 ? " bad line" : " bad lines", " in ", path,
                                    "; nothing was uploaded. Fix ",
                                    bad == 1 ? "it" : "them", " and upload the whole file again:");
    for (int c = 0; c < schema.num_columns(); ++c) {
      const auto column = static_cast<size_t>(c);
      const int64_t count = missing_count[column];
      if (count == 0) continue;
      absl::StrAppend(&text, "\n  ", path, ": column '", schema.column(c).name, "': ", count,
                      count == 1 ? " missing value" : " missing values",
                      " and the column is not nullable (line", count == 1 ? " " : "s ",
                      absl::StrJoin(missing_lines[column], ", "),
                      count > kMissingLinesShown ? ", ..." : "", ")");
    }
    for (const auto& line : bad_lines) absl::StrAppend(&text, "\n  ", line);
    if (noted > static_cast<int64_t>(bad_lines.size())) {
      absl::StrAppend(&text, "\n  ... and ", noted - static_cast<int64_t>(bad_lines.size()),
                      " more");
    }
    return absl::InvalidArgumentError(text);
  }
  if (check.rows == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": holds no rows after its header"));
  }
  return check;
}

TextFormat TextFormatOfPath(const std::string& path) {
  return absl::EndsWithIgnoreCase(path, ".arff") ? TextFormat::kArff : TextFormat::kCsv;
}

absl::StatusOr<LocalTable> ReadLocalTable(const data::Schema& schema, const std::string& path,
                                          const TextUploadOptions& options,
                                          bool skip_unreadable) {
  if (auto status = CheckOptions(options); !status.ok()) return status;
  auto file = RecordFile::Open(path, options);
  if (!file.ok()) return file.status();
  auto mapping = MapFileHeader(schema, path, (*file)->header(), options);
  if (!mapping.ok()) return mapping.status();
  data::TableBuilder builder(schema);
  LocalTable out;
  // (column, value) -> rows, in first-seen order for the message; column -1
  // for a line that is not a row of the header's width.
  std::vector<std::pair<std::pair<int, std::string>, int64_t>> skipped;
  auto skip = [&](std::pair<int, std::string> key) {
    ++out.rows_skipped;
    auto seen = std::find_if(skipped.begin(), skipped.end(),
                             [&](const auto& entry) { return entry.first == key; });
    if (seen == skipped.end()) {
      skipped.push_back({std::move(key), 1});
    } else {
      ++seen->second;
    }
  };
  std::vector<std::string> fields;
  std::vector<std::string> cells;
  int64_t out_of_bounds = 0;
  while (true) {
    int64_t line = 0;
    auto more = (*file)->Next(&fields, &line);
    if (!more.ok()) {
      // A malformed line of a held-out file (an unclosed quote) is one
      // unreadable row when the reader can go on past it.
      if (skip_unreadable && (*file)->recoverable()) {
        skip({-1, "a malformed line"});
        continue;
      }
      return more.status();
    }
    if (!*more) break;
    auto row = RowCells(schema, *mapping, (*file)->header(), fields, options, &cells,
                        &out_of_bounds);
    if (row.ok()) row = builder.AddRow(cells);
    if (row.ok()) continue;
    if (!skip_unreadable) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", row.message()));
    }
    // Which cell, for the summary: the first the schema cannot read (an
    // undeclared category, a missing value in a column that is not
    // nullable, a numeric cell that is no number).
    if (fields.size() != (*file)->header().size()) {
      skip({-1, "a wrong number of fields"});
      continue;
    }
    int bad = -1;
    for (int c = 0; c < schema.num_columns() && bad < 0; ++c) {
      std::string cell = fields[static_cast<size_t>((*mapping)[c])];
      if (options.decimal_comma && schema.column(c).type == data::ColumnType::kNumeric) {
        std::replace(cell.begin(), cell.end(), ',', '.');
      }
      if (!schema.ParseCell(c, cell).ok()) bad = c;
    }
    if (bad < 0) {
      skip({-1, std::string(row.message())});
      continue;
    }
    const std::string token(
        absl::StripAsciiWhitespace(fields[static_cast<size_t>((*mapping)[bad])]));
    const auto& missing = schema.missing_tokens();
    skip({bad, std::find(missing.begin(), missing.end(), token) != missing.end()
                   ? std::string("a missing value")
                   : absl::StrCat("'", token, "'")});
  }
  if (builder.num_rows() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": holds no rows", out.rows_skipped > 0 ? " the schema can read" : "",
                     " after its header"));
  }
  constexpr size_t kShownValues = 5;
  for (size_t i = 0; i < skipped.size() && i < kShownValues; ++i) {
    const auto& [key, rows] = skipped[i];
    absl::StrAppend(&out.skipped_detail, i == 0 ? "" : ", ",
                    key.first < 0 ? std::string()
                                  : absl::StrCat("column '", schema.column(key.first).name,
                                                 "': "),
                    key.second, " (", rows, rows == 1 ? " row)" : " rows)");
  }
  if (skipped.size() > kShownValues) {
    absl::StrAppend(&out.skipped_detail, ", and ", skipped.size() - kShownValues,
                    " more values");
  }
  out.table = builder.Finish();
  return out;
}

namespace {

void WriteSplitRecord(const std::vector<std::string>& fields, char delimiter,
                      std::ostream* out) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) *out << delimiter;
    const std::string& field = fields[i];
    const bool quote = field.find_first_of(std::string("\"\r\n") + delimiter) !=
                           std::string::npos ||
                       (fields.size() == 1 && field.empty());
    if (!quote) {
      *out << field;
      continue;
    }
    *out << '"';
    for (char c : field) {
      if (c == '"') *out << '"';
      *out << c;
    }
    *out << '"';
  }
  *out << '\n';
}

}  // namespace

absl::StatusOr<SplitCounts> SplitTextFile(const std::string& path,
                                          const TextUploadOptions& options,
                                          double test_fraction, uint64_t seed,
                                          const std::string& train_out,
                                          const std::string& test_out) {
  if (!(test_fraction > 0.0 && test_fraction < 1.0)) {
    return absl::InvalidArgumentError("--test-fraction must lie strictly between 0 and 1");
  }
  if (train_out == test_out || train_out == path || test_out == path) {
    return absl::InvalidArgumentError("--in, --train-out and --test-out must be three files");
  }
  // Pass 1: count the records (a line that does not split stops here).
  int64_t rows = 0;
  {
    auto file = RecordFile::Open(path, options);
    if (!file.ok()) return file.status();
    std::vector<std::string> fields;
    while (true) {
      int64_t line = 0;
      auto more = (*file)->Next(&fields, &line);
      if (!more.ok()) return more.status();
      if (!*more) break;
      ++rows;
    }
  }
  const auto test_rows = static_cast<int64_t>(std::llround(test_fraction * rows));
  if (test_rows < 1 || test_rows >= rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has ", rows, " rows: --test-fraction ", test_fraction, " leaves ",
        test_rows < 1 ? "no test row" : "no training row"));
  }
  // The first test_rows of a seeded Fisher-Yates shuffle (a public seed:
  // which rows are held out is not a secret of the mechanism, the split is
  // made before any release).
  std::vector<int64_t> order(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) order[static_cast<size_t>(i)] = i;
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < test_rows; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng() % static_cast<uint64_t>(rows - i));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  std::vector<bool> is_test(static_cast<size_t>(rows), false);
  for (int64_t i = 0; i < test_rows; ++i) {
    is_test[static_cast<size_t>(order[static_cast<size_t>(i)])] = true;
  }
  // Pass 2: write.
  auto file = RecordFile::Open(path, options);
  if (!file.ok()) return file.status();
  std::ofstream train(train_out, std::ios::binary | std::ios::trunc);
  if (!train) return absl::UnavailableError(absl::StrCat("cannot write '", train_out, "'"));
  std::ofstream test(test_out, std::ios::binary | std::ios::trunc);
  if (!test) return absl::UnavailableError(absl::StrCat("cannot write '", test_out, "'"));
  const char delimiter = options.format == TextFormat::kCsv ? options.delimiter : ',';
  WriteSplitRecord((*file)->header(), delimiter, &train);
  WriteSplitRecord((*file)->header(), delimiter, &test);
  std::vector<std::string> fields;
  SplitCounts counts;
  for (int64_t i = 0;; ++i) {
    int64_t line = 0;
    auto more = (*file)->Next(&fields, &line);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (i < rows && is_test[static_cast<size_t>(i)]) {
      WriteSplitRecord(fields, delimiter, &test);
      ++counts.test_rows;
    } else {
      WriteSplitRecord(fields, delimiter, &train);
      ++counts.train_rows;
    }
  }
  train.close();
  test.close();
  if (!train || !test) return absl::UnavailableError("writing the split failed (disk full?)");
  return counts;
}

absl::StatusOr<v1::UploadRowsResponse> UploadTextFile(Connection& connection,
                                                      const std::string& dataset_id,
                                                      const data::Schema& schema,
                                                      const std::string& path,
                                                      const TextUploadOptions& options) {
  // The options' and the file's own cheap faults (missing, unreadable, a
  // header that does not match the schema) first: they need no server.
  if (auto status = CheckOptions(options); !status.ok()) return status;
  auto file = RecordFile::Open(path, options);
  if (!file.ok()) return file.status();
  auto mapping = MapFileHeader(schema, path, (*file)->header(), options);
  if (!mapping.ok()) return mapping.status();
  // The stream opens with a message that names the dataset and holds no
  // rows, and the server answers it (kUploadReadyMetadata) once everything
  // that needs no row has passed: the token's role, the dataset, its seal.
  // So a refusal comes before the file is read, not after a whole pass over
  // it (issue 38: an analyst's upload read and streamed the whole file
  // before "role analyst may not call UploadRows").
  auto context = connection.NewContext();
  v1::UploadRowsResponse response;
  auto writer = connection.datasets().UploadRows(context.get(), &response);
  v1::UploadRowsRequest message;
  message.set_dataset_id(dataset_id);
  message.set_append(options.append);
  const bool opened = writer->Write(message);
  message.Clear();  // the dataset and --append are said once, in the opening message
  if (opened) writer->WaitForInitialMetadata();
  if (!opened || context->GetServerInitialMetadata().count(kUploadReadyMetadata) == 0) {
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (status.ok()) {
      return absl::InternalError("the server ended the upload before any row was sent");
    }
    return RpcError(status, "upload refused");
  }
  // Ends the stream unstored when the file cannot be sent: a cancelled
  // upload commits nothing (DatasetServiceImpl::UploadRows).
  const auto abandon = [&](absl::Status status) {
    context->TryCancel();
    (void)writer->Finish();
    return status;
  };
  auto check = CheckTextFile(schema, path, options);
  if (!check.ok()) return abandon(check.status());
  std::vector<int64_t> row_lines;
  std::vector<std::string> fields;
  std::vector<std::string> cells;
  int64_t out_of_bounds = 0;
  int64_t sent = 0;
  bool stream_ended = false;
  Progress progress;
  while (!stream_ended) {
    int64_t line = 0;
    auto more = (*file)->Next(&fields, &line);
    // The file changed since the check: end the stream unfinished, so the
    // server stores nothing (the call is cancelled, never committed).
    absl::Status changed = more.status();
    if (more.ok() && *more) {
      changed = RowCells(schema, *mapping, (*file)->header(), fields, options, &cells,
                         &out_of_bounds);
      if (!changed.ok()) changed = absl::InvalidArgumentError(
                             absl::StrCat(path, ":", line, ": ", changed.message()));
    }
    if (!changed.ok()) {
      context->TryCancel();
      (void)writer->Finish();
      return absl::InvalidArgumentError(absl::StrCat(
          changed.message(), " (the file changed while it was uploaded; nothing was stored)"));
    }
    if (*more) {
      auto* row = message.add_rows();
      for (auto& cell : cells) row->add_cells(std::move(cell));
      row_lines.push_back(line);
      ++sent;
    }
    if ((message.rows_size() == options.rows_per_message || !*more) && message.rows_size() > 0) {
      if (!writer->Write(message)) stream_ended = true;  // the server ended it: Finish says why
      message.Clear();
      progress.Update(absl::StrFormat("upload: %lld / %lld rows", static_cast<long long>(sent),
                                      static_cast<long long>(check->rows)));
    }
    if (!*more) break;
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) {
    return CiteUploadLine(RpcError(status, "upload refused"), path, row_lines,
                          options.rows_per_message, /*first_rows_message=*/1);
  }
  progress.Finish(absl::StrFormat("upload: %lld rows stored", static_cast<long long>(sent)));
  // A message the server cannot decode ends its stream like a normal end
  // (gRPC's sync API cannot tell them apart): the count is the witness.
  if (response.rows_accepted() != sent) {
    return absl::DataLossError(absl::StrCat(
        "the server stored ", response.rows_accepted(), " of the ", sent,
        " rows sent (the stream was cut short); `dpcurator datasets list` shows the count; "
        "delete the dataset with `dpcurator datasets delete` and upload again"));
  }
  return response;
}

}  // namespace dpcurator::client
