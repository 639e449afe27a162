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

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "core/data/schema.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// Bad lines listed by one check, at most; the rest are counted.
inline constexpr int kMaxReportedBadLines = 20;

enum class TextFormat { kCsv, kArff };

struct TextUploadOptions {
  TextFormat format = TextFormat::kCsv;
  // CSV only: the field separator (one byte).
  char delimiter = ',';
  // CSV only: numeric cells use a decimal comma ("1,5" is 1.5), as in a
  // ';'-separated spreadsheet export. Needs a delimiter other than ','.
  bool decimal_comma = false;
  int rows_per_message = 2000;
};

// The value of --delimiter: one character, or "tab" (also "\t").
absl::StatusOr<char> ParseDelimiter(const std::string& text);

// What the first pass found in a good file.
struct TextFileCheck {
  int64_t rows = 0;
  // Numeric cells outside the declared bounds (the server clamps them).
  int64_t cells_out_of_bounds = 0;
};

// The first pass. INVALID_ARGUMENT lists every bad line found ("FILE:LINE:
// why", one a line, at most kMaxReportedBadLines, then how many more);
// NOT_FOUND when the file cannot be opened.
absl::StatusOr<TextFileCheck> CheckTextFile(const data::Schema& schema, const std::string& path,
                                            const TextUploadOptions& options);

// Both passes: nothing is sent unless the whole file is good. A refusal by
// the server names FILE:LINE where it can; the server stores nothing then.
absl::StatusOr<v1::UploadRowsResponse> UploadTextFile(Connection& connection,
                                                      const std::string& dataset_id,
                                                      const data::Schema& schema,
                                                      const std::string& path,
                                                      const TextUploadOptions& options);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_TEXT_UPLOAD_H_
