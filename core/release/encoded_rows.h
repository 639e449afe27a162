#ifndef DPCURATOR_CORE_RELEASE_ENCODED_ROWS_H_
#define DPCURATOR_CORE_RELEASE_ENCODED_ROWS_H_

#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/data/table.h"

namespace dpcurator::release {

// A dataset's rows as every embedding kind reads them: the encoded feature
// vectors (one-hot categories, numerics scaled to [0, 1] by the declared
// bounds; core/data/encoder.h) and the label levels. Encoding depends on
// the public schema only, so a sealed dataset is encoded once and shared by
// every release and session step on it (server/encoded_rows_cache.h).
struct EncodedRows {
  data::FeatureLayout layout;
  Eigen::MatrixXd features;  // num_rows x layout.total_dim()
  Eigen::VectorXi labels;    // num_rows, in [0, num_classes)
  int num_classes = 1;

  int64_t num_rows() const { return features.rows(); }
  // Bytes held, for a cache's budget.
  size_t bytes() const;
};

EncodedRows EncodeRows(const data::Schema& schema, const data::Table& rows);

// The rows at `indices` (a session step's batch), in that order.
EncodedRows SelectRows(const EncodedRows& rows, const std::vector<int64_t>& indices);

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_ENCODED_ROWS_H_
