#include "client/proto_file.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "core/privacy/noise_source.h"

namespace dpcurator::client {
namespace {

// Text is judged on its first bytes: enough for any header, and a large
// table need not be scanned whole.
constexpr size_t kSniffBytes = 1 << 16;

// Text holds no control bytes but tab, CR and LF. dpcurator's protobuf
// files always do: a field's tag is (number << 3) | wire type, and every
// file starts with field 1 and 2 (a format version or id, then an id),
// tagged 0x08 or 0x0a and then 0x10 or 0x12 (lengths and doubles add more).
bool IsText(absl::string_view bytes) {
  for (unsigned char c : bytes.substr(0, kSniffBytes)) {
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) return false;
  }
  return true;
}

// How a protobuf message type is called to a user ("model file", after
// "a"), and how such a file is made again (empty when no single command
// does).
struct ProtoNoun {
  std::string noun;
  std::string remake;
};

ProtoNoun NounOf(const google::protobuf::Message& message, const std::string& path) {
  const std::string& name = message.GetDescriptor()->name();
  if (name == "GeneratorModel") {
    return {"model file",
            absl::StrCat("Write it again with `dpcurator train <method> ... --out ", path, "`")};
  }
  if (name == "Release") {
    return {"release artefact",
            absl::StrCat("Fetch it again at no charge with `dpcurator release get --id ID --out ",
                         path, "` (`dpcurator releases --dataset D` lists the ids)")};
  }
  return {absl::StrCat(name, " file"), ""};
}

}  // namespace

std::string NewIdempotencyKey() {
  return absl::StrFormat("key_%016x%016x", privacy::SecureRandomU64(), privacy::SecureRandomU64());
}

absl::Status WriteProtoFile(const google::protobuf::Message& message, const std::string& path) {
  // Write to a temporary name and rename, so a crash never leaves half a file.
  const std::string temporary = absl::StrCat(path, ".tmp");
  {
    std::ofstream output(temporary, std::ios::binary | std::ios::trunc);
    if (!output || !message.SerializeToOstream(&output)) {
      return absl::UnavailableError(absl::StrCat("cannot write '", path, "'"));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot move '", temporary, "' to '", path, "'"));
  }
  return absl::OkStatus();
}

bool ReadFileBytes(const std::string& path, std::string* bytes) {
  std::ifstream input(path, std::ios::binary);
  if (!input) return false;
  std::stringstream buffer;
  buffer << input.rdbuf();
  *bytes = buffer.str();
  return true;
}

TextFileKind DescribeTextFile(absl::string_view bytes, const std::string& path) {
  if (bytes.empty()) return {"empty (0 bytes)", ""};
  if (!IsText(bytes)) return {};
  absl::string_view text = bytes.substr(0, kSniffBytes);
  absl::ConsumePrefix(&text, "\xEF\xBB\xBF");  // a UTF-8 byte order mark
  text = absl::StripLeadingAsciiWhitespace(text);
  if (absl::StartsWith(text, "{") || absl::StartsWith(text, "[")) {
    if (absl::StrContains(text, "\"columns\"")) {
      return {"a schema file (JSON)",
              absl::StrCat("`eval` and `report` take it as --schema ", path,
                           "; `dpcurator datasets create --schema ", path, "` registers it")};
    }
    return {"a JSON file", ""};
  }
  // ARFF: "@relation" first, after %-comments perhaps.
  const bool arff = absl::StartsWithIgnoreCase(text, "@relation") ||
                    (absl::StartsWith(text, "%") &&
                     absl::StrContains(absl::AsciiStrToLower(text), "@relation"));
  const absl::string_view first_line = text.substr(0, text.find('\n'));
  const bool csv = first_line.find_first_of(",;\t") != absl::string_view::npos;
  if (arff || csv) {
    const char* flag = arff ? "--arff" : "--csv";
    return {arff ? "a table (ARFF)" : "a table (CSV)",
            absl::StrCat("`dpcurator upload ", flag, " ", path, "` uploads its rows, `dpcurator ",
                         "schema draft ", flag, " ", path,
                         "` drafts a schema from them, and `eval` and `report` read them as "
                         "--real or --synthetic")};
  }
  return {"a text file", ""};
}

absl::Status ReadProtoFile(const std::string& path, google::protobuf::Message* message) {
  std::string bytes;
  if (!ReadFileBytes(path, &bytes)) {
    return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  }
  const ProtoNoun noun = NounOf(*message, path);
  // An empty or a text file would parse as a message of defaults, or fail
  // as "not a file": name it (issue 25 item 2).
  const TextFileKind text = DescribeTextFile(bytes, path);
  if (!text.what.empty()) {
    const std::string& hint = bytes.empty() ? noun.remake : text.hint;
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is ", text.what, ", not a ",
                                                   noun.noun, hint.empty() ? "" : ". ", hint));
  }
  if (!message->ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' is not a complete ", noun.noun, " (", bytes.size(),
        " bytes that do not parse: truncated or damaged?)",
        noun.remake.empty() ? "" : ". ", noun.remake));
  }
  return absl::OkStatus();
}

}  // namespace dpcurator::client
