#ifndef DPCURATOR_SERVER_COLLECTION_SERVICE_H_
#define DPCURATOR_SERVER_COLLECTION_SERVICE_H_

#include "dpcurator/v1/dpcurator.grpc.pb.h"
#include "server/auth.h"
#include "server/metrics.h"
#include "server/store.h"

namespace dpcurator::server {

// Local-DP collections: the curator declares the public mechanism, devices
// submit privatised reports (validated, deduplicated, acknowledged after
// commit), analysts download them. No ledger: the guarantee is paid on the
// device and everything downstream is post-processing.
class CollectionServiceImpl final : public v1::CollectionService::Service {
 public:
  // `max_reports_per_token`: reports one device token may store per
  // collection (ServerOptions::max_reports_per_token), >= 1.
  CollectionServiceImpl(Store* store, Authorizer* authorizer, Metrics* metrics,
                        int64_t max_reports_per_token = kDefaultMaxReportsPerToken)
      : store_(store),
        authorizer_(authorizer),
        metrics_(metrics),
        max_reports_per_token_(max_reports_per_token) {}

  grpc::Status CreateCollection(grpc::ServerContext* context,
                                const v1::CreateCollectionRequest* request,
                                v1::Collection* response) override;
  grpc::Status GetCollection(grpc::ServerContext* context, const v1::GetCollectionRequest* request,
                             v1::Collection* response) override;
  grpc::Status CloseCollection(grpc::ServerContext* context,
                               const v1::CloseCollectionRequest* request,
                               v1::Collection* response) override;
  grpc::Status SubmitReports(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::SubmitReportsAck, v1::SubmitReportsRequest>* stream) override;
  grpc::Status DownloadReports(grpc::ServerContext* context,
                               const v1::DownloadReportsRequest* request,
                               grpc::ServerWriter<v1::ReportChunk>* writer) override;

  // Reports per SubmitReports message, at most.
  static constexpr int kMaxReportsPerBatch = 10000;
  // Payload of a download chunk, at most.
  static constexpr int kMaxChunkBytes = 4 << 20;
  // The default per-token quota (docs/privacy.md 2.6 "Report bounds and
  // quotas"): a device holds one record per collection in the LDP model,
  // so 10,000 leaves room for test devices and batched uploads while
  // bounding what one token can add to a collection.
  static constexpr int64_t kDefaultMaxReportsPerToken = 10000;

 private:
  Store* store_;
  Authorizer* authorizer_;
  Metrics* metrics_;
  int64_t max_reports_per_token_;
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_COLLECTION_SERVICE_H_
