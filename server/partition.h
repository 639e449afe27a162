#ifndef DPCURATOR_SERVER_PARTITION_H_
#define DPCURATOR_SERVER_PARTITION_H_

// Partitioned sessions (issue 27 item 2; docs/privacy.md 3.7): the checks
// made before admission, and the rows one part's steps read.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/privacy/events.h"
#include "core/release/encoded_rows.h"

namespace dpcurator::server {

// Before admission (a refusal charges nothing): the partition is by a
// public function of one row over declared values, and every part is an
// add/remove mechanism of its own rows. Refused unless
//  - the dataset's relation is ADD_REMOVE (FAILED_PRECONDITION): session
//    steps under REPLACE_ONE are fixed-size samples of a public n, and a
//    part's size is not public (a replaced row may change parts);
//  - the schema declares a label column (FAILED_PRECONDITION): its declared
//    categories are the public label set; a schema without one has no
//    declared partition;
//  - `column` is that label column (INVALID_ARGUMENT): it is the one column
//    the schema declares as a partition key (a per-column flag for other
//    columns is not in the schema yet);
//  - every value is one of its declared categories, each named once
//    (INVALID_ARGUMENT); the values are never looked up in the rows.
// Returns each value's level (its index among the declared categories), in
// the order given. Messages name the column and values the caller sent,
// never anything from the rows.
absl::StatusOr<std::vector<int32_t>> ResolvePartition(const data::Schema& schema,
                                                      privacy::NeighbouringRelation relation,
                                                      const std::string& column,
                                                      const std::vector<std::string>& values);

// The rows of part `level`: those whose label is `level`, in row order. A
// total function of the rows: an empty part is zero rows, and the step
// proceeds on it (its divisor is public, never the part's size).
release::EncodedRows RowsOfPart(const release::EncodedRows& rows, int32_t level);

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_PARTITION_H_
