// The ledger on its own: a Store and a Ledger sharing one SharedDatabase
// on a temporary SQLite file (time from a FakeClock), then
// admission, refund and the relation check without gRPC.

#include "server/ledger.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/privacy/conversion.h"
#include "core/privacy/event_codec.h"
#include "core/privacy/events.h"
#include "core/privacy/rdp.h"
#include "server/store.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>();
    auto database = SharedDatabase::Open(dir_->File("ledger.db"));
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = std::move(database).value();
    auto store = Store::Open(database_.get(), &clock_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
    ledger_ = std::make_unique<Ledger>(database_.get(), &clock_);
  }

  std::string NewDataset(v1::NeighbouringRelation relation, double cap = 1.5) {
    v1::CreateDatasetRequest request;
    request.set_name("ledger");
    *request.mutable_schema() = DemoSchemaProto();
    request.mutable_budget()->set_epsilon(cap);
    request.mutable_budget()->set_delta(1e-5);
    request.set_relation(relation);
    auto dataset = store_->CreateDataset(request);
    EXPECT_TRUE(dataset.ok()) << dataset.status();
    return dataset.ok() ? dataset->id() : "";
  }

  const Caller kAlice{"tok_alice", false};
  const Caller kBob{"tok_bob", false};
  FakeClock clock_;
  std::unique_ptr<TempDir> dir_;
  // Declared before store_ and ledger_, which point at it.
  std::unique_ptr<SharedDatabase> database_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
};

TEST_F(LedgerTest, RefundRestoresBudgetExactly) {
  const std::string dataset = NewDataset(v1::ADD_REMOVE);
  auto event = privacy::PrivacyEvent::Gaussian(5.0);
  ASSERT_TRUE(event.ok());
  auto admission = ledger_->Admit(dataset, kAlice, "key-1", "rff_embedding", "request-1", *event);
  ASSERT_TRUE(admission.ok()) << admission.status();
  EXPECT_EQ(admission->outcome, Ledger::Admission::Outcome::kAdmitted);
  EXPECT_GT(admission->epsilon_spent, 0.0);
  EXPECT_DOUBLE_EQ(admission->epsilon_spent, admission->epsilon_alone);
  auto sealed = store_->GetDataset(dataset);
  ASSERT_TRUE(sealed.ok());
  EXPECT_TRUE(sealed->sealed());

  auto charged = ledger_->Report(dataset, kAlice);
  ASSERT_TRUE(charged.ok()) << charged.status();
  EXPECT_DOUBLE_EQ(charged->epsilon_spent(), admission->epsilon_spent);
  ASSERT_EQ(charged->events_size(), 1);

  ASSERT_TRUE(ledger_->Refund(admission->release_id, "engine failed").ok());
  auto refunded = ledger_->Report(dataset, kAlice);
  ASSERT_TRUE(refunded.ok()) << refunded.status();
  EXPECT_EQ(refunded->epsilon_spent(), 0.0);
  EXPECT_EQ(refunded->epsilon_remaining(), 1.5);
  ASSERT_EQ(refunded->events_size(), 2);
  // The charge row is unchanged; the refund is a new row pointing at it.
  EXPECT_EQ(refunded->events(0).SerializeAsString(), charged->events(0).SerializeAsString());
  EXPECT_EQ(refunded->events(1).kind(), "refund");
  EXPECT_EQ(refunded->events(1).refund_of(), refunded->events(0).id());
  EXPECT_EQ(refunded->events(1).release_id(), admission->release_id);
  // The reason stays in the database; the report shows the event alone.
  EXPECT_THAT(refunded->events(1).description(), Not(HasSubstr("engine failed")));

  auto problems = ledger_->VerifyTotals();
  ASSERT_TRUE(problems.ok()) << problems.status();
  EXPECT_TRUE(problems->empty()) << ::testing::PrintToString(*problems);
  auto integrity = store_->CheckIntegrity();
  ASSERT_TRUE(integrity.ok());
  EXPECT_TRUE(integrity->empty()) << ::testing::PrintToString(*integrity);

  // Nothing left to refund; the failed release is not fetchable.
  EXPECT_EQ(ledger_->Refund(admission->release_id, "again").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ledger_->GetArtefact(admission->release_id, kAlice, nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto releases = ledger_->ListReleases(dataset, kAlice);
  ASSERT_TRUE(releases.ok());
  ASSERT_EQ(releases->releases_size(), 1);
  EXPECT_EQ(releases->releases(0).status(), "FAILED");

  // The refunded budget can be spent again, under the same key.
  auto retry = ledger_->Admit(dataset, kAlice, "key-1", "rff_embedding", "request-1", *event);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->outcome, Ledger::Admission::Outcome::kAdmitted);
  EXPECT_EQ(retry->release_id, admission->release_id);
  EXPECT_DOUBLE_EQ(retry->epsilon_spent, admission->epsilon_spent);
}

TEST_F(LedgerTest, CompleteThenReplayAndPendingResume) {
  const std::string dataset = NewDataset(v1::ADD_REMOVE, 10.0);
  auto event = privacy::PrivacyEvent::Gaussian(4.0);
  ASSERT_TRUE(event.ok());
  auto admission = ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "req", *event);
  ASSERT_TRUE(admission.ok());
  // Admitted but not completed (a crash: the attempt lease went with the
  // process): the same key resumes on the restarted ledger, no charge.
  ledger_ = std::make_unique<Ledger>(database_.get(), &clock_);
  auto resume = ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "req", *event);
  ASSERT_TRUE(resume.ok());
  EXPECT_EQ(resume->outcome, Ledger::Admission::Outcome::kResume);
  EXPECT_EQ(resume->release_id, admission->release_id);
  auto delivered = ledger_->Complete(admission->release_id, "artefact-bytes");
  ASSERT_TRUE(delivered.ok());
  EXPECT_EQ(*delivered, "artefact-bytes");
  // A second completion delivers the first artefact, never a second one.
  auto again = ledger_->Complete(admission->release_id, "other-bytes");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, "artefact-bytes");
  auto replay = ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "req", *event);
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(replay->outcome, Ledger::Admission::Outcome::kReplay);
  EXPECT_EQ(replay->artefact, "artefact-bytes");
  auto different = ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "other request", *event);
  EXPECT_EQ(different.status().code(), absl::StatusCode::kFailedPrecondition);
  auto report = ledger_->Report(dataset, kAlice);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->events_size(), 1);
  EXPECT_EQ(ledger_->Admit(dataset, kAlice, "", "rff_embedding", "req", *event).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Issue 11 A2, the exploit: attempt 1 is admitted and computing; a retry
// with the same key used to "resume" the same PENDING charge; attempt 1
// delivered (DONE); attempt 2 then failed and refunded the charge of the
// release attempt 1 had delivered. Now the retry is refused while attempt 1
// holds the lease, and a delivered release can never be refunded.
TEST_F(LedgerTest, DeliveredReleaseIsNeverRefundedAndRetriesDoNotRace) {
  const std::string dataset = NewDataset(v1::ADD_REMOVE, 10.0);
  auto event = privacy::PrivacyEvent::Gaussian(4.0);
  ASSERT_TRUE(event.ok());
  auto first = ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "req", *event);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->outcome, Ledger::Admission::Outcome::kAdmitted);
  auto charged = ledger_->Report(dataset, kAlice);
  ASSERT_TRUE(charged.ok());

  // A concurrent retry while attempt 1 runs: refused, nothing written.
  auto racing = ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "req", *event);
  EXPECT_EQ(racing.status().code(), absl::StatusCode::kAborted) << racing.status();
  EXPECT_THAT(racing.status().message(), HasSubstr("retry after it finishes"));

  // Attempt 1 delivers.
  ASSERT_TRUE(ledger_->Complete(first->release_id, "artefact").ok());
  ledger_->EndAttempt(first->release_id);
  // A refund of the delivered release is refused (compare-and-set on
  // PENDING) and changes nothing.
  EXPECT_EQ(ledger_->Refund(first->release_id, "late failure").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ledger_->FailAfterRowsRead(first->release_id, "inc_x").code(),
            absl::StatusCode::kFailedPrecondition);
  auto after = ledger_->Report(dataset, kAlice);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->SerializeAsString(), charged->SerializeAsString());
  auto artefact = ledger_->GetArtefact(first->release_id, kAlice, nullptr);
  ASSERT_TRUE(artefact.ok()) << artefact.status();
  EXPECT_EQ(*artefact, "artefact");
  // A retry of the DONE request returns the stored artefact, uncharged.
  auto replay = ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "req", *event);
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(replay->outcome, Ledger::Admission::Outcome::kReplay);
  EXPECT_EQ(replay->artefact, "artefact");
  auto problems = ledger_->VerifyTotals();
  ASSERT_TRUE(problems.ok());
  EXPECT_TRUE(problems->empty()) << ::testing::PrintToString(*problems);
}

// A failure after rows were read keeps its charge: no refund event, the
// release is FAILED, a retry under the key says so (and is not charged
// again), and only a new key is charged anew.
TEST_F(LedgerTest, FailureAfterRowsReadKeepsItsCharge) {
  const std::string dataset = NewDataset(v1::ADD_REMOVE, 10.0);
  auto event = privacy::PrivacyEvent::Gaussian(4.0);
  ASSERT_TRUE(event.ok());
  auto admission = ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "req", *event);
  ASSERT_TRUE(admission.ok());
  ASSERT_TRUE(ledger_->FailAfterRowsRead(admission->release_id, "inc_0001").ok());
  ledger_->EndAttempt(admission->release_id);
  // Not refundable afterwards either.
  EXPECT_EQ(ledger_->Refund(admission->release_id, "x").code(),
            absl::StatusCode::kFailedPrecondition);
  auto report = ledger_->Report(dataset, kAlice);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->events_size(), 1);
  EXPECT_EQ(report->events(0).refund_of(), 0);
  EXPECT_DOUBLE_EQ(report->epsilon_spent(), admission->epsilon_spent);
  auto retry = ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "req", *event);
  EXPECT_EQ(retry.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(retry.status().message(), HasSubstr("inc_0001"));
  EXPECT_THAT(retry.status().message(), HasSubstr("charge stands"));
  auto still = ledger_->Report(dataset, kAlice);
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->events_size(), 1);
  auto fresh = ledger_->Admit(dataset, kAlice, "k2", "rff_embedding", "req", *event);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->outcome, Ledger::Admission::Outcome::kAdmitted);
}

// Issue 23, 0(b): an attempt that marked its rows read and never finished
// (a crash, or a lost failure record) is final. The retry with the same key
// used to resume it (kResume) and read the rows again at no charge; now it
// makes the release FAILED with the marked incident, charge kept, and a
// second retry answers the same.
TEST_F(LedgerTest, ResumeAfterRowsWereMarkedReadIsFinal) {
  const std::string dataset = NewDataset(v1::ADD_REMOVE, 10.0);
  auto event = privacy::PrivacyEvent::Gaussian(4.0);
  ASSERT_TRUE(event.ok());
  auto admission = ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "req", *event);
  ASSERT_TRUE(admission.ok());
  ASSERT_TRUE(ledger_->MarkRowsRead(admission->release_id, "inc_marked").ok());
  // While the attempt holds its lease, a retry is refused, not finalised.
  EXPECT_EQ(ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "req", *event).status().code(),
            absl::StatusCode::kAborted);
  // The crash: the lease goes with the process.
  ledger_ = std::make_unique<Ledger>(database_.get(), &clock_);
  for (int retry = 0; retry < 2; ++retry) {
    auto resumed = ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "req", *event);
    ASSERT_FALSE(resumed.ok()) << "retry " << retry << " resumed a release that read rows";
    EXPECT_EQ(resumed.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(resumed.status().message(), HasSubstr("inc_marked"));
    EXPECT_THAT(resumed.status().message(), HasSubstr("charge stands"));
  }
  // Final: neither completed nor refunded later; the one charge stays.
  EXPECT_FALSE(ledger_->Complete(admission->release_id, "late").ok());
  EXPECT_EQ(ledger_->Refund(admission->release_id, "x").code(),
            absl::StatusCode::kFailedPrecondition);
  auto report = ledger_->Report(dataset, kAlice);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->events_size(), 1);
  EXPECT_DOUBLE_EQ(report->epsilon_spent(), admission->epsilon_spent);
  // An attempt that crashed before marking (no row read) still resumes.
  auto other = ledger_->Admit(dataset, kAlice, "k2", "rff_embedding", "req2", *event);
  ASSERT_TRUE(other.ok());
  ledger_ = std::make_unique<Ledger>(database_.get(), &clock_);
  auto resume = ledger_->Admit(dataset, kAlice, "k2", "rff_embedding", "req2", *event);
  ASSERT_TRUE(resume.ok()) << resume.status();
  EXPECT_EQ(resume->outcome, Ledger::Admission::Outcome::kResume);
}

// Issue 11 A5: a release belongs to the principal that made it. Another
// analyst's key does not replay it, its id reads as unknown, and listings
// show it to the owner and the curator only.
TEST_F(LedgerTest, ReleasesBelongToTheirCreator) {
  const std::string dataset = NewDataset(v1::ADD_REMOVE, 10.0);
  auto event = privacy::PrivacyEvent::Gaussian(4.0);
  ASSERT_TRUE(event.ok());
  auto mine = ledger_->Admit(dataset, kAlice, "shared-key", "rff_embedding", "req", *event);
  ASSERT_TRUE(mine.ok());
  ASSERT_TRUE(ledger_->Complete(mine->release_id, "alice's artefact").ok());
  // Bob, same key and bytes: his own, new release (charged), not a replay.
  auto theirs = ledger_->Admit(dataset, kBob, "shared-key", "rff_embedding", "req", *event);
  ASSERT_TRUE(theirs.ok());
  EXPECT_EQ(theirs->outcome, Ledger::Admission::Outcome::kAdmitted);
  EXPECT_NE(theirs->release_id, mine->release_id);
  auto stolen = ledger_->GetArtefact(mine->release_id, kBob, nullptr);
  EXPECT_EQ(stolen.status().code(), absl::StatusCode::kNotFound);
  auto unknown = ledger_->GetArtefact("rel_unknown", kBob, nullptr);
  EXPECT_EQ(stolen.status().message().substr(0, 12), unknown.status().message().substr(0, 12));
  EXPECT_TRUE(ledger_->GetArtefact(mine->release_id, Caller::Curator(), nullptr).ok());
  auto alice_list = ledger_->ListReleases(dataset, kAlice);
  auto bob_list = ledger_->ListReleases(dataset, kBob);
  auto all = ledger_->ListReleases(dataset, Caller::Curator());
  ASSERT_TRUE(alice_list.ok() && bob_list.ok() && all.ok());
  ASSERT_EQ(alice_list->releases_size(), 1);
  EXPECT_EQ(alice_list->releases(0).id(), mine->release_id);
  EXPECT_EQ(alice_list->releases(0).idempotency_key(), "shared-key");
  ASSERT_EQ(bob_list->releases_size(), 1);
  EXPECT_EQ(bob_list->releases(0).id(), theirs->release_id);
  EXPECT_EQ(all->releases_size(), 2);
}

// Every time the ledger stores is the injected clock's (server/clock.h):
// the release row, its charge, and a refund made later.
TEST_F(LedgerTest, StoredTimesComeFromTheClock) {
  const int64_t created = clock_.UnixNow();
  const std::string dataset = NewDataset(v1::ADD_REMOVE, 10.0);
  auto event = privacy::PrivacyEvent::Gaussian(4.0);
  ASSERT_TRUE(event.ok());
  auto admission = ledger_->Admit(dataset, kAlice, "k", "rff_embedding", "req", *event);
  ASSERT_TRUE(admission.ok()) << admission.status();
  clock_.Advance(90);
  ASSERT_TRUE(ledger_->Refund(admission->release_id, "failed before rows were read").ok());
  auto dataset_row = store_->GetDataset(dataset);
  ASSERT_TRUE(dataset_row.ok());
  EXPECT_EQ(dataset_row->created_unix(), created);
  auto releases = ledger_->ListReleases(dataset, kAlice);
  ASSERT_TRUE(releases.ok());
  ASSERT_EQ(releases->releases_size(), 1);
  EXPECT_EQ(releases->releases(0).created_unix(), created);
  auto report = ledger_->Report(dataset, kAlice);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->events_size(), 2);
  EXPECT_EQ(report->events(0).created_unix(), created);       // the charge
  EXPECT_EQ(report->events(1).created_unix(), created + 90);  // the refund
}

TEST_F(LedgerTest, EventOfTheWrongRelationIsRefused) {
  const std::string replace_one = NewDataset(v1::REPLACE_ONE);
  auto poisson = privacy::PrivacyEvent::PoissonSampledGaussian(0.01, 1.0);
  ASSERT_TRUE(poisson.ok());
  auto refused = ledger_->Admit(replace_one, kAlice, "poisson", "dpsgd", "req", *poisson);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();

  const std::string add_remove = NewDataset(v1::ADD_REMOVE);
  auto wor = privacy::PrivacyEvent::SampledWithoutReplacementGaussian(0.01, 1.0);
  ASSERT_TRUE(wor.ok());
  EXPECT_FALSE(ledger_->Admit(add_remove, kAlice, "wor", "dpsgd", "req", *wor).ok());
  auto rr = privacy::PrivacyEvent::RandomizedResponse(3, 1.0);
  ASSERT_TRUE(rr.ok());
  EXPECT_FALSE(ledger_->Admit(add_remove, kAlice, "rr", "noisy_samples", "req", *rr).ok());

  // Refusals write nothing and do not seal.
  for (const std::string& dataset : {replace_one, add_remove}) {
    auto report = ledger_->Report(dataset, kAlice);
    ASSERT_TRUE(report.ok());
    EXPECT_EQ(report->events_size(), 0);
    EXPECT_EQ(report->epsilon_spent(), 0.0);
    auto listed = store_->GetDataset(dataset);
    ASSERT_TRUE(listed.ok());
    EXPECT_FALSE(listed->sealed());
    auto releases = ledger_->ListReleases(dataset, kAlice);
    ASSERT_TRUE(releases.ok());
    EXPECT_EQ(releases->releases_size(), 0);
  }

  // The matching relations are admitted.
  EXPECT_TRUE(ledger_->Admit(add_remove, kAlice, "poisson", "dpsgd", "req", *poisson).ok());
  EXPECT_TRUE(ledger_->Admit(replace_one, kAlice, "wor", "dpsgd", "req", *wor).ok());
  auto problems = ledger_->VerifyTotals();
  ASSERT_TRUE(problems.ok());
  EXPECT_TRUE(problems->empty()) << ::testing::PrintToString(*problems);
}

TEST_F(LedgerTest, OverCapRefusalWritesNothing) {
  const std::string dataset = NewDataset(v1::ADD_REMOVE, 0.5);
  auto event = privacy::PrivacyEvent::Gaussian(1.0);  // eps ~ 4.4 at 1e-5
  ASSERT_TRUE(event.ok());
  auto refused = ledger_->Admit(dataset, kAlice, "big", "rff_embedding", "req", *event);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("spent epsilon 0,"));
  EXPECT_THAT(refused.status().message(), HasSubstr("cap 0.5 "));
  auto report = ledger_->Report(dataset, kAlice);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->events_size(), 0);
  auto listed = store_->GetDataset(dataset);
  ASSERT_TRUE(listed.ok());
  EXPECT_FALSE(listed->sealed());
}

// Discrete (grid) Gaussian events, what the server charges now, are stored
// under their own name and get the RDP conversion only; "gaussian(s)" rows
// (every release written before, continuous noise) keep their meaning and
// the exact analytic path; a dataset holding both is charged by RDP only.
TEST_F(LedgerTest, DiscreteGaussianIsStoredApartAndChargedByRdpOnly) {
  using privacy::PrivacyEvent;
  // The text form: the old name still decodes to a continuous event.
  auto old_row = privacy::DecodeEvent("gaussian(3)");
  ASSERT_TRUE(old_row.ok()) << old_row.status();
  EXPECT_TRUE(privacy::IsPlainGaussian(*old_row));
  const PrivacyEvent discrete = PrivacyEvent::DiscreteGaussian(3.0).value();
  EXPECT_EQ(privacy::EncodeEvent(discrete), "discrete_gaussian(3)");
  auto back = privacy::DecodeEvent(privacy::EncodeEvent(discrete));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(privacy::IsPlainGaussian(*back));
  EXPECT_EQ(privacy::Describe(*back), "DiscreteGaussian(s=3)");
  auto pair = privacy::DecodeEvent("compose(discrete_gaussian(2.5);discrete_gaussian(2.5))");
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_FALSE(privacy::IsPlainGaussian(*pair));
  EXPECT_FALSE(privacy::DecodeEvent("discrete_gaussian(0)").ok());

  // RDP epsilon of sum_i alpha / (2 s_i^2), computed here from the closed form.
  auto rdp_epsilon = [](double inverse_variance_sum) {
    std::vector<double> rdp;
    for (double a : privacy::DefaultRdpOrders()) rdp.push_back(a * inverse_variance_sum / 2.0);
    return privacy::RdpToEpsilon(privacy::DefaultRdpOrders(), rdp, 1e-5).value().epsilon;
  };

  // A dataset with an old continuous charge: exact path, below RDP.
  const std::string dataset = NewDataset(v1::ADD_REMOVE, 10.0);
  ASSERT_TRUE(ledger_->Admit(dataset, kAlice, "old", "rff_embedding", "r1", *old_row).ok());
  auto before = ledger_->Report(dataset, kAlice);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(before->has_epsilon_exact());
  EXPECT_EQ(before->epsilon_spent(), before->epsilon_exact());
  EXPECT_LT(before->epsilon_exact(), before->epsilon_rdp());
  // Then a discrete one: RDP of the summed curves, and nothing else.
  auto admitted = ledger_->Admit(dataset, kAlice, "new", "rff_embedding", "r2", discrete);
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_NEAR(admitted->epsilon_alone, rdp_epsilon(1 / 9.0), 1e-12);
  auto after = ledger_->Report(dataset, kAlice);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(after->has_epsilon_exact());
  EXPECT_EQ(after->epsilon_spent(), after->epsilon_rdp());
  EXPECT_NEAR(after->epsilon_spent(), rdp_epsilon(2 / 9.0), 1e-12);
  ASSERT_EQ(after->events_size(), 2);
  EXPECT_THAT(after->events(1).description(), HasSubstr("discrete_gaussian(3)"));

  // A dataset with discrete charges only: RDP only.
  const std::string fresh = NewDataset(v1::REPLACE_ONE, 10.0);
  ASSERT_TRUE(ledger_->Admit(fresh, kAlice, "d", "charfn_embedding", "r3", *pair).ok());
  auto only = ledger_->Report(fresh, kAlice);
  ASSERT_TRUE(only.ok()) << only.status();
  EXPECT_FALSE(only->has_epsilon_exact());
  EXPECT_NEAR(only->epsilon_spent(), rdp_epsilon(2 / 6.25), 1e-12);

  // Rebuilding the totals from the stored rows decodes both names.
  auto problems = ledger_->VerifyTotals();
  ASSERT_TRUE(problems.ok()) << problems.status();
  EXPECT_TRUE(problems->empty()) << ::testing::PrintToString(*problems);
}

// The event names added for discrete noise (docs/privacy.md 4.6, 4.7) round
// trip through the ledger's text form, and the old names keep their own
// meaning: a ledger written before them verifies unchanged.
TEST(LedgerEventCodecTest, DiscreteEventNamesRoundTrip) {
  auto grid = privacy::PrivacyEvent::GridGaussian(3.75);
  auto poisson = privacy::PrivacyEvent::PoissonSampledDiscreteGaussian(0.01, 1.1);
  auto wor = privacy::PrivacyEvent::SampledWithoutReplacementDiscreteGaussian(0.05, 2.0);
  auto old_poisson = privacy::PrivacyEvent::PoissonSampledGaussian(0.01, 1.1);
  ASSERT_TRUE(grid.ok() && poisson.ok() && wor.ok() && old_poisson.ok());
  EXPECT_EQ(privacy::EncodeEvent(*grid), "grid_gaussian(3.75)");
  EXPECT_EQ(privacy::EncodeEvent(*poisson), "discrete_poisson(0.01,1.1000000000000001)");
  EXPECT_EQ(privacy::EncodeEvent(*wor), "discrete_wor(0.050000000000000003,2)");
  auto repeated = privacy::PrivacyEvent::SelfCompose(*poisson, 7);
  ASSERT_TRUE(repeated.ok());
  for (const privacy::PrivacyEvent& event : {*grid, *poisson, *wor, *repeated, *old_poisson}) {
    const std::string text = privacy::EncodeEvent(event);
    auto decoded = privacy::DecodeEvent(text);
    ASSERT_TRUE(decoded.ok()) << text << ": " << decoded.status();
    EXPECT_EQ(privacy::EncodeEvent(*decoded), text);
    auto original = privacy::ComputeRdp(event, privacy::DefaultRdpOrders());
    auto again = privacy::ComputeRdp(*decoded, privacy::DefaultRdpOrders());
    ASSERT_TRUE(original.ok() && again.ok());
    EXPECT_EQ(*original, *again) << text;
  }
  // The discrete Poisson step costs at least the continuous one at every
  // order: the names are different events, not aliases.
  auto discrete_curve = privacy::ComputeRdp(*poisson, privacy::DefaultRdpOrders());
  auto continuous_curve = privacy::ComputeRdp(*old_poisson, privacy::DefaultRdpOrders());
  ASSERT_TRUE(discrete_curve.ok() && continuous_curve.ok());
  bool differs = false;
  for (size_t i = 0; i < discrete_curve->size(); ++i) {
    EXPECT_GE((*discrete_curve)[i], (*continuous_curve)[i] * (1 - 1e-12));
    differs = differs || (*discrete_curve)[i] != (*continuous_curve)[i];
  }
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace dpcurator::server::testing
