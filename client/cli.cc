#include "client/cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dpcurator::client {

std::string ParsedArgs::Get(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? "" : it->second;
}

absl::StatusOr<double> ParsedArgs::GetDouble(const std::string& name) const {
  double value;
  if (!absl::SimpleAtod(Get(name), &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " expects a number, got '", Get(name), "'"));
  }
  return value;
}

absl::StatusOr<int64_t> ParseWholeNumber(const std::string& flag, absl::string_view text) {
  const auto not_a_number = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " expects a whole number (e.g. 10000 or 1e4), got '", text, "'"));
  };
  const auto out_of_range = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " ", text, " is out of range (at most ",
        std::numeric_limits<int64_t>::max(), " in magnitude)"));
  };
  // sign, digits [. digits] [e|E [sign] digits], read by hand so that the
  // value is exact: the mantissa's digits shifted by the exponent.
  size_t i = 0;
  const bool negative = i < text.size() && text[i] == '-';
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
  std::string digits;
  int64_t fraction_digits = 0;
  bool point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      digits.push_back(c);
      if (point) ++fraction_digits;
    } else if (c == '.' && !point) {
      point = true;
    } else {
      break;
    }
  }
  if (digits.empty()) return not_a_number();
  int64_t exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool negative_exponent = i < text.size() && text[i] == '-';
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    const size_t start = i;
    for (; i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i])); ++i) {
      if (exponent < 1'000'000) exponent = exponent * 10 + (text[i] - '0');  // saturates
    }
    if (i == start) return not_a_number();
    if (negative_exponent) exponent = -exponent;
  }
  if (i != text.size()) return not_a_number();
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  int64_t shift = exponent - fraction_digits;
  if (shift < 0) {
    // The digits shifted out must all be zeros, or the value is not whole.
    const auto cut = static_cast<size_t>(std::min<int64_t>(-shift, digits.size()));
    if (digits.find_first_not_of('0', digits.size() - cut) != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " ", text, " is not a whole number"));
    }
    digits.resize(digits.size() - cut);
    shift = 0;
  }
  if (digits.empty()) return 0;
  if (static_cast<int64_t>(digits.size()) + shift > 19) return out_of_range();
  digits.append(static_cast<size_t>(shift), '0');
  int64_t value;
  if (!absl::SimpleAtoi(absl::StrCat(negative ? "-" : "", digits), &value)) {
    return out_of_range();
  }
  return value;
}

absl::StatusOr<int64_t> ParsedArgs::GetInt(const std::string& name) const {
  return ParseWholeNumber(name, Get(name));
}

bool ParsedArgs::Flag(const std::string& name) const {
  const std::string value = Get(name);
  return value == "true" || value == "1" || value == "yes";
}

namespace {

// Optimal-string-alignment distance (Damerau-Levenshtein without repeated
// edits of one substring): the classic dynamic programme over prefixes, with
// a swap of two neighbours costing one edit, as typing slips do.
int EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1, 0));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const int cost = absl::ascii_tolower(static_cast<unsigned char>(a[i - 1])) ==
                               absl::ascii_tolower(static_cast<unsigned char>(b[j - 1]))
                           ? 0
                           : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string NearestName(absl::string_view word, const std::vector<std::string>& candidates) {
  // A third of the word's length, so "datset" finds "datasets" (2 edits) but
  // "x" finds nothing far from it; capped so long words do not match anything.
  const int allowed = std::min(3, std::max(1, static_cast<int>(word.size()) / 3));
  std::string best;
  int best_distance = allowed + 1;
  for (const std::string& candidate : candidates) {
    const int distance = EditDistance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<OptionSpec>& specs,
                                     const std::vector<std::string>& args) {
  ParsedArgs parsed;
  auto find = [&](const std::string& name) -> const OptionSpec* {
    for (const auto& spec : specs)
      if (spec.name == name) return &spec;
    return nullptr;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "--")) {
      parsed.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const OptionSpec* spec = find(name);
    if (spec == nullptr) {
      std::string known;
      std::vector<std::string> names;
      for (const auto& s : specs) {
        absl::StrAppend(&known, known.empty() ? "" : ", ", "--", s.name);
        names.push_back(s.name);
      }
      const std::string nearest = NearestName(name, names);
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown option --", name,
          nearest.empty() ? "" : absl::StrCat("; did you mean --", nearest, "?"),
          " (accepted: ", known, "; see --help)"));
    }
    if (spec->is_flag) {
      parsed.values_[name] = value.value_or("true");
      continue;
    }
    if (!value.has_value()) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    parsed.values_[name] = *value;
  }
  for (const auto& spec : specs) {
    if (auto it = parsed.values_.find(spec.name);
        it != parsed.values_.end() && !spec.choices.empty() &&
        std::find(spec.choices.begin(), spec.choices.end(), it->second) == spec.choices.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--", spec.name, " '", it->second,
                                                     "' is not one of: ",
                                                     absl::StrJoin(spec.choices, ", ")));
    }
    if (parsed.values_.count(spec.name) == 0 && !spec.env.empty()) {
      const char* value = std::getenv(spec.env.c_str());
      if (value != nullptr && *value != '\0') {
        parsed.values_[spec.name] = value;
        parsed.from_env_.insert(spec.name);
      }
    }
    if (parsed.values_.count(spec.name) == 0) {
      if (spec.required) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", spec.name, " is required: ", spec.help));
      }
      if (!spec.default_value.empty()) {
        parsed.values_[spec.name] = spec.default_value;
        parsed.from_default_.insert(spec.name);
      }
    }
  }
  return parsed;
}

std::string FormatHelp(const std::string& usage, const std::string& description,
                       const std::vector<OptionSpec>& specs) {
  std::string out = absl::StrCat("usage: ", usage, "\n\n", description, "\n");
  if (!specs.empty()) absl::StrAppend(&out, "\noptions:\n");
  for (const auto& spec : specs) {
    std::string left = absl::StrCat("  --", spec.name, spec.is_flag ? "" : " VALUE");
    if (left.size() < 30) left.resize(30, ' ');
    absl::StrAppend(&out, left, " ", spec.help);
    if (spec.required) absl::StrAppend(&out, " (required)");
    if (!spec.choices.empty()) {
      absl::StrAppend(&out, " {", absl::StrJoin(spec.choices, "|"), "}");
    }
    if (!spec.env.empty()) absl::StrAppend(&out, " (env ", spec.env, ")");
    if (!spec.default_value.empty() && !spec.is_flag)
      absl::StrAppend(&out, " [default: ", spec.default_value, "]");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::vector<OptionSpec> ConnectionOptions() {
  return {
      {"server", "", "curator server host:port (default 127.0.0.1:50051)", false, false,
       "DPCURATOR_SERVER"},
      {"token", "", "bearer token", false, false, "DPCURATOR_TOKEN"},
      {"insecure", "",
       "plaintext connection, for a server started with --insecure-dev (--insecure=false "
       "overrides the variable)",
       true, false, "DPCURATOR_INSECURE"},
      {"tls-ca", "", "PEM file of the CA that signed the server's certificate", false, false,
       "DPCURATOR_TLS_CA"},
      {"tls-cert", "", "PEM client certificate, for a server started with --tls-client-ca",
       false, false, "DPCURATOR_TLS_CERT"},
      {"tls-key", "", "PEM private key of --tls-cert", false, false, "DPCURATOR_TLS_KEY"},
      {"deadline", "120", "seconds before a call gives up", false, false, "DPCURATOR_DEADLINE"},
  };
}

std::vector<OptionSpec> WithConnection(std::vector<OptionSpec> options) {
  for (auto& option : ConnectionOptions()) options.push_back(option);
  return options;
}

namespace {

// The payload that carries a QuietExit's code.
constexpr absl::string_view kExitCodePayload = "type.dpcurator.dev/exit_code";
// The payload that marks a status as the server's answer (FromServer).
constexpr absl::string_view kFromServerPayload = "type.dpcurator.dev/from_server";

}  // namespace

void WarnIfUnlikelyEpsilon(const std::string& option, double epsilon) {
  if (epsilon > 0 && epsilon < kUnlikelyEpsilon) {
    std::fprintf(stderr,
                 "dpcurator: warning: %s %g is below %g: the noise will drown the data and the "
                 "result will be useless (typical values are 0.1 to 10)\n",
                 option.c_str(), epsilon, kUnlikelyEpsilon);
  }
}

void WarnIfUnlikelyEpsilonCap(const std::string& option, double cap) {
  if (cap > kUnlikelyEpsilonCap) {
    std::fprintf(stderr,
                 "dpcurator: warning: %s %g is above %g: a budget that large bounds nothing a "
                 "person would call private (typical caps are 1 to 10)\n",
                 option.c_str(), cap, kUnlikelyEpsilonCap);
  }
}

absl::Status FromServer(absl::Status status) {
  if (!status.ok()) status.SetPayload(kFromServerPayload, absl::Cord("1"));
  return status;
}

absl::Status QuietExit(int exit_code) {
  absl::Status status(absl::StatusCode::kFailedPrecondition, "");
  status.SetPayload(kExitCodePayload, absl::Cord(absl::StrCat(exit_code)));
  return status;
}

int ExitCode(const absl::Status& status) {
  if (status.ok()) return 0;
  if (auto code = status.GetPayload(kExitCodePayload)) {
    int exit_code = 1;
    if (absl::SimpleAtoi(std::string(*code), &exit_code)) return exit_code;
    return 1;
  }
  std::fprintf(stderr, "dpcurator: %s\n", std::string(status.message()).c_str());
  const bool from_server = status.GetPayload(kFromServerPayload).has_value();
  // docs/json.md, "Exit status": one table, kept in step with this switch
  // (tests/e2e/friction_test.cc checks the rows it can reach).
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:         // a file, dataset or release that is not there
    case absl::StatusCode::kAlreadyExists:    // a dataset name in use
    case absl::StatusCode::kUnimplemented:    // input the client cannot read (ARFF dates)
    case absl::StatusCode::kOutOfRange:
      return 2;
    case absl::StatusCode::kFailedPrecondition:
      // The server's: a sealed dataset, a reused key, an open session. The
      // client's own: a schema still carrying data_derived markers (input).
      return from_server ? 3 : 2;
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return 3;
    default:
      return 1;
  }
}

}  // namespace dpcurator::client
