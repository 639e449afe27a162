// Partitioned sessions through the gRPC service (issue 27 item 2;
// docs/privacy.md 3.7): OpenPartitionedSessions opens one session per part
// as one admission whose charge is one part's, each member steps, reads
// and closes like any session and reads only its part's rows, a retry of
// the group returns the same sessions uncharged, and every refusal comes
// before admission with nothing charged.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/data/demo.h"
#include "core/data/encoder.h"
#include "core/privacy/conversion.h"
#include "core/privacy/events.h"
#include "core/privacy/noise_source.h"
#include "core/release/encoded_rows.h"
#include "core/release/kernel_witness.h"
#include "core/util/public_rng.h"
#include "server/plans.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

constexpr int64_t kPartitionRpcRows = 200;
constexpr uint64_t kPartitionRpcRowSeed = 29;

class PartitionRpcTest : public ServerTest {
 protected:
  v1::Dataset MakeDataset(v1::NeighbouringRelation relation = v1::ADD_REMOVE) {
    v1::Dataset dataset;
    EXPECT_TRUE(CreateDataset(100.0, kDelta, relation, &dataset).ok());
    EXPECT_TRUE(UploadDemoRows(dataset.id(), kPartitionRpcRows, kPartitionRpcRowSeed).ok());
    return dataset;
  }

  // rff_embedding parts of T steps at (q, s) over the label column.
  static v1::OpenPartitionedSessionsRequest RffRequest(const std::string& dataset_id,
                                                       int64_t steps, const std::string& key) {
    v1::OpenPartitionedSessionsRequest request;
    request.set_dataset_id(dataset_id);
    request.set_idempotency_key(key);
    request.mutable_params()->set_steps(steps);
    request.mutable_params()->set_sampling_rate(0.1);
    request.mutable_params()->set_noise_multiplier(1.5);
    request.mutable_params()->mutable_rff_embedding()->set_num_frequencies(20);
    request.mutable_partition()->set_column(DemoSchemaProto().label());
    return request;
  }

  grpc::Status Open(const v1::OpenPartitionedSessionsRequest& request,
                    v1::PartitionedSessions* response) {
    client::Connection analyst = Analyst();
    auto context = analyst.NewContext();
    return analyst.sessions().OpenPartitionedSessions(context.get(), request, response);
  }

  grpc::Status Step(const std::string& session_id, int64_t step,
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

  grpc::Status Get(const std::string& session_id, v1::Session* session) {
    client::Connection analyst = Analyst();
    v1::GetSessionRequest request;
    request.set_session_id(session_id);
    auto context = analyst.NewContext();
    return analyst.sessions().GetSession(context.get(), request, session);
  }

  double EpsilonSpent(const std::string& dataset_id) {
    v1::BudgetReport budget;
    EXPECT_TRUE(GetBudget(dataset_id, &budget).ok());
    return budget.epsilon_spent();
  }
  int EventCount(const std::string& dataset_id) {
    v1::BudgetReport budget;
    EXPECT_TRUE(GetBudget(dataset_id, &budget).ok());
    return budget.events_size();
  }
};

double EpsilonOfSteps(double q, double s, int64_t steps) {
  auto step = privacy::PrivacyEvent::PoissonSampledDiscreteGaussian(q, s);
  auto all = privacy::PrivacyEvent::SelfCompose(*step, steps);
  return privacy::ComputeEpsilonReport(*all, kDelta)->epsilon;
}

// Done-when: a K-part open is charged as ONE part under add/remove; each
// member steps, is read and closes like any session; the last close
// settles the group at the steps its busiest member ran.
TEST_F(PartitionRpcTest, OneChargeForEveryDeclaredPartAndMembersWorkAsSessions) {
  const v1::Dataset dataset = MakeDataset();
  v1::PartitionedSessions opened;
  const grpc::Status status = Open(RffRequest(dataset.id(), 400, "group"), &opened);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(opened.replayed());
  EXPECT_EQ(opened.column(), "churn");
  // Empty values: every declared category, in declared order.
  ASSERT_EQ(opened.values_size(), 2);
  EXPECT_EQ(opened.values(0), "no");
  EXPECT_EQ(opened.values(1), "yes");
  ASSERT_EQ(opened.sessions_size(), 2);
  EXPECT_NE(opened.sessions(0).id(), opened.sessions(1).id());
  const double one = EpsilonOfSteps(0.1, 1.5, 400);
  EXPECT_NEAR(EpsilonSpent(dataset.id()), one, 1e-9);  // not 2x
  EXPECT_EQ(EventCount(dataset.id()), 1);
  for (const v1::Session& member : opened.sessions()) {
    EXPECT_EQ(member.state(), "OPEN");
    EXPECT_EQ(member.steps_reserved(), 400);
    EXPECT_NEAR(member.epsilon_reserved(), one, 1e-9);
    EXPECT_EQ(member.params().sampling_rate(), 0.1);
    EXPECT_EQ(member.noise_multiplier(), 1.5);
  }
  // Steps on each member, then GetSession sees them.
  v1::SessionStepResponse step;
  for (int64_t t = 0; t < 3; ++t) {
    ASSERT_TRUE(Step(opened.sessions(0).id(), t, &step).ok());
  }
  ASSERT_TRUE(Step(opened.sessions(1).id(), 0, &step).ok());
  EXPECT_EQ(step.answer_case(), v1::SessionStepResponse::kBatch);
  v1::Session got;
  ASSERT_TRUE(Get(opened.sessions(0).id(), &got).ok());
  EXPECT_EQ(got.steps_used(), 3);
  // The first close keeps the one charge; the last settles it at 3 steps.
  v1::Session closed;
  ASSERT_TRUE(Close(opened.sessions(1).id(), &closed).ok());
  EXPECT_EQ(closed.state(), "CLOSED");
  EXPECT_NEAR(EpsilonSpent(dataset.id()), one, 1e-9);
  ASSERT_TRUE(Close(opened.sessions(0).id(), &closed).ok());
  EXPECT_NEAR(EpsilonSpent(dataset.id()), EpsilonOfSteps(0.1, 1.5, 3), 1e-9);

  // An epsilon is calibrated for one part's T steps: the group's charge.
  v1::OpenPartitionedSessionsRequest calibrated = RffRequest(dataset.id(), 200, "eps");
  calibrated.mutable_params()->set_epsilon(0.5);
  calibrated.mutable_partition()->add_values("yes");
  const double before = EpsilonSpent(dataset.id());
  ASSERT_TRUE(Open(calibrated, &opened).ok());
  ASSERT_EQ(opened.sessions_size(), 1);
  EXPECT_EQ(opened.values(0), "yes");
  EXPECT_LE(opened.sessions(0).epsilon_reserved(), 0.5 + 1e-9);
  EXPECT_GT(opened.sessions(0).epsilon_reserved(), 0.45);
  EXPECT_GT(EpsilonSpent(dataset.id()), before);
}

// A retry of the group open (same key, same request) returns the same K
// sessions and charges nothing; the key with another request is refused.
TEST_F(PartitionRpcTest, RetryReturnsTheSameSessionsUncharged) {
  const v1::Dataset dataset = MakeDataset();
  v1::PartitionedSessions first, again;
  ASSERT_TRUE(Open(RffRequest(dataset.id(), 100, "retry"), &first).ok());
  const double spent = EpsilonSpent(dataset.id());
  ASSERT_TRUE(Open(RffRequest(dataset.id(), 100, "retry"), &again).ok());
  EXPECT_TRUE(again.replayed());
  ASSERT_EQ(again.sessions_size(), first.sessions_size());
  for (int k = 0; k < first.sessions_size(); ++k) {
    EXPECT_EQ(again.sessions(k).id(), first.sessions(k).id());
    EXPECT_EQ(again.values(k), first.values(k));
  }
  EXPECT_EQ(EpsilonSpent(dataset.id()), spent);
  EXPECT_EQ(EventCount(dataset.id()), 1);
  const grpc::Status other = Open(RffRequest(dataset.id(), 101, "retry"), &again);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << other.error_message();
  EXPECT_EQ(EpsilonSpent(dataset.id()), spent);
}

// Done-when: a partition over an undeclared column, a value outside the
// declared domain, a dataset without a declared label set, and a
// REPLACE_ONE dataset are refused before admission, nothing charged.
TEST_F(PartitionRpcTest, RefusalsComeBeforeAdmission) {
  const v1::Dataset dataset = MakeDataset();
  v1::PartitionedSessions opened;
  auto refused = [&](const v1::OpenPartitionedSessionsRequest& request, grpc::StatusCode code,
                     const std::string& says) {
    const grpc::Status status = Open(request, &opened);
    EXPECT_EQ(status.error_code(), code) << says << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
  };
  v1::OpenPartitionedSessionsRequest request = RffRequest(dataset.id(), 10, "bad");
  request.mutable_partition()->set_column("region");  // declared, but not the label
  refused(request, grpc::StatusCode::INVALID_ARGUMENT, "only the declared label column");
  request = RffRequest(dataset.id(), 10, "bad");
  request.mutable_partition()->add_values("maybe");
  refused(request, grpc::StatusCode::INVALID_ARGUMENT, "'maybe' is not a declared category");
  request = RffRequest(dataset.id(), 10, "bad");
  request.mutable_partition()->add_values("yes");
  request.mutable_partition()->add_values("yes");
  refused(request, grpc::StatusCode::INVALID_ARGUMENT, "named twice");
  // A conditional kernel part: each part is one class.
  request = RffRequest(dataset.id(), 10, "bad");
  request.mutable_params()->mutable_kernel_witness()->set_conditional(true);
  request.mutable_params()->mutable_kernel_witness()->set_expected_batch_size(10.0);
  refused(request, grpc::StatusCode::INVALID_ARGUMENT, "unconditional");
  EXPECT_EQ(EpsilonSpent(dataset.id()), 0.0);
  EXPECT_EQ(EventCount(dataset.id()), 0);

  const v1::Dataset replace_one = MakeDataset(v1::REPLACE_ONE);
  refused(RffRequest(replace_one.id(), 10, "bad"), grpc::StatusCode::FAILED_PRECONDITION,
          "ADD_REMOVE");
  EXPECT_EQ(EpsilonSpent(replace_one.id()), 0.0);

  // A schema without a declared label: no declared partition.
  v1::CreateDatasetRequest create;
  create.set_name("unlabelled");
  *create.mutable_schema() = DemoSchemaProto();
  create.mutable_schema()->clear_label();
  create.mutable_budget()->set_epsilon(10.0);
  create.mutable_budget()->set_delta(kDelta);
  v1::Dataset unlabelled;
  {
    client::Connection curator = Curator();
    auto context = curator.NewContext();
    const grpc::Status created = curator.datasets().CreateDataset(context.get(), create,
                                                                  &unlabelled);
    ASSERT_TRUE(created.ok()) << created.error_message();
  }
  refused(RffRequest(unlabelled.id(), 10, "bad"), grpc::StatusCode::FAILED_PRECONDITION,
          "declares a label column");
  EXPECT_EQ(EpsilonSpent(unlabelled.id()), 0.0);
}

// kernel_witness parallel = true on an ordinary open keeps its refusal and
// names the partitioned open; in a partitioned open it is the variant.
TEST_F(PartitionRpcTest, ParallelKernelOnlyThroughThePartitionedOpen) {
  const v1::Dataset dataset = MakeDataset();
  v1::OpenSessionRequest ordinary;
  ordinary.set_dataset_id(dataset.id());
  ordinary.set_idempotency_key("ordinary");
  ordinary.mutable_params()->set_steps(10);
  ordinary.mutable_params()->set_sampling_rate(0.1);
  ordinary.mutable_params()->set_noise_multiplier(1.0);
  v1::KernelWitnessParams& kernel = *ordinary.mutable_params()->mutable_kernel_witness();
  kernel.set_parallel(true);
  kernel.set_expected_batch_size(10.0);
  kernel.set_max_points(8);
  v1::Session session;
  {
    client::Connection analyst = Analyst();
    auto context = analyst.NewContext();
    const grpc::Status status = analyst.sessions().OpenSession(context.get(), ordinary, &session);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("parallel"), std::string::npos);
    EXPECT_NE(status.error_message().find("OpenPartitionedSessions"), std::string::npos)
        << status.error_message();
  }
  EXPECT_EQ(EpsilonSpent(dataset.id()), 0.0);

  v1::OpenPartitionedSessionsRequest request;
  request.set_dataset_id(dataset.id());
  request.set_idempotency_key("parallel");
  *request.mutable_params() = ordinary.params();
  request.mutable_partition()->set_column("churn");
  v1::PartitionedSessions opened;
  const grpc::Status status = Open(request, &opened);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(opened.sessions_size(), 2);
  for (const v1::Session& member : opened.sessions()) {
    EXPECT_TRUE(member.params().kernel_witness().parallel());
    EXPECT_FALSE(member.params().kernel_witness().conditional());
    EXPECT_EQ(member.params().kernel_witness().max_points(), 8);
  }
  EXPECT_NEAR(EpsilonSpent(dataset.id()), EpsilonOfSteps(0.1, 1.0, 10), 1e-9);
}

// Each member's steps read its part only: with no noise and q = 1, a
// parallel kernel member answers the witness of exactly its class's rows
// over the public divisor (the other class's rows would change it).
TEST_F(PartitionRpcTest, EachMemberReadsOnlyItsPart) {
  StopServer();
  noise_source_ = []() -> absl::StatusOr<std::unique_ptr<privacy::NoiseSource>> {
    return std::unique_ptr<privacy::NoiseSource>(new privacy::ZeroNoiseSource());
  };
  StartServer();
  const v1::Dataset dataset = MakeDataset();
  v1::OpenPartitionedSessionsRequest request;
  request.set_dataset_id(dataset.id());
  request.set_idempotency_key("read");
  request.mutable_params()->set_steps(2);
  request.mutable_params()->set_sampling_rate(1.0);
  request.mutable_params()->set_noise_multiplier(1.0);
  v1::KernelWitnessParams& kernel = *request.mutable_params()->mutable_kernel_witness();
  kernel.set_parallel(true);
  kernel.set_expected_batch_size(20.0);
  kernel.set_max_points(4);
  request.mutable_partition()->set_column("churn");
  v1::PartitionedSessions opened;
  const grpc::Status status = Open(request, &opened);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(opened.sessions_size(), 2);

  const data::Schema schema = data::DemoSchema();
  const release::EncodedRows rows =
      release::EncodeRows(schema, data::GenerateDemoTable(kPartitionRpcRows, kPartitionRpcRowSeed));
  const int d = opened.sessions(0).params().kernel_witness().dimension();
  PublicRng rng(5);
  Eigen::MatrixXd points(3, d);
  for (Eigen::Index j = 0; j < points.rows(); ++j) {
    for (int a = 0; a < d; ++a) points(j, a) = static_cast<float>(rng.Uniform());
  }
  const auto& bandwidths = opened.sessions(0).params().kernel_witness().bandwidths();
  const std::vector<double> h(bandwidths.begin(), bandwidths.end());
  Eigen::VectorXd all_values;
  Eigen::MatrixXd all_gradients;
  release::KernelWitness(rows.features, points, h, 20.0, &all_values, &all_gradients);
  for (int level = 0; level < 2; ++level) {
    const release::EncodedRows part = RowsOfPart(rows, level);
    ASSERT_GT(part.num_rows(), 0);
    ASSERT_LT(part.num_rows(), kPartitionRpcRows);
    Eigen::VectorXd values;
    Eigen::MatrixXd gradients;
    release::KernelWitness(part.features, points, h, 20.0, &values, &gradients);
    client::Connection analyst = Analyst();
    v1::SessionStepRequest step;
    step.set_session_id(opened.sessions(level).id());
    step.set_step(0);
    v1::KernelWitnessQuery& query = *step.mutable_kernel_witness();
    query.set_num_points(static_cast<int>(points.rows()));
    for (Eigen::Index j = 0; j < points.rows(); ++j) {
      for (int a = 0; a < d; ++a) query.add_points(static_cast<float>(points(j, a)));
    }
    v1::SessionStepResponse response;
    auto context = analyst.NewContext();
    const grpc::Status stepped = analyst.sessions().Step(context.get(), step, &response);
    ASSERT_TRUE(stepped.ok()) << stepped.error_message();
    ASSERT_EQ(response.witness().values_size(), points.rows());
    for (Eigen::Index j = 0; j < points.rows(); ++j) {
      EXPECT_NEAR(response.witness().values(j), values(j), 1e-5 * (1.0 + std::abs(values(j))));
      // The part's witness, not the whole table's.
      EXPECT_GT(std::abs(all_values(j) - values(j)), 1e-3);
    }
  }
}

}  // namespace
}  // namespace dpcurator::server::testing
