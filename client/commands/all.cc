// The command table: every group's commands, in the order `dpcurator`
// lists them. One table for the executable (main.cc) and for the Python
// module's in-process calls (python/src/cli_module.cc, docs/python.md), so
// both run the same commands with the same options, checks and messages.
#include <utility>
#include <vector>

#include "client/command_table.h"
#include "client/commands.h"

namespace dpcurator::client {

std::vector<Command> AllCommands() {
  std::vector<Command> all;
  for (auto group : {DemoCommands(), SchemaCommands(), SplitCommands(), DatasetCommands(),
                     ReleaseCommands(), SessionCommands(), CollectionCommands(), AdminCommands(),
                     TrainCommands(), SampleCommands(), EvalCommands(), ReportCommands(),
                     AuditCommands(), PrivacyCommands()}) {
    for (auto& command : group) all.push_back(std::move(command));
  }
  return all;
}

}  // namespace dpcurator::client
