#ifndef DPCURATOR_CLIENT_UPLOAD_H_
#define DPCURATOR_CLIENT_UPLOAD_H_

// Rows to a dataset on the server: a table in memory, or a CSV or ARFF file
// streamed in chunks, each row checked locally first and a refusal mapped
// back to its file line. Shared by `upload` and `demo`.

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

// Streams a CSV file (header matched to the schema by name) to the server
// without holding the file in memory.
absl::StatusOr<v1::UploadRowsResponse> UploadCsv(Connection& connection,
                                                 const std::string& dataset_id,
                                                 const data::Schema& schema,
                                                 const std::string& csv_path,
                                                 int rows_per_message = 2000);

// Streams the data section of an ARFF file; the @attribute names are matched
// to the schema like a CSV header.
absl::StatusOr<v1::UploadRowsResponse> UploadArff(Connection& connection,
                                                  const std::string& dataset_id,
                                                  const data::Schema& schema,
                                                  const std::string& arff_path,
                                                  int rows_per_message = 2000);

// A server refusal that names "upload message M, row R" rewritten to start
// with "path:LINE: ", LINE the 1-based line of that row in the file (the
// header counted), from `row_lines` (the line of each row sent, in order).
// Other statuses come back unchanged.
absl::Status CiteUploadLine(const absl::Status& status, const std::string& path,
                            const std::vector<int64_t>& row_lines, int rows_per_message);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_UPLOAD_H_
