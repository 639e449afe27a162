// kernel_witness sessions through the server (issue 16; docs/privacy.md
// 2.10): the reservation is the subsampled Gaussian's value for (q, sigma,
// T), the answer is the core unit's witness, bad declarations and queries
// are refused with clear errors before any row is read, failures after
// are not refunded, and the client oracle retries on the same index.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "client/oracles/kernel_oracle.h"
#include "core/data/demo.h"
#include "core/data/encoder.h"
#include "core/privacy/conversion.h"
#include "core/privacy/events.h"
#include "core/release/encoded_rows.h"
#include "core/release/kernel_witness.h"
#include "server/plans.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

constexpr int64_t kWitnessRows = 200;
constexpr uint64_t kWitnessRowSeed = 23;

class KernelWitnessSessionTest : public ServerTest {
 protected:
  static v1::KernelWitnessParams Kernel(bool conditional = false) {
    v1::KernelWitnessParams kernel;
    kernel.set_conditional(conditional);
    kernel.set_expected_batch_size(20.0);
    kernel.set_max_points(8);
    return kernel;
  }

  v1::OpenSessionRequest OpenRequest(const std::string& dataset_id, int64_t steps, double q,
                                     double noise_multiplier,
                                     const v1::KernelWitnessParams& kernel = Kernel()) {
    v1::OpenSessionRequest request;
    request.set_dataset_id(dataset_id);
    request.set_idempotency_key("kernel-key");
    request.mutable_params()->set_steps(steps);
    request.mutable_params()->set_sampling_rate(q);
    request.mutable_params()->set_noise_multiplier(noise_multiplier);
    *request.mutable_params()->mutable_kernel_witness() = kernel;
    return request;
  }

  grpc::Status Open(const v1::OpenSessionRequest& request, v1::Session* session) {
    client::Connection analyst = Analyst();
    auto context = analyst.NewContext();
    return analyst.sessions().OpenSession(context.get(), request, session);
  }

  grpc::Status RunStep(const std::string& session_id, int64_t step, const Eigen::MatrixXd& points,
                       const Eigen::VectorXi& labels, v1::SessionStepResponse* response,
                       int num_points = -1) {
    client::Connection analyst = Analyst();
    v1::SessionStepRequest request;
    request.set_session_id(session_id);
    request.set_step(step);
    v1::KernelWitnessQuery& query = *request.mutable_kernel_witness();
    query.set_num_points(num_points >= 0 ? num_points : static_cast<int>(points.rows()));
    for (Eigen::Index j = 0; j < points.rows(); ++j) {
      for (Eigen::Index a = 0; a < points.cols(); ++a) {
        query.add_points(static_cast<float>(points(j, a)));
      }
    }
    for (Eigen::Index j = 0; j < labels.size(); ++j) query.add_labels(labels(j));
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

  int64_t StepsUsed(const std::string& session_id) {
    client::Connection analyst = Analyst();
    v1::GetSessionRequest request;
    request.set_session_id(session_id);
    v1::Session got;
    auto context = analyst.NewContext();
    EXPECT_TRUE(analyst.sessions().GetSession(context.get(), request, &got).ok());
    return got.steps_used();
  }

  v1::Dataset MakeDataset(v1::NeighbouringRelation relation = v1::ADD_REMOVE) {
    v1::Dataset dataset;
    EXPECT_TRUE(CreateDataset(100.0, 1e-5, relation, &dataset).ok());
    EXPECT_TRUE(UploadDemoRows(dataset.id(), kWitnessRows, kWitnessRowSeed).ok());
    return dataset;
  }

  double EpsilonSpent(const std::string& dataset_id) {
    v1::BudgetReport budget;
    EXPECT_TRUE(GetBudget(dataset_id, &budget).ok());
    return budget.epsilon_spent();
  }

  // M points in [0, 1]^d from a fixed public stream.
  static Eigen::MatrixXd Points(int m, int d, uint64_t seed) {
    PublicRng rng(seed);
    Eigen::MatrixXd points(m, d);
    for (int j = 0; j < m; ++j) {
      for (int a = 0; a < d; ++a) points(j, a) = rng.Uniform();
    }
    return points;
  }
};

// Done-when: the accountant's charge per step is the SGM value for (q, s):
// the session reserves T subsampled discrete Gaussian steps (the discrete
// bound of docs/privacy.md 4.7), and with --epsilon the calibrated sigma's
// reservation is at most the target.
TEST_F(KernelWitnessSessionTest, ReservationIsTheSubsampledGaussianOfQSigmaT) {
  const v1::Dataset dataset = MakeDataset();
  v1::Session session;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 2000, 0.05, 1.3), &session).ok());
  EXPECT_EQ(session.steps_reserved(), 2000);
  auto step = privacy::PrivacyEvent::PoissonSampledDiscreteGaussian(0.05, 1.3);
  auto all = privacy::PrivacyEvent::SelfCompose(*step, 2000);
  const double expected = privacy::ComputeEpsilonReport(*all, 1e-5)->epsilon;
  EXPECT_NEAR(session.epsilon_spent_total(), expected, 1e-9);
  EXPECT_NEAR(EpsilonSpent(dataset.id()), expected, 1e-9);
  // The resolved kernel: default bandwidths sqrt(d) * {1/64 .. 1/4}, d and
  // the class count from the public schema.
  const data::Schema schema = data::DemoSchema();
  const int d = data::FeatureLayout::ForFeatures(schema).total_dim();
  EXPECT_EQ(session.params().kernel_witness().dimension(), d);
  EXPECT_EQ(session.params().kernel_witness().num_classes(), schema.num_classes());
  ASSERT_EQ(session.params().kernel_witness().bandwidths_size(), 5);
  EXPECT_NEAR(session.params().kernel_witness().bandwidths(0), std::sqrt(d) / 64.0, 1e-12);
  v1::Session closed;
  ASSERT_TRUE(Close(session.id(), &closed).ok());
  EXPECT_NEAR(EpsilonSpent(dataset.id()), 0.0, 1e-9);

  // Calibrated to a target epsilon: charged at most that.
  v1::OpenSessionRequest request = OpenRequest(dataset.id(), 200, 0.1, 1.0);
  request.set_idempotency_key("kernel-key-eps");
  request.mutable_params()->set_epsilon(1.0);
  ASSERT_TRUE(Open(request, &session).ok());
  EXPECT_LE(session.epsilon_spent_total(), 1.0 + 1e-9);
  EXPECT_GT(session.epsilon_spent_total(), 0.9);
  auto calibrated = privacy::PrivacyEvent::SelfCompose(
      *privacy::PrivacyEvent::PoissonSampledDiscreteGaussian(0.1, session.noise_multiplier()),
      200);
  EXPECT_NEAR(session.epsilon_spent_total(),
              privacy::ComputeEpsilonReport(*calibrated, 1e-5)->epsilon, 1e-9);
}

// With no noise and q = 1 the answer is the witness of all rows over the
// public divisor, computed by the core on the same rows.
TEST_F(KernelWitnessSessionTest, AnswerIsTheWitnessOverThePublicDivisor) {
  StopServer();
  noise_source_ = []() -> absl::StatusOr<std::unique_ptr<privacy::NoiseSource>> {
    return std::unique_ptr<privacy::NoiseSource>(new privacy::ZeroNoiseSource());
  };
  StartServer();
  const v1::Dataset dataset = MakeDataset();
  v1::Session session;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 2, 1.0, 1.0), &session).ok());
  const int d = session.params().kernel_witness().dimension();
  const Eigen::MatrixXd points = Points(5, d, 3).cast<float>().cast<double>();
  v1::SessionStepResponse response;
  ASSERT_TRUE(RunStep(session.id(), 0, points, Eigen::VectorXi(), &response).ok());
  ASSERT_EQ(response.answer_case(), v1::SessionStepResponse::kWitness);
  EXPECT_EQ(response.witness().divisor(), 20.0);
  ASSERT_EQ(response.witness().values_size(), 5);
  ASSERT_EQ(response.witness().gradients_size(), 5 * d);

  const data::Schema schema = data::DemoSchema();
  const release::EncodedRows rows =
      release::EncodeRows(schema, data::GenerateDemoTable(kWitnessRows, kWitnessRowSeed));
  const std::vector<double> bandwidths(session.params().kernel_witness().bandwidths().begin(),
                                       session.params().kernel_witness().bandwidths().end());
  Eigen::VectorXd values;
  Eigen::MatrixXd gradients;
  release::KernelWitness(rows.features, points, bandwidths, 20.0, &values, &gradients);
  ASSERT_GT(values.norm(), 0.0);
  for (int j = 0; j < 5; ++j) {
    EXPECT_NEAR(response.witness().values(j), values(j), 1e-5 * (1.0 + std::abs(values(j))));
    for (int a = 0; a < d; ++a) {
      EXPECT_NEAR(response.witness().gradients(j * d + a), gradients(j, a),
                  1e-5 * (1.0 + std::abs(gradients(j, a))));
    }
  }
}

TEST_F(KernelWitnessSessionTest, BadSessionsAreRefusedBeforeAdmission) {
  const v1::Dataset dataset = MakeDataset();
  auto refused = [&](const v1::KernelWitnessParams& kernel, const std::string& says) {
    v1::Session session;
    const grpc::Status status = Open(OpenRequest(dataset.id(), 10, 0.1, 1.0, kernel), &session);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << says;
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
  };
  v1::KernelWitnessParams kernel = Kernel();
  kernel.set_parallel(true);
  refused(kernel, "parallel");
  kernel = Kernel();
  kernel.set_max_points(65);  // unconditional: one GP factor, at most 64
  refused(kernel, "max_points");
  kernel = Kernel(/*conditional=*/true);
  kernel.set_max_points(1025);  // conditional: at most 1024 (64 per label)
  refused(kernel, "max_points");
  kernel = Kernel();
  kernel.set_expected_batch_size(0.0);
  refused(kernel, "batch_divisor");
  kernel = Kernel();
  kernel.add_bandwidths(-1.0);
  refused(kernel, "bandwidths");
  EXPECT_EQ(EpsilonSpent(dataset.id()), 0.0);
}

TEST_F(KernelWitnessSessionTest, BadQueriesAreRefusedBeforeRowsAndFailuresAfterAreNotRefunded) {
  const v1::Dataset dataset = MakeDataset();
  v1::Session session;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 4, 0.1, 1.0, Kernel(/*conditional=*/true)), &session)
                  .ok());
  const int d = session.params().kernel_witness().dimension();
  const int classes = session.params().kernel_witness().num_classes();
  const Eigen::MatrixXd points = Points(4, d, 5);
  const Eigen::VectorXi labels = Eigen::VectorXi::Zero(4);
  v1::SessionStepResponse response;
  auto refused = [&](grpc::Status status, const std::string& says) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << says;
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
  };
  // Wrong dimension.
  refused(RunStep(session.id(), 0, Points(4, d + 1, 5), labels, &response),
          std::to_string(d) + " encoded feature dimensions");
  // Too many points for the session's max_points (8).
  refused(RunStep(session.id(), 0, Points(9, d, 5), Eigen::VectorXi::Zero(9), &response),
          "1 to 8");
  // NaN.
  Eigen::MatrixXd nan = points;
  nan(2, 1) = std::numeric_limits<double>::quiet_NaN();
  refused(RunStep(session.id(), 0, nan, labels, &response), "finite");
  // Labels out of range, and missing.
  Eigen::VectorXi bad = labels;
  bad(3) = classes;
  refused(RunStep(session.id(), 0, points, bad, &response), "label 3");
  refused(RunStep(session.id(), 0, points, Eigen::VectorXi(), &response), "one label per");
  // The rff query on a kernel_witness session.
  {
    client::Connection analyst = Analyst();
    v1::SessionStepRequest request;
    request.set_session_id(session.id());
    request.set_step(0);
    request.mutable_rff_embedding();
    auto context = analyst.NewContext();
    refused(analyst.sessions().Step(context.get(), request, &response), "kernel_witness query");
  }
  EXPECT_EQ(StepsUsed(session.id()), 0);  // none of them read a row

  // A failure after the rows were read: an incident id only, and the step
  // is used (its reservation never comes back).
  std::atomic<bool> armed{true};
  failpoint_ = [&armed](absl::string_view at) {
    return at == "session_step.after_rows_read" && armed.load()
               ? absl::InternalError("boom 12345 secret")
               : absl::OkStatus();
  };
  StopServer();
  StartServer();
  grpc::Status status = RunStep(session.id(), 0, points, labels, &response);
  EXPECT_NE(status.error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(status.error_message().find("secret"), std::string::npos);
  armed = false;
  ASSERT_TRUE(RunStep(session.id(), 1, points, labels, &response).ok());
  EXPECT_EQ(response.session().steps_used(), 2);
  // Only the latest answer is kept; steps run in order.
  status = RunStep(session.id(), 3, points, labels, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("kernel_witness steps run in order"), std::string::npos);
  ASSERT_TRUE(RunStep(session.id(), 2, points, labels, &response).ok());
  status = RunStep(session.id(), 1, points, labels, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("latest"), std::string::npos);
  ASSERT_TRUE(RunStep(session.id(), 3, points, labels, &response).ok());
  // Beyond the reservation.
  EXPECT_EQ(RunStep(session.id(), 4, points, labels, &response).error_code(),
            grpc::StatusCode::OUT_OF_RANGE);
  v1::Session closed;
  ASSERT_TRUE(Close(session.id(), &closed).ok());
  EXPECT_EQ(closed.steps_used(), 4);
  auto step = privacy::PrivacyEvent::PoissonSampledDiscreteGaussian(0.1, 1.0);
  auto four = privacy::PrivacyEvent::SelfCompose(*step, 4);
  EXPECT_NEAR(EpsilonSpent(dataset.id()), privacy::ComputeEpsilonReport(*four, 1e-5)->epsilon,
              1e-9);
  // After close.
  status = RunStep(session.id(), 4, points, labels, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("CLOSED"), std::string::npos);
  StopServer();  // before `armed` goes out of scope
}

TEST_F(KernelWitnessSessionTest, ReplaceOneDividesByTheFixedBatchSize) {
  const v1::Dataset dataset = MakeDataset(v1::REPLACE_ONE);
  v1::Session session;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 2, 0.1, 1.0), &session).ok());
  EXPECT_EQ(session.params().kernel_witness().expected_batch_size(), 20.0);  // floor(0.1 * 200)
  auto step = privacy::PrivacyEvent::SampledWithoutReplacementDiscreteGaussian(
      session.params().sampling_rate(), 1.0);
  auto two = privacy::PrivacyEvent::SelfCompose(*step, 2);
  EXPECT_NEAR(session.epsilon_spent_total(), privacy::ComputeEpsilonReport(*two, 1e-5)->epsilon,
              1e-9);
  const int d = session.params().kernel_witness().dimension();
  v1::SessionStepResponse response;
  ASSERT_TRUE(RunStep(session.id(), 0, Points(3, d, 1), Eigen::VectorXi(), &response).ok());
  EXPECT_EQ(response.witness().values_size(), 3);
}

// Issue 23, 0(c): one expression for the fixed batch size and the
// divisor. At q = 0.29 and n = 100, floor(q n + 1e-9) = 29 (the divisor)
// and floor(q n) = 28 (the batch) used to differ, and every step failed
// after the rows were read, charged. Now both are FixedBatchSize(q, n).
TEST_F(KernelWitnessSessionTest, ReplaceOneBatchAndDivisorAgreeAtEveryRate) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(100.0, 1e-5, v1::REPLACE_ONE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 100, kWitnessRowSeed).ok());
  v1::OpenSessionRequest request = OpenRequest(dataset.id(), 2, 0.29, 1.0);
  v1::Session session;
  const grpc::Status opened = Open(request, &session);
  ASSERT_TRUE(opened.ok()) << opened.error_message();
  const double divisor = session.params().kernel_witness().expected_batch_size();
  EXPECT_EQ(divisor, static_cast<double>(FixedBatchSize(session.params().sampling_rate(), 100)));
  EXPECT_EQ(divisor, static_cast<double>(FixedBatchSize(0.29, 100)));
  const int d = session.params().kernel_witness().dimension();
  for (int64_t step = 0; step < 2; ++step) {
    v1::SessionStepResponse response;
    const grpc::Status status =
        RunStep(session.id(), step, Points(3, d, 1 + step), Eigen::VectorXi(), &response);
    ASSERT_TRUE(status.ok()) << "step " << step << ": " << status.error_message();
    EXPECT_EQ(response.witness().divisor(), divisor);
  }
  // The function is a fixed point of its resolved rate for every m and n.
  for (int64_t n : {1, 2, 3, 7, 100, 1000, 60000, 1000003}) {
    for (int64_t m = 1; m <= n; m += std::max<int64_t>(1, n / 97)) {
      const double rate = static_cast<double>(m) / static_cast<double>(n);
      EXPECT_EQ(FixedBatchSize(rate, n), m) << m << " / " << n;
    }
  }
}

// Issue 23, 0(b): a declared expected batch size of 1e305 (ADD_REMOVE) was
// admitted and every step failed after the read (s / m off the noise
// grid); a multiplier whose s * Delta leaves the grid likewise. Both are
// refused at open now, nothing reserved.
TEST_F(KernelWitnessSessionTest, DivisorAndNoiseRangeAreCheckedAtOpen) {
  const v1::Dataset dataset = MakeDataset();
  v1::KernelWitnessParams kernel = Kernel();
  kernel.set_expected_batch_size(1e305);
  v1::Session session;
  grpc::Status status = Open(OpenRequest(dataset.id(), 10, 0.1, 1.0, kernel), &session);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  for (double s : {1e30, 1e300}) {
    status = Open(OpenRequest(dataset.id(), 10, 0.1, s), &session);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s;
    EXPECT_NE(status.error_message().find("checked before any charge"), std::string::npos)
        << status.error_message();
  }
  EXPECT_EQ(EpsilonSpent(dataset.id()), 0.0);
  // The largest accepted divisor still opens and steps.
  kernel.set_expected_batch_size(0x1.0p40);
  v1::OpenSessionRequest largest = OpenRequest(dataset.id(), 1, 0.1, 1.0, kernel);
  largest.set_idempotency_key("largest-divisor");
  ASSERT_TRUE(Open(largest, &session).ok());
  const int d = session.params().kernel_witness().dimension();
  v1::SessionStepResponse response;
  status = RunStep(session.id(), 0, Points(3, d, 4), Eigen::VectorXi(), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(KernelWitnessSessionTest, TheOracleStepsResumesAndCloses) {
  const v1::Dataset dataset = MakeDataset();
  client::Connection analyst = Analyst();
  client::KernelSessionOptions options;
  options.dataset_id = dataset.id();
  options.sampling_rate = 0.1;
  options.epsilon = 2.0;
  options.steps = 10;
  options.kernel = Kernel();
  auto oracle = client::KernelOracle::Open(&analyst, options);
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  const int d = oracle->kernel().dimension();
  const Eigen::MatrixXd points = Points(6, d, 9);
  auto a0 = oracle->Step(points, Eigen::VectorXi());
  ASSERT_TRUE(a0.ok()) << a0.status();
  EXPECT_EQ(a0->values.size(), 6);
  EXPECT_EQ(a0->gradients.rows(), 6);
  EXPECT_EQ(a0->gradients.cols(), d);
  EXPECT_EQ(oracle->next_step(), 1);
  ASSERT_TRUE(oracle->Step(points, Eigen::VectorXi()).ok());
  EXPECT_EQ(oracle->session().steps_used(), 2);
  EXPECT_FALSE(oracle->Step(Points(6, d + 2, 9), Eigen::VectorXi()).ok());
  // Reopening with the same key replays the session (no second charge);
  // a resumed oracle continues at the next index.
  options.idempotency_key = "kernel-oracle-key";
  auto keyed = client::KernelOracle::Open(&analyst, options);
  ASSERT_TRUE(keyed.ok());
  const double spent = EpsilonSpent(dataset.id());
  auto again = client::KernelOracle::Open(&analyst, options);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->session().id(), keyed->session().id());
  EXPECT_NEAR(EpsilonSpent(dataset.id()), spent, 1e-12);
  auto resumed = client::KernelOracle::Resume(&analyst, oracle->session().id());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->next_step(), 2);
  ASSERT_TRUE(resumed->Step(points, Eigen::VectorXi()).ok());
  auto closed = resumed->Close();
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(closed->steps_used(), 3);
  EXPECT_EQ(closed->state(), "CLOSED");
}

}  // namespace
}  // namespace dpcurator::server::testing
