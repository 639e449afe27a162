#include "core/data/encoder.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dpcurator::data {

int AtomLevel(const std::vector<double>& atoms, double value) {
  // Exact equality (Discretizer::Code uses this too): atoms and cells are
  // parsed by the same strtod, and a value near an atom is not at it.
  // A missing (NaN) value is no atom, decided before any comparison.
  if (std::isnan(value)) return static_cast<int>(atoms.size());
  const auto atom = std::lower_bound(atoms.begin(), atoms.end(), value);
  if (atom != atoms.end() && *atom == value) return static_cast<int>(atom - atoms.begin());
  return static_cast<int>(atoms.size());
}

FeatureLayout FeatureLayout::ForFeatures(const Schema& schema) {
  FeatureLayout layout;
  for (int column : schema.feature_indices()) {
    if (schema.column(column).type == ColumnType::kNumeric) {
      layout.numeric.push_back({column, layout.numeric_dim});
      ++layout.numeric_dim;
    }
  }
  if (schema.image_index().has_value()) {
    const int column = *schema.image_index();
    const Column& c = schema.column(column);
    // Build() bounds pixels_per_image by kMaxImagePixels (2^20): an int.
    const int pixels = static_cast<int>(c.pixels_per_image());
    layout.image = FeatureLayout::ImageSlot{column,         layout.numeric_dim, pixels,
                                            c.image_height, c.image_width,      c.image_channels};
    layout.numeric_dim += pixels;
  }
  int offset = layout.numeric_dim;
  for (int column : schema.feature_indices()) {
    if (schema.column(column).type == ColumnType::kCategorical) {
      const int levels = schema.NumLevels(column);
      layout.categorical.push_back({column, offset, levels});
      offset += levels;
      layout.categorical_dim += levels;
    }
  }
  // After every categorical block, so that adding atoms to a schema moves no
  // categorical block.
  for (const auto& slot : layout.numeric) {
    const Column& c = schema.column(slot.column);
    if (c.atoms.empty()) continue;
    const int levels = static_cast<int>(c.atoms.size()) + 1;
    layout.categorical.push_back({slot.column, offset, levels, /*atom_indicator=*/true});
    offset += levels;
    layout.categorical_dim += levels;
  }
  // Last, so that schemas without nullable numerics keep their layouts, and
  // DecodeFeatures applies a missing block after the column's atom block.
  for (const auto& slot : layout.numeric) {
    if (!schema.column(slot.column).nullable) continue;
    layout.categorical.push_back({slot.column, offset, kMissingIndicatorLevels,
                                  /*atom_indicator=*/false, /*missing_indicator=*/true});
    offset += kMissingIndicatorLevels;
    layout.categorical_dim += kMissingIndicatorLevels;
  }
  return layout;
}

void EncodePixels(const FeatureLayout& layout, const uint8_t* pixels, Eigen::Index first_row,
                  Eigen::Index num_rows, Eigen::MatrixXd* encoded) {
  if (!layout.image.has_value()) return;
  const auto& slot = *layout.image;
  // level / 255 by table, exactly as ImageSet's readers compute it.
  double value_of[256];
  for (int level = 0; level < 256; ++level) value_of[level] = level / kImageLevels;
  const int64_t per_image = slot.pixels;
  // Row-major bytes into column-major doubles, a block of rows at a time so
  // the block's bytes (128 x 784 for Fashion-MNIST: 100 KB) stay in cache
  // while each of its columns is written.
  constexpr Eigen::Index kBlockRows = 128;
  for (Eigen::Index start = 0; start < num_rows; start += kBlockRows) {
    const Eigen::Index rows = std::min(kBlockRows, num_rows - start);
    const uint8_t* block = pixels + start * per_image;
    for (int64_t p = 0; p < per_image; ++p) {
      double* out = encoded->col(slot.offset + p).data() + first_row + start;
      for (Eigen::Index i = 0; i < rows; ++i) out[i] = value_of[block[i * per_image + p]];
    }
  }
}

Eigen::MatrixXd EncodeFeatures(const Schema& schema, const FeatureLayout& layout,
                               const Table& table) {
  const Eigen::Index n = table.num_rows();
  const bool pixels_only = layout.image.has_value() && layout.image->pixels == layout.total_dim() &&
                           static_cast<int64_t>(table.pixels.size()) == n * layout.image->pixels;
  // Every entry of a pixels-only matrix is written below: no zero pass over
  // (for Fashion-MNIST) 376 MB first.
  Eigen::MatrixXd encoded = pixels_only ? Eigen::MatrixXd(n, layout.total_dim())
                                        : Eigen::MatrixXd::Zero(n, layout.total_dim());
  for (const auto& slot : layout.numeric) {
    const Column& c = schema.column(slot.column);
    const double scale = 1.0 / (c.upper - c.lower);
    encoded.col(slot.offset) =
        ((table.cells.col(slot.column).array() - c.lower) * scale).cwiseMax(0.0).cwiseMin(1.0);
    if (c.nullable) {
      // A missing cell's value slot is 0 (its indicator says missing): no
      // NaN reaches a feature map. cwiseMax/Min need not map NaN to a bound.
      for (Eigen::Index i = 0; i < n; ++i) {
        if (std::isnan(table.cells(i, slot.column))) encoded(i, slot.offset) = 0.0;
      }
    }
  }
  if (layout.image.has_value() &&
      static_cast<int64_t>(table.pixels.size()) == n * layout.image->pixels) {
    EncodePixels(layout, table.pixels.data(), 0, n, &encoded);
  }
  for (const auto& slot : layout.categorical) {
    if (slot.missing_indicator) {
      for (Eigen::Index i = 0; i < n; ++i) {
        encoded(i, slot.offset + (std::isnan(table.cells(i, slot.column)) ? 1 : 0)) = 1.0;
      }
      continue;
    }
    if (slot.atom_indicator) {
      const std::vector<double>& atoms = schema.column(slot.column).atoms;
      for (Eigen::Index i = 0; i < n; ++i) {
        encoded(i, slot.offset + AtomLevel(atoms, table.cells(i, slot.column))) = 1.0;
      }
      continue;
    }
    for (Eigen::Index i = 0; i < n; ++i) {
      const int level = static_cast<int>(table.cells(i, slot.column));
      if (level >= 0 && level < slot.levels) encoded(i, slot.offset + level) = 1.0;
    }
  }
  return encoded;
}

Eigen::VectorXi ExtractLabels(const Schema& schema, const Table& table) {
  const Eigen::Index n = table.num_rows();
  if (!schema.label_index().has_value()) return Eigen::VectorXi::Zero(n);
  return table.cells.col(*schema.label_index()).cast<int>();
}

Table DecodeFeatures(const Schema& schema, const FeatureLayout& layout,
                     const Eigen::MatrixXd& encoded, const Eigen::VectorXi& labels,
                     const Eigen::MatrixXd& uniforms) {
  const Eigen::Index n = encoded.rows();
  Table table;
  table.cells = Eigen::MatrixXd::Zero(n, schema.num_columns());
  for (const auto& slot : layout.numeric) {
    const Column& c = schema.column(slot.column);
    auto column = table.cells.col(slot.column);
    column = (encoded.col(slot.offset).array().cwiseMax(0.0).cwiseMin(1.0) * (c.upper - c.lower) +
              c.lower)
                 .matrix();
    if (c.integer) {
      for (Eigen::Index i = 0; i < n; ++i) {
        column(i) = std::clamp(std::round(column(i)), std::ceil(c.lower), std::floor(c.upper));
      }
    }
  }
  for (size_t b = 0; b < layout.categorical.size(); ++b) {
    const auto& slot = layout.categorical[b];
    for (Eigen::Index i = 0; i < n; ++i) {
      auto weights = encoded.row(i).segment(slot.offset, slot.levels);
      int chosen = 0;
      if (uniforms.size() == 0) {
        weights.maxCoeff(&chosen);
      } else {
        double total = 0.0;
        for (int l = 0; l < slot.levels; ++l) total += std::max(weights(l), 0.0);
        double target = uniforms(i, b) * total;
        chosen = slot.levels - 1;
        for (int l = 0; l < slot.levels; ++l) {
          target -= std::max(weights(l), 0.0);
          if (target < 0) {
            chosen = l;
            break;
          }
        }
      }
      if (slot.missing_indicator) {
        if (chosen == 1) table.cells(i, slot.column) = std::numeric_limits<double>::quiet_NaN();
      } else if (!slot.atom_indicator) {
        table.cells(i, slot.column) = chosen;
      } else if (chosen + 1 < slot.levels) {
        table.cells(i, slot.column) = schema.column(slot.column).atoms[chosen];
      }
    }
  }
  if (layout.image.has_value()) {
    const auto& slot = *layout.image;
    const int64_t pixels = slot.pixels;
    table.pixels.resize(static_cast<size_t>(n * pixels));
    // Column-major doubles into row-major bytes, a block of rows at a time
    // (the transpose of EncodePixels).
    constexpr Eigen::Index kBlockRows = 128;
    for (Eigen::Index start = 0; start < n; start += kBlockRows) {
      const Eigen::Index rows = std::min(kBlockRows, n - start);
      uint8_t* block = table.pixels.data() + start * pixels;
      for (int64_t p = 0; p < pixels; ++p) {
        const double* in = encoded.col(slot.offset + p).data() + start;
        for (Eigen::Index i = 0; i < rows; ++i) {
          const double v = in[i];
          // Written so that NaN reads as 0.
          const double clamped = v > 0.0 ? (v < 1.0 ? v : 1.0) : 0.0;
          block[i * pixels + p] = static_cast<uint8_t>(std::lround(clamped * kImageLevels));
        }
      }
    }
  }
  if (schema.label_index().has_value()) {
    table.cells.col(*schema.label_index()) = labels.cast<double>();
  }
  return table;
}

}  // namespace dpcurator::data
