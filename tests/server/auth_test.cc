// Authentication and authorisation, table-driven over every protected RPC:
// missing, unknown and revoked tokens are UNAUTHENTICATED, roles outside
// AllowedRoles(method) are PERMISSION_DENIED, refused calls have no side
// effects, and the health service answers without a token.

#include <grpcpp/generic/generic_stub.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <set>

#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/data/demo.h"
#include "proto/convert.h"
#include "server/auth.h"
#include "server/metrics.h"
#include "server/plans.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;

// How a call presents itself.
struct Credentials {
  std::string label;
  std::optional<std::string> authorization;  // nullopt: no metadata at all
};

struct Stubs {
  std::unique_ptr<v1::DatasetService::Stub> datasets;
  std::unique_ptr<v1::ReleaseService::Stub> releases;
  std::unique_ptr<v1::SessionService::Stub> sessions;
  std::unique_ptr<v1::CollectionService::Stub> collections;
  std::unique_ptr<v1::AdminService::Stub> admin;
  std::unique_ptr<v1::RunnerService::Stub> runner;
};

// Ids the calls refer to, so that an authorised call would really act.
struct Targets {
  std::string released_dataset;  // sealed, one release
  std::string open_dataset;      // rows, no release yet
  std::string deletable_dataset;  // the one DeleteDataset deletes
  std::string release_id;
  std::string session_id;  // set by the first authorised OpenSession
  std::string collection_id;           // open local-DP collection
  std::string closable_collection_id;  // the one CloseCollection closes
  std::string revocable_token_id;      // the one RevokeToken revokes
  std::string external_dataset;        // external, two pending jobs:
  std::string failable_job;            //   the one FailJob fails
  std::string submittable_job;         //   the one SubmitStatistic completes
  std::string submittable_digest;
  int64_t statistic_length = 0;        // of the submittable job's plan
  int key_counter = 0;
};

using RpcCall = std::function<grpc::Status(Stubs&, grpc::ClientContext*, Targets&)>;

// One entry per RPC in ProtectedMethods(); AuthTable.CoversEveryProtectedMethod
// fails when a method is added without an entry here.
const std::map<std::string, RpcCall>& RpcTable() {
  static const auto* table = new std::map<std::string, RpcCall>{
      {"/dpcurator.v1.DatasetService/CreateDataset",
       [](Stubs& s, grpc::ClientContext* c, Targets&) {
         v1::CreateDatasetRequest request;
         request.set_name("auth-created");
         *request.mutable_schema() = DemoSchemaProto();
         request.mutable_budget()->set_epsilon(1.0);
         request.mutable_budget()->set_delta(1e-5);
         v1::Dataset response;
         return s.datasets->CreateDataset(c, request, &response);
       }},
      {"/dpcurator.v1.DatasetService/UploadRows",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::UploadRowsResponse response;
         auto writer = s.datasets->UploadRows(c, &response);
         v1::UploadRowsRequest message;
         message.set_dataset_id(t.open_dataset);
         for (auto& row : DemoRows(data::GenerateDemoTable(10, 99))) {
           *message.add_rows() = std::move(row);
         }
         writer->Write(message);
         writer->WritesDone();
         return writer->Finish();
       }},
      {"/dpcurator.v1.DatasetService/ListDatasets",
       [](Stubs& s, grpc::ClientContext* c, Targets&) {
         v1::ListDatasetsResponse response;
         return s.datasets->ListDatasets(c, v1::ListDatasetsRequest(), &response);
       }},
      {"/dpcurator.v1.DatasetService/DeleteDataset",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::DeleteDatasetRequest request;
         request.set_dataset_id(t.deletable_dataset);
         v1::DeleteDatasetResponse response;
         return s.datasets->DeleteDataset(c, request, &response);
       }},
      {"/dpcurator.v1.DatasetService/SetBins",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         // The stored schema as it is: a change of nothing.
         v1::SetBinsRequest request;
         request.set_dataset_id(t.released_dataset);
         *request.mutable_schema() = DemoSchemaProto();
         v1::Dataset response;
         return s.datasets->SetBins(c, request, &response);
       }},
      {"/dpcurator.v1.DatasetService/SetCategories",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         // The stored schema as it is (no open column): a change of nothing.
         v1::SetCategoriesRequest request;
         request.set_dataset_id(t.released_dataset);
         *request.mutable_schema() = DemoSchemaProto();
         v1::Dataset response;
         return s.datasets->SetCategories(c, request, &response);
       }},
      {"/dpcurator.v1.DatasetService/GetBudget",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::GetBudgetRequest request;
         request.set_dataset_id(t.released_dataset);
         v1::BudgetReport response;
         return s.datasets->GetBudget(c, request, &response);
       }},
      {"/dpcurator.v1.ReleaseService/RequestRelease",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::ReleaseRequest request;
         request.set_dataset_id(t.open_dataset);
         request.set_idempotency_key(absl::StrCat("auth-key-", ++t.key_counter));
         request.set_epsilon(0.5);
         request.mutable_rff_embedding()->set_num_frequencies(50);
         v1::Release response;
         return s.releases->RequestRelease(c, request, &response);
       }},
      {"/dpcurator.v1.ReleaseService/GetRelease",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::GetReleaseRequest request;
         request.set_release_id(t.release_id);
         v1::Release response;
         return s.releases->GetRelease(c, request, &response);
       }},
      {"/dpcurator.v1.ReleaseService/ListReleases",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::ListReleasesRequest request;
         request.set_dataset_id(t.released_dataset);
         v1::ListReleasesResponse response;
         return s.releases->ListReleases(c, request, &response);
       }},
      {"/dpcurator.v1.SessionService/OpenSession",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::OpenSessionRequest request;
         request.set_dataset_id(t.open_dataset);
         request.set_idempotency_key(absl::StrCat("auth-session-", ++t.key_counter));
         request.mutable_params()->set_steps(3);
         request.mutable_params()->set_sampling_rate(0.5);
         request.mutable_params()->set_noise_multiplier(2.0);
         request.mutable_params()->mutable_rff_embedding()->set_num_frequencies(50);
         v1::Session response;
         grpc::Status status = s.sessions->OpenSession(c, request, &response);
         if (status.ok() && t.session_id.empty()) t.session_id = response.id();
         return status;
       }},
      {"/dpcurator.v1.SessionService/OpenPartitionedSessions",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::OpenPartitionedSessionsRequest request;
         request.set_dataset_id(t.open_dataset);
         request.set_idempotency_key(absl::StrCat("auth-partition-", ++t.key_counter));
         request.mutable_params()->set_steps(3);
         request.mutable_params()->set_sampling_rate(0.5);
         request.mutable_params()->set_noise_multiplier(2.0);
         request.mutable_params()->mutable_rff_embedding()->set_num_frequencies(50);
         request.mutable_partition()->set_column(DemoSchemaProto().label());
         v1::PartitionedSessions response;
         return s.sessions->OpenPartitionedSessions(c, request, &response);
       }},
      {"/dpcurator.v1.SessionService/Step",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::SessionStepRequest request;
         request.set_session_id(t.session_id);
         request.set_step(0);
         v1::SessionStepResponse response;
         return s.sessions->Step(c, request, &response);
       }},
      {"/dpcurator.v1.SessionService/CloseSession",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::CloseSessionRequest request;
         request.set_session_id(t.session_id);
         v1::Session response;
         return s.sessions->CloseSession(c, request, &response);
       }},
      {"/dpcurator.v1.SessionService/GetSession",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::GetSessionRequest request;
         request.set_session_id(t.session_id);
         v1::Session response;
         return s.sessions->GetSession(c, request, &response);
       }},
      {"/dpcurator.v1.CollectionService/CreateCollection",
       [](Stubs& s, grpc::ClientContext* c, Targets&) {
         v1::CreateCollectionRequest request;
         request.set_name("auth-collection");
         *request.mutable_params() = LdpCollectionParams();
         v1::Collection response;
         return s.collections->CreateCollection(c, request, &response);
       }},
      {"/dpcurator.v1.CollectionService/GetCollection",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::GetCollectionRequest request;
         request.set_collection_id(t.collection_id);
         v1::Collection response;
         return s.collections->GetCollection(c, request, &response);
       }},
      {"/dpcurator.v1.CollectionService/CloseCollection",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::CloseCollectionRequest request;
         request.set_collection_id(t.closable_collection_id);
         v1::Collection response;
         return s.collections->CloseCollection(c, request, &response);
       }},
      {"/dpcurator.v1.CollectionService/SubmitReports",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         auto stream = s.collections->SubmitReports(c);
         v1::SubmitReportsRequest batch;
         batch.set_collection_id(t.collection_id);
         v1::Report* report = batch.add_reports();
         report->set_report_id(std::string(16, static_cast<char>(++t.key_counter)));
         for (int j = 0; j < LdpCollectionDimension(); ++j) report->add_values(0.5);
         stream->Write(batch);
         stream->WritesDone();
         v1::SubmitReportsAck ack;
         while (stream->Read(&ack)) {
         }
         return stream->Finish();
       }},
      {"/dpcurator.v1.CollectionService/DownloadReports",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::DownloadReportsRequest request;
         request.set_collection_id(t.collection_id);
         auto reader = s.collections->DownloadReports(c, request);
         v1::ReportChunk chunk;
         while (reader->Read(&chunk)) {
         }
         return reader->Finish();
       }},
      {"/dpcurator.v1.AdminService/CreateToken",
       [](Stubs& s, grpc::ClientContext* c, Targets&) {
         v1::CreateTokenRequest request;
         request.set_role(v1::ROLE_ANALYST);
         request.set_label("auth-table");
         v1::CreateTokenResponse response;
         return s.admin->CreateToken(c, request, &response);
       }},
      {"/dpcurator.v1.AdminService/RevokeToken",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::RevokeTokenRequest request;
         request.set_token_id(t.revocable_token_id);
         v1::TokenInfo response;
         return s.admin->RevokeToken(c, request, &response);
       }},
      {"/dpcurator.v1.AdminService/ListTokens",
       [](Stubs& s, grpc::ClientContext* c, Targets&) {
         v1::ListTokensResponse response;
         return s.admin->ListTokens(c, v1::ListTokensRequest(), &response);
       }},
      {"/dpcurator.v1.RunnerService/ListPendingJobs",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::ListPendingJobsRequest request;
         request.set_dataset_id(t.external_dataset);
         v1::ListPendingJobsResponse response;
         return s.runner->ListPendingJobs(c, request, &response);
       }},
      {"/dpcurator.v1.RunnerService/SubmitStatistic",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::SubmitStatisticRequest request;
         request.set_job_id(t.submittable_job);
         request.set_dataset_id(t.external_dataset);
         request.set_plan_digest(t.submittable_digest);
         for (int64_t i = 0; i < t.statistic_length; ++i) request.add_statistic(0.0);
         request.set_rows(0);
         v1::SubmitStatisticResponse response;
         return s.runner->SubmitStatistic(c, request, &response);
       }},
      {"/dpcurator.v1.RunnerService/FailJob",
       [](Stubs& s, grpc::ClientContext* c, Targets& t) {
         v1::FailJobRequest request;
         request.set_job_id(t.failable_job);
         request.set_dataset_id(t.external_dataset);
         request.set_reason("auth table");
         v1::FailJobResponse response;
         return s.runner->FailJob(c, request, &response);
       }},
      {"/dpcurator.v1.AdminService/ListAudit",
       [](Stubs& s, grpc::ClientContext* c, Targets&) {
         v1::ListAuditResponse response;
         return s.admin->ListAudit(c, v1::ListAuditRequest(), &response);
       }},
  };
  return *table;
}

const char* TokenOf(Role role) {
  switch (role) {
    case Role::kCurator:
      return kCuratorToken;
    case Role::kAnalyst:
      return kAnalystToken;
    case Role::kDevice:
      return kDeviceToken;
  }
  return "";
}

TEST(AuthTable, CoversEveryProtectedMethod) {
  std::set<std::string> protected_methods(ProtectedMethods().begin(), ProtectedMethods().end());
  std::set<std::string> tested;
  for (const auto& [method, call] : RpcTable()) tested.insert(method);
  EXPECT_EQ(tested, protected_methods)
      << "add an RpcTable() entry for each new protected method";
}

// Every RPC of the wire API has an auth rule: a method without one is
// refused to everyone, which must be a decision, not an accident.
TEST(AuthTable, EveryWireRpcHasARule) {
  std::set<std::string> protected_methods(ProtectedMethods().begin(), ProtectedMethods().end());
  const google::protobuf::FileDescriptor* file = v1::Dataset::descriptor()->file();
  std::set<std::string> declared;
  for (int s = 0; s < file->service_count(); ++s) {
    const auto* service = file->service(s);
    for (int m = 0; m < service->method_count(); ++m) {
      declared.insert(absl::StrCat("/", service->full_name(), "/", service->method(m)->name()));
    }
  }
  EXPECT_EQ(declared, protected_methods)
      << "add the new RPCs to server/auth.cc's Rules() and to RpcTable() here";
  for (const auto& method : ProtectedMethods()) {
    EXPECT_FALSE(AllowedRoles(method).empty()) << method;
    EXPECT_FALSE(IsPublicMethod(method)) << method;
  }
  EXPECT_TRUE(IsPublicMethod("/grpc.health.v1.Health/Check"));
  EXPECT_TRUE(AllowedRoles("/dpcurator.v1.DatasetService/NoSuchMethod").empty());
}

// Issue 36, item 1: only the two methods the health service has are public;
// any other path under its prefix needs a token, like any unknown path, and
// is named "unknown" wherever the server records it.
TEST(AuthTable, OnlyTheHealthServicesOwnMethodsArePublic) {
  EXPECT_TRUE(IsPublicMethod("/grpc.health.v1.Health/Check"));
  EXPECT_TRUE(IsPublicMethod("/grpc.health.v1.Health/Watch"));
  for (const char* path : {"/grpc.health.v1.Health/", "/grpc.health.v1.Health/Check2",
                           "/grpc.health.v1.Health/0123456789abcdef",
                           "/grpc.health.v1.Health/Check/", "/grpc.health.v1.Health", ""}) {
    EXPECT_FALSE(IsPublicMethod(path)) << path;
    EXPECT_EQ(Metrics::MethodLabel(path), "unknown") << path;
  }
  EXPECT_EQ(Metrics::MethodLabel("/grpc.health.v1.Health/Watch"), "Health/Watch");
  EXPECT_EQ(Metrics::MethodLabel("/dpcurator.v1.ReleaseService/RequestRelease"),
            "ReleaseService/RequestRelease");
  EXPECT_EQ(Metrics::MethodLabel(std::string(8000, 'x')), "unknown");
  // A valid token on an unknown path: refused, and the path is not echoed.
  TokenRegistry tokens;
  ASSERT_TRUE(tokens.Add(Role::kAnalyst, kAnalystToken).ok());
  Authorizer authorizer(std::move(tokens));
  const std::string bearer = absl::StrCat("Bearer ", kAnalystToken);
  const std::multimap<grpc::string_ref, grpc::string_ref> metadata = {
      {"authorization", grpc::string_ref(bearer)}};
  const std::string path = "/dpcurator.v1.ReleaseService/\x1b[2Jxyz";
  Authorizer::Decision decision = authorizer.Decide(path, metadata);
  EXPECT_EQ(decision.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(decision.status.error_message().find("xyz"), std::string::npos)
      << decision.status.error_message();
}

TEST(AuthTable, RolesMatchTheWireContract) {
  using R = std::vector<Role>;
  EXPECT_EQ(AllowedRoles("/dpcurator.v1.DatasetService/CreateDataset"), R{Role::kCurator});
  EXPECT_EQ(AllowedRoles("/dpcurator.v1.DatasetService/UploadRows"), R{Role::kCurator});
  EXPECT_EQ(AllowedRoles("/dpcurator.v1.ReleaseService/RequestRelease"), R{Role::kAnalyst});
  EXPECT_EQ(AllowedRoles("/dpcurator.v1.ReleaseService/GetRelease"), R{Role::kAnalyst});
  EXPECT_EQ(AllowedRoles("/dpcurator.v1.CollectionService/SubmitReports"), R{Role::kDevice});
  EXPECT_EQ(AllowedRoles("/dpcurator.v1.CollectionService/DownloadReports"), R{Role::kAnalyst});
  EXPECT_EQ(AllowedRoles("/dpcurator.v1.CollectionService/CreateCollection"), R{Role::kCurator});
  EXPECT_EQ(AllowedRoles("/dpcurator.v1.CollectionService/CloseCollection"), R{Role::kCurator});
  for (const char* method : {"CreateToken", "RevokeToken", "ListTokens", "ListAudit"}) {
    EXPECT_EQ(AllowedRoles(absl::StrCat("/dpcurator.v1.AdminService/", method)), R{Role::kCurator})
        << method;
  }
  // Devices only submit LDP reports (and read a collection's public
  // parameters); no dataset, release or session RPC is theirs.
  for (const auto& [method, call] : RpcTable()) {
    if (absl::StartsWith(method, "/dpcurator.v1.CollectionService/")) continue;
    const auto roles = AllowedRoles(method);
    EXPECT_EQ(std::count(roles.begin(), roles.end(), Role::kDevice), 0) << method;
  }
}

class AuthTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    channel_ = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
    stubs_.datasets = v1::DatasetService::NewStub(channel_);
    stubs_.releases = v1::ReleaseService::NewStub(channel_);
    stubs_.sessions = v1::SessionService::NewStub(channel_);
    stubs_.collections = v1::CollectionService::NewStub(channel_);
    stubs_.admin = v1::AdminService::NewStub(channel_);
    stubs_.runner = v1::RunnerService::NewStub(channel_);
    v1::CreateTokenResponse revocable;
    ASSERT_TRUE(CreateToken(v1::ROLE_ANALYST, "revocable", &revocable).ok());
    targets_.revocable_token_id = revocable.info().token_id();

    v1::Collection collection;
    ASSERT_TRUE(CreateLdpCollection("auth-open", &collection).ok());
    targets_.collection_id = collection.id();
    ASSERT_TRUE(CreateLdpCollection("auth-closable", &collection).ok());
    targets_.closable_collection_id = collection.id();

    v1::Dataset released;
    ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &released, "released").ok());
    ASSERT_TRUE(UploadDemoRows(released.id(), 200, 1).ok());
    v1::Release release;
    grpc::Status status = RequestRelease(RffRequest(released.id(), 0.5, "setup-key"), &release);
    ASSERT_TRUE(status.ok()) << status.error_message();
    v1::Dataset open;
    ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &open, "open").ok());
    ASSERT_TRUE(UploadDemoRows(open.id(), 200, 2).ok());
    targets_.released_dataset = released.id();
    targets_.open_dataset = open.id();
    targets_.release_id = release.id();
    v1::Dataset deletable;
    ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &deletable, "deletable").ok());
    targets_.deletable_dataset = deletable.id();
    SetUpExternalJobs();
  }

  // An external dataset with two pending jobs (docs/scale-out.md), and the
  // length of the statistic its plans take.
  void SetUpExternalJobs() {
    v1::CreateDatasetRequest create;
    create.set_name("external");
    *create.mutable_schema() = DemoSchemaProto();
    create.mutable_budget()->set_epsilon(10.0);
    create.mutable_budget()->set_delta(1e-5);
    create.set_external(true);
    v1::Dataset external;
    auto curator = Curator();
    auto create_context = curator.NewContext();
    ASSERT_TRUE(curator.datasets().CreateDataset(create_context.get(), create, &external).ok());
    targets_.external_dataset = external.id();
    v1::Release pending;
    ASSERT_TRUE(RequestRelease(RffRequest(external.id(), 0.5, "job-1"), &pending).ok());
    targets_.failable_job = pending.id();
    ASSERT_TRUE(RequestRelease(RffRequest(external.id(), 0.5, "job-2"), &pending).ok());
    targets_.submittable_job = pending.id();
    v1::ListPendingJobsRequest list;
    list.set_dataset_id(external.id());
    v1::ListPendingJobsResponse jobs;
    auto list_context = curator.NewContext();
    ASSERT_TRUE(curator.runner().ListPendingJobs(list_context.get(), list, &jobs).ok());
    for (const v1::PendingJob& job : jobs.jobs()) {
      if (job.job_id() != targets_.submittable_job) continue;
      targets_.submittable_digest = job.plan_digest();
      v1::TableSchema schema_proto;
      v1::ReleaseRequest resolved;
      ASSERT_TRUE(schema_proto.ParseFromString(job.schema()));
      ASSERT_TRUE(resolved.ParseFromString(job.request()));
      absl::StatusOr<data::Schema> schema = SchemaFromProto(schema_proto);
      ASSERT_TRUE(schema.ok());
      auto engine = BindingFor(resolved.kind_case())->Prepare(resolved, *schema);
      ASSERT_TRUE(engine.ok());
      targets_.statistic_length = (*engine)->StatisticLength(schema->num_classes());
    }
    ASSERT_GT(targets_.statistic_length, 0);
  }

  grpc::Status Call(const std::string& method, const std::optional<std::string>& authorization) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (authorization.has_value()) context.AddMetadata("authorization", *authorization);
    return RpcTable().at(method)(stubs_, &context, targets_);
  }

  // What the server holds, as the curator sees it.
  struct Snapshot {
    int datasets = 0;
    int64_t open_rows = 0;
    bool open_sealed = false;
    int released_events = 0;
    int open_events = 0;
    int released_releases = 0;
    int open_releases = 0;
    int open_sessions = 0;
    int tokens = 0;  // valid and revoked
    int revoked_tokens = 0;
    int pending_jobs = 0;
    bool operator==(const Snapshot&) const = default;
    friend void PrintTo(const Snapshot& s, std::ostream* os) {
      *os << "{datasets=" << s.datasets << " open_rows=" << s.open_rows
          << " open_sealed=" << s.open_sealed << " released_events=" << s.released_events
          << " open_events=" << s.open_events << " released_releases=" << s.released_releases
          << " open_releases=" << s.open_releases << " open_sessions=" << s.open_sessions
          << " tokens=" << s.tokens << " revoked_tokens=" << s.revoked_tokens
          << " pending_jobs=" << s.pending_jobs << "}";
    }
  };
  Snapshot Take() {
    Snapshot snapshot;
    auto curator = Curator();
    auto context = curator.NewContext();
    v1::ListDatasetsResponse list;
    EXPECT_TRUE(curator.datasets().ListDatasets(context.get(), v1::ListDatasetsRequest(), &list).ok());
    snapshot.datasets = list.datasets_size();
    auto tokens_context = curator.NewContext();
    v1::ListTokensRequest tokens_request;
    tokens_request.set_include_revoked(true);
    v1::ListTokensResponse tokens;
    EXPECT_TRUE(curator.admin().ListTokens(tokens_context.get(), tokens_request, &tokens).ok());
    snapshot.tokens = tokens.tokens_size();
    for (const auto& token : tokens.tokens()) snapshot.revoked_tokens += token.revoked_unix() != 0;
    v1::ListPendingJobsRequest jobs_request;
    jobs_request.set_dataset_id(targets_.external_dataset);
    v1::ListPendingJobsResponse jobs;
    auto jobs_context = curator.NewContext();
    EXPECT_TRUE(curator.runner().ListPendingJobs(jobs_context.get(), jobs_request, &jobs).ok());
    snapshot.pending_jobs = jobs.jobs_size();
    for (const auto& d : list.datasets()) {
      if (d.id() == targets_.open_dataset) {
        snapshot.open_rows = d.row_count();
        snapshot.open_sealed = d.sealed();
      }
    }
    for (const auto& [id, events, releases] :
         {std::tuple{targets_.released_dataset, &snapshot.released_events,
                     &snapshot.released_releases},
          std::tuple{targets_.open_dataset, &snapshot.open_events, &snapshot.open_releases}}) {
      v1::BudgetReport report;
      auto budget_context = curator.NewContext();
      v1::GetBudgetRequest budget_request;
      budget_request.set_dataset_id(id);
      EXPECT_TRUE(curator.datasets().GetBudget(budget_context.get(), budget_request, &report).ok());
      *events = report.events_size();
      if (id == targets_.open_dataset) snapshot.open_sessions = report.sessions_size();
      auto list_context = curator.NewContext();
      v1::ListReleasesRequest list_request;
      list_request.set_dataset_id(id);
      v1::ListReleasesResponse releases_response;
      EXPECT_TRUE(curator.releases()
                      .ListReleases(list_context.get(), list_request, &releases_response)
                      .ok());
      *releases = releases_response.releases_size();
    }
    return snapshot;
  }

  std::shared_ptr<grpc::Channel> channel_;
  Stubs stubs_;
  Targets targets_;
};

TEST_F(AuthTest, RefusedCallsAreRefusedWithTheRightCodeAndChangeNothing) {
  std::vector<Credentials> unauthenticated = {
      {"no token", std::nullopt},
      {"unknown token", absl::StrCat("Bearer ", kUnknownToken)},
      {"token without Bearer", std::string(kCuratorToken)},
      {"empty bearer", std::string("Bearer ")},
  };
  // Revoked tokens of every role, made and revoked through the admin RPCs:
  // for each method, a revoked token of an allowed role is among them.
  for (v1::Role role : {v1::ROLE_CURATOR, v1::ROLE_ANALYST, v1::ROLE_DEVICE}) {
    v1::CreateTokenResponse created;
    ASSERT_TRUE(CreateToken(role, "to be revoked", &created).ok());
    ASSERT_TRUE(RevokeToken(created.info().token_id()).ok());
    unauthenticated.push_back({absl::StrCat("revoked ", v1::Role_Name(role), " token"),
                               absl::StrCat("Bearer ", created.token())});
  }

  const Snapshot before = Take();
  EXPECT_EQ(before.datasets, 4);  // released, open, deletable, external
  EXPECT_EQ(before.pending_jobs, 2);
  EXPECT_EQ(before.open_rows, 200);
  EXPECT_EQ(before.released_events, 1);
  EXPECT_EQ(before.revoked_tokens, 3);

  int refused = 0;
  for (const auto& method : ProtectedMethods()) {
    if (RpcTable().count(method) == 0) {
      ADD_FAILURE() << method << " has no entry in RpcTable()";
      continue;
    }
    for (const auto& credentials : unauthenticated) {
      grpc::Status status = Call(method, credentials.authorization);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << method << " with " << credentials.label << ": " << status.error_message();
      ++refused;
    }
    const std::vector<Role> allowed = AllowedRoles(method);
    for (Role role : {Role::kCurator, Role::kAnalyst, Role::kDevice}) {
      if (std::find(allowed.begin(), allowed.end(), role) != allowed.end()) continue;
      grpc::Status status = Call(method, absl::StrCat("Bearer ", TokenOf(role)));
      EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
          << method << " as " << RoleName(role) << ": " << status.error_message();
      EXPECT_THAT(status.error_message(), ::testing::HasSubstr(RoleName(role))) << method;
      ++refused;
    }
  }
  // At least: 11 methods x 4 unauthenticated + device on 11 + analyst on 2 +
  // curator on 2 + 4 (sessions).
  EXPECT_GE(refused, 11 * 4 + 11 + 2 + 2 + 4);

  EXPECT_EQ(Take(), before) << "a refused call changed the server's state";
}

TEST_F(AuthTest, AllowedRolesPassAuthorisation) {
  for (const auto& method : ProtectedMethods()) {
    if (RpcTable().count(method) == 0) {
      ADD_FAILURE() << method << " has no entry in RpcTable()";
      continue;
    }
    for (Role role : AllowedRoles(method)) {
      grpc::Status status = Call(method, absl::StrCat("Bearer ", TokenOf(role)));
      EXPECT_TRUE(status.ok()) << method << " as " << RoleName(role) << ": "
                               << status.error_code() << " " << status.error_message();
    }
  }
  const Snapshot after = Take();
  EXPECT_EQ(after.datasets, 4);  // one CreateDataset, one DeleteDataset
  EXPECT_EQ(after.pending_jobs, 0);  // one failed, one submitted
  EXPECT_EQ(after.open_rows, 210);        // one UploadRows of 10 rows
  // One RequestRelease, one session reservation (closed: its unused steps
  // are refunded by an appended event) and one partitioned open.
  EXPECT_GE(after.open_events, 3);
  // OpenSession's one, and OpenPartitionedSessions' one per declared label
  // category (the demo schema's label has two).
  EXPECT_EQ(after.open_sessions, 1 + 2);
  EXPECT_TRUE(after.open_sealed);
  // One CreateToken and one RevokeToken (of the revocable token).
  EXPECT_EQ(after.tokens, 3 + 1 + 1);  // file tokens, revocable, created
  EXPECT_EQ(after.revoked_tokens, 1);
}

// grpc.health.v1.Health/Check through a generic stub: Debian's gRPC ships no
// generated health stub, so the request (empty HealthCheckRequest) and the
// response (field 1 = ServingStatus, SERVING = 1 -> bytes 08 01) are encoded
// by hand.
grpc::Status HealthCheck(const std::shared_ptr<grpc::Channel>& channel, std::string* body) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::ByteBuffer request;  // empty message
  grpc::Slice empty("");
  request = grpc::ByteBuffer(&empty, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                 &response, [&done](grpc::Status status) { done.set_value(std::move(status)); });
  grpc::Status status = done.get_future().get();
  body->clear();
  std::vector<grpc::Slice> slices;
  if (status.ok() && response.Dump(&slices).ok()) {
    for (const auto& slice : slices) {
      body->append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  return status;
}

TEST_F(AuthTest, HealthAnswersServingWithoutToken) {
  std::string body;
  grpc::Status status = HealthCheck(channel_, &body);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_EQ(body, std::string("\x08\x01", 2));
}


// Defence in depth (issue 24, item 2): audit targets and details are cut to
// Authorizer::kMaxAuditTextBytes at a UTF-8 boundary, and a refusal made
// before or after the verdict (the input-limits interceptor) holds.
TEST(AuthorizerTest, AuditTextIsBoundedAndRefusalsHoldInEitherOrder) {
  std::vector<CallRecord> written;
  Authorizer authorizer(TokenRegistry(), [&written](const CallRecord& r) { written.push_back(r); });
  const Principal analyst{"file:0123456789abcdef", Role::kAnalyst};
  const std::string method = "/dpcurator.v1.DatasetService/GetBudget";
  grpc::ServerContext first;
  authorizer.Record(&first, method, {grpc::Status::OK, analyst});
  std::string target = "a";
  for (int i = 0; i < 500; ++i) target += "\xc3\xa9";  // e-acute, 2 bytes
  authorizer.NoteTarget(&first, target);
  authorizer.NoteDetail(&first, std::string(10000, 'd'));
  ASSERT_TRUE(authorizer.Check(&first).ok());
  authorizer.Refuse(&first, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "too big"),
                    /*before_handler=*/false);
  EXPECT_EQ(authorizer.Check(&first).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(authorizer.Refusal(&first).has_value());
  authorizer.Finish(&first, *authorizer.Refusal(&first));
  ASSERT_EQ(written.size(), 1u);
  // 256 would split a character: cut to 255, a whole prefix.
  EXPECT_EQ(written[0].target, target.substr(0, 255));
  EXPECT_EQ(written[0].detail.size(), Authorizer::kMaxAuditTextBytes);
  EXPECT_EQ(written[0].code, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  // A refusal that comes before the verdict is merged into it.
  grpc::ServerContext second;
  authorizer.Refuse(&second, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "too big"),
                    /*before_handler=*/true);
  authorizer.Record(&second, method, {grpc::Status::OK, analyst});
  EXPECT_EQ(authorizer.Check(&second).status().code(), absl::StatusCode::kInvalidArgument);
  // An authentication refusal is not replaced by a later one.
  grpc::ServerContext third;
  authorizer.Record(&third, method,
                    {grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no"), std::nullopt});
  authorizer.Refuse(&third, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "too big"),
                    /*before_handler=*/true);
  EXPECT_EQ(authorizer.Check(&third).status().code(), absl::StatusCode::kUnauthenticated);
  authorizer.Finish(&second, grpc::Status::OK);
  authorizer.Finish(&third, grpc::Status::OK);
}

// Issue 24, item 1: a file token's principal is a digest of the token, so
// revoking analyst A by deleting its line does not hand A's releases and
// sessions to analyst B, who moves onto A's line number. Failed on the
// line-number ids ("file:<line>"): B could read, step and close A's work.
class FileTokenIdentityTest : public ServerTest {
 protected:
  static constexpr char kAnalystA[] = "analyst-A-0123456789abcdef";
  static constexpr char kAnalystB[] = "analyst-B-0123456789abcdef";

  // Restarts the server on a token file of these lines.
  void RestartWithTokens(const std::vector<std::string>& lines) {
    StopServer();
    std::ofstream tokens(tokens_path_, std::ios::trunc);
    for (const auto& line : lines) tokens << line << "\n";
    tokens.close();
    StartServer();
  }
  // A's work: a dataset, a release and an open session with one step.
  void MakeWorkOfA(v1::Dataset* dataset, v1::Release* release, v1::Session* session) {
    ASSERT_TRUE(CreateDataset(20.0, 1e-5, v1::ADD_REMOVE, dataset).ok());
    ASSERT_TRUE(UploadDemoRows(dataset->id(), 200, 4).ok());
    client::Connection a = WithToken(kAnalystA);
    {
      auto context = a.NewContext();
      grpc::Status status = a.releases().RequestRelease(
          context.get(), RffRequest(dataset->id(), 1.0, "a-release-key"), release);
      ASSERT_TRUE(status.ok()) << status.error_message();
    }
    v1::OpenSessionRequest open;
    open.set_dataset_id(dataset->id());
    open.set_idempotency_key("a-session-key");
    open.mutable_params()->set_steps(3);
    open.mutable_params()->set_sampling_rate(0.1);
    open.mutable_params()->set_noise_multiplier(2.0);
    open.mutable_params()->mutable_rff_embedding()->set_num_frequencies(10);
    auto context = a.NewContext();
    grpc::Status status = a.sessions().OpenSession(context.get(), open, session);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
};

TEST(FileTokenIdTest, IsADomainSeparatedDigestPrefixNotAPosition) {
  const std::string id = FileTokenId("analyst-A-0123456789abcdef");
  ASSERT_EQ(id.size(), 5u + 16u);
  EXPECT_TRUE(absl::StartsWith(id, "file:"));
  EXPECT_EQ(id, FileTokenId("analyst-A-0123456789abcdef"));  // a function of the token
  EXPECT_NE(id, FileTokenId("analyst-B-0123456789abcdef"));
  // Not a prefix of the stored digest (domain separation).
  EXPECT_NE(id.substr(5), absl::BytesToHexString(TokenDigest("analyst-A-0123456789abcdef"))
                              .substr(0, 16));
  EXPECT_TRUE(IsLegacyFileTokenId("file:2"));
  EXPECT_TRUE(IsLegacyFileTokenId("file:123"));
  EXPECT_FALSE(IsLegacyFileTokenId(id));
  EXPECT_FALSE(IsLegacyFileTokenId("file:"));
  EXPECT_FALSE(IsLegacyFileTokenId("tok_12"));
}

TEST_F(FileTokenIdentityTest, RevokingADoesNotGiveAsWorkToTheTokenOnAsLine) {
  RestartWithTokens({absl::StrCat("curator ", kCuratorToken), absl::StrCat("analyst ", kAnalystA),
                     absl::StrCat("analyst ", kAnalystB)});
  v1::Dataset dataset;
  v1::Release release;
  v1::Session session;
  MakeWorkOfA(&dataset, &release, &session);
  if (HasFatalFailure()) return;
  // Revoke A the documented way: delete its line and restart. B moves from
  // line 3 to line 2, A's old line.
  RestartWithTokens({absl::StrCat("curator ", kCuratorToken), absl::StrCat("analyst ", kAnalystB)});
  client::Connection a = WithToken(kAnalystA);
  {
    auto context = a.NewContext();
    v1::GetReleaseRequest get;
    get.set_release_id(release.id());
    v1::Release got;
    EXPECT_EQ(a.releases().GetRelease(context.get(), get, &got).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  client::Connection b = WithToken(kAnalystB);
  {
    auto context = b.NewContext();
    v1::GetReleaseRequest get;
    get.set_release_id(release.id());
    v1::Release got;
    grpc::Status status = b.releases().GetRelease(context.get(), get, &got);
    EXPECT_FALSE(status.ok()) << "B fetched A's release";
    EXPECT_FALSE(absl::StrContains(got.SerializeAsString(), release.id()));
  }
  {
    auto context = b.NewContext();
    v1::GetSessionRequest get;
    get.set_session_id(session.id());
    v1::Session got;
    EXPECT_FALSE(b.sessions().GetSession(context.get(), get, &got).ok()) << "B read A's session";
  }
  {
    auto context = b.NewContext();
    v1::SessionStepRequest step;
    step.set_session_id(session.id());
    step.set_step(0);
    v1::SessionStepResponse got;
    EXPECT_FALSE(b.sessions().Step(context.get(), step, &got).ok()) << "B stepped A's session";
  }
  {
    auto context = b.NewContext();
    v1::CloseSessionRequest close;
    close.set_session_id(session.id());
    v1::Session got;
    EXPECT_FALSE(b.sessions().CloseSession(context.get(), close, &got).ok())
        << "B closed A's session";
  }
  {
    auto context = b.NewContext();
    v1::ListReleasesRequest list;
    list.set_dataset_id(dataset.id());
    v1::ListReleasesResponse got;
    grpc::Status status = b.releases().ListReleases(context.get(), list, &got);
    if (status.ok()) {
      for (const auto& summary : got.releases()) {
        EXPECT_NE(summary.id(), release.id()) << "B lists A's release";
        EXPECT_NE(summary.idempotency_key(), "a-release-key");
      }
    }
  }
  {
    // A's idempotency key, sent by B, is B's own key: no replay of A's release.
    auto context = b.NewContext();
    v1::Release got;
    grpc::Status status = b.releases().RequestRelease(
        context.get(), RffRequest(dataset.id(), 1.0, "a-release-key"), &got);
    if (status.ok()) {
      EXPECT_NE(got.id(), release.id());
      EXPECT_FALSE(got.replayed());
    }
  }
  // A's session is still A's: open (the curator sees it in the budget).
  v1::BudgetReport report;
  {
    client::Connection curator = Curator();
    auto context = curator.NewContext();
    v1::GetBudgetRequest request;
    request.set_dataset_id(dataset.id());
    grpc::Status status = curator.datasets().GetBudget(context.get(), request, &report);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  bool found = false;
  for (const auto& s : report.sessions()) {
    if (s.id() == session.id()) {
      found = true;
      EXPECT_EQ(s.state(), "OPEN");
    }
  }
  EXPECT_TRUE(found);
}

// Ledgers from before issue 24 hold "file:<line>" owners: the server refuses
// them until --adopt_line_owners maps each line to the token now on it.
TEST_F(FileTokenIdentityTest, LegacyLineOwnersAreRefusedUntilAdopted) {
  const std::vector<std::string> lines = {absl::StrCat("curator ", kCuratorToken),
                                          absl::StrCat("analyst ", kAnalystA),
                                          absl::StrCat("analyst ", kAnalystB)};
  RestartWithTokens(lines);
  v1::Dataset dataset;
  v1::Release release;
  v1::Session session;
  MakeWorkOfA(&dataset, &release, &session);
  if (HasFatalFailure()) return;
  StopServer();
  // Turn A's ownership back into what the old server wrote: line 2.
  {
    auto opened = OpenDatabase(db_path_);
    ASSERT_TRUE(opened.ok()) << opened.status();
    auto db = opened->database->Lock();
    const std::string a = FileTokenId(kAnalystA);
    for (const char* table : {"releases", "sessions"}) {
      auto update = db->Prepare(absl::StrCat(
          "UPDATE ", table,
          " SET owner = 'file:2', idempotency_key = 'file:2' || substr(idempotency_key, "
          "length(?1) + 1) WHERE owner = ?1"));
      ASSERT_TRUE(update.ok());
      ASSERT_TRUE(update->Bind(1, a).Run().ok());
      ASSERT_EQ(db->Changes(), 1);
    }
  }
  ServerOptions options = Options();
  auto refused = CuratorServer::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("file:2"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--adopt_line_owners"));
  refused = absl::UnknownError("");  // release the database
  // A file whose line 2 holds no token has changed: adopting is refused.
  {
    std::ofstream tokens(tokens_path_, std::ios::trunc);
    tokens << "curator " << kCuratorToken << "\n# gone\n";
  }
  options.adopt_line_owners = true;
  auto changed = CuratorServer::Start(options);
  ASSERT_FALSE(changed.ok());
  EXPECT_THAT(changed.status().message(), HasSubstr("holds no token"));
  changed = absl::UnknownError("");
  // The file as it was: adopt, and A has its work back, B none of it.
  {
    std::ofstream tokens(tokens_path_, std::ios::trunc);
    for (const auto& line : lines) tokens << line << "\n";
  }
  auto adopted = CuratorServer::Start(options);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  server_ = std::move(adopted).value();
  client::Connection a = WithToken(kAnalystA);
  {
    auto context = a.NewContext();
    v1::Release replay;
    grpc::Status status = a.releases().RequestRelease(
        context.get(), RffRequest(dataset.id(), 1.0, "a-release-key"), &replay);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(replay.id(), release.id());  // the key kept its scope
    EXPECT_TRUE(replay.replayed());
  }
  {
    auto context = a.NewContext();
    v1::GetSessionRequest get;
    get.set_session_id(session.id());
    v1::Session got;
    EXPECT_TRUE(a.sessions().GetSession(context.get(), get, &got).ok());
  }
  client::Connection b = WithToken(kAnalystB);
  auto context = b.NewContext();
  v1::GetReleaseRequest get;
  get.set_release_id(release.id());
  v1::Release got;
  EXPECT_FALSE(b.releases().GetRelease(context.get(), get, &got).ok());
  // A plain restart after adopting serves (nothing legacy is left).
  options.adopt_line_owners = false;
  StopServer();
  auto again = CuratorServer::Start(options);
  EXPECT_TRUE(again.ok()) << again.status();
}

}  // namespace
}  // namespace dpcurator::server::testing
