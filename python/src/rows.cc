#include "python/src/rows.h"

#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
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

absl::Status CellError(int64_t row, const absl::Status& status) {
  return absl::InvalidArgumentError(
      absl::StrCat("row ", row, " of the block: ", status.message()));
}

// TableFromColumns's rows that cannot be read. Strict (drop == nullptr): the
// first is the error. Dropping: each is marked, and the first
// kMaxMalformedExamples by row keep their message.
class BadRows {
 public:
  BadRows(BlockMalformed* drop, int64_t num_rows) : drop_(drop) {
    if (drop_ != nullptr) {
      bad_.assign(static_cast<size_t>(num_rows), 0);
      clamped_.assign(static_cast<size_t>(num_rows), 0);
    }
  }
  // OK when dropping (the row is marked), else the error.
  absl::Status Mark(int64_t row, absl::Status error) {
    if (drop_ == nullptr) return error;
    bad_[static_cast<size_t>(row)] = 1;
    auto [it, inserted] = messages_.emplace(row, std::string(error.message()));
    if (inserted && messages_.size() > data::kMaxMalformedExamples) {
      messages_.erase(std::prev(messages_.end()));
    }
    return absl::OkStatus();
  }
  void Clamped(int64_t row, bool clamped, data::Table* table) {
    if (drop_ != nullptr) clamped_[static_cast<size_t>(row)] += clamped ? 1 : 0;
    table->clamped_cells += clamped ? 1 : 0;
  }
  // Removes the marked rows from `table` and reports them.
  void Finish(data::Table* table) {
    if (drop_ == nullptr) return;
    int64_t kept = 0;
    int64_t clamped = 0;
    for (int64_t r = 0; r < table->num_rows(); ++r) {
      if (bad_[static_cast<size_t>(r)]) continue;
      if (kept != r) table->cells.row(kept) = table->cells.row(r);
      clamped += clamped_[static_cast<size_t>(r)];
      ++kept;
    }
    drop_->count = table->num_rows() - kept;
    table->cells.conservativeResize(kept, Eigen::NoChange);
    table->clamped_cells = clamped;
    drop_->examples.clear();
    for (const auto& [row, message] : messages_) {
      drop_->examples.push_back(data::MalformedRecord{row, message});
    }
  }

 private:
  BlockMalformed* drop_;
  std::vector<uint8_t> bad_;
  std::vector<int32_t> clamped_;
  std::map<int64_t, std::string> messages_;
};

// A pandas Series of the categorical dtype (what csv_options asks
// read_csv for): its codes index its categories, -1 a missing cell.
bool IsPandasCategorical(const py::object& column) {
  if (!py::hasattr(column, "dtype") || !py::hasattr(column, "cat")) return false;
  const py::object dtype = column.attr("dtype");
  return py::hasattr(dtype, "name") && py::str(dtype.attr("name")).cast<std::string>() == "category";
}

// A column as codes into its distinct values (-1: missing), when it is one
// whose cells are all text or missing: a pandas categorical column, or an
// object or unicode array that pandas.api.types.infer_dtype calls
// "string" (mixed types, e.g. 1 and 1.0, would hash as one value and lose
// their distinct texts, so they keep the cell-by-cell path).
struct Coded {
  py::array_t<int64_t> codes;
  py::list uniques;
};

std::optional<Coded> CodesOf(const py::object& column, const py::array* array) {
  if (array == nullptr) {
    const py::object cat = column.attr("cat");
    return Coded{py::array_t<int64_t, py::array::forcecast>::ensure(
                     py::module_::import("numpy").attr("asarray")(cat.attr("codes"))),
                 py::list(cat.attr("categories").attr("tolist")())};
  }
  const char kind = array->dtype().kind();
  if (kind != 'O' && kind != 'U') return std::nullopt;
  py::module_ pandas;
  try {
    pandas = py::module_::import("pandas");
  } catch (const py::error_already_set&) {
    return std::nullopt;  // no pandas: cell by cell
  }
  const std::string inferred = py::str(pandas.attr("api").attr("types").attr("infer_dtype")(
                                           *array, py::arg("skipna") = true))
                                   .cast<std::string>();
  if (inferred != "string" && inferred != "empty") return std::nullopt;
  const py::tuple factorized = pandas.attr("factorize")(*array);
  return Coded{py::array_t<int64_t, py::array::forcecast>::ensure(py::object(factorized[0])),
               py::list(factorized[1].attr("tolist")())};
}

// Column c of `table` from codes: each distinct value parsed once. The
// error names the first row (in block order) whose value fails, as the
// cell-by-cell path does.
absl::Status FillCoded(const data::Schema& schema, int c, const Coded& coded, int64_t num_rows,
                       BadRows* bad_rows, data::Table* table) {
  if (!coded.codes || coded.codes.ndim() != 1 || coded.codes.shape(0) != num_rows) {
    return absl::InternalError(
        absl::StrCat("column '", schema.column(c).name, "': codes of the wrong shape"));
  }
  const size_t num_uniques = coded.uniques.size();
  std::vector<absl::StatusOr<data::ParsedCell>> parsed;
  parsed.reserve(num_uniques + 1);
  for (size_t u = 0; u < num_uniques; ++u) {
    parsed.push_back(schema.ParseCell(c, CellText(coded.uniques[u])));
  }
  parsed.push_back(schema.ParseCell(c, ""));  // code -1: a missing cell
  const auto codes = coded.codes.unchecked<1>();
  for (int64_t r = 0; r < num_rows; ++r) {
    const int64_t code = codes(r);
    if (code < -1 || code >= static_cast<int64_t>(num_uniques)) {
      return absl::InternalError(
          absl::StrCat("column '", schema.column(c).name, "': a code out of range"));
    }
    const absl::StatusOr<data::ParsedCell>& cell =
        parsed[code < 0 ? num_uniques : static_cast<size_t>(code)];
    if (!cell.ok()) {
      DPC_RETURN_IF_ERROR(bad_rows->Mark(r, CellError(r, cell.status())));
      table->cells(r, c) = 0.0;
      continue;
    }
    table->cells(r, c) = cell->value;
    bad_rows->Clamped(r, cell->clamped, table);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<data::Table> TableFromColumns(const data::Schema& schema,
                                             const py::object& block, BlockMalformed* malformed) {
  const int num_columns = schema.num_columns();
  py::module_ numpy = py::module_::import("numpy");
  int64_t num_rows = -1;
  data::Table table;
  // Per column: the object as given, and (except for a pandas categorical
  // column, read through its codes) it as a numpy array.
  std::vector<py::object> raw(static_cast<size_t>(num_columns));
  std::vector<std::optional<py::array>> arrays(static_cast<size_t>(num_columns));
  for (int c = 0; c < num_columns; ++c) {
    const std::string& name = schema.column(c).name;
    py::object column;
    try {
      column = block[py::str(name)];
    } catch (const py::error_already_set&) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the block has no column '", name, "' (columns are matched to the schema by name)"));
    }
    int64_t length = 0;
    if (IsPandasCategorical(column)) {
      length = static_cast<int64_t>(py::len(column));
    } else {
      py::array array = numpy.attr("asarray")(column);
      if (array.ndim() != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("column '", name, "' is not one-dimensional"));
      }
      length = static_cast<int64_t>(array.shape(0));
      arrays[static_cast<size_t>(c)] = std::move(array);
    }
    if (num_rows >= 0 && length != num_rows) {
      return absl::InvalidArgumentError(absl::StrCat("column '", name, "' has ", length,
                                                     " rows and the columns before it ",
                                                     num_rows));
    }
    num_rows = length;
    raw[static_cast<size_t>(c)] = std::move(column);
  }
  table.cells.resize(num_rows < 0 ? 0 : num_rows, num_columns);
  BadRows bad_rows(malformed, table.num_rows());
  for (int c = 0; c < num_columns; ++c) {
    const data::Column& column = schema.column(c);
    const std::optional<py::array>& array = arrays[static_cast<size_t>(c)];
    const char kind = array.has_value() ? array->dtype().kind() : 'O';
    const bool numeric_dtype = kind == 'f' || kind == 'i' || kind == 'u' || kind == 'b';
    if (column.type == data::ColumnType::kNumeric && numeric_dtype) {
      const auto values = py::array_t<double, py::array::forcecast>::ensure(*array);
      if (!values) {
        return absl::InvalidArgumentError(
            absl::StrCat("column '", column.name, "' cannot be read as float64"));
      }
      const auto view = values.unchecked<1>();
      for (int64_t r = 0; r < num_rows; ++r) {
        const double value = view(r);
        if (std::isnan(value) && column.nullable) {
          // A nullable numeric's missing cell: NaN, as ParseCell stores it.
          table.cells(r, c) = value;
          continue;
        }
        if (!std::isfinite(value)) {
          DPC_RETURN_IF_ERROR(bad_rows.Mark(
              r, absl::InvalidArgumentError(absl::StrCat(
                     "column '", column.name, "', row ", r,
                     " of the block: not a finite number (a missing value, and the column is "
                     "numeric)"))));
          table.cells(r, c) = 0.0;
          continue;
        }
        const data::ParsedCell cell = data::ClampNumeric(column, value);
        table.cells(r, c) = cell.value;
        bad_rows.Clamped(r, cell.clamped, &table);
      }
      continue;
    }
    // Text cells, as a CSV file would hold them. A column of text is parsed
    // once per distinct value (a pandas categorical column by its
    // categories, an object column of strings by pandas.factorize): equal
    // text parses equally, so this is exact, and the 10M-row benchmark's
    // row conversion shrank from most of a shard's time to a small part of
    // it (bench/dask_bench.py).
    const std::optional<Coded> coded =
        CodesOf(raw[static_cast<size_t>(c)], array.has_value() ? &*array : nullptr);
    if (coded.has_value()) {
      DPC_RETURN_IF_ERROR(FillCoded(schema, c, *coded, num_rows, &bad_rows, &table));
      continue;
    }
    const py::list cells = array->attr("tolist")();
    for (int64_t r = 0; r < num_rows; ++r) {
      auto cell = schema.ParseCell(c, CellText(cells[static_cast<size_t>(r)]));
      if (!cell.ok()) {
        DPC_RETURN_IF_ERROR(bad_rows.Mark(r, CellError(r, cell.status())));
        table.cells(r, c) = 0.0;
        continue;
      }
      table.cells(r, c) = cell->value;
      bad_rows.Clamped(r, cell->clamped, &table);
    }
  }
  bad_rows.Finish(&table);
  return table;
}

absl::StatusOr<data::Table> TableFromCsv(const data::Schema& schema, const std::string& text,
                                         const std::string& source) {
  std::istringstream input(text);
  return data::ReadCsv(schema, &input, data::CsvOptions{}, source);
}

}  // namespace dpcurator::python
