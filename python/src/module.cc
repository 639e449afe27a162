// dpcurator._core: the partials' bindings (python/src/partials.h; docs/scale-out.md).
// Errors become Python exceptions as python/src/errors.h maps them.

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "proto/convert.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/src/errors.h"
#include "python/src/partials.h"
#include "python/src/rows.h"

namespace dpcurator::python {
namespace {

namespace py = pybind11;

py::array_t<double> ToNumpy(const Eigen::VectorXd& values) {
  py::array_t<double> out(values.size());
  std::copy(values.data(), values.data() + values.size(), out.mutable_data());
  return out;
}

py::bytes Bytes(const std::string& bytes) { return py::bytes(bytes); }

// Plans are shared by the Python objects that hold them (Dask ships them
// to workers by pickle: the inputs, rebuilt there).
using PlanPtr = std::shared_ptr<Plan>;

PlanPtr PlanFromRequest(const std::string& schema, const std::string& request) {
  return Unwrap(Plan::FromRequest(schema, request));
}
PlanPtr PlanOfMarginals(const std::string& schema, std::vector<std::vector<int>> cliques) {
  return Unwrap(Plan::Marginals(schema, std::move(cliques)));
}

// (partial, count of null rows, [(line, message), ...] of the first ones):
// what Plan.read_csv and read_csv_file return. The messages are the
// curator's (they may quote a cell).
py::tuple WithMalformed(Partial partial, const MalformedRows& malformed) {
  py::list examples;
  for (const data::MalformedRecord& record : malformed.examples) {
    examples.append(py::make_tuple(record.line, record.detail));
  }
  return py::make_tuple(std::move(partial), malformed.count, examples);
}

Partial ComputeTable(const Plan& plan, data::Table table) {
  absl::StatusOr<Partial> partial;
  {
    py::gil_scoped_release release;
    partial = plan.Compute(table);
  }
  return Unwrap(std::move(partial));
}

}  // namespace
}  // namespace dpcurator::python

void BindModels(pybind11::module_& m);   // models_module.cc
void BindCurator(pybind11::module_& m);  // curator.cc
void BindCli(pybind11::module_& m);      // cli_module.cc

PYBIND11_MODULE(_core, m) {
  using namespace dpcurator;          // NOLINT: the bindings name most of it
  using namespace dpcurator::python;  // NOLINT
  namespace py = pybind11;
  m.doc() =
      "dpcurator's engine for Python (docs/scale-out.md): exact partials of the one-shot "
      "sum-over-rows release kinds (nothing here adds noise) and the client's samplers.";

  m.def(
      "schema_from_json",
      [](const std::string& json) {
        return Bytes(Unwrap(ParseSchemaJson(json)).SerializeAsString());
      },
      py::arg("json"),
      "A schema file's JSON text (docs/schema.md) -> serialized dpcurator.v1.TableSchema.");
  m.def(
      "request_from_text",
      [](const std::string& text) {
        v1::ReleaseRequest request;
        if (!google::protobuf::TextFormat::ParseFromString(text, &request)) {
          throw py::value_error("not a dpcurator.v1.ReleaseRequest in protobuf text format");
        }
        return Bytes(request.SerializeAsString());
      },
      py::arg("text"),
      "A ReleaseRequest in protobuf text format -> its serialized bytes.");

  py::class_<Partial>(m, "Partial",
                      "The exact statistic of a block of rows under one plan (never noised: it "
                      "stays inside the curator's cluster).")
      .def_readonly("num_rows", &Partial::num_rows)
      .def_readonly("plan_fingerprint", &Partial::plan_fingerprint)
      .def_property_readonly(
          "plan_digest", [](const Partial& p) { return Bytes(p.plan_digest); },
          "SHA-256(schema bytes || request bytes) of its plan: the pending job's plan_digest.")
      .def_property_readonly("values", [](const Partial& p) { return ToNumpy(p.values); })
      .def(
          "merge", [](const Partial& a, const Partial& b) { return Unwrap(Merge(a, b)); },
          py::arg("other"), "This partial plus `other` (same plan).")
      .def("__add__", [](const Partial& a, const Partial& b) { return Unwrap(Merge(a, b)); })
      .def("to_bytes", [](const Partial& p) { return Bytes(Serialize(p)); })
      .def_static(
          "from_bytes", [](const std::string& bytes) { return Unwrap(Parse(bytes)); },
          py::arg("data"))
      .def(py::pickle([](const Partial& p) { return Bytes(Serialize(p)); },
                      [](const py::bytes& bytes) { return Unwrap(Parse(bytes)); }));

  m.def(
      "merge", [](const Partial& a, const Partial& b) { return Unwrap(Merge(a, b)); },
      py::arg("a"), py::arg("b"), "a + b, two partials of one plan.");

  py::class_<Plan, PlanPtr>(m, "Plan",
                            "A release plan's public part: the schema and the kind's resolved "
                            "parameters, with the feature map built once.")
      .def_static(
          "from_request",
          [](const py::bytes& schema, const py::bytes& request) {
            return PlanFromRequest(schema, request);
          },
          py::arg("schema"), py::arg("request"),
          "rff_embedding, charfn_embedding, mst or aim: a serialized TableSchema and the "
          "resolved, serialized ReleaseRequest (a job's: seed set, aim's workload listed).")
      .def_static(
          "marginals",
          [](const py::bytes& schema, std::vector<std::vector<int>> cliques) {
            return PlanOfMarginals(schema, std::move(cliques));
          },
          py::arg("schema"), py::arg("cliques"),
          "marginals over the cliques' column indices (the mst and aim measurement step).")
      .def_property_readonly("kind", [](const Plan& p) { return std::string(p.kind_name()); })
      .def_property_readonly("dimension", &Plan::dimension)
      .def_property_readonly("fingerprint", &Plan::fingerprint)
      .def_property_readonly(
          "digest", [](const Plan& p) { return Bytes(p.digest()); },
          "SHA-256(schema bytes || request bytes): the server's pending job names its plan by "
          "it (plan_digest).")
      .def_property_readonly("column_names",
                             [](const Plan& p) {
                               std::vector<std::string> names;
                               for (const auto& c : p.schema().columns()) names.push_back(c.name);
                               return names;
                             })
      .def_property_readonly("categorical_columns",
                             [](const Plan& p) {
                               std::vector<std::string> names;
                               for (const auto& c : p.schema().columns()) {
                                 if (c.type == data::ColumnType::kCategorical) {
                                   names.push_back(c.name);
                                 }
                               }
                               return names;
                             })
      .def(
          "partial",
          [](const Plan& p, const py::object& block) {
            return ComputeTable(p, Unwrap(TableFromColumns(p.schema(), block)));
          },
          py::arg("block"),
          "The exact partial of a pandas DataFrame (or a mapping of column -> array).")
      .def(
          "read_block",
          [](const Plan& p, const py::object& block) {
            BlockMalformed malformed;
            data::Table table = Unwrap(TableFromColumns(p.schema(), block, &malformed));
            Partial partial = ComputeTable(p, std::move(table));
            // A null row is one of the block's rows, adding nothing.
            partial.num_rows += malformed.count;
            MalformedRows rows;
            rows.count = malformed.count;
            rows.examples = std::move(malformed.examples);
            return WithMalformed(std::move(partial), rows);
          },
          py::arg("block"),
          "partial's total form, for a reader of another format (docs/privacy.md 6.5): "
          "(partial, null rows, [(row, message), ...]); a row with a cell an upload would "
          "refuse is a null row, counted in num_rows and adding nothing (row: its 0-based "
          "position in the block). Only the block's shape raises (a missing column, columns "
          "of different lengths).")
      .def(
          "read_csv",
          [](const Plan& p, const std::string& text, const std::string& source) {
            absl::StatusOr<Partial> partial;
            MalformedRows malformed;
            {
              py::gil_scoped_release release;
              std::istringstream input(text);
              partial = p.ComputeCsv(&input, source, kCsvChunkRows, &malformed);
            }
            return WithMalformed(Unwrap(std::move(partial)), malformed);
          },
          py::arg("text"), py::arg("source") = "<block>",
          "(partial, null rows, [(line, message), ...]) of CSV text with a header, read as "
          "the server reads an upload, except that a record is one line (a quoted field may "
          "not span lines) and a row an upload would refuse is a null row: counted in "
          "num_rows, adding nothing (docs/privacy.md 6.5), so num_rows is the number of "
          "non-blank lines after the header. The count and the first rows' lines and "
          "messages are for the curator only. Only a header error raises.")
      .def(
          "partial_csv",
          [](const Plan& p, const std::string& text, const std::string& source) {
            absl::StatusOr<Partial> partial;
            {
              py::gil_scoped_release release;
              std::istringstream input(text);
              partial = p.ComputeCsv(&input, source);
            }
            return Unwrap(std::move(partial));
          },
          py::arg("text"), py::arg("source") = "<block>",
          "read_csv's partial alone.")
      .def(
          "read_csv_file",
          [](const Plan& p, const std::string& path, int64_t chunk_rows) {
            absl::StatusOr<Partial> partial;
            MalformedRows malformed;
            {
              py::gil_scoped_release release;
              partial = p.ComputeCsvFile(path, chunk_rows, &malformed);
            }
            return WithMalformed(Unwrap(std::move(partial)), malformed);
          },
          py::arg("path"), py::arg("chunk_rows") = kCsvChunkRows,
          "read_csv of the CSV file at `path`, streamed in chunks of rows (bounded memory); a "
          "header error starts with the path.")
      .def(
          "partial_csv_file",
          [](const Plan& p, const std::string& path, int64_t chunk_rows) {
            absl::StatusOr<Partial> partial;
            {
              py::gil_scoped_release release;
              partial = p.ComputeCsvFile(path, chunk_rows);
            }
            return Unwrap(std::move(partial));
          },
          py::arg("path"), py::arg("chunk_rows") = kCsvChunkRows,
          "read_csv_file's partial alone.")
      .def("empty", &Plan::Empty, "The partial of no rows.")
      .def(
          "engine_statistic",
          [](const Plan& p, const py::object& block) {
            data::Table table = Unwrap(TableFromColumns(p.schema(), block));
            absl::StatusOr<Eigen::VectorXd> values;
            {
              py::gil_scoped_release release;
              values = p.EngineStatistic(table);
            }
            return ToNumpy(Unwrap(std::move(values)));
          },
          py::arg("block"),
          "The in-process engine's exact statistic of the whole block (the kind's Run with a "
          "zero noise source), for tests.")
      .def(
          "engine_statistic_csv",
          [](const Plan& p, const std::string& text) {
            data::Table table = Unwrap(TableFromCsv(p.schema(), text, "<block>"));
            absl::StatusOr<Eigen::VectorXd> values;
            {
              py::gil_scoped_release release;
              values = p.EngineStatistic(table);
            }
            return ToNumpy(Unwrap(std::move(values)));
          },
          py::arg("text"),
          "engine_statistic of CSV text read as the server reads an upload.")
      .def(py::pickle(
          [](const Plan& p) {
            return py::make_tuple(std::string(p.kind_name()), Bytes(p.schema_bytes()),
                                  Bytes(p.request_bytes()), p.cliques());
          },
          [](const py::tuple& state) -> PlanPtr {
            if (state.size() != 4) throw py::value_error("not a pickled dpcurator Plan");
            const std::string kind = state[0].cast<std::string>();
            const std::string schema = state[1].cast<std::string>();
            if (kind == "marginals") {
              return PlanOfMarginals(schema, state[3].cast<std::vector<std::vector<int>>>());
            }
            return PlanFromRequest(schema, state[2].cast<std::string>());
          }));

  BindModels(m);
  BindCurator(m);
  BindCli(m);
}
