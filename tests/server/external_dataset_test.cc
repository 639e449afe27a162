// External datasets (issue 28 items 2-4, server side; docs/scale-out.md
// "External datasets"), through gRPC: a release on a dataset whose rows live
// in the curator's cluster is admitted and charged as usual and waits as a
// pending job; the curator's runner submits the exact statistic, which the
// server checks against the plan and noises with the in-process engine's
// own noise step.

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/data/csv.h"
#include "core/data/demo.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/privacy/noise_source.h"
#include "core/release/charfn_embedding.h"
#include "core/release/encoded_rows.h"
#include "core/release/labelled_release.h"
#include "core/release/marginals.h"
#include "core/release/rff_embedding.h"
#include "core/train/aim.h"
#include "core/train/mst.h"
#include "plan/releases.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"
#include "server/memory_budget.h"
#include "server/runner_service.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kExternalRows = 300;
constexpr uint64_t kExternalRowSeed = 5;

class ExternalDatasetTest : public ServerTest {
 protected:
  grpc::Status CreateExternal(v1::NeighbouringRelation relation, int64_t public_row_bound,
                              v1::Dataset* dataset, double epsilon_cap = 10.0) {
    v1::CreateDatasetRequest request;
    request.set_name("external");
    *request.mutable_schema() = DemoSchemaProto();
    request.mutable_budget()->set_epsilon(epsilon_cap);
    request.mutable_budget()->set_delta(kDelta);
    request.set_relation(relation);
    request.set_external(true);
    request.set_public_row_bound(public_row_bound);
    auto curator = Curator();
    auto context = curator.NewContext();
    return curator.datasets().CreateDataset(context.get(), request, dataset);
  }

  grpc::Status ListJobs(const client::Connection& as, const std::string& dataset_id,
                        v1::ListPendingJobsResponse* jobs) {
    client::Connection connection = as;
    v1::ListPendingJobsRequest request;
    request.set_dataset_id(dataset_id);
    auto context = connection.NewContext();
    return connection.runner().ListPendingJobs(context.get(), request, jobs);
  }
  v1::PendingJob OnlyJob(const std::string& dataset_id) {
    v1::ListPendingJobsResponse jobs;
    grpc::Status status = ListJobs(Curator(), dataset_id, &jobs);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(jobs.jobs_size(), 1);
    return jobs.jobs_size() > 0 ? jobs.jobs(0) : v1::PendingJob();
  }

  grpc::Status Submit(const client::Connection& as, const v1::SubmitStatisticRequest& request,
                      v1::SubmitStatisticResponse* response = nullptr) {
    client::Connection connection = as;
    v1::SubmitStatisticResponse local;
    auto context = connection.NewContext();
    return connection.runner().SubmitStatistic(context.get(), request,
                                               response != nullptr ? response : &local);
  }
  grpc::Status Fail(const client::Connection& as, const std::string& job_id,
                    const std::string& dataset_id, const std::string& reason) {
    client::Connection connection = as;
    v1::FailJobRequest request;
    request.set_job_id(job_id);
    request.set_dataset_id(dataset_id);
    request.set_reason(reason);
    v1::FailJobResponse response;
    auto context = connection.NewContext();
    return connection.runner().FailJob(context.get(), request, &response);
  }
  grpc::Status GetRelease(const std::string& release_id, v1::Release* release) {
    auto analyst = Analyst();
    v1::GetReleaseRequest request;
    request.set_release_id(release_id);
    auto context = analyst.NewContext();
    return analyst.releases().GetRelease(context.get(), request, release);
  }

  // The exact statistic of the demo rows under the job's plan, computed in
  // this process with the engine's own accumulation, in the module's layout.
  static Eigen::VectorXd ExactStatistic(const v1::PendingJob& job, int64_t rows, uint64_t seed) {
    v1::TableSchema schema_proto;
    v1::ReleaseRequest resolved;
    EXPECT_TRUE(schema_proto.ParseFromString(job.schema()));
    EXPECT_TRUE(resolved.ParseFromString(job.request()));
    const absl::StatusOr<data::Schema> schema = SchemaFromProto(schema_proto);
    EXPECT_TRUE(schema.ok()) << schema.status();
    // The rows as the upload stores them: the demo table's text, parsed.
    data::TableBuilder builder(*schema);
    for (const v1::Row& row : DemoRows(data::GenerateDemoTable(rows, seed))) {
      std::vector<std::string> cells(row.cells().begin(), row.cells().end());
      EXPECT_TRUE(builder.AddRow(cells).ok());
    }
    const release::EncodedRows encoded = release::EncodeRows(*schema, builder.Finish());
    absl::StatusOr<embed::LabelledEmbeddingAccumulator> exact =
        absl::InternalError("no kind");
    if (resolved.has_rff_embedding()) {
      auto params = release::RffEmbeddingKind::Resolve(ParamsFromProto(resolved.rff_embedding()),
                                                       *schema);
      EXPECT_TRUE(params.ok());
      auto prepared = release::RffEmbeddingKind::Prepare(*params, encoded.layout);
      EXPECT_TRUE(prepared.ok());
      exact = release::ExactLabelledEmbedding(prepared->feature_map, encoded);
    } else {
      using Kind = release::CharfnEmbeddingKind;
      auto params = Kind::Resolve(ParamsFromProto(resolved.charfn_embedding()), *schema);
      EXPECT_TRUE(params.ok());
      auto prepared = Kind::Prepare(*params, encoded.layout);
      EXPECT_TRUE(prepared.ok());
      EXPECT_TRUE(Kind::ScaleFeatureMap(*params, encoded.layout,
                                        Kind::DeclaredLengthScale(*params, encoded.layout),
                                        &prepared->feature_map)
                      .ok());
      exact = release::ExactLabelledEmbedding(prepared->feature_map, encoded);
    }
    EXPECT_TRUE(exact.ok()) << exact.status();
    return release::FlattenExactEmbedding(*exact);
  }

  static v1::SubmitStatisticRequest SubmitRequest(const v1::PendingJob& job,
                                                  const Eigen::VectorXd& statistic,
                                                  int64_t rows) {
    v1::SubmitStatisticRequest request;
    request.set_job_id(job.job_id());
    request.set_dataset_id(job.dataset_id());
    request.set_plan_digest(job.plan_digest());
    request.mutable_statistic()->Add(statistic.data(), statistic.data() + statistic.size());
    request.set_rows(rows);
    return request;
  }

  int EventCount(const std::string& dataset_id) {
    v1::BudgetReport report;
    EXPECT_TRUE(GetBudget(dataset_id, &report).ok());
    return report.events_size();
  }
  double Spent(const std::string& dataset_id) {
    v1::BudgetReport report;
    EXPECT_TRUE(GetBudget(dataset_id, &report).ok());
    return report.epsilon_spent();
  }
};

TEST_F(ExternalDatasetTest, CuratorCreatesAnExternalDatasetWithItsChecks) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateExternal(v1::ADD_REMOVE, 0, &dataset).ok());
  EXPECT_TRUE(dataset.external());
  EXPECT_EQ(dataset.row_count(), 0);
  v1::Dataset listed;
  ASSERT_TRUE(FindDataset(Curator(), dataset.id(), &listed).ok());
  EXPECT_TRUE(listed.external());

  // REPLACE_ONE needs its public n; a declared bound goes with external only.
  v1::Dataset refused;
  EXPECT_EQ(CreateExternal(v1::REPLACE_ONE, 0, &refused).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::Dataset replace_one;
  ASSERT_TRUE(CreateExternal(v1::REPLACE_ONE, 1000, &replace_one).ok());
  EXPECT_EQ(replace_one.public_row_bound(), 1000);
  EXPECT_EQ(CreateExternal(v1::ADD_REMOVE, -1, &refused).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::CreateDatasetRequest stored;
  stored.set_name("stored");
  *stored.mutable_schema() = DemoSchemaProto();
  stored.mutable_budget()->set_epsilon(1.0);
  stored.mutable_budget()->set_delta(kDelta);
  stored.set_public_row_bound(10);
  auto curator = Curator();
  auto context = curator.NewContext();
  EXPECT_EQ(curator.datasets().CreateDataset(context.get(), stored, &refused).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // An analyst creates nothing.
  auto analyst = Analyst();
  auto analyst_context = analyst.NewContext();
  stored.set_public_row_bound(0);
  stored.set_external(true);
  EXPECT_EQ(analyst.datasets().CreateDataset(analyst_context.get(), stored, &refused).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(ExternalDatasetTest, ReleaseIsPendingChargedOnceAndRetriedIdempotently) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateExternal(v1::ADD_REMOVE, 0, &dataset).ok());
  v1::Release pending;
  grpc::Status status = RequestRelease(RffRequest(dataset.id(), 0.5, "ext-key"), &pending);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(pending.state(), v1::RELEASE_STATE_PENDING);
  EXPECT_EQ(pending.artefact_case(), v1::Release::ARTEFACT_NOT_SET);
  EXPECT_FALSE(pending.replayed());
  EXPECT_EQ(pending.kind(), v1::RFF_EMBEDDING);
  EXPECT_NEAR(pending.epsilon_spent_total(), 0.5, 1e-6);
  EXPECT_EQ(EventCount(dataset.id()), 1);

  // The same key: the same pending release, no second charge.
  v1::Release again;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.5, "ext-key"), &again).ok());
  EXPECT_EQ(again.id(), pending.id());
  EXPECT_EQ(again.state(), v1::RELEASE_STATE_PENDING);
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(EventCount(dataset.id()), 1);
  EXPECT_NEAR(Spent(dataset.id()), 0.5, 1e-6);

  // GetRelease and ListReleases show the state.
  v1::Release got;
  ASSERT_TRUE(GetRelease(pending.id(), &got).ok());
  EXPECT_EQ(got.state(), v1::RELEASE_STATE_PENDING);
  EXPECT_EQ(got.artefact_case(), v1::Release::ARTEFACT_NOT_SET);
  auto analyst = Analyst();
  v1::ListReleasesRequest list;
  list.set_dataset_id(dataset.id());
  v1::ListReleasesResponse listed;
  auto context = analyst.NewContext();
  ASSERT_TRUE(analyst.releases().ListReleases(context.get(), list, &listed).ok());
  ASSERT_EQ(listed.releases_size(), 1);
  EXPECT_EQ(listed.releases(0).status(), "PENDING");

  // The job holds the plan: the resolved request (public seed set) and the
  // dataset's schema, with their digest.
  const v1::PendingJob job = OnlyJob(dataset.id());
  EXPECT_EQ(job.job_id(), pending.id());
  EXPECT_EQ(job.kind(), v1::RFF_EMBEDDING);
  EXPECT_EQ(job.plan_digest(), PlanDigest(job.schema(), job.request()));
  EXPECT_EQ(job.plan_digest().size(), 32u);
  v1::ReleaseRequest resolved;
  ASSERT_TRUE(resolved.ParseFromString(job.request()));
  EXPECT_EQ(resolved.rff_embedding().seed(), 12345u);
  EXPECT_EQ(resolved.rff_embedding().num_frequencies(), 50);
  v1::TableSchema schema;
  ASSERT_TRUE(schema.ParseFromString(job.schema()));
  EXPECT_EQ(schema.columns_size(), DemoSchemaProto().columns_size());
  // Only a curator lists jobs.
  v1::ListPendingJobsResponse refused;
  EXPECT_EQ(ListJobs(Analyst(), dataset.id(), &refused).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(ExternalDatasetTest, BadSubmissionsAreRefusedAndChangeNothing) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateExternal(v1::ADD_REMOVE, 0, &dataset).ok());
  v1::Dataset other;
  ASSERT_TRUE(CreateExternal(v1::ADD_REMOVE, 0, &other).ok());
  v1::Release pending;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.5, "k"), &pending).ok());
  const v1::PendingJob job = OnlyJob(dataset.id());
  const Eigen::VectorXd exact = ExactStatistic(job, kExternalRows, kExternalRowSeed);
  const v1::SubmitStatisticRequest good = SubmitRequest(job, exact, kExternalRows);

  // An analyst token cannot submit.
  EXPECT_EQ(Submit(Analyst(), good).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Submit(Device(), good).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // Unknown job; a job of another dataset (same answer as unknown).
  v1::SubmitStatisticRequest unknown = good;
  unknown.set_job_id("rel_00000000000000000000000000000000");
  EXPECT_EQ(Submit(Curator(), unknown).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::SubmitStatisticRequest foreign = good;
  foreign.set_dataset_id(other.id());
  EXPECT_EQ(Submit(Curator(), foreign).error_code(), grpc::StatusCode::NOT_FOUND);
  // Another plan's digest.
  v1::SubmitStatisticRequest digest = good;
  std::string changed = job.plan_digest();
  changed[0] = static_cast<char>(changed[0] ^ 1);
  digest.set_plan_digest(changed);
  EXPECT_EQ(Submit(Curator(), digest).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Shapes: length, non-finite entries, a negative row count.
  v1::SubmitStatisticRequest short_one = good;
  short_one.mutable_statistic()->RemoveLast();
  grpc::Status status = Submit(Curator(), short_one);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr(std::to_string(exact.size())));
  v1::SubmitStatisticRequest long_one = good;
  long_one.add_statistic(0.0);
  EXPECT_EQ(Submit(Curator(), long_one).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  for (const double bad : {std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity()}) {
    v1::SubmitStatisticRequest non_finite = good;
    non_finite.set_statistic(3, bad);
    status = Submit(Curator(), non_finite);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("not finite"));
  }
  v1::SubmitStatisticRequest negative = good;
  negative.set_rows(-1);
  EXPECT_EQ(Submit(Curator(), negative).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Nothing changed: the job is pending, the charge is the one admission's.
  EXPECT_EQ(OnlyJob(dataset.id()).job_id(), pending.id());
  v1::Release got;
  ASSERT_TRUE(GetRelease(pending.id(), &got).ok());
  EXPECT_EQ(got.state(), v1::RELEASE_STATE_PENDING);
  EXPECT_EQ(EventCount(dataset.id()), 1);

  // The good one completes it; then it is finished, and refused again.
  v1::SubmitStatisticResponse done;
  status = Submit(Curator(), good, &done);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(done.release().state(), v1::RELEASE_STATE_DONE);
  EXPECT_EQ(done.release().id(), pending.id());
  EXPECT_EQ(done.release().artefact_case(), v1::Release::ARTEFACT_NOT_SET);  // not echoed
  EXPECT_EQ(Submit(Curator(), good).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Fail(Curator(), job.job_id(), dataset.id(), "late").error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  v1::ListPendingJobsResponse none;
  ASSERT_TRUE(ListJobs(Curator(), dataset.id(), &none).ok());
  EXPECT_EQ(none.jobs_size(), 0);
  ASSERT_TRUE(GetRelease(pending.id(), &got).ok());
  EXPECT_EQ(got.state(), v1::RELEASE_STATE_DONE);
  EXPECT_TRUE(got.has_embedding());
  EXPECT_EQ(EventCount(dataset.id()), 1);
  // The retry of the analyst's key returns the stored release.
  v1::Release replayed;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.5, "k"), &replayed).ok());
  EXPECT_TRUE(replayed.replayed());
  EXPECT_EQ(replayed.state(), v1::RELEASE_STATE_DONE);
  EXPECT_TRUE(replayed.has_embedding());
}

// The submit path noises with the in-process engine's own step: the exact
// statistic of the same rows under the same plan, submitted, gives the
// release the server computes from uploaded rows, under the same seeded
// noise, for each kind and relation.
struct SameReleaseCase {
  v1::NeighbouringRelation relation;
  bool charfn;
};

class ExternalEqualsInProcessTest : public ExternalDatasetTest,
                                    public ::testing::WithParamInterface<SameReleaseCase> {};

TEST_P(ExternalEqualsInProcessTest, SubmittedStatisticGivesTheInProcessRelease) {
  const SameReleaseCase& c = GetParam();
  StopServer();
  noise_source_ = []() -> absl::StatusOr<std::unique_ptr<privacy::NoiseSource>> {
    return std::unique_ptr<privacy::NoiseSource>(new privacy::SeededNoiseSource(2024));
  };
  StartServer();
  auto request_for = [&](const std::string& dataset_id) {
    v1::ReleaseRequest request = RffRequest(dataset_id, 1.0, "same");
    if (c.charfn) {
      request.clear_rff_embedding();
      request.mutable_charfn_embedding()->set_num_frequencies(40);
      request.mutable_charfn_embedding()->set_length_scale(0.7);
      request.mutable_charfn_embedding()->set_seed(777);
    }
    return request;
  };
  v1::Dataset stored;
  ASSERT_TRUE(CreateDataset(10.0, kDelta, c.relation, &stored).ok());
  ASSERT_TRUE(UploadDemoRows(stored.id(), kExternalRows, kExternalRowSeed).ok());
  v1::Release in_process;
  grpc::Status status = RequestRelease(request_for(stored.id()), &in_process);
  ASSERT_TRUE(status.ok()) << status.error_message();

  v1::Dataset external;
  ASSERT_TRUE(CreateExternal(c.relation, c.relation == v1::REPLACE_ONE ? kExternalRows : 0, &external)
                  .ok());
  v1::Release pending;
  ASSERT_TRUE(RequestRelease(request_for(external.id()), &pending).ok());
  EXPECT_NEAR(pending.epsilon_spent_total(), in_process.epsilon_spent_total(), 1e-12);
  const v1::PendingJob job = OnlyJob(external.id());
  const Eigen::VectorXd exact = ExactStatistic(job, kExternalRows, kExternalRowSeed);
  if (c.relation == v1::REPLACE_ONE) {
    // The relation's n is public: a statistic of another row count is refused.
    EXPECT_EQ(Submit(Curator(), SubmitRequest(job, exact, kExternalRows - 1)).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  status = Submit(Curator(), SubmitRequest(job, exact, kExternalRows));
  ASSERT_TRUE(status.ok()) << status.error_message();
  v1::Release submitted;
  ASSERT_TRUE(GetRelease(pending.id(), &submitted).ok());
  ASSERT_TRUE(submitted.has_embedding());
  EXPECT_EQ(submitted.state(), v1::RELEASE_STATE_DONE);

  // Equal but for the ids.
  v1::EmbeddingArtefact expected = in_process.embedding();
  v1::EmbeddingArtefact actual = submitted.embedding();
  EXPECT_EQ(actual.dataset_id(), external.id());
  EXPECT_EQ(actual.release_id(), pending.id());
  for (v1::EmbeddingArtefact* artefact : {&expected, &actual}) {
    artefact->clear_dataset_id();
    artefact->clear_release_id();
  }
  ASSERT_GT(expected.class_values_size(), 0);
  std::string difference;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&difference);
  EXPECT_TRUE(differencer.Compare(expected, actual)) << difference;
  // And noised: the exact counts are integers, the released ones not all.
  bool noised = false;
  for (const double total : actual.class_totals()) noised |= total != std::round(total);
  EXPECT_TRUE(noised);
}

INSTANTIATE_TEST_SUITE_P(
    KindsAndRelations, ExternalEqualsInProcessTest,
    ::testing::Values(SameReleaseCase{v1::ADD_REMOVE, false}, SameReleaseCase{v1::ADD_REMOVE, true},
                      SameReleaseCase{v1::REPLACE_ONE, false},
                      SameReleaseCase{v1::REPLACE_ONE, true}),
    [](const ::testing::TestParamInfo<SameReleaseCase>& info) {
      return std::string(info.param.relation == v1::REPLACE_ONE ? "ReplaceOne" : "AddRemove") +
             (info.param.charfn ? "Charfn" : "Rff");
    });

TEST_F(ExternalDatasetTest, FailJobMarksFailedKeepsTheChargeAndTellsNoReason) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateExternal(v1::ADD_REMOVE, 0, &dataset).ok());
  v1::Release pending;
  ASSERT_TRUE(RequestRelease(RffRequest(dataset.id(), 0.5, "fails"), &pending).ok());
  const std::string reason = "shards/part-7.csv line 1234: column 'age' is not a number";
  EXPECT_EQ(Fail(Analyst(), pending.id(), dataset.id(), reason).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::Dataset other;
  ASSERT_TRUE(CreateExternal(v1::ADD_REMOVE, 0, &other).ok());
  EXPECT_EQ(Fail(Curator(), pending.id(), other.id(), reason).error_code(),
            grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(Fail(Curator(), pending.id(), dataset.id(), reason).ok());

  // The analyst: failed in the curator's cluster, and not why.
  v1::Release got;
  grpc::Status status = GetRelease(pending.id(), &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("failed in the curator's cluster"));
  EXPECT_THAT(status.error_message(), Not(HasSubstr("part-7")));
  EXPECT_THAT(status.error_message(), Not(HasSubstr("age")));
  status = RequestRelease(RffRequest(dataset.id(), 0.5, "fails"), &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("failed in the curator's cluster"));
  EXPECT_THAT(status.error_message(), Not(HasSubstr("part-7")));
  auto analyst = Analyst();
  v1::ListReleasesRequest list;
  list.set_dataset_id(dataset.id());
  v1::ListReleasesResponse listed;
  auto context = analyst.NewContext();
  ASSERT_TRUE(analyst.releases().ListReleases(context.get(), list, &listed).ok());
  ASSERT_EQ(listed.releases_size(), 1);
  EXPECT_EQ(listed.releases(0).status(), "FAILED");
  // The charge stands: one event, no refund.
  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  ASSERT_EQ(report.events_size(), 1);
  EXPECT_EQ(report.events(0).refund_of(), 0);
  EXPECT_NEAR(report.epsilon_spent(), 0.5, 1e-6);
  for (const auto& event : report.events()) EXPECT_THAT(event.description(), Not(HasSubstr("part-7")));
  // No more pending, and a submission for it is refused.
  v1::ListPendingJobsResponse none;
  ASSERT_TRUE(ListJobs(Curator(), dataset.id(), &none).ok());
  EXPECT_EQ(none.jobs_size(), 0);
  v1::PendingJob job;
  job.set_job_id(pending.id());
  job.set_dataset_id(dataset.id());
  EXPECT_EQ(Submit(Curator(), SubmitRequest(job, Eigen::VectorXd::Zero(3), 0)).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Fail(Curator(), pending.id(), dataset.id(), reason).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  // The curator's audit log has the reason.
  v1::ListAuditResponse audit;
  ASSERT_TRUE(ListAudit(100, &audit).ok());
  bool logged = false;
  for (const auto& record : audit.records()) {
    if (record.method() == "/dpcurator.v1.RunnerService/FailJob" && record.code() == 0) {
      logged = absl::StrContains(record.detail(), "part-7.csv line 1234");
    }
  }
  EXPECT_TRUE(logged);
}

TEST_F(ExternalDatasetTest, RefusedBeforeAdmissionWithNothingCharged) {
  v1::Dataset dataset;
  ASSERT_TRUE(CreateExternal(v1::ADD_REMOVE, 0, &dataset).ok());
  // A marginals release (no one-pass job of its own; mst and aim are
  // admitted since issue 41), and charfn with a private length-scale.
  v1::ReleaseRequest marginals;
  marginals.set_dataset_id(dataset.id());
  marginals.set_idempotency_key("marginals");
  marginals.set_epsilon(1.0);
  marginals.mutable_marginals()->add_cliques()->add_columns(
      DemoSchemaProto().columns(0).name());
  v1::Release release;
  grpc::Status status = RequestRelease(marginals, &release);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("external"));
  EXPECT_THAT(status.error_message(), HasSubstr("Nothing was charged"));
  v1::ReleaseRequest two_phase = RffRequest(dataset.id(), 1.0, "charfn");
  two_phase.mutable_charfn_embedding()->set_private_length_scale(true);
  status = RequestRelease(two_phase, &release);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("private_length_scale"));
  // Sessions of every step kind.
  auto analyst = Analyst();
  for (int kind = 0; kind < 3; ++kind) {
    v1::OpenSessionRequest open;
    open.set_dataset_id(dataset.id());
    open.set_idempotency_key(absl::StrCat("session-", kind));
    open.mutable_params()->set_steps(3);
    open.mutable_params()->set_sampling_rate(0.5);
    open.mutable_params()->set_noise_multiplier(2.0);
    if (kind == 0) open.mutable_params()->mutable_rff_embedding();
    if (kind == 1) open.mutable_params()->mutable_dp_sgd();
    if (kind == 2) open.mutable_params()->mutable_kernel_witness();
    v1::Session session;
    auto context = analyst.NewContext();
    status = analyst.sessions().OpenSession(context.get(), open, &session);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << kind;
    EXPECT_THAT(status.error_message(), HasSubstr("external")) << kind;
  }
  // Uploads.
  v1::UploadRowsRequest upload;
  upload.set_dataset_id(dataset.id());
  for (auto& row : DemoRows(data::GenerateDemoTable(10, 1))) *upload.add_rows() = std::move(row);
  v1::UploadRowsResponse uploaded;
  status = UploadMessages({upload}, &uploaded);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("external"));

  v1::BudgetReport report;
  ASSERT_TRUE(GetBudget(dataset.id(), &report).ok());
  EXPECT_EQ(report.events_size(), 0);
  EXPECT_EQ(report.sessions_size(), 0);
  EXPECT_EQ(report.epsilon_spent(), 0.0);
  v1::Dataset listed;
  ASSERT_TRUE(FindDataset(Curator(), dataset.id(), &listed).ok());
  EXPECT_EQ(listed.row_count(), 0);
  EXPECT_FALSE(listed.sealed());
}

TEST_F(ExternalDatasetTest, RunnerCallsOnAStoredDatasetAreRefused) {
  v1::Dataset stored;
  ASSERT_TRUE(CreateDataset(10.0, kDelta, v1::ADD_REMOVE, &stored).ok());
  v1::ListPendingJobsResponse jobs;
  EXPECT_EQ(ListJobs(Curator(), stored.id(), &jobs).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  // A stored dataset's release is no job, even for a curator.
  ASSERT_TRUE(UploadDemoRows(stored.id(), 100, 1).ok());
  v1::Release release;
  ASSERT_TRUE(RequestRelease(RffRequest(stored.id(), 0.5, "k"), &release).ok());
  EXPECT_EQ(release.state(), v1::RELEASE_STATE_DONE);
  EXPECT_EQ(Fail(Curator(), release.id(), stored.id(), "x").error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

// Issue 41: mst and aim on an external dataset. The plan fixes every table
// the recipe may read before admission; the runner submits their exact
// counts once; the server runs the whole recipe over them.

v1::ReleaseRequest RecipeRequest(const std::string& dataset_id, bool aim, const std::string& key) {
  v1::ReleaseRequest request;
  request.set_dataset_id(dataset_id);
  request.set_idempotency_key(key);
  request.set_epsilon(1.0);
  if (aim) {
    // A short run: 2 rounds a column.
    request.mutable_aim()->set_rounds(2 * DemoSchemaProto().columns_size());
  } else {
    request.mutable_mst();
  }
  return request;
}

v1::Dataset PlanDataset(bool external, v1::NeighbouringRelation relation, int64_t rows) {
  v1::Dataset dataset;
  dataset.set_id("ds_plan");
  *dataset.mutable_schema() = DemoSchemaProto();
  dataset.mutable_budget()->set_epsilon(10.0);
  dataset.mutable_budget()->set_delta(kDelta);
  dataset.set_relation(relation);
  dataset.set_external(external);
  if (external) {
    dataset.set_public_row_bound(rows);
  } else {
    dataset.set_row_count(rows);
  }
  return dataset;
}

// The cliques an external recipe's plan fixes are a function of the public
// schema and request: every 1-way and pair for mst, aim's candidates (its
// workload's downward closure, every 1-way among them) for aim; the same
// for any declared row count; none on a stored dataset. CheckExternalRelease
// admits both recipes. (Before issue 41 both were refused there.)
TEST(ExternalRecipePlanTest, TheTablesAreFixedByTheSchemaAndTheRequest) {
  const data::Schema schema = SchemaFromProto(DemoSchemaProto()).value();
  const int n = schema.num_columns();
  const data::Discretizer domain = data::Discretizer::Create(schema).value();
  std::vector<int> sizes;
  for (int c = 0; c < n; ++c) sizes.push_back(domain.domain_size(c));
  for (const bool aim : {false, true}) {
    SCOPED_TRACE(aim ? "aim" : "mst");
    const v1::ReleaseRequest request = RecipeRequest("ds_plan", aim, "k");
    const v1::Dataset external = PlanDataset(true, v1::ADD_REMOVE, 0);
    EXPECT_TRUE(plan::CheckExternalRelease(request, external).ok());
    absl::StatusOr<plan::ReleasePlan> planned = plan::PlanRelease(request, external, schema);
    ASSERT_TRUE(planned.ok()) << planned.status();
    std::vector<std::vector<int>> expected;
    if (aim) {
      const auto candidates =
          train::AimCandidates(train::DefaultAimWorkload(n, schema.label_index()), sizes);
      ASSERT_TRUE(candidates.ok());
      expected = train::AimTableCliques(*candidates);
      for (int c = 0; c < n; ++c) {
        EXPECT_NE(std::find(expected.begin(), expected.end(), std::vector<int>{c}),
                  expected.end());
      }
    } else {
      for (int c = 0; c < n; ++c) expected.push_back({c});
      for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) expected.push_back({i, j});
      }
    }
    EXPECT_EQ(planned->external_tables, expected);
    EXPECT_EQ(planned->external_table_cells, release::TotalCells(expected, sizes));
    EXPECT_EQ(planned->kind(), aim ? v1::AIM : v1::MST);
    // Another relation and a declared n: the same tables.
    const absl::StatusOr<plan::ReleasePlan> other =
        plan::PlanRelease(request, PlanDataset(true, v1::REPLACE_ONE, 12345), schema);
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_EQ(other->external_tables, expected);
    // A stored dataset's recipe reads its rows: no tables to submit.
    const absl::StatusOr<plan::ReleasePlan> stored =
        plan::PlanRelease(request, PlanDataset(false, v1::ADD_REMOVE, 300), schema);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_TRUE(stored->external_tables.empty());
    EXPECT_EQ(stored->footprint.submitted_bytes, 0);
    // The tables count in the external plan's public peak (the submitted
    // message and the tables made from it), and in its message size.
    EXPECT_GE(planned->footprint.public_bytes - 2 * 8 * planned->external_table_cells,
              stored->footprint.public_bytes);
    EXPECT_GE(planned->footprint.submitted_bytes, 8 * planned->external_table_cells);
  }
  // A named aim workload is the request's: its closure only.
  v1::ReleaseRequest named = RecipeRequest("ds_plan", true, "named");
  v1::AimClique& clique = *named.mutable_aim()->add_workload();
  clique.add_columns(schema.column(0).name);
  clique.add_columns(schema.column(1).name);
  const absl::StatusOr<plan::ReleasePlan> planned =
      plan::PlanRelease(named, PlanDataset(true, v1::ADD_REMOVE, 0), schema);
  ASSERT_TRUE(planned.ok()) << planned.status();
  std::vector<std::vector<int>> closure;
  for (int c = 0; c < n; ++c) closure.push_back({c});
  closure.push_back({0, 1});
  EXPECT_EQ(planned->external_tables, closure);
}

// The tables' memory is bounded before admission: a budget below the
// external plan's peak refuses it, saying the size and the limit, and a
// message limit below its submission refuses it too.
TEST(ExternalRecipePlanTest, TablesOverTheMemoryBudgetOrMessageLimitAreRefused) {
  const data::Schema schema = SchemaFromProto(DemoSchemaProto()).value();
  for (const bool aim : {false, true}) {
    SCOPED_TRACE(aim ? "aim" : "mst");
    const absl::StatusOr<plan::ReleasePlan> planned = plan::PlanRelease(
        RecipeRequest("ds_plan", aim, "k"), PlanDataset(true, v1::ADD_REMOVE, 0), schema);
    ASSERT_TRUE(planned.ok()) << planned.status();
    const int64_t peak = planned->footprint.public_bytes;
    MemoryBudget tight(peak - 1, 1);
    const absl::StatusOr<MemoryBudget::Reservation> refused = tight.Reserve(planned->footprint);
    ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(refused.status().message(), HasSubstr(FormatBytes(peak)));
    EXPECT_THAT(refused.status().message(), HasSubstr(FormatBytes(peak - 1)));
    EXPECT_THAT(refused.status().message(), HasSubstr("--memory-budget"));
    EXPECT_THAT(refused.status().message(),
                HasSubstr(absl::StrCat(planned->external_table_cells, " cells")));
    MemoryBudget enough(peak, 1);
    EXPECT_TRUE(enough.Reserve(planned->footprint).ok());
    // The submission's size is checked on its own (here with an answer
    // that fits any limit).
    plan::PlanFootprint answer_fits = planned->footprint;
    answer_fits.artefact_bytes = 0;
    const int64_t limit = planned->footprint.submitted_bytes - 1;
    const absl::Status too_big = CheckSendLimit(answer_fits, limit);
    EXPECT_EQ(too_big.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(too_big.message(), HasSubstr("in one message"));
    EXPECT_THAT(too_big.message(), HasSubstr(FormatBytes(limit)));
    EXPECT_THAT(too_big.message(), HasSubstr("Nothing was charged"));
    EXPECT_TRUE(CheckSendLimit(answer_fits, limit + 1).ok());
  }
}

// The exact tables of the demo rows over `cliques`, concatenated: what the
// module's marginals partial of the same rows holds.
Eigen::VectorXd ExactTables(const std::vector<std::vector<int>>& cliques, int64_t rows,
                            uint64_t seed) {
  const data::Schema schema = SchemaFromProto(DemoSchemaProto()).value();
  data::TableBuilder builder(schema);
  for (const v1::Row& row : DemoRows(data::GenerateDemoTable(rows, seed))) {
    std::vector<std::string> cells(row.cells().begin(), row.cells().end());
    EXPECT_TRUE(builder.AddRow(cells).ok());
  }
  release::MarginalsKind::Params params;
  params.cliques = cliques;
  absl::StatusOr<release::MarginalsKind::ExactCounts> exact =
      release::MarginalsKind::Count(params, schema, builder.Finish());
  EXPECT_TRUE(exact.ok()) << exact.status();
  return exact->counts;
}

std::vector<std::vector<int>> RecipeCliques(bool aim) {
  const data::Schema schema = SchemaFromProto(DemoSchemaProto()).value();
  const int n = schema.num_columns();
  if (!aim) return train::MstTableCliques(n);
  const data::Discretizer domain = data::Discretizer::Create(schema).value();
  std::vector<int> sizes;
  for (int c = 0; c < n; ++c) sizes.push_back(domain.domain_size(c));
  return train::AimTableCliques(
      train::AimCandidates(train::DefaultAimWorkload(n, schema.label_index()), sizes).value());
}

// A submission of the wrong shape for a recipe's job is refused and changes
// nothing; the right one completes it with the recipe's artefact.
TEST_F(ExternalDatasetTest, RecipeTablesOfTheWrongShapeAreRefusedAndChangeNothing) {
  for (const bool aim : {false, true}) {
    SCOPED_TRACE(aim ? "aim" : "mst");
    v1::Dataset dataset;
    ASSERT_TRUE(CreateExternal(v1::ADD_REMOVE, 0, &dataset).ok());
    v1::Release pending;
    grpc::Status status = RequestRelease(RecipeRequest(dataset.id(), aim, "k"), &pending);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(pending.state(), v1::RELEASE_STATE_PENDING);
    EXPECT_EQ(pending.kind(), aim ? v1::AIM : v1::MST);
    const v1::PendingJob job = OnlyJob(dataset.id());
    EXPECT_EQ(job.kind(), aim ? v1::AIM : v1::MST);
    const Eigen::VectorXd tables = ExactTables(RecipeCliques(aim), kExternalRows, kExternalRowSeed);
    const v1::SubmitStatisticRequest good = SubmitRequest(job, tables, kExternalRows);
    // The embedding's layout, a table short, a cell too many, a NaN.
    v1::SubmitStatisticRequest short_one = good;
    short_one.mutable_statistic()->RemoveLast();
    status = Submit(Curator(), short_one);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr(std::to_string(tables.size())));
    EXPECT_THAT(status.error_message(), HasSubstr("Nothing was changed"));
    v1::SubmitStatisticRequest long_one = good;
    long_one.add_statistic(1.0);
    EXPECT_EQ(Submit(Curator(), long_one).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    v1::SubmitStatisticRequest empty = good;
    empty.clear_statistic();
    EXPECT_EQ(Submit(Curator(), empty).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    v1::SubmitStatisticRequest nan = good;
    nan.set_statistic(0, std::numeric_limits<double>::quiet_NaN());
    status = Submit(Curator(), nan);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("not finite"));
    v1::SubmitStatisticRequest negative = good;
    negative.set_rows(-1);
    EXPECT_EQ(Submit(Curator(), negative).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(OnlyJob(dataset.id()).job_id(), pending.id());
    EXPECT_EQ(EventCount(dataset.id()), 1);
    v1::SubmitStatisticResponse done;
    status = Submit(Curator(), good, &done);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(done.release().state(), v1::RELEASE_STATE_DONE);
    v1::Release got;
    ASSERT_TRUE(GetRelease(pending.id(), &got).ok());
    EXPECT_EQ(aim ? got.has_aim() : got.has_mst(), true);
    EXPECT_EQ(EventCount(dataset.id()), 1);
  }
}

// The same rows' exact tables, submitted, give the release the server makes
// from the uploaded rows, byte for byte under the same seeded noise: the
// recipe is one code over either table source.
struct SameRecipeCase {
  v1::NeighbouringRelation relation;
  bool aim;
};

class ExternalRecipeEqualsInProcessTest
    : public ExternalDatasetTest,
      public ::testing::WithParamInterface<SameRecipeCase> {};

TEST_P(ExternalRecipeEqualsInProcessTest, SubmittedTablesGiveTheInProcessRelease) {
  const SameRecipeCase& c = GetParam();
  StopServer();
  noise_source_ = []() -> absl::StatusOr<std::unique_ptr<privacy::NoiseSource>> {
    return std::unique_ptr<privacy::NoiseSource>(new privacy::SeededNoiseSource(41));
  };
  StartServer();
  v1::Dataset stored;
  ASSERT_TRUE(CreateDataset(10.0, kDelta, c.relation, &stored).ok());
  ASSERT_TRUE(UploadDemoRows(stored.id(), kExternalRows, kExternalRowSeed).ok());
  v1::Release in_process;
  grpc::Status status = RequestRelease(RecipeRequest(stored.id(), c.aim, "same"), &in_process);
  ASSERT_TRUE(status.ok()) << status.error_message();

  v1::Dataset external;
  ASSERT_TRUE(CreateExternal(c.relation, c.relation == v1::REPLACE_ONE ? kExternalRows : 0, &external)
                  .ok());
  v1::Release pending;
  ASSERT_TRUE(RequestRelease(RecipeRequest(external.id(), c.aim, "same"), &pending).ok());
  EXPECT_NEAR(pending.epsilon_spent_total(), in_process.epsilon_spent_total(), 1e-12);
  const v1::PendingJob job = OnlyJob(external.id());
  const Eigen::VectorXd tables = ExactTables(RecipeCliques(c.aim), kExternalRows, kExternalRowSeed);
  status = Submit(Curator(), SubmitRequest(job, tables, kExternalRows));
  ASSERT_TRUE(status.ok()) << status.error_message();
  v1::Release submitted;
  ASSERT_TRUE(GetRelease(pending.id(), &submitted).ok());
  EXPECT_EQ(submitted.state(), v1::RELEASE_STATE_DONE);

  // Equal but for the ids, and noised.
  std::string expected;
  std::string actual;
  if (c.aim) {
    ASSERT_TRUE(submitted.has_aim());
    v1::AimArtefact a = in_process.aim();
    v1::AimArtefact b = submitted.aim();
    EXPECT_EQ(b.dataset_id(), external.id());
    for (v1::AimArtefact* artefact : {&a, &b}) {
      artefact->clear_dataset_id();
      artefact->clear_release_id();
    }
    ASSERT_GT(a.rounds_size(), 0);
    bool noised = false;
    for (const double x : b.one_way(0).counts()) noised |= x != std::round(x);
    EXPECT_TRUE(noised);
    expected = a.SerializeAsString();
    actual = b.SerializeAsString();
  } else {
    ASSERT_TRUE(submitted.has_mst());
    v1::MstArtefact a = in_process.mst();
    v1::MstArtefact b = submitted.mst();
    EXPECT_EQ(b.dataset_id(), external.id());
    for (v1::MstArtefact* artefact : {&a, &b}) {
      artefact->clear_dataset_id();
      artefact->clear_release_id();
    }
    ASSERT_GT(a.edges_size(), 0);
    bool noised = false;
    for (const double x : b.two_way(0).counts()) noised |= x != std::round(x);
    EXPECT_TRUE(noised);
    expected = a.SerializeAsString();
    actual = b.SerializeAsString();
  }
  EXPECT_FALSE(expected.empty());
  EXPECT_TRUE(expected == actual) << "the external release differs from the in-process one";
}

INSTANTIATE_TEST_SUITE_P(
    RecipesAndRelations, ExternalRecipeEqualsInProcessTest,
    ::testing::Values(SameRecipeCase{v1::ADD_REMOVE, false}, SameRecipeCase{v1::ADD_REMOVE, true},
                      SameRecipeCase{v1::REPLACE_ONE, false},
                      SameRecipeCase{v1::REPLACE_ONE, true}),
    [](const ::testing::TestParamInfo<SameRecipeCase>& info) {
      return std::string(info.param.relation == v1::REPLACE_ONE ? "ReplaceOne" : "AddRemove") +
             (info.param.aim ? "Aim" : "Mst");
    });

}  // namespace
}  // namespace dpcurator::server::testing
