// The DP-auto-GAN unit (issue 15 item 4; dp-auto-gan.md), with the server
// as the DP-SGD oracle. Phase 1 (autoencoder) and phase 2
// (the latent WGAN's critic) are one dp_sgd session each; the trainer never
// sees a row.

#include "client/methods/autogan.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/cli.h"
#include "client/methods/label_warning.h"
#include "client/oracles/dp_sgd_oracle.h"
#include "client/model_package.h"
#include "client/proto_file.h"
#include "client/progress.h"
#include "core/data/encoder.h"
#include "core/nn/activation.h"
#include "core/privacy/accounting.h"
#include "core/privacy/calibration.h"
#include "core/privacy/events.h"
#include "core/privacy/sampled_gaussian.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

constexpr absl::string_view kAutoganName = "autogan";

// The wide schedule (DefaultAutoganOptions; docs/benchmarks.md "Binary
// benchmark").
constexpr int64_t kWideAutoencoderSteps = 150;
constexpr double kWideAutoencoderBatch = 1024;
constexpr int64_t kWideCriticSteps = 1200;
constexpr double kWideCriticBatch = 256;
constexpr int kWideCriticStepsPerGeneratorStep = 1;

// The trainer's oracle interface over a dp_sgd session (float on the wire).
class RemoteOracle : public train::DpSgdGradientOracle {
 public:
  RemoteOracle(std::string phase, DpSgdOracle oracle, bool quiet)
      : phase_(std::move(phase)), oracle_(std::move(oracle)), quiet_(quiet) {}

  absl::StatusOr<Eigen::VectorXd> Step(int64_t index, const Eigen::VectorXd& parameters) override {
    auto gradient = oracle_.Step(index, parameters.cast<float>());
    if (!gradient.ok()) return gradient.status();
    return gradient->cast<double>();
  }
  absl::Status Close() override {
    if (closed_) return absl::OkStatus();
    auto session = oracle_.Close();
    if (!session.ok()) return session.status();
    closed_ = true;
    final_ = *std::move(session);
    if (!quiet_) {
      std::fprintf(stderr,
                   "%s: session %s closed after %lld steps, noise multiplier %.4g, epsilon %.4g "
                   "charged (dataset: %.4g spent, %.4g left)\n",
                   phase_.c_str(), final_.id().c_str(), static_cast<long long>(final_.steps_used()),
                   final_.noise_multiplier(), final_.epsilon_reserved(),
                   final_.epsilon_spent_total(), final_.epsilon_remaining());
    }
    return absl::OkStatus();
  }
  double epsilon_spent() const override { return oracle_.session().epsilon_spent_total(); }

 private:
  std::string phase_;
  DpSgdOracle oracle_;
  bool quiet_;
  bool closed_ = false;
  v1::Session final_;
};

v1::DpSgdParams DpSgdParamsFor(const train::DpSgdPhaseSpec& spec) {
  v1::DpSgdParams params;
  for (int width : spec.network.hidden) params.add_hidden(width);
  params.set_activation(nn::ActivationName(spec.network.activation));
  params.set_leaky_relu_slope(spec.network.leaky_relu_slope);
  params.set_loss(spec.loss == train::DpSgdLossKind::kReconstructionBce ? v1::RECONSTRUCTION_BCE
                                                                        : v1::WGAN_CRITIC_REAL);
  params.set_clip_norm(spec.clip_norm);
  params.set_expected_batch_size(spec.expected_batch_size);
  return params;
}

absl::StatusOr<std::vector<int>> ParseWidths(const std::string& flag, const std::string& text) {
  std::vector<int> widths;
  if (text.empty()) return widths;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int width = 0;
    if (!absl::SimpleAtoi(part, &width) || width <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " expects comma-separated positive layer widths, got '", text, "'"));
    }
    widths.push_back(width);
  }
  return widths;
}

// The width of the schema's DP-SGD rows (train::DpSgdRowWidth).
absl::StatusOr<int> DpSgdRowWidthOf(const v1::TableSchema& proto) {
  auto schema = SchemaFromProto(proto);
  if (!schema.ok()) return schema.status();
  return train::DpSgdRowWidth(data::FeatureLayout::ForFeatures(*schema), schema->num_classes());
}

absl::StatusOr<TrainResult> RunTrainAutogan(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto found = FindDataset(&*connection, args.Get("dataset"));
  if (!found.ok()) return found.status();
  const v1::Dataset* dataset = &*found;
  AutoganRun run;
  run.dataset_id = dataset->id();
  run.schema = dataset->schema();
  run.delta = dataset->budget().delta();
  run.relation = dataset->relation();
  if (args.Has("rows")) {
    auto rows = args.GetInt("rows");
    if (!rows.ok()) return rows.status();
    run.rows_guess = *rows;
  } else if (dataset->row_count() > 0) {
    run.rows_guess = dataset->row_count();
  } else {
    return absl::InvalidArgumentError(
        "the dataset's size is private: give --rows N, a public guess of its number of rows "
        "(it sets the sampling rate q = batch / N; the privacy guarantee does not depend on it)");
  }
  auto epsilon = args.GetDouble("epsilon");
  if (!epsilon.ok()) return epsilon.status();
  run.epsilon = *epsilon;
  train::AutoganOptions& o = run.options;
  auto width = DpSgdRowWidthOf(run.schema);
  if (!width.ok()) return width.status();
  o = DefaultAutoganOptions(*width);
  struct IntFlag {
    const char* name;
    int64_t* target;
  };
  int64_t td = o.critic_steps_per_generator_step, latent = o.latent_dim, seed = 1;
  int64_t clip_fakes = o.clip_fake_gradients ? 1 : 0;
  for (IntFlag f : {IntFlag{"steps-ae", &o.autoencoder_steps},
                    IntFlag{"steps-gan", &o.critic_steps},
                    IntFlag{"critic-steps-per-generator-step", &td},
                    IntFlag{"latent-dim", &latent}, IntFlag{"seed", &seed},
                    IntFlag{"clip-fakes", &clip_fakes}}) {
    if (!args.Has(f.name)) continue;
    auto value = args.GetInt(f.name);
    if (!value.ok()) return value.status();
    *f.target = *value;
  }
  o.critic_steps_per_generator_step = static_cast<int>(td);
  o.latent_dim = static_cast<int>(latent);
  o.seed = static_cast<uint64_t>(seed);
  if (clip_fakes != 0 && clip_fakes != 1) {
    return absl::InvalidArgumentError("--clip-fakes expects 0 or 1");
  }
  o.clip_fake_gradients = clip_fakes == 1;
  struct DoubleFlag {
    const char* name;
    double* target;
  };
  for (DoubleFlag f :
       {DoubleFlag{"autoencoder-share", &o.autoencoder_share},
        DoubleFlag{"batch-ae", &o.autoencoder_batch}, DoubleFlag{"batch-gan", &o.critic_batch},
        DoubleFlag{"clip-ae", &o.autoencoder_clip}, DoubleFlag{"clip-gan", &o.critic_clip},
        DoubleFlag{"lr-ae", &o.autoencoder_learning_rate},
        DoubleFlag{"ae-momentum", &o.autoencoder_momentum},
        DoubleFlag{"ae-adam-epsilon", &o.autoencoder_adam_epsilon},
        DoubleFlag{"lr-critic", &o.critic_learning_rate},
        DoubleFlag{"lr-generator", &o.generator_learning_rate},
        DoubleFlag{"weight-clamp", &o.weight_clamp}}) {
    if (!args.Has(f.name)) continue;
    auto value = args.GetDouble(f.name);
    if (!value.ok()) return value.status();
    *f.target = *value;
  }
  if (args.Has("ae-optimizer")) {
    const std::string optimizer = args.Get("ae-optimizer");
    if (optimizer == "sgd") {
      o.autoencoder_optimizer = train::AutoencoderOptimizer::kMomentumSgd;
    } else if (optimizer == "adam") {
      o.autoencoder_optimizer = train::AutoencoderOptimizer::kAdam;
    } else {
      return absl::InvalidArgumentError("--ae-optimizer expects adam or sgd");
    }
  }
  if (args.Has("hidden-ae")) {
    auto widths = ParseWidths("hidden-ae", args.Get("hidden-ae"));
    if (!widths.ok()) return widths.status();
    o.encoder_hidden = *widths;
    o.decoder_hidden = *widths;
    std::reverse(o.decoder_hidden.begin(), o.decoder_hidden.end());
  }
  if (args.Has("hidden-critic")) {
    auto widths = ParseWidths("hidden-critic", args.Get("hidden-critic"));
    if (!widths.ok()) return widths.status();
    o.critic_hidden = *widths;
  }
  run.sample_blocks = !args.Flag("argmax");
  run.quiet = args.Flag("quiet");
  run.key = args.Get("key");
  auto model = TrainAutoganModel(*connection, run);
  if (!model.ok()) return model.status();
  TrainResult result;
  result.message = absl::StrFormat("model written to %s (%s, epsilon %g, delta %g)\n",
                                   args.Get("out"), kAutoganName, model->epsilon(), model->delta());
  // Issue 38: rows x epsilon too small for the label. A session's steps
  // carry no count, so the rows are the public guess (--rows) or the public
  // row count that set the sampling rate.
  if (!run.schema.label().empty()) {
    if (auto warning = LabelRowsWarning(kAutoganName, static_cast<double>(run.rows_guess),
                                        run.epsilon)) {
      absl::StrAppend(&result.message, *warning, "\n");
    }
  }
  result.model = *std::move(model);
  return result;
}

}  // namespace

train::AutoganOptions DefaultAutoganOptions(int row_width) {
  train::AutoganOptions o;
  if (row_width < kWideAutoganRowWidth) return o;
  // Wide rows (issue 39), tuned at epsilon 1 on the public binary stand-in
  // of MIMIC (1,071 binary features, 2,142 one-hot inputs) with
  // bench/autogan_binary; every figure is in docs/benchmarks.md "Binary
  // benchmark". What each buys there:
  // - clip_fake_gradients: the critic's real rows have per-example norms of
  //   several units (|x| = sqrt(1,071) for one-hot rows) against C = 0.1;
  //   with the fakes unclipped the generator learnt no share of ones at all.
  // - larger expected autoencoder batches, fewer steps: the noise per
  //   coordinate of a step is sigma C / B (dp-auto-gan.md 1.2), and the
  //   decoder's output biases must each travel to logit(share) under it.
  // - a generator step after every critic step, at learning rate 1e-3: the
  //   generator's steps read no row (post-processing), so they are free.
  // - narrower networks (64 hidden, latent 32, critic 64): every step's cost
  //   is batch x parameters, dominated by the 2,142-wide layers.
  o.encoder_hidden = {64};
  o.decoder_hidden = {64};
  o.latent_dim = 32;
  o.critic_hidden = {64};
  o.autoencoder_steps = kWideAutoencoderSteps;
  o.autoencoder_batch = kWideAutoencoderBatch;
  o.critic_steps = kWideCriticSteps;
  o.critic_batch = kWideCriticBatch;
  o.critic_learning_rate = 1e-3;
  o.generator_learning_rate = 1e-3;
  o.critic_steps_per_generator_step = kWideCriticStepsPerGeneratorStep;
  o.clip_fake_gradients = true;
  return o;
}

absl::StatusOr<v1::GeneratorModel> TrainAutoganModel(Connection& analyst, const AutoganRun& run) {
  auto schema = SchemaFromProto(run.schema);
  if (!schema.ok()) return schema.status();
  if (schema->image_index().has_value()) {
    return absl::InvalidArgumentError(
        "train autogan fits tabular datasets; for image datasets use train merf or pearl");
  }
  if (!(run.epsilon > 0)) return absl::InvalidArgumentError("--epsilon must be positive");
  if (run.rows_guess <= 0) return absl::InvalidArgumentError("--rows must be positive");
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(*schema);
  const int num_classes = schema->num_classes();
  const std::string key = run.key.empty() ? NewIdempotencyKey() : run.key;

  train::AutoganOptions options = run.options;
  // One progress line per phase: steps, loss, and the dataset's epsilon
  // spent so far (a session's steps are charged when it opens).
  std::unique_ptr<StepProgress> progress;
  std::function<void(int, double)> update;
  std::string current_phase;
  options.progress = [&](const std::string& phase, int64_t step, int64_t steps, double loss,
                         double epsilon_spent) {
    if (phase != current_phase) {
      current_phase = phase;
      progress = std::make_unique<StepProgress>(
          absl::StrCat("train autogan: ", phase,
                       phase == "autoencoder" ? " (|noisy grad|)" : " (generator loss)"),
          static_cast<int>(steps), run.quiet);
      update = progress->Callback();
    }
    progress->set_note(absl::StrFormat("eps spent %.4f", epsilon_spent));
    update(static_cast<int>(step), loss);
  };
  options.progress_every = 25;

  const privacy::NeighbouringRelation relation = RelationFromProto(run.relation);
  const privacy::SamplingScheme scheme = privacy::SamplingSchemeFor(relation);
  privacy::AccountantState earlier_phases(relation);
  double cumulative_share = 0.0;
  train::DpSgdOracleFactory open = [&](const train::DpSgdPhaseSpec& spec)
      -> absl::StatusOr<std::unique_ptr<train::DpSgdGradientOracle>> {
    DpSgdSessionOptions session;
    session.dataset_id = run.dataset_id;
    session.idempotency_key = absl::StrCat(key, "-", spec.name);
    session.sampling_rate =
        std::min(1.0, spec.expected_batch_size / static_cast<double>(run.rows_guess));
    session.steps = spec.steps;
    // This phase's multiplier: the smallest that keeps the phases so far,
    // composed after the earlier ones, within their cumulative share.
    cumulative_share = std::min(1.0, cumulative_share + spec.budget_share);
    privacy::CalibrationOptions calibration;
    calibration.prior = &earlier_phases;
    auto sigma = privacy::CalibrateSampledDiscreteGaussianNoiseMultiplier(
        scheme, session.sampling_rate, session.steps, run.epsilon * cumulative_share, run.delta,
        calibration);
    if (!sigma.ok()) return sigma.status();
    session.noise_multiplier = *sigma;
    session.network = DpSgdParamsFor(spec);
    auto oracle = DpSgdOracle::Open(&analyst, session);
    if (!oracle.ok()) return oracle.status();
    // The same key reopens (replays) a session from an earlier run. Its
    // steps are spent and the trainer state that went with them is gone, so
    // it cannot continue; say so instead of failing on a replayed step.
    const v1::Session& opened = oracle->session();
    if (opened.state() != "OPEN" || opened.steps_used() > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the ", spec.name, " session ", opened.id(), " of key '", key, "' already ran ",
          opened.steps_used(), " of ", opened.steps_reserved(), " steps (", opened.state(),
          "); its epsilon stays spent and a new run cannot resume its trainer state: rerun "
          "with a new --key (or none)"));
    }
    // What the ledger now holds for this phase, as the next one's prior.
    auto step = privacy::SampledGaussianEvent(scheme, session.sampling_rate,
                                              opened.params().noise_multiplier(),
                                              privacy::SampledNoise::kDiscrete);
    if (!step.ok()) return step.status();
    auto phase = privacy::PrivacyEvent::SelfCompose(*std::move(step), session.steps);
    if (!phase.ok()) return phase.status();
    DPC_RETURN_IF_ERROR(earlier_phases.Add(*phase));
    return std::make_unique<RemoteOracle>(spec.name, *std::move(oracle), run.quiet);
  };
  auto trained = train::TrainAutogan(layout, num_classes, options, open);
  if (!trained.ok()) return trained.status();

  ModelSource source;
  source.schema = run.schema;
  source.schema_fingerprint = schema->FingerprintHex();
  source.epsilon = run.epsilon;
  source.delta = run.delta;
  const train::AutoganModel& m = trained->model;
  v1::GeneratorModel model =
      PackageModel(kAutoganName, source, m.generator_options.hidden, m.generator_options.activation,
                   m.generator_parameters, static_cast<int>(trained->critic_steps),
                   trained->generator_final_loss);
  model.set_dataset_id(run.dataset_id);
  model.set_noise_dim(m.generator_options.input_dim);
  model.set_latent_dim(m.generator_options.output_dim);
  model.set_layer_norm(m.generator_options.layer_norm);
  model.set_output_dim(m.decoder_options.output_dim);
  model.set_num_classes(num_classes);
  model.set_leaky_relu_slope(m.generator_options.leaky_relu_slope);
  for (int width : m.decoder_options.hidden) model.add_decoder_hidden(width);
  model.mutable_decoder_parameters()->Assign(m.decoder_parameters.data(),
                                             m.decoder_parameters.data() +
                                                 m.decoder_parameters.size());
  model.set_sample_blocks(run.sample_blocks);
  return model;
}

namespace {

absl::StatusOr<data::Table> SampleAutoganModel(const v1::GeneratorModel& model, int64_t num_rows,
                                               uint64_t seed) {
  auto schema = SchemaFromProto(model.schema());
  if (!schema.ok()) return schema.status();
  auto activation = nn::ParseActivation(model.activation());
  if (!activation.ok()) return activation.status();
  train::AutoganModel m;
  m.generator_options.input_dim = model.noise_dim();
  m.generator_options.hidden.assign(model.hidden().begin(), model.hidden().end());
  m.generator_options.output_dim = model.latent_dim();
  m.generator_options.activation = *activation;
  m.generator_options.leaky_relu_slope = model.leaky_relu_slope();
  m.generator_options.layer_norm = model.layer_norm();
  m.generator_parameters =
      Eigen::Map<const Eigen::VectorXd>(model.parameters().data(), model.parameters_size());
  m.decoder_options = m.generator_options;
  m.decoder_options.input_dim = model.latent_dim();
  m.decoder_options.hidden.assign(model.decoder_hidden().begin(), model.decoder_hidden().end());
  m.decoder_options.output_dim = model.output_dim();
  m.decoder_options.layer_norm = false;
  m.decoder_parameters = Eigen::Map<const Eigen::VectorXd>(model.decoder_parameters().data(),
                                                           model.decoder_parameters_size());
  auto table = train::SampleAutogan(*schema, m, num_rows, seed, model.sample_blocks());
  if (!table.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the autogan model file does not rebuild (", table.status().message(),
        "); retrain it with `dpcurator train autogan`"));
  }
  return table;
}

class AutoganUnit final : public Method {
 public:
  MethodId id() const override { return MethodId::kAutogan; }
  absl::string_view name() const override { return kAutoganName; }
  absl::string_view title() const override { return "DP-auto-GAN"; }

  std::string TrainSummary() const override {
    return "DP-auto-GAN: autoencoder + latent WGAN trained by DP-SGD sessions (analyst)";
  }
  std::string TrainDescription() const override {
    return "Phase 1 trains an autoencoder, phase 2 a WGAN whose critic sees decoded rows\n"
           "(dp-auto-gan.md): every gradient over private rows is a dp_sgd session step "
           "(clipped,\n"
           "noised, accounted by the server), one session per phase with --autoencoder-share "
           "of\n"
           "--epsilon for the autoencoder. The encoder's gradient is clipped with the "
           "decoder's\n"
           "(docs/privacy.md 2.9). A dropped connection is retried on the same step (no second\n"
           "charge); rerunning with the same --key reopens the same sessions.";
  }
  std::vector<OptionSpec> TrainOptions() const override {
    return WithConnection({{"dataset", "", "dataset id or name", false, true},
                      {"epsilon", "", "epsilon of both phases together", false, true},
                      {"out", "model.pb", "model file to write"},
                      {"rows", "",
                       "public guess of the dataset's size for the sampling rate (default: the "
                       "dataset's row count where it is public)"},
                      {"autoencoder-share", "", "fraction of epsilon for phase 1 (default 0.7)"},
                      {"steps-ae", "", "autoencoder DP-SGD steps"},
                      {"steps-gan", "", "critic DP-SGD steps"},
                      {"batch-ae", "", "expected autoencoder batch (the public divisor)"},
                      {"batch-gan", "", "expected critic batch (the public divisor)"},
                      {"clip-ae", "", "autoencoder per-example clip norm C"},
                      {"clip-gan", "", "critic per-example clip norm C"},
                      {"lr-ae", "", "autoencoder learning rate"},
                      {"ae-optimizer", "",
                       "autoencoder optimiser: adam (default) or sgd (heavy-ball momentum)"},
                      {"ae-momentum", "", "momentum of --ae-optimizer sgd (default 0.9)"},
                      {"ae-adam-epsilon", "", "autoencoder Adam's epsilon (default 1e-8)"},
                      {"lr-critic", "", "critic Adam learning rate"},
                      {"lr-generator", "", "generator Adam learning rate"},
                      {"critic-steps-per-generator-step", "", "tD"},
                      {"weight-clamp", "", "clamp critic weights to [-c, c] (0: off)"},
                      {"clip-fakes", "",
                       "1: clip each fake's critic gradient to --clip-gan as the rows' are "
                       "(default 1 from 512 inputs, 0 below)"},
                      {"latent-dim", "", "latent width"},
                      {"hidden-ae", "", "encoder widths (the decoder mirrors them)"},
                      {"hidden-critic", "", "critic widths"},
                      {"argmax", "", "decode categories by argmax instead of sampling", true},
                      {"seed", "", "seed of the public randomness"},
                      {"key", "", "idempotency key prefix of the two sessions"},
                      {"quiet", "", "no progress lines", true}});
  }
  absl::StatusOr<TrainResult> Train(const ParsedArgs& args) const override {
    return RunTrainAutogan(args);
  }

  // No release: two dp_sgd sessions at the demo's epsilon together.
  absl::StatusOr<DemoOutput> TrainInDemo(const DemoInput& input) const override {
    AutoganRun run;
    run.dataset_id = input.dataset_id;
    run.schema = input.schema;
    run.epsilon = input.epsilon;
    run.delta = input.delta;
    run.rows_guess = input.rows;
    run.relation = v1::ADD_REMOVE;  // as the demo's dataset is created
    DPC_ASSIGN_OR_RETURN(const int width, DpSgdRowWidthOf(input.schema));
    run.options = DefaultAutoganOptions(width);
    run.quiet = input.quiet;
    DemoOutput out;
    out.release.set_id("dp_sgd sessions");
    out.release.mutable_embedding()->set_epsilon(input.epsilon);
    DPC_ASSIGN_OR_RETURN(out.model, TrainAutoganModel(*input.analyst, run));
    return out;
  }

  absl::StatusOr<data::Table> SampleTable(const v1::GeneratorModel& model, int64_t num_rows,
                                          uint64_t seed) const override {
    return SampleAutoganModel(model, num_rows, seed);
  }
};

}  // namespace

const Method& AutoganMethod() {
  static const AutoganUnit* const unit = new AutoganUnit();
  return *unit;
}

}  // namespace dpcurator::client
