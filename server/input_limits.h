#ifndef DPCURATOR_SERVER_INPUT_LIMITS_H_
#define DPCURATOR_SERVER_INPUT_LIMITS_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/support/server_interceptor.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "server/auth.h"

namespace dpcurator::server {

// Bounds on caller-supplied input (issue 24, item 2): one place, before any
// handler, audit record or storage sees a request. Every string and bytes
// field and every repeated field of every request message is bounded,
// found by protobuf reflection, so a field added to proto/ is covered
// without anyone remembering to.
//
// These are storage and work bounds, not validation: where a handler has a
// finer check (a token label of 200 characters, 64 atoms per column, 16
// kernel bandwidths, ...) the bound here is at or above it and the
// handler's check and message stay. The limits that equal a handler's
// per-message limit say so in the same words ("send at most N per
// message").

// Ids, idempotency keys, labels, names, categories, cells: bytes per value.
inline constexpr int64_t kMaxCallerStringBytes = 256;
// Entries of a repeated field with no limit of its own.
inline constexpr int64_t kMaxRepeatedEntries = 256;

struct FieldLimit {
  // Bytes per value of a string or bytes field (each entry when repeated).
  int64_t max_value_bytes = kMaxCallerStringBytes;
  // Entries of a repeated (or map) field.
  int64_t max_entries = kMaxRepeatedEntries;
};
// The limit of one field: the defaults above unless the field is listed in
// input_limits.cc with its own documented limit.
FieldLimit LimitOf(const google::protobuf::FieldDescriptor& field);

// OK, or INVALID_ARGUMENT naming the first field (full proto name) over its
// limit and the limit. The text quotes only sizes, never the value.
absl::Status CheckInputLimits(const google::protobuf::Message& message);

// The server interceptor. For every call of a dpcurator.v1 method, at
// POST_RECV_MESSAGE (each message of a client stream too), a request over a
// limit is refused through Authorizer::Refuse: Check() fails, so unary
// handlers stop at their first line, and the final status is
// INVALID_ARGUMENT with this module's message. gRPC 1.51 cannot end a call
// from a server interceptor, so in a stream the offending message and every
// later one are handed to the handler cleared (empty): nothing oversized is
// read, stored or audited, and nothing after the refusal is stored.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeInputLimitsInterceptorFactory(Authorizer* authorizer);

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_INPUT_LIMITS_H_
