// The event the ledger charges must be the event of the mechanism the engine
// actually ran (issue 12): the same noise multiplier, sensitivity and
// sampling rate, for every release kind, calibrated or not, and for session
// steps under both relations. Each kind's unit (core/release/) plans the
// mechanism the ledger charges and records the one its engine ran, and
// ComputeRelease refuses when they differ (tests/release/wire_test.cc);
// this test checks the same end to end, through the server and the ledger.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/privacy/event_codec.h"
#include "core/privacy/events.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

class EventConsistencyTest : public ServerTest {
 protected:
  // The newest charge on the dataset, decoded from the ledger's text.
  std::string LastCharge(const std::string& dataset_id) {
    v1::BudgetReport report;
    EXPECT_TRUE(GetBudget(dataset_id, &report).ok());
    EXPECT_GT(report.events_size(), 0);
    return report.events_size() > 0 ? report.events(report.events_size() - 1).description() : "";
  }

  // The artefact's own record of its mechanism, checked for internal
  // consistency: the sensitivity of the labelled embedding under the
  // dataset's relation, and noise std = multiplier x sensitivity.
  void ExpectEngineRecord(const v1::EmbeddingArtefact& artefact, v1::NeighbouringRelation relation,
                          int64_t rows) {
    const double sensitivity =
        relation == v1::ADD_REMOVE ? std::sqrt(2.0) : 2.0 / static_cast<double>(rows);
    EXPECT_DOUBLE_EQ(artefact.sensitivity(), sensitivity);
    EXPECT_DOUBLE_EQ(artefact.noise_stddev(), artefact.noise_multiplier() * sensitivity);
  }
};

TEST_F(EventConsistencyTest, OneShotKindsChargeTheMechanismTheyRan) {
  for (v1::NeighbouringRelation relation : {v1::ADD_REMOVE, v1::REPLACE_ONE}) {
    SCOPED_TRACE(v1::NeighbouringRelation_Name(relation));
    v1::Dataset dataset;
    ASSERT_TRUE(CreateDataset(50.0, 1e-5, relation, &dataset).ok());
    ASSERT_TRUE(UploadDemoRows(dataset.id(), 300, 3).ok());
    struct Case {
      std::string name;
      v1::ReleaseRequest request;
      int gaussians;  // PEARL's private length-scale is a second release
    };
    std::vector<Case> cases;
    cases.push_back({"rff calibrated", RffRequest(dataset.id(), 0.8, "rff-eps"), 1});
    {
      v1::ReleaseRequest request = RffRequest(dataset.id(), 1.0, "rff-s");
      request.set_noise_multiplier(6.5);
      cases.push_back({"rff explicit s", request, 1});
    }
    for (bool private_scale : {false, true}) {
      for (bool calibrated : {false, true}) {
        v1::ReleaseRequest request;
        request.set_dataset_id(dataset.id());
        request.set_idempotency_key(absl::StrCat("charfn-", private_scale, calibrated));
        request.mutable_charfn_embedding()->set_num_frequencies(20);
        request.mutable_charfn_embedding()->set_private_length_scale(private_scale);
        if (calibrated) {
          request.set_epsilon(0.9);
        } else {
          request.set_noise_multiplier(7.25);
        }
        cases.push_back({absl::StrCat("charfn private=", private_scale, " calibrated=", calibrated),
                         request, private_scale ? 2 : 1});
      }
    }
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      v1::Release release;
      grpc::Status status = RequestRelease(c.request, &release);
      ASSERT_TRUE(status.ok()) << status.error_message();
      const v1::EmbeddingArtefact& artefact = release.embedding();
      ExpectEngineRecord(artefact, relation, 300);
      if (c.request.privacy_case() == v1::ReleaseRequest::kNoiseMultiplier) {
        EXPECT_EQ(artefact.noise_multiplier(), c.request.noise_multiplier());
      }
      // The event rebuilt from the engine's record equals the charge.
      auto one = privacy::PrivacyEvent::GridGaussian(artefact.noise_multiplier());
      ASSERT_TRUE(one.ok());
      privacy::PrivacyEvent expected = *one;
      if (c.gaussians == 2) {
        auto both = privacy::PrivacyEvent::Compose({*one, *one});
        ASSERT_TRUE(both.ok());
        expected = *both;
        EXPECT_TRUE(artefact.length_scale_private());
        EXPECT_GT(artefact.distance_sensitivity(), 0.0);
      }
      EXPECT_EQ(LastCharge(dataset.id()), privacy::EncodeEvent(expected));
      // And a calibrated request got what it asked for, alone.
      if (c.request.privacy_case() == v1::ReleaseRequest::kEpsilon) {
        EXPECT_LE(artefact.epsilon(), c.request.epsilon() + 1e-12);
        EXPECT_GT(artefact.epsilon(), c.request.epsilon() * 0.999);
      }
    }
  }
}

TEST_F(EventConsistencyTest, SessionStepsChargeTheSamplingTheyRan) {
  for (v1::NeighbouringRelation relation : {v1::ADD_REMOVE, v1::REPLACE_ONE}) {
    SCOPED_TRACE(v1::NeighbouringRelation_Name(relation));
    v1::Dataset dataset;
    ASSERT_TRUE(CreateDataset(50.0, 1e-5, relation, &dataset).ok());
    ASSERT_TRUE(UploadDemoRows(dataset.id(), 333, 8).ok());
    v1::OpenSessionRequest open;
    open.set_dataset_id(dataset.id());
    open.set_idempotency_key("s");
    open.mutable_params()->set_steps(4);
    open.mutable_params()->set_sampling_rate(0.1);
    open.mutable_params()->set_epsilon(2.0);
    open.mutable_params()->mutable_rff_embedding()->set_num_frequencies(10);
    client::Connection analyst = Analyst();
    v1::Session session;
    {
      auto context = analyst.NewContext();
      ASSERT_TRUE(analyst.sessions().OpenSession(context.get(), open, &session).ok());
    }
    // The resolved rate is the one the steps use: under REPLACE_ONE the
    // batch is floor(q n) rows, so q is m / n exactly.
    const double q = session.params().sampling_rate();
    if (relation == v1::REPLACE_ONE) {
      EXPECT_EQ(q, 33.0 / 333.0);
    }
    const double s = session.noise_multiplier();
    auto step_event = relation == v1::ADD_REMOVE
                          ? privacy::PrivacyEvent::PoissonSampledDiscreteGaussian(q, s)
                          : privacy::PrivacyEvent::SampledWithoutReplacementDiscreteGaussian(q, s);
    ASSERT_TRUE(step_event.ok());
    auto reserved = privacy::PrivacyEvent::SelfCompose(*step_event, 4);
    ASSERT_TRUE(reserved.ok());
    EXPECT_EQ(LastCharge(dataset.id()), privacy::EncodeEvent(*reserved));
    v1::SessionStepRequest step;
    step.set_session_id(session.id());
    step.set_step(0);
    v1::SessionStepResponse response;
    {
      auto context = analyst.NewContext();
      ASSERT_TRUE(analyst.sessions().Step(context.get(), step, &response).ok());
    }
    EXPECT_EQ(response.batch().noise_multiplier(), s);
    if (relation == v1::REPLACE_ONE) {
      EXPECT_EQ(response.batch().public_n(), 33);
      ExpectEngineRecord(response.batch(), relation, 33);
    } else {
      EXPECT_EQ(response.batch().public_n(), 0);  // the batch size stays private
      ExpectEngineRecord(response.batch(), relation, 0);
    }
  }
}

}  // namespace
}  // namespace dpcurator::server::testing
