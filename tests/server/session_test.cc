// Sessions: budget reserved at open, consumed by steps, the unused part
// returned at close (issue "[2/5] Accounting": reserve 1000, run 400, close).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/privacy/conversion.h"
#include "core/privacy/events.h"
#include "server/ledger.h"
#include "server/store.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

class SessionTest : public ServerTest {
 protected:
  v1::OpenSessionRequest OpenRequest(const std::string& dataset_id, int64_t steps, double q,
                                     double noise_multiplier) {
    v1::OpenSessionRequest request;
    request.set_dataset_id(dataset_id);
    request.set_idempotency_key("session-key-1");
    request.mutable_params()->set_steps(steps);
    request.mutable_params()->set_sampling_rate(q);
    request.mutable_params()->set_noise_multiplier(noise_multiplier);
    request.mutable_params()->mutable_rff_embedding()->set_num_frequencies(10);
    return request;
  }

  grpc::Status Open(const v1::OpenSessionRequest& request, v1::Session* session) {
    client::Connection analyst = Analyst();
    auto context = analyst.NewContext();
    return analyst.sessions().OpenSession(context.get(), request, session);
  }

  grpc::Status RunStep(const std::string& session_id, int64_t step,
                       v1::SessionStepResponse* response) {
    client::Connection analyst = Analyst();
    v1::SessionStepRequest request;
    request.set_session_id(session_id);
    request.set_step(step);
    auto context = analyst.NewContext();
    return analyst.sessions().Step(context.get(), request, response);
  }

  grpc::Status Close(const std::string& session_id, v1::Session* session) {
    client::Connection analyst = Analyst();
    v1::CloseSessionRequest request;
    request.set_session_id(session_id);
    auto context = analyst.NewContext();
    return analyst.sessions().CloseSession(context.get(), request, session);
  }

  static double EpsilonOfSteps(int64_t steps, double q, double s, double delta) {
    auto step = privacy::PrivacyEvent::PoissonSampledDiscreteGaussian(q, s);
    auto event = privacy::PrivacyEvent::SelfCompose(*step, steps);
    return privacy::ComputeEpsilonReport(*event, delta)->epsilon;
  }
};

TEST_F(SessionTest, ReserveThousandRunFourHundredCloseLeavesFourHundred) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 500, 11).ok());
  constexpr double kQ = 0.01;
  constexpr double kNoise = 1.1;
  v1::Session session;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 1000, kQ, kNoise), &session).ok());
  const double eps_1000 = EpsilonOfSteps(1000, kQ, kNoise, 1e-5);
  const double eps_400 = EpsilonOfSteps(400, kQ, kNoise, 1e-5);
  EXPECT_NEAR(session.epsilon_spent_total(), eps_1000, 1e-9);
  EXPECT_EQ(session.steps_reserved(), 1000);

  for (int64_t step = 0; step < 400; ++step) {
    v1::SessionStepResponse response;
    ASSERT_TRUE(RunStep(session.id(), step, &response).ok()) << step;
    EXPECT_EQ(response.batch().noise_multiplier(), kNoise);
  }
  // Budget still holds the whole reservation while the session is open.
  v1::BudgetReport open_budget;
  ASSERT_TRUE(GetBudget(dataset.id(), &open_budget).ok());
  EXPECT_NEAR(open_budget.epsilon_spent(), eps_1000, 1e-9);
  ASSERT_EQ(open_budget.sessions_size(), 1);
  EXPECT_EQ(open_budget.sessions(0).steps_used(), 400);

  v1::Session closed;
  ASSERT_TRUE(Close(session.id(), &closed).ok());
  EXPECT_EQ(closed.state(), "CLOSED");
  EXPECT_EQ(closed.steps_used(), 400);
  v1::BudgetReport budget;
  ASSERT_TRUE(GetBudget(dataset.id(), &budget).ok());
  // Exactly the budget of 400 steps: the same bound a direct 400-step charge
  // gives, and strictly less than the reservation.
  EXPECT_NEAR(budget.epsilon_spent(), eps_400, 1e-12);
  EXPECT_LT(budget.epsilon_spent(), eps_1000 - 0.1);
  EXPECT_FALSE(budget.has_epsilon_exact());  // subsampled: no exact Gaussian bound
  // Append-only: reserve, refund of the reservation, charge of the steps run.
  ASSERT_EQ(budget.events_size(), 3);
  EXPECT_EQ(budget.events(0).kind(), "session_reserve");
  EXPECT_EQ(budget.events(1).kind(), "refund");
  EXPECT_EQ(budget.events(1).refund_of(), budget.events(0).id());
  EXPECT_EQ(budget.events(2).kind(), "session_steps");

  // A closed session runs no more steps; closing again changes nothing.
  v1::SessionStepResponse late;
  EXPECT_EQ(RunStep(session.id(), 400, &late).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(Close(session.id(), &closed).ok());
  ASSERT_TRUE(GetBudget(dataset.id(), &budget).ok());
  EXPECT_EQ(budget.events_size(), 3);
}

TEST_F(SessionTest, StepsAreIdempotentAndBounded) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 300, 12).ok());
  v1::Session session;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 3, 0.1, 2.0), &session).ok());
  v1::SessionStepResponse first, again;
  ASSERT_TRUE(RunStep(session.id(), 0, &first).ok());
  ASSERT_TRUE(RunStep(session.id(), 0, &again).ok());
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(first.batch().SerializeAsString(), again.batch().SerializeAsString());
  EXPECT_EQ(again.session().steps_used(), 1);
  v1::SessionStepResponse out_of_range;
  EXPECT_EQ(RunStep(session.id(), 3, &out_of_range).error_code(), grpc::StatusCode::OUT_OF_RANGE);
  // Re-opening with the same key replays the session, no second charge.
  v1::Session replay;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 3, 0.1, 2.0), &replay).ok());
  EXPECT_EQ(replay.id(), session.id());
  v1::BudgetReport budget;
  ASSERT_TRUE(GetBudget(dataset.id(), &budget).ok());
  EXPECT_EQ(budget.events_size(), 1);
}

TEST_F(SessionTest, ReservationAboveTheCapIsRefused) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(1.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 300, 13).ok());
  v1::Session session;
  grpc::Status status = Open(OpenRequest(dataset.id(), 10000, 0.01, 1.1), &session);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("cap"), std::string::npos);
}

TEST_F(SessionTest, ReplaceOneUsesSamplingWithoutReplacement) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(20.0, 1e-5, v1::REPLACE_ONE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 400, 14).ok());
  v1::Session session;
  // q n = 20.52: the batch is floor(q n) = 20 rows and the ledger is charged
  // for the rate actually used, 20/400 = 0.05 (not 0.0513, and never 21 rows).
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 5, 0.0513, 2.0), &session).ok());
  EXPECT_DOUBLE_EQ(session.params().sampling_rate(), 0.05);
  v1::SessionStepResponse step;
  ASSERT_TRUE(RunStep(session.id(), 0, &step).ok());
  EXPECT_EQ(step.batch().public_n(), 20);                    // m rows, public
  EXPECT_NEAR(step.batch().sensitivity(), 2.0 / 20, 1e-15);  // means with public m
  auto wor_step = privacy::PrivacyEvent::SampledWithoutReplacementDiscreteGaussian(0.05, 2.0);
  auto reserved = privacy::PrivacyEvent::SelfCompose(*wor_step, 5);
  EXPECT_NEAR(session.epsilon_reserved(),
              privacy::ComputeEpsilonReport(*reserved, 1e-5)->epsilon, 1e-9);
}

// The ledger closes idle sessions itself (the server's reaper calls this).
// Time is a FakeClock, so idleness is checked to the second, counted from
// the last step rather than from the open, with no sleeping.
TEST(SessionLedgerTest, IdleSessionsAreAbandonedAndRefunded) {
  TempDir dir;
  FakeClock clock;
  auto opened = OpenDatabase(dir.File("ledger.db"), &clock);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Ledger& ledger = *opened->ledger;
  v1::CreateDatasetRequest create;
  create.set_name("idle");
  *create.mutable_schema() = DemoSchemaProto();
  create.mutable_budget()->set_epsilon(5);
  create.mutable_budget()->set_delta(1e-5);
  auto dataset = opened->store->CreateDataset(create);
  ASSERT_TRUE(dataset.ok());
  auto step = privacy::PrivacyEvent::PoissonSampledGaussian(0.01, 1.5);
  v1::SessionParams params;
  params.set_steps(100);
  auto admission = ledger.OpenSession(dataset->id(), Caller{"tok_test", false}, "k", "request",
                                      params, *step, 100, 1.5);
  ASSERT_TRUE(admission.ok()) << admission.status();
  EXPECT_EQ(admission->session.created_unix(), clock.UnixNow());

  // One step, 1000 s after the open: the idle time starts again from it.
  clock.Advance(1000);
  const int64_t last_step = clock.UnixNow();
  ASSERT_TRUE(
      ledger.RecordStep(admission->session.id(), 0, Ledger::StoredStep{"artefact", ""}).ok());
  clock.Advance(3599);  // 4599 s since the open, 3599 s idle
  auto not_yet = ledger.CloseIdleSessions(3600);
  ASSERT_TRUE(not_yet.ok());
  EXPECT_EQ(*not_yet, 0);
  auto still_open = ledger.GetSession(admission->session.id(), Caller::Curator());
  ASSERT_TRUE(still_open.ok());
  EXPECT_EQ(still_open->state(), "OPEN");
  EXPECT_EQ(still_open->last_activity_unix(), last_step);

  clock.Advance(1);  // idle for exactly the timeout
  auto closed = ledger.CloseIdleSessions(3600);
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(*closed, 1);
  auto session = ledger.GetSession(admission->session.id(), Caller::Curator());
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(session->state(), "ABANDONED");
  EXPECT_EQ(session->last_activity_unix(), clock.UnixNow());
  // The 99 unused steps were refunded: what stays spent is the one step.
  EXPECT_NEAR(session->epsilon_spent_total(),
              privacy::ComputeEpsilonReport(*step, 1e-5)->epsilon, 1e-9);
  auto again = ledger.CloseIdleSessions(3600);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
  auto problems = ledger.VerifyTotals();
  ASSERT_TRUE(problems.ok());
  EXPECT_TRUE(problems->empty());
}

// The server's reaper (CuratorServer::ReapIdleSessions, one pass of its
// thread) judges idleness by the server's clock: with a FakeClock the pass
// is run directly. The thread itself first wakes a minute of real time
// after start (a tenth of the 3600 s default timeout), long after this test.
TEST_F(SessionTest, ReaperAbandonsIdleSessionsByTheServersClock) {
  StopServer();
  clock_ = &fake_clock_;
  StartServer();
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 300, 12).ok());
  constexpr double kQ = 0.1;
  constexpr double kNoise = 2.0;
  v1::Session session;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 10, kQ, kNoise), &session).ok());
  fake_clock_.Advance(60);
  v1::SessionStepResponse response;
  ASSERT_TRUE(RunStep(session.id(), 0, &response).ok());

  auto get = [&](v1::Session* got) {
    client::Connection analyst = Analyst();
    v1::GetSessionRequest request;
    request.set_session_id(session.id());
    auto context = analyst.NewContext();
    return analyst.sessions().GetSession(context.get(), request, got);
  };
  fake_clock_.Advance(3599);  // one second short of the timeout since the step
  auto none = server_->ReapIdleSessions();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, 0);
  v1::Session open;
  ASSERT_TRUE(get(&open).ok());
  EXPECT_EQ(open.state(), "OPEN");

  fake_clock_.Advance(1);
  auto reaped = server_->ReapIdleSessions();
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(*reaped, 1);
  v1::Session abandoned;
  ASSERT_TRUE(get(&abandoned).ok());
  EXPECT_EQ(abandoned.state(), "ABANDONED");
  // The nine unused steps went back to the dataset.
  const double eps_1 = EpsilonOfSteps(1, kQ, kNoise, 1e-5);
  EXPECT_NEAR(abandoned.epsilon_spent_total(), eps_1, 1e-9);
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  EXPECT_NEAR(report.epsilon_spent(), eps_1, 1e-9);
  // The refund is dated when the reaper ran.
  bool saw_refund = false;
  for (const auto& event : report.events()) {
    if (event.refund_of() == 0) continue;
    saw_refund = true;
    EXPECT_EQ(event.created_unix(), fake_clock_.UnixNow());
  }
  EXPECT_TRUE(saw_refund);
  // A step on the abandoned session is refused.
  grpc::Status late = RunStep(session.id(), 1, &response);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << late.error_message();
}

// Sessions carry a oneof of step kinds (issue 12, item 2); the RFF step is
// one case. A request from before step kinds (no case set) resolves to it,
// and a step may carry the kind's (empty) query or none.
TEST_F(SessionTest, StepKindIsOneCaseOfAOneof) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 200, 4).ok());
  v1::OpenSessionRequest request = OpenRequest(dataset.id(), 3, 0.1, 2.0);
  request.mutable_params()->clear_step();
  ASSERT_EQ(request.params().step_case(), v1::SessionParams::STEP_NOT_SET);
  v1::Session session;
  ASSERT_TRUE(Open(request, &session).ok());
  ASSERT_EQ(session.params().step_case(), v1::SessionParams::kRffEmbedding);
  EXPECT_GT(session.params().rff_embedding().num_frequencies(), 0);  // defaults resolved
  v1::SessionStepResponse response;
  ASSERT_TRUE(RunStep(session.id(), 0, &response).ok());
  EXPECT_EQ(response.answer_case(), v1::SessionStepResponse::kBatch);
  client::Connection analyst = Analyst();
  v1::SessionStepRequest with_query;
  with_query.set_session_id(session.id());
  with_query.set_step(1);
  with_query.mutable_rff_embedding();
  auto context = analyst.NewContext();
  ASSERT_TRUE(analyst.sessions().Step(context.get(), with_query, &response).ok());
  EXPECT_EQ(response.answer_case(), v1::SessionStepResponse::kBatch);
  EXPECT_EQ(response.batch().release_id(), absl::StrCat(session.id(), "/1"));
}

}  // namespace
}  // namespace dpcurator::server::testing
