// The analysts' samplers in dpcurator._core (python/src/sampling.h;
// docs/scale-out.md).
// Errors: ValueError for a bad argument, RuntimeError otherwise.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/src/errors.h"
#include "python/src/sampling.h"

namespace dpcurator::python {
namespace {

namespace py = pybind11;

}  // namespace
}  // namespace dpcurator::python

// Called by module.cc: one extension, because two would each register the
// generated dpcurator.proto with the one libprotobuf and abort on import.

void BindModels(pybind11::module_& m) {
  using namespace dpcurator;          // NOLINT: the bindings name most of it
  using namespace dpcurator::python;  // NOLINT
  namespace py = pybind11;
  py::class_<v1::GeneratorModel>(m, "Model", "A tabular model file (dpcurator train ... --out).")
      .def_property_readonly("method", [](const v1::GeneratorModel& model) { return model.method(); })
      .def(
          "sample_columns",
          [](const v1::GeneratorModel& model, int64_t n, uint64_t seed) {
            absl::StatusOr<std::vector<SampledColumn>> sampled;
            {
              py::gil_scoped_release release;
              sampled = SampleColumns(model, n, seed);
            }
            std::vector<SampledColumn> columns = Unwrap(std::move(sampled));
            py::list out;
            for (SampledColumn& column : columns) {
              const char* type = column.type == SampledColumn::Type::kText      ? "text"
                                 : column.type == SampledColumn::Type::kInteger ? "integer"
                                                                                : "float";
              py::object values;
              if (column.type == SampledColumn::Type::kText) {
                values = py::cast(column.texts);
              } else {
                py::array_t<double> array(static_cast<py::ssize_t>(column.numbers.size()));
                std::copy(column.numbers.begin(), column.numbers.end(), array.mutable_data());
                values = std::move(array);
              }
              out.append(py::make_tuple(column.name, type, values));
            }
            return out;
          },
          py::arg("n"), py::arg("seed"),
          "[(name, 'float'|'integer'|'text', values)]: what `dpcurator sample` writes.");
  m.def(
      "load_model", [](const std::string& path) { return Unwrap(LoadModel(path)); },
      py::arg("path"), "Reads a tabular model file (format version and method checked).");
}
