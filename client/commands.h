#ifndef DPCURATOR_CLIENT_COMMANDS_H_
#define DPCURATOR_CLIENT_COMMANDS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "client/cli.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// Each file in client/commands/ contributes its commands to the table in
// main.cc. The method commands (train, sample, eval, report, demo) reach
// methods only through client/methods/registry.h.
std::vector<Command> PrivacyCommands();   // privacy epsilon|calibrate|delta
std::vector<Command> DatasetCommands();   // datasets create|list, upload, budget
std::vector<Command> ReleaseCommands();   // release, releases
std::vector<Command> TrainCommands();     // train <method>, one per registered method
std::vector<Command> SampleCommands();    // sample
std::vector<Command> EvalCommands();      // eval, eval images
std::vector<Command> DemoCommands();      // demo
std::vector<Command> SessionCommands();   // session open|step|close|show
std::vector<Command> CollectionCommands();  // collections ..., device submit
std::vector<Command> AdminCommands();       // admin token create|revoke|list, admin audit
std::vector<Command> SchemaCommands();      // schema draft|check
std::vector<Command> ReportCommands();      // report
std::vector<Command> AuditCommands();       // audit
std::vector<Command> SplitCommands();       // split (a local test split)

// The image schema of `--images HxW` with `--classes N` or `--class-names
// a,b,...` (datasets create; collections create, usually without classes):
// an IMAGE column "pixels" and, with classes, the label column "label".
absl::StatusOr<v1::TableSchema> ImageSchemaFromArgs(const ParsedArgs& args);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_COMMANDS_H_
