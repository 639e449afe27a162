#ifndef DPCURATOR_CLIENT_CONNECTION_H_
#define DPCURATOR_CLIENT_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli.h"
#include "dpcurator/v1/dpcurator.grpc.pb.h"

namespace dpcurator::client {

// A channel to the curator server plus the caller's token; every call gets a
// deadline, so nothing blocks forever.
class Connection {
 public:
  // TLS unless --insecure: --tls-ca verifies the server (default: the system
  // roots); --tls-cert and --tls-key present a client certificate to a server
  // started with --tls-client-ca.
  static absl::StatusOr<Connection> FromArgs(const ParsedArgs& args);
  static Connection Plaintext(const std::string& address, const std::string& token,
                              std::chrono::seconds deadline = std::chrono::seconds(120));

  // A context carrying the bearer token and the deadline.
  std::unique_ptr<grpc::ClientContext> NewContext() const;
  v1::DatasetService::Stub& datasets() { return *datasets_; }
  v1::ReleaseService::Stub& releases() { return *releases_; }
  v1::SessionService::Stub& sessions() { return *sessions_; }
  v1::CollectionService::Stub& collections() { return *collections_; }
  v1::AdminService::Stub& admin() { return *admin_; }
  // The curator's runner's calls (external datasets, docs/scale-out.md).
  v1::RunnerService::Stub& runner() { return *runner_; }
  const std::string& address() const { return address_; }

 private:
  std::string address_;
  std::string token_;
  std::chrono::seconds deadline_{120};
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<v1::DatasetService::Stub> datasets_;
  std::shared_ptr<v1::ReleaseService::Stub> releases_;
  std::shared_ptr<v1::SessionService::Stub> sessions_;
  std::shared_ptr<v1::CollectionService::Stub> collections_;
  std::shared_ptr<v1::AdminService::Stub> admin_;
  std::shared_ptr<v1::RunnerService::Stub> runner_;
};

// Whether the connection is plaintext: --insecure, unless TLS options say
// otherwise. An option on the command line beats an environment variable
// (explicit --insecure ignores DPCURATOR_TLS_*; an explicit --tls-* ignores
// DPCURATOR_INSECURE); an explicit conflict, or a conflict between
// variables, is an error.
absl::StatusOr<bool> UsePlaintext(const ParsedArgs& args);

// A gRPC status as an absl::Status whose message names the server. An
// UNAUTHENTICATED one says that the token was refused, naming `what` only
// as where (issue 38: a bad token read as a failed dataset name lookup).
absl::Status RpcError(const grpc::Status& status, const std::string& what);

// Initial metadata key the server's UploadRows sends once the stream's
// first message has passed every check that needs no row (the caller's
// role, the dataset, its seal): a client waits for it before reading its
// file. The server spells it in server/service.cc.
inline constexpr char kUploadReadyMetadata[] = "dpc-upload-ready";

// Whether a failed RequestRelease may have been admitted (and so charged):
// only when the call may have reached the ledger and its answer was lost or
// the work failed after admission. A refusal (budget, arguments, key reuse,
// permission, unknown dataset) charged nothing.
bool MayHaveCharged(grpc::StatusCode code);

// A failed RequestRelease of `kind` ("release", "mst release", ...) as an
// error: where it may have been charged, the retry with `idempotency_key`
// that returns the stored release instead of a second charge; otherwise
// that nothing was charged (issue 38: a refusal before admission said to
// retry with the key, as if it had cost something).
absl::Status ReleaseRpcError(const grpc::Status& status, const std::string& kind,
                             const std::string& idempotency_key);

// The dataset `id` as the server lists it (public schema, budget, relation,
// row count where public). `id` may also be a dataset's name when exactly
// one dataset has it (INVALID_ARGUMENT lists the ids otherwise); NotFound
// names the command that lists them.
absl::StatusOr<v1::Dataset> FindDataset(Connection* connection, const std::string& id);

// The id of the dataset `id_or_name` names (FindDataset); an id that is not
// listed (a deleted dataset, whose budget history stays) comes back as it is,
// for the server to answer.
absl::StatusOr<std::string> ResolveDatasetId(Connection* connection,
                                             const std::string& id_or_name);

// List calls come in pages bounded by rows and bytes (server/paging.h):
// these follow next_page_token (next_before_id for the audit log) until
// the listing ends, so callers see every item. A server that hands back a
// token it already gave is an error, not an endless loop.
absl::StatusOr<std::vector<v1::Dataset>> ListAllDatasets(Connection* connection);
absl::StatusOr<std::vector<v1::ReleaseSummary>> ListAllReleases(Connection* connection,
                                                                const std::string& dataset_id);
// The dataset's whole budget report: the totals (the same on every page)
// and every page's events and sessions, in order.
absl::StatusOr<v1::BudgetReport> GetWholeBudget(Connection* connection,
                                                const std::string& dataset_id);
// The newest `limit` audit records (at most 10000), newest first.
absl::StatusOr<std::vector<v1::AuditRecord>> ListNewestAudit(Connection* connection, int limit);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_CONNECTION_H_
