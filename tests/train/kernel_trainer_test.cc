// DP-kernel's trainer core (issue 16 item 4): the MMD loss and its gradient
// from one released (values, gradients) answer, checked against finite
// differences of the exact loss, and a tiny end-to-end run on a 2-D blob
// through the in-process oracle (Poisson sampling, the real unit, real
// grid noise) showing the generator moves to the data.

#include "core/train/kernel_trainer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/privacy/noise_source.h"
#include "core/release/encoded_rows.h"
#include "core/release/kernel_witness.h"
#include "core/train/image_kernel_generator.h"
#include "core/util/public_rng.h"

namespace dpcurator::train {
namespace {

const std::vector<double> kBandwidths = {0.1, 0.3};

data::Schema TwoDimSchema(int classes) {
  data::Schema::Builder builder;
  builder.AddNumeric("x0", 0.0, 1.0).AddNumeric("x1", 0.0, 1.0);
  std::vector<std::string> names;
  for (int c = 0; c < classes; ++c) names.push_back(absl::StrCat("c", c));
  builder.AddCategorical("label", names).SetLabel("label");
  return builder.Build().value();
}

// Rows around per-class centres, clamped to the declared [0, 1] box.
release::EncodedRows Blobs(const data::Schema& schema, int n,
                           const std::vector<Eigen::Vector2d>& centres, PublicRng* rng) {
  release::EncodedRows rows;
  rows.layout = data::FeatureLayout::ForFeatures(schema);
  rows.num_classes = schema.num_classes();
  rows.features.resize(n, 2);
  rows.labels.resize(n);
  for (int i = 0; i < n; ++i) {
    const int c = i % static_cast<int>(centres.size());
    rows.labels(i) = c;
    for (int a = 0; a < 2; ++a) {
      rows.features(i, a) = std::clamp(centres[c](a) + 0.05 * rng->Normal(), 0.0, 1.0);
    }
  }
  return rows;
}

// The exact loss (1/M^2) sum k*(y_j, y_l) - (2/M) sum f(y_j), f the
// noiseless witness of `rows` (per label when labels are given).
double ExactLoss(const Eigen::MatrixXd& points, const Eigen::VectorXi& labels,
                 const release::EncodedRows& rows, double divisor) {
  const double m = static_cast<double>(points.rows());
  double loss = 0.0;
  for (Eigen::Index j = 0; j < points.rows(); ++j) {
    for (Eigen::Index l = 0; l < points.rows(); ++l) {
      if (labels.size() > 0 && labels(j) != labels(l)) continue;
      loss += release::SumGaussianKernel(points.row(j).transpose(), points.row(l).transpose(),
                                         kBandwidths) / (m * m);
    }
    for (Eigen::Index i = 0; i < rows.num_rows(); ++i) {
      if (labels.size() > 0 && labels(j) != rows.labels(i)) continue;
      loss -= 2.0 / m *
              release::SumGaussianKernel(rows.features.row(i).transpose(),
                                         points.row(j).transpose(), kBandwidths) / divisor;
    }
  }
  return loss;
}

TEST(KernelTrainerTest, LossGradientMatchesFiniteDifferences) {
  PublicRng rng(21);
  const data::Schema schema = TwoDimSchema(2);
  const release::EncodedRows rows =
      Blobs(schema, 30, {Eigen::Vector2d(0.3, 0.6), Eigen::Vector2d(0.7, 0.4)}, &rng);
  privacy::ZeroNoiseSource zero;
  for (bool conditional : {false, true}) {
    release::KernelWitnessKind::Params params;
    params.bandwidths = kBandwidths;
    params.conditional = conditional;
    params.batch_divisor = 25.0;
    auto resolved = release::KernelWitnessKind::Resolve(params, schema);
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    Eigen::MatrixXd points(6, 2);
    for (int j = 0; j < 6; ++j) points.row(j) << rng.Uniform(), rng.Uniform();
    Eigen::VectorXi labels;
    if (conditional) labels = Eigen::VectorXi{{0, 1, 1, 0, 1, 0}};
    release::KernelWitnessKind::Query query{points, labels};
    auto released = release::KernelWitnessKind::Run(
        *resolved, rows, query, privacy::NeighbouringRelation::kAddRemove, 1.0, &zero);
    ASSERT_TRUE(released.ok()) << released.status();
    const MmdStep step = MmdLossAndGradient(points, labels, kBandwidths,
                                            {released->values, released->gradients});
    EXPECT_NEAR(step.loss, ExactLoss(points, labels, rows, 25.0), 1e-9);
    for (int j = 0; j < 6; ++j) {
      for (int a = 0; a < 2; ++a) {
        Eigen::MatrixXd up = points;
        Eigen::MatrixXd down = points;
        up(j, a) += 1e-6;
        down(j, a) -= 1e-6;
        const double fd =
            (ExactLoss(up, labels, rows, 25.0) - ExactLoss(down, labels, rows, 25.0)) / 2e-6;
        EXPECT_NEAR(step.point_gradients(j, a), fd, 1e-6) << j << " " << a;
      }
    }
  }
}

// y = b_c + A z, z ~ N(0, I_2), one offset per class, updated by Adam on the
// chain rule of dL/dy.
class AffineGenerator final : public PointGenerator {
 public:
  AffineGenerator(int classes, Eigen::Vector2d start) : offsets_(2, classes) {
    for (int c = 0; c < classes; ++c) offsets_.col(c) = start;
    scale_ = 0.05 * Eigen::Matrix2d::Identity();
  }
  void Sample(int count, PublicRng* rng, Eigen::MatrixXd* points,
              Eigen::VectorXi* labels) override {
    const int classes = static_cast<int>(offsets_.cols());
    codes_.resize(count, 2);
    points->resize(count, 2);
    labels_.resize(classes > 1 ? count : 0);
    for (int j = 0; j < count; ++j) {
      const int c = classes > 1 ? static_cast<int>(rng->UniformInt(classes)) : 0;
      if (classes > 1) labels_(j) = c;
      codes_.row(j) << rng->Normal(), rng->Normal();
      points->row(j) = (offsets_.col(c) + scale_ * codes_.row(j).transpose()).transpose();
    }
    *labels = labels_;
  }
  void Update(const Eigen::MatrixXd& grad) override {
    Eigen::VectorXd g(offsets_.size() + 4);
    g.setZero();
    Eigen::Map<Eigen::MatrixXd> g_offsets(g.data(), 2, offsets_.cols());
    Eigen::Map<Eigen::Matrix2d> g_scale(g.data() + offsets_.size());
    for (Eigen::Index j = 0; j < grad.rows(); ++j) {
      const int c = labels_.size() > 0 ? labels_(j) : 0;
      g_offsets.col(c) += grad.row(j).transpose();
      g_scale += grad.row(j).transpose() * codes_.row(j);
    }
    if (first_.size() == 0) {
      first_ = Eigen::VectorXd::Zero(g.size());
      second_ = Eigen::VectorXd::Zero(g.size());
    }
    ++t_;
    first_ = 0.9 * first_ + 0.1 * g;
    second_ = 0.999 * second_ + 0.001 * g.cwiseProduct(g);
    const Eigen::VectorXd m_hat = first_ / (1 - std::pow(0.9, t_));
    const Eigen::VectorXd v_hat = second_ / (1 - std::pow(0.999, t_));
    const Eigen::VectorXd delta =
        -0.01 * m_hat.cwiseQuotient((v_hat.array().sqrt() + 1e-8).matrix());
    Eigen::Map<Eigen::MatrixXd>(offsets_.data(), 2, offsets_.cols()) +=
        Eigen::Map<const Eigen::MatrixXd>(delta.data(), 2, offsets_.cols());
    scale_ += Eigen::Map<const Eigen::Matrix2d>(delta.data() + offsets_.size());
  }
  const Eigen::MatrixXd& offsets() const { return offsets_; }

 private:
  Eigen::MatrixXd offsets_;
  Eigen::Matrix2d scale_;
  Eigen::MatrixXd codes_;
  Eigen::VectorXi labels_;
  Eigen::VectorXd first_, second_;
  int t_ = 0;
};

TEST(KernelTrainerTest, GeneratorMovesToTheBlobsThroughNoisyReleases) {
  PublicRng rng(22);
  const std::vector<Eigen::Vector2d> centres = {Eigen::Vector2d(0.75, 0.25),
                                                Eigen::Vector2d(0.25, 0.7)};
  for (bool conditional : {false, true}) {
    const data::Schema schema = TwoDimSchema(2);
    const std::vector<Eigen::Vector2d> used =
        conditional ? centres : std::vector<Eigen::Vector2d>{centres[0]};
    const release::EncodedRows rows = Blobs(schema, 600, used, &rng);
    release::KernelWitnessKind::Params params;
    params.bandwidths = kBandwidths;
    params.conditional = conditional;
    params.batch_divisor = 60.0;  // q n
    auto resolved = release::KernelWitnessKind::Resolve(params, schema);
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    privacy::SeededNoiseSource noise(conditional ? 5 : 6);
    InProcessKernelWitnessOracle oracle(*resolved, &rows, 0.1, 1.0, &noise);
    AffineGenerator generator(conditional ? 2 : 1, Eigen::Vector2d(0.5, 0.5));
    KernelTrainerOptions options;
    options.steps = 400;
    options.points_per_step = 32;
    double first_loss = 0.0;
    double last_loss = 0.0;
    ASSERT_TRUE(TrainKernelGenerator(options, kBandwidths, &oracle, &generator,
                                     [&](const KernelTrainerProgress& p) {
                                       if (p.step <= 50) first_loss += p.loss / 50;
                                       if (p.step > options.steps - 50) last_loss += p.loss / 50;
                                     })
                    .ok());
    EXPECT_EQ(oracle.steps(), 400);
    for (size_t c = 0; c < used.size(); ++c) {
      const double start = (Eigen::Vector2d(0.5, 0.5) - used[c]).norm();
      const double end = (generator.offsets().col(static_cast<Eigen::Index>(c)) - used[c]).norm();
      EXPECT_LT(end, 0.3 * start) << "class " << c << " conditional " << conditional;
    }
    EXPECT_LT(last_loss, first_loss);
  }
}

ImageKernelGenerator SmallImageGenerator(ImageKernelGeneratorOptions options) {
  ImageGeneratorOptions image_options;
  image_options.architecture = ImageGeneratorArchitecture::kConvolutional;
  image_options.height = 8;
  image_options.width = 8;
  image_options.num_classes = 10;
  absl::StatusOr<ImageKernelGenerator> generator =
      ImageKernelGenerator::Create(image_options, 1e-2, options);
  EXPECT_TRUE(generator.ok()) << generator.status();
  return *std::move(generator);
}

// Balanced labels: every class floor(M / C) or one more times in a step,
// at every offset; i.i.d. labels are not (they are the control).
TEST(ImageKernelGeneratorTest, BalancedLabelsGiveEveryClassItsShare) {
  for (bool balanced : {true, false}) {
    ImageKernelGeneratorOptions options;
    options.balanced_labels = balanced;
    ImageKernelGenerator generator = SmallImageGenerator(options);
    PublicRng rng(31);
    Eigen::MatrixXd points;
    Eigen::VectorXi labels;
    bool all_balanced = true;
    for (int step = 0; step < 20; ++step) {
      generator.Sample(32, &rng, &points, &labels);
      ASSERT_EQ(labels.size(), 32);
      std::vector<int> counts(10, 0);
      for (int j = 0; j < 32; ++j) ++counts[static_cast<size_t>(labels(j))];
      all_balanced &= *std::min_element(counts.begin(), counts.end()) >= 3 &&
                      *std::max_element(counts.begin(), counts.end()) <= 4;
    }
    EXPECT_EQ(all_balanced, balanced);
  }
}

// UseAverage installs the exponential moving average of the parameters
// after each update (recomputed here from the raw ones) and re-estimates
// BN's running statistics; without averaging it changes nothing.
TEST(ImageKernelGeneratorTest, UseAverageInstallsTheMovingAverage) {
  constexpr double kDecay = 0.9;
  for (double decay : {kDecay, 0.0}) {
    ImageKernelGeneratorOptions options;
    options.average_decay = decay;
    ImageKernelGenerator generator = SmallImageGenerator(options);
    PublicRng rng(32);
    Eigen::VectorXd average = generator.generator().parameters().cast<double>();
    Eigen::MatrixXd points;
    Eigen::VectorXi labels;
    for (int step = 0; step < 30; ++step) {
      generator.Sample(16, &rng, &points, &labels);
      Eigen::MatrixXd gradients(points.rows(), points.cols());
      for (Eigen::Index i = 0; i < gradients.size(); ++i) gradients(i) = rng.Normal();
      generator.Update(gradients);
      ASSERT_TRUE(generator.status().ok()) << generator.status();
      average = kDecay * average + (1.0 - kDecay) * generator.generator().parameters().cast<double>();
    }
    const Eigen::VectorXf raw = generator.generator().parameters();
    const Eigen::VectorXf statistics = generator.generator().running_statistics();
    generator.UseAverage(16);
    const Eigen::VectorXf& installed = generator.generator().parameters();
    if (decay > 0) {
      EXPECT_LT((installed.cast<double>() - average).cwiseAbs().maxCoeff(), 1e-5);
      EXPECT_GT((installed - raw).cwiseAbs().maxCoeff(), 1e-3);
      EXPECT_GT((generator.generator().running_statistics() - statistics).cwiseAbs().maxCoeff(),
                1e-4);
    } else {
      EXPECT_EQ(installed, raw);
      EXPECT_EQ(generator.generator().running_statistics(), statistics);
    }
  }
}

}  // namespace
}  // namespace dpcurator::train
