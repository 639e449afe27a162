#ifndef DPCURATOR_CLIENT_PROTO_FILE_H_
#define DPCURATOR_CLIENT_PROTO_FILE_H_

// Protobuf files (artefacts, models, reports) with a clear error on a bad
// file, and the idempotency keys of requests that charge a budget.

#include <string>

#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dpcurator::client {

// Written to a temporary name and renamed, so a crash never leaves half a
// file.
absl::Status WriteProtoFile(const google::protobuf::Message& message, const std::string& path);

// Reads `path` into `message`. A file of another kind is named as what it
// is, with the command that takes it (issue 25 item 2: wrong file kinds
// gave wrong messages): "'F' is a table (CSV), not a model file. ...",
// "'F' is empty (0 bytes), not a release artefact. ...", and bytes that do
// not parse "'F' is not a complete model file (N bytes that do not parse:
// truncated or damaged?)". InvalidArgument for those; NotFound when `path`
// cannot be opened. (A protobuf of another message type may still parse:
// DescribeFileKind in client/methods/registry.h tells models and releases
// apart.)
absl::Status ReadProtoFile(const std::string& path, google::protobuf::Message* message);

// What a text file holds, from its bytes alone, for a command given the
// wrong kind of file.
struct TextFileKind {
  // "empty (0 bytes)", "a schema file (JSON)", "a JSON file", "a table
  // (CSV)", "a table (ARFF)" or "a text file"; empty when the bytes are not
  // text (a protobuf's are not), so the caller keeps its own message.
  std::string what;
  // The commands that take such a file, `path` spelled in them; may be
  // empty.
  std::string hint;
};
TextFileKind DescribeTextFile(absl::string_view bytes, const std::string& path);

// The whole file at `path`; false when it cannot be opened.
bool ReadFileBytes(const std::string& path, std::string* bytes);

// A fresh idempotency key (128 random bits).
std::string NewIdempotencyKey();

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_PROTO_FILE_H_
