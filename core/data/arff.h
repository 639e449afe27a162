#ifndef DPCURATOR_CORE_DATA_ARFF_H_
#define DPCURATOR_CORE_DATA_ARFF_H_

// Weka's ARFF format (https://waikato.github.io/weka-wiki/formats_and_processing/arff_stable/):
// a header of `@relation`, `@attribute NAME TYPE` lines and `@data`, then
// comma-separated rows. Keywords are case-insensitive, `%` starts a comment
// line, names and values may be quoted with ' or " (backslash escapes inside
// quotes), and `?` is a missing value. Sparse rows (`{0 x, 3 y}`) are not
// supported and are refused with their line.

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpcurator::data {

struct ArffAttribute {
  enum class Kind { kNumeric, kNominal, kString, kDate };
  std::string name;
  Kind kind = Kind::kNumeric;
  // Declared as `integer` (numeric otherwise: `numeric` or `real`).
  bool integer = false;
  // Nominal: the declared values, in order.
  std::vector<std::string> values;
  // 1-based line of the @attribute declaration.
  int64_t line = 0;
};

struct ArffHeader {
  std::string relation;
  std::vector<ArffAttribute> attributes;
};

// Reads an ARFF stream: first the header, then one data row at a time.
// Errors start with `source` and the 1-based line ("german.arff:12: ...").
class ArffReader {
 public:
  ArffReader(std::istream* input, std::string source) : input_(input), source_(std::move(source)) {}

  // Reads through the `@data` line. Call once, before Next.
  absl::StatusOr<ArffHeader> ReadHeader();
  // Reads the next data row into `fields` (one per attribute, unquoted,
  // surrounding whitespace trimmed, "?" for missing); false at the end.
  // Blank lines and %-comments are skipped.
  absl::StatusOr<bool> Next(std::vector<std::string>* fields);
  // 1-based line of the row Next returned last.
  int64_t line_number() const { return row_line_; }
  const std::string& source() const { return source_; }

 private:
  absl::Status Error(int64_t line, absl::string_view message) const;

  std::istream* input_;
  std::string source_;
  int64_t line_ = 0;
  int64_t row_line_ = 0;
  size_t num_attributes_ = 0;
};

// Splits a comma-separated ARFF value list (a data row, or the inside of a
// nominal `{...}`): values quoted with ' or " keep commas and spaces, and
// backslash escapes inside quotes (\' \" \\ \n \t) are decoded; unquoted
// values are trimmed.
absl::StatusOr<std::vector<std::string>> SplitArffValues(absl::string_view text);

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_ARFF_H_
