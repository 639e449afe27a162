// Fuzz target: the CSV reader and the cell parser behind uploads.
//
// Input: one option byte, then CSV text. The text goes through ReadCsv under
// a fixed schema (numeric with clamping, an integer column, a nullable
// categorical whose categories need quoting, an aliased label), and every
// field of every record also goes through Schema::ParseCell for every
// column, the path an UploadRows cell takes on the server.
//
// Invariants, beyond "no crash":
// - an accepted table lies in the declared domain: finite, numerics within
//   their bounds, categoricals on a declared level (or the missing level);
// - clamped_cells never exceeds the numeric cells;
// - WriteCsv of an accepted table reads back (ReadCsv) to the same cells
//   (categoricals exactly, numerics to the 6 significant digits WriteCsv
//   prints, integer columns to the nearest integer) and writing that again
//   gives the same text: the written form is a fixed point;
// - the record reader never produces more field bytes than it was given.

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/data/csv.h"
#include "core/data/schema.h"
#include "fuzz/fuzz_check.h"

namespace {

using dpcurator::data::ColumnType;
using dpcurator::data::CsvOptions;
using dpcurator::data::CsvRecordReader;
using dpcurator::data::Schema;
using dpcurator::data::Table;

// Records read per input, at most, so one input stays cheap.
constexpr int kMaxRecords = 256;

const Schema& FuzzSchema() {
  static const Schema* schema = [] {
    Schema::Builder builder;
    builder.AddNumeric("age", 17, 90, /*integer=*/true)
        .AddCategorical("city", {"Paris", "New York, NY", "Say \"Hi\"", "line\nbreak", "cr\rlf"},
                        /*nullable=*/true)
        .AddNumeric("score", -1e-3, 1e6)
        .AddCategorical("y", {"no", "yes"})
        .AddAlias("y", "yes.", "yes")
        .SetLabel("y");
    auto built = builder.Build();
    DPC_FUZZ_CHECK(built.ok(), "fixed schema: %s", std::string(built.status().message()).c_str());
    return new Schema(*std::move(built));
  }();
  return *schema;
}

void CheckInDomain(const Schema& schema, const Table& table) {
  DPC_FUZZ_CHECK(table.cells.cols() == schema.num_columns(), "%ld columns",
                 static_cast<long>(table.cells.cols()));
  int64_t numeric_cells = 0;
  for (Eigen::Index i = 0; i < table.cells.rows(); ++i) {
    for (int c = 0; c < schema.num_columns(); ++c) {
      const double v = table.cells(i, c);
      const auto& column = schema.column(c);
      DPC_FUZZ_CHECK(std::isfinite(v), "row %ld column %d not finite", static_cast<long>(i), c);
      if (column.type == ColumnType::kNumeric) {
        ++numeric_cells;
        DPC_FUZZ_CHECK(v >= column.lower && v <= column.upper, "%g outside [%g, %g]", v,
                       column.lower, column.upper);
      } else {
        DPC_FUZZ_CHECK(v >= 0 && v < schema.NumLevels(c) && v == std::floor(v),
                       "level %g of column %d", v, c);
      }
    }
  }
  DPC_FUZZ_CHECK(table.clamped_cells >= 0 && table.clamped_cells <= numeric_cells,
                 "%ld clamped of %ld numeric cells", static_cast<long>(table.clamped_cells),
                 static_cast<long>(numeric_cells));
}

std::string Write(const Schema& schema, const Table& table) {
  std::ostringstream out;
  dpcurator::data::WriteCsv(schema, table, &out);
  return out.str();
}

void CheckRoundTrip(const Schema& schema, const Table& table) {
  const std::string written = Write(schema, table);
  std::istringstream in(written);
  auto back = dpcurator::data::ReadCsv(schema, &in, CsvOptions(), "written");
  DPC_FUZZ_CHECK(back.ok(), "WriteCsv output does not read back: %s\n--- text ---\n%s",
                 std::string(back.status().message()).c_str(), written.c_str());
  DPC_FUZZ_CHECK(back->num_rows() == table.num_rows(), "%ld rows read back, %ld written",
                 static_cast<long>(back->num_rows()), static_cast<long>(table.num_rows()));
  CheckInDomain(schema, *back);
  for (Eigen::Index i = 0; i < table.cells.rows(); ++i) {
    for (int c = 0; c < schema.num_columns(); ++c) {
      const double a = table.cells(i, c);
      const double b = back->cells(i, c);
      const auto& column = schema.column(c);
      double tolerance = 0.0;
      if (column.type == ColumnType::kNumeric) {
        // "%.6g" keeps 6 significant digits; the clamp can only move the
        // value back towards the original.
        tolerance = column.integer ? 0.5 : 1e-5 * std::max(1.0, std::fabs(a));
      }
      DPC_FUZZ_CHECK(std::fabs(a - b) <= tolerance, "row %ld column %d: %.17g read back as %.17g",
                     static_cast<long>(i), c, a, b);
    }
  }
  const std::string again = Write(schema, *back);
  DPC_FUZZ_CHECK(again == written, "written text is not a fixed point:\n%s\n--- vs ---\n%s",
                 written.c_str(), again.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Schema& schema = FuzzSchema();
  const uint8_t flags = data[0];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  CsvOptions options;
  options.has_header = (flags & 1) == 0;
  if (flags & 2) options.delimiter = ';';
  if (flags & 4) options.max_record_bytes = 64;

  // The record reader alone, and every field through every column's parser.
  {
    std::istringstream in(text);
    CsvRecordReader reader(&in, options);
    std::vector<std::string> fields;
    size_t field_bytes = 0;
    for (int r = 0; r < kMaxRecords; ++r) {
      auto more = reader.Next(&fields);
      if (!more.ok() || !*more) break;
      DPC_FUZZ_CHECK(!fields.empty(), "a record with no fields");
      for (const std::string& field : fields) {
        field_bytes += field.size();
        for (int c = 0; c < schema.num_columns(); ++c) {
          auto cell = schema.ParseCell(c, field);
          if (!cell.ok()) {
            DPC_FUZZ_CHECK(!cell.status().message().empty(), "an error without a message");
            continue;
          }
          const auto& column = schema.column(c);
          if (column.type == ColumnType::kNumeric) {
            DPC_FUZZ_CHECK(cell->value >= column.lower && cell->value <= column.upper,
                           "ParseCell gave %g outside [%g, %g]", cell->value, column.lower,
                           column.upper);
          } else {
            DPC_FUZZ_CHECK(cell->value >= 0 && cell->value < schema.NumLevels(c) && !cell->clamped,
                           "ParseCell gave level %g", cell->value);
          }
        }
      }
      DPC_FUZZ_CHECK(field_bytes <= text.size(), "%zu field bytes from %zu input bytes",
                     field_bytes, text.size());
    }
  }

  // The whole-file reader, then the round trip.
  std::istringstream in(text);
  auto table = dpcurator::data::ReadCsv(schema, &in, options, "input");
  if (!table.ok()) {
    DPC_FUZZ_CHECK(!table.status().message().empty(), "an error without a message");
    return 0;
  }
  CheckInDomain(schema, *table);
  if (table->num_rows() <= kMaxRecords) CheckRoundTrip(schema, *table);
  return 0;
}
