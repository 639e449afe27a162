#include "python/src/rows.h"

#include <cmath>
#include <cstdint>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/data/clamp.h"
#include "core/data/csv.h"
#include "core/util/status_macros.h"
#include "pybind11/numpy.h"

namespace dpcurator::python {

namespace py = pybind11;

namespace {

// The cell as the text a CSV file would hold: str of anything but None and
// a float NaN (pandas' missing value), which are the empty token (a
// missing token by default, Schema::Builder::SetMissingTokens).
std::string CellText(const py::handle& cell) {
  if (cell.is_none()) return "";
  if (py::isinstance<py::float_>(cell)) {
    const double value = cell.cast<double>();
    if (std::isnan(value)) return "";
  }
  if (py::isinstance<py::str>(cell)) return cell.cast<std::string>();
  return py::str(cell).cast<std::string>();
}

}  // namespace

absl::StatusOr<data::Table> TableFromColumns(const data::Schema& schema,
                                             const py::object& block) {
  const int num_columns = schema.num_columns();
  py::module_ numpy = py::module_::import("numpy");
  int64_t num_rows = -1;
  data::Table table;
  std::vector<py::array> columns;
  columns.reserve(static_cast<size_t>(num_columns));
  for (int c = 0; c < num_columns; ++c) {
    const std::string& name = schema.column(c).name;
    py::object column;
    try {
      column = block[py::str(name)];
    } catch (const py::error_already_set&) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the block has no column '", name, "' (columns are matched to the schema by name)"));
    }
    py::array array = numpy.attr("asarray")(column);
    if (array.ndim() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("column '", name, "' is not one-dimensional"));
    }
    const int64_t length = static_cast<int64_t>(array.shape(0));
    if (num_rows >= 0 && length != num_rows) {
      return absl::InvalidArgumentError(absl::StrCat("column '", name, "' has ", length,
                                                     " rows and the columns before it ",
                                                     num_rows));
    }
    num_rows = length;
    columns.push_back(std::move(array));
  }
  table.cells.resize(num_rows < 0 ? 0 : num_rows, num_columns);
  for (int c = 0; c < num_columns; ++c) {
    const data::Column& column = schema.column(c);
    const py::array& array = columns[static_cast<size_t>(c)];
    const char kind = array.dtype().kind();
    const bool numeric_dtype = kind == 'f' || kind == 'i' || kind == 'u' || kind == 'b';
    if (column.type == data::ColumnType::kNumeric && numeric_dtype) {
      const auto values = py::array_t<double, py::array::forcecast>::ensure(array);
      if (!values) {
        return absl::InvalidArgumentError(
            absl::StrCat("column '", column.name, "' cannot be read as float64"));
      }
      const auto view = values.unchecked<1>();
      for (int64_t r = 0; r < num_rows; ++r) {
        const double value = view(r);
        if (!std::isfinite(value)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "column '", column.name, "', row ", r,
              " of the block: not a finite number (a missing value, and the column is numeric)"));
        }
        const data::ParsedCell cell = data::ClampNumeric(column, value);
        table.cells(r, c) = cell.value;
        table.clamped_cells += cell.clamped ? 1 : 0;
      }
      continue;
    }
    // Text cells, as a CSV file would hold them.
    const py::list cells = array.attr("tolist")();
    for (int64_t r = 0; r < num_rows; ++r) {
      auto cell = schema.ParseCell(c, CellText(cells[static_cast<size_t>(r)]));
      if (!cell.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("row ", r, " of the block: ", cell.status().message()));
      }
      table.cells(r, c) = cell->value;
      table.clamped_cells += cell->clamped ? 1 : 0;
    }
  }
  return table;
}

absl::StatusOr<data::Table> TableFromCsv(const data::Schema& schema, const std::string& text,
                                         const std::string& source) {
  std::istringstream input(text);
  return data::ReadCsv(schema, &input, data::CsvOptions{}, source);
}

}  // namespace dpcurator::python
