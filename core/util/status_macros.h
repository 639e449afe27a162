#ifndef DPCURATOR_CORE_UTIL_STATUS_MACROS_H_
#define DPCURATOR_CORE_UTIL_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// RETURN_IF_ERROR / ASSIGN_OR_RETURN in the style of google/differential-privacy:
// they keep the happy path straight without exceptions.

#define DPC_STATUS_CONCAT_INNER_(a, b) a##b
#define DPC_STATUS_CONCAT_(a, b) DPC_STATUS_CONCAT_INNER_(a, b)

#define DPC_RETURN_IF_ERROR(expr)                      \
  do {                                                 \
    ::absl::Status dpc_status_ = (expr);               \
    if (!dpc_status_.ok()) return dpc_status_;         \
  } while (0)

#define DPC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return std::move(tmp).status();   \
  lhs = std::move(tmp).value()

#define DPC_ASSIGN_OR_RETURN(lhs, expr) \
  DPC_ASSIGN_OR_RETURN_IMPL_(DPC_STATUS_CONCAT_(dpc_statusor_, __LINE__), lhs, expr)

#endif  // DPCURATOR_CORE_UTIL_STATUS_MACROS_H_
