#include "core/eval/cnn_classifier.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/nn/adam.h"
#include "core/nn/conv2d.h"
#include "core/nn/dropout.h"
#include "core/nn/gemm.h"
#include "core/util/public_rng.h"
#include "core/util/shard_pool.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::eval {
namespace {

// The judge of DP-MERF's and PEARL's evaluation code (issue 14 item 4):
// two stride-2 3x3 convolutions with 32 and 64 maps, padding 1.
constexpr int kConv1Channels = 32;
constexpr int kConv2Channels = 64;
constexpr int kKernel = 3;
constexpr int kStride = 2;
constexpr int kPadding = 1;
// Most threads a caller may ask for; far above the cores we run on.
constexpr int kMaxThreads = 64;
// Rows per forward pass in Predict: bounds the workspaces (the conv2 im2col
// of 1000 28x28 images is 1000 * 49 * 288 floats, 56 MB).
constexpr Eigen::Index kPredictChunk = 1000;

template <typename Scalar>
using MatrixT = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
template <typename Scalar>
using VectorT = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;

// Buffers of one forward/backward pass of Network<Scalar>; reused across
// batches, so training allocates only when the batch size changes (the
// last, partial batch of an epoch). One per shard.
template <typename Scalar>
struct Workspace {
  nn::BasicConv2dWorkspace<Scalar> conv1;
  nn::BasicDropoutWorkspace<Scalar> drop1;
  nn::BasicConv2dWorkspace<Scalar> conv2;
  nn::BasicDropoutWorkspace<Scalar> drop2;
  MatrixT<Scalar> normalized;  // (x - input_mean) / input_std
  MatrixT<Scalar> hidden1;  // relu(dropout(conv1(x)))
  MatrixT<Scalar> hidden2;  // relu(dropout(conv2(hidden1)))
  MatrixT<Scalar> logits;
  MatrixT<Scalar> grad_logits;
  MatrixT<Scalar> grad_hidden2;
  MatrixT<Scalar> grad_conv2;
  MatrixT<Scalar> grad_hidden1;
  MatrixT<Scalar> grad_conv1;
};

// The network with its geometry; parameters live in a caller's flat vector
// (conv1, conv2, linear weights (features x classes, column-major), linear
// biases), as for the core/nn layers.
template <typename Scalar>
class Network {
 public:
  using Matrix = MatrixT<Scalar>;
  using Vector = VectorT<Scalar>;

  static absl::StatusOr<Network> Create(const CnnClassifierOptions& options) {
    nn::Conv2dOptions conv1_options;
    conv1_options.input = {1, options.height, options.width};
    conv1_options.out_channels = kConv1Channels;
    conv1_options.kernel_size = kKernel;
    conv1_options.stride = kStride;
    conv1_options.padding = kPadding;
    DPC_ASSIGN_OR_RETURN(auto conv1, nn::BasicConv2d<Scalar>::Create(conv1_options));
    nn::Conv2dOptions conv2_options = conv1_options;
    conv2_options.input = conv1.output_shape();
    conv2_options.out_channels = kConv2Channels;
    DPC_ASSIGN_OR_RETURN(auto conv2, nn::BasicConv2d<Scalar>::Create(conv2_options));
    // PyTorch's nn.Dropout accepts rate 0 (the identity); so do we.
    DPC_ASSIGN_OR_RETURN(auto dropout, nn::BasicDropout<Scalar>::Create(options.dropout));
    return Network(std::move(conv1), std::move(conv2), std::move(dropout), options.num_classes,
                   static_cast<Scalar>(options.input_mean),
                   static_cast<Scalar>(1.0 / options.input_std));
  }

  Eigen::Index num_parameters() const { return linear_bias_offset() + num_classes_; }

  // PyTorch's defaults (the papers' models start there): the convolutions'
  // own (nn::Conv2d::Initialize), and nn.Linear's U(-1/sqrt(fan_in),
  // 1/sqrt(fan_in)) for the linear weights and biases.
  void Initialize(PublicRng* rng, Eigen::Ref<Vector> parameters) const {
    conv1_.Initialize(rng, parameters.segment(0, conv1_.num_parameters()));
    conv2_.Initialize(rng, parameters.segment(conv1_.num_parameters(), conv2_.num_parameters()));
    const double bound = 1.0 / std::sqrt(static_cast<double>(features()));
    for (Eigen::Index i = linear_offset(); i < num_parameters(); ++i) {
      parameters(i) = static_cast<Scalar>(bound * (2.0 * rng->Uniform() - 1.0));
    }
  }

  // Logits (n x classes) of `input`, with fresh dropout masks from `rng` if
  // `training` (else none: inverted dropout is the identity at inference).
  const Matrix& Forward(const Eigen::Ref<const Vector>& parameters,
                        const Eigen::Ref<const Matrix>& input, bool training, PublicRng* rng,
                        Workspace<Scalar>* ws) const {
    ws->normalized = (input.array() - input_mean_) * input_inv_std_;
    const Matrix& c1 = conv1_.Forward(conv1_params(parameters), ws->normalized, &ws->conv1);
    ws->hidden1 = (training ? dropout_.ForwardTraining(c1, rng, &ws->drop1) : c1)
                      .cwiseMax(Scalar{0});
    const Matrix& c2 = conv2_.Forward(conv2_params(parameters), ws->hidden1, &ws->conv2);
    ws->hidden2 = (training ? dropout_.ForwardTraining(c2, rng, &ws->drop2) : c2)
                      .cwiseMax(Scalar{0});
    ws->logits.resize(input.rows(), num_classes_);
    nn::Gemm(false, ws->hidden2, false, linear_weights(parameters), Scalar{0}, ws->logits);
    ws->logits.rowwise() += linear_bias(parameters).transpose();
    return ws->logits;
  }

  // Training forward and backward on one shard: returns the sum over its
  // rows of the cross-entropy and adds `scale` times its gradient to
  // `gradient` (scale = 1 / batch size makes shard gradients sum to the
  // gradient of the batch mean).
  double LossAndGradient(const Eigen::Ref<const Vector>& parameters,
                         const Eigen::Ref<const Matrix>& input, absl::Span<const int> labels,
                         bool training, Scalar scale, PublicRng* rng, Workspace<Scalar>* ws,
                         Eigen::Ref<Vector> gradient) const {
    const Eigen::Index n = input.rows();
    Forward(parameters, input, training, rng, ws);
    // Softmax cross-entropy, shifted by each row's maximum for stability.
    Matrix& grad_logits = ws->grad_logits;
    grad_logits.resize(n, num_classes_);
    double loss = 0.0;
    for (Eigen::Index i = 0; i < n; ++i) {
      const Scalar max = ws->logits.row(i).maxCoeff();
      grad_logits.row(i) = (ws->logits.row(i).array() - max).exp().matrix();
      const Scalar total = grad_logits.row(i).sum();
      loss += static_cast<double>(std::log(total) + max - ws->logits(i, labels[i]));
      grad_logits.row(i) *= scale / total;
      grad_logits(i, labels[i]) -= scale;
    }
    // Linear layer.
    Eigen::Map<Matrix> grad_weights(gradient.data() + linear_offset(), features(), num_classes_);
    nn::Gemm(true, ws->hidden2, false, grad_logits, Scalar{1}, grad_weights);
    gradient.segment(linear_bias_offset(), num_classes_) += grad_logits.colwise().sum().transpose();
    ws->grad_hidden2.resize(n, features());
    nn::Gemm(false, grad_logits, true, linear_weights(parameters), Scalar{0}, ws->grad_hidden2);
    // relu (its input is the dropout output, zero where hidden2 is zero),
    // then dropout, then conv2.
    ws->grad_hidden2 = (ws->hidden2.array() > Scalar{0}).select(ws->grad_hidden2, Scalar{0});
    const Matrix* grad_c2 = &ws->grad_hidden2;
    if (training) {
      dropout_.Backward(ws->grad_hidden2, ws->drop2, &ws->grad_conv2);
      grad_c2 = &ws->grad_conv2;
    }
    conv2_.Backward(conv2_params(parameters), *grad_c2, &ws->conv2,
                    gradient.segment(conv1_.num_parameters(), conv2_.num_parameters()),
                    &ws->grad_hidden1);
    ws->grad_hidden1 = (ws->hidden1.array() > Scalar{0}).select(ws->grad_hidden1, Scalar{0});
    const Matrix* grad_c1 = &ws->grad_hidden1;
    if (training) {
      dropout_.Backward(ws->grad_hidden1, ws->drop1, &ws->grad_conv1);
      grad_c1 = &ws->grad_conv1;
    }
    conv1_.Backward(conv1_params(parameters), *grad_c1, &ws->conv1,
                    gradient.segment(0, conv1_.num_parameters()));
    return loss;
  }

 private:
  Network(nn::BasicConv2d<Scalar> conv1, nn::BasicConv2d<Scalar> conv2,
          nn::BasicDropout<Scalar> dropout, int num_classes, Scalar input_mean,
          Scalar input_inv_std)
      : conv1_(std::move(conv1)),
        conv2_(std::move(conv2)),
        dropout_(std::move(dropout)),
        num_classes_(num_classes),
        input_mean_(input_mean),
        input_inv_std_(input_inv_std) {}

  Eigen::Index features() const { return conv2_.output_shape().size(); }
  Eigen::Index linear_offset() const {
    return conv1_.num_parameters() + conv2_.num_parameters();
  }
  Eigen::Index linear_bias_offset() const { return linear_offset() + features() * num_classes_; }
  auto conv1_params(const Eigen::Ref<const Vector>& p) const {
    return p.segment(0, conv1_.num_parameters());
  }
  auto conv2_params(const Eigen::Ref<const Vector>& p) const {
    return p.segment(conv1_.num_parameters(), conv2_.num_parameters());
  }
  Eigen::Map<const Matrix> linear_weights(const Eigen::Ref<const Vector>& p) const {
    return Eigen::Map<const Matrix>(p.data() + linear_offset(), features(), num_classes_);
  }
  auto linear_bias(const Eigen::Ref<const Vector>& p) const {
    return p.segment(linear_bias_offset(), num_classes_);
  }

  nn::BasicConv2d<Scalar> conv1_;
  nn::BasicConv2d<Scalar> conv2_;
  nn::BasicDropout<Scalar> dropout_;
  int num_classes_;
  Scalar input_mean_;
  Scalar input_inv_std_;
};

absl::Status ValidateImages(const Eigen::Ref<const Eigen::MatrixXf>& images,
                            const CnnClassifierOptions& options) {
  const Eigen::Index pixels = Eigen::Index{options.height} * options.width;
  if (images.cols() != pixels) {
    return absl::InvalidArgumentError(
        absl::StrCat("Images must have height * width = ", pixels, " columns (", options.height,
                     " x ", options.width, "), got ", images.cols()));
  }
  if (!images.allFinite()) {
    for (Eigen::Index i = 0; i < images.rows(); ++i) {
      if (!images.row(i).allFinite()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Image ", i, " has a non-finite pixel"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateLabels(Eigen::Index rows, absl::Span<const int> labels, int num_classes) {
  if (static_cast<Eigen::Index>(labels.size()) != rows) {
    return absl::InvalidArgumentError(absl::StrCat("Labels must have one value per image: ",
                                                   rows, " images, ", labels.size(),
                                                   " labels"));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat("Label of image ", i, " is ", labels[i],
                                                     ", outside [0, ", num_classes, ")"));
    }
  }
  return absl::OkStatus();
}

// Row range [begin, end) of shard s of n rows split into `shards` parts.
std::pair<Eigen::Index, Eigen::Index> ShardRange(Eigen::Index n, int shards, int s) {
  return {n * s / shards, n * (s + 1) / shards};
}

}  // namespace

absl::Status CnnClassifierOptions::Validate() const {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(height, "Height"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(width, "Width"));
  if (num_classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Num classes must be at least 2, got ", num_classes));
  }
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(epochs, "Epochs"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(batch_size, "Batch size"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(learning_rate, "Learning rate"));
  DPC_RETURN_IF_ERROR(ValidateFiniteNonNegative(weight_decay, "Weight decay"));
  if (!std::isfinite(input_mean)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Input mean must be finite, got ", input_mean));
  }
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(input_std, "Input std"));
  if (!std::isfinite(dropout) || dropout < 0 || dropout >= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Dropout must be in [0, 1), got ", dropout));
  }
  if (threads < 1 || threads > kMaxThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("Threads must be in [1, ", kMaxThreads, "], got ", threads));
  }
  return absl::OkStatus();
}

absl::StatusOr<CnnClassifier> CnnClassifier::Train(
    const Eigen::Ref<const Eigen::MatrixXf>& images, absl::Span<const int> labels,
    const CnnClassifierOptions& options) {
  DPC_RETURN_IF_ERROR(options.Validate());
  if (images.rows() == 0) return absl::InvalidArgumentError("Images must not be empty");
  DPC_RETURN_IF_ERROR(ValidateImages(images, options));
  DPC_RETURN_IF_ERROR(ValidateLabels(images.rows(), labels, options.num_classes));
  DPC_ASSIGN_OR_RETURN(const Network<float> network, Network<float>::Create(options));

  const Eigen::Index n = images.rows();
  const Eigen::Index p = network.num_parameters();
  PublicRng rng(options.seed);
  Eigen::VectorXf parameters(p);
  network.Initialize(&rng, parameters);
  // Adam keeps double moments (nn::Adam); its master copy of the parameters
  // is double too and is rounded to float for each batch's arithmetic.
  Eigen::VectorXd master = parameters.cast<double>();
  nn::AdamOptions adam_options;
  adam_options.learning_rate = options.learning_rate;
  DPC_ASSIGN_OR_RETURN(nn::Adam adam, nn::Adam::Create(p, adam_options));

  const int shards = options.threads;
  ShardPool pool(shards);
  std::vector<PublicRng> shard_rngs;
  shard_rngs.reserve(shards);
  for (int s = 0; s < shards; ++s) shard_rngs.emplace_back(rng.NextU64());
  std::vector<Workspace<float>> workspaces(shards);
  std::vector<Eigen::MatrixXf> shard_inputs(shards);
  std::vector<std::vector<int>> shard_labels(shards);
  Eigen::MatrixXf shard_gradients(p, shards);
  Eigen::VectorXd gradient(p);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});

  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    // Fisher-Yates shuffle each epoch (DataLoader(shuffle=True)); the last
    // batch may be partial (drop_last=False).
    for (Eigen::Index i = n - 1; i > 0; --i) {
      std::swap(order[i], order[rng.UniformInt(static_cast<uint64_t>(i) + 1)]);
    }
    for (Eigen::Index start = 0; start < n; start += options.batch_size) {
      const Eigen::Index batch = std::min<Eigen::Index>(options.batch_size, n - start);
      const float scale = 1.0f / static_cast<float>(batch);
      shard_gradients.setZero();
      pool.Run(shards, [&](int s) {
        const auto [begin, end] = ShardRange(batch, shards, s);
        Eigen::MatrixXf& input = shard_inputs[s];
        input.resize(end - begin, images.cols());
        std::vector<int>& shard_label = shard_labels[s];
        shard_label.resize(end - begin);
        for (Eigen::Index i = begin; i < end; ++i) shard_label[i - begin] = labels[order[start + i]];
        // Gather column by column: both matrices are column-major.
        for (Eigen::Index j = 0; j < images.cols(); ++j) {
          for (Eigen::Index i = begin; i < end; ++i) input(i - begin, j) = images(order[start + i], j);
        }
        if (end > begin) {
          network.LossAndGradient(parameters, input, shard_label, /*training=*/true, scale,
                                  &shard_rngs[s], &workspaces[s], shard_gradients.col(s));
        }
      });
      gradient = shard_gradients.rowwise().sum().cast<double>();
      // PyTorch's Adam(weight_decay): grad += wd * param before the moments.
      gradient += options.weight_decay * master;
      if (!gradient.allFinite()) {
        return absl::InternalError(absl::StrCat("CNN training diverged: non-finite gradient in epoch ",
                                                epoch + 1, " at example ", start));
      }
      DPC_RETURN_IF_ERROR(adam.Step(master, gradient));
      parameters = master.cast<float>();
    }
  }
  return CnnClassifier(options, std::move(parameters));
}

absl::StatusOr<std::vector<int>> CnnClassifier::Predict(
    const Eigen::Ref<const Eigen::MatrixXf>& images) const {
  DPC_RETURN_IF_ERROR(ValidateImages(images, options_));
  DPC_ASSIGN_OR_RETURN(const Network<float> network, Network<float>::Create(options_));
  const Eigen::Index n = images.rows();
  std::vector<int> predictions(n);
  const int shards = options_.threads;
  ShardPool pool(shards);
  std::vector<Workspace<float>> workspaces(shards);
  pool.Run(shards, [&](int s) {
    const auto [begin, end] = ShardRange(n, shards, s);
    for (Eigen::Index start = begin; start < end; start += kPredictChunk) {
      const Eigen::Index rows = std::min(kPredictChunk, end - start);
      const Eigen::MatrixXf& logits = network.Forward(
          parameters_, images.middleRows(start, rows), /*training=*/false, nullptr, &workspaces[s]);
      for (Eigen::Index i = 0; i < rows; ++i) {
        Eigen::Index best = 0;
        logits.row(i).maxCoeff(&best);
        predictions[start + i] = static_cast<int>(best);
      }
    }
  });
  return predictions;
}

absl::StatusOr<double> CnnClassifier::Accuracy(const Eigen::Ref<const Eigen::MatrixXf>& images,
                                               absl::Span<const int> labels) const {
  if (images.rows() == 0) return absl::InvalidArgumentError("Images must not be empty");
  DPC_RETURN_IF_ERROR(ValidateLabels(images.rows(), labels, options_.num_classes));
  DPC_ASSIGN_OR_RETURN(const std::vector<int> predictions, Predict(images));
  int64_t correct = 0;
  for (size_t i = 0; i < predictions.size(); ++i) correct += predictions[i] == labels[i];
  return static_cast<double>(correct) / static_cast<double>(predictions.size());
}

Eigen::MatrixXf ImageMatrix(const data::ImageSet& set) {
  return Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      set.pixels.data(), set.size(), set.pixels_per_image());
}

namespace internal {

absl::StatusOr<Eigen::Index> CnnNumParameters(const CnnClassifierOptions& options) {
  DPC_RETURN_IF_ERROR(options.Validate());
  DPC_ASSIGN_OR_RETURN(const Network<double> network, Network<double>::Create(options));
  return network.num_parameters();
}

template <typename Scalar>
absl::StatusOr<double> CnnLoss(const CnnClassifierOptions& options,
                               const Eigen::Ref<const VectorT<Scalar>>& parameters,
                               const Eigen::Ref<const MatrixT<Scalar>>& images,
                               absl::Span<const int> labels, bool training, uint64_t dropout_seed,
                               VectorT<Scalar>* gradient) {
  DPC_RETURN_IF_ERROR(options.Validate());
  DPC_ASSIGN_OR_RETURN(const Network<Scalar> network, Network<Scalar>::Create(options));
  if (parameters.size() != network.num_parameters()) {
    return absl::InvalidArgumentError(absl::StrCat("Parameters must have ",
                                                   network.num_parameters(), " values, got ",
                                                   parameters.size()));
  }
  if (images.rows() == 0) return absl::InvalidArgumentError("Images must not be empty");
  if (images.cols() != Eigen::Index{options.height} * options.width) {
    return absl::InvalidArgumentError("Images must have height * width columns");
  }
  DPC_RETURN_IF_ERROR(ValidateLabels(images.rows(), labels, options.num_classes));
  PublicRng rng(dropout_seed);
  Workspace<Scalar> ws;
  VectorT<Scalar> local = VectorT<Scalar>::Zero(parameters.size());
  const Scalar scale = Scalar{1} / static_cast<Scalar>(images.rows());
  const double total =
      network.LossAndGradient(parameters, images, labels, training, scale, &rng, &ws, local);
  if (gradient != nullptr) *gradient = std::move(local);
  return total / static_cast<double>(images.rows());
}

template absl::StatusOr<double> CnnLoss<float>(const CnnClassifierOptions&,
                                               const Eigen::Ref<const VectorT<float>>&,
                                               const Eigen::Ref<const MatrixT<float>>&,
                                               absl::Span<const int>, bool, uint64_t,
                                               VectorT<float>*);
template absl::StatusOr<double> CnnLoss<double>(const CnnClassifierOptions&,
                                                const Eigen::Ref<const VectorT<double>>&,
                                                const Eigen::Ref<const MatrixT<double>>&,
                                                absl::Span<const int>, bool, uint64_t,
                                                VectorT<double>*);

}  // namespace internal

}  // namespace dpcurator::eval
