// `dpcurator train <method>`: one command per registered method, its
// options, help and training from the method's unit; this file writes the
// model file and prints what the unit says about it (or, with --json, the
// model file's facts).
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/methods/registry.h"
#include "client/proto_file.h"

namespace dpcurator::client {
namespace {

// --json is the command's, not the unit's: every train command has it.
std::vector<OptionSpec> WithJson(std::vector<OptionSpec> options) {
  for (const OptionSpec& option : options) {
    if (option.name == "json") return options;
  }
  options.push_back({"json", "", "print JSON (docs/json.md)", true});
  return options;
}

}  // namespace

std::vector<Command> TrainCommands() {
  std::vector<Command> commands;
  for (const Method* method : RegisteredMethods()) {
    commands.push_back(Command{
        absl::StrCat("train ", method->name()), method->TrainSummary(),
        method->TrainDescription(), WithJson(method->TrainOptions()),
        [method](const ParsedArgs& args) -> absl::Status {
          // A release file of another kind (or a model file) is named as
          // such before the unit reads it as its own kind (issue 25 item 2).
          if (args.Has("release")) {
            if (auto s = CheckReleaseFileFor(*method, args.Get("release")); !s.ok()) return s;
          }
          auto trained = method->Train(args);
          if (!trained.ok()) return trained.status();
          if (auto s = WriteProtoFile(trained->model, args.Get("out")); !s.ok()) return s;
          if (args.Flag("json")) {
            const v1::GeneratorModel& model = trained->model;
            const nlohmann::json out = {{"model", args.Get("out")},
                                        {"method", model.method()},
                                        {"release_id", model.release_id()},
                                        {"dataset_id", model.dataset_id()},
                                        {"epsilon", model.epsilon()},
                                        {"delta", model.delta()},
                                        {"steps", model.steps()},
                                        {"final_loss", model.final_loss()}};
            std::printf("%s\n", out.dump(2).c_str());
          } else {
            std::printf("%s", trained->message.c_str());
          }
          return absl::OkStatus();
        }});
  }
  return commands;
}

}  // namespace dpcurator::client
