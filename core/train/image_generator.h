#ifndef DPCURATOR_CORE_TRAIN_IMAGE_GENERATOR_H_
#define DPCURATOR_CORE_TRAIN_IMAGE_GENERATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/nn/batch_norm.h"
#include "core/nn/conv2d.h"
#include "core/nn/upsample2d.h"
#include "core/util/public_rng.h"
#include "core/util/shard_pool.h"

namespace dpcurator::train {

enum class ImageGeneratorArchitecture {
  // DP-MERF's MNIST generator (dp-merf.md Sec. 3, "MNIST DP-MERF"):
  // [z ; onehot(y)] -> FC 200, BN, ReLU, FC 100, BN, ReLU, FC H*W, sigmoid.
  kFullyConnected,
  // PEARL's ConvCondGen (pearl.md Sec. 4 [code]): [z ; onehot(y)] ->
  // fc(->200), BN, ReLU, fc(200->16*(H/4)*(W/4)), BN, reshape to 16 x H/4 x
  // W/4, bilinear upsample x2, conv5x5(16->8, pad 2), ReLU, upsample x2,
  // conv5x5(8->1, pad 2), sigmoid.
  kConvolutional,
  // The same with twice the channels (32 x H/4 x W/4 trunk, 16 after the
  // first conv): for DP-kernel, whose per-step releases carry more signal
  // about the generator's own samples than one fixed embedding does.
  kConvolutionalWide,
};

// "fc" / "conv" / "conv-wide", for flags and model files; Parse is the
// inverse.
std::string ImageGeneratorArchitectureName(ImageGeneratorArchitecture architecture);
absl::StatusOr<ImageGeneratorArchitecture> ParseImageGeneratorArchitecture(
    const std::string& name);

// Architecture of an ImageGenerator. With the flat parameters and running
// statistics it rebuilds the model exactly (ImageGenerator::FromParameters).
struct ImageGeneratorOptions {
  ImageGeneratorArchitecture architecture = ImageGeneratorArchitecture::kConvolutional;
  // Width of the latent code z ~ N(0, I); 5 in both papers' code.
  int code_dim = 5;
  // Classes of the one-hot label input; at least 1.
  int num_classes = 10;
  // One grey channel of height x width pixels in [0, 1]. The convolutional
  // generator needs both divisible by 4 (two x2 upsamplings).
  int height = 28;
  int width = 28;
  // Seed of the public initialisation (PyTorch's defaults: uniform fan-in
  // for the dense and conv layers, BN gamma 1 and beta 0).
  uint64_t seed = 1;

  absl::Status Validate() const;
};

// Buffers of one Forward/Backward pair: reusing a workspace for batches of
// one size allocates nothing. One per concurrent caller.
class ImageGeneratorWorkspace {
 public:
  // Output of the last Forward, n x (height * width), pixels in [0, 1].
  const Eigen::MatrixXf& images() const { return images_; }

 private:
  friend class ImageGenerator;
  // The convolutional tail of one row chunk (kept for Backward): its input
  // rows copied (so the layers see contiguous memory) and each layer's
  // output. One per chunk, so a batch size reused allocates nothing.
  struct TailChunk {
    Eigen::Index start = 0;
    Eigen::Index rows = 0;
    Eigen::MatrixXf input;
    nn::Upsample2dWorkspaceF up1, up2;
    Eigen::MatrixXf hidden;  // conv1 output after ReLU
    Eigen::MatrixXf output;  // conv2 output before the sigmoid
  };
  // Backward scratch of one shard (reused chunk after chunk).
  struct TailShard {
    Eigen::MatrixXf grad, grad_up2, grad_hidden, grad_up1, grad_input;
    Eigen::VectorXf grad_params;
  };
  bool training_ = true;
  Eigen::MatrixXf input_;  // [z ; onehot(y)], n x (code_dim + classes)
  // Dense trunk, per layer: pre-BN output and post-activation output.
  std::vector<Eigen::MatrixXf> dense_out_;
  std::vector<nn::BatchNormWorkspaceF> bn_;
  std::vector<Eigen::MatrixXf> act_;
  std::vector<Eigen::MatrixXf> grad_;
  Eigen::MatrixXf grad_h_;  // dL/d(pre-BN output) of the layer in hand
  Eigen::MatrixXf images_;
  Eigen::MatrixXf grad_images_;
  std::vector<TailChunk> chunks_;
  std::vector<TailShard> shards_;
};

// A class-conditional image generator in float32 (the trainers are
// post-processing of a released embedding, so float costs no privacy), on
// the layers of core/nn. Like nn::Mlp it keeps all parameters in one flat
// vector (dense layers: W as fan_in x fan_out column-major then b; BN:
// gamma then beta; conv: nn::Conv2dF's layout), in forward order, and the
// BN running statistics (mean then variance per BN layer) in a second
// vector that is stored but not optimised.
//
// Threads: the dense trunk (where BN mixes the batch) runs on the calling
// thread; the convolutional tail is per example, so it runs on the given
// ShardPool in row chunks small enough for the L2 cache. Its two 5 x 5
// convolutions are computed directly (stride 1, "same" padding) rather
// than by nn::Conv2dF's im2col + GEMM: with 8 and 1 output channels the
// im2col matrix is 25x the layer's input and the GEMM degenerates to a
// matrix-vector product, so materialising it cost 10x the arithmetic. The
// parameters keep nn::Conv2dF's layout and initialisation.
class ImageGenerator {
 public:
  static absl::StatusOr<ImageGenerator> Create(const ImageGeneratorOptions& options);
  // Rebuilds a model: sizes must match the architecture, entries finite.
  static absl::StatusOr<ImageGenerator> FromParameters(const ImageGeneratorOptions& options,
                                                       Eigen::VectorXf parameters,
                                                       Eigen::VectorXf running_statistics);

  const ImageGeneratorOptions& options() const { return options_; }
  int code_dim() const { return options_.code_dim; }
  int num_classes() const { return options_.num_classes; }
  int image_size() const { return options_.height * options_.width; }
  Eigen::Index num_parameters() const { return parameters_.size(); }

  Eigen::VectorXf& parameters() { return parameters_; }
  const Eigen::VectorXf& parameters() const { return parameters_; }
  const Eigen::VectorXf& running_statistics() const { return running_; }

  // Images for latent codes `code` (n x code_dim, n >= 2 in training) and
  // `labels` (n values in [0, num_classes), not checked: the hot path).
  // training: BN normalises with the batch's statistics and updates the
  // running ones (PyTorch's train mode); otherwise BN uses the running
  // statistics (eval mode). `pool` may be null (one thread). The result
  // lives in `workspace`.
  const Eigen::MatrixXf& Forward(const Eigen::Ref<const Eigen::MatrixXf>& code,
                                 const Eigen::Ref<const Eigen::VectorXi>& labels, bool training,
                                 ImageGeneratorWorkspace* workspace, ShardPool* pool = nullptr);

  // Backpropagation for the last Forward on `workspace` (same parameters):
  // grad_images is dLoss/dImages (n x image_size()); adds dLoss/dParameters
  // to grad_params (the caller zeroes it).
  void Backward(const Eigen::Ref<const Eigen::MatrixXf>& grad_images,
                ImageGeneratorWorkspace* workspace, Eigen::Ref<Eigen::VectorXf> grad_params,
                ShardPool* pool = nullptr) const;

  // n images in eval mode with codes from `rng` and the given labels.
  Eigen::MatrixXf Sample(const Eigen::VectorXi& labels, PublicRng* rng, ShardPool* pool = nullptr);

 private:
  struct Dense {
    int fan_in = 0;
    int fan_out = 0;
    Eigen::Index offset = 0;  // W then b
  };
  struct Norm {
    nn::BatchNormF layer;
    Eigen::Index offset = 0;
    Eigen::Index running_offset = 0;
  };
  struct Tail {
    nn::Upsample2dF up1, up2;
    nn::Conv2dF conv1, conv2;
    Eigen::Index conv1_offset = 0, conv2_offset = 0;
  };

  ImageGenerator() = default;
  static absl::StatusOr<ImageGenerator> Build(const ImageGeneratorOptions& options);
  void Initialize();
  // Rows per convolutional-tail chunk (at most).
  static constexpr Eigen::Index kTailChunkRows = 32;
  void TailForward(const Eigen::MatrixXf& trunk, ImageGeneratorWorkspace::TailChunk* chunk) const;

  ImageGeneratorOptions options_;
  std::vector<Dense> dense_;  // 3 (fc) or 2 (conv)
  std::vector<Norm> norm_;    // 2: after dense 0 and dense 1
  std::vector<Tail> tail_;    // conv only: 1
  Eigen::Index tail_params_begin_ = 0;
  Eigen::VectorXf parameters_;
  Eigen::VectorXf running_;
};

}  // namespace dpcurator::train

#endif  // DPCURATOR_CORE_TRAIN_IMAGE_GENERATOR_H_
