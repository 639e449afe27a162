// Issue 11, part A: each exploit found by the audit, as a test against a
// real in-process server. Before the fix:
// - A1: a tiny length-scale made features non-finite on some rows; the
//   failure was refunded and its message (quoting a value and its index)
//   reached GetBudget: an exact, free, repeatable read-out of private rows.
//   Session steps failed the same way, unrecorded, and were refunded at close.
// - A5: any analyst could read, step or close another analyst's release or
//   session; the start-up total check only logged; /metrics could listen
//   anywhere.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "absl/strings/match.h"
#include "core/privacy/conversion.h"
#include "core/privacy/events.h"
#include "server/ledger.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

// A marker that a failure "quotes": it must reach nothing an analyst sees.
// (Checked as "4242.125" and "row 17": random hex ids cannot contain them.)
constexpr char kSecret[] = "row 17 has value 4242.125 at index 3";

class PrivacyHolesTest : public ServerTest {
 protected:
  v1::Dataset NewDataset(double cap = 5.0) {
    v1::Dataset dataset;
    EXPECT_TRUE(CreateDataset(cap, 1e-5, v1::ADD_REMOVE, &dataset).ok());
    EXPECT_TRUE(UploadDemoRows(dataset.id(), 300, 7).ok());
    return dataset;
  }

  // Everything an analyst can read about a dataset, as text.
  std::string AnalystView(const std::string& dataset_id) {
    v1::BudgetReport report;
    EXPECT_TRUE(GetBudget(dataset_id, &report).ok());
    auto analyst = Analyst();
    auto context = analyst.NewContext();
    v1::ListReleasesRequest list_request;
    list_request.set_dataset_id(dataset_id);
    v1::ListReleasesResponse list;
    EXPECT_TRUE(analyst.releases().ListReleases(context.get(), list_request, &list).ok());
    return report.DebugString() + list.DebugString();
  }

  v1::OpenSessionRequest SessionRequest(const std::string& dataset_id, const std::string& key) {
    v1::OpenSessionRequest request;
    request.set_dataset_id(dataset_id);
    request.set_idempotency_key(key);
    request.mutable_params()->set_steps(5);
    request.mutable_params()->set_sampling_rate(0.1);
    request.mutable_params()->set_noise_multiplier(2.0);
    request.mutable_params()->mutable_rff_embedding()->set_num_frequencies(10);
    return request;
  }

  // One session RPC as `who`: OpenSession, Step, CloseSession, GetSession.
  template <typename Request, typename Response, typename Method>
  static grpc::Status Call(client::Connection who, Method method, const Request& request,
                           Response* response) {
    auto context = who.NewContext();
    return (who.sessions().*method)(context.get(), request, response);
  }
  grpc::Status OpenSession(client::Connection who, const v1::OpenSessionRequest& request,
                           v1::Session* session) {
    return Call(who, &v1::SessionService::Stub::OpenSession, request, session);
  }
  grpc::Status Step(client::Connection who, const std::string& session_id, int64_t step,
                    v1::SessionStepResponse* response) {
    v1::SessionStepRequest request;
    request.set_session_id(session_id);
    request.set_step(step);
    return Call(who, &v1::SessionService::Stub::Step, request, response);
  }
  grpc::Status Close(client::Connection who, const std::string& session_id,
                     v1::Session* session) {
    v1::CloseSessionRequest request;
    request.set_session_id(session_id);
    return Call(who, &v1::SessionService::Stub::CloseSession, request, session);
  }
  grpc::Status GetSession(client::Connection who, const std::string& session_id,
                          v1::Session* session) {
    v1::GetSessionRequest request;
    request.set_session_id(session_id);
    return Call(who, &v1::SessionService::Stub::GetSession, request, session);
  }

  // Restarts the server with a failpoint that fails `point` with `failure`
  // (only while *armed, when given).
  void RestartFailingAt(std::string point, absl::Status failure,
                        const std::atomic<bool>* armed = nullptr) {
    failpoint_ = [point, failure, armed](absl::string_view at) {
      return at == point && (armed == nullptr || armed->load()) ? failure : absl::OkStatus();
    };
    StopServer();
    StartServer();
  }

  // Outlives the server (the fixture stops it in TearDown).
  std::atomic<bool> armed_{true};

  // A second analyst, made through AdminService.
  client::Connection SecondAnalyst() {
    v1::CreateTokenResponse created;
    EXPECT_TRUE(CreateToken(v1::ROLE_ANALYST, "mallory", &created).ok());
    return WithToken(created.token());
  }
};

// A1, the read-out: tiny declared length-scales are refused before
// admission with the accepted range; the ledger never sees the request.
TEST_F(PrivacyHolesTest, TinyLengthScalesAreRefusedBeforeAdmission) {
  const v1::Dataset dataset = NewDataset();
  for (double tiny : {1e-310, 5e-324, 1e-12}) {
    v1::ReleaseRequest rff = RffRequest(dataset.id(), 1.0, absl::StrCat("rff-", tiny));
    rff.mutable_rff_embedding()->set_length_scale(tiny);
    v1::ReleaseRequest charfn;
    charfn.set_dataset_id(dataset.id());
    charfn.set_idempotency_key(absl::StrCat("charfn-", tiny));
    charfn.set_epsilon(1.0);
    charfn.mutable_charfn_embedding()->set_num_frequencies(10);
    charfn.mutable_charfn_embedding()->set_length_scale(tiny);
    v1::ReleaseRequest numeric = charfn;
    numeric.set_idempotency_key(absl::StrCat("numeric-", tiny));
    numeric.mutable_charfn_embedding()->set_length_scale(1.0);
    numeric.mutable_charfn_embedding()->set_numeric_length_scale(tiny);
    for (const v1::ReleaseRequest& request : {rff, charfn, numeric}) {
      v1::Release release;
      grpc::Status status = RequestRelease(request, &release);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << request.ShortDebugString() << ": " << status.error_message();
      EXPECT_TRUE(absl::StrContains(status.error_message(), "must be in [1e-06, 1e+06]"))
          << status.error_message();
    }
  }
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  EXPECT_EQ(report.events_size(), 0);
  EXPECT_EQ(report.epsilon_spent(), 0.0);
}

// A1 for sessions: the same parameter is refused at open, before anything
// is reserved.
TEST_F(PrivacyHolesTest, TinySessionLengthScaleIsRefusedAtOpen) {
  const v1::Dataset dataset = NewDataset();
  v1::OpenSessionRequest request = SessionRequest(dataset.id(), "tiny");
  request.mutable_params()->mutable_rff_embedding()->set_length_scale(1e-310);
  v1::Session session;
  grpc::Status status = OpenSession(Analyst(), request, &session);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  EXPECT_EQ(report.events_size(), 0);
}

// A parameter whose only problem shows in the engine (a released vector too
// long for the noise layer's proof) is refused before admission, from the
// public schema and parameters alone; it used to fail after the charge.
TEST_F(PrivacyHolesTest, ReleasedDimensionIsCheckedBeforeAdmission) {
  v1::CreateDatasetRequest create;
  create.set_name("many classes");
  create.mutable_budget()->set_epsilon(5.0);
  create.mutable_budget()->set_delta(1e-5);
  auto* x = create.mutable_schema()->add_columns();
  x->set_name("x");
  x->set_type(v1::ColumnSchema::NUMERIC);
  x->set_upper(1.0);
  auto* y = create.mutable_schema()->add_columns();
  y->set_name("y");
  y->set_type(v1::ColumnSchema::CATEGORICAL);
  for (int c = 0; c < 60; ++c) y->add_categories(absl::StrCat("c", c));
  create.mutable_schema()->set_label("y");
  v1::Dataset dataset;
  {
    auto curator = Curator();
    auto context = curator.NewContext();
    ASSERT_TRUE(curator.datasets().CreateDataset(context.get(), create, &dataset).ok());
  }
  v1::UploadRowsRequest upload;
  upload.set_dataset_id(dataset.id());
  for (int i = 0; i < 20; ++i) {
    auto* row = upload.add_rows();
    row->add_cells(absl::StrCat(i / 20.0));
    row->add_cells(absl::StrCat("c", i % 60));
  }
  v1::UploadRowsResponse uploaded;
  ASSERT_TRUE(UploadMessages({upload}, &uploaded).ok());
  // (2 * 20000 + 1) x 60 coordinates > 2^20.
  v1::ReleaseRequest request = RffRequest(dataset.id(), 1.0, "wide");
  request.mutable_rff_embedding()->set_num_frequencies(20000);
  v1::Release release;
  grpc::Status status = RequestRelease(request, &release);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "Lower num_frequencies to at most 8737"))
      << status.error_message();
  v1::OpenSessionRequest session = SessionRequest(dataset.id(), "wide-session");
  session.mutable_params()->mutable_rff_embedding()->set_num_frequencies(20000);
  v1::Session opened;
  EXPECT_EQ(OpenSession(Analyst(), session, &opened).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  EXPECT_EQ(report.events_size(), 0);
  // At the largest accepted size the release goes through.
  request.set_idempotency_key("fits");
  request.mutable_rff_embedding()->set_num_frequencies(8737);
  status = RequestRelease(request, &release);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// A1, the principle: whatever fails after rows were read keeps its charge,
// and its cause reaches neither the analyst nor the ledger.
TEST_F(PrivacyHolesTest, FailureAfterReadingRowsIsChargedAndSaysNothing) {
  RestartFailingAt("release.after_rows_read", absl::InvalidArgumentError(kSecret));
  const v1::Dataset dataset = NewDataset();
  v1::Release release;
  grpc::Status status = RequestRelease(RffRequest(dataset.id(), 1.0, "k"), &release);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "incident inc_"));
  EXPECT_TRUE(absl::StrContains(status.error_message(), "charge stands"));
  EXPECT_FALSE(absl::StrContains(status.error_message(), "4242.125")) << status.error_message();
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  ASSERT_EQ(report.events_size(), 1);
  EXPECT_EQ(report.events(0).refund_of(), 0);
  EXPECT_GT(report.epsilon_spent(), 0.9);
  const std::string view = AnalystView(dataset.id());
  EXPECT_FALSE(absl::StrContains(view, "4242.125")) << view;
  EXPECT_FALSE(absl::StrContains(view, "row 17")) << view;
  // Repeating it is not free: every attempt is charged.
  status = RequestRelease(RffRequest(dataset.id(), 1.0, "k2"), &release);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INTERNAL);
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  EXPECT_EQ(report.events_size(), 2);
  EXPECT_GT(report.epsilon_spent(), 1.2);
}

// The one refundable failure: before any row is read, in the attempt that
// made the charge.
TEST_F(PrivacyHolesTest, FailureBeforeReadingRowsIsRefunded) {
  RestartFailingAt("release.before_rows_read", absl::UnavailableError("no entropy"));
  const v1::Dataset dataset = NewDataset();
  v1::Release release;
  grpc::Status status = RequestRelease(RffRequest(dataset.id(), 1.0, "k"), &release);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  ASSERT_EQ(report.events_size(), 2);
  EXPECT_EQ(report.events(1).refund_of(), report.events(0).id());
  EXPECT_EQ(report.epsilon_spent(), 0.0);
}

// A1 for sessions: a failed step is stored, counts as used, replays the
// same incident, and is charged at close.
TEST_F(PrivacyHolesTest, FailedSessionStepCountsAsUsed) {
  RestartFailingAt("session_step.after_rows_read", absl::InternalError(kSecret), &armed_);
  const v1::Dataset dataset = NewDataset();
  v1::Session session;
  ASSERT_TRUE(OpenSession(Analyst(), SessionRequest(dataset.id(), "s"), &session).ok());
  v1::SessionStepResponse step;
  grpc::Status failed = Step(Analyst(), session.id(), 0, &step);
  ASSERT_EQ(failed.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_FALSE(absl::StrContains(failed.error_message(), "4242.125"));
  // The retry of the same index replays the same outcome, even though the
  // fault is gone: one outcome per index.
  armed_ = false;
  grpc::Status again = Step(Analyst(), session.id(), 0, &step);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(again.error_message(), failed.error_message());
  ASSERT_TRUE(Step(Analyst(), session.id(), 1, &step).ok());
  EXPECT_EQ(step.session().steps_used(), 2);
  v1::Session closed;
  ASSERT_TRUE(Close(Analyst(), session.id(), &closed).ok());
  EXPECT_EQ(closed.steps_used(), 2);
  // Charged: exactly two steps of the session's event.
  auto event = privacy::PrivacyEvent::PoissonSampledDiscreteGaussian(0.1, 2.0);
  auto two = privacy::PrivacyEvent::SelfCompose(*event, 2);
  ASSERT_TRUE(two.ok());
  auto expected = privacy::ComputeEpsilonReport(*two, 1e-5);
  ASSERT_TRUE(expected.ok());
  EXPECT_NEAR(closed.epsilon_spent_total(), expected->epsilon, 1e-9);
  const std::string view = AnalystView(dataset.id());
  EXPECT_FALSE(absl::StrContains(view, "4242.125")) << view;
}

// A5: releases and sessions belong to the analyst token that made them.
TEST_F(PrivacyHolesTest, AnotherAnalystCannotReadStepOrCloseWhatIsNotTheirs) {
  const v1::Dataset dataset = NewDataset();
  client::Connection mallory = SecondAnalyst();
  v1::Release release;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 1.0, "alice-key"), &release).ok());
  {
    v1::GetReleaseRequest get;
    get.set_release_id(release.id());
    v1::Release stolen;
    auto context = mallory.NewContext();
    grpc::Status status = mallory.releases().GetRelease(context.get(), get, &stolen);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
    v1::ListReleasesRequest list_request;
    list_request.set_dataset_id(dataset.id());
    v1::ListReleasesResponse list;
    auto list_context = mallory.NewContext();
    ASSERT_TRUE(mallory.releases().ListReleases(list_context.get(), list_request, &list).ok());
    EXPECT_EQ(list.releases_size(), 0);
    // The curator lists everything.
    auto curator = Curator();
    auto curator_context = curator.NewContext();
    ASSERT_TRUE(
        curator.releases().ListReleases(curator_context.get(), list_request, &list).ok());
    EXPECT_EQ(list.releases_size(), 1);
  }
  // Same key and request from mallory: a new release of mallory's, not
  // alice's artefact replayed.
  {
    v1::ReleaseRequest same = RffRequest(dataset.id(), 1.0, "alice-key");
    v1::Release theirs;
    auto context = mallory.NewContext();
    ASSERT_TRUE(mallory.releases().RequestRelease(context.get(), same, &theirs).ok());
    EXPECT_NE(theirs.id(), release.id());
    EXPECT_FALSE(theirs.replayed());
  }
  v1::Session session;
  ASSERT_TRUE(OpenSession(Analyst(), SessionRequest(dataset.id(), "s"), &session).ok());
  v1::SessionStepResponse step;
  EXPECT_EQ(Step(mallory, session.id(), 0, &step).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::Session seen;
  EXPECT_EQ(GetSession(mallory, session.id(), &seen).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Close(mallory, session.id(), &seen).error_code(), grpc::StatusCode::NOT_FOUND);
  // Untouched by all that: still open, nothing used.
  ASSERT_TRUE(GetSession(Analyst(), session.id(), &seen).ok());
  EXPECT_EQ(seen.state(), "OPEN");
  EXPECT_EQ(seen.steps_used(), 0);
  // Mallory's budget report lists no session of alice's.
  v1::BudgetReport report;
  {
    v1::GetBudgetRequest budget_request;
    budget_request.set_dataset_id(dataset.id());
    auto context = mallory.NewContext();
    ASSERT_TRUE(mallory.datasets().GetBudget(context.get(), budget_request, &report).ok());
    EXPECT_EQ(report.sessions_size(), 0);
  }
}

// A5: a ledger whose totals do not add up is not served.
TEST_F(PrivacyHolesTest, StartUpTotalCheckFailsClosed) {
  const v1::Dataset dataset = NewDataset();
  v1::Release release;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 1.0, "k"), &release).ok());
  StopServer();
  {
    auto opened = OpenDatabase(db_path_);
    ASSERT_TRUE(opened.ok());
    // Forge the running totals: as if the charge had never been made.
    ASSERT_TRUE(opened->database->Lock()->Exec("DELETE FROM ledger_totals").ok());
  }
  ServerOptions options = Options();
  auto refused = CuratorServer::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--check")) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), dataset.id())) << refused.status();
  auto problems = CuratorServer::CheckDatabase(db_path_);
  ASSERT_TRUE(problems.ok());
  EXPECT_EQ(problems->size(), 1u);
}

// A5: /metrics on a non-loopback address needs an explicit acknowledgement.
TEST_F(PrivacyHolesTest, MetricsRefuseNonLoopbackUnlessAcknowledged) {
  EXPECT_TRUE(IsLoopbackListenAddress("127.0.0.1:9464"));
  EXPECT_TRUE(IsLoopbackListenAddress("localhost:9464"));
  EXPECT_TRUE(IsLoopbackListenAddress("[::1]:9464"));
  EXPECT_FALSE(IsLoopbackListenAddress("0.0.0.0:9464"));
  EXPECT_FALSE(IsLoopbackListenAddress("[::]:9464"));
  EXPECT_FALSE(IsLoopbackListenAddress(":9464"));
  EXPECT_FALSE(IsLoopbackListenAddress("10.1.2.3:9464"));
  StopServer();
  ServerOptions options = Options();
  options.metrics_listen_address = "0.0.0.0:0";
  auto refused = CuratorServer::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--metrics-allow-remote"));
  options.metrics_allow_remote = true;
  auto started = CuratorServer::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  (*started)->Shutdown(std::chrono::milliseconds(100));
}

}  // namespace
}  // namespace dpcurator::server::testing
