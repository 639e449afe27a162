#ifndef DPCURATOR_CLIENT_COMMANDS_EVAL_REPORT_H_
#define DPCURATOR_CLIENT_COMMANDS_EVAL_REPORT_H_

// The evaluation report as `eval` prints it, shared with `demo`.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/eval/evaluator.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// Human tables of the utility and fidelity rows.
std::string FormatEvalReport(const eval::EvalReport& report);

// `eval --json` (docs/json.md).
nlohmann::json EvalReportJson(const eval::EvalReport& report);

// The schema file of `eval --schema` and `report --schema`; a model, a
// release or a table given there is named with the flag that takes it.
absl::StatusOr<v1::TableSchema> ReadEvalSchemaFile(const std::string& path);

// A file `eval` or `report` reads, CSV or ARFF by its name (`upload`'s
// reader, client/text_upload.h). A real file (`real`) may hold categories
// the schema does not declare (a stray value in a held-out split): those
// rows are left out, counted in `*skipped` and said on stderr; in a
// synthetic file, which the sampler wrote, any bad line is an error. A
// model or a release given here is named as such.
absl::StatusOr<data::Table> ReadEvalFile(const data::Schema& schema, const std::string& path,
                                         bool real, int64_t* skipped);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_COMMANDS_EVAL_REPORT_H_
