// dpcurator: the command-line client (curators, analysts, trainers).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli.h"
#include "client/command_table.h"

namespace {

using dpcurator::client::Command;
using dpcurator::client::AllCommands;

void PrintUsage(const std::vector<Command>& commands) {
  std::printf(
      "dpcurator: differentially private synthetic data from a curator server.\n\n"
      "usage: dpcurator <command> [options]     (dpcurator <command> --help for its options)\n\n"
      "commands:\n");
  for (const auto& c : commands) std::printf("  %-20s  %s\n", c.name.c_str(), c.summary.c_str());
  std::printf(
      "\nStart here: `dpcurator demo` runs the whole pipeline on a local server.\n"
      "New data? `dpcurator schema draft --csv FILE` (or --arff FILE) writes a first schema.\n"
      "Server-facing commands read their connection options from the environment:\n"
      "DPCURATOR_SERVER, DPCURATOR_TOKEN, DPCURATOR_INSECURE=1, DPCURATOR_TLS_CA,\n"
      "DPCURATOR_TLS_CERT, DPCURATOR_TLS_KEY, DPCURATOR_DEADLINE (an explicit option wins).\n"
      "--json outputs: docs/json.md.\n");
}

// The next word of every command under `prefix` ("" for the top level), for
// a "did you mean" on an unknown one (issue 38).
std::vector<std::string> NextWords(const std::vector<Command>& commands,
                                   const std::string& prefix) {
  std::vector<std::string> words;
  for (const auto& c : commands) {
    if (!prefix.empty() && !absl::StartsWith(c.name, prefix + " ")) continue;
    const std::string rest = prefix.empty() ? c.name : c.name.substr(prefix.size() + 1);
    std::string word = rest.substr(0, rest.find(' '));
    if (std::find(words.begin(), words.end(), word) == words.end()) words.push_back(word);
  }
  return words;
}

std::string DidYouMean(const std::vector<Command>& commands, const std::string& prefix,
                       const std::string& word) {
  const std::string nearest = dpcurator::client::NearestName(word, NextWords(commands, prefix));
  if (nearest.empty()) return "";
  return absl::StrCat("; did you mean '", prefix.empty() ? "" : prefix + " ", nearest, "'?");
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<Command> commands = AllCommands();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    PrintUsage(commands);
    return args.empty() ? 2 : 0;
  }
  // Longest match: "privacy epsilon" before "privacy", "release get" before "release".
  const Command* chosen = nullptr;
  size_t words = 0;
  for (const auto& c : commands) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (true) {
      size_t space = c.name.find(' ', start);
      parts.push_back(c.name.substr(start, space - start));
      if (space == std::string::npos) break;
      start = space + 1;
    }
    if (parts.size() > args.size() || parts.size() <= words) continue;
    bool match = true;
    for (size_t i = 0; i < parts.size(); ++i) match = match && parts[i] == args[i];
    if (match) {
      chosen = &c;
      words = parts.size();
    }
  }
  if (chosen == nullptr) {
    // A command group ("train", "session", "admin token"): list its commands.
    std::vector<const Command*> group;
    std::string prefix;
    for (const auto& word : args) {
      if (absl::StartsWith(word, "-")) break;
      const std::string candidate = prefix.empty() ? word : absl::StrCat(prefix, " ", word);
      bool any = false;
      for (const auto& c : commands) any = any || absl::StartsWith(c.name, candidate + " ");
      if (!any) break;
      prefix = candidate;
    }
    if (!prefix.empty()) {
      // A word after the group that names none of its commands (`train aim
      // --help`) is an unknown command, not a request for the group's help.
      const size_t prefix_words =
          static_cast<size_t>(std::count(prefix.begin(), prefix.end(), ' ')) + 1;
      const bool unknown = args.size() > prefix_words && !absl::StartsWith(args[prefix_words], "-");
      bool help = false;
      for (const auto& a : args) help = help || a == "--help" || a == "-h";
      if (unknown) {
        std::fprintf(stderr, "dpcurator: unknown command '%s %s'%s\n\n", prefix.c_str(),
                     args[prefix_words].c_str(),
                     DidYouMean(commands, prefix, args[prefix_words]).c_str());
        help = false;
      }
      FILE* out = help ? stdout : stderr;
      if (!help && !unknown) {
        std::fprintf(out, "dpcurator %s: name one of its commands\n\n", prefix.c_str());
      }
      std::fprintf(out,
                   "usage: dpcurator %s <command> [options]   (dpcurator %s <command> --help)"
                   "\n\ncommands:\n",
                   prefix.c_str(), prefix.c_str());
      for (const auto& c : commands) {
        if (absl::StartsWith(c.name, prefix + " ")) {
          std::fprintf(out, "  %-20s  %s\n", c.name.c_str(), c.summary.c_str());
        }
      }
      return help ? 0 : 2;
    }
    std::fprintf(stderr, "dpcurator: unknown command '%s'%s\n\n", args[0].c_str(),
                 DidYouMean(commands, "", args[0]).c_str());
    PrintUsage(commands);
    return 2;
  }
  std::vector<std::string> rest(args.begin() + words, args.end());
  for (const auto& a : rest) {
    if (a == "--help" || a == "-h") {
      std::printf("%s", dpcurator::client::FormatHelp(absl::StrCat("dpcurator ", chosen->name,
                                                                   " [options]"),
                                                      chosen->description.empty()
                                                          ? chosen->summary
                                                          : chosen->description,
                                                      chosen->options)
                            .c_str());
      return 0;
    }
  }
  auto parsed = dpcurator::client::ParseArgs(chosen->options, rest);
  if (!parsed.ok()) return dpcurator::client::ExitCode(parsed.status());
  if (!parsed->positional().empty()) {
    std::fprintf(stderr, "dpcurator %s: unexpected argument '%s' (see --help)\n",
                 chosen->name.c_str(), parsed->positional()[0].c_str());
    return 2;
  }
  return dpcurator::client::ExitCode(chosen->run(*parsed));
}
