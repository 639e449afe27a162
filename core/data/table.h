#ifndef DPCURATOR_CORE_DATA_TABLE_H_
#define DPCURATOR_CORE_DATA_TABLE_H_

#include <cstdint>
#include <vector>

#include "Eigen/Core"

namespace dpcurator::data {

// Rows of a dataset under a Schema, one row per matrix row and one column per
// schema column: numeric columns hold the (clamped) value, categorical columns
// the level index as a double. A missing cell of a nullable numeric column is
// NaN (quiet), and NaN means nothing else: ParseCell never stores it for a
// non-nullable column, and every reader of `cells` (the discretizer's
// missing cell, the encoder's missing indicator, the evaluators' missing
// bin) tests for it before any arithmetic, so it never reaches a
// mechanism. A nullable categorical's missing value is its last level.
// Kept dense and column-major so that encoders and evaluators stream over
// columns with Eigen.
//
// A schema with an image column keeps its pixels apart, compactly: the image
// column's cell is a 0 placeholder and `pixels` holds num_rows x
// pixels_per_image 8-bit levels, row-major (image, then row, then column),
// each standing for level / 255 in the declared range [0, 1].
struct Table {
  Eigen::MatrixXd cells;
  // Empty for a schema without an image column.
  std::vector<uint8_t> pixels;
  // Number of numeric cells that were clamped to the declared bounds while
  // the table was built (PRIVACY.md: no silent clamping).
  int64_t clamped_cells = 0;

  int64_t num_rows() const { return cells.rows(); }
};

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_TABLE_H_
