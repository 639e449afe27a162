// Bounded caller input (issue 24, item 2): the input-limits interceptor
// (server/input_limits.h) refuses, with INVALID_ARGUMENT naming the field,
// any request with a string or bytes field or a repeated field over its
// limit, before any handler, audit record or storage sees it. The cases are
// generated from the proto descriptors: every RPC of every service in
// dpcurator.v1, every string/bytes field and every repeated field reachable
// from its request (nested, repeated and map fields included), so a field
// added later is tested without anyone writing a case for it.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/generic/generic_stub.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>


#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/data/demo.h"
#include "server/auth.h"
#include "server/input_limits.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using ::testing::HasSubstr;

using FieldPath = std::vector<const FieldDescriptor*>;

// Every string/bytes field and every repeated field reachable from `type`.
void CollectFields(const Descriptor* type, FieldPath* prefix, std::set<const Descriptor*>* open,
                   std::vector<FieldPath>* out) {
  if (!open->insert(type).second) return;  // a recursive type: covered once
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    prefix->push_back(field);
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING || field->is_repeated()) {
      out->push_back(*prefix);
    }
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      CollectFields(field->message_type(), prefix, open, out);
    }
    prefix->pop_back();
  }
  open->erase(type);
}

std::string PathName(const FieldPath& path) {
  std::vector<std::string> names;
  for (const auto* field : path) names.push_back(field->name());
  return absl::StrJoin(names, ".");
}

void AddDefault(Message* message, const FieldDescriptor* field) {
  const Reflection* r = message->GetReflection();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: r->AddInt32(message, field, 0); break;
    case FieldDescriptor::CPPTYPE_INT64: r->AddInt64(message, field, 0); break;
    case FieldDescriptor::CPPTYPE_UINT32: r->AddUInt32(message, field, 0); break;
    case FieldDescriptor::CPPTYPE_UINT64: r->AddUInt64(message, field, 0); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: r->AddDouble(message, field, 0); break;
    case FieldDescriptor::CPPTYPE_FLOAT: r->AddFloat(message, field, 0); break;
    case FieldDescriptor::CPPTYPE_BOOL: r->AddBool(message, field, false); break;
    case FieldDescriptor::CPPTYPE_ENUM: r->AddEnumValue(message, field, 0); break;
    case FieldDescriptor::CPPTYPE_STRING: r->AddString(message, field, ""); break;
    case FieldDescriptor::CPPTYPE_MESSAGE: r->AddMessage(message, field); break;
  }
}

// A request of `type` whose field at `path` is over its limit: one byte too
// long (`count` false) or one entry too many (`count` true).
std::unique_ptr<Message> Oversized(const Descriptor* type, const FieldPath& path, bool count) {
  std::unique_ptr<Message> request(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(type)->New());
  Message* message = request.get();
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const Reflection* r = message->GetReflection();
    message = path[i]->is_repeated() ? r->AddMessage(message, path[i])
                                     : r->MutableMessage(message, path[i]);
  }
  const FieldDescriptor* leaf = path.back();
  const FieldLimit limit = LimitOf(*leaf);
  const Reflection* r = message->GetReflection();
  if (count) {
    for (int64_t i = 0; i <= limit.max_entries; ++i) {
      AddDefault(message, leaf);
      if (leaf->is_map()) {
        // Distinct keys: a map keeps one entry per key.
        Message* entry = r->MutableRepeatedMessage(message, leaf, static_cast<int>(i));
        const FieldDescriptor* key = entry->GetDescriptor()->map_key();
        entry->GetReflection()->SetString(entry, key, absl::StrCat(i));
      }
    }
  } else {
    std::string big(static_cast<size_t>(limit.max_value_bytes) + 1, 'x');
    if (leaf->is_repeated()) {
      r->AddString(message, leaf, std::move(big));
    } else {
      r->SetString(message, leaf, std::move(big));
    }
  }
  return request;
}

const char* TokenFor(const std::string& method) {
  const std::vector<Role> roles = AllowedRoles(method);
  if (roles.empty()) return kCuratorToken;
  switch (roles.front()) {
    case Role::kCurator: return kCuratorToken;
    case Role::kAnalyst: return kAnalystToken;
    case Role::kDevice: return kDeviceToken;
  }
  return kCuratorToken;
}

// One call of any shape (unary or streaming) with one request message,
// through the generic stub: the wire is the same.
grpc::Status CallWithOneMessage(const std::string& address, const std::string& method,
                                const std::string& token, const std::string& payload) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grpc::CompletionQueue cq;
  auto wait = [&cq](intptr_t tag) {
    void* got = nullptr;
    bool ok = false;
    while (cq.Next(&got, &ok)) {
      if (got == reinterpret_cast<void*>(tag)) return ok;
    }
    return false;
  };
  auto call = stub.PrepareCall(&context, method, &cq);
  call->StartCall(reinterpret_cast<void*>(1));
  wait(1);
  grpc::Slice slice(payload);
  grpc::ByteBuffer buffer(&slice, 1);
  call->Write(buffer, reinterpret_cast<void*>(2));
  wait(2);
  call->WritesDone(reinterpret_cast<void*>(3));
  wait(3);
  grpc::ByteBuffer response;
  for (int i = 0; i < 1000; ++i) {
    call->Read(&response, reinterpret_cast<void*>(4));
    if (!wait(4)) break;
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  wait(5);
  cq.Shutdown();
  void* got = nullptr;
  bool ok = false;
  while (cq.Next(&got, &ok)) {
  }
  return status;
}

class InputLimitsTest : public ServerTest {
 protected:
  int64_t DatabaseBytes() const { return FileBytes(db_path_) + FileBytes(db_path_ + "-wal"); }
  // The newest audit row (the call just made: its row is written before
  // its status is sent).
  v1::AuditRecord NewestAudit() {
    v1::ListAuditResponse audit;
    EXPECT_TRUE(ListAudit(1, &audit).ok());
    return audit.records_size() > 0 ? audit.records(0) : v1::AuditRecord();
  }
};

TEST_F(InputLimitsTest, EveryOversizedFieldOfEveryRpcIsRefusedBeforeItsHandler) {
  const auto* file = v1::Dataset::descriptor()->file();
  constexpr int64_t kMaxMessageBytes = int64_t{64} << 20;  // ServerOptions default
  int cases = 0;
  std::set<std::string> methods_seen;
  for (int s = 0; s < file->service_count(); ++s) {
    const auto* service = file->service(s);
    for (int m = 0; m < service->method_count(); ++m) {
      const auto* rpc = service->method(m);
      const std::string method = absl::StrCat("/", service->full_name(), "/", rpc->name());
      methods_seen.insert(method);
      std::vector<FieldPath> paths;
      FieldPath prefix;
      std::set<const Descriptor*> open;
      CollectFields(rpc->input_type(), &prefix, &open, &paths);
      for (const FieldPath& path : paths) {
        for (bool count : {false, true}) {
          if (count ? !path.back()->is_repeated()
                    : path.back()->cpp_type() != FieldDescriptor::CPPTYPE_STRING) {
            continue;
          }
          SCOPED_TRACE(absl::StrCat(method, " ", PathName(path), count ? " (entries)" : " (bytes)"));
          std::unique_ptr<Message> request = Oversized(rpc->input_type(), path, count);
          const std::string payload = request->SerializeAsString();
          grpc::Status status = CallWithOneMessage(address(), method, TokenFor(method), payload);
          ++cases;
          if (static_cast<int64_t>(payload.size()) > kMaxMessageBytes) {
            // Bounded by gRPC's message size before any interceptor.
            EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
            continue;
          }
          EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
              << status.error_message();
          EXPECT_THAT(status.error_message(), HasSubstr(path.back()->full_name()));
          // The handler stopped before naming a target or a detail: the
          // audit row is the interceptor's refusal alone.
          const v1::AuditRecord row = NewestAudit();
          EXPECT_EQ(row.method(), method);
          EXPECT_EQ(row.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
          EXPECT_EQ(row.target(), "");
          EXPECT_EQ(row.detail(), "");
          EXPECT_EQ(row.epsilon(), 0.0);
        }
      }
    }
  }
  // Every protected method is reachable from the descriptors, and the
  // generator found the fields (a silent generator would pass vacuously).
  for (const std::string& method : ProtectedMethods()) {
    EXPECT_TRUE(methods_seen.count(method)) << method;
  }
  EXPECT_GT(cases, 40);
}

TEST_F(InputLimitsTest, HugeIdsAndKeysDoNotGrowTheDatabase) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 200, 4).ok());
  const int64_t before = DatabaseBytes();
  const std::string huge(8 << 20, 'x');
  v1::BudgetReport report;
  for (int i = 0; i < 3; ++i) {
    grpc::Status status = GetBudget(huge, &report);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("dpcurator.v1.GetBudgetRequest.dataset_id"));
    EXPECT_LT(status.error_message().size(), 1000u);
  }
  v1::Release release;
  grpc::Status status = RequestRelease(RffRequest(dataset.id(), 1.0, huge), &release);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("dpcurator.v1.ReleaseRequest.idempotency_key"));
  // Four audit rows of a few hundred bytes, not 32 MiB.
  EXPECT_LT(DatabaseBytes() - before, int64_t{1} << 20);
  v1::ListAuditResponse audit;
  ASSERT_TRUE(ListAudit(100, &audit).ok());
  for (const auto& row : audit.records()) {
    EXPECT_LE(row.target().size(), Authorizer::kMaxAuditTextBytes);
    EXPECT_LE(row.detail().size(), Authorizer::kMaxAuditTextBytes);
  }
  // Nothing was charged.
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  EXPECT_EQ(report.epsilon_spent(), 0.0);
}

TEST_F(InputLimitsTest, FieldsAtTheirLimitPass) {
  const std::string at_limit(static_cast<size_t>(kMaxCallerStringBytes), 'k');
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 200, 4).ok());
  v1::Release release;
  grpc::Status status = RequestRelease(RffRequest(dataset.id(), 1.0, at_limit), &release);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(release.idempotency_key(), at_limit);
  // One byte more is refused.
  status = RequestRelease(RffRequest(dataset.id(), 1.0, at_limit + "k"), &release);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// A client stream is checked message by message: an oversized message in
// the middle ends the upload with INVALID_ARGUMENT, and nothing of the
// upload is stored (one transaction).
TEST_F(InputLimitsTest, OversizedStreamMessageStopsTheUploadThere) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  const data::Table table = data::GenerateDemoTable(30, 7);
  const std::vector<v1::Row> rows = DemoRows(table);
  std::vector<v1::UploadRowsRequest> messages(3);
  messages[0].set_dataset_id(dataset.id());
  for (int i = 0; i < 10; ++i) *messages[0].add_rows() = rows[i];
  for (int i = 10; i < 20; ++i) *messages[1].add_rows() = rows[i];
  messages[1].mutable_rows(3)->set_cells(0, std::string(kMaxCallerStringBytes + 1, '1'));
  for (int i = 20; i < 30; ++i) *messages[2].add_rows() = rows[i];
  v1::UploadRowsResponse response;
  grpc::Status status = UploadMessages(messages, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("dpcurator.v1.Row.cells"));
  v1::Dataset stored;
  ASSERT_TRUE(FindDataset(Curator(), dataset.id(), &stored).ok());
  // An upload is one transaction (issue 25): the message before the
  // oversized one is not stored either.
  EXPECT_EQ(stored.row_count(), 0);
}

}  // namespace
}  // namespace dpcurator::server::testing
