// Issue 23, 0(b): once admitted, a mechanism is a total function of the
// rows (docs/privacy.md 6.4). Each test is a case that used to be admitted
// and then fail after the rows were read, charged:
// - noise multipliers whose s * Delta the noise grid cannot take (rff 1e30,
//   1e100; charfn with a private length-scale 1e200, 1e300), and a session
//   step's likewise;
// - charfn with a private length-scale on a REPLACE_ONE dataset of n = 1;
// - a 1024 x 1024 image schema's default frequency matrix (12.6 GB charfn,
//   33.5 GB rff), allocated after the read;
// - an exception after the read (std::bad_alloc) escaped the failure path:
//   the release stayed PENDING, and a retry with the same key re-read the
//   rows at no charge.
#include <gtest/gtest.h>

#include <atomic>
#include <new>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/metrics.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

class TotalityTest : public ServerTest {
 protected:
  v1::Dataset NewDataset(v1::NeighbouringRelation relation = v1::ADD_REMOVE, int64_t rows = 300) {
    v1::Dataset dataset;
    EXPECT_TRUE(CreateDataset(1e6, 1e-5, relation, &dataset).ok());
    EXPECT_TRUE(UploadDemoRows(dataset.id(), rows, 7).ok());
    return dataset;
  }

  static v1::ReleaseRequest Charfn(const std::string& dataset_id, const std::string& key) {
    v1::ReleaseRequest request;
    request.set_dataset_id(dataset_id);
    request.set_idempotency_key(key);
    request.set_epsilon(1.0);
    request.mutable_charfn_embedding()->set_num_frequencies(20);
    request.mutable_charfn_embedding()->set_private_length_scale(true);
    return request;
  }

  int EventCount(const std::string& dataset_id) {
    v1::BudgetReport report;
    EXPECT_TRUE(GetBudget(dataset_id, &report).ok());
    return report.events_size();
  }

  // The incidents counted so far for `object` on this server.
  double Incidents(const std::string& object) {
    const std::string text = server_->metrics()->Scrape();
    const std::string series =
        absl::StrCat("dpcurator_failures_after_rows_read_total{object=\"", object, "\"} ");
    const size_t at = text.find(series);
    if (at == std::string::npos) return -1.0;
    return std::stod(text.substr(at + series.size()));
  }

  grpc::Status Step(const std::string& session_id, int64_t step,
                    v1::SessionStepResponse* response) {
    auto analyst = Analyst();
    auto context = analyst.NewContext();
    v1::SessionStepRequest request;
    request.set_session_id(session_id);
    request.set_step(step);
    return analyst.sessions().Step(context.get(), request, response);
  }

  grpc::Status Open(const v1::OpenSessionRequest& request, v1::Session* session) {
    auto analyst = Analyst();
    auto context = analyst.NewContext();
    return analyst.sessions().OpenSession(context.get(), request, session);
  }

  static v1::OpenSessionRequest RffSession(const std::string& dataset_id, double s) {
    v1::OpenSessionRequest request;
    request.set_dataset_id(dataset_id);
    request.set_idempotency_key(absl::StrCat("session-", s));
    request.mutable_params()->set_steps(3);
    request.mutable_params()->set_sampling_rate(0.1);
    request.mutable_params()->set_noise_multiplier(s);
    request.mutable_params()->mutable_rff_embedding()->set_num_frequencies(10);
    return request;
  }

  // Restarts the server with a failpoint that THROWS std::bad_alloc at
  // `point` while armed_, counting the hits.
  void RestartThrowingAt(std::string point) {
    failpoint_ = [this, point](absl::string_view at) -> absl::Status {
      if (at == point && armed_.load()) {
        ++hits_;
        throw std::bad_alloc();
      }
      if (at == point) ++hits_;
      return absl::OkStatus();
    };
    StopServer();
    StartServer();
  }

  std::atomic<bool> armed_{true};
  std::atomic<int> hits_{0};
};

TEST_F(TotalityTest, NoiseRangeIsCheckedBeforeAdmission) {
  const v1::Dataset dataset = NewDataset();
  for (double s : {1e30, 1e100}) {
    v1::ReleaseRequest rff = RffRequest(dataset.id(), 1.0, absl::StrCat("rff-", s));
    rff.set_noise_multiplier(s);
    v1::Release release;
    const grpc::Status status = RequestRelease(rff, &release);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << s << ": " << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), "checked before any charge"))
        << status.error_message();
  }
  for (double s : {1e200, 1e300}) {
    v1::ReleaseRequest charfn = Charfn(dataset.id(), absl::StrCat("charfn-", s));
    charfn.set_noise_multiplier(s);
    v1::Release release;
    const grpc::Status status = RequestRelease(charfn, &release);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << s << ": " << status.error_message();
  }
  // Session steps: refused at open, nothing reserved.
  v1::Session session;
  const grpc::Status opened = Open(RffSession(dataset.id(), 1e30), &session);
  EXPECT_EQ(opened.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << opened.error_message();
  EXPECT_EQ(EventCount(dataset.id()), 0);
  // In range, both kinds run to a release.
  v1::ReleaseRequest charfn = Charfn(dataset.id(), "charfn-ok");
  charfn.set_noise_multiplier(1e6);
  v1::Release release;
  const grpc::Status ok = RequestRelease(charfn, &release);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(Incidents("release"), 0.0);
}

TEST_F(TotalityTest, PrivateLengthScaleNeedsTwoRowsUnderReplaceOne) {
  const v1::Dataset one = NewDataset(v1::REPLACE_ONE, 1);
  v1::Release release;
  const grpc::Status status = RequestRelease(Charfn(one.id(), "n1"), &release);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "at least 2")) << status.error_message();
  EXPECT_EQ(EventCount(one.id()), 0);
  const v1::Dataset two = NewDataset(v1::REPLACE_ONE, 2);
  const grpc::Status ok = RequestRelease(Charfn(two.id(), "n2"), &release);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
}

TEST_F(TotalityTest, WideImageFrequencyMatrixIsRefusedAtPlan) {
  v1::CreateDatasetRequest create;
  create.set_name("wide images");
  create.mutable_budget()->set_epsilon(5.0);
  create.mutable_budget()->set_delta(1e-5);
  auto* image = create.mutable_schema()->add_columns();
  image->set_name("pixels");
  image->set_type(v1::ColumnSchema::IMAGE);
  image->mutable_image()->set_height(1024);
  image->mutable_image()->set_width(1024);
  auto* label = create.mutable_schema()->add_columns();
  label->set_name("label");
  label->set_type(v1::ColumnSchema::CATEGORICAL);
  label->add_categories("a");
  label->add_categories("b");
  create.mutable_schema()->set_label("label");
  v1::Dataset dataset;
  {
    auto curator = Curator();
    auto context = curator.NewContext();
    const grpc::Status created = curator.datasets().CreateDataset(context.get(), create, &dataset);
    ASSERT_TRUE(created.ok()) << created.error_message();
  }
  v1::ReleaseRequest rff;
  rff.set_dataset_id(dataset.id());
  rff.set_idempotency_key("rff");
  rff.set_epsilon(1.0);
  rff.mutable_rff_embedding();  // the image defaults
  v1::ReleaseRequest charfn = rff;
  charfn.set_idempotency_key("charfn");
  charfn.mutable_charfn_embedding();
  for (const v1::ReleaseRequest& request : {rff, charfn}) {
    v1::Release release;
    const grpc::Status status = RequestRelease(request, &release);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), "Lower num_frequencies to at most"))
        << status.error_message();
  }
  EXPECT_EQ(EventCount(dataset.id()), 0);
}

TEST_F(TotalityTest, BadAllocAfterTheReadIsAFinalChargedIncident) {
  RestartThrowingAt("release.after_rows_read");
  const v1::Dataset dataset = NewDataset();
  EXPECT_EQ(Incidents("release"), 0.0);
  v1::Release release;
  const grpc::Status failed = RequestRelease(RffRequest(dataset.id(), 1.0, "k"), &release);
  ASSERT_EQ(failed.error_code(), grpc::StatusCode::INTERNAL) << failed.error_message();
  EXPECT_TRUE(absl::StrContains(failed.error_message(), "incident inc_"))
      << failed.error_message();
  EXPECT_TRUE(absl::StrContains(failed.error_message(), "charge stands"));
  EXPECT_EQ(hits_.load(), 1);
  EXPECT_EQ(Incidents("release"), 1.0);
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  ASSERT_EQ(report.events_size(), 1);
  EXPECT_GT(report.epsilon_spent(), 0.9);
  // The retry with the same key does not recompute, even with the fault
  // gone: FAILED, the same incident, the charge kept, the rows not read.
  armed_ = false;
  const size_t at = failed.error_message().find("inc_");
  const std::string incident = failed.error_message().substr(at, failed.error_message().find(')', at) - at);
  const grpc::Status retried = RequestRelease(RffRequest(dataset.id(), 1.0, "k"), &release);
  EXPECT_EQ(retried.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << retried.error_message();
  EXPECT_TRUE(absl::StrContains(retried.error_message(), incident)) << retried.error_message();
  EXPECT_EQ(hits_.load(), 1);
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  EXPECT_EQ(report.events_size(), 1);
  EXPECT_EQ(report.events(0).refund_of(), 0);
}

TEST_F(TotalityTest, BadAllocAfterTheReadIsAStepIncident) {
  RestartThrowingAt("session_step.after_rows_read");
  const v1::Dataset dataset = NewDataset();
  v1::Session session;
  ASSERT_TRUE(Open(RffSession(dataset.id(), 2.0), &session).ok());
  v1::SessionStepResponse response;
  const grpc::Status failed = Step(session.id(), 0, &response);
  ASSERT_EQ(failed.error_code(), grpc::StatusCode::INTERNAL) << failed.error_message();
  EXPECT_TRUE(absl::StrContains(failed.error_message(), "incident inc_"))
      << failed.error_message();
  EXPECT_EQ(Incidents("session_step"), 1.0);
  EXPECT_EQ(hits_.load(), 1);
  // The same index replays the stored incident; the rows are not read again.
  armed_ = false;
  const grpc::Status again = Step(session.id(), 0, &response);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(again.error_message(), failed.error_message());
  EXPECT_EQ(hits_.load(), 1);
  // The next index runs; the failed one counted as used.
  ASSERT_TRUE(Step(session.id(), 1, &response).ok());
  EXPECT_EQ(response.session().steps_used(), 2);
  EXPECT_EQ(Incidents("session_step"), 1.0);
}

}  // namespace
}  // namespace dpcurator::server::testing
