#ifndef DPCURATOR_CLIENT_CLI_H_
#define DPCURATOR_CLIENT_CLI_H_

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpcurator::client {

// A small declarative option parser: each command lists its options with a
// default and a help line, so `--help` is generated and unknown options are
// errors that say what is accepted.
struct OptionSpec {
  std::string name;           // without "--"
  std::string default_value;  // "" and is_flag=false: optional with no default
  std::string help;
  bool is_flag = false;       // boolean, takes no value
  bool required = false;
  // Environment variable read when the option is not on the command line
  // (an explicit option wins; the variable wins over the default). A flag's
  // variable reads as Flag() does: "1", "true" or "yes" set it.
  std::string env = "";
  // The accepted values, when the option takes one of a fixed set: ParseArgs
  // refuses others (listing these) and --help shows them.
  std::vector<std::string> choices = {};
};

// A whole number as a count flag takes it: plain ("10000") or in
// scientific notation ("1e7", "2.5e3"), exactly (no rounding through a
// double). INVALID_ARGUMENT names `flag` and says whether the text is not a
// number, not whole ("1.5", "1e-3") or outside int64 (issue 38: `--rows
// 1e7` was refused).
absl::StatusOr<int64_t> ParseWholeNumber(const std::string& flag, absl::string_view text);

class ParsedArgs {
 public:
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name) const;
  absl::StatusOr<double> GetDouble(const std::string& name) const;
  absl::StatusOr<int64_t> GetInt(const std::string& name) const;
  bool Flag(const std::string& name) const;
  // True when the option's value came from its environment variable, not
  // from the command line (so an explicit option can override it).
  bool FromEnvironment(const std::string& name) const { return from_env_.count(name) > 0; }
  // True when the option's value is its declared default (not given on the
  // command line or in its environment variable), so a command can pick a
  // different default for another kind of input (image releases).
  bool IsDefault(const std::string& name) const { return from_default_.count(name) > 0; }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<OptionSpec>&,
                                              const std::vector<std::string>&);
  std::map<std::string, std::string> values_;
  std::set<std::string> from_env_;
  std::set<std::string> from_default_;
  std::vector<std::string> positional_;
};

// The candidate nearest to `word` by edit distance (insertions, deletions,
// substitutions and swaps of neighbours, each 1), when it is near enough to
// be a typo: at most max(1, size / 3) edits, capped at 3. "" when none is
// (issue 38: no "did you mean" for commands and options).
std::string NearestName(absl::string_view word, const std::vector<std::string>& candidates);

// Parses "--name value", "--name=value" and "--flag", then fills options
// left out from their `env` variable, then from their default. An unknown
// option is refused with its nearest accepted name (NearestName).
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<OptionSpec>& specs,
                                     const std::vector<std::string>& args);
std::string FormatHelp(const std::string& usage, const std::string& description,
                       const std::vector<OptionSpec>& specs);

struct Command {
  std::string name;         // e.g. "privacy epsilon"
  std::string summary;      // one line for the command list
  std::string description;  // shown by --help
  std::vector<OptionSpec> options;
  // The command's outcome; ExitCode turns it into the process exit code.
  std::function<absl::Status(const ParsedArgs&)> run;
};

// Options every server-talking command shares, each with a DPCURATOR_<NAME>
// environment fallback (DPCURATOR_SERVER, DPCURATOR_TOKEN, DPCURATOR_INSECURE,
// DPCURATOR_TLS_CA, DPCURATOR_TLS_CERT, DPCURATOR_TLS_KEY, DPCURATOR_DEADLINE).
std::vector<OptionSpec> ConnectionOptions();
// `options` followed by ConnectionOptions().
std::vector<OptionSpec> WithConnection(std::vector<OptionSpec> options);

// The privacy level of a release or session: exactly one of --epsilon and
// --noise-multiplier, handed to the matching setter of the request.
template <typename Message>
absl::Status SetPrivacyLevel(const ParsedArgs& args, Message* message) {
  if (args.Has("epsilon") == args.Has("noise-multiplier")) {
    return absl::InvalidArgumentError("give exactly one of --epsilon and --noise-multiplier");
  }
  if (args.Has("epsilon")) {
    auto epsilon = args.GetDouble("epsilon");
    if (!epsilon.ok()) return epsilon.status();
    message->set_epsilon(*epsilon);
  } else {
    auto noise_multiplier = args.GetDouble("noise-multiplier");
    if (!noise_multiplier.ok()) return noise_multiplier.status();
    message->set_noise_multiplier(*noise_multiplier);
  }
  return absl::OkStatus();
}

// Warnings on stderr for values that are allowed but almost surely a
// mistake (issue 25): a release epsilon below kUnlikelyEpsilon (its noise
// drowns everything) and a budget cap above kUnlikelyEpsilonCap (it bounds
// nothing a person would call private). Values are printed with %g, so
// 1e-9 shows as 1e-09, not 0.0000.
inline constexpr double kUnlikelyEpsilon = 1e-3;
inline constexpr double kUnlikelyEpsilonCap = 100;
void WarnIfUnlikelyEpsilon(const std::string& option, double epsilon);
void WarnIfUnlikelyEpsilonCap(const std::string& option, double cap);

// A command's outcome that is no error but still ends the process with
// `exit_code` (`schema check` while data_derived markers remain, `device
// submit` when the server rejected reports); the command has already printed
// what to say, so nothing goes to stderr.
absl::Status QuietExit(int exit_code);

// `status` marked as the server's answer (RpcError marks every call's
// failure), so that ExitCode can tell the server's refusals from the
// client's own checks where they share a code.
absl::Status FromServer(absl::Status status);

// The one place a command's status becomes the process exit code: 0 for OK,
// a QuietExit's own code, otherwise "dpcurator: <message>" on stderr and
// (docs/json.md, "Exit status"): 2 usage or input error (a bad option, file,
// line or schema; an id, name or file that is not there; a name in use),
// 3 refused by the server (budget, permission, authentication, a sealed
// dataset, a reused key), 1 anything else (the server unreachable, a
// failure after the request was accepted).
int ExitCode(const absl::Status& status);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_CLI_H_
