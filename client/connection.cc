#include "client/connection.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"

namespace dpcurator::client {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

absl::StatusOr<std::string> ReadPem(const ParsedArgs& args, const std::string& option) {
  std::ifstream input(args.Get(option));
  if (!input) {
    return absl::NotFoundError(absl::StrCat("cannot open --", option, " '", args.Get(option), "'"));
  }
  std::stringstream buffer;
  buffer << input.rdbuf();
  return buffer.str();
}

}  // namespace

absl::StatusOr<bool> UsePlaintext(const ParsedArgs& args) {
  bool tls_explicit = false;
  bool tls_from_env = false;
  for (const char* option : {"tls-ca", "tls-cert", "tls-key"}) {
    if (!args.Has(option)) continue;
    (args.FromEnvironment(option) ? tls_from_env : tls_explicit) = true;
  }
  if (!args.Flag("insecure")) return false;
  const bool insecure_explicit = !args.FromEnvironment("insecure");
  // An option on the command line beats a variable; two of a kind conflict.
  if (insecure_explicit && tls_explicit) {
    return absl::InvalidArgumentError("--insecure is plaintext: drop the --tls-* options");
  }
  if (!insecure_explicit && tls_explicit) return false;
  if (!insecure_explicit && tls_from_env) {
    return absl::InvalidArgumentError(
        "DPCURATOR_INSECURE asks for plaintext but DPCURATOR_TLS_CA, DPCURATOR_TLS_CERT or "
        "DPCURATOR_TLS_KEY is set too: unset one of them");
  }
  return true;
}

absl::StatusOr<Connection> Connection::FromArgs(const ParsedArgs& args) {
  Connection connection;
  connection.address_ = args.Has("server") ? args.Get("server")
                                           : EnvOr("DPCURATOR_SERVER", "127.0.0.1:50051");
  connection.token_ = args.Has("token") ? args.Get("token") : EnvOr("DPCURATOR_TOKEN", "");
  if (connection.token_.empty()) {
    return absl::InvalidArgumentError(
        "no token: pass --token or set DPCURATOR_TOKEN (ask the curator for one)");
  }
  auto deadline = args.GetInt("deadline");
  if (!deadline.ok() || *deadline <= 0) {
    return absl::InvalidArgumentError("--deadline must be a positive number of seconds");
  }
  connection.deadline_ = std::chrono::seconds(*deadline);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  auto plaintext = UsePlaintext(args);
  if (!plaintext.ok()) return plaintext.status();
  if (*plaintext) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    if (args.Has("tls-ca")) {
      auto ca = ReadPem(args, "tls-ca");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *std::move(ca);
    }
    if (args.Has("tls-cert") != args.Has("tls-key")) {
      return absl::InvalidArgumentError(
          "a client certificate needs both --tls-cert and --tls-key");
    }
    if (args.Has("tls-cert")) {
      auto cert = ReadPem(args, "tls-cert");
      if (!cert.ok()) return cert.status();
      auto key = ReadPem(args, "tls-key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(256 << 20);
  connection.channel_ = grpc::CreateCustomChannel(connection.address_, credentials, channel_args);
  connection.datasets_ = v1::DatasetService::NewStub(connection.channel_);
  connection.releases_ = v1::ReleaseService::NewStub(connection.channel_);
  connection.sessions_ = v1::SessionService::NewStub(connection.channel_);
  connection.collections_ = v1::CollectionService::NewStub(connection.channel_);
  connection.admin_ = v1::AdminService::NewStub(connection.channel_);
  connection.runner_ = v1::RunnerService::NewStub(connection.channel_);
  return connection;
}

Connection Connection::Plaintext(const std::string& address, const std::string& token,
                                 std::chrono::seconds deadline) {
  Connection connection;
  connection.address_ = address;
  connection.token_ = token;
  connection.deadline_ = deadline;
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(256 << 20);
  connection.channel_ =
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), channel_args);
  connection.datasets_ = v1::DatasetService::NewStub(connection.channel_);
  connection.releases_ = v1::ReleaseService::NewStub(connection.channel_);
  connection.sessions_ = v1::SessionService::NewStub(connection.channel_);
  connection.collections_ = v1::CollectionService::NewStub(connection.channel_);
  connection.admin_ = v1::AdminService::NewStub(connection.channel_);
  connection.runner_ = v1::RunnerService::NewStub(connection.channel_);
  return connection;
}

std::unique_ptr<grpc::ClientContext> Connection::NewContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->AddMetadata("authorization", absl::StrCat("Bearer ", token_));
  context->set_deadline(std::chrono::system_clock::now() + deadline_);
  return context;
}

absl::Status RpcError(const grpc::Status& status, const std::string& what) {
  std::string message = absl::StrCat(what, ": ", status.error_message());
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    // The token, not the call, is the problem, whatever call met it first:
    // the name lookup before most commands made a bad token read as a
    // dataset problem ("list datasets: unknown or revoked token", issue 38).
    message = absl::StrCat("the token was refused: ", status.error_message(),
                           " (check --token or DPCURATOR_TOKEN; refused at: ", what, ")");
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    absl::StrAppend(&message, " (is the server running and reachable? --server, --insecure)");
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    absl::StrAppend(&message, " (raise --deadline for large datasets)");
  }
  return FromServer(absl::Status(static_cast<absl::StatusCode>(status.error_code()), message));
}

bool MayHaveCharged(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::DATA_LOSS:
      return true;
    default:
      return false;
  }
}

absl::Status ReleaseRpcError(const grpc::Status& status, const std::string& kind,
                             const std::string& idempotency_key) {
  if (MayHaveCharged(status.error_code())) {
    return RpcError(status, absl::StrCat(kind,
                                         " failed (the request may have been charged: retry "
                                         "with --key ",
                                         idempotency_key,
                                         " to get the stored release instead of a second "
                                         "charge)"));
  }
  return RpcError(status, absl::StrCat(kind, " refused (nothing was charged)"));
}

absl::StatusOr<v1::Dataset> FindDataset(Connection* connection, const std::string& id) {
  DPC_ASSIGN_OR_RETURN(std::vector<v1::Dataset> datasets, ListAllDatasets(connection));
  for (auto& dataset : datasets) {
    if (dataset.id() == id) return std::move(dataset);
  }
  // Not an id: a name, which must name one dataset (`datasets create`
  // refuses a name in use, but an older server may hold duplicates).
  std::vector<const v1::Dataset*> named;
  for (const auto& dataset : datasets) {
    if (dataset.name() == id) named.push_back(&dataset);
  }
  if (named.size() == 1) return *named[0];
  if (named.size() > 1) {
    std::string ids;
    for (const auto* dataset : named) absl::StrAppend(&ids, ids.empty() ? "" : ", ", dataset->id());
    return absl::InvalidArgumentError(absl::StrCat(
        "the name '", id, "' names ", named.size(), " datasets (", ids, "); give the id"));
  }
  return absl::NotFoundError(absl::StrCat(
      "no dataset with id or name '", id, "'; `dpcurator datasets list` shows them"));
}

absl::StatusOr<std::string> ResolveDatasetId(Connection* connection, const std::string& id) {
  // An id as the server makes them ("ds_" and 32 hex digits) is passed on
  // as it is: no extra ListDatasets call (and audit row) per request.
  if (id.size() == 35 && absl::StartsWith(id, "ds_") &&
      id.find_first_not_of("0123456789abcdef", 3) == std::string::npos) {
    return id;
  }
  auto found = FindDataset(connection, id);
  if (found.ok()) return found->id();
  // Not listed: a deleted dataset's id still has its ledger (budget), and
  // the server's own answer is the authority for anything else.
  if (found.status().code() == absl::StatusCode::kNotFound) return id;
  return found.status();
}

namespace {

// Calls `list(token, &next)` from the empty token until `next` comes back
// empty. A repeated token would loop forever: refused.
template <typename List>
absl::Status FollowPages(const std::string& what, List list) {
  absl::flat_hash_set<std::string> seen;
  std::string token;
  while (true) {
    std::string next;
    DPC_RETURN_IF_ERROR(list(token, &next));
    if (next.empty()) return absl::OkStatus();
    if (!seen.insert(next).second) {
      return absl::InternalError(
          absl::StrCat(what, ": the server repeated a page token; the listing is incomplete"));
    }
    token = std::move(next);
  }
}

}  // namespace

absl::StatusOr<std::vector<v1::Dataset>> ListAllDatasets(Connection* connection) {
  std::vector<v1::Dataset> datasets;
  DPC_RETURN_IF_ERROR(FollowPages(
      "list datasets", [&](const std::string& token, std::string* next) -> absl::Status {
        v1::ListDatasetsRequest request;
        request.set_page_token(token);
        v1::ListDatasetsResponse page;
        auto context = connection->NewContext();
        grpc::Status status = connection->datasets().ListDatasets(context.get(), request, &page);
        if (!status.ok()) return RpcError(status, "list datasets");
        for (auto& dataset : *page.mutable_datasets()) datasets.push_back(std::move(dataset));
        *next = page.next_page_token();
        return absl::OkStatus();
      }));
  return datasets;
}

absl::StatusOr<std::vector<v1::ReleaseSummary>> ListAllReleases(Connection* connection,
                                                                const std::string& dataset_id) {
  std::vector<v1::ReleaseSummary> releases;
  DPC_RETURN_IF_ERROR(FollowPages(
      "list releases", [&](const std::string& token, std::string* next) -> absl::Status {
        v1::ListReleasesRequest request;
        request.set_dataset_id(dataset_id);
        request.set_page_token(token);
        v1::ListReleasesResponse page;
        auto context = connection->NewContext();
        grpc::Status status = connection->releases().ListReleases(context.get(), request, &page);
        if (!status.ok()) return RpcError(status, "list releases");
        for (auto& release : *page.mutable_releases()) releases.push_back(std::move(release));
        *next = page.next_page_token();
        return absl::OkStatus();
      }));
  return releases;
}

absl::StatusOr<v1::BudgetReport> GetWholeBudget(Connection* connection,
                                                const std::string& dataset_id) {
  v1::BudgetReport whole;
  bool first = true;
  DPC_RETURN_IF_ERROR(FollowPages(
      "budget", [&](const std::string& token, std::string* next) -> absl::Status {
        v1::GetBudgetRequest request;
        request.set_dataset_id(dataset_id);
        request.set_page_token(token);
        v1::BudgetReport page;
        auto context = connection->NewContext();
        grpc::Status status = connection->datasets().GetBudget(context.get(), request, &page);
        if (!status.ok()) return RpcError(status, "budget");
        *next = page.next_page_token();
        if (first) {
          // The totals, from the first page (the ledger's running state).
          whole = std::move(page);
          whole.clear_next_page_token();
          first = false;
          return absl::OkStatus();
        }
        for (auto& event : *page.mutable_events()) *whole.add_events() = std::move(event);
        for (auto& session : *page.mutable_sessions()) *whole.add_sessions() = std::move(session);
        return absl::OkStatus();
      }));
  return whole;
}

absl::StatusOr<std::vector<v1::AuditRecord>> ListNewestAudit(Connection* connection, int limit) {
  std::vector<v1::AuditRecord> records;
  int64_t before_id = 0;
  while (static_cast<int>(records.size()) < limit) {
    v1::ListAuditRequest request;
    request.set_limit(limit - static_cast<int>(records.size()));
    request.set_before_id(before_id);
    v1::ListAuditResponse page;
    auto context = connection->NewContext();
    grpc::Status status = connection->admin().ListAudit(context.get(), request, &page);
    if (!status.ok()) return RpcError(status, "audit");
    for (auto& record : *page.mutable_records()) records.push_back(std::move(record));
    if (page.next_before_id() == 0) break;
    // Ids only decrease: a server that does not move on is an error.
    if (before_id != 0 && page.next_before_id() >= before_id) {
      return absl::InternalError("audit: the server repeated a page; the listing is incomplete");
    }
    before_id = page.next_before_id();
  }
  return records;
}

}  // namespace dpcurator::client
