#include "client/upload.h"

#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/data/csv.h"
#include "core/util/status_macros.h"

namespace dpcurator::client {
namespace {

absl::StatusOr<v1::UploadRowsResponse> FinishUpload(
    std::unique_ptr<grpc::ClientWriter<v1::UploadRowsRequest>>& writer,
    v1::UploadRowsResponse& response, int64_t rows_sent) {
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return RpcError(status, "upload refused");
  // A message the server cannot decode ends its stream like a normal end
  // (gRPC's sync API cannot tell them apart), so the count is the only
  // witness of a cut-short upload.
  if (response.rows_accepted() != rows_sent) {
    return absl::DataLossError(absl::StrCat(
        "the server stored ", response.rows_accepted(), " of the ", rows_sent,
        " rows sent (the stream was cut short); check the rows after the last stored one "
        "and upload them again"));
  }
  return response;
}

}  // namespace

absl::StatusOr<v1::UploadRowsResponse> UploadTable(Connection& connection,
                                                   const std::string& dataset_id,
                                                   const data::Schema& schema,
                                                   const data::Table& table,
                                                   int rows_per_message, bool append) {
  auto context = connection.NewContext();
  v1::UploadRowsResponse response;
  auto writer = connection.datasets().UploadRows(context.get(), &response);
  v1::UploadRowsRequest message;
  message.set_dataset_id(dataset_id);
  message.set_append(append);
  for (int64_t i = 0; i < table.num_rows(); ++i) {
    auto* row = message.add_rows();
    for (int c = 0; c < schema.num_columns(); ++c) {
      row->add_cells(schema.FormatCell(c, table.cells(i, c)));
    }
    if (message.rows_size() == rows_per_message || i + 1 == table.num_rows()) {
      if (!writer->Write(message)) break;  // the server ended the stream: Finish says why
      message.Clear();
    }
  }
  return FinishUpload(writer, response, table.num_rows());
}

absl::Status CiteUploadLine(const absl::Status& status, const std::string& path,
                            const std::vector<int64_t>& row_lines, int rows_per_message,
                            int first_rows_message) {
  const absl::string_view text = status.message();
  constexpr absl::string_view kMarker = "upload message ";
  const size_t at = text.find(kMarker);
  if (at == absl::string_view::npos) return status;
  long long message_index = -1;
  long long row_index = -1;
  const std::string tail(text.substr(at + kMarker.size()));
  if (std::sscanf(tail.c_str(), "%lld, row %lld", &message_index, &row_index) != 2 ||
      message_index < first_rows_message || row_index < 0 || row_index >= rows_per_message) {
    return status;
  }
  const long long global = (message_index - first_rows_message) * rows_per_message + row_index;
  if (global >= static_cast<long long>(row_lines.size())) return status;
  return absl::Status(status.code(),
                      absl::StrCat(path, ":", row_lines[global], ": ", status.message()));
}

std::optional<std::string> ImageDataSizeWarning(int64_t rows, double epsilon_cap) {
  const double product = static_cast<double>(rows) * epsilon_cap;
  if (!(product < kImageRowsTimesEpsilon)) return std::nullopt;
  return absl::StrFormat(
      "warning: %lld images under a budget of epsilon %g: a release's noise shrinks as "
      "1 / (images x epsilon), here %.0f; below about %.0f expect images that are mostly "
      "noise (Fashion-MNIST's 60,000 at epsilon 0.2 is 12,000). Upload more images, or "
      "judge the first model before spending more of the budget",
      static_cast<long long>(rows), epsilon_cap, product, kImageRowsTimesEpsilon);
}

}  // namespace dpcurator::client
