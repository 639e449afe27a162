#ifndef DPCURATOR_PYTHON_SRC_ROWS_H_
#define DPCURATOR_PYTHON_SRC_ROWS_H_

// Blocks of rows from Python into data::Table, read exactly as the server
// reads an upload: categorical cells through Schema::ParseCell (levels,
// aliases, missing tokens, surrounding whitespace), numeric cells clamped
// to the declared bounds by data::ClampNumeric (ParseCell's own step).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/csv.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "pybind11/pybind11.h"

namespace dpcurator::python {

// A pandas DataFrame, or a mapping of column name -> numpy array or list:
// schema columns are found by name (other columns are ignored) and must
// have one length. Numeric columns of a numeric dtype are read as float64
// (a non-finite value, NaN included, is an error naming the column and the
// row's position in the block, never the value); any other column cell by
// cell as text. Errors are the curator's (they name the column and row).
//
// With `malformed` (Plan.read_block; docs/privacy.md 6.5) a row with a cell
// the upload would refuse is dropped from the table and reported there
// (its 0-based position in the block as `line`) instead of being an
// error; only the block's shape (a missing column, columns of different
// lengths) is then an error.
struct BlockMalformed {
  int64_t count = 0;
  std::vector<data::MalformedRecord> examples;  // the first few, by row
};
absl::StatusOr<data::Table> TableFromColumns(const data::Schema& schema,
                                             const pybind11::object& block,
                                             BlockMalformed* malformed = nullptr);

// CSV text under the schema with a header line (data::ReadCsv, the
// upload's reader; errors start with `source` and the line).
absl::StatusOr<data::Table> TableFromCsv(const data::Schema& schema, const std::string& text,
                                         const std::string& source);

}  // namespace dpcurator::python

#endif  // DPCURATOR_PYTHON_SRC_ROWS_H_
