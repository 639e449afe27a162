#include "core/train/autogan_trainer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/nn/adam.h"
#include "core/nn/momentum_sgd.h"
#include "core/nn/per_example.h"
#include "core/util/sigmoid.h"
#include "core/util/status_macros.h"

namespace dpcurator::train {
namespace {

// The logistic function of every entry (core/util/sigmoid.h).
void SigmoidInPlace(Eigen::MatrixXd* values) {
  *values = values->unaryExpr([](double v) { return Sigmoid(v); });
}

absl::Status CheckPositive(double value, const char* flag) {
  if (!std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " must be a finite positive number, got ", value));
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const AutoganOptions& o) {
  if (o.latent_dim <= 0) return absl::InvalidArgumentError("latent width must be positive");
  if (o.noise_dim <= 0) return absl::InvalidArgumentError("noise width must be positive");
  if (o.autoencoder_steps <= 0 || o.critic_steps <= 0) {
    return absl::InvalidArgumentError("--steps-ae and --steps-gan must be positive");
  }
  DPC_RETURN_IF_ERROR(CheckPositive(o.autoencoder_batch, "--batch-ae"));
  DPC_RETURN_IF_ERROR(CheckPositive(o.critic_batch, "--batch-gan"));
  DPC_RETURN_IF_ERROR(CheckPositive(o.autoencoder_clip, "--clip-ae"));
  DPC_RETURN_IF_ERROR(CheckPositive(o.critic_clip, "--clip-gan"));
  DPC_RETURN_IF_ERROR(CheckPositive(o.autoencoder_learning_rate, "--lr-ae"));
  if (!(o.autoencoder_momentum >= 0 && o.autoencoder_momentum < 1)) {
    return absl::InvalidArgumentError("--ae-momentum must be in [0, 1)");
  }
  DPC_RETURN_IF_ERROR(CheckPositive(o.autoencoder_adam_epsilon, "--ae-adam-epsilon"));
  DPC_RETURN_IF_ERROR(CheckPositive(o.critic_learning_rate, "--lr-critic"));
  DPC_RETURN_IF_ERROR(CheckPositive(o.generator_learning_rate, "--lr-generator"));
  if (o.critic_steps_per_generator_step <= 0) {
    return absl::InvalidArgumentError("--critic-steps-per-generator-step must be positive");
  }
  if (o.generator_batch <= 0) {
    return absl::InvalidArgumentError("--generator-batch must be positive");
  }
  if (!(o.weight_clamp >= 0) || !std::isfinite(o.weight_clamp)) {
    return absl::InvalidArgumentError("--weight-clamp must be >= 0 (0: no clamping)");
  }
  if (!(o.gumbel_temperature >= 0) || !std::isfinite(o.gumbel_temperature)) {
    return absl::InvalidArgumentError("--gumbel-temperature must be >= 0 (0: hard draws)");
  }
  if (!(o.autoencoder_share > 0 && o.autoencoder_share < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--autoencoder-share must be in (0, 1), got ", o.autoencoder_share));
  }
  return absl::OkStatus();
}

// Calls the progress callback every progress_every steps and at the end.
void Report(const AutoganOptions& options, const std::string& phase, int64_t step, int64_t steps,
            double loss, const DpSgdGradientOracle& oracle) {
  if (!options.progress) return;
  const int64_t every = std::max<int64_t>(1, options.progress_every);
  if (step % every == 0 || step == steps) {
    options.progress(phase, step, steps, loss, oracle.epsilon_spent());
  }
}

// Runs `oracle` for one phase; closes it whatever happens.
class OracleCloser {
 public:
  explicit OracleCloser(DpSgdGradientOracle* oracle) : oracle_(oracle) {}
  ~OracleCloser() {
    if (oracle_ != nullptr) oracle_->Close().IgnoreError();
  }
  absl::Status Close() {
    DpSgdGradientOracle* oracle = std::exchange(oracle_, nullptr);
    return oracle->Close();
  }

 private:
  DpSgdGradientOracle* oracle_;
};

}  // namespace

int DpSgdRowWidth(const data::FeatureLayout& layout, int num_classes) {
  return layout.total_dim() + (num_classes > 1 ? num_classes : 0);
}

Eigen::MatrixXd DpSgdRows(const Eigen::MatrixXd& features, const Eigen::VectorXi& labels,
                          int num_classes) {
  const Eigen::Index label_dim = num_classes > 1 ? num_classes : 0;
  Eigen::MatrixXd rows = Eigen::MatrixXd::Zero(features.rows(), features.cols() + label_dim);
  rows.leftCols(features.cols()) = features;
  if (label_dim > 0) {
    for (Eigen::Index i = 0; i < features.rows(); ++i) rows(i, features.cols() + labels(i)) = 1.0;
  }
  return rows;
}

// The one-hot blocks of a DP-SGD row: (offset, levels), the layout's, then
// the label block.
std::vector<std::pair<int, int>> OneHotBlocks(const data::FeatureLayout& layout,
                                              int num_classes) {
  std::vector<std::pair<int, int>> blocks;
  for (const auto& slot : layout.categorical) blocks.emplace_back(slot.offset, slot.levels);
  if (num_classes > 1) blocks.emplace_back(layout.total_dim(), num_classes);
  return blocks;
}

// Gumbel-softmax relaxation of each block's draw (Jang et al. 2017, eq. 1):
// y_l = softmax_l((log p_l + g_l) / tau), g_l = -log(-log U) (the block's
// normalisation of p cancels in the softmax); numerics copied.
Eigen::MatrixXd RelaxedOneHotBlocks(const std::vector<std::pair<int, int>>& blocks,
                                    const Eigen::MatrixXd& probabilities, double temperature,
                                    PublicRng* rng) {
  Eigen::MatrixXd out = probabilities;
  std::vector<double> a;
  for (const auto& [offset, levels] : blocks) {
    a.resize(levels);
    for (Eigen::Index i = 0; i < out.rows(); ++i) {
      double top = -std::numeric_limits<double>::infinity();
      for (int l = 0; l < levels; ++l) {
        double u = rng->Uniform();
        while (u <= 0.0) u = rng->Uniform();
        const double gumbel = -std::log(-std::log(u));
        a[l] = (std::log(std::max(probabilities(i, offset + l), 1e-300)) + gumbel) / temperature;
        top = std::max(top, a[l]);
      }
      double total = 0;
      for (int l = 0; l < levels; ++l) total += (a[l] = std::exp(a[l] - top));
      for (int l = 0; l < levels; ++l) out(i, offset + l) = a[l] / total;
    }
  }
  return out;
}

// d loss / d logits for relaxed fakes y (above) of p = sigmoid(logits), given
// g = d loss / d y: within a block, dy_k/dlog p_l = y_k (delta_kl - y_l) / tau
// and dlog p_l / dlogit_l = 1 - p_l, so the logit's gradient is
// y_l (g_l - sum_k g_k y_k) (1 - p_l) / tau; numerics: g p (1 - p).
Eigen::MatrixXd RelaxedOneHotBackward(const std::vector<std::pair<int, int>>& blocks,
                                      const Eigen::MatrixXd& relaxed,
                                      const Eigen::MatrixXd& probabilities, double temperature,
                                      const Eigen::MatrixXd& grad_relaxed) {
  Eigen::MatrixXd out = grad_relaxed.cwiseProduct(probabilities)
                            .cwiseProduct((1.0 - probabilities.array()).matrix());
  for (const auto& [offset, levels] : blocks) {
    for (Eigen::Index i = 0; i < out.rows(); ++i) {
      double inner = 0;
      for (int l = 0; l < levels; ++l) {
        inner += grad_relaxed(i, offset + l) * relaxed(i, offset + l);
      }
      for (int l = 0; l < levels; ++l) {
        out(i, offset + l) = relaxed(i, offset + l) * (grad_relaxed(i, offset + l) - inner) *
                             (1.0 - probabilities(i, offset + l)) / temperature;
      }
    }
  }
  return out;
}

Eigen::MatrixXd SampleOneHotBlocks(const data::FeatureLayout& layout, int num_classes,
                                   const Eigen::MatrixXd& probabilities, PublicRng* rng) {
  Eigen::MatrixXd out = probabilities;
  for (const auto& [offset, levels] : OneHotBlocks(layout, num_classes)) {
    for (Eigen::Index i = 0; i < out.rows(); ++i) {
      auto block = out.row(i).segment(offset, levels);
      const double total = block.cwiseMax(0.0).sum();
      // Inverse-CDF draw of level l with probability p_l / sum p; the last
      // level when rounding leaves the target positive.
      double target = rng->Uniform() * total;
      int chosen = levels - 1;
      for (int l = 0; l < levels; ++l) {
        target -= std::max(block(l), 0.0);
        if (target < 0) {
          chosen = l;
          break;
        }
      }
      block.setZero();
      block(chosen) = 1.0;
    }
  }
  return out;
}

absl::StatusOr<DpSgdPhaseSpec> AutoencoderPhase(int row_width, const AutoganOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateOptions(options));
  DpSgdPhaseSpec spec;
  spec.name = "autoencoder";
  spec.network.input_dim = row_width;
  spec.network.hidden = options.encoder_hidden;
  spec.network.hidden.push_back(options.latent_dim);
  spec.network.hidden.insert(spec.network.hidden.end(), options.decoder_hidden.begin(),
                             options.decoder_hidden.end());
  spec.network.output_dim = row_width;
  spec.network.activation = options.activation;
  spec.network.leaky_relu_slope = options.leaky_relu_slope;
  spec.network.layer_norm = false;
  spec.network.seed = options.seed;
  spec.loss = DpSgdLossKind::kReconstructionBce;
  spec.clip_norm = options.autoencoder_clip;
  spec.expected_batch_size = options.autoencoder_batch;
  spec.steps = options.autoencoder_steps;
  spec.budget_share = options.autoencoder_share;
  DPC_RETURN_IF_ERROR(nn::Mlp::CountParameters(spec.network).status());
  return spec;
}

absl::StatusOr<DpSgdPhaseSpec> CriticPhase(int row_width, const AutoganOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateOptions(options));
  DpSgdPhaseSpec spec;
  spec.name = "critic";
  spec.network.input_dim = row_width;
  spec.network.hidden = options.critic_hidden;
  spec.network.output_dim = 1;
  spec.network.activation = options.activation;
  spec.network.leaky_relu_slope = options.leaky_relu_slope;
  spec.network.layer_norm = false;
  spec.network.seed = options.seed + 1;
  spec.loss = DpSgdLossKind::kWganCriticReal;
  spec.clip_norm = options.critic_clip;
  spec.expected_batch_size = options.critic_batch;
  spec.steps = options.critic_steps;
  spec.budget_share = 1.0 - options.autoencoder_share;
  DPC_RETURN_IF_ERROR(nn::Mlp::CountParameters(spec.network).status());
  return spec;
}

void ActivateCodes(const nn::MlpOptions& options, Eigen::MatrixXd* codes) {
  switch (options.activation) {
    case nn::Activation::kRelu:
      *codes = codes->cwiseMax(0.0);
      break;
    case nn::Activation::kLeakyRelu: {
      const double slope = options.leaky_relu_slope;
      *codes = codes->unaryExpr([slope](double v) { return v > 0 ? v : slope * v; });
      break;
    }
    case nn::Activation::kTanh:
      *codes = codes->array().tanh().matrix();
      break;
  }
}

void ActivateCodesBackward(const nn::MlpOptions& options, const Eigen::MatrixXd& codes,
                           Eigen::MatrixXd* gradient) {
  switch (options.activation) {
    case nn::Activation::kRelu:
      *gradient = gradient->cwiseProduct((codes.array() > 0).cast<double>().matrix());
      break;
    case nn::Activation::kLeakyRelu: {
      const double slope = options.leaky_relu_slope;
      *gradient = gradient->cwiseProduct(
          codes.unaryExpr([slope](double v) { return v > 0 ? 1.0 : slope; }));
      break;
    }
    case nn::Activation::kTanh:
      *gradient = gradient->cwiseProduct(
          (1.0 - codes.array().tanh().square()).matrix());
      break;
  }
}

absl::StatusOr<nn::Mlp> DecoderOf(const nn::Mlp& autoencoder, int latent_layer) {
  const nn::MlpOptions& ae = autoencoder.options();
  if (latent_layer < 0 || latent_layer >= static_cast<int>(ae.hidden.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("latent layer ", latent_layer, " is not a hidden layer of the autoencoder"));
  }
  if (ae.layer_norm) {
    return absl::InvalidArgumentError("an autoencoder with layer norm has no plain decoder tail");
  }
  nn::MlpOptions options = ae;
  options.input_dim = ae.hidden[latent_layer];
  options.hidden.assign(ae.hidden.begin() + latent_layer + 1, ae.hidden.end());
  // Layers latent_layer+1.. are stored contiguously after the latent layer's
  // bias (mlp.h Plan: weight then bias per layer, in order), so the decoder's
  // flat vector is the tail of the autoencoder's.
  const Eigen::Index start = autoencoder.layers()[latent_layer + 1].weight_offset;
  Eigen::VectorXd tail = autoencoder.parameters().tail(autoencoder.num_parameters() - start);
  return nn::Mlp::FromParameters(options, std::move(tail));
}

absl::StatusOr<TrainedAutogan> TrainAutogan(const data::FeatureLayout& layout, int num_classes,
                                            const AutoganOptions& options,
                                            const DpSgdOracleFactory& open) {
  if (layout.image.has_value()) {
    return absl::InvalidArgumentError(
        "DP-auto-GAN trains on tabular schemas only; use train merf or pearl for images");
  }
  const int width = DpSgdRowWidth(layout, num_classes);
  DPC_ASSIGN_OR_RETURN(DpSgdPhaseSpec ae_spec, AutoencoderPhase(width, options));
  DPC_ASSIGN_OR_RETURN(DpSgdPhaseSpec critic_spec, CriticPhase(width, options));
  TrainedAutogan result;

  // Phase 1 (dp-auto-gan.md 1.3, Alg. 2): the whole autoencoder is one Mlp,
  // so the oracle clips the JOINT (encoder, decoder) per-example gradient:
  // the fix of pitfall 2 (the reference privatises only the decoder's).
  DPC_ASSIGN_OR_RETURN(nn::Mlp autoencoder, nn::Mlp::Create(ae_spec.network));
  {
    nn::AdamOptions adam_options;
    adam_options.learning_rate = options.autoencoder_learning_rate;
    adam_options.epsilon = options.autoencoder_adam_epsilon;
    DPC_ASSIGN_OR_RETURN(nn::Adam adam,
                         nn::Adam::Create(autoencoder.num_parameters(), adam_options));
    nn::MomentumSgdOptions sgd_options;
    sgd_options.learning_rate = options.autoencoder_learning_rate;
    sgd_options.momentum = options.autoencoder_momentum;
    DPC_ASSIGN_OR_RETURN(nn::MomentumSgd sgd,
                         nn::MomentumSgd::Create(autoencoder.num_parameters(), sgd_options));
    const bool use_sgd = options.autoencoder_optimizer == AutoencoderOptimizer::kMomentumSgd;
    DPC_ASSIGN_OR_RETURN(auto oracle, open(ae_spec));
    OracleCloser closer(oracle.get());
    for (int64_t t = 0; t < ae_spec.steps; ++t) {
      DPC_ASSIGN_OR_RETURN(Eigen::VectorXd gradient, oracle->Step(t, autoencoder.parameters()));
      if (gradient.size() != autoencoder.num_parameters()) {
        return absl::InternalError("the DP-SGD oracle answered a gradient of the wrong length");
      }
      DPC_RETURN_IF_ERROR(use_sgd ? sgd.Step(autoencoder.parameters(), gradient)
                                  : adam.Step(autoencoder.parameters(), gradient));
      // No loss over private rows is released; the noisy gradient's norm is
      // the public figure a progress line can show.
      result.autoencoder_final_loss = gradient.norm();
      Report(options, ae_spec.name, t + 1, ae_spec.steps, result.autoencoder_final_loss, *oracle);
    }
    DPC_RETURN_IF_ERROR(closer.Close());
    result.autoencoder_steps = ae_spec.steps;
  }
  const int latent_layer = static_cast<int>(options.encoder_hidden.size());
  DPC_ASSIGN_OR_RETURN(nn::Mlp decoder, DecoderOf(autoencoder, latent_layer));

  // Phase 2 (dp-auto-gan.md 1.4, Alg. 3-4, standard WGAN signs, pitfall 3):
  //   critic:    min  -mean Dc(real) + mean Dc(De(G(z)))
  //   generator: min  -mean Dc(De(G(z)))
  // The real part's gradient comes from the oracle (clipped, noised); the
  // fake part never touches a private row, so the trainer computes it
  // exactly, as it does the whole generator step (post-processing).
  DPC_ASSIGN_OR_RETURN(nn::Mlp critic, nn::Mlp::Create(critic_spec.network));
  nn::MlpOptions generator_options;
  generator_options.input_dim = options.noise_dim;
  generator_options.hidden = options.generator_hidden;
  generator_options.output_dim = options.latent_dim;
  generator_options.activation = options.activation;
  generator_options.leaky_relu_slope = options.leaky_relu_slope;
  // The generator is not private: per-row layer norm stands in for the
  // reference's LayerNorm blocks (dp-auto-gan.md Sec. 4, ADULT GAN [R]).
  generator_options.layer_norm = true;
  generator_options.seed = options.seed + 2;
  DPC_ASSIGN_OR_RETURN(nn::Mlp generator, nn::Mlp::Create(generator_options));

  // Adam with beta1 = 0.5 for both WGAN players: the momentum of the
  // default 0.9 lags the moving critic (Radford et al. 2016, Sec. 4).
  nn::AdamOptions critic_adam_options;
  critic_adam_options.learning_rate = options.critic_learning_rate;
  critic_adam_options.beta1 = 0.5;
  nn::AdamOptions generator_adam_options = critic_adam_options;
  generator_adam_options.learning_rate = options.generator_learning_rate;
  DPC_ASSIGN_OR_RETURN(nn::Adam critic_adam,
                       nn::Adam::Create(critic.num_parameters(), critic_adam_options));
  DPC_ASSIGN_OR_RETURN(nn::Adam generator_adam,
                       nn::Adam::Create(generator.num_parameters(), generator_adam_options));

  PublicRng rng(options.seed ^ 0x5eed0a0709a11ULL);
  const int m = options.generator_batch;
  Eigen::MatrixXd z(m, options.noise_dim);
  Eigen::MatrixXd fake;
  // The decoder's probabilities of the last draw (the sigmoid's derivative
  // p (1 - p) of the generator step); equal to `fake` unless sample_fakes.
  Eigen::MatrixXd fake_probabilities;
  const std::vector<std::pair<int, int>> blocks = OneHotBlocks(layout, num_classes);
  Eigen::MatrixXd grad_scores = Eigen::MatrixXd::Constant(m, 1, 1.0 / m);
  Eigen::MatrixXd grad_x, grad_logits, grad_latent;
  // The generator's output before ActivateCodes (options.activate_codes).
  Eigen::MatrixXd codes_before_activation, codes;
  Eigen::VectorXd critic_fake_grad(critic.num_parameters());
  Eigen::VectorXd critic_scratch(critic.num_parameters());
  Eigen::VectorXd decoder_scratch(decoder.num_parameters());
  Eigen::VectorXd generator_grad(generator.num_parameters());
  nn::MlpWorkspace generator_ws, decoder_ws, critic_ws;
  nn::PerExampleWorkspace fake_ws;
  const Eigen::MatrixXd ones = Eigen::MatrixXd::Ones(m, 1);

  // Decoded fakes De(G(z)) for a fresh z, in [0, 1] (sigmoid outputs).
  auto draw_fakes = [&]() {
    rng.FillNormal(z);
    codes = generator.Forward(z, &generator_ws);
    if (options.activate_codes) {
      codes_before_activation = codes;
      ActivateCodes(generator.options(), &codes);
    }
    fake_probabilities = decoder.Forward(codes, &decoder_ws);
    SigmoidInPlace(&fake_probabilities);
    if (!options.sample_fakes) {
      fake = fake_probabilities;
    } else if (options.gumbel_temperature > 0) {
      fake = RelaxedOneHotBlocks(blocks, fake_probabilities, options.gumbel_temperature, &rng);
    } else {
      fake = SampleOneHotBlocks(layout, num_classes, fake_probabilities, &rng);
    }
  };

  DPC_ASSIGN_OR_RETURN(auto oracle, open(critic_spec));
  OracleCloser closer(oracle.get());
  const int64_t generator_every = options.critic_steps_per_generator_step;
  for (int64_t t = 0; t < critic_spec.steps; ++t) {
    DPC_ASSIGN_OR_RETURN(Eigen::VectorXd gradient, oracle->Step(t, critic.parameters()));
    if (gradient.size() != critic.num_parameters()) {
      return absl::InternalError("the DP-SGD oracle answered a gradient of the wrong length");
    }
    // Fake part: d/dparams of +mean Dc(fake).
    draw_fakes();
    critic_fake_grad.setZero();
    if (options.clip_fake_gradients) {
      // Each fake's gradient clipped to the same C as the real rows' (the
      // reference clips a microbatch's real and fake terms together,
      // dp-auto-gan.md 1.4): unclipped, the fake term outweighs a real term
      // clipped far below its norm, and the critic learns to lower every
      // fake instead of to tell them from the rows.
      critic.Forward(fake, fake_ws.mlp_workspace());
      DPC_RETURN_IF_ERROR(nn::AddClippedGradientSum(critic, ones, critic_spec.clip_norm,
                                                    &fake_ws, &critic_fake_grad));
      critic_fake_grad /= static_cast<double>(m);
    } else {
      critic.Forward(fake, &critic_ws);
      critic.Backward(grad_scores, &critic_ws, &critic_fake_grad);
    }
    gradient += critic_fake_grad;
    DPC_RETURN_IF_ERROR(critic_adam.Step(critic.parameters(), gradient));
    if (options.weight_clamp > 0) {
      critic.parameters() =
          critic.parameters().cwiseMax(-options.weight_clamp).cwiseMin(options.weight_clamp);
    }
    if ((t + 1) % generator_every == 0) {
      // Generator step: chain rule through the critic, the decoder's
      // sigmoid (dp/dl = p (1 - p)) and the frozen decoder; with sampled
      // fakes the critic's gradient at the sample passes straight through
      // to p (sample_fakes).
      draw_fakes();
      const Eigen::MatrixXd& scores = critic.Forward(fake, &critic_ws);
      result.generator_final_loss = -scores.mean();
      critic_scratch.setZero();
      critic.Backward(-grad_scores, &critic_ws, &critic_scratch, &grad_x);
      if (options.sample_fakes && options.gumbel_temperature > 0) {
        grad_logits = RelaxedOneHotBackward(blocks, fake, fake_probabilities,
                                            options.gumbel_temperature, grad_x);
      } else {
        grad_logits = grad_x.cwiseProduct(fake_probabilities)
                          .cwiseProduct((1.0 - fake_probabilities.array()).matrix());
      }
      decoder_scratch.setZero();
      decoder.Backward(grad_logits, &decoder_ws, &decoder_scratch, &grad_latent);
      if (options.activate_codes) {
        ActivateCodesBackward(generator.options(), codes_before_activation, &grad_latent);
      }
      generator_grad.setZero();
      generator.Backward(grad_latent, &generator_ws, &generator_grad);
      DPC_RETURN_IF_ERROR(generator_adam.Step(generator.parameters(), generator_grad));
    }
    Report(options, critic_spec.name, t + 1, critic_spec.steps, result.generator_final_loss,
           *oracle);
  }
  DPC_RETURN_IF_ERROR(closer.Close());
  result.critic_steps = critic_spec.steps;

  result.model.generator_options = generator.options();
  result.model.generator_parameters = generator.parameters();
  result.model.activate_codes = options.activate_codes;
  result.model.decoder_options = decoder.options();
  result.model.decoder_parameters = decoder.parameters();
  result.critic_options = critic.options();
  result.critic_parameters = critic.parameters();
  result.autoencoder_options = autoencoder.options();
  result.autoencoder_parameters = autoencoder.parameters();
  return result;
}

absl::StatusOr<Eigen::MatrixXd> GenerateRows(const AutoganModel& model, int64_t num_rows,
                                             PublicRng* rng) {
  if (num_rows <= 0) return absl::InvalidArgumentError("the number of rows must be positive");
  DPC_ASSIGN_OR_RETURN(nn::Mlp generator,
                       nn::Mlp::FromParameters(model.generator_options,
                                               model.generator_parameters));
  DPC_ASSIGN_OR_RETURN(nn::Mlp decoder,
                       nn::Mlp::FromParameters(model.decoder_options, model.decoder_parameters));
  if (generator.output_dim() != decoder.input_dim()) {
    return absl::InvalidArgumentError(
        "the generator's output width does not match the decoder's input width");
  }
  Eigen::MatrixXd rows(num_rows, decoder.output_dim());
  nn::MlpWorkspace generator_ws, decoder_ws;
  constexpr Eigen::Index kChunk = 4096;
  for (Eigen::Index start = 0; start < num_rows; start += kChunk) {
    const Eigen::Index n = std::min<Eigen::Index>(kChunk, num_rows - start);
    Eigen::MatrixXd z(n, generator.input_dim());
    rng->FillNormal(z);
    Eigen::MatrixXd latent = generator.Forward(z, &generator_ws);
    if (model.activate_codes) ActivateCodes(generator.options(), &latent);
    Eigen::MatrixXd logits = decoder.Forward(latent, &decoder_ws);
    SigmoidInPlace(&logits);
    rows.middleRows(start, n) = logits;
  }
  return rows;
}

absl::StatusOr<data::Table> DecodeDpSgdRows(const data::Schema& schema,
                                            const Eigen::MatrixXd& rows, PublicRng* rng) {
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(schema);
  const int num_classes = schema.num_classes();
  if (layout.image.has_value()) {
    return absl::InvalidArgumentError("DP-auto-GAN models decode tabular schemas only");
  }
  if (rows.cols() != DpSgdRowWidth(layout, num_classes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model emits rows of width ", rows.cols(), " but the schema encodes to width ",
        DpSgdRowWidth(layout, num_classes), "; sample with the schema the model was trained on"));
  }
  const Eigen::Index n = rows.rows();
  const int features = layout.total_dim();
  // The label block: argmax, or a draw from its normalised outputs.
  auto pick = [&](const Eigen::Ref<const Eigen::RowVectorXd>& weights, double u) {
    int chosen = 0;
    if (rng == nullptr) {
      weights.maxCoeff(&chosen);
      return chosen;
    }
    double target = u * weights.cwiseMax(0.0).sum();
    chosen = static_cast<int>(weights.size()) - 1;
    for (Eigen::Index l = 0; l < weights.size(); ++l) {
      target -= std::max(weights(l), 0.0);
      if (target < 0) return static_cast<int>(l);
    }
    return chosen;
  };
  Eigen::VectorXi labels = Eigen::VectorXi::Zero(n);
  if (num_classes > 1) {
    for (Eigen::Index i = 0; i < n; ++i) {
      labels(i) = pick(rows.row(i).segment(features, num_classes), rng ? rng->Uniform() : 0.0);
    }
  }
  Eigen::MatrixXd uniforms;
  if (rng != nullptr) {
    uniforms.resize(n, layout.num_categorical_columns());
    for (Eigen::Index j = 0; j < uniforms.cols(); ++j) {
      for (Eigen::Index i = 0; i < n; ++i) uniforms(i, j) = rng->Uniform();
    }
  }
  const Eigen::MatrixXd encoded = rows.leftCols(features);
  return data::DecodeFeatures(schema, layout, encoded, labels, uniforms);
}

absl::StatusOr<data::Table> SampleAutogan(const data::Schema& schema, const AutoganModel& model,
                                          int64_t num_rows, uint64_t seed, bool sample_blocks) {
  PublicRng rng(seed);
  DPC_ASSIGN_OR_RETURN(Eigen::MatrixXd rows, GenerateRows(model, num_rows, &rng));
  return DecodeDpSgdRows(schema, rows, sample_blocks ? &rng : nullptr);
}

}  // namespace dpcurator::train
