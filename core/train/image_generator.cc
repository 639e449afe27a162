#include "core/train/image_generator.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/nn/gemm.h"
#include "core/train/normal_draws.h"
#include "core/util/sigmoid.h"
#include "core/util/status_macros.h"

namespace dpcurator::train {
namespace {

// ConvCondGen's widths (pearl.md Sec. 4 [code]): hidden 200, then 16
// channels at a quarter of the image side, 8 channels after the first conv.
constexpr int kFirstHidden = 200;
constexpr int kFullyConnectedSecondHidden = 100;  // DP-MERF's FC generator
constexpr int kTrunkChannels = 16;
constexpr int kConvChannels = 8;
constexpr int kKernel = 5;

using MapMatrix = Eigen::Map<Eigen::MatrixXf>;
using ConstMapMatrix = Eigen::Map<const Eigen::MatrixXf>;

// y += a x over m floats, and x . y: the inner loops of the direct
// convolutions, compiled for AVX-512 and AVX2 + FMA next to the baseline
// (the project builds for baseline x86-64; the loader picks the clone).
__attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default"))) void Axpy(
    float a, const float* __restrict x, float* __restrict y, Eigen::Index m) {
  for (Eigen::Index i = 0; i < m; ++i) y[i] += a * x[i];
}

__attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default"))) float Dot(
    const float* __restrict x, const float* __restrict y, Eigen::Index m) {
  // 16 independent partial sums: vectorisable without reassociating one sum.
  float acc[16] = {};
  Eigen::Index i = 0;
  for (; i + 16 <= m; i += 16) {
    for (int j = 0; j < 16; ++j) acc[j] += x[i + j] * y[i + j];
  }
  float sum = 0.0f;
  for (; i < m; ++i) sum += x[i] * y[i];
  for (int j = 0; j < 16; ++j) sum += acc[j];
  return sum;
}

// A stride-1 convolution with "same" padding p = (k - 1) / 2 on a chunk of
// n images (conv2d.h layout: the n values of one (channel, pixel) are
// contiguous, and so are the pixels of one image row). For output row gy,
// input row iy = gy + ky - p and kernel column kx, the valid output
// columns gx form one contiguous span of both output and input, so each
// weight contributes one axpy of up to W * n floats. Weights: nn::Conv2dF's
// layout, W[(c k + ky) k + kx, co] column-major, then the biases.
struct DirectConv {
  int in_channels = 0;
  int out_channels = 0;
  int height = 0;
  int width = 0;
  int kernel = 0;

  template <typename Visit>
  void ForEachTap(int gy, Visit visit) const {
    const int p = kernel / 2;
    for (int c = 0; c < in_channels; ++c) {
      for (int ky = 0; ky < kernel; ++ky) {
        const int iy = gy + ky - p;
        if (iy < 0 || iy >= height) continue;
        for (int kx = 0; kx < kernel; ++kx) {
          const int lo = std::max(0, p - kx);
          const int hi = std::min(width, width + p - kx);
          if (lo >= hi) continue;
          visit((c * kernel + ky) * kernel + kx, c, iy, lo, hi, lo + kx - p);
        }
      }
    }
  }

  Eigen::Index plane() const { return Eigen::Index{height} * width; }

  void Forward(const float* params, const float* in, Eigen::Index n, float* out) const {
    const Eigen::Index patch = Eigen::Index{in_channels} * kernel * kernel;
    const float* bias = params + patch * out_channels;
    for (int co = 0; co < out_channels; ++co) {
      for (int gy = 0; gy < height; ++gy) {
        float* row = out + (co * plane() + Eigen::Index{gy} * width) * n;
        std::fill(row, row + Eigen::Index{width} * n, bias[co]);
        ForEachTap(gy, [&](Eigen::Index tap, int c, int iy, int lo, int hi, int ix) {
          Axpy(params[co * patch + tap], in + (c * plane() + Eigen::Index{iy} * width + ix) * n,
               row + Eigen::Index{lo} * n, Eigen::Index{hi - lo} * n);
        });
      }
    }
  }

  // Adds dL/dparams to grad_params; sets grad_in (n x C_in H W, zeroed here).
  void Backward(const float* params, const float* in, const float* grad_out, Eigen::Index n,
                float* grad_params, float* grad_in) const {
    const Eigen::Index patch = Eigen::Index{in_channels} * kernel * kernel;
    float* grad_bias = grad_params + patch * out_channels;
    std::fill(grad_in, grad_in + in_channels * plane() * n, 0.0f);
    for (int co = 0; co < out_channels; ++co) {
      for (int gy = 0; gy < height; ++gy) {
        const float* g = grad_out + (co * plane() + Eigen::Index{gy} * width) * n;
        for (Eigen::Index i = 0; i < Eigen::Index{width} * n; ++i) grad_bias[co] += g[i];
        ForEachTap(gy, [&](Eigen::Index tap, int c, int iy, int lo, int hi, int ix) {
          const Eigen::Index offset = (c * plane() + Eigen::Index{iy} * width + ix) * n;
          const Eigen::Index m = Eigen::Index{hi - lo} * n;
          grad_params[co * patch + tap] += Dot(in + offset, g + Eigen::Index{lo} * n, m);
          Axpy(params[co * patch + tap], g + Eigen::Index{lo} * n, grad_in + offset, m);
        });
      }
    }
  }
};

DirectConv DirectConvOf(const nn::Conv2dF& conv) {
  const nn::Conv2dOptions& o = conv.options();
  return DirectConv{o.input.channels, o.out_channels, o.input.height, o.input.width,
                    o.kernel_size};
}

}  // namespace

std::string ImageGeneratorArchitectureName(ImageGeneratorArchitecture architecture) {
  switch (architecture) {
    case ImageGeneratorArchitecture::kFullyConnected:
      return "fc";
    case ImageGeneratorArchitecture::kConvolutional:
      return "conv";
    case ImageGeneratorArchitecture::kConvolutionalWide:
      return "conv-wide";
  }
  return "conv";
}

absl::StatusOr<ImageGeneratorArchitecture> ParseImageGeneratorArchitecture(
    const std::string& name) {
  if (name == "fc") return ImageGeneratorArchitecture::kFullyConnected;
  if (name == "conv") return ImageGeneratorArchitecture::kConvolutional;
  if (name == "conv-wide") return ImageGeneratorArchitecture::kConvolutionalWide;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown image generator '", name, "'; expected fc, conv or conv-wide"));
}

absl::Status ImageGeneratorOptions::Validate() const {
  if (code_dim < 1) return absl::InvalidArgumentError("image generator code_dim must be >= 1");
  if (num_classes < 1) {
    return absl::InvalidArgumentError("image generator num_classes must be >= 1");
  }
  if (height < 1 || width < 1) {
    return absl::InvalidArgumentError("image generator height and width must be positive");
  }
  if (architecture != ImageGeneratorArchitecture::kFullyConnected &&
      (height % 4 != 0 || width % 4 != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the convolutional image generator upsamples twice by 2: height and width must be "
        "multiples of 4, got ",
        height, " x ", width, "; use the fc generator"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ImageGenerator> ImageGenerator::Build(const ImageGeneratorOptions& options) {
  DPC_RETURN_IF_ERROR(options.Validate());
  ImageGenerator g;
  g.options_ = options;
  const bool conv = options.architecture != ImageGeneratorArchitecture::kFullyConnected;
  const int widen = options.architecture == ImageGeneratorArchitecture::kConvolutionalWide ? 2 : 1;
  const int trunk_channels = widen * kTrunkChannels;
  const int pixels = options.height * options.width;
  const int trunk_out = conv ? trunk_channels * (options.height / 4) * (options.width / 4)
                             : kFullyConnectedSecondHidden;
  std::vector<int> widths = {options.code_dim + options.num_classes, kFirstHidden, trunk_out};
  if (!conv) widths.push_back(pixels);
  Eigen::Index offset = 0, running = 0;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    g.dense_.push_back({widths[l], widths[l + 1], offset});
    offset += Eigen::Index{widths[l]} * widths[l + 1] + widths[l + 1];
    if (l < 2) {
      nn::BatchNormOptions bn;
      bn.channels = widths[l + 1];
      DPC_ASSIGN_OR_RETURN(nn::BatchNormF layer, nn::BatchNormF::Create(bn));
      g.norm_.push_back({layer, offset, running});
      offset += layer.num_parameters();
      running += layer.num_running_statistics();
    }
  }
  g.tail_params_begin_ = offset;
  if (conv) {
    const nn::ImageShape trunk{trunk_channels, options.height / 4, options.width / 4};
    DPC_ASSIGN_OR_RETURN(
        nn::Upsample2dF up1,
        nn::Upsample2dF::Create({trunk, 2, nn::UpsampleMode::kBilinear}));
    nn::Conv2dOptions c1;
    c1.input = up1.output_shape();
    c1.out_channels = widen * kConvChannels;
    c1.kernel_size = kKernel;
    c1.padding = kKernel / 2;
    DPC_ASSIGN_OR_RETURN(nn::Conv2dF conv1, nn::Conv2dF::Create(c1));
    DPC_ASSIGN_OR_RETURN(
        nn::Upsample2dF up2,
        nn::Upsample2dF::Create({conv1.output_shape(), 2, nn::UpsampleMode::kBilinear}));
    nn::Conv2dOptions c2 = c1;
    c2.input = up2.output_shape();
    c2.out_channels = 1;
    DPC_ASSIGN_OR_RETURN(nn::Conv2dF conv2, nn::Conv2dF::Create(c2));
    const Eigen::Index conv1_offset = offset;
    offset += conv1.num_parameters();
    const Eigen::Index conv2_offset = offset;
    offset += conv2.num_parameters();
    g.tail_.push_back({up1, up2, conv1, conv2, conv1_offset, conv2_offset});
  }
  g.parameters_.setZero(offset);
  g.running_.setZero(running);
  return g;
}

void ImageGenerator::Initialize() {
  PublicRng rng(options_.seed);
  // PyTorch's nn.Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
  // weights and biases, as the papers' generators start.
  for (const Dense& d : dense_) {
    nn::internal::InitializeUniformFanIn<float>(
        &rng, d.fan_in,
        parameters_.segment(d.offset, Eigen::Index{d.fan_in} * d.fan_out + d.fan_out));
  }
  for (const Norm& n : norm_) {
    n.layer.Initialize(parameters_.segment(n.offset, n.layer.num_parameters()));
    n.layer.InitializeRunningStatistics(
        running_.segment(n.running_offset, n.layer.num_running_statistics()));
  }
  for (const Tail& t : tail_) {
    t.conv1.Initialize(&rng, parameters_.segment(t.conv1_offset, t.conv1.num_parameters()));
    t.conv2.Initialize(&rng, parameters_.segment(t.conv2_offset, t.conv2.num_parameters()));
  }
}

absl::StatusOr<ImageGenerator> ImageGenerator::Create(const ImageGeneratorOptions& options) {
  DPC_ASSIGN_OR_RETURN(ImageGenerator g, Build(options));
  g.Initialize();
  return g;
}

absl::StatusOr<ImageGenerator> ImageGenerator::FromParameters(const ImageGeneratorOptions& options,
                                                              Eigen::VectorXf parameters,
                                                              Eigen::VectorXf running_statistics) {
  DPC_ASSIGN_OR_RETURN(ImageGenerator g, Build(options));
  if (parameters.size() != g.parameters_.size() ||
      running_statistics.size() != g.running_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image generator model has ", parameters.size(), " parameters and ",
        running_statistics.size(), " running statistics; the ",
        ImageGeneratorArchitectureName(options.architecture), " architecture needs ",
        g.parameters_.size(), " and ", g.running_.size(), "; check the model file"));
  }
  if (!parameters.allFinite() || !running_statistics.allFinite()) {
    return absl::InvalidArgumentError("image generator model has a non-finite parameter");
  }
  g.parameters_ = std::move(parameters);
  g.running_ = std::move(running_statistics);
  return g;
}

void ImageGenerator::TailForward(const Eigen::MatrixXf& trunk,
                                 ImageGeneratorWorkspace::TailChunk* chunk) const {
  const Tail& t = tail_[0];
  const Eigen::Index n = chunk->rows;
  chunk->input = trunk.middleRows(chunk->start, n);
  const Eigen::MatrixXf& up1 = t.up1.Forward(chunk->input, &chunk->up1);
  chunk->hidden.resize(n, t.conv1.output_shape().size());
  DirectConvOf(t.conv1).Forward(parameters_.data() + t.conv1_offset, up1.data(), n,
                                chunk->hidden.data());
  chunk->hidden = chunk->hidden.cwiseMax(0.0f);
  const Eigen::MatrixXf& up2 = t.up2.Forward(chunk->hidden, &chunk->up2);
  chunk->output.resize(n, t.conv2.output_shape().size());
  DirectConvOf(t.conv2).Forward(parameters_.data() + t.conv2_offset, up2.data(), n,
                                chunk->output.data());
}

namespace {

void RunShards(ShardPool* pool, int shards, const std::function<void(int)>& fn) {
  if (pool == nullptr || shards == 1) {
    for (int s = 0; s < shards; ++s) fn(s);
  } else {
    pool->Run(shards, fn);
  }
}

}  // namespace

const Eigen::MatrixXf& ImageGenerator::Forward(const Eigen::Ref<const Eigen::MatrixXf>& code,
                                               const Eigen::Ref<const Eigen::VectorXi>& labels,
                                               bool training, ImageGeneratorWorkspace* ws,
                                               ShardPool* pool) {
  const Eigen::Index n = code.rows();
  const int k = options_.code_dim;
  ws->training_ = training;
  ws->input_.resize(n, k + options_.num_classes);
  ws->input_.leftCols(k) = code;
  ws->input_.rightCols(options_.num_classes).setZero();
  for (Eigen::Index i = 0; i < n; ++i) ws->input_(i, k + labels(i)) = 1.0f;

  const size_t layers = dense_.size();
  ws->dense_out_.resize(layers);
  ws->act_.resize(layers);
  ws->bn_.resize(norm_.size());
  const Eigen::MatrixXf* x = &ws->input_;
  const bool conv = !tail_.empty();
  for (size_t l = 0; l < layers; ++l) {
    const Dense& d = dense_[l];
    const ConstMapMatrix w(parameters_.data() + d.offset, d.fan_in, d.fan_out);
    const auto b = parameters_.segment(d.offset + Eigen::Index{d.fan_in} * d.fan_out, d.fan_out);
    Eigen::MatrixXf& h = ws->dense_out_[l];
    h.resize(n, d.fan_out);
    nn::Gemm(false, *x, false, w, 0.0f, h);
    h.rowwise() += b.transpose();
    Eigen::MatrixXf& a = ws->act_[l];
    if (l < norm_.size()) {
      const Norm& nm = norm_[l];
      const auto gamma_beta = parameters_.segment(nm.offset, nm.layer.num_parameters());
      const Eigen::MatrixXf& y =
          training ? nm.layer.ForwardTraining(
                         gamma_beta, h,
                         running_.segment(nm.running_offset, nm.layer.num_running_statistics()),
                         &ws->bn_[l])
                   : nm.layer.ForwardInference(
                         gamma_beta, h,
                         running_.segment(nm.running_offset, nm.layer.num_running_statistics()),
                         &ws->bn_[l]);
      // ConvCondGen has no ReLU between its second BN and the reshape.
      if (conv && l == 1) {
        a = y;
      } else {
        a = y.cwiseMax(0.0f);
      }
    } else {
      a = h.unaryExpr([](float v) { return Sigmoid(v); });
    }
    x = &a;
  }
  ws->images_.resize(n, image_size());
  if (!conv) {
    ws->images_ = ws->act_.back();
    return ws->images_;
  }
  // Chunks of at most kTailChunkRows rows, nearly equal, the same for every
  // batch of this size; shard s takes a contiguous range of chunks.
  const Eigen::Index num_chunks = (n + kTailChunkRows - 1) / kTailChunkRows;
  if (static_cast<Eigen::Index>(ws->chunks_.size()) != num_chunks ||
      (num_chunks > 0 && ws->chunks_.back().start + ws->chunks_.back().rows != n)) {
    ws->chunks_.assign(num_chunks, {});
    for (Eigen::Index j = 0; j < num_chunks; ++j) {
      ws->chunks_[j].start = n * j / num_chunks;
      ws->chunks_[j].rows = n * (j + 1) / num_chunks - ws->chunks_[j].start;
    }
  }
  const int shards = static_cast<int>(std::min<Eigen::Index>(
      pool == nullptr ? 1 : pool->threads(), std::max<Eigen::Index>(1, num_chunks)));
  ws->shards_.resize(shards);
  const Eigen::MatrixXf& trunk = ws->act_.back();
  RunShards(pool, shards, [&](int s) {
    for (Eigen::Index j = num_chunks * s / shards; j < num_chunks * (s + 1) / shards; ++j) {
      ImageGeneratorWorkspace::TailChunk& chunk = ws->chunks_[j];
      TailForward(trunk, &chunk);
      ws->images_.middleRows(chunk.start, chunk.rows) =
          chunk.output.unaryExpr([](float v) { return Sigmoid(v); });
    }
  });
  return ws->images_;
}

void ImageGenerator::Backward(const Eigen::Ref<const Eigen::MatrixXf>& grad_images,
                              ImageGeneratorWorkspace* ws, Eigen::Ref<Eigen::VectorXf> grad_params,
                              ShardPool* pool) const {
  const Eigen::Index n = grad_images.rows();
  const bool conv = !tail_.empty();
  const size_t layers = dense_.size();
  ws->grad_.resize(layers);
  // grad_[l]: dL/d(act_[l]) on entry to layer l's backward.
  if (conv) {
    const Tail& t = tail_[0];
    const int shards = static_cast<int>(ws->shards_.size());
    const Eigen::Index num_chunks = static_cast<Eigen::Index>(ws->chunks_.size());
    Eigen::MatrixXf& grad_trunk = ws->grad_[layers - 1];
    grad_trunk.resize(n, ws->act_.back().cols());
    const Eigen::Index tail_params = parameters_.size() - tail_params_begin_;
    const Eigen::Index c1_rel = t.conv1_offset - tail_params_begin_;
    const Eigen::Index c2_rel = t.conv2_offset - tail_params_begin_;
    const DirectConv conv1 = DirectConvOf(t.conv1), conv2 = DirectConvOf(t.conv2);
    RunShards(pool, shards, [&](int s) {
      ImageGeneratorWorkspace::TailShard& sh = ws->shards_[s];
      sh.grad_params.setZero(tail_params);
      for (Eigen::Index j = num_chunks * s / shards; j < num_chunks * (s + 1) / shards; ++j) {
        const ImageGeneratorWorkspace::TailChunk& chunk = ws->chunks_[j];
        const Eigen::Index rows = chunk.rows;
        // d sigmoid = s (1 - s).
        const auto s_out = ws->images_.middleRows(chunk.start, rows).array();
        sh.grad = (grad_images.middleRows(chunk.start, rows).array() * s_out * (1.0f - s_out))
                      .matrix();
        sh.grad_up2.resize(rows, t.up2.output_shape().size());
        conv2.Backward(parameters_.data() + t.conv2_offset, chunk.up2.output().data(),
                       sh.grad.data(), rows, sh.grad_params.data() + c2_rel, sh.grad_up2.data());
        t.up2.Backward(sh.grad_up2, &sh.grad_hidden);
        // ReLU after conv1.
        sh.grad_hidden = (chunk.hidden.array() > 0.0f).select(sh.grad_hidden, 0.0f);
        sh.grad_up1.resize(rows, t.up1.output_shape().size());
        conv1.Backward(parameters_.data() + t.conv1_offset, chunk.up1.output().data(),
                       sh.grad_hidden.data(), rows, sh.grad_params.data() + c1_rel,
                       sh.grad_up1.data());
        t.up1.Backward(sh.grad_up1, &sh.grad_input);
        grad_trunk.middleRows(chunk.start, rows) = sh.grad_input;
      }
    });
    for (const auto& sh : ws->shards_) {
      grad_params.segment(tail_params_begin_, tail_params) += sh.grad_params;
    }
  } else {
    // Sigmoid output of the last dense layer.
    const auto s_out = ws->images_.array();
    ws->grad_[layers - 1] = (grad_images.array() * s_out * (1.0f - s_out)).matrix();
  }
  Eigen::MatrixXf& grad_h = ws->grad_h_;
  for (size_t li = layers; li-- > 0;) {
    const Dense& d = dense_[li];
    // dL/dh (pre-BN output of the dense layer).
    if (li < norm_.size()) {
      const Norm& nm = norm_[li];
      Eigen::MatrixXf& g = ws->grad_[li];
      if (!(conv && li == 1)) {
        g = (ws->act_[li].array() > 0.0f).select(g, 0.0f);
      }
      nm.layer.Backward(parameters_.segment(nm.offset, nm.layer.num_parameters()), g, &ws->bn_[li],
                        grad_params.segment(nm.offset, nm.layer.num_parameters()), &grad_h);
    } else {
      grad_h = ws->grad_[li];  // sigmoid already applied above
    }
    const Eigen::MatrixXf& x = li == 0 ? ws->input_ : ws->act_[li - 1];
    MapMatrix gw(grad_params.data() + d.offset, d.fan_in, d.fan_out);
    nn::Gemm(true, x, false, grad_h, 1.0f, gw);
    grad_params.segment(d.offset + Eigen::Index{d.fan_in} * d.fan_out, d.fan_out) +=
        grad_h.colwise().sum().transpose();
    if (li > 0) {
      const ConstMapMatrix w(parameters_.data() + d.offset, d.fan_in, d.fan_out);
      Eigen::MatrixXf& below = ws->grad_[li - 1];
      below.resize(n, d.fan_in);
      nn::Gemm(false, grad_h, true, w, 0.0f, below);
    }
  }
}

Eigen::MatrixXf ImageGenerator::Sample(const Eigen::VectorXi& labels, PublicRng* rng,
                                       ShardPool* pool) {
  constexpr Eigen::Index kBlock = 1000;
  const Eigen::Index n = labels.size();
  Eigen::MatrixXf out(n, image_size());
  ImageGeneratorWorkspace ws;
  Eigen::MatrixXf code;
  for (Eigen::Index start = 0; start < n; start += kBlock) {
    const Eigen::Index rows = std::min(kBlock, n - start);
    code.resize(rows, code_dim());
    FillStandardNormal(rng, code);
    out.middleRows(start, rows) = Forward(code, labels.segment(start, rows), false, &ws, pool);
  }
  return out;
}

}  // namespace dpcurator::train
