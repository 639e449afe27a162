// Partitioned sessions (issue 27 item 2; docs/privacy.md 3.7) on the ledger
// and the planning layer, without gRPC: one admission opens K sessions and
// charges the partitioned event once (one part's cost under ADD_REMOVE);
// idempotency; the group's reservation settled when its last member closes;
// the refusals made before admission; and the rows a part's steps read.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/data/demo.h"
#include "core/privacy/accounting.h"
#include "core/privacy/events.h"
#include "core/release/encoded_rows.h"
#include "server/ledger.h"
#include "core/privacy/noise_source.h"
#include "proto/convert.h"
#include "server/plans.h"
#include "server/store.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using privacy::PrivacyEvent;

constexpr double kRate = 0.01;
constexpr double kNoise = 1.1;

PrivacyEvent Step() { return PrivacyEvent::PoissonSampledDiscreteGaussian(kRate, kNoise).value(); }

// epsilon at kDelta of one charge of `event` on a fresh add/remove state.
double EpsilonOf(const PrivacyEvent& event) {
  privacy::AccountantState state(privacy::NeighbouringRelation::kAddRemove);
  EXPECT_TRUE(state.Add(event).ok());
  return state.Epsilon(kDelta)->epsilon;
}

class PartitionSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>();
    auto database = SharedDatabase::Open(dir_->File("partition.db"));
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = std::move(database).value();
    auto store = Store::Open(database_.get(), &clock_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
    ledger_ = std::make_unique<Ledger>(database_.get(), &clock_);
  }

  std::string NewDataset(v1::NeighbouringRelation relation, double cap = 50.0) {
    v1::CreateDatasetRequest request;
    request.set_name("partition");
    *request.mutable_schema() = DemoSchemaProto();
    request.mutable_budget()->set_epsilon(cap);
    request.mutable_budget()->set_delta(kDelta);
    request.set_relation(relation);
    auto dataset = store_->CreateDataset(request);
    EXPECT_TRUE(dataset.ok()) << dataset.status();
    return dataset.ok() ? dataset->id() : "";
  }

  static std::vector<Ledger::SessionPart> Parts(const std::vector<int32_t>& levels,
                                                int64_t steps) {
    std::vector<Ledger::SessionPart> parts;
    for (int32_t level : levels) {
      Ledger::SessionPart part;
      part.level = level;
      part.params.set_steps(steps);
      part.params.set_sampling_rate(kRate);
      part.params.set_noise_multiplier(kNoise);
      part.step_event = Step();
      part.steps = steps;
      part.noise_multiplier = kNoise;
      parts.push_back(std::move(part));
    }
    return parts;
  }

  double Spent(const std::string& dataset) {
    auto report = ledger_->Report(dataset, Caller::Curator());
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? report->epsilon_spent() : -1.0;
  }

  int EventCount(const std::string& dataset) {
    auto report = ledger_->Report(dataset, Caller::Curator());
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? report->events_size() : -1;
  }

  void RunSteps(const std::string& session_id, int64_t count) {
    for (int64_t t = 0; t < count; ++t) {
      auto begin = ledger_->BeginStep(session_id, kAlice, t);
      ASSERT_TRUE(begin.ok()) << begin.status();
      ASSERT_FALSE(begin->stored.has_value());
      ASSERT_TRUE(ledger_->RecordStep(session_id, t, Ledger::StoredStep{"answer", ""}).ok());
    }
  }

  const Caller kAlice{"tok_alice", false};
  FakeClock clock_;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<SharedDatabase> database_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
};

TEST_F(PartitionSessionTest, OneAdmissionOfKPartsCostsOnePart) {
  const std::string dataset = NewDataset(v1::ADD_REMOVE);
  auto opened = ledger_->OpenPartitionedSessions(dataset, kAlice, "key", "request",
                                                 Parts({1, 0}, 1000));
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_EQ(opened->sessions.size(), 2u);
  EXPECT_FALSE(opened->replayed);
  EXPECT_NE(opened->sessions[0].id(), opened->sessions[1].id());
  // One ledger event, and it costs exactly one session of 1000 steps.
  EXPECT_EQ(EventCount(dataset), 1);
  const double one = EpsilonOf(PrivacyEvent::SelfCompose(Step(), 1000).value());
  EXPECT_NEAR(Spent(dataset), one, 1e-12);
  EXPECT_NEAR(opened->sessions[0].epsilon_reserved(), one, 1e-12);
  // Members read their own part, in level order; an ordinary session none.
  EXPECT_EQ(ledger_->SessionPartLevel(opened->sessions[0].id()).value(), 0);
  EXPECT_EQ(ledger_->SessionPartLevel(opened->sessions[1].id()).value(), 1);
  auto plain = ledger_->OpenSession(dataset, kAlice, "plain", "plain", v1::SessionParams(), Step(),
                                    10, kNoise);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(ledger_->SessionPartLevel(plain->session.id()).value().has_value());
  auto totals = ledger_->VerifyTotals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_TRUE(totals->empty());
}

TEST_F(PartitionSessionTest, AdmittedWhereKSequentialSessionsWouldExceedTheCap) {
  const double one = EpsilonOf(PrivacyEvent::SelfCompose(Step(), 1000).value());
  const std::string dataset = NewDataset(v1::ADD_REMOVE, 1.2 * one);
  ASSERT_TRUE(ledger_->OpenPartitionedSessions(dataset, kAlice, "key", "request",
                                               Parts({0, 1}, 1000))
                  .ok());
  // The same two parts opened as ordinary sessions: the second is refused.
  const std::string other = NewDataset(v1::ADD_REMOVE, 1.2 * one);
  ASSERT_TRUE(
      ledger_->OpenSession(other, kAlice, "a", "a", v1::SessionParams(), Step(), 1000, kNoise).ok());
  EXPECT_EQ(
      ledger_->OpenSession(other, kAlice, "b", "b", v1::SessionParams(), Step(), 1000, kNoise)
          .status()
          .code(),
      absl::StatusCode::kResourceExhausted);
}

TEST_F(PartitionSessionTest, RetryReplaysTheSameSessionsWithoutASecondCharge) {
  const std::string dataset = NewDataset(v1::ADD_REMOVE);
  auto first = ledger_->OpenPartitionedSessions(dataset, kAlice, "key", "request",
                                                Parts({0, 1}, 100));
  ASSERT_TRUE(first.ok()) << first.status();
  const double spent = Spent(dataset);
  auto again = ledger_->OpenPartitionedSessions(dataset, kAlice, "key", "request",
                                                Parts({0, 1}, 100));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->replayed);
  ASSERT_EQ(again->sessions.size(), 2u);
  EXPECT_EQ(again->sessions[0].id(), first->sessions[0].id());
  EXPECT_EQ(again->sessions[1].id(), first->sessions[1].id());
  EXPECT_EQ(Spent(dataset), spent);
  EXPECT_EQ(EventCount(dataset), 1);
  EXPECT_EQ(ledger_->OpenPartitionedSessions(dataset, kAlice, "key", "other bytes",
                                             Parts({0, 1}, 100))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  // The same key for other parts (whose member keys are all new) too; the
  // ledger does not check levels against the schema (ResolvePartition does).
  EXPECT_EQ(ledger_->OpenPartitionedSessions(dataset, kAlice, "key", "third bytes",
                                             Parts({5}, 100))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(EventCount(dataset), 1);
  // Keys are scoped by principal: another analyst's "key" is its own.
  ASSERT_TRUE(ledger_->OpenPartitionedSessions(dataset, Caller{"tok_bob", false}, "key",
                                               "request", Parts({0, 1}, 100))
                  .ok());
  EXPECT_EQ(EventCount(dataset), 2);
}

TEST_F(PartitionSessionTest, LastCloseReturnsTheStepsNoPartRan) {
  const std::string dataset = NewDataset(v1::ADD_REMOVE);
  auto opened = ledger_->OpenPartitionedSessions(dataset, kAlice, "key", "request",
                                                 Parts({0, 1}, 1000));
  ASSERT_TRUE(opened.ok()) << opened.status();
  const std::string part0 = opened->sessions[0].id();
  const std::string part1 = opened->sessions[1].id();
  RunSteps(part0, 30);
  RunSteps(part1, 10);
  const double reserved = Spent(dataset);
  // The first member's close changes nothing yet: the charge is one event.
  auto closed0 = ledger_->CloseSession(part0, kAlice);
  ASSERT_TRUE(closed0.ok()) << closed0.status();
  EXPECT_EQ(closed0->state(), "CLOSED");
  EXPECT_EQ(Spent(dataset), reserved);
  // Its steps are over; its sibling's go on. The refusal must not say the
  // budget came back: the group is settled at its last close (issue 37
  // item 5).
  const absl::Status after_close = ledger_->BeginStep(part0, kAlice, 30).status();
  EXPECT_EQ(after_close.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(after_close.message().find("was returned"), std::string::npos) << after_close;
  EXPECT_NE(after_close.message().find("returned when its last session closes"),
            std::string::npos)
      << after_close;
  ASSERT_TRUE(ledger_->BeginStep(part1, kAlice, 10).ok());
  ASSERT_TRUE(ledger_->RecordStep(part1, 10, Ledger::StoredStep{"answer", ""}).ok());
  // The last close settles: the worst part ran 30 steps, so 30 steps' cost.
  ASSERT_TRUE(ledger_->CloseSession(part1, kAlice).ok());
  const double thirty = EpsilonOf(PrivacyEvent::SelfCompose(Step(), 30).value());
  EXPECT_NEAR(Spent(dataset), thirty, 1e-12);
  EXPECT_LT(Spent(dataset), reserved);
  auto totals = ledger_->VerifyTotals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_TRUE(totals->empty());
  // Closing again is a no-op.
  ASSERT_TRUE(ledger_->CloseSession(part1, kAlice).ok());
  EXPECT_NEAR(Spent(dataset), thirty, 1e-12);
  // Now the whole group is settled, and a step says so.
  const absl::Status settled = ledger_->BeginStep(part0, kAlice, 31).status();
  EXPECT_EQ(settled.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(settled.message().find("its unused budget was returned"), std::string::npos)
      << settled;
}

TEST_F(PartitionSessionTest, UnusedPartitionReturnsEverything) {
  const std::string dataset = NewDataset(v1::ADD_REMOVE);
  auto opened = ledger_->OpenPartitionedSessions(dataset, kAlice, "key", "request",
                                                 Parts({0, 1}, 100));
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_TRUE(ledger_->CloseSession(opened->sessions[1].id(), kAlice).ok());
  // Abandoned by the idle sweep: the same settlement.
  clock_.Advance(3600);
  EXPECT_EQ(ledger_->CloseIdleSessions(60).value(), 1);
  EXPECT_EQ(Spent(dataset), 0.0);
  auto totals = ledger_->VerifyTotals();
  ASSERT_TRUE(totals.ok()) << totals.status();
  EXPECT_TRUE(totals->empty());
}

TEST_F(PartitionSessionTest, LedgerRefusesAPartitionOnAReplaceOneDataset) {
  const std::string dataset = NewDataset(v1::REPLACE_ONE);
  EXPECT_FALSE(ledger_->OpenPartitionedSessions(dataset, kAlice, "key", "request",
                                                Parts({0, 1}, 100))
                   .ok());
  EXPECT_EQ(EventCount(dataset), 0);
  EXPECT_EQ(Spent(dataset), 0.0);
}

TEST_F(PartitionSessionTest, PartsAreNamedOnce) {
  const std::string dataset = NewDataset(v1::ADD_REMOVE);
  EXPECT_EQ(ledger_->OpenPartitionedSessions(dataset, kAlice, "key", "request",
                                             Parts({1, 1}, 100))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EventCount(dataset), 0);
}

TEST(ResolvePartitionTest, RefusalsBeforeAdmission) {
  const data::Schema schema = data::DemoSchema();
  const auto kAddRemove = privacy::NeighbouringRelation::kAddRemove;
  auto levels = ResolvePartition(schema, kAddRemove, "churn", {"yes", "no"});
  ASSERT_TRUE(levels.ok()) << levels.status();
  EXPECT_EQ(*levels, (std::vector<int32_t>{1, 0}));
  // Not the declared label column (the public partition key).
  EXPECT_EQ(ResolvePartition(schema, kAddRemove, "region", {"north"}).status().message(),
            "cannot partition by column 'region': only the declared label column 'churn' is a "
            "public partition key");
  // A value outside the declared categories, or named twice.
  EXPECT_EQ(ResolvePartition(schema, kAddRemove, "churn", {"no", "maybe"}).status().message(),
            "part value 'maybe' is not a declared category of 'churn'");
  EXPECT_EQ(ResolvePartition(schema, kAddRemove, "churn", {"no", "no"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolvePartition(schema, kAddRemove, "churn", {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // REPLACE_ONE datasets.
  EXPECT_EQ(ResolvePartition(schema, privacy::NeighbouringRelation::kReplaceOne, "churn", {"no"})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  // A schema without a declared label set.
  data::Schema::Builder builder;
  builder.AddNumeric("x", 0, 1).AddCategorical("group", {"a", "b"});
  const data::Schema unlabelled = builder.Build().value();
  EXPECT_EQ(ResolvePartition(unlabelled, kAddRemove, "group", {"a"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(RowsOfPartTest, EachPartReadsExactlyItsRows) {
  const data::Schema schema = data::DemoSchema();
  const release::EncodedRows rows = release::EncodeRows(schema, data::GenerateDemoTable(500, 7));
  int64_t total = 0;
  for (int32_t level = 0; level < rows.num_classes; ++level) {
    const release::EncodedRows part = RowsOfPart(rows, level);
    EXPECT_GT(part.num_rows(), 0);
    for (int64_t i = 0; i < part.num_rows(); ++i) EXPECT_EQ(part.labels(i), level);
    total += part.num_rows();
  }
  EXPECT_EQ(total, rows.num_rows());
  // A level no row has: zero rows, not a failure (a total function).
  EXPECT_EQ(RowsOfPart(rows, rows.num_classes).num_rows(), 0);
}

// A member's step samples among its part's indices of the whole table
// (Step no longer copies the part): the answer must be the one a step over
// a table of the part alone gives with the same draws.
TEST(RowsOfPartTest, AStepOverThePartsIndicesEqualsAStepOverThePartAlone) {
  const data::Schema schema = data::DemoSchema();
  const release::EncodedRows rows = release::EncodeRows(schema, data::GenerateDemoTable(400, 3));
  v1::Dataset dataset;
  dataset.set_id("ds_part");
  dataset.set_relation(v1::ADD_REMOVE);
  *dataset.mutable_schema() = SchemaToProto(schema);
  dataset.set_row_count(rows.num_rows());
  dataset.mutable_budget()->set_epsilon(10.0);
  dataset.mutable_budget()->set_delta(1e-5);
  v1::OpenSessionRequest open;
  open.set_dataset_id(dataset.id());
  open.set_idempotency_key("k");
  v1::SessionParams& params = *open.mutable_params();
  params.set_epsilon(1.0);
  params.set_steps(10);
  params.set_sampling_rate(0.5);
  params.mutable_rff_embedding()->set_num_frequencies(8);
  params.mutable_rff_embedding()->set_length_scale(1.0);
  const absl::StatusOr<SessionPlan> plan = PlanSession(open, dataset);
  ASSERT_TRUE(plan.ok()) << plan.status();
  v1::Session session;
  session.set_id("ses_part");
  session.set_dataset_id(dataset.id());
  *session.mutable_params() = plan->resolved_params;
  session.set_state("OPEN");
  session.set_steps_reserved(plan->steps);
  session.set_noise_multiplier(plan->noise_multiplier);
  v1::SessionStepRequest step;
  step.set_session_id(session.id());
  step.set_step(0);
  for (int32_t level = 0; level < rows.num_classes; ++level) {
    const std::vector<int64_t> indices = RowIndicesOfPart(rows, level);
    const release::EncodedRows alone = RowsOfPart(rows, level);
    privacy::SeededNoiseSource noise_indices(11 + level), noise_alone(11 + level);
    const absl::StatusOr<std::string> by_indices =
        ComputeSessionStep(session, dataset, rows, "ses_part/0", step, &noise_indices, &indices);
    const absl::StatusOr<std::string> by_copy =
        ComputeSessionStep(session, dataset, alone, "ses_part/0", step, &noise_alone);
    ASSERT_TRUE(by_indices.ok()) << by_indices.status();
    ASSERT_TRUE(by_copy.ok()) << by_copy.status();
    EXPECT_EQ(*by_indices, *by_copy) << "part " << level;
    // And not the whole table's answer under the same draws.
    privacy::SeededNoiseSource noise_whole(11 + level);
    const absl::StatusOr<std::string> whole =
        ComputeSessionStep(session, dataset, rows, "ses_part/0", step, &noise_whole);
    ASSERT_TRUE(whole.ok());
    EXPECT_NE(*whole, *by_indices) << "part " << level;
  }
}

}  // namespace
}  // namespace dpcurator::server::testing
