#include "core/train/image_trainer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/nn/adam.h"
#include "core/privacy/relation.h"
#include "core/train/embedding_trainer.h"
#include "core/train/float_features.h"
#include "core/train/normal_draws.h"
#include "core/train/pearl_trainer.h"
#include "core/util/public_rng.h"
#include "core/util/shard_pool.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::train {
namespace {

// Mixed into the public seed for the generator's input noise, so that it
// differs from the initialisation stream.
constexpr uint64_t kImageNoiseSalt = 0x1F123BB5ULL;
// Fewest rows worth a feature shard of their own.
constexpr Eigen::Index kMinShardRows = 32;

// What every image trainer's step does with a loss of the class means:
// the generator in training mode, the feature map on row shards, the class
// means in double, and the backward pass through both.
class ImageFit {
 public:
  static absl::StatusOr<ImageFit> Create(const data::FeatureLayout& layout,
                                         const embed::FeatureMap& feature_map, int num_classes,
                                         const ImageTrainerOptions& options) {
    DPC_RETURN_IF_ERROR(options.Validate());
    ImageGeneratorOptions generator_options = options.generator;
    generator_options.seed = options.seed;
    generator_options.num_classes = num_classes;
    if (layout.total_dim() != generator_options.height * generator_options.width ||
        feature_map.input_dim() != layout.total_dim()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the release's rows have ", feature_map.input_dim(), " encoded dimensions but the ",
          generator_options.height, " x ", generator_options.width,
          " image generator makes ", generator_options.height * generator_options.width,
          " pixels; check the schema's image shape"));
    }
    DPC_ASSIGN_OR_RETURN(ImageGenerator generator, ImageGenerator::Create(generator_options));
    DPC_ASSIGN_OR_RETURN(FloatFeatureMap features, FloatFeatureMap::Create(feature_map, layout));
    nn::AdamOptions adam_options;
    adam_options.learning_rate = options.learning_rate;
    DPC_ASSIGN_OR_RETURN(nn::Adam adam, nn::Adam::Create(generator.num_parameters(), adam_options));
    return ImageFit(std::move(generator), std::move(features), std::move(adam), num_classes,
                    options);
  }

  ImageGenerator& generator() { return generator_; }
  const Eigen::MatrixXd& class_means() const { return class_means_; }

  // A fresh batch's class means (training: BN on batch statistics, as in
  // a generator step; otherwise eval mode, no running-statistics update).
  const Eigen::MatrixXd& Draw(bool training) {
    FillStandardNormal(&rng_, code_);
    const Eigen::MatrixXf& images = generator_.Forward(code_, labels_, training, &ws_, pool_.get());
    pool_->Run(shards_, [&](int s) {
      Shard& sh = shard_[s];
      const auto shard_labels = labels_.segment(sh.start, sh.rows);
      features_.Features(images.middleRows(sh.start, sh.rows), &sh.features, &sh.scratch);
      sh.class_sums.setZero(features_.output_dim(), num_classes_);
      ForEachClassRun(shard_labels, [&](int c, Eigen::Index start, Eigen::Index count) {
        sh.class_sums.col(c) += sh.features.middleRows(start, count).colwise().sum().transpose();
      });
    });
    class_means_.setZero();
    for (const Shard& sh : shard_) class_means_ += sh.class_sums.cast<double>();
    class_means_.array().rowwise() /= counts_.transpose().array();
    return class_means_;
  }

  // One Adam step of the generator on `loss` (a function of the class
  // means, with dL/dm_c per class). Returns the loss.
  absl::StatusOr<double> Step(int step, const ClassMeanLoss& loss) {
    double lr = options_.learning_rate;
    if (options_.lr_decay_steps > 0) {
      lr *= std::pow(options_.lr_decay, (step - 1) / options_.lr_decay_steps);
    }
    DPC_RETURN_IF_ERROR(adam_.SetLearningRate(lr));
    Draw(/*training=*/true);
    const double value = loss(class_means_, &grad_means_);
    // dL/dh_i = dL/dm_c / n_c for every row i of class c.
    grad_by_class_ = (grad_means_.array().rowwise() / counts_.transpose().array()).cast<float>();
    grad_images_.resize(labels_.size(), generator_.image_size());
    pool_->Run(shards_, [&](int s) {
      Shard& sh = shard_[s];
      features_.BackwardFromFeatures(sh.features, grad_by_class_,
                                     labels_.segment(sh.start, sh.rows), &sh.grad_encoded,
                                     &sh.scratch);
      grad_images_.middleRows(sh.start, sh.rows) = sh.grad_encoded;
    });
    grad_float_.setZero(generator_.num_parameters());
    generator_.Backward(grad_images_, &ws_, grad_float_, pool_.get());
    grad_ = grad_float_.cast<double>();
    if (!grad_.allFinite() || !std::isfinite(value)) {
      return absl::InternalError(absl::StrCat("image training diverged at step ", step,
                                              " (non-finite gradient); lower the learning rate"));
    }
    DPC_RETURN_IF_ERROR(adam_.Step(master_, grad_));
    generator_.parameters() = master_.cast<float>();
    if (options_.progress &&
        (step % std::max(1, options_.progress_every) == 0 || step == options_.steps)) {
      options_.progress(step, value);
    }
    return value;
  }

 private:
  struct Shard {
    Eigen::Index start = 0;
    Eigen::Index rows = 0;
    Eigen::MatrixXf features, scratch, class_sums, grad_encoded;
  };

  ImageFit(ImageGenerator generator, FloatFeatureMap features, nn::Adam adam, int num_classes,
           const ImageTrainerOptions& options)
      : options_(options),
        generator_(std::move(generator)),
        features_(std::move(features)),
        adam_(std::move(adam)),
        num_classes_(num_classes),
        pool_(std::make_unique<ShardPool>(options.threads)),
        rng_(options.seed ^ kImageNoiseSalt) {
    master_ = generator_.parameters().cast<double>();
    labels_ = StratifiedLabels(Eigen::VectorXd::Constant(num_classes, 1.0 / num_classes),
                               options.batch_size);
    const Eigen::Index n = labels_.size();
    counts_ = Eigen::VectorXd::Zero(num_classes);
    for (Eigen::Index i = 0; i < n; ++i) counts_(labels_(i)) += 1.0;
    shards_ = static_cast<int>(std::clamp<Eigen::Index>(n / kMinShardRows, 1, pool_->threads()));
    shard_.resize(shards_);
    for (int s = 0; s < shards_; ++s) {
      shard_[s].start = n * s / shards_;
      shard_[s].rows = n * (s + 1) / shards_ - shard_[s].start;
    }
    code_.resize(n, generator_.code_dim());
    class_means_.resize(features_.output_dim(), num_classes);
  }

  ImageTrainerOptions options_;
  ImageGenerator generator_;
  FloatFeatureMap features_;
  nn::Adam adam_;
  int num_classes_;
  std::unique_ptr<ShardPool> pool_;  // movable ImageFit
  PublicRng rng_;
  Eigen::VectorXd master_, grad_, counts_;
  Eigen::VectorXf grad_float_;
  Eigen::VectorXi labels_;
  int shards_ = 1;
  std::vector<Shard> shard_;
  ImageGeneratorWorkspace ws_;
  Eigen::MatrixXf code_, grad_by_class_, grad_images_;
  Eigen::MatrixXd class_means_, grad_means_;
};

absl::Status CheckTarget(const embed::FeatureMap& map, const embed::EmbeddingTarget& target) {
  if (target.class_means.rows() != map.output_dim() || target.class_means.cols() < 1) {
    return absl::InvalidArgumentError(
        "the release does not match its feature map (dimensions differ); fetch the artefact "
        "again");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ImageTrainerOptions::Validate() const {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(steps, "Steps"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(batch_size, "Batch size"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(learning_rate, "Learning rate"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(lr_decay, "Learning-rate decay"));
  if (lr_decay_steps < 0) {
    return absl::InvalidArgumentError("lr_decay_steps must be >= 0 (0: no decay)");
  }
  return generator.Validate();
}

absl::StatusOr<TrainedImageGenerator> TrainImageMerf(const data::FeatureLayout& layout,
                                                     const embed::FeatureMap& feature_map,
                                                     const embed::EmbeddingTarget& target,
                                                     const ImageTrainerOptions& options) {
  DPC_RETURN_IF_ERROR(CheckTarget(feature_map, target));
  DPC_ASSIGN_OR_RETURN(ImageFit fit,
                       ImageFit::Create(layout, feature_map,
                                        static_cast<int>(target.class_means.cols()), options));
  const ClassMeanLoss loss = [&](const Eigen::MatrixXd& means, Eigen::MatrixXd* grad) {
    return EmbeddingMeanLoss(target.class_means, means, grad);
  };
  double last = 0.0;
  for (int step = 1; step <= options.steps; ++step) {
    DPC_ASSIGN_OR_RETURN(last, fit.Step(step, loss));
  }
  return TrainedImageGenerator{std::move(fit.generator()), last, options.steps};
}

absl::StatusOr<TrainedImageGenerator> TrainImageMerfPerStep(const data::FeatureLayout& layout,
                                                            const embed::FeatureMap& feature_map,
                                                            const StepTarget& step_target,
                                                            const ImageTrainerOptions& options) {
  DPC_ASSIGN_OR_RETURN(embed::EmbeddingTarget target, step_target(1));
  DPC_RETURN_IF_ERROR(CheckTarget(feature_map, target));
  const Eigen::Index classes = target.class_means.cols();
  DPC_ASSIGN_OR_RETURN(ImageFit fit, ImageFit::Create(layout, feature_map,
                                                      static_cast<int>(classes), options));
  const ClassMeanLoss loss = [&](const Eigen::MatrixXd& means, Eigen::MatrixXd* grad) {
    return EmbeddingMeanLoss(target.class_means, means, grad);
  };
  double last = 0.0;
  for (int step = 1; step <= options.steps; ++step) {
    if (step > 1) {
      DPC_ASSIGN_OR_RETURN(target, step_target(step));
      if (target.class_means.rows() != feature_map.output_dim() ||
          target.class_means.cols() != classes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "step ", step, "'s release does not match the first step's feature map or classes"));
      }
    }
    DPC_ASSIGN_OR_RETURN(last, fit.Step(step, loss));
  }
  return TrainedImageGenerator{std::move(fit.generator()), last, options.steps};
}

absl::StatusOr<TrainedImageGenerator> TrainImagePearl(
    const data::FeatureLayout& layout, const embed::CharacteristicFunctionMap& feature_map,
    const embed::EmbeddingTarget& target, const ImagePearlOptions& options) {
  DPC_RETURN_IF_ERROR(CheckTarget(feature_map, target));
  DPC_RETURN_IF_ERROR(
      ValidateFinitePositive(options.critic_learning_rate, "Critic learning rate"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.generator_steps_per_critic_step,
                                          "Generator steps per critic step"));
  DPC_ASSIGN_OR_RETURN(ImageFit fit,
                       ImageFit::Create(layout, feature_map,
                                        static_cast<int>(target.class_means.cols()), options));
  DPC_ASSIGN_OR_RETURN(PearlCritic critic, PearlCritic::Create(feature_map.frequencies(),
                                                               feature_map.length_scale()));
  nn::AdamOptions critic_adam_options;
  critic_adam_options.learning_rate = options.critic_learning_rate;
  critic_adam_options.maximize = true;  // sup over omega (Eq. 1)
  DPC_ASSIGN_OR_RETURN(nn::Adam critic_adam,
                       nn::Adam::Create(critic.precisions().size(), critic_adam_options));
  Eigen::VectorXd per_frequency_loss;
  const ClassMeanLoss loss = [&](const Eigen::MatrixXd& means, Eigen::MatrixXd* grad) {
    return PearlMeanLoss(target.class_means, means, critic.weights(), &per_frequency_loss, grad);
  };
  double last = 0.0;
  for (int step = 1; step <= options.steps; ++step) {
    DPC_ASSIGN_OR_RETURN(last, fit.Step(step, loss));
    if (!options.use_critic || step % options.generator_steps_per_critic_step != 0) continue;
    // Critic ascent on a fresh batch, generator in BN eval mode (pearl.md
    // 1.2 H [code]).
    DPC_RETURN_IF_ERROR(critic.AscentStep(target.class_means, fit.Draw(/*training=*/false), step,
                                          &critic_adam));
  }
  return TrainedImageGenerator{std::move(fit.generator()), last, options.steps};
}

absl::StatusOr<embed::EmbeddingTarget> ReleasePoissonBatchTarget(
    const release::EncodedRows& rows, const release::RffEmbeddingKind::Params& resolved,
    double sampling_rate, double noise_multiplier, privacy::NoiseSource* noise) {
  if (!(sampling_rate > 0.0 && sampling_rate <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling rate must be in (0, 1], got ", sampling_rate));
  }
  // Poisson sampling (Mironov, Talwar, Zhang 2019): each row independently
  // with probability q, from the mechanism's randomness; the batch size
  // stays private (ADD_REMOVE: noisy sums and counts).
  std::vector<int64_t> chosen;
  chosen.reserve(static_cast<size_t>(1.2 * sampling_rate * static_cast<double>(rows.num_rows())) +
                 16);
  for (int64_t i = 0; i < rows.num_rows(); ++i) {
    if (noise->UniformOpen() < sampling_rate) chosen.push_back(i);
  }
  const release::EncodedRows batch = release::SelectRows(rows, chosen);
  DPC_ASSIGN_OR_RETURN(
      release::RffEmbeddingKind::Result result,
      release::RffEmbeddingKind::Run(resolved, batch, privacy::NeighbouringRelation::kAddRemove,
                                     noise_multiplier, /*public_n=*/0, noise));
  return embed::ToEmbeddingTarget(result.embedding);
}

}  // namespace dpcurator::train
