// `dpcurator train <method>`: one command per registered method, its
// options, help and training from the method's unit; this file writes the
// model file and prints what the unit says about it.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/methods/registry.h"
#include "client/proto_file.h"

namespace dpcurator::client {

std::vector<Command> TrainCommands() {
  std::vector<Command> commands;
  for (const Method* method : RegisteredMethods()) {
    commands.push_back(Command{
        absl::StrCat("train ", method->name()), method->TrainSummary(),
        method->TrainDescription(), method->TrainOptions(),
        [method](const ParsedArgs& args) -> absl::Status {
          auto trained = method->Train(args);
          if (!trained.ok()) return trained.status();
          if (auto s = WriteProtoFile(trained->model, args.Get("out")); !s.ok()) return s;
          std::printf("%s", trained->message.c_str());
          return absl::OkStatus();
        }});
  }
  return commands;
}

}  // namespace dpcurator::client
