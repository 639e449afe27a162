#include "client/proto_file.h"

#include <cstdio>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/privacy/noise_source.h"

namespace dpcurator::client {

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

absl::Status ReadProtoFile(const std::string& path, google::protobuf::Message* message) {
  std::ifstream input(path, std::ios::binary);
  if (!input) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  if (!message->ParseFromIstream(&input)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a ",
                                                   message->GetDescriptor()->name(), " file"));
  }
  return absl::OkStatus();
}

}  // namespace dpcurator::client
