// DP-auto-GAN's tuning harness on the binary stand-in (issue 39): the rows of
// bench/binary.cc (same network and seeds), train::TrainAutogan in process on
// tests/train/local_dp_sgd_oracle.h's oracle with each phase's noise
// multiplier calibrated exactly as `train autogan` asks the server for it
// (client/methods/autogan.cc: Poisson steps of the grid's discrete Gaussian,
// phase k calibrated to its cumulative share of epsilon after the earlier
// phases), then the judge's two figures on the sampled rows. No server in the
// loop, so one setting costs minutes, not a CLI run. NOT a privacy path (the
// oracle's noise is public randomness); the numbers that go in the README
// come from bench/binary.sh.
//
//   autogan_binary [--epsilon 1] [--seed 1] [--targets 30] [--steps-ae N] ...
//
// Prints one line per setting: the figures of bench/binary judge (mean
// |gap| and correlation of the dimension-wise probability, mean |gap| of the
// dimension-wise AUROC over --targets features), the noise multipliers, the
// median per-example gradient norm each phase saw in its last step (the
// figure a clip norm is fitted to, dp-auto-gan.md Sec. 4: "the median L2 norm
// observed in a non-private training loop"; --sigma 0 runs without noise),
// and seconds and steps a second of each phase. "recon" is the autoencoder
// alone on real rows (a diagnostic, never released): the shares of its
// decoded outputs and the AUROC gap of rows sampled from them, so that a run
// says whether the decoder or the GAN loses the dependence between features.
// --baselines 1 prints the AUROC gap's floor (rows drawn independently per
// feature from the real shares) and ceiling (fresh rows of the network) over
// the same targets, and exits without training. --ae-optimizer sgd (with
// --ae-momentum, default 0.9, and --lr-ae) applies the autoencoder's noisy
// gradients by heavy-ball SGD instead of Adam; --ae-adam-epsilon sets
// Adam's denominator floor for the autoencoder. --one-output 1 trains on one
// coordinate per feature (each declared NUMERIC in [0, 1], so one sigmoid
// output per binary column instead of a 2-level block: half the decoder's
// output layer and the encoder's input layer, and a sparse input) and draws
// each sampled feature as a Bernoulli of that output; what a declared binary
// encoding would give (issue 39).

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "Eigen/Cholesky"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/data/binary_demo.h"
#include "core/data/encoder.h"
#include "core/eval/binary_metrics.h"
#include "core/privacy/accounting.h"
#include "core/privacy/calibration.h"
#include "core/privacy/events.h"
#include "core/privacy/sampled_gaussian.h"
#include "core/train/autogan_trainer.h"
#include "core/util/public_rng.h"
#include "core/util/sigmoid.h"
#include "tests/train/local_dp_sgd_oracle.h"

namespace {

namespace data = dpcurator::data;
namespace eval = dpcurator::eval;
namespace privacy = dpcurator::privacy;
namespace train = dpcurator::train;

// bench/binary.cc's seeds: the same training and test rows.
constexpr uint64_t kTrainSeed = 20261127;
constexpr uint64_t kTestSeed = 4242;
constexpr int64_t kRows = 46520;

[[noreturn]] void Fail(const std::string& problem) {
  std::fprintf(stderr, "autogan_binary: %s\n", problem.c_str());
  std::exit(2);
}

class Flags {
 public:
  Flags(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string flag = argv[i];
      if (flag.rfind("--", 0) != 0 || i + 1 >= argc) Fail(absl::StrCat("bad flag ", flag));
      values_[flag.substr(2)] = argv[++i];
    }
  }
  double Double(const std::string& name, double fallback) {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    double v = 0;
    if (!absl::SimpleAtod(it->second, &v)) Fail(absl::StrCat("--", name, " wants a number"));
    used_.push_back(name);
    return v;
  }
  std::string String(const std::string& name, const std::string& fallback) {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    used_.push_back(name);
    return it->second;
  }
  int64_t Int(const std::string& name, int64_t fallback) {
    return static_cast<int64_t>(Double(name, static_cast<double>(fallback)));
  }
  std::vector<int> Widths(const std::string& name, std::vector<int> fallback) {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    used_.push_back(name);
    std::vector<int> widths;
    for (absl::string_view part : absl::StrSplit(it->second, ',')) {
      int w = 0;
      if (!absl::SimpleAtoi(part, &w) || w <= 0) Fail(absl::StrCat("--", name, " wants widths"));
      widths.push_back(w);
    }
    return widths;
  }
  void CheckAllUsed() const {
    for (const auto& [name, value] : values_) {
      bool found = false;
      for (const auto& u : used_) found = found || u == name;
      if (!found) Fail(absl::StrCat("unknown flag --", name));
    }
  }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> used_;
};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags(argc, argv);
  const double epsilon = flags.Double("epsilon", 1.0);
  const double delta = flags.Double("delta", 1e-5);
  const double sigma_override = flags.Double("sigma", -1.0);  // < 0: calibrate
  const int features = static_cast<int>(flags.Int("features", data::kBinaryDemoFeatures));
  const int targets = static_cast<int>(flags.Int("targets", 30));
  if (targets < 0) Fail("--targets must be >= 0");
  const int64_t total_rows = flags.Int("rows", kRows);
  const int64_t train_rows = total_rows * 4 / 5;
  const int64_t sample_rows = flags.Int("sample-rows", train_rows);

  train::AutoganOptions o;
  o.seed = static_cast<uint64_t>(flags.Int("seed", 1));
  o.encoder_hidden = flags.Widths("hidden-ae", o.encoder_hidden);
  o.decoder_hidden.assign(o.encoder_hidden.rbegin(), o.encoder_hidden.rend());
  o.latent_dim = static_cast<int>(flags.Int("latent-dim", o.latent_dim));
  o.autoencoder_steps = flags.Int("steps-ae", o.autoencoder_steps);
  o.autoencoder_batch = flags.Double("batch-ae", o.autoencoder_batch);
  o.autoencoder_clip = flags.Double("clip-ae", o.autoencoder_clip);
  o.autoencoder_learning_rate = flags.Double("lr-ae", o.autoencoder_learning_rate);
  const std::string ae_optimizer = flags.String("ae-optimizer", "adam");
  if (ae_optimizer == "sgd") {
    o.autoencoder_optimizer = train::AutoencoderOptimizer::kMomentumSgd;
  } else if (ae_optimizer != "adam") {
    Fail("--ae-optimizer expects adam or sgd");
  }
  o.autoencoder_momentum = flags.Double("ae-momentum", o.autoencoder_momentum);
  o.autoencoder_adam_epsilon = flags.Double("ae-adam-epsilon", o.autoencoder_adam_epsilon);
  o.noise_dim = static_cast<int>(flags.Int("noise-dim", o.noise_dim));
  o.generator_hidden = flags.Widths("hidden-generator", o.generator_hidden);
  o.critic_hidden = flags.Widths("hidden-critic", o.critic_hidden);
  o.critic_steps = flags.Int("steps-gan", o.critic_steps);
  o.critic_batch = flags.Double("batch-gan", o.critic_batch);
  o.critic_clip = flags.Double("clip-gan", o.critic_clip);
  o.critic_learning_rate = flags.Double("lr-critic", o.critic_learning_rate);
  o.generator_learning_rate = flags.Double("lr-generator", o.generator_learning_rate);
  o.critic_steps_per_generator_step =
      static_cast<int>(flags.Int("critic-steps-per-generator-step",
                                 o.critic_steps_per_generator_step));
  o.generator_batch = static_cast<int>(flags.Int("generator-batch", o.generator_batch));
  o.weight_clamp = flags.Double("weight-clamp", o.weight_clamp);
  o.clip_fake_gradients = flags.Int("clip-fakes", 0) != 0;
  o.sample_fakes = flags.Int("sample-fakes", 0) != 0;
  o.gumbel_temperature = flags.Double("gumbel-temperature", 0.0);
  o.autoencoder_share = flags.Double("autoencoder-share", o.autoencoder_share);
  o.activate_codes = flags.Int("activate-codes", o.activate_codes ? 1 : 0) != 0;
  o.progress_every = flags.Int("progress-every", 100);
  // --baselines 1: print the AUROC floor and ceiling (below) and exit
  // without training; they do not depend on the trainer's flags.
  const bool baselines_only = flags.Int("baselines", 0) != 0;
  const bool one_output = flags.Int("one-output", 0) != 0;
  flags.CheckAllUsed();

  const data::BinaryDemoNetwork network = data::MakeBinaryDemoNetwork(features);
  const data::Schema schema = data::BinaryDemoSchema(features);
  const data::Table train_table =
      data::GenerateBinaryDemoTable(network, train_rows, kTrainSeed);
  const data::Table test_table =
      data::GenerateBinaryDemoTable(network, total_rows - train_rows, kTestSeed);
  // --one-output: the same cells (0 or 1) under a schema of NUMERIC [0, 1]
  // columns, one coordinate each; trained on it, judged under `schema`.
  const data::Schema trained_schema = [&] {
    if (!one_output) return schema;
    data::Schema::Builder builder;
    for (int j = 0; j < features; ++j) builder.AddNumeric(absl::StrFormat("d%04d", j + 1), 0, 1);
    auto built = builder.Build();
    if (!built.ok()) Fail(std::string(built.status().message()));
    return *std::move(built);
  }();
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(trained_schema);
  const int num_classes = trained_schema.num_classes();
  const Eigen::MatrixXd rows =
      train::DpSgdRows(data::EncodeFeatures(trained_schema, layout, train_table),
                       data::ExtractLabels(trained_schema, train_table), num_classes);
  // Decoded outputs (sigmoids, n x row width) -> rows under `schema`: a
  // sampled level per 2-level block, or with --one-output a Bernoulli draw
  // of each feature's one output.
  auto decode = [&](const Eigen::MatrixXd& outputs,
                    dpcurator::PublicRng* rng) -> absl::StatusOr<data::Table> {
    if (!one_output) return train::DecodeDpSgdRows(schema, outputs, rng);
    data::Table table;
    table.cells.resize(outputs.rows(), features);
    for (Eigen::Index i = 0; i < outputs.rows(); ++i) {
      for (int j = 0; j < features; ++j) table.cells(i, j) = rng->Uniform() < outputs(i, j) ? 1 : 0;
    }
    return table;
  };
  // Column of feature j's level-1 output in the encoded rows.
  auto level_one = [&](int j) { return one_output ? j : 2 * j + 1; };

  eval::DimensionWiseAurocOptions auroc_options;
  auroc_options.max_targets = targets;
  // The dimension-wise AUROC gap of `rows` judged as synthetic rows (the same
  // targets, fits and test rows for every set: the options' seed fixes them).
  auto auroc_gap = [&](const data::Table& judged) {
    auto auroc =
        eval::DimensionWiseAurocOf(schema, train_table, judged, test_table, auroc_options);
    if (!auroc.ok()) Fail(std::string(auroc.status().message()));
    return *std::move(auroc);
  };
  if (baselines_only) {
    if (targets <= 0) Fail("--baselines wants --targets > 0");
    // The floor: rows drawn independently per feature from the REAL shares
    // (every feature's share right, no dependence between features), what a
    // generator that keeps only the dimension-wise probability would score.
    const Eigen::VectorXd shares = rows.colwise().mean().transpose();
    Eigen::MatrixXd independent(sample_rows, rows.cols());
    for (Eigen::Index c = 0; c < rows.cols(); ++c) independent.col(c).setConstant(shares(c));
    dpcurator::PublicRng rng(o.seed + 7);
    auto floor_rows = decode(independent, &rng);
    if (!floor_rows.ok()) Fail(std::string(floor_rows.status().message()));
    // The ceiling: fresh rows of the same network (held out from training).
    const data::Table fresh = data::GenerateBinaryDemoTable(network, sample_rows, kTestSeed + 1);
    const eval::DimensionWiseAuroc floor = auroc_gap(*floor_rows);
    const eval::DimensionWiseAuroc ceiling = auroc_gap(fresh);
    std::printf(
        "baselines | independent (real shares) auroc gap %.4f (%zu of %d) const %zu | "
        "held-out real rows auroc gap %.4f (%zu of %d) const %zu\n",
        floor.scatter.mean_abs_gap, floor.scatter.points.size(), floor.eligible_targets,
        floor.constant_in_synthetic.size(), ceiling.scatter.mean_abs_gap,
        ceiling.scatter.points.size(), ceiling.eligible_targets,
        ceiling.constant_in_synthetic.size());
    return 0;
  }

  // The client's calibration (client/methods/autogan.cc TrainAutoganModel),
  // with the binary benchmark's ADD_REMOVE dataset.
  const privacy::SamplingScheme scheme =
      privacy::SamplingSchemeFor(privacy::NeighbouringRelation::kAddRemove);
  privacy::AccountantState earlier_phases(privacy::NeighbouringRelation::kAddRemove);
  double cumulative_share = 0.0;
  std::vector<double> sigmas;
  std::vector<dpcurator::train::LocalDpSgdOracle*> live;
  train::DpSgdOracleFactory open = [&](const train::DpSgdPhaseSpec& spec)
      -> absl::StatusOr<std::unique_ptr<train::DpSgdGradientOracle>> {
    const double q =
        std::min(1.0, spec.expected_batch_size / static_cast<double>(train_rows));
    cumulative_share = std::min(1.0, cumulative_share + spec.budget_share);
    privacy::CalibrationOptions calibration;
    calibration.prior = &earlier_phases;
    auto sigma = privacy::CalibrateSampledDiscreteGaussianNoiseMultiplier(
        scheme, q, spec.steps, epsilon * cumulative_share, delta, calibration);
    if (!sigma.ok()) return sigma.status();
    auto step = privacy::SampledGaussianEvent(scheme, q, *sigma, privacy::SampledNoise::kDiscrete);
    if (!step.ok()) return step.status();
    auto phase = privacy::PrivacyEvent::SelfCompose(*std::move(step), spec.steps);
    if (!phase.ok()) return phase.status();
    if (auto s = earlier_phases.Add(*phase); !s.ok()) return s;
    const double used = sigma_override >= 0 ? sigma_override : *sigma;
    sigmas.push_back(used);
    auto oracle = std::make_unique<dpcurator::train::LocalDpSgdOracle>(
        spec, &rows, q, used, o.seed * 1000 + sigmas.size());
    live.push_back(oracle.get());
    return oracle;
  };
  std::vector<double> median_norms;
  std::vector<double> phase_seconds;
  auto phase_start = std::chrono::steady_clock::now();
  std::string current;
  o.progress = [&](const std::string& phase, int64_t step, int64_t steps, double loss, double) {
    if (phase != current) {
      current = phase;
      phase_start = std::chrono::steady_clock::now();
    }
    const double norm = live.empty() ? 0.0 : live.back()->last_median_norm();
    std::fprintf(stderr, "  %s %lld/%lld loss %.4g median norm %.4g (%.0f s)\n", phase.c_str(),
                 static_cast<long long>(step), static_cast<long long>(steps), loss, norm,
                 Seconds(phase_start));
    if (step == steps) {
      median_norms.push_back(norm);
      phase_seconds.push_back(Seconds(phase_start));
    }
  };
  // The first progress call of a phase comes after progress_every steps: the
  // phase clock starts when the phase's oracle opens instead.
  train::DpSgdOracleFactory timed_open = [&](const train::DpSgdPhaseSpec& spec) {
    current = spec.name;
    phase_start = std::chrono::steady_clock::now();
    return open(spec);
  };

  const auto start = std::chrono::steady_clock::now();
  auto trained = train::TrainAutogan(layout, num_classes, o, timed_open);
  if (!trained.ok()) Fail(std::string(trained.status().message()));
  const double train_seconds = Seconds(start);
  // The autoencoder alone (a diagnostic over the private rows, never a
  // release): each feature's mean decoded share of level 1,
  // p1 / (p0 + p1) as DecodeDpSgdRows samples it, over reconstructions of
  // the first rows, against the real share. Tells a decoder that has not
  // learnt the prevalences from a generator that has not found its latents.
  double recon_gap = 0, recon_corr = 0, recon_auroc = 0, latent_std_ratio = 0, gauss_auroc = 0;
  {
    auto ae = dpcurator::nn::Mlp::FromParameters(trained->autoencoder_options,
                                                 trained->autoencoder_parameters);
    if (!ae.ok()) Fail(std::string(ae.status().message()));
    const Eigen::Index n = std::min<Eigen::Index>(5000, rows.rows());
    dpcurator::nn::MlpWorkspace ws;
    const Eigen::MatrixXd p = ae->Forward(rows.topRows(n), &ws).unaryExpr(
        [](double v) { return dpcurator::Sigmoid(v); });
    Eigen::VectorXd real(features), decoded(features);
    for (int j = 0; j < features; ++j) {
      real(j) = rows.col(level_one(j)).head(n).mean();
      decoded(j) = one_output ? p.col(j).mean()
                              : (p.col(2 * j + 1).array() /
                                 (p.col(2 * j).array() + p.col(2 * j + 1).array()))
                                    .mean();
    }
    recon_gap = (real - decoded).cwiseAbs().mean();
    const Eigen::ArrayXd a = real.array() - real.mean(), b = decoded.array() - decoded.mean();
    recon_corr = (a * b).sum() / std::sqrt((a * a).sum() * (b * b).sum() + 1e-300);
    // The reconstructions as rows: each real row's decoded outputs sampled as
    // SampleAutogan samples generated ones, judged by the same AUROC as the
    // generated rows. Dependence kept here and lost in the generated rows is
    // lost by the GAN; lost here already, by the autoencoder.
    if (targets > 0) {
      const Eigen::Index m = std::min<Eigen::Index>(sample_rows, rows.rows());
      const Eigen::MatrixXd q = ae->Forward(rows.topRows(m), &ws).unaryExpr(
          [](double v) { return dpcurator::Sigmoid(v); });
      dpcurator::PublicRng rng(o.seed + 77);
      auto recon_rows = decode(q, &rng);
      if (!recon_rows.ok()) Fail(std::string(recon_rows.status().message()));
      recon_auroc = auroc_gap(*recon_rows).scatter.mean_abs_gap;

      // The latent codes: the real rows' (the decoder's input in `ws` after
      // the forward pass above) against the generator's for fresh noise.
      // latent std ratio: the mean over latent coordinates of the generated
      // codes' std over the real codes' (1: the generator spreads as the
      // codes do; near 0: it collapses to a few codes, whose decoded rows
      // are close to independent draws). gauss: rows decoded from codes drawn
      // from the Gaussian with the real codes' mean and covariance, what a
      // generator that matched the codes' first two moments would reach.
      const int latent_layer = static_cast<int>(o.encoder_hidden.size());
      const Eigen::MatrixXd codes = ws.layer_input(latent_layer + 1);
      auto generator = dpcurator::nn::Mlp::FromParameters(trained->model.generator_options,
                                                          trained->model.generator_parameters);
      if (!generator.ok()) Fail(std::string(generator.status().message()));
      Eigen::MatrixXd z(m, o.noise_dim);
      rng.FillNormal(z);
      dpcurator::nn::MlpWorkspace gws;
      Eigen::MatrixXd fake_codes = generator->Forward(z, &gws);
      if (trained->model.activate_codes) {
        train::ActivateCodes(trained->model.generator_options, &fake_codes);
      }
      auto col_std = [](const Eigen::MatrixXd& x) {
        const Eigen::RowVectorXd mean = x.colwise().mean();
        return ((x.rowwise() - mean).array().square().colwise().sum() /
                static_cast<double>(x.rows() - 1))
            .sqrt()
            .eval();
      };
      latent_std_ratio = (col_std(fake_codes) / (col_std(codes) + 1e-12)).mean();
      const Eigen::RowVectorXd mean = codes.colwise().mean();
      const Eigen::MatrixXd centred = codes.rowwise() - mean;
      const Eigen::MatrixXd cov = centred.transpose() * centred / static_cast<double>(m - 1);
      const Eigen::MatrixXd l =
          (cov + 1e-9 * Eigen::MatrixXd::Identity(cov.rows(), cov.cols())).llt().matrixL();
      Eigen::MatrixXd e(m, codes.cols());
      rng.FillNormal(e);
      const Eigen::MatrixXd gauss_codes = (e * l.transpose()).rowwise() + mean;
      auto decoder = train::DecoderOf(*ae, latent_layer);
      if (!decoder.ok()) Fail(std::string(decoder.status().message()));
      dpcurator::nn::MlpWorkspace dws;
      const Eigen::MatrixXd gq = decoder->Forward(gauss_codes, &dws).unaryExpr(
          [](double v) { return dpcurator::Sigmoid(v); });
      auto gauss_rows = decode(gq, &rng);
      if (!gauss_rows.ok()) Fail(std::string(gauss_rows.status().message()));
      gauss_auroc = auroc_gap(*gauss_rows).scatter.mean_abs_gap;
    }
  }
  // train::SampleAutogan's draws (one stream: the rows, then their
  // levels), decoded as above.
  dpcurator::PublicRng sample_rng(o.seed + 99);
  auto generated = train::GenerateRows(trained->model, sample_rows, &sample_rng);
  if (!generated.ok()) Fail(std::string(generated.status().message()));
  auto synthetic = decode(*generated, &sample_rng);
  if (!synthetic.ok()) Fail(std::string(synthetic.status().message()));
  auto probability = eval::DimensionWiseProbability(schema, train_table, *synthetic);
  // --targets 0: the probability figure only (seconds instead of a minute).
  absl::StatusOr<eval::DimensionWiseAuroc> auroc = eval::DimensionWiseAuroc{};
  if (targets > 0) {
    auroc = eval::DimensionWiseAurocOf(schema, train_table, *synthetic, test_table,
                                       auroc_options);
  }
  if (!probability.ok() || !auroc.ok()) {
    Fail(std::string((probability.ok() ? auroc.status() : probability.status()).message()));
  }
  const double ae_s = phase_seconds.size() > 0 ? phase_seconds[0] : 0;
  const double gan_s = phase_seconds.size() > 1 ? phase_seconds[1] : 0;
  std::printf(
      "eps %g seed %llu | ae T %lld B %g C %g lr %g %s mu %g aeps %g h %d/%d | "
      "gan T %lld B %g C %g lr %g/%g "
      "tD %d clamp %g clipfake %d samplefake %d tau %g critic %d share %g | sigma %.3f/%.3f | "
      "median norm %.3g/%.3g | "
      "recon gap %.4f corr %.3f auroc gap %.4f | latent std ratio %.3f gauss auroc gap %.4f | "
      "prob gap %.4f corr %.3f | auroc gap %.4f (%zu of %d) "
      "const %zu | ae %.0f s (%.2f "
      "steps/s) gan %.0f s (%.2f steps/s) total %.0f s\n",
      epsilon, static_cast<unsigned long long>(o.seed),
      static_cast<long long>(o.autoencoder_steps), o.autoencoder_batch, o.autoencoder_clip,
      o.autoencoder_learning_rate,
      o.autoencoder_optimizer == train::AutoencoderOptimizer::kMomentumSgd ? "sgd" : "adam",
      o.autoencoder_momentum, o.autoencoder_adam_epsilon,
      o.encoder_hidden.empty() ? 0 : o.encoder_hidden[0],
      o.latent_dim, static_cast<long long>(o.critic_steps), o.critic_batch, o.critic_clip,
      o.critic_learning_rate, o.generator_learning_rate, o.critic_steps_per_generator_step,
      o.weight_clamp, o.clip_fake_gradients ? 1 : 0, o.sample_fakes ? 1 : 0,
      o.gumbel_temperature,
      o.critic_hidden.empty() ? 0 : o.critic_hidden[0], o.autoencoder_share,
      sigmas.size() > 0 ? sigmas[0] : 0.0, sigmas.size() > 1 ? sigmas[1] : 0.0,
      median_norms.size() > 0 ? median_norms[0] : 0.0,
      median_norms.size() > 1 ? median_norms[1] : 0.0, recon_gap, recon_corr, recon_auroc,
      latent_std_ratio, gauss_auroc,
      probability->mean_abs_gap,
      probability->correlation, auroc->scatter.mean_abs_gap, auroc->scatter.points.size(),
      auroc->eligible_targets, auroc->constant_in_synthetic.size(), ae_s,
      ae_s > 0 ? o.autoencoder_steps / ae_s : 0.0, gan_s, gan_s > 0 ? o.critic_steps / gan_s : 0.0,
      Seconds(start));
  (void)train_seconds;
  return 0;
}
