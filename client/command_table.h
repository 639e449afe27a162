#ifndef DPCURATOR_CLIENT_COMMAND_TABLE_H_
#define DPCURATOR_CLIENT_COMMAND_TABLE_H_

#include <vector>

#include "client/cli.h"

namespace dpcurator::client {

// Every command group of client/commands.h, in the order `dpcurator` lists
// them (commands/all.cc): the executable's table (main.cc) and the Python
// module's, which runs a command in-process (docs/python.md).
std::vector<Command> AllCommands();

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_COMMAND_TABLE_H_
