#ifndef DPCURATOR_CLIENT_UPLOAD_H_
#define DPCURATOR_CLIENT_UPLOAD_H_

// Rows to a dataset on the server from a table in memory (`demo`), and the
// mapping of a server refusal back to a file line (text_upload.h streams
// CSV and ARFF files).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/connection.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// Uploads a table as text rows in chunks over one client stream.
absl::StatusOr<v1::UploadRowsResponse> UploadTable(Connection& connection,
                                                   const std::string& dataset_id,
                                                   const data::Schema& schema,
                                                   const data::Table& table,
                                                   int rows_per_message = 2000);

// A server refusal that names "upload message M, row R" rewritten to start
// with "path:LINE: ", LINE the 1-based line of that row in the file (the
// header counted), from `row_lines` (the line of each row sent, in order).
// Other statuses come back unchanged.
absl::Status CiteUploadLine(const absl::Status& status, const std::string& path,
                            const std::vector<int64_t>& row_lines, int rows_per_message);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_UPLOAD_H_
