#ifndef DPCURATOR_CORE_DATA_STEWARD_H_
#define DPCURATOR_CORE_DATA_STEWARD_H_

// The "steward" table (issue 38): a generated stand-in for a data steward's
// small real table, the case where AIM and MST failed a new user: about
// 2,000 rows, 12 columns, a 124-level Zipf-like categorical, a heavy-tailed
// money column whose bounds span five decades, numerics with 10-30% missing
// cells, and a 7-class label that depends on three features. The model is
// documented in docs/demo-data.md ("The steward table").

#include <cstdint>
#include <string>
#include <vector>

#include "core/data/schema.h"
#include "core/data/table.h"

namespace dpcurator::data {

// Rows of `dpcurator demo --table steward` by default (training rows; the
// held-out split is drawn with another seed).
inline constexpr int64_t kStewardDefaultRows = 2000;

// The declared schema, label "outcome": the columns StewardMissingColumns()
// names are nullable numerics (a missing cell is its own level in every
// method: no imputation), the others are not.
Schema StewardSchema();

// The numeric columns that GenerateStewardTable(..., missing = true) leaves
// empty in some rows, with the share of rows each leaves empty.
std::vector<std::pair<std::string, double>> StewardMissingColumns();

// n rows from the model, reproducible from `seed`. With `missing`, the
// columns of StewardMissingColumns() hold NaN (a missing cell) in their
// share of rows, independently of everything else (missing completely at
// random); without it every cell is drawn. Both fit StewardSchema().
Table GenerateStewardTable(int64_t num_rows, uint64_t seed, bool missing = true);

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_STEWARD_H_
