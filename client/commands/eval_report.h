#ifndef DPCURATOR_CLIENT_COMMANDS_EVAL_REPORT_H_
#define DPCURATOR_CLIENT_COMMANDS_EVAL_REPORT_H_

// The evaluation report as `eval` prints it, shared with `demo`.

#include <string>

#include <nlohmann/json.hpp>

#include "core/eval/evaluator.h"

namespace dpcurator::client {

// Human tables of the utility and fidelity rows.
std::string FormatEvalReport(const eval::EvalReport& report);

// `eval --json` (docs/json.md).
nlohmann::json EvalReportJson(const eval::EvalReport& report);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_COMMANDS_EVAL_REPORT_H_
