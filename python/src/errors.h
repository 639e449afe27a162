// How a Status reaches Python, the same for every binding in dpcurator._core:
// ValueError for a bad argument (InvalidArgument, OutOfRange, DataLoss: a
// file or value the caller passed), PermissionError for a token the server
// refuses, RuntimeError otherwise, each with the status's message (which
// names the file, or the server and the call).

#ifndef DPCURATOR_PYTHON_SRC_ERRORS_H_
#define DPCURATOR_PYTHON_SRC_ERRORS_H_

#include <stdexcept>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pybind11/pybind11.h"

namespace dpcurator::python {

[[noreturn]] inline void RaiseStatus(const absl::Status& status) {
  const std::string message = std::string(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kDataLoss:
      throw pybind11::value_error(message);
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      PyErr_SetString(PyExc_PermissionError, message.c_str());
      throw pybind11::error_already_set();
    default:
      throw std::runtime_error(
          absl::StrCat(absl::StatusCodeToString(status.code()), ": ", message));
  }
}

// The value, or the status raised as above.
template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  if (!value.ok()) RaiseStatus(value.status());
  return *std::move(value);
}

}  // namespace dpcurator::python

#endif  // DPCURATOR_PYTHON_SRC_ERRORS_H_
