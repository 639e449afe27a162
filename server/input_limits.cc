#include "server/input_limits.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/data/schema.h"
#include "core/release/dp_sgd.h"
#include "core/release/kernel_witness.h"
#include "core/privacy/grid_gaussian.h"
#include "server/collection_service.h"

namespace dpcurator::server {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The largest request gRPC accepts (ServerOptions::max_message_bytes):
// fields of bulk numbers and pixels are bounded by it alone, since the
// handler checks their exact length against the session or schema.
constexpr int64_t kMessageBytes = int64_t{64} << 20;
// Columns of one schema. Beyond any table this server is meant for, and
// what keeps per-column work (MST's pairs, issue 24 item 4) finite.
constexpr int64_t kMaxSchemaColumns = 4096;
// Categories (and aliases) of one column: a marginal table of one column
// cannot have more cells than this anyway (core/release/marginals.h,
// kMaxCellsPerClique).
constexpr int64_t kMaxCategories = int64_t{1} << 16;
// = kMaxRowsPerMessage and kMaxImagesPerMessage in server/service.cc,
// whose refusals use the same words.
constexpr int64_t kMaxRowsPerMessage = 100000;
constexpr int64_t kMaxImagesPerMessage = 100000;
// Coordinates of one LDP report: the encoded dimension of a collection's
// schema (numeric columns plus one-hot levels), which the store checks
// exactly.
constexpr int64_t kMaxReportDimension = int64_t{1} << 16;

// Fields with a limit of their own, by full proto name. A new repeated or
// text field that needs more than the defaults is listed here, with why.
const absl::flat_hash_map<std::string, FieldLimit>& Overrides() {
  static const auto* overrides = new absl::flat_hash_map<std::string, FieldLimit>{
      // Schemas (CreateDataset, CreateCollection).
      {"dpcurator.v1.TableSchema.columns", {kMaxCallerStringBytes, kMaxSchemaColumns}},
      {"dpcurator.v1.ColumnSchema.categories", {kMaxCallerStringBytes, kMaxCategories}},
      {"dpcurator.v1.ColumnSchema.aliases", {kMaxCallerStringBytes, kMaxCategories}},
      // Above data::kMaxAtoms and kMaxBinEdges: the schema check refuses
      // with its own message.
      {"dpcurator.v1.ColumnSchema.atoms", {kMaxCallerStringBytes, 4 * data::kMaxBinEdges}},
      {"dpcurator.v1.ColumnSchema.bins", {kMaxCallerStringBytes, 4 * data::kMaxBinEdges}},
      // Uploads: rows of cells (one per column), image batches.
      {"dpcurator.v1.UploadRowsRequest.rows", {kMaxCallerStringBytes, kMaxRowsPerMessage}},
      {"dpcurator.v1.Row.cells", {kMaxCallerStringBytes, kMaxSchemaColumns}},
      {"dpcurator.v1.ImageBatch.pixels", {kMessageBytes, kMaxRepeatedEntries}},
      {"dpcurator.v1.ImageBatch.label_levels", {kMaxCallerStringBytes, kMaxImagesPerMessage}},
      // Sessions: the declared network and kernel, each step's query.
      {"dpcurator.v1.DpSgdParams.hidden",
       {kMaxCallerStringBytes, 8 * release::kMaxDpSgdHiddenLayers}},
      {"dpcurator.v1.DpSgdStepQuery.parameters",
       {kMaxCallerStringBytes, release::kMaxDpSgdParameters}},
      {"dpcurator.v1.KernelWitnessParams.bandwidths",
       {kMaxCallerStringBytes, 4 * release::KernelWitnessKind::kMaxBandwidths}},
      // M x d floats: bounded by the message; the session checks M and d.
      {"dpcurator.v1.KernelWitnessQuery.points",
       {kMaxCallerStringBytes, kMessageBytes / static_cast<int64_t>(sizeof(float))}},
      {"dpcurator.v1.KernelWitnessQuery.labels",
       {kMaxCallerStringBytes, release::KernelWitnessKind::kMaxQueryPoints}},
      // LDP reports.
      {"dpcurator.v1.SubmitReportsRequest.reports",
       {kMaxCallerStringBytes, CollectionServiceImpl::kMaxReportsPerBatch}},
      {"dpcurator.v1.Report.values", {kMaxCallerStringBytes, kMaxReportDimension}},
      // A runner's exact statistic: (features + 1) x classes doubles, at
      // most the grid Gaussian's dimension; the job's plan checks it exactly.
      {"dpcurator.v1.SubmitStatisticRequest.statistic",
       {kMaxCallerStringBytes, privacy::kMaxGridGaussianDimension}},
  };
  return *overrides;
}

bool IsText(const FieldDescriptor& field) {
  return field.cpp_type() == FieldDescriptor::CPPTYPE_STRING;
}

absl::Status TooBig(const FieldDescriptor& field, size_t size, int64_t limit) {
  return absl::InvalidArgumentError(absl::StrCat("field ", field.full_name(), " is ", size,
                                                 " bytes; at most ", limit, " bytes"));
}

absl::Status Check(const Message& message) {
  const Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);  // set fields only
  std::string scratch;
  for (const FieldDescriptor* field : fields) {
    const FieldLimit limit = LimitOf(*field);
    if (field->is_repeated()) {
      const int size = reflection->FieldSize(message, field);
      if (size > limit.max_entries) {
        return absl::InvalidArgumentError(absl::StrCat("field ", field->full_name(), " has ", size,
                                                       " entries; send at most ",
                                                       limit.max_entries, " per message"));
      }
      if (IsText(*field)) {
        for (int i = 0; i < size; ++i) {
          const std::string& value =
              reflection->GetRepeatedStringReference(message, field, i, &scratch);
          if (static_cast<int64_t>(value.size()) > limit.max_value_bytes) {
            return TooBig(*field, value.size(), limit.max_value_bytes);
          }
        }
      } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        for (int i = 0; i < size; ++i) {
          if (absl::Status status = Check(reflection->GetRepeatedMessage(message, field, i));
              !status.ok()) {
            return status;
          }
        }
      }
    } else if (IsText(*field)) {
      const std::string& value = reflection->GetStringReference(message, field, &scratch);
      if (static_cast<int64_t>(value.size()) > limit.max_value_bytes) {
        return TooBig(*field, value.size(), limit.max_value_bytes);
      }
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (absl::Status status = Check(reflection->GetMessage(message, field)); !status.ok()) {
        return status;
      }
    }
  }
  return absl::OkStatus();
}

constexpr absl::string_view kPackagePrefix = "/dpcurator.v1.";

// The request type of a dpcurator.v1 method ("/dpcurator.v1.S/M"), or null.
const google::protobuf::Descriptor* RequestType(absl::string_view method) {
  if (!absl::StartsWith(method, kPackagePrefix)) return nullptr;
  method.remove_prefix(1);
  const size_t slash = method.find('/');
  if (slash == absl::string_view::npos) return nullptr;
  const auto* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      std::string(method.substr(0, slash)));
  if (service == nullptr) return nullptr;
  const auto* rpc = service->FindMethodByName(std::string(method.substr(slash + 1)));
  return rpc == nullptr ? nullptr : rpc->input_type();
}

class InputLimitsInterceptor final : public grpc::experimental::Interceptor {
 public:
  InputLimitsInterceptor(Authorizer* authorizer, grpc::experimental::ServerRpcInfo* info)
      : authorizer_(authorizer), info_(info), request_type_(RequestType(info->method())) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (request_type_ != nullptr &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // The sync server hands us the generated request object of the
      // method's input type (checked by descriptor below), which derives
      // from Message; null when nothing was received.
      auto* message = static_cast<Message*>(methods->GetRecvMessage());
      if (message != nullptr && message->GetDescriptor() == request_type_) {
        if (!refused_) {
          absl::Status status = CheckInputLimits(*message);
          if (!status.ok()) {
            refused_ = true;
            // Audited with a row of its own, naming the method and the
            // code (a later message of a stream may follow stored rows);
            // the call-quota and refusal back-off bound a token's rate.
            authorizer_->Refuse(info_->server_context(), ToGrpcStatus(status),
                                /*before_handler=*/false);
          }
        }
        // The offending message and all later ones of the call.
        if (refused_) message->Clear();
      }
    }
    methods->Proceed();
  }

 private:
  Authorizer* authorizer_;
  grpc::experimental::ServerRpcInfo* info_;
  const google::protobuf::Descriptor* request_type_;
  bool refused_ = false;
};

class InputLimitsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit InputLimitsInterceptorFactory(Authorizer* authorizer) : authorizer_(authorizer) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new InputLimitsInterceptor(authorizer_, info);
  }

 private:
  Authorizer* authorizer_;
};

}  // namespace

FieldLimit LimitOf(const FieldDescriptor& field) {
  const auto& overrides = Overrides();
  auto it = overrides.find(field.full_name());
  return it == overrides.end() ? FieldLimit{} : it->second;
}

absl::Status CheckInputLimits(const Message& message) { return Check(message); }

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeInputLimitsInterceptorFactory(Authorizer* authorizer) {
  return std::make_unique<InputLimitsInterceptorFactory>(authorizer);
}

}  // namespace dpcurator::server
