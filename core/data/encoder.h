#ifndef DPCURATOR_CORE_DATA_ENCODER_H_
#define DPCURATOR_CORE_DATA_ENCODER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "Eigen/Core"
#include "core/data/schema.h"
#include "core/data/table.h"

namespace dpcurator::data {

// Layout of the encoded feature vector of a row (label excluded):
//   [ numeric columns scaled to [0,1] by the declared bounds | image pixels |
//     one-hot blocks of the categorical columns |
//     one-hot atom indicators of the numeric columns with declared atoms |
//     one-hot missing indicators of the nullable numeric columns ]
// Generators emit exactly this layout (sigmoid numerics and pixels, softmax
// blocks), so real and synthetic rows meet in the same space. A numeric
// column with atoms (Column::atoms, public point masses such as 0 for a
// capital gain) thus has a mixed head: the sigmoid of its scaled value and a
// softmax over "which atom, or none" (issue 17 item 1), decoded to the atom
// exactly when one is chosen. An indicator block is one more one-hot block
// with exactly one 1 per row, so every norm bound that counts one-hot
// blocks (docs/privacy.md 2.1, 2.7) covers it through
// num_categorical_columns(). A nullable numeric column (issue 38) adds a
// two-level block, (present, missing), the same way: a missing cell (NaN,
// core/data/table.h) encodes as 0 in its value slot, "none" in its atom
// block and "missing" in this block, so no NaN enters any feature map; the
// decoder writes NaN where this block chooses "missing" (it comes after the
// atom blocks, so missing wins over an atom). An image's
// pixels (level / 255, in the declared range [0, 1]) count as numeric
// dimensions: numeric_dim includes them, so every feature map treats them
// as it treats numerics, but `numeric` holds one slot per numeric column
// only and the pixels are described by `image`.
// Levels of a nullable numeric column's missing indicator: present, missing.
inline constexpr int kMissingIndicatorLevels = 2;

struct FeatureLayout {
  struct NumericSlot {
    int column;  // schema column index
    int offset;  // position in the encoded vector
  };
  // A one-hot block: a categorical column's levels, or (atom_indicator) a
  // numeric column's atoms: level a < atoms.size() when the value equals
  // atom a, the last level when it equals none, or (missing_indicator) a
  // nullable numeric column's 2 levels: 0 present, 1 missing.
  struct CategoricalSlot {
    int column;
    int offset;
    int levels;
    bool atom_indicator = false;
    bool missing_indicator = false;
  };
  struct ImageSlot {
    int column;
    int offset;
    int pixels;  // height x width x channels
    int height;
    int width;
    int channels;
  };
  std::vector<NumericSlot> numeric;
  std::optional<ImageSlot> image;
  std::vector<CategoricalSlot> categorical;
  int numeric_dim = 0;
  int categorical_dim = 0;
  int total_dim() const { return numeric_dim + categorical_dim; }
  // The number of one-hot blocks (categorical columns, atom and missing
  // indicators).
  int num_categorical_columns() const { return static_cast<int>(categorical.size()); }

  static FeatureLayout ForFeatures(const Schema& schema);
};

// Encodes the feature columns of `table` (n x total_dim); an image's pixels
// are read from table.pixels as level / 255.
Eigen::MatrixXd EncodeFeatures(const Schema& schema, const FeatureLayout& layout,
                               const Table& table);

// Writes images' pixels (num_rows x pixels row-major 8-bit levels, as in
// Table::pixels) as level / 255 into rows [first_row, first_row + num_rows)
// of `encoded` (column-major, total_dim columns) at the image slot's offset.
// No-op for a layout without an image. EncodeFeatures uses it; so does the
// server, straight from stored blobs.
void EncodePixels(const FeatureLayout& layout, const uint8_t* pixels, Eigen::Index first_row,
                  Eigen::Index num_rows, Eigen::MatrixXd* encoded);

// The level of `value` in an atom indicator block: the index of the atom it
// equals in the sorted `atoms`, else atoms.size() ("no atom").
int AtomLevel(const std::vector<double>& atoms, double value);

// Label level of each row (0 for every row of an unlabelled schema).
Eigen::VectorXi ExtractLabels(const Schema& schema, const Table& table);

// Inverse of EncodeFeatures for generator output: numeric values mapped back
// to the declared bounds (rounded for integer columns), then replaced by the
// atom where the column's indicator block chooses one, and by NaN where its
// missing block chooses "missing"; each one-hot
// block is sampled from its (non-negative) weights with `uniforms` (one
// uniform in [0,1) per row and block, n x num_categorical_columns) or, when
// `uniforms` is empty, decoded by argmax. The label column is set from
// `labels`. Image pixels are clamped to [0, 1] (NaN reads as 0) and stored
// in table.pixels as round(255 v).
Table DecodeFeatures(const Schema& schema, const FeatureLayout& layout,
                     const Eigen::MatrixXd& encoded, const Eigen::VectorXi& labels,
                     const Eigen::MatrixXd& uniforms);

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_ENCODER_H_
