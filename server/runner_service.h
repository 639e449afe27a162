#ifndef DPCURATOR_SERVER_RUNNER_SERVICE_H_
#define DPCURATOR_SERVER_RUNNER_SERVICE_H_

// The curator's runner's calls (issue 28; docs/scale-out.md "External
// datasets"). A release on an external dataset is admitted and charged by
// RequestRelease as any other, then waits as a pending job holding its plan.
// The runner, in the curator's cluster, lists the jobs, computes each plan's
// exact statistic over the shards (python/dpcurator) and submits it here;
// the server checks it against the stored plan and noises it with its own
// noise source through the kind's own noise step (the one the in-process
// engine ends with), then stores the artefact for the analyst. Curator
// tokens only (server/auth.cc).

#include <string>
#include <utility>

#include "dpcurator/v1/dpcurator.grpc.pb.h"
#include "server/service.h"

namespace dpcurator::server {

// SHA-256 over (schema bytes || request bytes): the plan's digest, which a
// submission must carry (32 bytes).
std::string PlanDigest(const std::string& schema, const std::string& request);

// Jobs ListPendingJobs returns per call, oldest first.
inline constexpr int kMaxPendingJobsPerList = 100;

class RunnerServiceImpl final : public v1::RunnerService::Service, private EngineServiceBase {
 public:
  RunnerServiceImpl(Store* store, Ledger* ledger, Authorizer* authorizer, Metrics* metrics,
                    EngineSeams seams = {})
      : EngineServiceBase(store, ledger, authorizer, metrics, std::move(seams)) {}

  grpc::Status ListPendingJobs(grpc::ServerContext* context,
                               const v1::ListPendingJobsRequest* request,
                               v1::ListPendingJobsResponse* response) override;
  // Refused, with nothing changed, when the job is unknown or another
  // dataset's (NOT_FOUND, one text for both), not pending (done or failed),
  // the digest is not the plan's, or the statistic's shape is not the
  // plan's (length, a non-finite entry, rows < 0, REPLACE_ONE's n).
  // Otherwise noised, stored and marked DONE in one transaction; the exact
  // statistic is never stored or logged.
  grpc::Status SubmitStatistic(grpc::ServerContext* context,
                               const v1::SubmitStatisticRequest* request,
                               v1::SubmitStatisticResponse* response) override;
  // PENDING -> FAILED, the charge kept. The reason goes to the curator's
  // audit log only; the analyst is told the job failed in the curator's
  // cluster and nothing more.
  grpc::Status FailJob(grpc::ServerContext* context, const v1::FailJobRequest* request,
                       v1::FailJobResponse* response) override;

 private:
  // The dataset, which must be external.
  absl::StatusOr<v1::Dataset> ExternalDataset(const std::string& dataset_id);
  // Everything of SubmitStatistic after the authorisation.
  absl::StatusOr<v1::Release> Submit(const v1::SubmitStatisticRequest& request);
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_RUNNER_SERVICE_H_
