// Brute-force checks of the release sensitivities (docs/privacy.md 2.2, 2.5)
// for image rows (issue 14): 28 x 28 grey images, 784 pixels in [0, 1], ten
// classes, through the release units' own engines (RffEmbeddingKind::Run,
// CharfnEmbeddingKind::Run) with zero noise. For random datasets and random
// or adversarial neighbours (blank, saturated, checkerboard, single-pixel and
// random binary images; class changes) under both relations, the released
// vector moves by at most the sensitivity the unit states, and the
// add/remove bound is attained, so a stated constant that is too small (a
// privacy bug) or too loose (wasted utility) fails here.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/embed/labelled_embedding.h"
#include "core/embed/rff.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/charfn_embedding.h"
#include "core/release/encoded_rows.h"
#include "core/release/labelled_release.h"
#include "core/release/rff_embedding.h"
#include "core/util/public_rng.h"

namespace dpcurator::release {
namespace {

using privacy::NeighbouringRelation;

constexpr int kSide = 28;
constexpr int kPixels = kSide * kSide;
constexpr int kClasses = 10;
constexpr double kSlack = 1e-12;

data::Schema ImageSchema() {
  data::Schema::Builder builder;
  std::vector<std::string> classes;
  for (int c = 0; c < kClasses; ++c) classes.push_back(std::to_string(c));
  builder.AddImage("image", kSide, kSide).AddCategorical("label", classes).SetLabel("label");
  return builder.Build().value();
}

// Adversarial images: the corners of the pixel box and far-apart patterns.
Eigen::RowVectorXd AdversarialImage(int which, PublicRng* rng) {
  Eigen::RowVectorXd image(kPixels);
  switch (which % 5) {
    case 0:
      image.setZero();
      break;
    case 1:
      image.setOnes();
      break;
    case 2:  // checkerboard
      for (int i = 0; i < kPixels; ++i) image(i) = ((i / kSide + i % kSide) % 2 == 0) ? 1.0 : 0.0;
      break;
    case 3:  // one lit pixel
      image.setZero();
      image(static_cast<Eigen::Index>(rng->UniformInt(kPixels))) = 1.0;
      break;
    default:  // random binary
      for (int i = 0; i < kPixels; ++i) image(i) = rng->UniformInt(2) == 0 ? 0.0 : 1.0;
  }
  return image;
}

// A random 8-bit image, as the store decodes it (level / 255).
Eigen::RowVectorXd RandomImage(PublicRng* rng) {
  Eigen::RowVectorXd image(kPixels);
  for (int i = 0; i < kPixels; ++i) image(i) = static_cast<double>(rng->UniformInt(256)) / 255.0;
  return image;
}

EncodedRows RandomRows(const data::Schema& schema, int n, PublicRng* rng) {
  EncodedRows rows;
  rows.layout = data::FeatureLayout::ForFeatures(schema);
  rows.num_classes = schema.num_classes();
  rows.features.resize(n, kPixels);
  rows.labels.resize(n);
  for (int i = 0; i < n; ++i) {
    rows.features.row(i) = RandomImage(rng);
    rows.labels(i) = static_cast<int>(rng->UniformInt(kClasses));
  }
  return rows;
}

EncodedRows WithoutRow(const EncodedRows& rows, int64_t drop) {
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < rows.num_rows(); ++i) {
    if (i != drop) keep.push_back(i);
  }
  return SelectRows(rows, keep);
}

EncodedRows WithRow(const EncodedRows& rows, const Eigen::RowVectorXd& image, int label) {
  EncodedRows out = rows;
  const Eigen::Index n = rows.num_rows();
  out.features.conservativeResize(n + 1, Eigen::NoChange);
  out.features.row(n) = image;
  out.labels.conservativeResize(n + 1);
  out.labels(n) = label;
  return out;
}

// The released vector [class_values (column-major) ; class_totals] and the
// sensitivity the unit states for it.
struct Released {
  Eigen::VectorXd vector;
  double sensitivity = 0;
};

Released Flatten(const embed::NoisyLabelledEmbedding& embedding) {
  Released out;
  out.vector.resize(embedding.class_values.size() + embedding.class_totals.size());
  out.vector << Eigen::Map<const Eigen::VectorXd>(embedding.class_values.data(),
                                                  embedding.class_values.size()),
      embedding.class_totals;
  out.sensitivity = embedding.sensitivity;
  return out;
}

// One kind's release with zero noise through its unit, at its image defaults.
class ImageReleaser {
 public:
  ImageReleaser(bool charfn, const data::Schema& schema) : charfn_(charfn) {
    if (charfn_) {
      CharfnEmbeddingKind::Params params;
      params.num_frequencies = 64;
      params.seed = 11;
      charfn_params_ = CharfnEmbeddingKind::Resolve(params, schema).value();
    } else {
      RffEmbeddingKind::Params params;
      params.num_frequencies = 64;
      params.seed = 13;
      rff_params_ = RffEmbeddingKind::Resolve(params, schema).value();
    }
  }

  Released Release(const EncodedRows& rows, NeighbouringRelation relation, int64_t public_n) const {
    privacy::ZeroNoiseSource zero;
    if (charfn_) {
      return Flatten(
          CharfnEmbeddingKind::Run(charfn_params_, rows, relation, 1.0, public_n, &zero)
              .value()
              .embedding);
    }
    return Flatten(
        RffEmbeddingKind::Run(rff_params_, rows, relation, 1.0, public_n, &zero).value().embedding);
  }

 private:
  bool charfn_;
  RffEmbeddingKind::Params rff_params_;
  CharfnEmbeddingKind::Params charfn_params_;
};

class ImageSensitivityTest : public ::testing::TestWithParam<bool> {};

TEST_P(ImageSensitivityTest, AddRemoveNeighbours) {
  const data::Schema schema = ImageSchema();
  PublicRng rng(GetParam() ? 71 : 72);
  const ImageReleaser releaser(GetParam(), schema);
  const EncodedRows rows = RandomRows(schema, 120, &rng);
  const Released base = releaser.Release(rows, NeighbouringRelation::kAddRemove, 0);
  // Every feature vector has norm 1 (less the shrink of docs/privacy.md
  // 2.7) and each row adds 1 to one count: sqrt(2) under add/remove.
  EXPECT_NEAR(base.sensitivity, std::sqrt(2.0), 1e-12);
  double largest = 0;
  for (int trial = 0; trial < 60; ++trial) {
    EncodedRows neighbour;
    if (trial % 3 == 0) {
      neighbour = WithoutRow(rows, static_cast<int64_t>(rng.UniformInt(rows.num_rows())));
    } else {
      const Eigen::RowVectorXd image =
          trial % 3 == 1 ? AdversarialImage(trial / 3, &rng) : RandomImage(&rng);
      neighbour = WithRow(rows, image, static_cast<int>(rng.UniformInt(kClasses)));
    }
    const Released moved = releaser.Release(neighbour, NeighbouringRelation::kAddRemove, 0);
    EXPECT_EQ(moved.sensitivity, base.sensitivity);
    const double distance = (moved.vector - base.vector).norm();
    EXPECT_LE(distance, base.sensitivity + kSlack) << "trial " << trial;
    largest = std::max(largest, distance);
  }
  // Attained: a row's own contribution is [h ; 1] with ||h|| = 1.
  EXPECT_GE(largest, base.sensitivity * (1 - 1e-9));
}

TEST_P(ImageSensitivityTest, ReplaceOneNeighbours) {
  const data::Schema schema = ImageSchema();
  PublicRng rng(GetParam() ? 81 : 82);
  const ImageReleaser releaser(GetParam(), schema);
  const EncodedRows rows = RandomRows(schema, 100, &rng);
  const int64_t n = rows.num_rows();
  const Released base = releaser.Release(rows, NeighbouringRelation::kReplaceOne, n);
  EXPECT_NEAR(base.sensitivity, 2.0 / static_cast<double>(n), 1e-15);
  double largest_cross = 0;
  int cross = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const auto row = static_cast<Eigen::Index>(rng.UniformInt(n));
    EncodedRows neighbour = rows;
    const Eigen::RowVectorXd image =
        trial % 2 == 0 ? AdversarialImage(trial / 2, &rng) : RandomImage(&rng);
    neighbour.features.row(row) = image;
    if (trial % 3 != 0) {
      neighbour.labels(row) = (rows.labels(row) + 1 + static_cast<int>(rng.UniformInt(kClasses - 1))) %
                              kClasses;
    }
    const Released moved = releaser.Release(neighbour, NeighbouringRelation::kReplaceOne, n);
    const double distance = (moved.vector - base.vector).norm();
    EXPECT_LE(distance, base.sensitivity + kSlack) << "trial " << trial;
    if (neighbour.labels(row) != rows.labels(row)) {
      // Class change: sqrt(||h||^2 + ||h'||^2 + 1 + 1) / n = 2/n.
      EXPECT_NEAR(distance, base.sensitivity, 1e-9 * base.sensitivity) << "trial " << trial;
      largest_cross = std::max(largest_cross, distance);
      ++cross;
    }
  }
  ASSERT_GT(cross, 20);
  EXPECT_GE(largest_cross, base.sensitivity * (1 - 1e-9));
}

// Image schemas take their own declared defaults (labelled_release.h);
// tables keep 500; an explicit count wins.
TEST(ImageDefaultsTest, FrequencyCountsAndLengthScale) {
  const data::Schema schema = ImageSchema();
  RffEmbeddingKind::Params rff;
  rff.seed = 3;
  EXPECT_EQ(RffEmbeddingKind::Resolve(rff, schema)->num_frequencies, kImageRffFrequencies);
  CharfnEmbeddingKind::Params charfn;
  charfn.seed = 3;
  EXPECT_EQ(CharfnEmbeddingKind::Resolve(charfn, schema)->num_frequencies,
            kImageCharfnFrequencies);
  rff.num_frequencies = 70;
  EXPECT_EQ(RffEmbeddingKind::Resolve(rff, schema)->num_frequencies, 70);
  data::Schema::Builder table;
  table.AddNumeric("x", 0, 1).AddCategorical("y", {"a", "b"}).SetLabel("y");
  rff.num_frequencies = 0;
  EXPECT_EQ(RffEmbeddingKind::Resolve(rff, table.Build().value())->num_frequencies,
            kDefaultNumFrequencies);
  // The papers' l^2 = 127 on raw pixels.
  EXPECT_DOUBLE_EQ(embed::DefaultLengthScale(data::FeatureLayout::ForFeatures(schema)),
                   std::sqrt(127.0));
}

INSTANTIATE_TEST_SUITE_P(Kinds, ImageSensitivityTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "charfn_embedding" : "rff_embedding";
                         });

}  // namespace
}  // namespace dpcurator::release
