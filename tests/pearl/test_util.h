#ifndef DPCURATOR_TESTS_PEARL_TEST_UTIL_H_
#define DPCURATOR_TESTS_PEARL_TEST_UTIL_H_

// Hand-built layouts and random encoded rows for the PEARL tests. All
// randomness here is public test randomness (PublicRng), never privacy noise.

#include <vector>

#include "Eigen/Core"
#include "core/data/encoder.h"
#include "core/util/public_rng.h"

namespace dpcurator::pearl_testing {

// [ numeric_dim numerics | one block per entry of `levels` ].
inline data::FeatureLayout MakeLayout(int numeric_dim, const std::vector<int>& levels) {
  data::FeatureLayout layout;
  int column = 0;
  for (int j = 0; j < numeric_dim; ++j) layout.numeric.push_back({column++, j});
  layout.numeric_dim = numeric_dim;
  int offset = numeric_dim;
  for (int l : levels) {
    layout.categorical.push_back({column++, offset, l});
    offset += l;
    layout.categorical_dim += l;
  }
  return layout;
}

// One encoded row: uniform numerics (a corner 0/1 with probability
// `corner`), one uniformly chosen level per block.
inline Eigen::RowVectorXd RandomEncodedRow(const data::FeatureLayout& layout, PublicRng* rng,
                                           double corner = 0.2) {
  Eigen::RowVectorXd row = Eigen::RowVectorXd::Zero(layout.total_dim());
  for (const auto& slot : layout.numeric) {
    row(slot.offset) = rng->Uniform() < corner ? static_cast<double>(rng->UniformInt(2))
                                               : rng->Uniform();
  }
  for (const auto& slot : layout.categorical) {
    row(slot.offset + static_cast<int>(rng->UniformInt(slot.levels))) = 1.0;
  }
  return row;
}

inline Eigen::MatrixXd RandomEncodedRows(const data::FeatureLayout& layout, int n, PublicRng* rng,
                                         double corner = 0.2) {
  Eigen::MatrixXd rows(n, layout.total_dim());
  for (int i = 0; i < n; ++i) rows.row(i) = RandomEncodedRow(layout, rng, corner);
  return rows;
}

// The row "opposite" to `row`: numerics 1 - round(u) and every block at a
// different level (levels >= 2), so that ||row - opposite|| = diameter when
// the numerics of `row` are at corners.
inline Eigen::RowVectorXd OppositeRow(const data::FeatureLayout& layout,
                                      const Eigen::RowVectorXd& row) {
  Eigen::RowVectorXd out = Eigen::RowVectorXd::Zero(layout.total_dim());
  for (const auto& slot : layout.numeric) out(slot.offset) = row(slot.offset) < 0.5 ? 1.0 : 0.0;
  for (const auto& slot : layout.categorical) {
    int level = 0;
    row.segment(slot.offset, slot.levels).maxCoeff(&level);
    out(slot.offset + (level + 1) % slot.levels) = 1.0;
  }
  return out;
}

// Removes row i.
inline Eigen::MatrixXd WithoutRow(const Eigen::MatrixXd& rows, Eigen::Index i) {
  Eigen::MatrixXd out(rows.rows() - 1, rows.cols());
  out.topRows(i) = rows.topRows(i);
  out.bottomRows(rows.rows() - 1 - i) = rows.bottomRows(rows.rows() - 1 - i);
  return out;
}

// Inserts `row` before position i (0..n).
inline Eigen::MatrixXd WithRowAt(const Eigen::MatrixXd& rows, const Eigen::RowVectorXd& row,
                                 Eigen::Index i) {
  Eigen::MatrixXd out(rows.rows() + 1, rows.cols());
  out.topRows(i) = rows.topRows(i);
  out.row(i) = row;
  out.bottomRows(rows.rows() - i) = rows.bottomRows(rows.rows() - i);
  return out;
}

}  // namespace dpcurator::pearl_testing

#endif  // DPCURATOR_TESTS_PEARL_TEST_UTIL_H_
