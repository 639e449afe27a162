#include "server/collection_service.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/collection.h"
#include "server/log.h"

namespace dpcurator::server {
grpc::Status CollectionServiceImpl::CreateCollection(grpc::ServerContext* context,
                                                     const v1::CreateCollectionRequest* request,
                                                     v1::Collection* response) {
  if (auto role = authorizer_->Check(context); !role.ok()) return ToGrpcStatus(role.status());
  if (request->name().empty() || request->name().size() > 200) {
    return ToGrpcStatus(absl::InvalidArgumentError("collection name must be 1 to 200 characters"));
  }
  v1::CollectionParams resolved;
  auto mechanism = MechanismFromParams(request->params(), &resolved);
  if (!mechanism.ok()) return ToGrpcStatus(mechanism.status());
  auto collection = store_->CreateCollection(request->name(), resolved, mechanism->dimension(),
                                             mechanism->noise_scale(), mechanism->regularizer(),
                                             mechanism->cost_exponent());
  if (!collection.ok()) return ToGrpcStatus(collection.status());
  *response = *std::move(collection);
  authorizer_->NoteTarget(context, response->id());
  LogEvent(LogLevel::kInfo, "collection_created")
      .Str("collection", response->id())
      .Str("mechanism", resolved.mechanism())
      .Num("epsilon", resolved.epsilon())
      .Int("dimension", response->dimension());
  return grpc::Status::OK;
}

grpc::Status CollectionServiceImpl::GetCollection(grpc::ServerContext* context,
                                                  const v1::GetCollectionRequest* request,
                                                  v1::Collection* response) {
  if (auto role = authorizer_->Check(context); !role.ok()) return ToGrpcStatus(role.status());
  authorizer_->NoteTarget(context, request->collection_id());
  auto collection = store_->GetCollection(request->collection_id());
  if (!collection.ok()) return ToGrpcStatus(collection.status());
  *response = *std::move(collection);
  return grpc::Status::OK;
}

grpc::Status CollectionServiceImpl::CloseCollection(grpc::ServerContext* context,
                                                    const v1::CloseCollectionRequest* request,
                                                    v1::Collection* response) {
  if (auto role = authorizer_->Check(context); !role.ok()) return ToGrpcStatus(role.status());
  authorizer_->NoteTarget(context, request->collection_id());
  auto collection = store_->CloseCollection(request->collection_id());
  if (!collection.ok()) return ToGrpcStatus(collection.status());
  *response = *std::move(collection);
  LogEvent(LogLevel::kInfo, "collection_closed")
      .Str("collection", response->id())
      .Int("reports", response->report_count());
  return grpc::Status::OK;
}

grpc::Status CollectionServiceImpl::SubmitReports(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::SubmitReportsAck, v1::SubmitReportsRequest>* stream) {
  // The quota is per device token: its principal id (never the token).
  auto caller = authorizer_->Caller(context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  v1::SubmitReportsRequest batch;
  std::string collection_id;
  int64_t batch_index = 0;
  int64_t accepted = 0;
  int64_t rejected = 0;
  int64_t duplicates = 0;
  while (stream->Read(&batch)) {
    // The token is checked again for every message: revoked during the
    // stream, it stores nothing more (issue 24, item 4).
    if (absl::Status valid = authorizer_->StillAuthorized(context, batch_index); !valid.ok()) {
      return ToGrpcStatus(valid);
    }
    if (!batch.collection_id().empty()) {
      if (!collection_id.empty() && batch.collection_id() != collection_id) {
        return ToGrpcStatus(absl::InvalidArgumentError(
            "a SubmitReports stream carries reports of one collection only"));
      }
      collection_id = batch.collection_id();
      authorizer_->NoteTarget(context, collection_id);
    }
    if (collection_id.empty()) {
      return ToGrpcStatus(
          absl::InvalidArgumentError("the first SubmitReports message must name the collection"));
    }
    if (batch.reports_size() > kMaxReportsPerBatch) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("batch ", batch_index, " has ", batch.reports_size(),
                       " reports; send at most ", kMaxReportsPerBatch, " per message")));
    }
    // Stored and committed before the ack is written: an acknowledged report
    // survives a crash.
    auto ack =
        store_->IngestReports(collection_id, batch, batch_index, caller->id, max_reports_per_token_);
    if (!ack.ok()) return ToGrpcStatus(ack.status());
    accepted += ack->accepted();
    rejected += ack->rejections_size();
    duplicates += ack->duplicates();
    // One audit row per stream, with the counts so far (the stream may end
    // with an error after some batches were committed).
    authorizer_->NoteDetail(context, absl::StrCat("batches=", batch_index + 1,
                                                  " accepted=", accepted, " duplicates=",
                                                  duplicates, " rejected=", rejected));
    metrics_->RecordReports(collection_id, *ack);
    if (!stream->Write(*ack)) break;  // client gone; what was committed stays
    ++batch_index;
  }
  // Counts only: never a report id, a value or a rejection's message.
  LogEvent(LogLevel::kInfo, "reports_submitted")
      .Str("collection", collection_id)
      .Int("batches", batch_index)
      .Int("accepted", accepted)
      .Int("rejected", rejected)
      .Int("duplicates", duplicates);
  return grpc::Status::OK;
}

grpc::Status CollectionServiceImpl::DownloadReports(grpc::ServerContext* context,
                                                    const v1::DownloadReportsRequest* request,
                                                    grpc::ServerWriter<v1::ReportChunk>* writer) {
  if (auto role = authorizer_->Check(context); !role.ok()) return ToGrpcStatus(role.status());
  authorizer_->NoteTarget(context, request->collection_id());
  auto collection = store_->GetCollection(request->collection_id());
  if (!collection.ok()) return ToGrpcStatus(collection.status());
  const int dimension = std::max(1, collection->dimension());
  // Leave room for the collection header (schema) in the first chunk.
  const int header = static_cast<int>(collection->ByteSizeLong()) + 1024;
  const int rows_per_chunk =
      std::max(1, (kMaxChunkBytes - header) / (dimension * static_cast<int>(sizeof(double))));
  std::string after;
  bool first = true;
  int64_t total = 0;
  while (true) {
    v1::ReportChunk chunk;
    std::vector<double> values;
    std::string last;
    auto rows = store_->ReadReportPage(collection->id(), dimension, after, rows_per_chunk,
                                       &values, &last);
    if (!rows.ok()) return ToGrpcStatus(rows.status());
    if (*rows == 0 && !first) break;
    if (first) *chunk.mutable_collection() = *collection;
    chunk.set_rows(*rows);
    chunk.mutable_values()->Add(values.begin(), values.end());
    if (!writer->Write(chunk)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "client went away during download");
    }
    first = false;
    total += *rows;
    if (*rows < rows_per_chunk) break;
    after = std::move(last);
  }
  // No ledger charge: the reports are already local-DP (post-processing).
  LogEvent(LogLevel::kInfo, "reports_downloaded")
      .Str("collection", collection->id())
      .Int("rows", total);
  return grpc::Status::OK;
}

}  // namespace dpcurator::server
