// DP-auto-GAN trainer (issue 15 items 3-4) on an in-process DP-SGD oracle:
// the DP-SGD row layout, the decoder split, both phases, the sign of the
// critic step (pitfall 3) and the validity of decoded rows.

#include "core/train/autogan_trainer.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "core/data/binary_demo.h"
#include "core/data/demo.h"
#include "core/data/encoder.h"
#include "core/nn/mlp.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"
#include "tests/train/local_dp_sgd_oracle.h"

namespace dpcurator::train {
namespace {

struct DemoRows {
  data::Schema schema;
  data::FeatureLayout layout;
  Eigen::MatrixXd rows;  // DP-SGD rows
};

DemoRows MakeDemoRows(int64_t n, uint64_t seed) {
  DemoRows d{data::DemoSchema(), {}, {}};
  d.layout = data::FeatureLayout::ForFeatures(d.schema);
  const data::Table table = data::GenerateDemoTable(n, seed);
  d.rows = DpSgdRows(data::EncodeFeatures(d.schema, d.layout, table),
                     data::ExtractLabels(d.schema, table), d.schema.num_classes());
  return d;
}

// A tiny, fast configuration.
AutoganOptions TinyOptions() {
  AutoganOptions o;
  o.encoder_hidden = {16};
  o.latent_dim = 6;
  o.decoder_hidden = {16};
  o.noise_dim = 8;
  o.generator_hidden = {16};
  o.critic_hidden = {16};
  o.autoencoder_steps = 40;
  o.critic_steps = 30;
  o.autoencoder_batch = 100;
  o.critic_batch = 100;
  o.critic_steps_per_generator_step = 3;
  o.generator_batch = 64;
  o.progress_every = 10;
  o.autoencoder_learning_rate = 5e-3;
  o.critic_learning_rate = 5e-3;
  o.generator_learning_rate = 5e-3;
  o.weight_clamp = 0.0;
  o.autoencoder_share = 0.5;
  return o;
}

struct OracleLog {
  std::vector<DpSgdPhaseSpec> specs;
  std::vector<std::shared_ptr<LocalDpSgdOracle>> oracles;  // outlive the trainer's handles
};

// The trainer's handle on a LocalDpSgdOracle the log keeps.
class SharedOracle : public DpSgdGradientOracle {
 public:
  explicit SharedOracle(std::shared_ptr<LocalDpSgdOracle> oracle) : oracle_(std::move(oracle)) {}
  absl::StatusOr<Eigen::VectorXd> Step(int64_t index, const Eigen::VectorXd& params) override {
    return oracle_->Step(index, params);
  }
  absl::Status Close() override { return oracle_->Close(); }

 private:
  std::shared_ptr<LocalDpSgdOracle> oracle_;
};

// Opens LocalDpSgdOracles over `rows` (kept alive by the returned owner).
DpSgdOracleFactory LocalFactory(const Eigen::MatrixXd* rows, double q, double sigma,
                                OracleLog* log) {
  return [=](const DpSgdPhaseSpec& spec)
             -> absl::StatusOr<std::unique_ptr<DpSgdGradientOracle>> {
    auto oracle =
        std::make_shared<LocalDpSgdOracle>(spec, rows, q, sigma, 17 + log->specs.size());
    log->specs.push_back(spec);
    log->oracles.push_back(oracle);
    return std::make_unique<SharedOracle>(oracle);
  };
}

TEST(DpSgdRows, FeaturesThenOneHotLabel) {
  Eigen::MatrixXd features(2, 3);
  features << 0.1, 0.2, 1.0, 0.3, 0.4, 0.0;
  Eigen::VectorXi labels(2);
  labels << 1, 0;
  const Eigen::MatrixXd rows = DpSgdRows(features, labels, 2);
  ASSERT_EQ(rows.cols(), 5);
  EXPECT_EQ(rows.leftCols(3), features);
  EXPECT_EQ(rows(0, 3), 0.0);
  EXPECT_EQ(rows(0, 4), 1.0);
  EXPECT_EQ(rows(1, 3), 1.0);
  EXPECT_EQ(rows(1, 4), 0.0);
  EXPECT_EQ(DpSgdRows(features, labels, 1).cols(), 3);  // unlabelled: no block
}

TEST(DecoderOf, ReproducesTheAutoencodersTailExactly) {
  nn::MlpOptions options;
  options.input_dim = 11;
  options.hidden = {9, 7, 4, 8, 5};
  options.output_dim = 11;
  options.activation = nn::Activation::kLeakyRelu;
  options.leaky_relu_slope = 0.2;
  options.seed = 3;
  auto ae = nn::Mlp::Create(options);
  ASSERT_TRUE(ae.ok());
  PublicRng rng(5);
  Eigen::MatrixXd x(13, 11);
  rng.FillNormal(x);
  for (int latent_layer : {0, 2, 4}) {
    nn::MlpWorkspace ws;
    const Eigen::MatrixXd out = ae->Forward(x, &ws);
    // Activations of the latent layer = the input of the next layer.
    const Eigen::MatrixXd latent = ws.layer_input(latent_layer + 1);
    auto decoder = DecoderOf(*ae, latent_layer);
    ASSERT_TRUE(decoder.ok()) << decoder.status();
    EXPECT_EQ(decoder->input_dim(), options.hidden[latent_layer]);
    EXPECT_EQ(decoder->num_layers(), ae->num_layers() - latent_layer - 1);
    nn::MlpWorkspace decoder_ws;
    EXPECT_EQ(decoder->Forward(latent, &decoder_ws), out) << "latent layer " << latent_layer;
  }
  EXPECT_FALSE(DecoderOf(*ae, 5).ok());  // the output layer is not a hidden layer
  EXPECT_FALSE(DecoderOf(*ae, -1).ok());
}

TEST(TrainAutogan, RunsBothPhasesThroughTheirOracles) {
  const DemoRows d = MakeDemoRows(2000, 1);
  OracleLog log;
  AutoganOptions options = TinyOptions();
  std::vector<std::string> progress_phases;
  options.progress = [&](const std::string& phase, int64_t step, int64_t steps, double loss,
                         double) {
    EXPECT_LE(step, steps);
    EXPECT_TRUE(std::isfinite(loss));
    progress_phases.push_back(phase);
  };
  auto trained = TrainAutogan(d.layout, d.schema.num_classes(), options,
                              LocalFactory(&d.rows, 0.05, 1.0, &log));
  ASSERT_TRUE(trained.ok()) << trained.status();
  ASSERT_EQ(log.specs.size(), 2u);
  const int width = DpSgdRowWidth(d.layout, d.schema.num_classes());
  EXPECT_EQ(log.specs[0].loss, DpSgdLossKind::kReconstructionBce);
  EXPECT_EQ(log.specs[0].network.input_dim, width);
  EXPECT_EQ(log.specs[0].network.output_dim, width);
  EXPECT_EQ(log.specs[0].network.hidden, (std::vector<int>{16, 6, 16}));
  EXPECT_DOUBLE_EQ(log.specs[0].budget_share + log.specs[1].budget_share, 1.0);
  EXPECT_EQ(log.specs[1].loss, DpSgdLossKind::kWganCriticReal);
  EXPECT_EQ(log.specs[1].network.output_dim, 1);
  EXPECT_EQ(log.oracles[0]->calls(), options.autoencoder_steps);
  EXPECT_EQ(log.oracles[1]->calls(), options.critic_steps);
  EXPECT_EQ(trained->autoencoder_steps, options.autoencoder_steps);
  EXPECT_EQ(trained->critic_steps, options.critic_steps);
  EXPECT_EQ(progress_phases.front(), "autoencoder");
  EXPECT_EQ(progress_phases.back(), "critic");
  EXPECT_EQ(trained->model.decoder_options.output_dim, width);
  EXPECT_EQ(trained->model.decoder_options.input_dim, options.latent_dim);
  EXPECT_EQ(trained->model.generator_options.output_dim, options.latent_dim);
}

// Without noise, critic steps against a frozen generator (tD beyond T) must
// raise the critic's mean score on real rows relative to the decoded fakes:
// the standard WGAN signs (pitfall 3). With the printed Alg. 3 signs the gap
// would shrink.
TEST(TrainAutogan, CriticStepsSeparateRealFromFake) {
  const DemoRows d = MakeDemoRows(1500, 2);
  OracleLog log;
  AutoganOptions options = TinyOptions();
  options.autoencoder_steps = 60;
  options.critic_steps = 60;
  options.critic_steps_per_generator_step = 1000;  // no generator step
  options.critic_learning_rate = 2e-3;
  auto trained = TrainAutogan(d.layout, d.schema.num_classes(), options,
                              LocalFactory(&d.rows, 0.2, 0.0, &log));
  ASSERT_TRUE(trained.ok()) << trained.status();
  PublicRng rng(9);
  auto fakes = GenerateRows(trained->model, 1500, &rng);
  ASSERT_TRUE(fakes.ok()) << fakes.status();
  auto gap = [&](const nn::Mlp& critic) {
    nn::MlpWorkspace ws;
    const double real = critic.Forward(d.rows, &ws).mean();
    const double fake = critic.Forward(*fakes, &ws).mean();
    return real - fake;
  };
  auto initial = nn::Mlp::Create(log.specs[1].network);  // same seed as the trainer's
  auto final_critic =
      nn::Mlp::FromParameters(trained->critic_options, trained->critic_parameters);
  ASSERT_TRUE(initial.ok() && final_critic.ok());
  const double before = gap(*initial);
  const double after = gap(*final_critic);
  EXPECT_GT(after, before + 0.1) << "before " << before << " after " << after;
}

TEST(SampleAutogan, DecodedRowsAreValidRowsOfTheSchema) {
  const DemoRows d = MakeDemoRows(1000, 3);
  OracleLog log;
  auto trained = TrainAutogan(d.layout, d.schema.num_classes(), TinyOptions(),
                              LocalFactory(&d.rows, 0.1, 1.0, &log));
  ASSERT_TRUE(trained.ok()) << trained.status();
  for (bool sample_blocks : {false, true}) {
    auto table = SampleAutogan(d.schema, trained->model, 500, 4, sample_blocks);
    ASSERT_TRUE(table.ok()) << table.status();
    ASSERT_EQ(table->num_rows(), 500);
    ASSERT_EQ(table->cells.cols(), d.schema.num_columns());
    for (int c = 0; c < d.schema.num_columns(); ++c) {
      const data::Column& column = d.schema.column(c);
      for (int64_t i = 0; i < table->num_rows(); ++i) {
        const double v = table->cells(i, c);
        ASSERT_TRUE(std::isfinite(v));
        if (column.type == data::ColumnType::kCategorical) {
          EXPECT_EQ(v, std::floor(v));
          EXPECT_GE(v, 0);
          EXPECT_LT(v, d.schema.NumLevels(c)) << column.name;
        } else {
          EXPECT_GE(v, column.lower) << column.name;
          EXPECT_LE(v, column.upper) << column.name;
          if (column.integer) {
            EXPECT_EQ(v, std::round(v));
          }
        }
      }
    }
  }
  // Same seed, same rows.
  auto a = SampleAutogan(d.schema, trained->model, 50, 8, true);
  auto b = SampleAutogan(d.schema, trained->model, 50, 8, true);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->cells, b->cells);
  // A schema of another width is refused with a clear message.
  Eigen::MatrixXd narrow = Eigen::MatrixXd::Constant(3, 4, 0.5);
  auto refused = DecodeDpSgdRows(d.schema, narrow, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("schema the model was trained on"),
            std::string::npos);
}

// Issue 39: on binary rows whose critic gradients are clipped far below their
// norm (C = 0.01 against norms of several units: one-hot rows of 40 features
// have |x| = sqrt(40)), the generator must still learn each feature's share
// of ones. With the fakes' gradients unclipped, the fake term outweighs the
// clipped real term, the critic only lowers every fake, and the decoded
// shares stay far from the rows' (measured: mean gap 0.43 against 0.03).
TEST(TrainAutogan, ClippedFakesLetTheGeneratorLearnBinaryShares) {
  constexpr int kFeatures = 40;
  const data::Schema schema = data::BinaryDemoSchema(kFeatures);
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  const data::Table table =
      data::GenerateBinaryDemoTable(data::MakeBinaryDemoNetwork(kFeatures), 3000, 5);
  const Eigen::MatrixXd rows =
      DpSgdRows(data::EncodeFeatures(schema, layout, table), data::ExtractLabels(schema, table),
                schema.num_classes());
  AutoganOptions options = TinyOptions();
  options.autoencoder_steps = 300;
  options.critic_steps = 400;
  options.critic_clip = 0.01;
  options.critic_learning_rate = 1e-3;
  options.generator_learning_rate = 1e-3;
  options.critic_steps_per_generator_step = 2;
  options.weight_clamp = 0.01;
  options.clip_fake_gradients = true;
  // The mean |gap| between each feature's share of ones in the rows and in
  // 2,000 sampled rows.
  auto share_gap = [&](const AutoganOptions& o) {
    OracleLog log;
    auto trained = TrainAutogan(layout, schema.num_classes(), o,
                                LocalFactory(&rows, 0.05, 0.0, &log));
    EXPECT_TRUE(trained.ok()) << trained.status();
    if (!trained.ok()) return 1.0;
    auto sampled = SampleAutogan(schema, trained->model, 2000, 6, true);
    EXPECT_TRUE(sampled.ok()) << sampled.status();
    if (!sampled.ok()) return 1.0;
    double gap = 0;
    for (int j = 0; j < kFeatures; ++j) {
      gap += std::abs(table.cells.col(j).mean() - sampled->cells.col(j).mean());
    }
    return gap / kFeatures;
  };
  const double clipped = share_gap(options);
  EXPECT_LT(clipped, 0.06);
}

TEST(SampleOneHotBlocks, DrawsEachBlockFromItsNormalisedOutputs) {
  // The demo schema: numerics, categorical blocks and a label block.
  const DemoRows d = MakeDemoRows(10, 3);
  const int width = DpSgdRowWidth(d.layout, d.schema.num_classes());
  constexpr int kRows = 20000;
  PublicRng values_rng(11);
  Eigen::MatrixXd one(1, width);
  for (int j = 0; j < width; ++j) one(0, j) = 0.05 + 0.9 * values_rng.Uniform();
  const Eigen::MatrixXd probabilities = one.replicate(kRows, 1);
  PublicRng rng(12);
  const Eigen::MatrixXd sampled =
      SampleOneHotBlocks(d.layout, d.schema.num_classes(), probabilities, &rng);
  ASSERT_EQ(sampled.rows(), kRows);
  ASSERT_EQ(sampled.cols(), width);
  for (const auto& slot : d.layout.numeric) {
    EXPECT_EQ(sampled.col(slot.offset), probabilities.col(slot.offset));
  }
  std::vector<std::pair<int, int>> blocks;
  for (const auto& slot : d.layout.categorical) blocks.emplace_back(slot.offset, slot.levels);
  blocks.emplace_back(d.layout.total_dim(), d.schema.num_classes());
  ASSERT_FALSE(d.layout.categorical.empty());
  for (const auto& [offset, levels] : blocks) {
    const Eigen::MatrixXd block = sampled.middleCols(offset, levels);
    // Every row is one-hot ...
    for (Eigen::Index i = 0; i < kRows; ++i) {
      ASSERT_EQ(block.row(i).sum(), 1.0);
      ASSERT_EQ(block.row(i).maxCoeff(), 1.0);
    }
    // ... with each level's share p_l / sum p (binomial sd <= 0.0036).
    const double total = one.middleCols(offset, levels).sum();
    for (int l = 0; l < levels; ++l) {
      EXPECT_NEAR(block.col(l).mean(), one(0, offset + l) / total, 0.015)
          << "block at " << offset << " level " << l;
    }
  }
}

TEST(RelaxedOneHotBlocks, BackwardMatchesFiniteDifferences) {
  // L = sum(W .* y(sigmoid(z))) with the Gumbel noise fixed (the same seed
  // for every evaluation): the backward pass against central differences in
  // each logit, over numerics, categorical blocks and the label block.
  const DemoRows d = MakeDemoRows(10, 3);
  const int width = DpSgdRowWidth(d.layout, d.schema.num_classes());
  const auto blocks = OneHotBlocks(d.layout, d.schema.num_classes());
  ASSERT_GT(blocks.size(), 1u);
  constexpr double kTemperature = 0.3;
  PublicRng values(21);
  Eigen::MatrixXd logits(3, width), weights(3, width);
  values.FillNormal(logits);
  values.FillNormal(weights);
  auto sigmoid = [](const Eigen::MatrixXd& z) {
    return Eigen::MatrixXd(z.unaryExpr([](double v) { return 1.0 / (1.0 + std::exp(-v)); }));
  };
  auto loss = [&](const Eigen::MatrixXd& z) {
    PublicRng rng(22);
    return RelaxedOneHotBlocks(blocks, sigmoid(z), kTemperature, &rng).cwiseProduct(weights).sum();
  };
  PublicRng rng(22);
  const Eigen::MatrixXd p = sigmoid(logits);
  const Eigen::MatrixXd relaxed = RelaxedOneHotBlocks(blocks, p, kTemperature, &rng);
  for (const auto& [offset, levels] : blocks) {
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(relaxed.row(i).segment(offset, levels).sum(), 1.0, 1e-12);
    }
  }
  const Eigen::MatrixXd analytic =
      RelaxedOneHotBackward(blocks, relaxed, p, kTemperature, weights);
  constexpr double kStep = 1e-6;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < width; ++j) {
      Eigen::MatrixXd up = logits, down = logits;
      up(i, j) += kStep;
      down(i, j) -= kStep;
      const double numeric = (loss(up) - loss(down)) / (2 * kStep);
      EXPECT_NEAR(analytic(i, j), numeric, 1e-6 * (1 + std::abs(numeric)))
          << "row " << i << " column " << j;
    }
  }
}

// An oracle that answers a fixed, index-dependent gradient and records the
// parameters it was asked at, so a test can check the optimiser's updates.
class ScriptedOracle : public DpSgdGradientOracle {
 public:
  explicit ScriptedOracle(std::vector<Eigen::VectorXd>* seen) : seen_(seen) {}
  static Eigen::VectorXd Gradient(int64_t index, Eigen::Index size) {
    Eigen::VectorXd g(size);
    for (Eigen::Index i = 0; i < size; ++i) {
      g(i) = std::sin(0.37 * static_cast<double>(i) + 1.3 * static_cast<double>(index)) * 1e-3;
    }
    return g;
  }
  absl::StatusOr<Eigen::VectorXd> Step(int64_t index, const Eigen::VectorXd& params) override {
    seen_->push_back(params);
    return Gradient(index, params.size());
  }
  absl::Status Close() override { return absl::OkStatus(); }

 private:
  std::vector<Eigen::VectorXd>* seen_;
};

// Heavy-ball SGD on the autoencoder (issue 39): with v0 = 0, the steps are
// theta1 = theta0 - lr g0, theta2 = theta1 - lr (mu g0 + g1),
// theta3 = theta2 - lr (mu^2 g0 + mu g1 + g2), computed here by hand from the
// oracle's scripted gradients. Adam (the default) or a momentum-free update
// gives other parameters and fails it.
TEST(TrainAutogan, MomentumSgdAppliesTheHeavyBallUpdateToTheAutoencoder) {
  const DemoRows d = MakeDemoRows(50, 5);
  AutoganOptions options = TinyOptions();
  options.autoencoder_steps = 3;
  options.critic_steps = 1;
  options.autoencoder_optimizer = AutoencoderOptimizer::kMomentumSgd;
  options.autoencoder_learning_rate = 2.5;
  options.autoencoder_momentum = 0.8;
  std::vector<Eigen::VectorXd> ae_seen;
  std::vector<Eigen::VectorXd> critic_seen;
  DpSgdOracleFactory open = [&](const DpSgdPhaseSpec& spec)
      -> absl::StatusOr<std::unique_ptr<DpSgdGradientOracle>> {
    return std::make_unique<ScriptedOracle>(spec.name == "autoencoder" ? &ae_seen
                                                                       : &critic_seen);
  };
  auto trained = TrainAutogan(d.layout, d.schema.num_classes(), options, open);
  ASSERT_TRUE(trained.ok()) << trained.status();
  ASSERT_EQ(ae_seen.size(), 3u);
  const Eigen::Index n = ae_seen[0].size();
  const double lr = 2.5;
  const double mu = 0.8;
  const Eigen::VectorXd g0 = ScriptedOracle::Gradient(0, n);
  const Eigen::VectorXd g1 = ScriptedOracle::Gradient(1, n);
  const Eigen::VectorXd g2 = ScriptedOracle::Gradient(2, n);
  const Eigen::VectorXd theta1 = ae_seen[0] - lr * g0;
  const Eigen::VectorXd theta2 = theta1 - lr * (mu * g0 + g1);
  const Eigen::VectorXd theta3 = theta2 - lr * (mu * mu * g0 + mu * g1 + g2);
  EXPECT_LT((ae_seen[1] - theta1).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LT((ae_seen[2] - theta2).cwiseAbs().maxCoeff(), 1e-12);
  ASSERT_EQ(trained->autoencoder_parameters.size(), n);
  EXPECT_LT((trained->autoencoder_parameters - theta3).cwiseAbs().maxCoeff(), 1e-12);

  options.autoencoder_momentum = 1.0;  // the velocity would never decay
  EXPECT_FALSE(TrainAutogan(d.layout, d.schema.num_classes(), options, open).ok());
}

// Adam's first step with bias correction is theta0 - lr g / (|g| + eps)
// per coordinate (Kingma & Ba 2015, Alg. 1: m_hat = g, v_hat = g^2); with
// the autoencoder's epsilon at 1e-3, above the scripted |g| <= 1e-3, the
// step differs from the default epsilon's ~lr sign(g).
TEST(TrainAutogan, AutoencoderAdamEpsilonIsAdamsDenominatorFloor) {
  const DemoRows d = MakeDemoRows(50, 5);
  AutoganOptions options = TinyOptions();
  options.autoencoder_steps = 2;
  options.critic_steps = 1;
  options.autoencoder_learning_rate = 0.01;
  options.autoencoder_adam_epsilon = 1e-3;
  std::vector<Eigen::VectorXd> ae_seen;
  std::vector<Eigen::VectorXd> critic_seen;
  DpSgdOracleFactory open = [&](const DpSgdPhaseSpec& spec)
      -> absl::StatusOr<std::unique_ptr<DpSgdGradientOracle>> {
    return std::make_unique<ScriptedOracle>(spec.name == "autoencoder" ? &ae_seen
                                                                       : &critic_seen);
  };
  auto trained = TrainAutogan(d.layout, d.schema.num_classes(), options, open);
  ASSERT_TRUE(trained.ok()) << trained.status();
  ASSERT_EQ(ae_seen.size(), 2u);
  const Eigen::VectorXd g0 = ScriptedOracle::Gradient(0, ae_seen[0].size());
  const Eigen::VectorXd theta1 =
      ae_seen[0].array() - 0.01 * g0.array() / (g0.array().abs() + 1e-3);
  EXPECT_LT((ae_seen[1] - theta1).cwiseAbs().maxCoeff(), 1e-12);

  options.autoencoder_adam_epsilon = 0;
  EXPECT_FALSE(TrainAutogan(d.layout, d.schema.num_classes(), options, open).ok());
}

TEST(ActivateCodes, BackwardMatchesFiniteDifferences) {
  PublicRng rng(11);
  Eigen::MatrixXd codes(4, 3);
  rng.FillNormal(codes);
  Eigen::MatrixXd weights(4, 3);
  rng.FillNormal(weights);
  for (nn::Activation activation :
       {nn::Activation::kLeakyRelu, nn::Activation::kRelu, nn::Activation::kTanh}) {
    nn::MlpOptions options;
    options.activation = activation;
    options.leaky_relu_slope = 0.2;
    // loss = sum(weights .* activated codes); its gradient is `weights`
    // times the derivative.
    Eigen::MatrixXd gradient = weights;
    ActivateCodesBackward(options, codes, &gradient);
    for (Eigen::Index i = 0; i < codes.rows(); ++i) {
      for (Eigen::Index j = 0; j < codes.cols(); ++j) {
        auto loss = [&](double shift) {
          Eigen::MatrixXd shifted = codes;
          shifted(i, j) += shift;
          ActivateCodes(options, &shifted);
          return shifted.cwiseProduct(weights).sum();
        };
        const double h = 1e-6;
        EXPECT_NEAR(gradient(i, j), (loss(h) - loss(-h)) / (2 * h), 1e-6)
            << nn::ActivationName(activation) << " at " << codes(i, j);
      }
    }
  }
  nn::MlpOptions leaky;
  leaky.activation = nn::Activation::kLeakyRelu;
  leaky.leaky_relu_slope = 0.2;
  Eigen::MatrixXd values(1, 2);
  values << -1.0, 2.0;
  ActivateCodes(leaky, &values);
  EXPECT_DOUBLE_EQ(values(0, 0), -0.2);
  EXPECT_DOUBLE_EQ(values(0, 1), 2.0);
}

TEST(TrainAutogan, ActivatedCodesReachTheDecoderInTrainingAndSampling) {
  const DemoRows d = MakeDemoRows(200, 4);
  OracleLog log;
  AutoganOptions options = TinyOptions();
  options.activate_codes = true;
  auto trained = TrainAutogan(d.layout, d.schema.num_classes(), options,
                              LocalFactory(&d.rows, 0.1, 1.0, &log));
  ASSERT_TRUE(trained.ok()) << trained.status();
  ASSERT_TRUE(trained->model.activate_codes);
  // GenerateRows: sigmoid(decoder(activation(generator(z)))) for the same z.
  PublicRng rng(5);
  auto rows = GenerateRows(trained->model, 64, &rng);
  ASSERT_TRUE(rows.ok()) << rows.status();
  auto generator = nn::Mlp::FromParameters(trained->model.generator_options,
                                           trained->model.generator_parameters);
  auto decoder = nn::Mlp::FromParameters(trained->model.decoder_options,
                                         trained->model.decoder_parameters);
  ASSERT_TRUE(generator.ok() && decoder.ok());
  PublicRng same(5);
  Eigen::MatrixXd z(64, generator->input_dim());
  same.FillNormal(z);
  nn::MlpWorkspace generator_ws, decoder_ws;
  Eigen::MatrixXd codes = generator->Forward(z, &generator_ws);
  ASSERT_LT(codes.minCoeff(), 0.0);  // the activation changes some codes
  ActivateCodes(trained->model.generator_options, &codes);
  const Eigen::MatrixXd expected = decoder->Forward(codes, &decoder_ws).unaryExpr(
      [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  EXPECT_LT((*rows - expected).cwiseAbs().maxCoeff(), 1e-12);
  // Off, the same model decodes the raw codes: different rows.
  trained->model.activate_codes = false;
  PublicRng again(5);
  auto raw = GenerateRows(trained->model, 64, &again);
  ASSERT_TRUE(raw.ok());
  EXPECT_GT((*raw - expected).cwiseAbs().maxCoeff(), 1e-6);
}

TEST(TrainAutogan, RejectsBadOptions) {
  const DemoRows d = MakeDemoRows(100, 4);
  OracleLog log;
  AutoganOptions options = TinyOptions();
  options.autoencoder_share = 1.0;
  EXPECT_FALSE(TrainAutogan(d.layout, d.schema.num_classes(), options,
                            LocalFactory(&d.rows, 0.1, 1.0, &log))
                   .ok());
  options = TinyOptions();
  options.critic_clip = 0;
  EXPECT_FALSE(TrainAutogan(d.layout, d.schema.num_classes(), options,
                            LocalFactory(&d.rows, 0.1, 1.0, &log))
                   .ok());
  EXPECT_TRUE(log.specs.empty());  // nothing opened before validation
}

}  // namespace
}  // namespace dpcurator::train
