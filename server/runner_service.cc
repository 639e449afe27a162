#include "server/runner_service.h"

#include <openssl/sha.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/privacy/event_codec.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "server/log.h"
#include "server/plans.h"

namespace dpcurator::server {
namespace {

absl::Status DigestMismatch(const std::string& job_id) {
  return absl::InvalidArgumentError(absl::StrCat(
      "the plan digest differs from job '", job_id, "''s plan: the statistic was computed for "
      "another plan. Compute it from this job's schema and request (ListPendingJobs). Nothing "
      "was changed"));
}

}  // namespace

std::string PlanDigest(const std::string& schema, const std::string& request) {
  // One-shot SHA256 (the streaming SHA256_* calls are deprecated in
  // OpenSSL 3); a plan is a few kilobytes.
  const std::string message = absl::StrCat(schema, request);
  std::string digest(SHA256_DIGEST_LENGTH, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(message.data()), message.size(),
         reinterpret_cast<unsigned char*>(digest.data()));
  return digest;
}

absl::StatusOr<v1::Dataset> RunnerServiceImpl::ExternalDataset(const std::string& dataset_id) {
  DPC_ASSIGN_OR_RETURN(v1::Dataset dataset, store_->GetDataset(dataset_id));
  if (!dataset.external()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset '", dataset_id, "' is not external: the server computes its releases from "
        "its uploaded rows, and it has no jobs"));
  }
  return dataset;
}

grpc::Status RunnerServiceImpl::ListPendingJobs(grpc::ServerContext* context,
                                                const v1::ListPendingJobsRequest* request,
                                                v1::ListPendingJobsResponse* response) {
  absl::StatusOr<Role> role = authorizer_->Check(context);
  if (!role.ok()) return ToGrpcStatus(role.status());
  authorizer_->NoteTarget(context, request->dataset_id());
  absl::StatusOr<v1::Dataset> dataset = ExternalDataset(request->dataset_id());
  if (!dataset.ok()) return ToGrpcStatus(dataset.status());
  absl::StatusOr<std::vector<Ledger::Job>> jobs =
      ledger_->ListPendingJobs(dataset->id(), kMaxPendingJobsPerList);
  if (!jobs.ok()) return ToGrpcStatus(jobs.status());
  for (const Ledger::Job& job : *jobs) {
    v1::PendingJob& out = *response->add_jobs();
    out.set_job_id(job.release_id);
    out.set_dataset_id(job.dataset_id);
    out.set_kind(job.plan.kind);
    out.set_schema(job.plan.schema);
    out.set_request(job.plan.request);
    out.set_plan_digest(job.plan.digest);
    out.set_created_unix(job.created_unix);
  }
  return grpc::Status::OK;
}

// The path of a submission, in the order of its refusals (each leaves the
// job as it was): the dataset and the job (unknown or another dataset's:
// one NOT_FOUND), pending, the digest, the plan rebuilt from the job's own
// bytes and checked against the charge, the statistic's shape; then the
// noise, and the artefact stored with the compare-and-set to DONE.
absl::StatusOr<v1::Release> RunnerServiceImpl::Submit(const v1::SubmitStatisticRequest& request) {
  DPC_ASSIGN_OR_RETURN(const v1::Dataset dataset, ExternalDataset(request.dataset_id()));
  DPC_ASSIGN_OR_RETURN(const Ledger::Job job, ledger_->LoadJob(request.job_id(), dataset.id()));
  if (job.status != "PENDING") return JobNotPendingError(job.release_id, job.status);
  if (request.plan_digest() != job.plan.digest) return DigestMismatch(job.release_id);
  // The plan as admitted: the job's stored schema and resolved request,
  // planned again by the code that planned them, and it must come to the
  // event the ledger charged (a server upgraded while the job waited must
  // not noise it under another mechanism).
  v1::TableSchema schema_proto;
  v1::ReleaseRequest resolved;
  if (!schema_proto.ParseFromString(job.plan.schema) ||
      !resolved.ParseFromString(job.plan.request)) {
    return absl::DataLossError(
        absl::StrCat("job '", job.release_id, "''s stored plan does not parse"));
  }
  DPC_ASSIGN_OR_RETURN(const data::Schema schema, SchemaFromProto(schema_proto));
  DPC_ASSIGN_OR_RETURN(const ReleasePlan plan, PlanRelease(resolved, dataset, schema));
  if (!plan.event.has_value() || privacy::EncodeEvent(*plan.event) != job.charged_event) {
    return absl::InternalError(absl::StrCat(
        "job '", job.release_id, "''s plan no longer comes to the mechanism that was charged; "
        "nothing was released. Fail the job (FailJob); the analyst requests it again"));
  }
  const absl::Span<const double> statistic(request.statistic().data(),
                                           request.statistic().size());
  absl::StatusOr<v1::Release> computed;
  if (!plan.external_tables.empty()) {
    // mst, aim (issue 41): the exact tables of every clique the plan fixed;
    // the recipe runs here over them, as over a stored dataset's rows.
    DPC_RETURN_IF_ERROR(CheckSubmittedTablesShape(plan, dataset, statistic, request.rows()));
    // The recipe's model and tables are held while it runs: reserved as a
    // stored dataset's release reserves them (it was checked against the
    // whole budget at admission; running work may hold the rest now, and
    // then the job stays pending and the runner submits again later).
    MemoryBudget::Reservation memory;
    if (memory_budget_ != nullptr) {
      DPC_ASSIGN_OR_RETURN(memory, memory_budget_->Reserve(plan.footprint));
    }
    DPC_ASSIGN_OR_RETURN(std::unique_ptr<privacy::NoiseSource> noise, noise_source_());
    computed = Guarded([&] {
      return ComputeRecipeReleaseFromTables(plan, dataset, schema, statistic, request.rows(),
                                            job.release_id, job.epsilon_alone, noise.get());
    });
  } else {
    DPC_ASSIGN_OR_RETURN(std::unique_ptr<PreparedEngine> engine,
                         Guarded([&] { return PrepareRelease(plan, schema); }));
    DPC_RETURN_IF_ERROR(
        CheckSubmittedShape(plan, *engine, dataset, schema, statistic, request.rows()));
    DPC_ASSIGN_OR_RETURN(std::unique_ptr<privacy::NoiseSource> noise, noise_source_());
    computed = Guarded([&] {
      return ComputeReleaseFromStatistic(plan, *engine, dataset, schema, statistic,
                                         request.rows(), job.release_id, job.epsilon_alone,
                                         noise.get());
    });
  }
  if (!computed.ok()) return computed.status();
  v1::Release release = *std::move(computed);
  release.set_idempotency_key(job.idempotency_key);
  release.set_created_unix(clock_->UnixNow());
  release.set_state(v1::RELEASE_STATE_DONE);
  DPC_RETURN_IF_ERROR(ledger_->CompleteJob(job.release_id, dataset.id(), job.plan.digest,
                                           release.SerializeAsString()));
  metrics_->RecordRelease(plan.kind_name(), dataset.id());
  LogEvent(LogLevel::kInfo, "release")
      .Str("role", "curator")
      .Str("dataset", dataset.id())
      .Str("release", job.release_id)
      .Str("kind", plan.kind_name())
      .Bool("submitted", true)
      .Num("epsilon", job.epsilon_alone);
  return release;
}

grpc::Status RunnerServiceImpl::SubmitStatistic(grpc::ServerContext* context,
                                                const v1::SubmitStatisticRequest* request,
                                                v1::SubmitStatisticResponse* response) {
  absl::StatusOr<Role> role = authorizer_->Check(context);
  if (!role.ok()) return ToGrpcStatus(role.status());
  authorizer_->NoteTarget(context, request->job_id());
  absl::StatusOr<v1::Release> release = Submit(*request);
  if (!release.ok()) return ToGrpcStatus(release.status());
  // The envelope and the state: the artefact is the analyst's to fetch.
  *response->mutable_release() = *std::move(release);
  response->mutable_release()->clear_artefact();
  return grpc::Status::OK;
}

grpc::Status RunnerServiceImpl::FailJob(grpc::ServerContext* context,
                                        const v1::FailJobRequest* request,
                                        v1::FailJobResponse* response) {
  (void)response;
  absl::StatusOr<Role> role = authorizer_->Check(context);
  if (!role.ok()) return ToGrpcStatus(role.status());
  authorizer_->NoteTarget(context, request->job_id());
  // The reason is the curator's (e.g. the shard and line that did not
  // parse): the curator-facing audit log keeps it, nothing else does.
  authorizer_->NoteDetail(context, absl::StrCat("reason=", request->reason()));
  absl::StatusOr<v1::Dataset> dataset = ExternalDataset(request->dataset_id());
  if (!dataset.ok()) return ToGrpcStatus(dataset.status());
  absl::Status failed = ledger_->FailJob(request->job_id(), dataset->id());
  if (!failed.ok()) return ToGrpcStatus(failed);
  // The curator's cluster may have read rows: the charge stands.
  metrics_->RecordFailureAfterRowsRead("release");
  LogEvent(LogLevel::kInfo, "job_failed")
      .Str("dataset", dataset->id())
      .Str("release", request->job_id());
  return grpc::Status::OK;
}

}  // namespace dpcurator::server
