// dp_sgd sessions through the server (issue 15; docs/privacy.md 2.9): the
// charge of the session path, the answer end to end, bounded storage, the
// per-session rate, the client oracle, and every bad session refused with a
// clear error and no refund after rows were read.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "client/oracles/dp_sgd_oracle.h"
#include "core/data/demo.h"
#include "core/privacy/conversion.h"
#include "core/privacy/events.h"
#include "core/release/dp_sgd.h"
#include "core/release/encoded_rows.h"
#include "server/plans.h"
#include "server/step_rate.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

constexpr int64_t kDpSgdRows = 300;
constexpr uint64_t kDpSgdRowSeed = 17;

class DpSgdSessionTest : public ServerTest {
 protected:
  static v1::DpSgdParams Network() {
    v1::DpSgdParams network;
    network.add_hidden(8);
    network.add_hidden(3);
    network.add_hidden(8);
    network.set_activation("tanh");
    network.set_loss(v1::RECONSTRUCTION_BCE);
    network.set_clip_norm(0.5);
    network.set_expected_batch_size(30.0);
    return network;
  }

  v1::OpenSessionRequest OpenRequest(const std::string& dataset_id, int64_t steps, double q,
                                     double noise_multiplier,
                                     const v1::DpSgdParams& network = Network()) {
    v1::OpenSessionRequest request;
    request.set_dataset_id(dataset_id);
    request.set_idempotency_key("dp-sgd-key");
    request.mutable_params()->set_steps(steps);
    request.mutable_params()->set_sampling_rate(q);
    request.mutable_params()->set_noise_multiplier(noise_multiplier);
    *request.mutable_params()->mutable_dp_sgd() = network;
    return request;
  }

  grpc::Status Open(const v1::OpenSessionRequest& request, v1::Session* session) {
    client::Connection analyst = Analyst();
    auto context = analyst.NewContext();
    return analyst.sessions().OpenSession(context.get(), request, session);
  }

  grpc::Status RunStep(const std::string& session_id, int64_t step,
                       const Eigen::VectorXf& parameters, v1::SessionStepResponse* response) {
    client::Connection analyst = Analyst();
    v1::SessionStepRequest request;
    request.set_session_id(session_id);
    request.set_step(step);
    request.mutable_dp_sgd()->mutable_parameters()->Add(parameters.data(),
                                                        parameters.data() + parameters.size());
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

  v1::Dataset MakeDataset(double cap = 100.0,
                          v1::NeighbouringRelation relation = v1::ADD_REMOVE) {
    v1::Dataset dataset;
    EXPECT_TRUE(CreateDataset(cap, 1e-5, relation, &dataset).ok());
    EXPECT_TRUE(UploadDemoRows(dataset.id(), kDpSgdRows, kDpSgdRowSeed).ok());
    return dataset;
  }

  // The trainer's network for the session's resolved declaration.
  static nn::Mlp TrainerNetwork(const v1::Session& session, uint64_t seed) {
    release::DpSgdKind::Params params;
    for (int width : session.params().dp_sgd().hidden()) params.hidden.push_back(width);
    params.activation = *nn::ParseActivation(session.params().dp_sgd().activation());
    params.loss = release::DpSgdLoss::kReconstructionBce;
    nn::MlpOptions options =
        release::DpSgdKind::Network(params, session.params().dp_sgd().row_width());
    options.seed = seed;
    return *nn::Mlp::Create(options);
  }

  double EpsilonSpent(const std::string& dataset_id) {
    v1::BudgetReport budget;
    EXPECT_TRUE(GetBudget(dataset_id, &budget).ok());
    return budget.epsilon_spent();
  }
};

// Done-when item 1. PRIVACY.md's vector (q = 0.01, s = 1.1, T = 10000,
// delta 1e-5 -> 5.63201) is dp_accounting's CONTINUOUS Poisson-subsampled
// Gaussian. Session steps draw the grid's discrete Gaussian, and the session
// path has no continuous mode: it charges the bound proven for the discrete
// mechanism (docs/privacy.md 4.7), 5.6543 at these parameters. So the
// session's reservation is pinned to the discrete event's value (docs 3.5)
// and shown to be the continuous vector plus the small, documented cost of
// the discrete bound; the continuous vector itself is pinned through the
// accountant's continuous event on the same (q, s, T).
TEST_F(DpSgdSessionTest, ChargeIsThePoissonSubsampledGaussianOfTheTestVector) {
  const v1::Dataset dataset = MakeDataset();
  v1::Session session;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 10000, 0.01, 1.1), &session).ok());
  EXPECT_EQ(session.steps_reserved(), 10000);
  EXPECT_EQ(session.noise_multiplier(), 1.1);
  const double charged = session.epsilon_spent_total();
  EXPECT_NEAR(EpsilonSpent(dataset.id()), charged, 1e-12);

  auto discrete_step = privacy::PrivacyEvent::PoissonSampledDiscreteGaussian(0.01, 1.1);
  auto discrete = privacy::PrivacyEvent::SelfCompose(*discrete_step, 10000);
  const double discrete_eps = privacy::ComputeEpsilonReport(*discrete, 1e-5)->epsilon;
  EXPECT_NEAR(charged, discrete_eps, 1e-9);
  EXPECT_NEAR(charged, 5.6543, 5e-5);  // docs/privacy.md 3.5, 4.7

  auto continuous_step = privacy::PrivacyEvent::PoissonSampledGaussian(0.01, 1.1);
  auto continuous = privacy::PrivacyEvent::SelfCompose(*continuous_step, 10000);
  const double continuous_eps = privacy::ComputeEpsilonReport(*continuous, 1e-5)->epsilon;
  EXPECT_NEAR(continuous_eps, 5.63201, 1e-5);  // PRIVACY.md, dp_accounting
  EXPECT_GE(charged, continuous_eps);
  EXPECT_LE(charged, continuous_eps * 1.005);

  // Closing after no step refunds everything.
  v1::Session closed;
  ASSERT_TRUE(Close(session.id(), &closed).ok());
  EXPECT_NEAR(EpsilonSpent(dataset.id()), 0.0, 1e-9);
}

// With no noise and q = 1 the answer is exactly the clipped sum of every
// row over the divisor, computed by the core unit on the same rows: the
// wiring (row layout, parameter order, loss, divisor) is the unit's.
TEST_F(DpSgdSessionTest, AnswerIsTheClippedSumOverTheDivisor) {
  StopServer();
  noise_source_ = []() -> absl::StatusOr<std::unique_ptr<privacy::NoiseSource>> {
    return std::unique_ptr<privacy::NoiseSource>(new privacy::ZeroNoiseSource());
  };
  StartServer();
  const v1::Dataset dataset = MakeDataset();
  v1::Session session;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 3, 1.0, 1.0), &session).ok());
  const data::Schema schema = data::DemoSchema();
  ASSERT_EQ(session.params().dp_sgd().row_width(), release::DpSgdRowWidth(schema));
  const nn::Mlp mlp = TrainerNetwork(session, 5);
  ASSERT_EQ(session.params().dp_sgd().num_parameters(), mlp.num_parameters());
  const Eigen::VectorXf parameters = mlp.parameters().cast<float>();

  v1::SessionStepResponse response;
  ASSERT_TRUE(RunStep(session.id(), 0, parameters, &response).ok());
  ASSERT_EQ(response.answer_case(), v1::SessionStepResponse::kGradient);
  EXPECT_EQ(response.gradient().divisor(), 30.0);
  ASSERT_EQ(response.gradient().gradient_size(), mlp.num_parameters());

  release::DpSgdKind::Params params;
  params.hidden = {8, 3, 8};
  params.activation = nn::Activation::kTanh;
  params.loss = release::DpSgdLoss::kReconstructionBce;
  params.clip_norm = 0.5;
  params.expected_batch_size = 30.0;
  const nn::Mlp sent =
      *nn::Mlp::FromParameters(release::DpSgdKind::Network(params, release::DpSgdRowWidth(schema)),
                               parameters.cast<double>());
  const release::EncodedRows rows =
      release::EncodeRows(schema, data::GenerateDemoTable(kDpSgdRows, kDpSgdRowSeed));
  nn::PerExampleWorkspace workspace;
  Eigen::VectorXd sum;
  ASSERT_TRUE(release::DpSgdKind::ClippedGradientSum(params, sent, release::DpSgdRows(rows),
                                                     &workspace, &sum)
                  .ok());
  double worst = 0.0;
  for (int i = 0; i < response.gradient().gradient_size(); ++i) {
    worst = std::max(worst, std::abs(response.gradient().gradient(i) - sum(i) / 30.0));
  }
  EXPECT_LE(worst, 1e-6 * std::max(1.0, sum.lpNorm<Eigen::Infinity>()));
  EXPECT_GT(sum.norm(), 0.0);
}

TEST_F(DpSgdSessionTest, OnlyTheLatestAnswerIsKeptAndStepsRunInOrder) {
  const v1::Dataset dataset = MakeDataset();
  v1::Session session;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 4, 0.2, 1.5), &session).ok());
  const Eigen::VectorXf parameters = TrainerNetwork(session, 1).parameters().cast<float>();
  v1::SessionStepResponse first, again, second, skipped, old;
  ASSERT_TRUE(RunStep(session.id(), 0, parameters, &first).ok());
  EXPECT_FALSE(first.replayed());
  // A retry of the latest index replays it, whatever parameters it carries.
  ASSERT_TRUE(RunStep(session.id(), 0, parameters * 2.0f, &again).ok());
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.gradient().SerializeAsString(), first.gradient().SerializeAsString());
  EXPECT_EQ(again.session().steps_used(), 1);
  // Out of order: refused before any row is read, nothing used.
  grpc::Status status = RunStep(session.id(), 2, parameters, &skipped);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("next step"), std::string::npos);
  ASSERT_TRUE(RunStep(session.id(), 1, parameters, &second).ok());
  EXPECT_EQ(second.session().steps_used(), 2);
  EXPECT_NE(second.gradient().SerializeAsString(), first.gradient().SerializeAsString());
  // Step 0's answer was dropped when step 1 was stored.
  status = RunStep(session.id(), 0, parameters, &old);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("latest"), std::string::npos);
  // Steps beyond the reservation.
  ASSERT_TRUE(RunStep(session.id(), 2, parameters, &skipped).ok());
  ASSERT_TRUE(RunStep(session.id(), 3, parameters, &skipped).ok());
  EXPECT_EQ(RunStep(session.id(), 4, parameters, &skipped).error_code(),
            grpc::StatusCode::OUT_OF_RANGE);
  // The dropped answers still count as used steps: closing refunds none.
  const double reserved = EpsilonSpent(dataset.id());
  v1::Session closed;
  ASSERT_TRUE(Close(session.id(), &closed).ok());
  EXPECT_EQ(closed.steps_used(), 4);
  EXPECT_NEAR(EpsilonSpent(dataset.id()), reserved, 1e-12);
  // Steps after close.
  status = RunStep(session.id(), 4, parameters, &skipped);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("CLOSED"), std::string::npos);
}

TEST_F(DpSgdSessionTest, BadSessionsAreRefusedBeforeAdmission) {
  const v1::Dataset dataset = MakeDataset();
  auto refused = [&](const v1::DpSgdParams& network, const std::string& says) {
    v1::Session session;
    const grpc::Status status = Open(OpenRequest(dataset.id(), 10, 0.1, 1.0, network), &session);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << says;
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
  };
  v1::DpSgdParams network = Network();
  network.clear_hidden();
  network.add_hidden(4096);
  network.add_hidden(4096);
  refused(network, "parameters");
  network = Network();
  for (int i = 0; i < 9; ++i) network.add_hidden(4);
  refused(network, "hidden layers");
  network = Network();
  network.add_hidden(5000);
  refused(network, "4096");
  network = Network();
  network.set_activation("swish");
  refused(network, "relu, leaky_relu or tanh");
  network = Network();
  network.set_loss(v1::DP_SGD_LOSS_UNSPECIFIED);
  refused(network, "RECONSTRUCTION_BCE");
  network = Network();
  network.set_clip_norm(std::numeric_limits<double>::quiet_NaN());
  refused(network, "clip_norm");
  network = Network();
  network.set_expected_batch_size(0.0);
  refused(network, "expected_batch_size");
  // Issue 23: each of these was admitted, and then every step failed after
  // reading its batch, charged.
  network = Network();
  network.set_clip_norm(1e-305);
  refused(network, "clip_norm");
  for (const double divisor : {1e-305, 0.5, 1e305}) {
    network = Network();
    network.set_expected_batch_size(divisor);
    refused(network, "expected_batch_size");
  }
  for (const double s : {1e30, 1e100, 1e300}) {
    v1::Session session;
    const grpc::Status status = Open(OpenRequest(dataset.id(), 10, 0.1, s), &session);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s;
    EXPECT_NE(status.error_message().find("before any charge"), std::string::npos)
        << status.error_message();
  }
  // Nothing was charged for any of them.
  EXPECT_EQ(EpsilonSpent(dataset.id()), 0.0);
}

TEST_F(DpSgdSessionTest, BadStepsAreRefusedBeforeRowsAndFailuresAfterAreNotRefunded) {
  const v1::Dataset dataset = MakeDataset();
  v1::Session session;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 5, 0.1, 1.0), &session).ok());
  const Eigen::VectorXf parameters = TrainerNetwork(session, 2).parameters().cast<float>();
  v1::SessionStepResponse response;
  // Wrong length: says the expected one.
  grpc::Status status = RunStep(session.id(), 0, parameters.head(parameters.size() - 1),
                                &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find(std::to_string(parameters.size())), std::string::npos);
  // NaN.
  Eigen::VectorXf nan = parameters;
  nan(1) = std::numeric_limits<float>::quiet_NaN();
  status = RunStep(session.id(), 0, nan, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("NaN"), std::string::npos);
  // Beyond the magnitude bound that keeps the step's arithmetic finite
  // (issue 23's row oracle used 3e38): refused before any row is read.
  Eigen::VectorXf huge = parameters;
  huge(2) = 3e38f;
  status = RunStep(session.id(), 0, huge, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("2^20"), std::string::npos) << status.error_message();
  // The rff query on a dp_sgd session.
  {
    client::Connection analyst = Analyst();
    v1::SessionStepRequest request;
    request.set_session_id(session.id());
    request.set_step(0);
    request.mutable_rff_embedding();
    auto context = analyst.NewContext();
    EXPECT_EQ(analyst.sessions().Step(context.get(), request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  v1::Session got;
  {
    client::Connection analyst = Analyst();
    v1::GetSessionRequest request;
    request.set_session_id(session.id());
    auto context = analyst.NewContext();
    ASSERT_TRUE(analyst.sessions().GetSession(context.get(), request, &got).ok());
  }
  EXPECT_EQ(got.steps_used(), 0);  // none of them read a row

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
  status = RunStep(session.id(), 0, parameters, &response);
  EXPECT_NE(status.error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(status.error_message().find("secret"), std::string::npos);
  EXPECT_EQ(status.error_message().find("12345"), std::string::npos);
  armed = false;
  ASSERT_TRUE(RunStep(session.id(), 1, parameters, &response).ok());
  EXPECT_EQ(response.session().steps_used(), 2);
  v1::Session closed;
  ASSERT_TRUE(Close(session.id(), &closed).ok());
  EXPECT_EQ(closed.steps_used(), 2);
  auto step = privacy::PrivacyEvent::PoissonSampledDiscreteGaussian(0.1, 1.0);
  auto two = privacy::PrivacyEvent::SelfCompose(*step, 2);
  EXPECT_NEAR(EpsilonSpent(dataset.id()), privacy::ComputeEpsilonReport(*two, 1e-5)->epsilon,
              1e-9);
  StopServer();  // before `armed` goes out of scope
}

TEST_F(DpSgdSessionTest, ReplaceOneDatasetsRunFixedSizeBatchesWithTwiceTheSensitivity) {
  const v1::Dataset dataset = MakeDataset(100.0, v1::REPLACE_ONE);
  v1::Session session;
  ASSERT_TRUE(Open(OpenRequest(dataset.id(), 3, 0.1, 1.0), &session).ok());
  // Charged as the without-replacement discrete event at the resolved rate.
  auto step = privacy::PrivacyEvent::SampledWithoutReplacementDiscreteGaussian(
      session.params().sampling_rate(), 1.0);
  auto three = privacy::PrivacyEvent::SelfCompose(*step, 3);
  EXPECT_NEAR(session.epsilon_spent_total(),
              privacy::ComputeEpsilonReport(*three, 1e-5)->epsilon, 1e-9);
  v1::SessionStepResponse response;
  ASSERT_TRUE(RunStep(session.id(), 0, TrainerNetwork(session, 3).parameters().cast<float>(),
                      &response)
                  .ok());
  EXPECT_EQ(response.gradient().gradient_size(), session.params().dp_sgd().num_parameters());
}

TEST_F(DpSgdSessionTest, TheOracleStepsRetriesAndCloses) {
  const v1::Dataset dataset = MakeDataset();
  client::Connection analyst = Analyst();
  client::DpSgdSessionOptions options;
  options.dataset_id = dataset.id();
  options.sampling_rate = 0.1;
  options.epsilon = 2.0;
  options.steps = 20;
  options.network = Network();
  auto oracle = client::DpSgdOracle::Open(&analyst, options);
  ASSERT_TRUE(oracle.ok()) << oracle.status();
  EXPECT_GT(oracle->session().noise_multiplier(), 0.0);
  const Eigen::VectorXf parameters =
      TrainerNetwork(oracle->session(), 4).parameters().cast<float>();
  auto g0 = oracle->Step(0, parameters);
  ASSERT_TRUE(g0.ok()) << g0.status();
  EXPECT_EQ(g0->size(), oracle->num_parameters());
  auto replay = oracle->Step(0, parameters);  // a retry after a lost answer
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(*replay, *g0);
  auto g1 = oracle->Step(1, parameters);
  ASSERT_TRUE(g1.ok());
  EXPECT_EQ(oracle->session().steps_used(), 2);
  EXPECT_FALSE(oracle->Step(1, parameters.head(3)).ok());
  // Resumed by id (a restarted trainer), then closed.
  auto resumed = client::DpSgdOracle::Resume(&analyst, oracle->session().id());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  auto closed = resumed->Close();
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(closed->steps_used(), 2);
  EXPECT_EQ(closed->state(), "CLOSED");
}

TEST(StepRateLimiterTest, ATokenBucketPerSession) {
  StepRateLimiter limiter(10.0, 3.0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Take("s1", 100.0).ok());
  const absl::Status over = limiter.Take("s1", 100.0);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("retry the same step"), std::string::npos);
  EXPECT_TRUE(limiter.Take("s2", 100.0).ok());   // another session is unaffected
  EXPECT_TRUE(limiter.Take("s1", 100.11).ok());  // one token back after 0.1 s
  EXPECT_FALSE(limiter.Take("s1", 100.11).ok());
  EXPECT_TRUE(limiter.Take("s1", 200.0).ok());
}

}  // namespace
}  // namespace dpcurator::server::testing
