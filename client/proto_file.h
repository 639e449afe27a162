#ifndef DPCURATOR_CLIENT_PROTO_FILE_H_
#define DPCURATOR_CLIENT_PROTO_FILE_H_

// Protobuf files (artefacts, models, reports) with a clear error on a bad
// file, and the idempotency keys of requests that charge a budget.

#include <string>

#include <google/protobuf/message.h>

#include "absl/status/status.h"

namespace dpcurator::client {

// Written to a temporary name and renamed, so a crash never leaves half a
// file.
absl::Status WriteProtoFile(const google::protobuf::Message& message, const std::string& path);
absl::Status ReadProtoFile(const std::string& path, google::protobuf::Message* message);

// A fresh idempotency key (128 random bits).
std::string NewIdempotencyKey();

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_PROTO_FILE_H_
