#include "client/upload.h"

#include <cstdio>
#include <fstream>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/data/arff.h"
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
                                                   int rows_per_message) {
  auto context = connection.NewContext();
  v1::UploadRowsResponse response;
  auto writer = connection.datasets().UploadRows(context.get(), &response);
  v1::UploadRowsRequest message;
  message.set_dataset_id(dataset_id);
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
                            const std::vector<int64_t>& row_lines, int rows_per_message) {
  const absl::string_view text = status.message();
  constexpr absl::string_view kMarker = "upload message ";
  const size_t at = text.find(kMarker);
  if (at == absl::string_view::npos) return status;
  long long message_index = -1;
  long long row_index = -1;
  const std::string tail(text.substr(at + kMarker.size()));
  if (std::sscanf(tail.c_str(), "%lld, row %lld", &message_index, &row_index) != 2 ||
      message_index < 0 || row_index < 0 || row_index >= rows_per_message) {
    return status;
  }
  const long long global = message_index * rows_per_message + row_index;
  if (global >= static_cast<long long>(row_lines.size())) return status;
  return absl::Status(status.code(),
                      absl::StrCat(path, ":", row_lines[global], ": ", status.message()));
}

namespace {

// One record and its 1-based line; false at the end of the file.
using RecordSource = std::function<absl::StatusOr<bool>(std::vector<std::string>*, int64_t*)>;

// Streams records whose fields are named by `header` (matched to the schema
// by name). Every row is checked on this side first (the server checks
// again), so a bad cell is reported as path:line before anything after it is
// sent; a refusal by the server is mapped back to its line too.
absl::StatusOr<v1::UploadRowsResponse> UploadRecords(Connection& connection,
                                                     const std::string& dataset_id,
                                                     const data::Schema& schema,
                                                     const std::string& path,
                                                     const std::vector<std::string>& header,
                                                     const RecordSource& next,
                                                     int rows_per_message) {
  auto mapping = data::MapHeader(schema, header);
  if (!mapping.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":1: ", mapping.status().message()));
  }
  auto context = connection.NewContext();
  v1::UploadRowsResponse response;
  auto writer = connection.datasets().UploadRows(context.get(), &response);
  v1::UploadRowsRequest message;
  message.set_dataset_id(dataset_id);
  std::vector<int64_t> row_lines;
  std::vector<std::string> fields;
  // Ends the stream after a local error: what was sent is stored (or the
  // server's refusal says why not).
  auto abort = [&](const std::string& error) -> absl::Status {
    if (message.rows_size() > 0) writer->Write(message);
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (!status.ok()) {
      return CiteUploadLine(RpcError(status, "upload refused"), path, row_lines,
                            rows_per_message);
    }
    const int64_t stored = response.rows_accepted();
    return absl::InvalidArgumentError(absl::StrCat(
        error, " (", stored, stored == 1 ? " row before it is" : " rows before it are",
        " stored; fix the line and upload the rows from it on, e.g. in a file with the same "
        "header)"));
  };
  int64_t rows_sent = 0;
  while (true) {
    int64_t line = 0;
    auto more = next(&fields, &line);
    if (!more.ok()) return abort(std::string(more.status().message()));
    if (*more) {
      if (fields.size() != header.size()) {
        return abort(absl::StrCat(path, ":", line, ": row has ", fields.size(),
                                  " fields, the header has ", header.size(),
                                  "; quote fields that contain the delimiter"));
      }
      auto* row = message.add_rows();
      for (int c = 0; c < schema.num_columns(); ++c) {
        const std::string& cell = fields[(*mapping)[c]];
        if (auto parsed = schema.ParseCell(c, cell); !parsed.ok()) {
          message.mutable_rows()->RemoveLast();
          return abort(absl::StrCat(path, ":", line, ": ", parsed.status().message()));
        }
        row->add_cells(cell);
      }
      row_lines.push_back(line);
      ++rows_sent;
    }
    if ((message.rows_size() == rows_per_message || !*more) && message.rows_size() > 0) {
      if (!writer->Write(message)) break;  // the server ended the stream: Finish says why
      message.Clear();
    }
    if (!*more) break;
  }
  auto finished = FinishUpload(writer, response, rows_sent);
  if (!finished.ok()) return CiteUploadLine(finished.status(), path, row_lines, rows_per_message);
  return finished;
}

}  // namespace

absl::StatusOr<v1::UploadRowsResponse> UploadCsv(Connection& connection,
                                                 const std::string& dataset_id,
                                                 const data::Schema& schema,
                                                 const std::string& csv_path,
                                                 int rows_per_message) {
  std::ifstream input(csv_path);
  if (!input) return absl::NotFoundError(absl::StrCat("cannot open '", csv_path, "'"));
  data::CsvRecordReader reader(&input, {});
  std::vector<std::string> header;
  auto has_header = reader.Next(&header);
  if (!has_header.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(csv_path, ": ", has_header.status().message()));
  }
  if (!*has_header) return absl::InvalidArgumentError(absl::StrCat(csv_path, ": empty file"));
  return UploadRecords(
      connection, dataset_id, schema, csv_path, header,
      [&](std::vector<std::string>* fields, int64_t* line) -> absl::StatusOr<bool> {
        auto more = reader.Next(fields);
        if (!more.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(csv_path, ": ", more.status().message()));
        }
        *line = reader.line_number();
        return *more;
      },
      rows_per_message);
}

absl::StatusOr<v1::UploadRowsResponse> UploadArff(Connection& connection,
                                                  const std::string& dataset_id,
                                                  const data::Schema& schema,
                                                  const std::string& arff_path,
                                                  int rows_per_message) {
  std::ifstream input(arff_path);
  if (!input) return absl::NotFoundError(absl::StrCat("cannot open '", arff_path, "'"));
  data::ArffReader reader(&input, arff_path);
  DPC_ASSIGN_OR_RETURN(data::ArffHeader arff, reader.ReadHeader());
  std::vector<std::string> header;
  for (const auto& attribute : arff.attributes) header.push_back(attribute.name);
  return UploadRecords(
      connection, dataset_id, schema, arff_path, header,
      [&](std::vector<std::string>* fields, int64_t* line) -> absl::StatusOr<bool> {
        auto more = reader.Next(fields);
        *line = reader.line_number();
        return more;
      },
      rows_per_message);
}

}  // namespace dpcurator::client
