// The wire side of the release kinds: a kind has one name (its ReleaseKind
// value in lower case = its ReleaseRequest.kind case), every kind on the
// wire is bound in the server's registry to a unit whose plan yields an
// event, and artefact files of format 1 (before ReleaseKind) still train
// while newer formats are refused with a clear message.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "client/methods/merf.h"
#include "client/methods/pearl.h"
#include "core/data/demo.h"
#include "core/privacy/event_codec.h"
#include "core/privacy/conversion.h"
#include "core/release/category_fit.h"
#include "core/release/encoded_rows.h"
#include "core/release/mechanism_record.h"
#include "core/release/rff_embedding.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"
#include "server/plans.h"

namespace dpcurator {
namespace {

const google::protobuf::OneofDescriptor& KindOneof() {
  const auto* oneof = v1::ReleaseRequest::descriptor()->FindOneofByName("kind");
  EXPECT_NE(oneof, nullptr);
  return *oneof;
}

TEST(ReleaseKindWireTest, EveryKindHasOneNameAndABindingThatPlansAnEvent) {
  const auto* kinds = v1::ReleaseKind_descriptor();
  const data::Schema schema = data::DemoSchema();
  int bound = 0;
  for (int i = 0; i < kinds->value_count(); ++i) {
    const auto kind = static_cast<v1::ReleaseKind>(kinds->value(i)->number());
    if (kind == v1::RELEASE_KIND_UNSPECIFIED) continue;
    const std::string name = ReleaseKindName(kind);
    SCOPED_TRACE(name);
    EXPECT_EQ(ReleaseKindFromName(name), kind);
    const auto* field = v1::ReleaseRequest::descriptor()->FindFieldByName(name);
    ASSERT_NE(field, nullptr) << "ReleaseRequest.kind has no case named " << name;
    ASSERT_EQ(field->containing_oneof(), &KindOneof());
    if (kind == v1::MST || kind == v1::AIM || kind == v1::MARGINALS ||
        kind == v1::CATEGORY_FIT) {
      // A recipe of several mechanisms (plan/releases.cc PlanMstRelease,
      // event train::MstEvent; tests/server/mst_release_test.cc; and
      // PlanAimRelease, event train::AimEvent, tests/server/aim_release_test.cc),
      // not a one-shot Gaussian binding; marginals (plan/partition.cc
      // PlanMarginalsRelease, tests/server/partition_release_test.cc) reads
      // the stored values, not the encoded rows, as they do; category_fit
      // (plan/category_fit.h PlanCategoryFitRelease, event
      // release::CategoryFitEvent; CategoryFitPlanTest below) an open
      // column's stored values.
      EXPECT_EQ(server::BindingFor(
                    static_cast<v1::ReleaseRequest::KindCase>(field->number())),
                nullptr);
      ++bound;
      continue;
    }
    const auto* binding =
        server::BindingFor(static_cast<v1::ReleaseRequest::KindCase>(field->number()));
    ASSERT_NE(binding, nullptr) << name << " is on the wire but not in the registry";
    EXPECT_EQ(binding->kind(), kind);
    // Its default request resolves, plans a mechanism, and that mechanism
    // has an accounting event.
    v1::ReleaseRequest request;
    request.GetReflection()->MutableMessage(&request, field);
    ASSERT_TRUE(binding->Resolve(schema, &request).ok());
    const release::GaussianMechanismRecord planned = binding->Plan(request, 2.5);
    EXPECT_FALSE(planned.noise_multipliers.empty());
    EXPECT_TRUE(release::OneShotEvent(planned).ok());
    ++bound;
  }
  // And the other way: every case of the oneof is a ReleaseKind.
  EXPECT_EQ(bound, KindOneof().field_count());
  for (int i = 0; i < KindOneof().field_count(); ++i) {
    EXPECT_NE(ReleaseKindFromName(KindOneof().field(i)->name()), v1::RELEASE_KIND_UNSPECIFIED)
        << KindOneof().field(i)->name();
  }
  EXPECT_EQ(server::BindingFor(v1::ReleaseRequest::KIND_NOT_SET), nullptr);
}

TEST(ReleaseKindWireTest, NamesAreExact) {
  EXPECT_EQ(ReleaseKindName(v1::RFF_EMBEDDING), "rff_embedding");
  EXPECT_EQ(ReleaseKindName(v1::CHARFN_EMBEDDING), "charfn_embedding");
  EXPECT_EQ(ReleaseKindName(v1::RELEASE_KIND_UNSPECIFIED), "");
  for (const char* other : {"", "RFF_EMBEDDING", "rff", "release_kind_unspecified", "charfn"}) {
    EXPECT_EQ(ReleaseKindFromName(other), v1::RELEASE_KIND_UNSPECIFIED) << other;
  }
}

TEST(ArtefactFormatTest, ReadsFormatsOneAndTwoAndRefusesNewer) {
  v1::EmbeddingArtefact artefact;
  artefact.set_format_version(1);
  artefact.set_legacy_feature_map("rff");
  EXPECT_EQ(ArtefactKind(artefact).value(), v1::RFF_EMBEDDING);
  artefact.set_legacy_feature_map("charfn");
  EXPECT_EQ(ArtefactKind(artefact).value(), v1::CHARFN_EMBEDDING);
  artefact.set_legacy_feature_map("other");
  EXPECT_EQ(ArtefactKind(artefact).status().code(), absl::StatusCode::kDataLoss);

  artefact.Clear();
  artefact.set_format_version(kEmbeddingArtefactFormatVersion);
  EXPECT_EQ(ArtefactKind(artefact).status().code(), absl::StatusCode::kDataLoss);
  artefact.set_kind(v1::CHARFN_EMBEDDING);
  EXPECT_EQ(ArtefactKind(artefact).value(), v1::CHARFN_EMBEDDING);

  artefact.set_format_version(kEmbeddingArtefactFormatVersion + 1);
  const absl::Status newer = ArtefactKind(artefact).status();
  EXPECT_EQ(newer.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(newer.message().find("upgrade"), std::string::npos) << newer.message();
  artefact.set_format_version(0);
  EXPECT_EQ(ArtefactKind(artefact).status().code(), absl::StatusCode::kDataLoss);
}

// A release as a format-1 client stored it (kind named by the feature map
// only), made by the RFF unit without noise.
v1::Release FormatOneRffRelease() {
  const data::Schema schema = data::DemoSchema();
  const release::EncodedRows rows = release::EncodeRows(schema, data::GenerateDemoTable(300, 5));
  release::RffEmbeddingKind::Params params;
  params.num_frequencies = 10;
  params.seed = 9;
  privacy::ZeroNoiseSource zero;
  const auto result = release::RffEmbeddingKind::Run(
                          params, rows, privacy::NeighbouringRelation::kAddRemove, 1.0,
                          rows.num_rows(), &zero)
                          .value();
  v1::Release release;
  release.set_id("rel_format1");
  release.set_legacy_kind_name("rff_embedding");
  v1::EmbeddingArtefact& artefact = *release.mutable_embedding();
  SetArtefactFields(result, &artefact);
  artefact.clear_kind();
  artefact.set_format_version(1);
  artefact.set_legacy_feature_map("rff");
  *artefact.mutable_schema() = SchemaToProto(schema);
  artefact.set_schema_fingerprint(schema.FingerprintHex());
  artefact.set_relation(v1::ADD_REMOVE);
  return release;
}

TEST(ArtefactFormatTest, FormatOneFilesStillTrainAndKindsAreChecked) {
  v1::Release release = FormatOneRffRelease();
  train::EmbeddingTrainerOptions options;
  options.steps = 3;
  options.batch_size = 32;
  const auto model = client::TrainMerfModel(release, options);
  EXPECT_TRUE(model.ok()) << model.status();
  // The same artefact is not a PEARL one: the message says which command.
  const auto wrong = client::TrainPearlModel(release, options, client::PearlOptions{});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("train merf"), std::string::npos)
      << wrong.status().message();
  // A newer format is refused before anything is trained.
  release.mutable_embedding()->set_format_version(kEmbeddingArtefactFormatVersion + 1);
  const auto newer = client::TrainMerfModel(release, options);
  EXPECT_EQ(newer.status().code(), absl::StatusCode::kFailedPrecondition);
}

// The guard behind the ledger: a plan whose charge differs from what the
// engine runs (one Gaussian charged more or fewer, another multiplier)
// releases nothing.
TEST(ReleaseGuardTest, AnEngineThatDiffersFromTheChargeReleasesNothing) {
  const data::Schema schema = data::DemoSchema();
  v1::Dataset dataset;
  dataset.set_id("ds_guard");
  *dataset.mutable_schema() = SchemaToProto(schema);
  dataset.set_schema_fingerprint(schema.FingerprintHex());
  dataset.set_relation(v1::REPLACE_ONE);
  dataset.mutable_budget()->set_delta(1e-5);
  dataset.set_row_count(300);
  const release::EncodedRows rows = release::EncodeRows(schema, data::GenerateDemoTable(300, 2));
  v1::ReleaseRequest request;
  request.set_dataset_id(dataset.id());
  request.set_noise_multiplier(2.0);
  request.mutable_charfn_embedding()->set_num_frequencies(10);
  request.mutable_charfn_embedding()->set_private_length_scale(true);
  const server::ReleasePlan plan = server::PlanRelease(request, dataset, schema).value();
  ASSERT_EQ(plan.planned.noise_multipliers, (std::vector<double>{2.0, 2.0}));
  privacy::SeededNoiseSource noise(3);
  const auto released = server::ComputeRelease(plan, dataset, rows, "rel_ok", 1.0, &noise);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(released->kind(), v1::CHARFN_EMBEDDING);
  EXPECT_EQ(released->embedding().kind(), v1::CHARFN_EMBEDDING);
  EXPECT_EQ(released->embedding().format_version(), kEmbeddingArtefactFormatVersion);

  server::ReleasePlan undercharged = plan;
  undercharged.planned.noise_multipliers.pop_back();  // charged one release, runs two
  EXPECT_EQ(server::ComputeRelease(undercharged, dataset, rows, "rel_x", 1.0, &noise)
                .status()
                .code(),
            absl::StatusCode::kInternal);
  server::ReleasePlan other_multiplier = plan;
  other_multiplier.noise_multiplier = 1.0;  // charged s = 2, runs s = 1
  EXPECT_EQ(server::ComputeRelease(other_multiplier, dataset, rows, "rel_y", 1.0, &noise)
                .status()
                .code(),
            absl::StatusCode::kInternal);
}

// ---- category_fit (issue 38; plan/category_fit.h; docs/privacy.md 2.11.2)

// A dataset with an open categorical column "city" (no categories yet), a
// declared one "colour", a numeric "age", at delta 1e-5.
v1::Dataset OpenColumnDataset(v1::NeighbouringRelation relation = v1::ADD_REMOVE) {
  v1::Dataset dataset;
  dataset.set_id("ds_fit");
  v1::TableSchema& schema = *dataset.mutable_schema();
  v1::ColumnSchema& city = *schema.add_columns();
  city.set_name("city");
  city.set_type(v1::ColumnSchema::CATEGORICAL);
  city.set_open(true);
  v1::ColumnSchema& colour = *schema.add_columns();
  colour.set_name("colour");
  colour.set_type(v1::ColumnSchema::CATEGORICAL);
  colour.add_categories("red");
  colour.add_categories("blue");
  v1::ColumnSchema& age = *schema.add_columns();
  age.set_name("age");
  age.set_type(v1::ColumnSchema::NUMERIC);
  age.set_upper(100);
  dataset.set_schema_fingerprint("fp_fit");
  dataset.set_relation(relation);
  dataset.mutable_budget()->set_epsilon(10);
  dataset.mutable_budget()->set_delta(1e-5);
  dataset.set_row_count(500);
  return dataset;
}

v1::ReleaseRequest FitRequest(const std::string& column, double epsilon = 1.0) {
  v1::ReleaseRequest request;
  request.set_dataset_id("ds_fit");
  request.set_idempotency_key("fit-1");
  request.set_epsilon(epsilon);
  request.mutable_category_fit()->set_column(column);
  return request;
}

// Refused before admission (PlanRelease returns no plan, so no event is
// charged), each with a message that says what to do.
TEST(CategoryFitPlanTest, RefusalsBeforeAdmission) {
  const v1::Dataset dataset = OpenColumnDataset();
  const data::Schema schema = data::DemoSchema();  // unused by the fit's plan
  struct Refused {
    const char* why;
    v1::ReleaseRequest request;
    v1::Dataset dataset;
    absl::StatusCode code;
    const char* says;
  };
  std::vector<Refused> cases;
  cases.push_back({"unknown column", FitRequest("town"), dataset,
                   absl::StatusCode::kInvalidArgument, "its open ones: city"});
  cases.push_back({"no column", FitRequest(""), dataset, absl::StatusCode::kInvalidArgument,
                   "none was given"});
  cases.push_back({"not open", FitRequest("colour"), dataset,
                   absl::StatusCode::kInvalidArgument, "not open"});
  cases.push_back({"numeric", FitRequest("age"), dataset, absl::StatusCode::kInvalidArgument,
                   "not categorical"});
  {
    v1::ReleaseRequest r = FitRequest("city");
    r.set_noise_multiplier(3.0);
    cases.push_back({"noise multiplier", r, dataset, absl::StatusCode::kInvalidArgument,
                     "not a noise multiplier"});
    r.clear_privacy();
    cases.push_back({"no privacy level", r, dataset, absl::StatusCode::kInvalidArgument,
                     "give epsilon"});
  }
  for (double epsilon : {0.0, -1.0, std::numeric_limits<double>::infinity()}) {
    cases.push_back({"bad epsilon", FitRequest("city", epsilon), dataset,
                     absl::StatusCode::kInvalidArgument, "Epsilon must be finite and positive"});
  }
  {
    v1::ReleaseRequest r = FitRequest("city");
    r.mutable_partition()->set_column("colour");
    cases.push_back({"partition", r, dataset, absl::StatusCode::kInvalidArgument,
                     "not partitioned"});
  }
  for (int32_t max : {-1, static_cast<int32_t>(plan::kMaxFitCategories) + 1}) {
    v1::ReleaseRequest r = FitRequest("city");
    r.mutable_category_fit()->set_max_categories(max);
    cases.push_back({"max_categories", r, dataset, absl::StatusCode::kInvalidArgument,
                     "max_categories must be in [1, 10000]"});
  }
  for (double delta_0 : {-1e-7, 1e-5, 2e-5, std::nan("")}) {
    v1::ReleaseRequest r = FitRequest("city");
    r.mutable_category_fit()->set_delta_0(delta_0);
    cases.push_back({"delta_0", r, dataset, absl::StatusCode::kInvalidArgument,
                     "delta_0 (the chance"});
  }
  {
    v1::Dataset empty = dataset;
    empty.set_row_count(0);
    cases.push_back({"no rows", FitRequest("city"), empty,
                     absl::StatusCode::kFailedPrecondition, "upload rows first"});
    v1::Dataset external = dataset;
    external.set_external(true);
    cases.push_back({"external", FitRequest("city"), external,
                     absl::StatusCode::kFailedPrecondition, "external"});
  }
  for (const Refused& c : cases) {
    SCOPED_TRACE(c.why);
    const absl::StatusOr<server::ReleasePlan> plan =
        server::PlanRelease(c.request, c.dataset, schema);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), c.code) << plan.status();
    EXPECT_NE(plan.status().message().find(c.says), std::string::npos) << plan.status();
  }
}

// The plan's event is CalibrateCategoryFit's, under each relation, with
// the defaults (max_categories 1,000, delta_0 = delta / 10) or the given
// values; the compute runs FitOpenColumn with the plan's parameters and
// fills the artefact.
TEST(CategoryFitPlanTest, ChargesTheCalibratedEventAndRunsTheEngine) {
  const data::Schema schema = data::DemoSchema();
  for (v1::NeighbouringRelation wire : {v1::ADD_REMOVE, v1::REPLACE_ONE}) {
    const privacy::NeighbouringRelation relation = RelationFromProto(wire);
    const v1::Dataset dataset = OpenColumnDataset(wire);
    for (double delta_0 : {0.0, 3e-6}) {
      v1::ReleaseRequest request = FitRequest("city", 0.5);
      request.mutable_category_fit()->set_delta_0(delta_0);
      if (delta_0 > 0) request.mutable_category_fit()->set_max_categories(7);
      const server::ReleasePlan plan = server::PlanRelease(request, dataset, schema).value();
      ASSERT_TRUE(plan.category_fit.has_value());
      EXPECT_EQ(plan.kind(), v1::CATEGORY_FIT);
      EXPECT_EQ(plan.kind_name(), "category_fit");
      const double target = delta_0 > 0 ? delta_0 : 1e-6;
      const release::CalibratedCategoryFit fit =
          release::CalibrateCategoryFit(0.5, 1e-5, target, relation).value();
      const plan::CategoryFitPlan& planned = *plan.category_fit;
      EXPECT_EQ(planned.column, 0);
      EXPECT_EQ(planned.params.sigma, fit.sigma);
      EXPECT_EQ(planned.params.tau, fit.tau);
      EXPECT_EQ(planned.params.max_categories, delta_0 > 0 ? 7 : 1000);
      EXPECT_EQ(planned.delta_0, fit.delta_0);
      const privacy::PrivacyEvent event =
          release::CategoryFitEvent(fit.sigma, fit.tau, relation).value();
      ASSERT_TRUE(plan.event.has_value());
      EXPECT_EQ(privacy::EncodeEvent(*plan.event), privacy::EncodeEvent(event));
      EXPECT_LE(privacy::ComputeEpsilonReport(*plan.event, 1e-5).value().epsilon, 0.5);

      // The compute: the engine's list for the same draws, in the artefact.
      release::OpenColumnValues values;
      values.dictionary = {"paris", "lyon", "nice"};
      for (int i = 0; i < 400; ++i) values.indices.push_back(i % 2);
      values.indices.push_back(2);
      values.indices.push_back(release::kMissingOpenValue);
      privacy::SeededNoiseSource a(5);
      privacy::SeededNoiseSource b(5);
      const v1::Release released = plan::ComputeCategoryFitRelease(
          planned, dataset, values, "rel_fit", "fit-1", 0.49, &a);
      const std::vector<std::string> expected =
          release::FitOpenColumn(values, planned.params, &b);
      EXPECT_EQ(std::vector<std::string>(released.category_fit().categories().begin(),
                                         released.category_fit().categories().end()),
                expected);
      EXPECT_EQ(expected, (std::vector<std::string>{"lyon", "paris"}));
      EXPECT_EQ(released.kind(), v1::CATEGORY_FIT);
      EXPECT_EQ(released.idempotency_key(), "fit-1");
      const v1::CategoryFitArtefact& artefact = released.category_fit();
      EXPECT_EQ(artefact.release_id(), "rel_fit");
      EXPECT_EQ(artefact.column(), "city");
      EXPECT_EQ(artefact.sigma(), fit.sigma);
      EXPECT_EQ(artefact.threshold(), fit.tau);
      EXPECT_EQ(artefact.delta_0(), fit.delta_0);
      EXPECT_EQ(artefact.epsilon(), 0.49);
      EXPECT_EQ(artefact.delta(), 1e-5);
      EXPECT_EQ(artefact.relation(), wire);
      EXPECT_EQ(artefact.schema_fingerprint(), "fp_fit");
    }
  }
}

}  // namespace
}  // namespace dpcurator
