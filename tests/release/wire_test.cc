// The wire side of the release kinds: a kind has one name (its ReleaseKind
// value in lower case = its ReleaseRequest.kind case), every kind on the
// wire is bound in the server's registry to a unit whose plan yields an
// event, and artefact files of format 1 (before ReleaseKind) still train
// while newer formats are refused with a clear message.
#include <gtest/gtest.h>

#include "client/methods/merf.h"
#include "client/methods/pearl.h"
#include "core/data/demo.h"
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
    if (kind == v1::MST || kind == v1::AIM || kind == v1::MARGINALS) {
      // A recipe of several mechanisms (plan/releases.cc PlanMstRelease,
      // event train::MstEvent; tests/server/mst_release_test.cc; and
      // PlanAimRelease, event train::AimEvent, tests/server/aim_release_test.cc),
      // not a one-shot Gaussian binding; marginals (plan/partition.cc
      // PlanMarginalsRelease, tests/server/partition_release_test.cc) reads
      // the stored values, not the encoded rows, as they do.
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

}  // namespace
}  // namespace dpcurator
