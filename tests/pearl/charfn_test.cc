// CharacteristicFunctionMap (PEARL Eq. 4, pearl.md 1.1-1.2): unit norm,
// frequency distribution, analytic Backward against central differences,
// the schema-only length-scale, and the labelled release's sensitivity by
// brute force on random neighbours (docs/privacy.md 2.2: the charfn map has
// norm exactly 1, so LabelledEmbeddingSensitivity applies unchanged).

#include "core/embed/charfn.h"

#include <cmath>
#include <vector>

#include "Eigen/Core"
#include "core/embed/labelled_embedding.h"
#include "core/nn/gradient_check.h"
#include "core/privacy/noise_source.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"
#include "tests/pearl/test_util.h"

namespace dpcurator::embed {
namespace {

using pearl_testing::MakeLayout;
using pearl_testing::RandomEncodedRows;
using privacy::NeighbouringRelation;

CharacteristicFunctionMap MakeMap(const data::FeatureLayout& layout, int k, double length_scale,
                                  uint64_t seed) {
  CharfnOptions options;
  options.num_frequencies = k;
  options.length_scale = length_scale;
  options.seed = seed;
  return CharacteristicFunctionMap::Create(layout, options).value();
}

TEST(CharfnTest, UnitNormOnRandomRows) {
  PublicRng rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int> levels;
    const int blocks = static_cast<int>(rng.UniformInt(5));
    for (int b = 0; b < blocks; ++b) levels.push_back(1 + static_cast<int>(rng.UniformInt(8)));
    const int numeric = (blocks == 0 ? 1 : 0) + static_cast<int>(rng.UniformInt(6));
    const auto layout = MakeLayout(numeric, levels);
    const double scales[] = {1e-3, 0.1, 1.0, 30.0};
    const auto map = MakeMap(layout, 1 + static_cast<int>(rng.UniformInt(400)),
                             scales[rng.UniformInt(4)], rng.NextU64());
    EXPECT_EQ(map.input_dim(), layout.total_dim());
    EXPECT_EQ(map.output_dim(), 2 * map.num_frequencies());
    // Rows inside the domain and, for the contract's sake, far outside it.
    Eigen::MatrixXd rows = RandomEncodedRows(layout, 100, &rng);
    rows.row(0).setConstant(-1e6);
    rows.row(1).setConstant(1e6);
    Eigen::MatrixXd features;
    map.Features(rows, &features);
    EXPECT_LE((features.rowwise().norm().array() - 1.0).abs().maxCoeff(), 1e-12)
        << "trial " << trial;
  }
}

TEST(CharfnTest, FrequenciesHaveStdOneOverLengthScaleAndAreReproducible) {
  const auto layout = MakeLayout(6, {9, 16, 7});
  const double length_scale = 2.5;
  const auto map = MakeMap(layout, 2000, length_scale, 77);
  const Eigen::MatrixXd& t = map.frequencies();
  ASSERT_EQ(t.rows(), 2000);
  ASSERT_EQ(t.cols(), layout.total_dim());
  // std(t) = 1/l (pearl.md 1.2 B); 76000 draws: relative error ~ 0.3%.
  const double rms = std::sqrt(t.array().square().mean());
  EXPECT_NEAR(rms * length_scale, 1.0, 0.02);
  EXPECT_NEAR(t.mean() * length_scale, 0.0, 0.02);
  // The same seed rebuilds exactly the same frequencies (the trainer side).
  EXPECT_EQ(MakeMap(layout, 2000, length_scale, 77).frequencies(), t);
  EXPECT_NE(MakeMap(layout, 2000, length_scale, 78).frequencies(), t);
}

TEST(CharfnTest, FeaturesAreCosSinOfPhasesOverSqrtK) {
  const auto layout = MakeLayout(2, {3});
  const auto map = MakeMap(layout, 5, 0.7, 3);
  PublicRng rng(4);
  const Eigen::MatrixXd x = RandomEncodedRows(layout, 3, &rng);
  Eigen::MatrixXd features;
  map.Features(x, &features);
  for (int j = 0; j < 3; ++j) {
    for (int i = 0; i < 5; ++i) {
      const double phase = map.frequencies().row(i).dot(x.row(j));
      // 1/sqrt(k) times the rounding margin (embed::kFeatureNormShrink).
      EXPECT_NEAR(features(j, i), kFeatureNormShrink * std::cos(phase) / std::sqrt(5.0), 1e-15);
      EXPECT_NEAR(features(j, 5 + i), kFeatureNormShrink * std::sin(phase) / std::sqrt(5.0),
                  1e-15);
    }
  }
}

TEST(CharfnTest, BackwardMatchesCentralDifferences) {
  PublicRng rng(5);
  for (const double length_scale : {0.3, 1.0, 4.0}) {
    const auto layout = MakeLayout(3, {2, 4});
    const auto map = MakeMap(layout, 37, length_scale, 9);
    const int n = 6;
    const Eigen::MatrixXd x = RandomEncodedRows(layout, n, &rng);
    Eigen::MatrixXd grad_features(n, map.output_dim());
    rng.FillNormal(grad_features);
    // f(X) = <G, h(X)>, so df/dX = Backward(X, G).
    auto f = [&](const Eigen::VectorXd& flat) {
      const Eigen::MatrixXd rows = Eigen::Map<const Eigen::MatrixXd>(flat.data(), n, x.cols());
      Eigen::MatrixXd features;
      map.Features(rows, &features);
      return (features.array() * grad_features.array()).sum();
    };
    Eigen::MatrixXd analytic, from_features, features;
    map.Backward(x, grad_features, &analytic);
    map.Features(x, &features);
    map.BackwardFromFeatures(features, grad_features, &from_features);
    EXPECT_LE((analytic - from_features).cwiseAbs().maxCoeff(), 1e-14);
    const Eigen::VectorXd flat = Eigen::Map<const Eigen::VectorXd>(x.data(), x.size());
    const Eigen::VectorXd grad = Eigen::Map<const Eigen::VectorXd>(analytic.data(), x.size());
    nn::GradientCheckOptions options;
    options.step = 1e-5;
    const auto check = nn::CheckGradient(f, flat, grad, options);
    EXPECT_LT(check.max_relative_error, 1e-6)
        << "l=" << length_scale << " worst " << check.worst_index << ": "
        << check.analytic_at_worst << " vs " << check.numeric_at_worst;
  }
}

TEST(CharfnTest, RejectsInvalidOptions) {
  const auto layout = MakeLayout(2, {3});
  CharfnOptions options;  // length_scale 0: no sentinel, must be chosen
  EXPECT_FALSE(CharacteristicFunctionMap::Create(layout, options).ok());
  options.length_scale = -1.0;
  EXPECT_FALSE(CharacteristicFunctionMap::Create(layout, options).ok());
  options.length_scale = std::nan("");
  EXPECT_FALSE(CharacteristicFunctionMap::Create(layout, options).ok());
  options.length_scale = 1.0;
  options.num_frequencies = 0;
  EXPECT_FALSE(CharacteristicFunctionMap::Create(layout, options).ok());
  options.num_frequencies = 10;
  EXPECT_TRUE(CharacteristicFunctionMap::Create(layout, options).ok());
  EXPECT_FALSE(CharacteristicFunctionMap::Create(MakeLayout(0, {}), options).ok());
}

TEST(CharfnTest, DefaultLengthScaleIsRmsDistanceOfUniformRows) {
  // 2/6 + 2 (1 - 1/3) + 2 (1 - 1/2) + 0 (one level) = 1/3 + 4/3 + 1.
  const auto layout = MakeLayout(2, {3, 2, 1});
  EXPECT_NEAR(DefaultCharfnLengthScale(layout), std::sqrt(1.0 / 3 + 4.0 / 3 + 1.0), 1e-15);
  EXPECT_EQ(DefaultCharfnLengthScale(MakeLayout(0, {1})), 1.0);
  // Monte Carlo: RMS distance of independent uniform rows (no corners).
  const auto adult = MakeLayout(6, {9, 16, 7, 15, 6, 5, 2, 42});
  PublicRng rng(6);
  const int n = 40000;
  const Eigen::MatrixXd a = RandomEncodedRows(adult, n, &rng, /*corner=*/0.0);
  const Eigen::MatrixXd b = RandomEncodedRows(adult, n, &rng, /*corner=*/0.0);
  const double rms = std::sqrt((a - b).rowwise().squaredNorm().mean());
  EXPECT_NEAR(rms / DefaultCharfnLengthScale(adult), 1.0, 0.01);
}

// The released vector [class_values (column-major) ; class_totals] with zero
// noise, through AccumulateEmbedding and ReleaseLabelledEmbedding.
Eigen::VectorXd Release(const CharacteristicFunctionMap& map, const Eigen::MatrixXd& rows,
                        const Eigen::VectorXi& labels, int classes,
                        NeighbouringRelation relation) {
  auto accumulator = AccumulateEmbedding(map, rows, labels, classes, /*block_rows=*/7).value();
  privacy::ZeroNoiseSource zero;
  const auto release =
      ReleaseLabelledEmbedding(accumulator, relation, 1.0, rows.rows(), &zero).value();
  Eigen::VectorXd out(release.class_values.size() + release.class_totals.size());
  out << Eigen::Map<const Eigen::VectorXd>(release.class_values.data(),
                                           release.class_values.size()),
      release.class_totals;
  return out;
}

TEST(CharfnTest, LabelledReleaseSensitivityByBruteForce) {
  PublicRng rng(8);
  const int classes = 3;
  double worst_add_remove = 0.0;
  double worst_replace = 0.0;
  for (int trial = 0; trial < 200; ++trial) {
    const auto layout = MakeLayout(1 + static_cast<int>(rng.UniformInt(4)), {3, 2});
    const auto map = MakeMap(layout, 16, 0.2 + 3.0 * rng.Uniform(), rng.NextU64());
    const int n = 2 + static_cast<int>(rng.UniformInt(30));
    const Eigen::MatrixXd rows = RandomEncodedRows(layout, n, &rng);
    Eigen::VectorXi labels(n);
    for (int i = 0; i < n; ++i) labels(i) = static_cast<int>(rng.UniformInt(classes));
    const Eigen::RowVectorXd extra = RandomEncodedRows(layout, 1, &rng).row(0);
    const int extra_label = static_cast<int>(rng.UniformInt(classes));
    const int victim = static_cast<int>(rng.UniformInt(n));

    // ADD_REMOVE: remove `victim`. The bound sqrt(2) is attained exactly
    // (||h|| = 1 and one count moves by 1).
    const double add_remove = LabelledEmbeddingSensitivity(NeighbouringRelation::kAddRemove, 0).value();
    Eigen::MatrixXd fewer = pearl_testing::WithoutRow(rows, victim);
    Eigen::VectorXi fewer_labels(n - 1);
    for (int i = 0, j = 0; i < n; ++i)
      if (i != victim) fewer_labels(j++) = labels(i);
    const double moved = (Release(map, rows, labels, classes, NeighbouringRelation::kAddRemove) -
                          Release(map, fewer, fewer_labels, classes,
                                  NeighbouringRelation::kAddRemove))
                             .norm();
    EXPECT_LE(moved, add_remove + 1e-12);
    EXPECT_NEAR(moved, add_remove, 1e-12);
    worst_add_remove = std::max(worst_add_remove, moved / add_remove);

    // REPLACE_ONE: replace `victim` by `extra` (n public).
    const double replace = LabelledEmbeddingSensitivity(NeighbouringRelation::kReplaceOne, n).value();
    Eigen::MatrixXd replaced = rows;
    replaced.row(victim) = extra;
    Eigen::VectorXi replaced_labels = labels;
    replaced_labels(victim) = extra_label;
    const double moved_replace =
        (Release(map, rows, labels, classes, NeighbouringRelation::kReplaceOne) -
         Release(map, replaced, replaced_labels, classes, NeighbouringRelation::kReplaceOne))
            .norm();
    EXPECT_LE(moved_replace, replace + 1e-12) << "trial " << trial;
    worst_replace = std::max(worst_replace, moved_replace / replace);
    // A change of class attains 2/n exactly: sqrt(|h|^2 + |h'|^2 + 1 + 1)/n.
    if (extra_label != labels(victim)) {
      EXPECT_NEAR(moved_replace, replace, 1e-12);
    }
  }
  EXPECT_NEAR(worst_add_remove, 1.0, 1e-12);
  EXPECT_NEAR(worst_replace, 1.0, 1e-12);
}

}  // namespace
}  // namespace dpcurator::embed
