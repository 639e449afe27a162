// Per-token quotas (issue 36 items 5, 7, 8; server/quotas.h, docs/limits.md
// "Per-token quotas"): with a small quota in ServerOptions::limits, the call
// that would go over is refused before admission (RESOURCE_EXHAUSTED naming
// the quota's flag), nothing is charged or stored, and other tokens are
// served. The defaults admit the honest workloads the project documents.

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "server/audit.h"
#include "server/ledger.h"
#include "server/quotas.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;


class QuotaTest : public ServerTest {
 protected:
  // Restarts the server on the fixture's database with these limits.
  void RestartWith(const ServerLimits& limits) {
    StopServer();
    ServerOptions options = Options();
    options.limits = limits;
    auto started = CuratorServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(started).value();
  }

  // A release at noise multiplier 1e5: epsilon 0.0035 at delta 1e-5, under
  // the default --near-free-epsilon (0.01).
  static v1::ReleaseRequest NearFreeRelease(const std::string& dataset_id,
                                            const std::string& key) {
    v1::ReleaseRequest request = RffRequest(dataset_id, 1.0, key);
    request.set_noise_multiplier(1e5);
    return request;
  }

  // A RESOURCE_EXHAUSTED status that names `flag`.
  static void ExpectQuotaRefusal(const grpc::Status& status, const std::string& flag) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("--" + flag + " limit"));
    EXPECT_THAT(status.error_message(), HasSubstr("ask the curator to raise it"));
  }

  v1::Dataset DemoDataset(double cap = 10.0) {
    v1::Dataset dataset;
    EXPECT_TRUE(CreateDataset(cap, kDelta, v1::ADD_REMOVE, &dataset).ok());
    EXPECT_TRUE(UploadDemoRows(dataset.id(), 200, 7).ok());
    return dataset;
  }

  grpc::Status Release(client::Connection as, const v1::ReleaseRequest& request,
                       v1::Release* release = nullptr) {
    v1::Release local;
    auto context = as.NewContext();
    return as.releases().RequestRelease(context.get(), request,
                                        release != nullptr ? release : &local);
  }

  static v1::OpenSessionRequest SessionRequest(const std::string& dataset_id, int64_t steps,
                                               const std::string& key) {
    v1::OpenSessionRequest request;
    request.set_dataset_id(dataset_id);
    request.set_idempotency_key(key);
    request.mutable_params()->set_steps(steps);
    request.mutable_params()->set_sampling_rate(0.01);
    request.mutable_params()->set_noise_multiplier(1.1);
    request.mutable_params()->mutable_rff_embedding()->set_num_frequencies(10);
    return request;
  }
  grpc::Status Open(client::Connection as, const v1::OpenSessionRequest& request,
                    v1::Session* session = nullptr) {
    v1::Session local;
    auto context = as.NewContext();
    return as.sessions().OpenSession(context.get(), request,
                                     session != nullptr ? session : &local);
  }
  grpc::Status Step(client::Connection as, const std::string& session_id, int64_t step) {
    v1::SessionStepRequest request;
    request.set_session_id(session_id);
    request.set_step(step);
    v1::SessionStepResponse response;
    auto context = as.NewContext();
    return as.sessions().Step(context.get(), request, &response);
  }
  grpc::Status Close(client::Connection as, const std::string& session_id) {
    v1::CloseSessionRequest request;
    request.set_session_id(session_id);
    v1::Session session;
    auto context = as.NewContext();
    return as.sessions().CloseSession(context.get(), request, &session);
  }

  // The ledger's charge events of the dataset and its epsilon spent.
  std::pair<int, double> Charges(const std::string& dataset_id) {
    v1::BudgetReport report;
    EXPECT_TRUE(GetBudget(dataset_id, &report).ok());
    return {report.events_size(), report.epsilon_spent()};
  }

  // A second analyst token (AdminService), for "other tokens are served".
  client::Connection OtherAnalyst() {
    v1::CreateTokenResponse created;
    EXPECT_TRUE(CreateToken(v1::ROLE_ANALYST, "other analyst", &created).ok());
    return WithToken(created.token());
  }

  // One SubmitReports stream held open: its first (empty) batch is acked,
  // so its handler runs and holds its slot on the server.
  struct OpenStream {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::SubmitReportsRequest, v1::SubmitReportsAck>>
        stream;
  };
  OpenStream HoldStream(client::Connection& device, const std::string& collection_id) {
    OpenStream open;
    open.context = device.NewContext();
    open.stream = device.collections().SubmitReports(open.context.get());
    v1::SubmitReportsRequest batch;
    batch.set_collection_id(collection_id);
    EXPECT_TRUE(open.stream->Write(batch));
    v1::SubmitReportsAck ack;
    EXPECT_TRUE(open.stream->Read(&ack));
    return open;
  }
  static grpc::Status EndStream(OpenStream& open) {
    open.stream->WritesDone();
    v1::SubmitReportsAck ack;
    while (open.stream->Read(&ack)) {
    }
    return open.stream->Finish();
  }
  // A stream that sends nothing and ends: OK on a server without a quota.
  grpc::Status EmptyStream(client::Connection& device) {
    auto context = device.NewContext();
    auto stream = device.collections().SubmitReports(context.get());
    stream->WritesDone();
    v1::SubmitReportsAck ack;
    while (stream->Read(&ack)) {
    }
    return stream->Finish();
  }
};

// Item 8: one device token holding idle SubmitReports streams. The stream
// past --max-open-streams-per-token is refused at once (its handler returns
// at its first line, so it holds no thread), an analyst is served meanwhile,
// and the slots come back when the streams end.
TEST_F(QuotaTest, StreamsPastThePerTokenQuotaAreRefusedOthersServed) {
  ServerLimits limits;
  limits.max_open_streams_per_token = 3;
  RestartWith(limits);
  v1::Collection collection;
  ASSERT_TRUE(CreateLdpCollection("quota", &collection).ok());
  client::Connection device = Device();
  std::vector<OpenStream> held;
  for (int i = 0; i < 3; ++i) held.push_back(HoldStream(device, collection.id()));

  ExpectQuotaRefusal(EmptyStream(device), "max-open-streams-per-token");
  {
    client::Connection analyst = Analyst();
    v1::ListDatasetsRequest request;
    v1::ListDatasetsResponse response;
    auto context = analyst.NewContext();
    EXPECT_TRUE(analyst.datasets().ListDatasets(context.get(), request, &response).ok());
  }
  for (OpenStream& open : held) EXPECT_TRUE(EndStream(open).ok());
  // Given back: a new stream of the same token is served again.
  EXPECT_TRUE(EmptyStream(device).ok());
}

// Item 8: calls in flight per token, streams and unary calls together.
TEST_F(QuotaTest, CallsPastThePerTokenQuotaAreRefused) {
  ServerLimits limits;
  limits.max_concurrent_calls_per_token = 2;
  RestartWith(limits);
  v1::Collection collection;
  ASSERT_TRUE(CreateLdpCollection("quota", &collection).ok());
  client::Connection device = Device();
  std::vector<OpenStream> held;
  for (int i = 0; i < 2; ++i) held.push_back(HoldStream(device, collection.id()));
  v1::GetCollectionRequest request;
  request.set_collection_id(collection.id());
  v1::Collection got;
  {
    auto context = device.NewContext();
    ExpectQuotaRefusal(device.collections().GetCollection(context.get(), request, &got),
                       "max-concurrent-calls-per-token");
  }
  for (OpenStream& open : held) EXPECT_TRUE(EndStream(open).ok());
  auto context = device.NewContext();
  EXPECT_TRUE(device.collections().GetCollection(context.get(), request, &got).ok());
}

// Item 5: open sessions and reserved steps per token, refused inside the
// admission (nothing charged); a retry of an admitted key still replays.
TEST_F(QuotaTest, OpenSessionsAndReservedStepsPastTheQuotaAreRefused) {
  ServerLimits limits;
  limits.max_open_sessions_per_token = 2;
  limits.max_reserved_steps_per_token = 100;
  RestartWith(limits);
  const v1::Dataset dataset = DemoDataset();
  v1::Session first;
  ASSERT_TRUE(Open(Analyst(), SessionRequest(dataset.id(), 10, "a"), &first).ok());
  ASSERT_TRUE(Open(Analyst(), SessionRequest(dataset.id(), 10, "b")).ok());
  const auto before = Charges(dataset.id());
  ExpectQuotaRefusal(Open(Analyst(), SessionRequest(dataset.id(), 10, "c")),
                     "max-open-sessions-per-token");
  EXPECT_EQ(Charges(dataset.id()), before);
  v1::Session replayed;
  ASSERT_TRUE(Open(Analyst(), SessionRequest(dataset.id(), 10, "a"), &replayed).ok());
  EXPECT_EQ(replayed.id(), first.id());
  // Another token has its own quota.
  EXPECT_TRUE(Open(OtherAnalyst(), SessionRequest(dataset.id(), 10, "other")).ok());

  ASSERT_TRUE(Close(Analyst(), first.id()).ok());
  // 10 reserved by the open one + 2^30 (the near-free reservation).
  const auto after_close = Charges(dataset.id());
  ExpectQuotaRefusal(Open(Analyst(), SessionRequest(dataset.id(), int64_t{1} << 30, "huge")),
                     "max-reserved-steps-per-token");
  ExpectQuotaRefusal(Open(Analyst(), SessionRequest(dataset.id(), 91, "d")),
                     "max-reserved-steps-per-token");
  EXPECT_EQ(Charges(dataset.id()), after_close);
  EXPECT_TRUE(Open(Analyst(), SessionRequest(dataset.id(), 90, "d2")).ok());
}

// Item 5: each member of a partitioned open counts as an open session and
// its steps as reserved steps (DP-kernel parallel opens one per class).
TEST_F(QuotaTest, PartitionedMembersCountAgainstTheSessionQuotas) {
  ServerLimits limits;
  limits.max_open_sessions_per_token = 3;
  RestartWith(limits);
  const v1::Dataset dataset = DemoDataset();
  auto partitioned = [&](const std::string& key) {
    v1::OpenPartitionedSessionsRequest request;
    request.set_dataset_id(dataset.id());
    request.set_idempotency_key(key);
    request.mutable_params()->set_steps(10);
    request.mutable_params()->set_sampling_rate(0.1);
    request.mutable_params()->set_noise_multiplier(1.5);
    request.mutable_params()->mutable_rff_embedding()->set_num_frequencies(20);
    request.mutable_partition()->set_column(DemoSchemaProto().label());
    client::Connection analyst = Analyst();
    v1::PartitionedSessions response;
    auto context = analyst.NewContext();
    return analyst.sessions().OpenPartitionedSessions(context.get(), request, &response);
  };
  ASSERT_TRUE(partitioned("p1").ok());  // the demo label's 2 levels: 2 sessions
  const auto before = Charges(dataset.id());
  ExpectQuotaRefusal(partitioned("p2"), "max-open-sessions-per-token");
  EXPECT_EQ(Charges(dataset.id()), before);
  EXPECT_TRUE(partitioned("p1").ok());  // the replay
  EXPECT_TRUE(Open(Analyst(), SessionRequest(dataset.id(), 10, "one-more")).ok());
}

// Item 5: stored artefact bytes per token (releases), counted by the usage
// row in the transaction that stores them; the token past its quota is
// refused before admission, another token is served.
TEST_F(QuotaTest, ReleasesPastTheStoredBytesQuotaAreRefused) {
  ServerLimits limits;
  limits.max_stored_bytes_per_token = 1;  // the first artefact reaches it
  RestartWith(limits);
  const v1::Dataset dataset = DemoDataset();
  ASSERT_TRUE(Release(Analyst(), RffRequest(dataset.id(), 0.1, "r1")).ok());
  {
    auto db = server_->database()->Lock();
    auto query = db->Prepare(
        "SELECT (SELECT stored_bytes FROM token_usage WHERE principal = r.owner), "
        "length(r.artefact) FROM releases r");
    ASSERT_TRUE(query.ok()) << query.status();
    ASSERT_TRUE(*query->Step());
    EXPECT_GT(query->ColumnInt(1), 1000);
    EXPECT_EQ(query->ColumnInt(0), query->ColumnInt(1));
  }
  const auto before = Charges(dataset.id());
  ExpectQuotaRefusal(Release(Analyst(), RffRequest(dataset.id(), 0.1, "r2")),
                     "max-stored-bytes-per-token");
  ExpectQuotaRefusal(Open(Analyst(), SessionRequest(dataset.id(), 10, "s")),
                     "max-stored-bytes-per-token");
  EXPECT_EQ(Charges(dataset.id()), before);
  // The admitted one still replays; another token is served.
  v1::Release replayed;
  ASSERT_TRUE(Release(Analyst(), RffRequest(dataset.id(), 0.1, "r1"), &replayed).ok());
  EXPECT_TRUE(replayed.replayed());
  EXPECT_TRUE(Release(OtherAnalyst(), RffRequest(dataset.id(), 0.1, "o1")).ok());
}

// Item 5: session step artefacts count too (every rff_embedding step stores
// one); the step past the quota is refused before it reads a row.
TEST_F(QuotaTest, StepsPastTheStoredBytesQuotaAreRefused) {
  ServerLimits limits;
  limits.max_stored_bytes_per_token = 1;
  RestartWith(limits);
  const v1::Dataset dataset = DemoDataset();
  v1::Session session;
  ASSERT_TRUE(Open(Analyst(), SessionRequest(dataset.id(), 10, "s"), &session).ok());
  ASSERT_TRUE(Step(Analyst(), session.id(), 0).ok());
  ExpectQuotaRefusal(Step(Analyst(), session.id(), 1), "max-stored-bytes-per-token");
  // The stored step replays.
  EXPECT_TRUE(Step(Analyst(), session.id(), 0).ok());
  v1::GetSessionRequest request;
  request.set_session_id(session.id());
  client::Connection analyst = Analyst();
  auto context = analyst.NewContext();
  v1::Session now;
  ASSERT_TRUE(analyst.sessions().GetSession(context.get(), request, &now).ok());
  EXPECT_EQ(now.steps_used(), 1);
}

// Item 5: releases that cost next to nothing (noise multiplier 1e5: the
// accountant's floor, epsilon 0.0035 at delta 1e-5, however many) count
// against --max-near-free-objects-per-token; releases above the floor
// (--near-free-epsilon, 0.01) do not.
TEST_F(QuotaTest, NearFreeReleasesPastTheCountQuotaAreRefused) {
  ServerLimits limits;
  limits.max_near_free_objects_per_token = 2;
  RestartWith(limits);
  const v1::Dataset dataset = DemoDataset();
  auto near_free = [&](const std::string& key) { return NearFreeRelease(dataset.id(), key); };
  v1::Release cheap;
  ASSERT_TRUE(Release(Analyst(), near_free("n1"), &cheap).ok());
  ASSERT_TRUE(Release(Analyst(), near_free("n2")).ok());
  const auto before = Charges(dataset.id());
  ASSERT_LT(before.second, limits.near_free_epsilon);
  ExpectQuotaRefusal(Release(Analyst(), near_free("n3")), "max-near-free-objects-per-token");
  EXPECT_EQ(Charges(dataset.id()), before);
  // Above the floor: admitted.
  EXPECT_TRUE(Release(Analyst(), RffRequest(dataset.id(), 0.1, "paid")).ok());
}

// A quota refusal charges nothing and a token holder can repeat it at
// will: one synced audit row each made a flood an fsync storm that slowed
// every honest call (bench/hostile_load). Such refusals share one row per
// (peer, method, code, principal) and interval, with their count; a
// charged call keeps its own row.
TEST_F(QuotaTest, QuotaRefusalsAreAuditedInBoundedSpace) {
  ServerLimits limits;
  limits.max_near_free_objects_per_token = 1;
  // The refusals' rows are per interval of the wall clock (unix time / its
  // length): at the default 60 s, the 50 refusals (a few seconds, longer on
  // a loaded machine) straddled a boundary now and then and made two rows.
  limits.audit_refusal_interval_seconds = int64_t{1} << 40;
  RestartWith(limits);
  const v1::Dataset dataset = DemoDataset();
  auto near_free = [&](const std::string& key) { return NearFreeRelease(dataset.id(), key); };
  ASSERT_TRUE(Release(Analyst(), near_free("first")).ok());
  auto count_rows = [&](int code) {
    auto page = server_->store()->ListAudit(10000, 0);
    EXPECT_TRUE(page.ok()) << page.status();
    std::vector<v1::AuditRecord> rows;
    for (const v1::AuditRecord& row : page->records()) {
      if (row.code() == code) rows.push_back(row);
    }
    return rows;
  };
  constexpr int kRefused = 50;
  for (int i = 0; i < kRefused; ++i) {
    ExpectQuotaRefusal(Release(Analyst(), near_free(absl::StrCat("again-", i))),
                       "max-near-free-objects-per-token");
  }
  ASSERT_TRUE(server_->MaintainAuditLog().ok());
  const std::vector<v1::AuditRecord> refused =
      count_rows(static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_THAT(refused[0].detail(), ::testing::HasSubstr(absl::StrCat("calls=", kRefused)));
  // The charged release keeps a row of its own.
  int released = 0;
  for (const v1::AuditRecord& row : count_rows(0)) {
    released += row.method() == "/dpcurator.v1.ReleaseService/RequestRelease";
  }
  EXPECT_EQ(released, 1);
}

// A handler's refusal that charged nothing waits refusal_backoff_ms before
// its answer, so a token looping on refusals makes a few a second per call
// slot; an admitted call does not wait.
TEST_F(QuotaTest, RefusalsThatChargedNothingBackOff) {
  ServerLimits limits;
  limits.max_near_free_objects_per_token = 1;
  limits.refusal_backoff_ms = 300;
  RestartWith(limits);
  const v1::Dataset dataset = DemoDataset();
  auto near_free = [&](const std::string& key) { return NearFreeRelease(dataset.id(), key); };
  ASSERT_TRUE(Release(Analyst(), near_free("first")).ok());
  const auto start = std::chrono::steady_clock::now();
  ExpectQuotaRefusal(Release(Analyst(), near_free("second")), "max-near-free-objects-per-token");
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300));
  limits.refusal_backoff_ms = -1;
  EXPECT_THAT(std::string(ValidateQuotaLimits(limits).message()),
              ::testing::HasSubstr("--refusal-backoff-ms"));
}

TEST(AuditAggregationTest, RefusalsThatChargedNothingAreAggregated) {
  CallRecord call;
  call.code = static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(RefusalAggregated(call));
  call.epsilon = 0.5;  // charged, then failed to send: its own row
  EXPECT_FALSE(RefusalAggregated(call));
  call.epsilon = 0.0;
  call.code = 0;
  EXPECT_FALSE(RefusalAggregated(call));
  call.refused_at_admission = true;  // a token, role, call quota or input limit
  EXPECT_TRUE(RefusalAggregated(call));
}

// Item 7: pending jobs per token on one external dataset.
TEST_F(QuotaTest, PendingJobsPastTheQuotaAreRefused) {
  ServerLimits limits;
  limits.max_pending_jobs_per_token = 2;
  RestartWith(limits);
  v1::CreateDatasetRequest create;
  create.set_name("external");
  *create.mutable_schema() = DemoSchemaProto();
  create.mutable_budget()->set_epsilon(10.0);
  create.mutable_budget()->set_delta(kDelta);
  create.set_relation(v1::ADD_REMOVE);
  create.set_external(true);
  v1::Dataset dataset;
  {
    client::Connection curator = Curator();
    auto context = curator.NewContext();
    ASSERT_TRUE(curator.datasets().CreateDataset(context.get(), create, &dataset).ok());
  }
  v1::Release pending;
  ASSERT_TRUE(Release(Analyst(), RffRequest(dataset.id(), 0.1, "j1"), &pending).ok());
  EXPECT_EQ(pending.state(), v1::RELEASE_STATE_PENDING);
  ASSERT_TRUE(Release(Analyst(), RffRequest(dataset.id(), 0.1, "j2")).ok());
  const auto before = Charges(dataset.id());
  ExpectQuotaRefusal(Release(Analyst(), RffRequest(dataset.id(), 0.1, "j3")),
                     "max-pending-jobs-per-token");
  EXPECT_EQ(Charges(dataset.id()), before);
  // A retry of a queued job waits as before; another token queues its own.
  v1::Release waiting;
  ASSERT_TRUE(Release(Analyst(), RffRequest(dataset.id(), 0.1, "j1"), &waiting).ok());
  EXPECT_EQ(waiting.id(), pending.id());
  EXPECT_TRUE(Release(OtherAnalyst(), RffRequest(dataset.id(), 0.1, "o1")).ok());
}

// SQLite VM instructions run while `fn` runs on the server's connection.
template <typename Fn>
int64_t VmSteps(SharedDatabase* database, Fn fn) {
  int64_t steps = 0;
  auto count = [](void* counter) {
    ++*static_cast<int64_t*>(counter);
    return 0;
  };
  sqlite3_progress_handler(database->Lock()->raw(), 1, count, &steps);
  fn();
  sqlite3_progress_handler(database->Lock()->raw(), 0, nullptr, nullptr);
  return steps;
}

// Item 7: the runner's work per job does not grow with the dataset's
// history: listing the pending jobs and loading one cost the same with 3
// finished jobs behind them as with 3,000 (counted in SQLite instructions,
// not time).
TEST_F(QuotaTest, RunnerWorkPerJobIsIndependentOfTheHistory) {
  v1::CreateDatasetRequest create;
  create.set_name("external");
  *create.mutable_schema() = DemoSchemaProto();
  create.mutable_budget()->set_epsilon(10.0);
  create.mutable_budget()->set_delta(kDelta);
  create.set_relation(v1::ADD_REMOVE);
  create.set_external(true);
  v1::Dataset dataset;
  {
    client::Connection curator = Curator();
    auto context = curator.NewContext();
    ASSERT_TRUE(curator.datasets().CreateDataset(context.get(), create, &dataset).ok());
  }
  std::vector<std::string> pending;
  for (int i = 0; i < 3; ++i) {
    v1::Release release;
    ASSERT_TRUE(
        Release(Analyst(), RffRequest(dataset.id(), 0.1, "job" + std::to_string(i)), &release)
            .ok());
    pending.push_back(release.id());
  }
  // The finished history: `count` DONE jobs (release, job row, charge event)
  // written directly, older than the pending ones.
  auto add_history = [&](int from, int count) {
    auto db = server_->database()->Lock();
    ASSERT_TRUE(db->Exec("BEGIN IMMEDIATE").ok());
    for (int i = from; i < from + count; ++i) {
      const std::string id = "rel_history_" + std::to_string(i);
      auto release = db->Prepare(
          "INSERT INTO releases (id, dataset_id, idempotency_key, kind, request, status, "
          "artefact, epsilon, created_unix, owner) VALUES (?, ?, ?, 'rff_embedding', x'', "
          "'DONE', x'00', 0.1, 1, 'file:history')");
      ASSERT_TRUE(release.ok());
      ASSERT_TRUE(release->Bind(1, id).Bind(2, dataset.id()).Bind(3, id).Run().ok());
      auto job = db->Prepare(
          "INSERT INTO release_jobs (release_id, dataset_id, kind, schema, request, "
          "plan_digest, created_unix) VALUES (?, ?, 1, x'', x'', zeroblob(32), 1)");
      ASSERT_TRUE(job.ok());
      ASSERT_TRUE(job->Bind(1, id).Bind(2, dataset.id()).Run().ok());
      auto event = db->Prepare(
          "INSERT INTO ledger_events (dataset_id, release_id, kind, description, relation, rdp, "
          "plain_gaussian, inverse_variance_sum, epsilon_alone, refund_of, created_unix) "
          "VALUES (?, ?, 'rff_embedding', 'history', 1, x'', 0, 0, 0.1, NULL, 1)");
      ASSERT_TRUE(event.ok());
      ASSERT_TRUE(event->Bind(1, dataset.id()).Bind(2, id).Run().ok());
    }
    ASSERT_TRUE(db->Exec("COMMIT").ok());
  };
  Ledger ledger(server_->database(), clock_);
  auto work = [&] {
    return VmSteps(server_->database(), [&] {
      auto jobs = ledger.ListPendingJobs(dataset.id(), 100);
      ASSERT_TRUE(jobs.ok()) << jobs.status();
      ASSERT_EQ(jobs->size(), 3u);
      for (const Ledger::Job& job : *jobs) EXPECT_FALSE(job.charged_event.empty());
      ASSERT_TRUE(ledger.LoadJob(pending[1], dataset.id()).ok());
    });
  };
  add_history(0, 3);
  const int64_t short_history = work();
  add_history(3, 3000);
  const int64_t long_history = work();
  EXPECT_GT(short_history, 0);
  // An index lookup deeper by a level or two, not a scan of 3,000 rows.
  EXPECT_LT(long_history, 2 * short_history) << short_history << " -> " << long_history;
}

// The defaults admit an honest workload: DP-kernel parallel's shape (10
// sessions of 4,000 steps, stepped at once), 32 concurrent releases of one
// analyst, and a device's report stream.
TEST_F(QuotaTest, DefaultsAdmitTheHonestWorkloads) {
  const v1::Dataset dataset = DemoDataset(1000.0);
  std::vector<std::string> sessions;
  for (int i = 0; i < 10; ++i) {
    v1::Session session;
    const v1::OpenSessionRequest request =
        SessionRequest(dataset.id(), 4000, "class-" + std::to_string(i));
    ASSERT_TRUE(Open(Analyst(), request, &session).ok()) << i;
    sessions.push_back(session.id());
  }
  std::atomic<int> failed{0};
  std::vector<std::thread> clients;
  for (const std::string& id : sessions) {
    clients.emplace_back([&, id] {
      if (!Step(Analyst(), id, 0).ok()) ++failed;
    });
  }
  for (int c = 0; c < 32; ++c) {
    clients.emplace_back([&, c] {
      const v1::ReleaseRequest request =
          RffRequest(dataset.id(), 0.5, "honest-" + std::to_string(c));
      if (!Release(Analyst(), request).ok()) ++failed;
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(failed.load(), 0);
  for (const std::string& id : sessions) EXPECT_TRUE(Close(Analyst(), id).ok());
  v1::Collection collection;
  ASSERT_TRUE(CreateLdpCollection("honest", &collection).ok());
  client::Connection device = Device();
  OpenStream open = HoldStream(device, collection.id());
  EXPECT_TRUE(EndStream(open).ok());
}

TEST(QuotaLimitsTest, NonPositiveLimitsAreRefusedNamingTheFlag) {
  ServerLimits limits;
  EXPECT_TRUE(ValidateQuotaLimits(limits).ok());
  limits.max_open_streams_per_token = 0;
  const absl::Status status = ValidateQuotaLimits(limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("--max-open-streams-per-token"));
}

}  // namespace
}  // namespace dpcurator::server::testing
