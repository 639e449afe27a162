// The release-kind units of core/release/: each resolves and bounds its own
// parameters before any row is read, plans exactly the mechanism its engine
// runs (so the charge and the release cannot drift apart), and hands the
// trainer the same feature map it released through.
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/data/demo.h"
#include "core/embed/charfn.h"
#include "core/embed/frequency_bounds.h"
#include "core/embed/labelled_embedding.h"
#include "core/embed/pairwise_distance.h"
#include "core/privacy/events.h"
#include "core/privacy/grid_gaussian.h"
#include "core/privacy/noise_source.h"
#include "core/release/charfn_embedding.h"
#include "core/release/encoded_rows.h"
#include "core/release/labelled_release.h"
#include "core/release/mechanism_record.h"
#include "core/release/release_kind.h"
#include "core/release/rff_embedding.h"

namespace dpcurator::release {
namespace {

using privacy::NeighbouringRelation;

static_assert(OneShotReleaseKind<RffEmbeddingKind>);
static_assert(OneShotReleaseKind<CharfnEmbeddingKind>);

// A type with everything but a planned mechanism is not a kind: the server
// cannot bind it (plan/release_kinds.cc requires the concept).
struct KindWithoutPlan {
  static constexpr std::string_view kName = "no_plan";
  struct Params {};
  struct Result {
    GaussianMechanismRecord ran;
  };
  static absl::StatusOr<Params> Resolve(Params, const data::Schema&);
  static absl::StatusOr<Result> Run(const Params&, const EncodedRows&, NeighbouringRelation,
                                    double, int64_t, privacy::NoiseSource*);
};
static_assert(!OneShotReleaseKind<KindWithoutPlan>);

class KindUnitsTest : public ::testing::Test {
 protected:
  const data::Schema schema_ = data::DemoSchema();
  const EncodedRows rows_ = EncodeRows(schema_, data::GenerateDemoTable(200, 7));
};

TEST_F(KindUnitsTest, ResolveFillsDefaultsAndDrawsAPublicSeed) {
  const auto rff = RffEmbeddingKind::Resolve({}, schema_);
  ASSERT_TRUE(rff.ok()) << rff.status();
  EXPECT_EQ(rff->num_frequencies, kDefaultNumFrequencies);
  EXPECT_NE(rff->seed, 0u);
  EXPECT_FALSE(rff->numeric_weight.has_value());
  const auto charfn = CharfnEmbeddingKind::Resolve({}, schema_);
  ASSERT_TRUE(charfn.ok()) << charfn.status();
  EXPECT_EQ(charfn->num_frequencies, kDefaultNumFrequencies);
  EXPECT_NE(charfn->seed, rff->seed);
  // A declared seed is kept.
  RffEmbeddingKind::Params declared;
  declared.seed = 42;
  EXPECT_EQ(RffEmbeddingKind::Resolve(declared, schema_)->seed, 42u);
}

TEST_F(KindUnitsTest, ResolveRefusesEveryOutOfBoundsParameter) {
  const double denormal = std::numeric_limits<double>::denorm_min();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int frequencies : {-1, kMaxNumFrequencies + 1}) {
    RffEmbeddingKind::Params rff;
    rff.num_frequencies = frequencies;
    EXPECT_EQ(RffEmbeddingKind::Resolve(rff, schema_).status().code(),
              absl::StatusCode::kInvalidArgument);
    CharfnEmbeddingKind::Params charfn;
    charfn.num_frequencies = frequencies;
    EXPECT_EQ(CharfnEmbeddingKind::Resolve(charfn, schema_).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  for (double scale : {denormal, 1e-310, -1e-3, 1e7, nan}) {
    RffEmbeddingKind::Params rff;
    rff.length_scale = scale;
    EXPECT_EQ(RffEmbeddingKind::Resolve(rff, schema_).status().code(),
              absl::StatusCode::kInvalidArgument)
        << scale;
    CharfnEmbeddingKind::Params charfn;
    charfn.numeric_length_scale = scale > 0 ? scale : std::numeric_limits<double>::infinity();
    EXPECT_EQ(CharfnEmbeddingKind::Resolve(charfn, schema_).status().code(),
              absl::StatusCode::kInvalidArgument)
        << scale;
  }
  RffEmbeddingKind::Params weight;
  weight.numeric_weight = 1.5;
  EXPECT_EQ(RffEmbeddingKind::Resolve(weight, schema_).status().code(),
            absl::StatusCode::kInvalidArgument);
  CharfnEmbeddingKind::Params both;
  both.private_length_scale = true;
  both.length_scale = 0.5;
  EXPECT_EQ(CharfnEmbeddingKind::Resolve(both, schema_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(KindUnitsTest, ReleasedDimensionIsBoundedBeforeAdmission) {
  // (2 k + extra + 1) C <= 2^20, refused with the largest k that fits.
  const int classes = schema_.num_classes();
  const int extra = rows_.layout.categorical_dim;
  const int largest =
      static_cast<int>((privacy::kMaxGridGaussianDimension / classes - 1 - extra) / 2);
  EXPECT_TRUE(ValidateReleasedDimension(largest, extra, classes).ok());
  const absl::Status refused = ValidateReleasedDimension(largest + 1, extra, classes);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find(absl::StrCat("at most ", largest)), std::string::npos)
      << refused.message();
}

// Run's own record equals Plan for every kind and option, with real noise.
TEST_F(KindUnitsTest, EngineRecordEqualsThePlan) {
  privacy::SeededNoiseSource noise(11);
  for (NeighbouringRelation relation :
       {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
    for (double s : {0.7, 3.7442823}) {
      RffEmbeddingKind::Params rff_params;
      rff_params.num_frequencies = 16;
      const auto rff = RffEmbeddingKind::Resolve(rff_params, schema_).value();
      const auto rff_result =
          RffEmbeddingKind::Run(rff, rows_, relation, s, rows_.num_rows(), &noise).value();
      EXPECT_EQ(rff_result.ran, RffEmbeddingKind::Plan(rff, s));
      EXPECT_EQ(RffEmbeddingKind::Plan(rff, s).noise_multipliers.size(), 1u);
      for (bool private_scale : {false, true}) {
        CharfnEmbeddingKind::Params charfn_params;
        charfn_params.num_frequencies = 16;
        charfn_params.private_length_scale = private_scale;
        const auto charfn = CharfnEmbeddingKind::Resolve(charfn_params, schema_).value();
        const auto result =
            CharfnEmbeddingKind::Run(charfn, rows_, relation, s, rows_.num_rows(), &noise).value();
        EXPECT_EQ(result.ran, CharfnEmbeddingKind::Plan(charfn, s));
        EXPECT_EQ(result.ran.noise_multipliers.size(), private_scale ? 2u : 1u);
        EXPECT_EQ(result.distance.has_value(), private_scale);
      }
    }
  }
}

// The event is built from the record alone: one GridGaussian, or a
// composition of one per Gaussian release.
TEST(OneShotEventTest, OneGridGaussianPerRelease) {
  const auto one = OneShotEvent({{2.0}}).value();
  EXPECT_TRUE(std::holds_alternative<privacy::GridGaussianEvent>(one.variant()));
  const auto two = OneShotEvent({{2.0, 2.0}}).value();
  ASSERT_TRUE(std::holds_alternative<privacy::ComposedEvent>(two.variant()));
  EXPECT_EQ(std::get<privacy::ComposedEvent>(two.variant()).events.size(), 2u);
  EXPECT_FALSE(OneShotEvent({}).ok());
  EXPECT_FALSE(OneShotEvent({{0.0}}).ok());
}

// What the trainer rebuilds from the released options is the map the
// engine ran: with no noise, the released per-class sums are the rebuilt
// map's features summed by class.
TEST_F(KindUnitsTest, TrainerRebuildsTheReleasedFeatureMap) {
  privacy::ZeroNoiseSource zero;
  const auto add_remove = NeighbouringRelation::kAddRemove;
  RffEmbeddingKind::Params rff_params;
  rff_params.num_frequencies = 8;
  const auto rff = RffEmbeddingKind::Resolve(rff_params, schema_).value();
  const auto rff_result =
      RffEmbeddingKind::Run(rff, rows_, add_remove, 1.0, rows_.num_rows(), &zero).value();
  const auto rff_map = RffEmbeddingKind::FeatureMap(rows_.layout, rff_result.feature_map).value();
  CharfnEmbeddingKind::Params charfn_params;
  charfn_params.num_frequencies = 8;
  charfn_params.numeric_length_scale = -1;  // l itself
  const auto charfn = CharfnEmbeddingKind::Resolve(charfn_params, schema_).value();
  const auto charfn_result =
      CharfnEmbeddingKind::Run(charfn, rows_, add_remove, 1.0, rows_.num_rows(), &zero).value();
  const auto charfn_map =
      CharfnEmbeddingKind::FeatureMap(rows_.layout, charfn_result.feature_map).value();
  const std::pair<const embed::FeatureMap*, const embed::NoisyLabelledEmbedding*> cases[] = {
      {&rff_map, &rff_result.embedding}, {&charfn_map, &charfn_result.embedding}};
  for (const auto& [map, released] : cases) {
    const auto rebuilt =
        embed::AccumulateEmbedding(*map, rows_.features, rows_.labels, rows_.num_classes).value();
    const auto exact = embed::ReleaseLabelledEmbedding(rebuilt, add_remove, 1.0,
                                                       rows_.num_rows(), &zero)
                           .value();
    ASSERT_EQ(exact.class_values.rows(), released->class_values.rows());
    EXPECT_LT((exact.class_values - released->class_values).cwiseAbs().maxCoeff(), 1e-9);
  }
}

TEST(EncodedRowsTest, SelectRowsKeepsFeaturesAndLabelsTogether) {
  const data::Schema schema = data::DemoSchema();
  const EncodedRows rows = EncodeRows(schema, data::GenerateDemoTable(20, 3));
  const EncodedRows batch = SelectRows(rows, {5, 0, 19});
  ASSERT_EQ(batch.num_rows(), 3);
  for (int i = 0; i < 3; ++i) {
    const int from = std::vector<int>{5, 0, 19}[static_cast<size_t>(i)];
    EXPECT_EQ(batch.features.row(i), rows.features.row(from)) << "row " << i;
    EXPECT_EQ(batch.labels(i), rows.labels(from)) << "row " << i;
  }
  // A row picked twice is copied twice; no row is zero rows of every column.
  const EncodedRows twice = SelectRows(rows, {7, 7});
  EXPECT_EQ(twice.features.row(0), rows.features.row(7));
  EXPECT_EQ(twice.features.row(1), rows.features.row(7));
  const EncodedRows none = SelectRows(rows, {});
  EXPECT_EQ(none.num_rows(), 0);
  EXPECT_EQ(none.features.cols(), rows.features.cols());
  EXPECT_EQ(batch.num_classes, rows.num_classes);
  EXPECT_EQ(batch.bytes(), 3 * (rows.features.cols() * sizeof(double) + sizeof(int)));
}

// Issue 23, 0(b): every way the noise step could fail is the plan's to
// refuse. CheckNoise (called before admission and again by Run) refuses
// the multipliers that used to fail after the rows were read ("noise scale
// outside the range"), and the REPLACE_ONE n = 1 private length-scale; a
// multiplier it accepts runs to a released output of the planned shape.
TEST_F(KindUnitsTest, CheckNoiseRefusesWhatTheNoiseStepCannotTake) {
  const data::FeatureLayout& layout = rows_.layout;
  const int classes = rows_.num_classes;
  const int64_t n = rows_.num_rows();
  RffEmbeddingKind::Params rff_params;
  rff_params.num_frequencies = 16;
  const auto rff = RffEmbeddingKind::Resolve(rff_params, schema_).value();
  CharfnEmbeddingKind::Params charfn_params;
  charfn_params.num_frequencies = 16;
  charfn_params.private_length_scale = true;
  const auto charfn = CharfnEmbeddingKind::Resolve(charfn_params, schema_).value();
  privacy::SeededNoiseSource noise(5);
  for (NeighbouringRelation relation :
       {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
    for (double s : {1e30, 1e100, 1e200, 1e300}) {
      EXPECT_FALSE(RffEmbeddingKind::CheckNoise(rff, layout, classes, relation, s, n).ok()) << s;
      EXPECT_FALSE(RffEmbeddingKind::Run(rff, rows_, relation, s, n, &noise).ok()) << s;
      EXPECT_FALSE(CharfnEmbeddingKind::CheckNoise(charfn, layout, classes, relation, s, n).ok())
          << s;
      EXPECT_FALSE(CharfnEmbeddingKind::Run(charfn, rows_, relation, s, n, &noise).ok()) << s;
    }
    for (double s : {0.3, 1.0, 1000.0}) {
      ASSERT_TRUE(RffEmbeddingKind::CheckNoise(rff, layout, classes, relation, s, n).ok()) << s;
      ASSERT_TRUE(CharfnEmbeddingKind::CheckNoise(charfn, layout, classes, relation, s, n).ok());
      const auto released = CharfnEmbeddingKind::Run(charfn, rows_, relation, s, n, &noise);
      ASSERT_TRUE(released.ok()) << released.status();
      EXPECT_TRUE(released->embedding.class_values.allFinite());
      EXPECT_EQ(released->embedding.class_values.rows(), 2 * 16);
    }
  }
  // REPLACE_ONE with public n = 1: the distance release is undefined, so
  // the plan refuses; the embedding alone (declared l) is fine.
  EXPECT_FALSE(CharfnEmbeddingKind::CheckNoise(charfn, layout, classes,
                                               NeighbouringRelation::kReplaceOne, 1.0, 1)
                   .ok());
  CharfnEmbeddingKind::Params declared = charfn;
  declared.private_length_scale = false;
  EXPECT_TRUE(CharfnEmbeddingKind::CheckNoise(declared, layout, classes,
                                              NeighbouringRelation::kReplaceOne, 1.0, 1)
                  .ok());
}

// The private length-scale can never be refused by the feature map after
// the read: whatever the noisy mean distance, the derived l lies in
// ValidateLengthScale's range.
TEST(PrivateLengthScaleTest, EveryNoisyMeanGivesAnAcceptedLengthScale) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double diameter : {1.0, std::sqrt(2.0), 28.0, 1024.0, 65536.0, 1e-9, 1e9, 0.0, nan}) {
    for (double mean : {-inf, -1e300, -1.0, 0.0, 1e-300, 0.5, 3.0, 1e5, 1e300, inf, nan}) {
      const double l = embed::LengthScaleFromMeanDistance(mean, diameter);
      EXPECT_TRUE(embed::ValidateLengthScale(l, "l").ok())
          << "mean " << mean << " diameter " << diameter << " gave " << l;
    }
  }
}

// The two-step map of a private length-scale (allocated before the read,
// scaled after) is Create's map bit for bit, so the trainer rebuilds what
// was released.
TEST(PrivateLengthScaleTest, UnscaledThenScaledEqualsCreate) {
  const data::Schema schema = data::DemoSchema();
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  for (double numeric : {0.0, 0.37}) {
    embed::CharfnOptions options;
    options.num_frequencies = 12;
    options.length_scale = 1.7;
    options.numeric_length_scale = numeric;
    options.seed = 99;
    const auto created = embed::CharacteristicFunctionMap::Create(layout, options).value();
    auto two_step = embed::CharacteristicFunctionMap::CreateUnscaled(layout, options).value();
    ASSERT_TRUE(two_step.SetLengthScale(1.7, numeric).ok());
    EXPECT_EQ(two_step.frequencies(), created.frequencies());
    EXPECT_EQ(two_step.numeric_length_scale(), created.numeric_length_scale());
    EXPECT_FALSE(two_step.SetLengthScale(1.7, numeric).ok());  // once only
  }
}

// Memory is a parameter (issue 23, 0(b)): the frequency matrix, k x d
// doubles, is bounded at Resolve. A 1024 x 1024 image schema's defaults
// (rff 4000 x 1048576 = 33.5 GB, charfn 1500 x 1048576 = 12.6 GB) are
// refused with what to lower; Fashion-MNIST's 28 x 28 defaults still pass.
TEST(FrequencyMatrixTest, BoundedAtResolveForWideImages) {
  auto image_schema = [](int side) {
    return data::Schema::Builder()
        .AddImage("image", side, side)
        .AddCategorical("label", {"a", "b", "c"})
        .SetLabel("label")
        .Build()
        .value();
  };
  const data::Schema wide = image_schema(1024);
  const auto rff = RffEmbeddingKind::Resolve({}, wide);
  ASSERT_FALSE(rff.ok());
  EXPECT_EQ(rff.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(rff.status().message().find("Lower num_frequencies to at most 64"),
            std::string::npos)
      << rff.status();
  const auto charfn = CharfnEmbeddingKind::Resolve({}, wide);
  ASSERT_FALSE(charfn.ok());
  EXPECT_NE(charfn.status().message().find("Lower num_frequencies to at most 64"),
            std::string::npos)
      << charfn.status();
  RffEmbeddingKind::Params small;
  small.num_frequencies = 64;
  EXPECT_TRUE(RffEmbeddingKind::Resolve(small, wide).ok());
  const data::Schema fashion = image_schema(28);
  const auto rff_fashion = RffEmbeddingKind::Resolve({}, fashion);
  ASSERT_TRUE(rff_fashion.ok()) << rff_fashion.status();
  EXPECT_EQ(rff_fashion->num_frequencies, kImageRffFrequencies);
  const auto charfn_fashion = CharfnEmbeddingKind::Resolve({}, fashion);
  ASSERT_TRUE(charfn_fashion.ok()) << charfn_fashion.status();
  EXPECT_EQ(charfn_fashion->num_frequencies, kImageCharfnFrequencies);
  EXPECT_TRUE(ValidateFrequencyMatrix(1 << 13, 1 << 13).ok());
  EXPECT_FALSE(ValidateFrequencyMatrix((1 << 13) + 1, 1 << 13).ok());
}

// The external path (docs/scale-out.md "External datasets"): a statistic
// computed elsewhere and carried in the partials' layout, noised by
// ReleaseExact, is the release Run makes from the rows, draw for draw.
TEST_F(KindUnitsTest, ReleaseExactOfTheSubmittedStatisticIsRun) {
  for (const NeighbouringRelation relation :
       {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
    const int64_t n = rows_.num_rows();
    RffEmbeddingKind::Params rff_params;
    rff_params.num_frequencies = 30;
    rff_params.seed = 99;
    const auto rff = RffEmbeddingKind::Resolve(rff_params, schema_);
    ASSERT_TRUE(rff.ok());
    const auto rff_map = RffEmbeddingKind::Prepare(*rff, rows_.layout);
    ASSERT_TRUE(rff_map.ok());
    privacy::SeededNoiseSource run_noise(17);
    const auto run = RffEmbeddingKind::Run(*rff_map, rows_, relation, 2.0, n, &run_noise);
    ASSERT_TRUE(run.ok()) << run.status();
    const auto exact = ExactLabelledEmbedding(rff_map->feature_map, rows_);
    ASSERT_TRUE(exact.ok());
    const Eigen::VectorXd wire = FlattenExactEmbedding(*exact);
    ASSERT_EQ(wire.size(), ExactEmbeddingLength(rff_map->feature_map.output_dim(),
                                                rows_.num_classes));
    const auto carried = ExactEmbeddingFromVector(
        absl::MakeConstSpan(wire.data(), wire.size()), rff_map->feature_map.output_dim(),
        rows_.num_classes, n);
    ASSERT_TRUE(carried.ok()) << carried.status();
    privacy::SeededNoiseSource exact_noise(17);
    const auto released = RffEmbeddingKind::ReleaseExact(
        *rff_map, *carried, rows_.layout, rows_.num_classes, relation, 2.0, n, &exact_noise);
    ASSERT_TRUE(released.ok()) << released.status();
    EXPECT_EQ(released->embedding.class_values, run->embedding.class_values);
    EXPECT_EQ(released->embedding.class_totals, run->embedding.class_totals);
    EXPECT_TRUE(released->ran == run->ran);
    EXPECT_EQ(released->feature_map.seed, run->feature_map.seed);

    CharfnEmbeddingKind::Params charfn_params;
    charfn_params.num_frequencies = 30;
    charfn_params.length_scale = 0.8;
    charfn_params.seed = 99;
    const auto charfn = CharfnEmbeddingKind::Resolve(charfn_params, schema_);
    ASSERT_TRUE(charfn.ok());
    privacy::SeededNoiseSource charfn_run_noise(23);
    const auto charfn_run =
        CharfnEmbeddingKind::Run(*charfn, rows_, relation, 2.0, n, &charfn_run_noise);
    ASSERT_TRUE(charfn_run.ok()) << charfn_run.status();
    auto scaled = CharfnEmbeddingKind::Prepare(*charfn, rows_.layout);
    ASSERT_TRUE(scaled.ok());
    ASSERT_TRUE(CharfnEmbeddingKind::ScaleFeatureMap(
                    *charfn, rows_.layout,
                    CharfnEmbeddingKind::DeclaredLengthScale(*charfn, rows_.layout),
                    &scaled->feature_map)
                    .ok());
    const auto charfn_exact = ExactLabelledEmbedding(scaled->feature_map, rows_);
    ASSERT_TRUE(charfn_exact.ok());
    auto unscaled = CharfnEmbeddingKind::Prepare(*charfn, rows_.layout);
    ASSERT_TRUE(unscaled.ok());
    privacy::SeededNoiseSource charfn_exact_noise(23);
    const auto charfn_released = CharfnEmbeddingKind::ReleaseExact(
        *std::move(unscaled), *charfn_exact, rows_.layout, rows_.num_classes, relation, 2.0, n,
        &charfn_exact_noise);
    ASSERT_TRUE(charfn_released.ok()) << charfn_released.status();
    EXPECT_EQ(charfn_released->embedding.class_values, charfn_run->embedding.class_values);
    EXPECT_EQ(charfn_released->embedding.class_totals, charfn_run->embedding.class_totals);
    EXPECT_TRUE(charfn_released->ran == charfn_run->ran);
    EXPECT_EQ(charfn_released->feature_map.length_scale, charfn_run->feature_map.length_scale);
  }
}

TEST_F(KindUnitsTest, SubmittedStatisticShapeIsChecked) {
  const std::vector<double> values(2 * (4 + 1), 1.0);  // feature_dim 4, 2 classes
  EXPECT_TRUE(ExactEmbeddingFromVector(values, 4, 2, 10).ok());
  EXPECT_FALSE(ExactEmbeddingFromVector(absl::MakeConstSpan(values).subspan(1), 4, 2, 10).ok());
  EXPECT_FALSE(ExactEmbeddingFromVector(values, 4, 2, -1).ok());
  std::vector<double> nan = values;
  nan[3] = std::numeric_limits<double>::quiet_NaN();
  const auto refused = ExactEmbeddingFromVector(nan, 4, 2, 10);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().find("nan"), std::string::npos) << refused.status();
  // Column-major sums, class 0 first, then the counts.
  std::vector<double> layout = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const auto carried = ExactEmbeddingFromVector(layout, 4, 2, 19);
  ASSERT_TRUE(carried.ok());
  EXPECT_EQ(carried->sums()(3, 0), 4.0);
  EXPECT_EQ(carried->sums()(0, 1), 5.0);
  EXPECT_EQ(carried->counts()(1), 10.0);
  EXPECT_EQ(carried->num_rows(), 19);
  const Eigen::VectorXd back = FlattenExactEmbedding(*carried);
  EXPECT_EQ(std::vector<double>(back.data(), back.data() + back.size()), layout);
  // A private length-scale is released from the rows first: no exact path.
  CharfnEmbeddingKind::Params two_phase;
  two_phase.private_length_scale = true;
  two_phase.seed = 1;
  const auto resolved = CharfnEmbeddingKind::Resolve(two_phase, schema_);
  ASSERT_TRUE(resolved.ok());
  auto prepared = CharfnEmbeddingKind::Prepare(*resolved, rows_.layout);
  ASSERT_TRUE(prepared.ok());
  const auto accumulator = ExactEmbeddingFromVector(
      std::vector<double>(ExactEmbeddingLength(prepared->feature_map.output_dim(),
                                               rows_.num_classes),
                          0.0),
      prepared->feature_map.output_dim(), rows_.num_classes, 0);
  ASSERT_TRUE(accumulator.ok());
  privacy::ZeroNoiseSource zero;
  EXPECT_EQ(CharfnEmbeddingKind::ReleaseExact(*std::move(prepared), *accumulator, rows_.layout,
                                              rows_.num_classes,
                                              NeighbouringRelation::kAddRemove, 2.0, 0, &zero)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace dpcurator::release
