#ifndef DPCURATOR_CLIENT_UPLOAD_H_
#define DPCURATOR_CLIENT_UPLOAD_H_

// Rows to a dataset on the server from a table in memory (`demo`), and the
// mapping of a server refusal back to a file line (text_upload.h streams
// CSV and ARFF files).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/connection.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// Uploads a table as text rows in chunks over one client stream. With
// `append`, rows equal to rows already stored are meant (the server refuses
// them otherwise: UploadRowsRequest.append).
absl::StatusOr<v1::UploadRowsResponse> UploadTable(Connection& connection,
                                                   const std::string& dataset_id,
                                                   const data::Schema& schema,
                                                   const data::Table& table,
                                                   int rows_per_message = 2000,
                                                   bool append = false);

// A server refusal that names "upload message M, row R" rewritten to start
// with "path:LINE: ", LINE the 1-based line of that row in the file (the
// header counted), from `row_lines` (the line of each row sent, in order).
// Other statuses come back unchanged. `first_rows_message` is the index of
// the stream's first message with rows (1 when an empty message opened it,
// as UploadTextFile's early refusal check does).
absl::Status CiteUploadLine(const absl::Status& status, const std::string& path,
                            const std::vector<int64_t>& row_lines, int rows_per_message,
                            int first_rows_message = 0);

// A warning for an image dataset too small for its budget, or nothing.
// Every one-shot release's noise, relative to the statistic it hides,
// shrinks as 1 / (rows x epsilon): the image benchmark's smallest working
// point is Fashion-MNIST's 60,000 images at epsilon 0.2 (rows x epsilon =
// 12,000; docs/benchmarks.md, Fashion-MNIST benchmark), and 200 images at epsilon 1
// (200) gave pure noise in a trial (issue 25). Below kImageRowsTimesEpsilon
// the upload says so, with the numbers.
inline constexpr double kImageRowsTimesEpsilon = 10000.0;
std::optional<std::string> ImageDataSizeWarning(int64_t rows, double epsilon_cap);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_UPLOAD_H_
