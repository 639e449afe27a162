#include "core/nn/mlp.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/nn/gemm.h"
#include "core/util/public_rng.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::nn {
namespace {

// Ba, Kiros & Hinton 2016, eq. 4: sigma = sqrt(mean((h - mu)^2) + eps).
constexpr double kLayerNormEpsilon = 1e-5;

// Largest parameter count we accept (keeps every offset well inside int64
// and any one network under 8 GiB of doubles).
constexpr Eigen::Index kMaxParameters = Eigen::Index{1} << 30;

}  // namespace

template <typename Scalar>
BasicMlp<Scalar>::BasicMlp(MlpOptions options, std::vector<DenseLayerLayout> layers,
                           Vector parameters)
    : options_(std::move(options)),
      layers_(std::move(layers)),
      parameters_(std::move(parameters)) {}

template <typename Scalar>
absl::Status BasicMlp<Scalar>::Validate(const MlpOptions& options) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.input_dim, "Input dimension"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.output_dim, "Output dimension"));
  for (size_t i = 0; i < options.hidden.size(); ++i) {
    DPC_RETURN_IF_ERROR(ValidatePositiveInt(
        options.hidden[i], absl::StrCat("Width of hidden layer ", i)));
  }
  if (options.activation == Activation::kLeakyRelu) {
    DPC_RETURN_IF_ERROR(
        ValidateInOpenUnitInterval(options.leaky_relu_slope, "Leaky ReLU slope"));
  }
  Eigen::Index count = 0;
  Plan(options, &count);
  if (count > kMaxParameters) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Network has ", count, " parameters; at most ", kMaxParameters,
        " are supported"));
  }
  return absl::OkStatus();
}

template <typename Scalar>
std::vector<DenseLayerLayout> BasicMlp<Scalar>::Plan(const MlpOptions& options,
                                                     Eigen::Index* num_parameters) {
  std::vector<DenseLayerLayout> layers;
  Eigen::Index offset = 0;
  int fan_in = options.input_dim;
  const int num_hidden = static_cast<int>(options.hidden.size());
  for (int l = 0; l <= num_hidden; ++l) {
    DenseLayerLayout layer;
    layer.hidden = l < num_hidden;
    layer.fan_in = fan_in;
    layer.fan_out = layer.hidden ? options.hidden[l] : options.output_dim;
    layer.weight_offset = offset;
    offset += Eigen::Index{layer.fan_in} * layer.fan_out;
    layer.bias_offset = offset;
    offset += layer.fan_out;
    if (layer.hidden && options.layer_norm) {
      layer.gain_offset = offset;
      offset += layer.fan_out;
      layer.shift_offset = offset;
      offset += layer.fan_out;
    }
    layers.push_back(layer);
    fan_in = layer.fan_out;
  }
  *num_parameters = offset;
  return layers;
}

template <typename Scalar>
absl::StatusOr<Eigen::Index> BasicMlp<Scalar>::CountParameters(const MlpOptions& options) {
  DPC_RETURN_IF_ERROR(Validate(options));
  Eigen::Index count = 0;
  Plan(options, &count);
  return count;
}

template <typename Scalar>
absl::StatusOr<BasicMlp<Scalar>> BasicMlp<Scalar>::Create(const MlpOptions& options) {
  DPC_RETURN_IF_ERROR(Validate(options));
  Eigen::Index count = 0;
  std::vector<DenseLayerLayout> layers = Plan(options, &count);
  BasicMlp mlp(options, std::move(layers), Vector::Zero(count));
  mlp.Initialize();
  return mlp;
}

template <typename Scalar>
absl::StatusOr<BasicMlp<Scalar>> BasicMlp<Scalar>::FromParameters(const MlpOptions& options,
                                                                   Vector parameters) {
  DPC_RETURN_IF_ERROR(Validate(options));
  Eigen::Index count = 0;
  std::vector<DenseLayerLayout> layers = Plan(options, &count);
  BasicMlp mlp(options, std::move(layers), Vector::Zero(count));
  DPC_RETURN_IF_ERROR(mlp.SetParameters(parameters));
  return mlp;
}

template <typename Scalar>
absl::Status BasicMlp<Scalar>::SetParameters(const Eigen::Ref<const Vector>& parameters) {
  if (parameters.size() != parameters_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Parameter vector has ", parameters.size(), " entries; the architecture needs ",
        parameters_.size()));
  }
  if (!parameters.allFinite()) {
    for (Eigen::Index i = 0; i < parameters.size(); ++i) {
      if (!std::isfinite(parameters(i))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Parameter ", i, " must be finite, got ", parameters(i)));
      }
    }
  }
  parameters_ = parameters;
  return absl::OkStatus();
}

template <typename Scalar>
void BasicMlp<Scalar>::Initialize() {
  PublicRng rng(options_.seed);
  const double slope = options_.leaky_relu_slope;
  for (int l = 0; l < num_layers(); ++l) {
    const DenseLayerLayout& layer = layers_[l];
    double variance;
    if (layer.hidden && options_.activation == Activation::kRelu) {
      variance = 2.0 / layer.fan_in;  // He et al. 2015, eq. 10
    } else if (layer.hidden && options_.activation == Activation::kLeakyRelu) {
      variance = 2.0 / ((1.0 + slope * slope) * layer.fan_in);  // He, eq. 15
    } else {
      variance = 2.0 / (layer.fan_in + layer.fan_out);  // Glorot & Bengio, eq. 16
    }
    // Drawn in double for every Scalar, so a float network created from a
    // seed starts from the rounded weights of the double one.
    Eigen::MatrixXd draws(layer.fan_in, layer.fan_out);
    rng.FillNormal(draws);
    draws *= std::sqrt(variance);
    weight(l) = draws.cast<Scalar>();
    bias(l).setZero();
    if (layer.gain_offset >= 0) {
      norm_gain(l).setOnes();
      norm_shift(l).setZero();
    }
  }
}

template <typename Scalar>
Eigen::Map<typename BasicMlp<Scalar>::Matrix> BasicMlp<Scalar>::weight(int layer) {
  const DenseLayerLayout& d = layers_[layer];
  return {parameters_.data() + d.weight_offset, d.fan_in, d.fan_out};
}
template <typename Scalar>
Eigen::Map<const typename BasicMlp<Scalar>::Matrix> BasicMlp<Scalar>::weight(int layer) const {
  const DenseLayerLayout& d = layers_[layer];
  return {parameters_.data() + d.weight_offset, d.fan_in, d.fan_out};
}
template <typename Scalar>
Eigen::Map<typename BasicMlp<Scalar>::Vector> BasicMlp<Scalar>::bias(int layer) {
  const DenseLayerLayout& d = layers_[layer];
  return {parameters_.data() + d.bias_offset, d.fan_out};
}
template <typename Scalar>
Eigen::Map<const typename BasicMlp<Scalar>::Vector> BasicMlp<Scalar>::bias(int layer) const {
  const DenseLayerLayout& d = layers_[layer];
  return {parameters_.data() + d.bias_offset, d.fan_out};
}
template <typename Scalar>
Eigen::Map<typename BasicMlp<Scalar>::Vector> BasicMlp<Scalar>::norm_gain(int layer) {
  const DenseLayerLayout& d = layers_[layer];
  eigen_assert(d.gain_offset >= 0);
  return {parameters_.data() + d.gain_offset, d.fan_out};
}
template <typename Scalar>
Eigen::Map<const typename BasicMlp<Scalar>::Vector> BasicMlp<Scalar>::norm_gain(int layer) const {
  const DenseLayerLayout& d = layers_[layer];
  eigen_assert(d.gain_offset >= 0);
  return {parameters_.data() + d.gain_offset, d.fan_out};
}
template <typename Scalar>
Eigen::Map<typename BasicMlp<Scalar>::Vector> BasicMlp<Scalar>::norm_shift(int layer) {
  const DenseLayerLayout& d = layers_[layer];
  eigen_assert(d.shift_offset >= 0);
  return {parameters_.data() + d.shift_offset, d.fan_out};
}
template <typename Scalar>
Eigen::Map<const typename BasicMlp<Scalar>::Vector> BasicMlp<Scalar>::norm_shift(int layer) const {
  const DenseLayerLayout& d = layers_[layer];
  eigen_assert(d.shift_offset >= 0);
  return {parameters_.data() + d.shift_offset, d.fan_out};
}

template <typename Scalar>
void BasicMlp<Scalar>::PrepareWorkspace(Eigen::Index rows, Workspace* ws) const {
  const int num = num_layers();
  ws->outputs_.resize(num);
  ws->deltas_.resize(num - 1);
  if (options_.layer_norm) {
    ws->normalized_.resize(num - 1);
    ws->inv_std_.resize(num - 1);
    ws->norm_deltas_.resize(num - 1);
  }
  // resize() is a no-op when the shape is unchanged.
  for (int l = 0; l < num; ++l) {
    ws->outputs_[l].resize(rows, layers_[l].fan_out);
    if (l + 1 < num) {
      ws->deltas_[l].resize(rows, layers_[l].fan_out);
      if (options_.layer_norm) {
        ws->normalized_[l].resize(rows, layers_[l].fan_out);
        ws->inv_std_[l].resize(rows);
        ws->norm_deltas_[l].resize(rows, layers_[l].fan_out);
      }
    }
  }
  ws->row_buffer_a_.resize(rows);
  ws->row_buffer_b_.resize(rows);
}

template <typename Scalar>
void BasicMlp<Scalar>::ApplyActivation(Matrix* values) const {
  auto a = values->array();
  switch (options_.activation) {
    case Activation::kRelu:
      a = a.max(Scalar{0});
      break;
    case Activation::kLeakyRelu: {
      // A plain loop, as in MultiplyActivationDerivative.
      const Scalar slope = static_cast<Scalar>(options_.leaky_relu_slope);
      Scalar* v = values->data();
      for (Eigen::Index i = 0; i < values->size(); ++i) {
        v[i] = v[i] > Scalar{0} ? v[i] : slope * v[i];
      }
      break;
    }
    case Activation::kTanh:
      a = a.tanh();
      break;
  }
}

// Multiplies `delta` (dLoss/dA) by dA/dH, written in terms of the activation
// A itself: every supported activation is monotone, so A > 0 iff H > 0 for
// the ReLU family, and tanh'(H) = 1 - A^2.
template <typename Scalar>
void BasicMlp<Scalar>::MultiplyActivationDerivative(const Matrix& activations,
                                                    Matrix* delta) const {
  auto d = delta->array();
  const auto a = activations.array();
  // The ReLU family as plain loops over the storage: Eigen 3.4 does not
  // vectorise select(), and these loops are one compare-and-blend per
  // packet once the compiler vectorises them (a tenth of a float
  // generator step otherwise).
  Scalar* out = delta->data();
  const Scalar* act = activations.data();
  const Eigen::Index size = delta->size();
  switch (options_.activation) {
    case Activation::kRelu:
      for (Eigen::Index i = 0; i < size; ++i) out[i] = act[i] > Scalar{0} ? out[i] : Scalar{0};
      break;
    case Activation::kLeakyRelu: {
      const Scalar slope = static_cast<Scalar>(options_.leaky_relu_slope);
      for (Eigen::Index i = 0; i < size; ++i) {
        out[i] = act[i] > Scalar{0} ? out[i] : slope * out[i];
      }
      break;
    }
    case Activation::kTanh:
      d *= Scalar{1} - a.square();
      break;
  }
}

template <typename Scalar>
const typename BasicMlp<Scalar>::Matrix& BasicMlp<Scalar>::Forward(
    const Eigen::Ref<const Matrix>& input, Workspace* ws) const {
  eigen_assert(input.cols() == options_.input_dim);
  const Eigen::Index n = input.rows();
  PrepareWorkspace(n, ws);
  ws->input_ = input;
  for (int l = 0; l < num_layers(); ++l) {
    const DenseLayerLayout& layer = layers_[l];
    const Matrix& x = l == 0 ? ws->input_ : ws->outputs_[l - 1];
    Matrix& h = ws->outputs_[l];
    Gemm(false, x, false, weight(l), Scalar{0}, h);
    h.rowwise() += bias(l).transpose();
    if (!layer.hidden) break;
    if (options_.layer_norm) {
      // Ba et al. 2016, eqs. 3-4, over the units of each row:
      //   mu = mean_j h_j, sigma = sqrt(mean_j (h_j - mu)^2 + eps),
      //   h <- gain * (h - mu) / sigma + shift.
      Vector& mean = ws->row_buffer_a_;
      Vector& inv_std = ws->inv_std_[l];
      Matrix& normalized = ws->normalized_[l];
      mean.noalias() = h.rowwise().mean();
      h.colwise() -= mean;
      inv_std.array() =
          (h.rowwise().squaredNorm().array() / static_cast<Scalar>(layer.fan_out) +
           static_cast<Scalar>(kLayerNormEpsilon))
              .rsqrt();
      normalized.noalias() = inv_std.asDiagonal() * h;
      h.noalias() = normalized * norm_gain(l).asDiagonal();
      h.rowwise() += norm_shift(l).transpose();
    }
    ApplyActivation(&h);
  }
  return ws->outputs_.back();
}

template <typename Scalar>
void BasicMlp<Scalar>::BackpropagateDeltas(const Eigen::Ref<const Matrix>& grad_output,
                                           Workspace* ws) const {
  eigen_assert(grad_output.cols() == options_.output_dim);
  eigen_assert(grad_output.rows() == ws->input_.rows());
  for (int l = num_layers() - 1; l >= 1; --l) {
    // dLoss/dH for layer l: the output layer is linear, so it is grad_output
    // itself; hidden layers were filled by the previous iteration.
    const Eigen::Ref<const Matrix> delta =
        layers_[l].hidden ? Eigen::Ref<const Matrix>(ws->deltas_[l]) : grad_output;

    // H = X W + 1 b^T  =>  dX = dH W^T: dLoss/dA of layer l-1, then through
    // its activation and layer norm.
    const int below = l - 1;
    Matrix& d = ws->deltas_[below];
    Gemm(false, delta, true, weight(l), Scalar{0}, d);
    MultiplyActivationDerivative(ws->outputs_[below], &d);
    if (options_.layer_norm) {
      // Backward of y = gain * xhat + shift, xhat = (h - mu) / sigma, per row
      // (Ba et al. 2016; the standard normalisation Jacobian):
      //   dxhat = dy * gain,
      //   dh = (dxhat - mean_j dxhat - xhat * mean_j(dxhat * xhat)) / sigma.
      // dy itself is kept for the gain and shift gradients.
      const Matrix& xhat = ws->normalized_[below];
      ws->norm_deltas_[below] = d;
      d.array().rowwise() *= norm_gain(below).transpose().array();
      Vector& mean_d = ws->row_buffer_a_;
      Vector& mean_dx = ws->row_buffer_b_;
      mean_d.noalias() = d.rowwise().mean();
      mean_dx.noalias() = d.cwiseProduct(xhat).rowwise().mean();
      d.colwise() -= mean_d;
      d.array() -= xhat.array().colwise() * mean_dx.array();
      d.array().colwise() *= ws->inv_std_[below].array();
    }
  }
}

template <typename Scalar>
void BasicMlp<Scalar>::Backward(const Eigen::Ref<const Matrix>& grad_output, Workspace* ws,
                                Vector* grad_params, Matrix* grad_input) const {
  eigen_assert(grad_params != nullptr && grad_params->size() == num_parameters());
  BackpropagateDeltas(grad_output, ws);
  Scalar* g = grad_params->data();
  for (int l = 0; l < num_layers(); ++l) {
    const DenseLayerLayout& layer = layers_[l];
    const Eigen::Ref<const Matrix> delta =
        layer.hidden ? Eigen::Ref<const Matrix>(ws->deltas_[l]) : grad_output;
    const Matrix& x = ws->layer_input(l);

    // H = X W + 1 b^T  =>  dW = X^T dH, db = dH^T 1.
    Eigen::Map<Matrix> grad_w(g + layer.weight_offset, layer.fan_in, layer.fan_out);
    Eigen::Map<Vector> grad_b(g + layer.bias_offset, layer.fan_out);
    Gemm(true, x, false, delta, Scalar{1}, grad_w);
    grad_b.noalias() += delta.colwise().sum().transpose();

    if (layer.gain_offset >= 0) {
      // y = gain * xhat + shift  =>  dgain = sum_rows dy * xhat,
      // dshift = sum_rows dy (Ba et al. 2016).
      const Matrix& dy = ws->norm_deltas_[l];
      Eigen::Map<Vector> grad_gain(g + layer.gain_offset, layer.fan_out);
      Eigen::Map<Vector> grad_shift(g + layer.shift_offset, layer.fan_out);
      grad_gain.noalias() += dy.cwiseProduct(ws->normalized_[l]).colwise().sum().transpose();
      grad_shift.noalias() += dy.colwise().sum().transpose();
    }
  }
  if (grad_input != nullptr) {
    // dX = dH W^T for the first layer.
    const Eigen::Ref<const Matrix> delta0 =
        layers_[0].hidden ? Eigen::Ref<const Matrix>(ws->deltas_[0]) : grad_output;
    grad_input->resize(delta0.rows(), layers_[0].fan_in);
    Gemm(false, delta0, true, weight(0), Scalar{0}, *grad_input);
  }
}

template class BasicMlp<double>;
template class BasicMlp<float>;

}  // namespace dpcurator::nn
