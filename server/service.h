#ifndef DPCURATOR_SERVER_SERVICE_H_
#define DPCURATOR_SERVER_SERVICE_H_

#include <exception>
#include <functional>
#include <new>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "dpcurator/v1/dpcurator.grpc.pb.h"
#include "core/privacy/noise_source.h"
#include "server/auth.h"
#include "server/clock.h"
#include "server/ledger.h"
#include "server/memory_budget.h"
#include "server/metrics.h"
#include "server/plans.h"
#include "server/store.h"

namespace dpcurator::server {

// A test seam (as in google/differential-privacy's injected test doubles):
// called with the name of a point on the release path; a non-OK status is
// treated as a failure there. Points: "release.before_rows_read",
// "release.after_rows_read", "session_step.after_rows_read". Production
// servers have none.
using Failpoint = std::function<absl::Status(absl::string_view point)>;

// Where releases and session steps draw their noise (and Poisson sampling
// decisions): one fresh source per computation. Production servers use
// privacy::SecureNoiseSource (OpenSSL); tests of release logic inject a
// seeded or zero-noise source, tests of noise check distributions
// (STYLE.md: test doubles injected through the builder).
using NoiseSourceFactory =
    std::function<absl::StatusOr<std::unique_ptr<privacy::NoiseSource>>()>;
NoiseSourceFactory SecureNoiseSourceFactory();

// The seams of the release path, injected by tests (ServerOptions).
struct EngineSeams {
  Failpoint failpoint;
  NoiseSourceFactory noise_source;  // null: SecureNoiseSourceFactory()
  const Clock* clock = nullptr;     // null: SystemClock (dates artefacts)
  // Issue 36: the server's memory budget (null: none) and its send limit
  // (0: none), checked before admission (server/memory_budget.h).
  MemoryBudget* memory_budget = nullptr;
  int64_t max_message_bytes = 0;
};

// What a client is told when a release or session step failed after private
// rows were read: the object, the incident id, and that the charge stands;
// never the cause (docs/privacy.md 6.1).
grpc::Status IncidentStatus(absl::string_view object, const std::string& object_id,
                            const std::string& incident);

// Runs `body` (returning absl::Status or StatusOr) with every exception
// turned into a status, so that a throw after the rows were read (a
// std::bad_alloc included) takes the same path as any other failure there
// (docs/privacy.md 6.4). The status names the exception's type only, never
// its what(): a library's message could quote a value.
template <typename Body>
auto Guarded(Body body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory (std::bad_alloc was thrown)");
  } catch (const std::exception&) {
    return absl::InternalError("a std::exception was thrown");
  } catch (...) {
    return absl::InternalError("an exception of unknown type was thrown");
  }
}

// RPC handlers. Each one: (1) Authorizer::Check, (2) validation, (3) the
// store or ledger, (4) the engine. The path of a release is visible in three
// hops: RequestRelease -> Ledger::Admit -> ComputeRelease.
class DatasetServiceImpl final : public v1::DatasetService::Service {
 public:
  DatasetServiceImpl(Store* store, Ledger* ledger, Authorizer* authorizer, Metrics* metrics)
      : store_(store), ledger_(ledger), authorizer_(authorizer), metrics_(metrics) {}

  grpc::Status CreateDataset(grpc::ServerContext* context, const v1::CreateDatasetRequest* request,
                             v1::Dataset* response) override;
  grpc::Status UploadRows(grpc::ServerContext* context,
                          grpc::ServerReader<v1::UploadRowsRequest>* reader,
                          v1::UploadRowsResponse* response) override;
  grpc::Status ListDatasets(grpc::ServerContext* context, const v1::ListDatasetsRequest* request,
                            v1::ListDatasetsResponse* response) override;
  grpc::Status DeleteDataset(grpc::ServerContext* context,
                             const v1::DeleteDatasetRequest* request,
                             v1::DeleteDatasetResponse* response) override;
  grpc::Status SetBins(grpc::ServerContext* context, const v1::SetBinsRequest* request,
                       v1::Dataset* response) override;
  grpc::Status SetCategories(grpc::ServerContext* context,
                             const v1::SetCategoriesRequest* request,
                             v1::Dataset* response) override;
  grpc::Status GetBudget(grpc::ServerContext* context, const v1::GetBudgetRequest* request,
                         v1::BudgetReport* response) override;

 private:
  Store* store_;
  Ledger* ledger_;
  Authorizer* authorizer_;
  Metrics* metrics_;
};

// What the release and session services share: the store, the ledger,
// authorisation, metrics and the engine's seams (one copy, not two).
class EngineServiceBase {
 protected:
  EngineServiceBase(Store* store, Ledger* ledger, Authorizer* authorizer, Metrics* metrics,
                    EngineSeams seams)
      : store_(store),
        ledger_(ledger),
        authorizer_(authorizer),
        metrics_(metrics),
        failpoint_(std::move(seams.failpoint)),
        noise_source_(seams.noise_source ? std::move(seams.noise_source)
                                         : SecureNoiseSourceFactory()),
        clock_(seams.clock != nullptr ? seams.clock : &SystemClock::Get()),
        memory_budget_(seams.memory_budget),
        max_message_bytes_(seams.max_message_bytes) {}

  Store* store_;
  Ledger* ledger_;
  Authorizer* authorizer_;
  Metrics* metrics_;
  Failpoint failpoint_;
  NoiseSourceFactory noise_source_;
  const Clock* clock_;
  MemoryBudget* memory_budget_;
  int64_t max_message_bytes_;
};

class ReleaseServiceImpl final : public v1::ReleaseService::Service, private EngineServiceBase {
 public:
  ReleaseServiceImpl(Store* store, Ledger* ledger, Authorizer* authorizer, Metrics* metrics,
                     EngineSeams seams = {})
      : EngineServiceBase(store, ledger, authorizer, metrics, std::move(seams)) {}

  grpc::Status RequestRelease(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                              v1::Release* response) override;
  grpc::Status GetRelease(grpc::ServerContext* context, const v1::GetReleaseRequest* request,
                          v1::Release* response) override;
  grpc::Status ListReleases(grpc::ServerContext* context, const v1::ListReleasesRequest* request,
                            v1::ListReleasesResponse* response) override;

 private:
  // What hop 1 hands to hops 2 and 3.
  struct AdmittedRelease {
    v1::Dataset dataset;
    data::Schema schema;
    ReleasePlan plan;
    Ledger::Admission admission;
    // Its projected peak, taken before admission, held until it returns.
    MemoryBudget::Reservation memory;
  };
  // The three hops of RequestRelease (server/service.cc says what each does).
  // `context` is polled while the release waits for a row-reader slot.
  absl::StatusOr<AdmittedRelease> AdmitRelease(Role role, const Caller& caller,
                                               const v1::ReleaseRequest& request,
                                               const grpc::ServerContextBase* context);
  // `refunded` is set when a failure before any row was read gave the
  // charge back (the one refundable failure, docs/privacy.md 6.1).
  // `incident` gets the id marked on the release before its rows are
  // loaded (Ledger::MarkRowsRead), empty when none was.
  absl::StatusOr<v1::Release> RunReleaseEngine(const AdmittedRelease& admitted, bool* refunded,
                                               std::string* incident);
  // The one path of every failure after the rows were read, thrown or
  // returned: FAILED with the incident (charge kept), counted, logged
  // redacted, and answered with the incident only (docs/privacy.md 6.1).
  absl::Status ReleaseFailedAfterRowsRead(const AdmittedRelease& admitted,
                                          const std::string& incident,
                                          const absl::Status& cause);
  absl::Status DeliverRelease(Role role, const AdmittedRelease& admitted, v1::Release computed,
                              v1::Release* response);
  // An external dataset's release, admitted (kAdmitted) or found pending
  // (kWaiting): the answer with state PENDING and no artefact.
  void PendingRelease(const AdmittedRelease& admitted, v1::Release* response);
};

class SessionServiceImpl final : public v1::SessionService::Service, private EngineServiceBase {
 public:
  SessionServiceImpl(Store* store, Ledger* ledger, Authorizer* authorizer, Metrics* metrics,
                     EngineSeams seams = {})
      : EngineServiceBase(store, ledger, authorizer, metrics, std::move(seams)) {}

  grpc::Status OpenSession(grpc::ServerContext* context, const v1::OpenSessionRequest* request,
                           v1::Session* response) override;
  // K sessions over the parts of a public partition, one admission
  // (plan/partition.h PlanPartitionedSessions, Ledger::OpenPartitionedSessions).
  grpc::Status OpenPartitionedSessions(grpc::ServerContext* context,
                                       const v1::OpenPartitionedSessionsRequest* request,
                                       v1::PartitionedSessions* response) override;
  grpc::Status Step(grpc::ServerContext* context, const v1::SessionStepRequest* request,
                    v1::SessionStepResponse* response) override;
  grpc::Status CloseSession(grpc::ServerContext* context, const v1::CloseSessionRequest* request,
                            v1::Session* response) override;
  grpc::Status GetSession(grpc::ServerContext* context, const v1::GetSessionRequest* request,
                          v1::Session* response) override;
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_SERVICE_H_
