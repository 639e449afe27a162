// The ledger under concurrent admission: many clients at once against a
// budget that admits exactly k releases.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/privacy/calibration.h"
#include "core/privacy/conversion.h"
#include "core/privacy/events.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

class ConcurrencyTest : public ServerTest {};

// Releases at a fixed noise multiplier s cost the same; the cap is set
// between the composed epsilon of k and of k + 1 such releases, so exactly k
// of 32 concurrent requests may succeed.
TEST_F(ConcurrencyTest, ThirtyTwoClientsExactlyKAdmitted) {
  constexpr int kClients = 32;
  constexpr int kAdmissible = 5;
  constexpr double kNoise = 4.0;
  constexpr double kDelta = 1e-5;
  auto epsilon_of = [&](int count) {
    auto one = privacy::PrivacyEvent::DiscreteGaussian(kNoise);  // what the server charges
    auto many = privacy::PrivacyEvent::SelfCompose(*one, count);
    return privacy::ComputeEpsilonReport(*many, kDelta)->epsilon;
  };
  const double cap = 0.5 * (epsilon_of(kAdmissible) + epsilon_of(kAdmissible + 1));
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(cap, kDelta, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 200, 21).ok());

  std::atomic<int> admitted{0}, refused{0}, other{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      client::Connection analyst = Analyst();
      v1::ReleaseRequest request = RffRequest(dataset.id(), 1.0, "concurrent-" + std::to_string(c));
      request.set_noise_multiplier(kNoise);
      v1::Release release;
      auto context = analyst.NewContext();
      grpc::Status status = analyst.releases().RequestRelease(context.get(), request, &release);
      if (status.ok()) {
        ++admitted;
      } else if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        ++refused;
      } else {
        ++other;
      }
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(admitted.load(), kAdmissible);
  EXPECT_EQ(refused.load(), kClients - kAdmissible);
  EXPECT_EQ(other.load(), 0);
  v1::BudgetReport budget;
  ASSERT_TRUE(GetBudget(dataset.id(), &budget).ok());
  EXPECT_LE(budget.epsilon_spent(), cap);
  EXPECT_NEAR(budget.epsilon_spent(), epsilon_of(kAdmissible), 1e-9);
  EXPECT_EQ(budget.events_size(), kAdmissible);
}

// Concurrent retries of one idempotency key: one charge, one artefact. A
// retry that arrives while the first attempt computes is refused (ABORTED:
// one attempt per key at a time, issue 11 A2) rather than racing it; every
// retry after it returns the stored artefact.
TEST_F(ConcurrencyTest, ConcurrentRetriesOfOneKeyChargeOnce) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateDataset(10.0, 1e-5, v1::ADD_REMOVE, &dataset).ok());
  ASSERT_TRUE(UploadDemoRows(dataset.id(), 200, 22).ok());
  const v1::ReleaseRequest request = RffRequest(dataset.id(), 1.0, "same-key");
  std::vector<std::string> artefacts(16);
  std::vector<grpc::StatusCode> codes(16, grpc::StatusCode::UNKNOWN);
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&, c] {
      client::Connection analyst = Analyst();
      v1::Release release;
      auto context = analyst.NewContext();
      grpc::Status status = analyst.releases().RequestRelease(context.get(), request, &release);
      codes[c] = status.error_code();
      if (status.ok()) artefacts[c] = release.embedding().SerializeAsString();
    });
  }
  for (auto& client : clients) client.join();
  std::string delivered;
  for (int c = 0; c < 16; ++c) {
    ASSERT_TRUE(codes[c] == grpc::StatusCode::OK || codes[c] == grpc::StatusCode::ABORTED)
        << codes[c];
    if (codes[c] != grpc::StatusCode::OK) continue;
    if (delivered.empty()) delivered = artefacts[c];
    EXPECT_EQ(artefacts[c], delivered);
  }
  ASSERT_FALSE(delivered.empty());
  // The aborted ones retry now: the stored artefact, replayed.
  {
    client::Connection analyst = Analyst();
    v1::Release release;
    auto context = analyst.NewContext();
    ASSERT_TRUE(analyst.releases().RequestRelease(context.get(), request, &release).ok());
    EXPECT_TRUE(release.replayed());
    EXPECT_EQ(release.embedding().SerializeAsString(), delivered);
  }
  v1::BudgetReport budget;
  ASSERT_TRUE(GetBudget(dataset.id(), &budget).ok());
  EXPECT_EQ(budget.events_size(), 1);
  EXPECT_NEAR(budget.epsilon_spent(), 1.0, 1e-6);
}

}  // namespace
}  // namespace dpcurator::server::testing
