#include "core/train/tabular_generator.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::train {
namespace {

// Checks that the slots of `layout` tile [0, total_dim) exactly once, with
// one position per numeric slot and `levels` per categorical block.
absl::Status ValidateLayout(const data::FeatureLayout& layout) {
  const int total = layout.total_dim();
  if (layout.numeric_dim < 0 || layout.categorical_dim < 0 || total <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Feature layout must have at least one encoded dimension, got ",
        layout.numeric_dim, " numeric and ", layout.categorical_dim, " categorical"));
  }
  if (static_cast<int>(layout.numeric.size()) != layout.numeric_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Feature layout has ", layout.numeric.size(), " numeric slots but numeric_dim ",
        layout.numeric_dim));
  }
  std::vector<int> cover(total, 0);
  auto claim = [&](int column, int offset, int width) -> absl::Status {
    if (width < 1 || offset < 0 || offset > total - width) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Feature layout slot of column ", column, " (offset ", offset, ", width ",
          width, ") is outside [0, ", total, ")"));
    }
    for (int k = offset; k < offset + width; ++k) {
      if (cover[k]++ > 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Feature layout position ", k, " is used twice (column ", column, ")"));
      }
    }
    return absl::OkStatus();
  };
  int categorical_sum = 0;
  for (const auto& slot : layout.numeric) {
    DPC_RETURN_IF_ERROR(claim(slot.column, slot.offset, 1));
  }
  for (const auto& slot : layout.categorical) {
    DPC_RETURN_IF_ERROR(claim(slot.column, slot.offset, slot.levels));
    categorical_sum += slot.levels;
  }
  if (categorical_sum != layout.categorical_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Feature layout categorical blocks have ", categorical_sum,
        " levels in all but categorical_dim is ", layout.categorical_dim));
  }
  // Every position is claimed at most once and the widths add up to total,
  // so every position is claimed exactly once.
  return absl::OkStatus();
}

bool SameLayout(const data::FeatureLayout& a, const data::FeatureLayout& b) {
  if (a.numeric_dim != b.numeric_dim || a.categorical_dim != b.categorical_dim ||
      a.numeric.size() != b.numeric.size() ||
      a.categorical.size() != b.categorical.size()) {
    return false;
  }
  for (size_t i = 0; i < a.numeric.size(); ++i) {
    if (a.numeric[i].column != b.numeric[i].column ||
        a.numeric[i].offset != b.numeric[i].offset) {
      return false;
    }
  }
  for (size_t i = 0; i < a.categorical.size(); ++i) {
    if (a.categorical[i].column != b.categorical[i].column ||
        a.categorical[i].offset != b.categorical[i].offset ||
        a.categorical[i].levels != b.categorical[i].levels ||
        a.categorical[i].atom_indicator != b.categorical[i].atom_indicator ||
        a.categorical[i].missing_indicator != b.categorical[i].missing_indicator) {
      return false;
    }
  }
  return true;
}

}  // namespace

TabularGenerator::TabularGenerator(const data::FeatureLayout& layout, int num_classes,
                                   const GeneratorOptions& options, nn::Mlp mlp)
    : layout_(layout), num_classes_(num_classes), options_(options), mlp_(std::move(mlp)) {}

nn::MlpOptions TabularGenerator::MlpOptionsFor(const data::FeatureLayout& layout,
                                               int num_classes,
                                               const GeneratorOptions& options) {
  nn::MlpOptions mlp;
  mlp.input_dim = options.noise_dim + (num_classes > 1 ? num_classes : 0);
  mlp.hidden = options.hidden;
  mlp.output_dim = layout.total_dim();
  mlp.activation = options.activation;
  mlp.layer_norm = options.layer_norm;
  mlp.seed = options.seed;
  return mlp;
}

absl::Status TabularGenerator::Validate(const data::FeatureLayout& layout,
                                        int num_classes,
                                        const GeneratorOptions& options) {
  DPC_RETURN_IF_ERROR(ValidateLayout(layout));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(num_classes, "Number of classes"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(options.noise_dim, "Noise dimension"));
  return absl::OkStatus();
}

absl::StatusOr<TabularGenerator> TabularGenerator::Create(
    const data::FeatureLayout& layout, int num_classes, const GeneratorOptions& options) {
  DPC_RETURN_IF_ERROR(Validate(layout, num_classes, options));
  DPC_ASSIGN_OR_RETURN(nn::Mlp mlp,
                       nn::Mlp::Create(MlpOptionsFor(layout, num_classes, options)));
  return TabularGenerator(layout, num_classes, options, std::move(mlp));
}

absl::StatusOr<TabularGenerator> TabularGenerator::FromParameters(
    const data::FeatureLayout& layout, int num_classes, const GeneratorOptions& options,
    Eigen::VectorXd parameters) {
  DPC_RETURN_IF_ERROR(Validate(layout, num_classes, options));
  DPC_ASSIGN_OR_RETURN(nn::Mlp mlp,
                       nn::Mlp::FromParameters(MlpOptionsFor(layout, num_classes, options),
                                               std::move(parameters)));
  return TabularGenerator(layout, num_classes, options, std::move(mlp));
}

template <typename Scalar>
struct GeneratorPass {
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;

  static const Matrix& Forward(const data::FeatureLayout& layout, int num_classes, int noise_dim,
                               const nn::BasicMlp<Scalar>& mlp,
                               const Eigen::Ref<const Matrix>& z,
                               const Eigen::Ref<const Eigen::VectorXi>& labels,
                               BasicGeneratorWorkspace<Scalar>* ws) {
    eigen_assert(z.cols() == noise_dim);
    const Eigen::Index n = z.rows();
    ws->input_.resize(n, mlp.input_dim());
    ws->input_.leftCols(noise_dim) = z;
    if (num_classes > 1) {
      eigen_assert(labels.size() == n);
      auto one_hot = ws->input_.rightCols(num_classes);
      one_hot.setZero();
      const Eigen::Index rows = std::min<Eigen::Index>(n, labels.size());
      for (Eigen::Index i = 0; i < rows; ++i) {
        const int label = labels(i);
        eigen_assert(label >= 0 && label < num_classes);
        // Out-of-range labels (a broken precondition) get an all-zero code
        // rather than a write outside the matrix.
        if (label >= 0 && label < num_classes) one_hot(i, label) = Scalar{1};
      }
    }

    const Matrix& logits = mlp.Forward(ws->input_, &ws->mlp_);
    Matrix& out = ws->encoded_;
    out.resize(n, layout.total_dim());
    for (const auto& slot : layout.numeric) {
      // Logistic sigmoid 1 / (1 + e^-l); saturates to 0 or 1 without NaN.
      out.col(slot.offset).array() =
          (Scalar{1} + (-logits.col(slot.offset).array()).exp()).inverse();
    }
    Vector& row = ws->row_buffer_;
    row.resize(n);
    for (const auto& slot : layout.categorical) {
      // Softmax per row, shifted by the row maximum (exact, avoids overflow).
      const auto in = logits.middleCols(slot.offset, slot.levels);
      auto block = out.middleCols(slot.offset, slot.levels);
      row.noalias() = in.rowwise().maxCoeff();
      // Shift first, then exp over the contiguous block in place: Eigen
      // vectorises exp there, not through the broadcast expression.
      block = in;
      block.colwise() -= row;
      block.array() = block.array().exp();
      row.noalias() = block.rowwise().sum();
      block.array().colwise() /= row.array();
    }
    return out;
  }

  static void Backward(const data::FeatureLayout& layout, const nn::BasicMlp<Scalar>& mlp,
                       const Eigen::Ref<const Matrix>& grad_encoded,
                       BasicGeneratorWorkspace<Scalar>* ws, Vector* grad_params) {
    const Matrix& x = ws->encoded_;
    eigen_assert(grad_encoded.rows() == x.rows() && grad_encoded.cols() == x.cols());
    Matrix& g = ws->grad_logits_;
    g.resize(x.rows(), x.cols());
    for (const auto& slot : layout.numeric) {
      // d sigmoid(l) / dl = s (1 - s).
      const auto s = x.col(slot.offset).array();
      g.col(slot.offset).array() = grad_encoded.col(slot.offset).array() * s * (Scalar{1} - s);
    }
    Vector& row = ws->row_buffer_;
    for (const auto& slot : layout.categorical) {
      // Softmax Jacobian dx_k/dl_j = x_k (delta_kj - x_j), so
      // dL/dl_j = x_j (g_j - sum_k g_k x_k).
      const auto p = x.middleCols(slot.offset, slot.levels);
      const auto ge = grad_encoded.middleCols(slot.offset, slot.levels);
      auto gl = g.middleCols(slot.offset, slot.levels);
      row.noalias() = ge.cwiseProduct(p).rowwise().sum();
      gl.array() = p.array() * (ge.colwise() - row).array();
    }
    mlp.Backward(g, &ws->mlp_, grad_params, nullptr);
  }
};

const Eigen::MatrixXd& TabularGenerator::Forward(const Eigen::Ref<const Eigen::MatrixXd>& z,
                                                 const Eigen::VectorXi& labels,
                                                 GeneratorWorkspace* ws) const {
  return GeneratorPass<double>::Forward(layout_, num_classes_, options_.noise_dim, mlp_, z, labels,
                                        ws);
}

void TabularGenerator::Backward(const Eigen::Ref<const Eigen::MatrixXd>& grad_encoded,
                                GeneratorWorkspace* ws,
                                Eigen::VectorXd* grad_params) const {
  GeneratorPass<double>::Backward(layout_, mlp_, grad_encoded, ws, grad_params);
}

absl::StatusOr<FloatGenerator> FloatGenerator::Create(const TabularGenerator& master) {
  DPC_ASSIGN_OR_RETURN(
      nn::MlpF mlp,
      nn::MlpF::FromParameters(master.mlp().options(), master.parameters().cast<float>()));
  return FloatGenerator(master.layout(), master.num_classes(), master.noise_dim(),
                        std::move(mlp));
}

void FloatGenerator::SyncFrom(const TabularGenerator& master) {
  eigen_assert(master.num_parameters() == mlp_.num_parameters());
  mlp_.parameters() = master.parameters().cast<float>();
}

const Eigen::MatrixXf& FloatGenerator::Forward(const Eigen::Ref<const Eigen::MatrixXf>& z,
                                               const Eigen::Ref<const Eigen::VectorXi>& labels,
                                               FloatGeneratorWorkspace* ws) const {
  return GeneratorPass<float>::Forward(layout_, num_classes_, noise_dim_, mlp_, z, labels, ws);
}

void FloatGenerator::Backward(const Eigen::Ref<const Eigen::MatrixXf>& grad_encoded,
                              FloatGeneratorWorkspace* ws, Eigen::VectorXf* grad_params) const {
  GeneratorPass<float>::Backward(layout_, mlp_, grad_encoded, ws, grad_params);
}

absl::StatusOr<data::Table> TabularGenerator::Sample(const data::Schema& schema,
                                                     const Eigen::VectorXi& labels,
                                                     PublicRng* rng) const {
  if (rng == nullptr) return absl::InvalidArgumentError("Sample needs a PublicRng");
  if (schema.num_classes() != num_classes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Schema has ", schema.num_classes(), " label classes; the generator was built for ",
        num_classes_));
  }
  if (!SameLayout(data::FeatureLayout::ForFeatures(schema), layout_)) {
    return absl::InvalidArgumentError(
        "Schema does not match the generator's feature layout (columns, types or "
        "category counts differ)");
  }
  const Eigen::Index n = labels.size();
  for (Eigen::Index i = 0; i < n; ++i) {
    if (labels(i) < 0 || labels(i) >= num_classes_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Label ", labels(i), " of row ", i, " is outside [0, ", num_classes_, ")"));
    }
  }

  Eigen::MatrixXd encoded(n, output_dim());
  GeneratorWorkspace ws;
  Eigen::MatrixXd z;
  for (Eigen::Index start = 0; start < n; start += kSampleChunkRows) {
    const Eigen::Index rows = std::min(kSampleChunkRows, n - start);
    z.resize(rows, options_.noise_dim);
    rng->FillNormal(z);
    const Eigen::VectorXi chunk_labels = labels.segment(start, rows);
    encoded.middleRows(start, rows) = Forward(z, chunk_labels, &ws);
  }
  Eigen::MatrixXd uniforms(n, layout_.num_categorical_columns());
  rng->FillUniform(uniforms);
  return data::DecodeFeatures(schema, layout_, encoded, labels, uniforms);
}

}  // namespace dpcurator::train
