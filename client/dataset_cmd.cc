// Curator and analyst commands about datasets: create, list, upload, budget.
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/pipeline.h"
#include "client/schema_file.h"
#include "core/privacy/relation.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

absl::Status RunCreate(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto schema = ReadSchemaForPublishing(args.Get("schema"), args.Flag(kAcceptDataDerivedFlag));
  if (!schema.ok()) return schema.status();
  auto epsilon = args.GetDouble("epsilon");
  auto delta = args.GetDouble("delta");
  if (!epsilon.ok()) return epsilon.status();
  if (!delta.ok()) return delta.status();
  auto relation = privacy::ParseRelation(args.Get("relation"));
  if (!relation.has_value()) {
    return absl::InvalidArgumentError("--relation must be add-remove or replace-one");
  }
  v1::CreateDatasetRequest request;
  request.set_name(args.Get("name"));
  *request.mutable_schema() = *schema;
  request.mutable_budget()->set_epsilon(*epsilon);
  request.mutable_budget()->set_delta(*delta);
  request.set_relation(RelationToProto(*relation));
  v1::Dataset dataset;
  auto context = connection->NewContext();
  grpc::Status status = connection->datasets().CreateDataset(context.get(), request, &dataset);
  if (!status.ok()) return RpcError(status, "create dataset");
  if (args.Flag("json")) {
    std::printf("{\"dataset_id\": \"%s\"}\n", dataset.id().c_str());
  } else {
    std::printf("created dataset %s (%s), budget epsilon %g at delta %g, relation %s\n",
                dataset.id().c_str(), dataset.name().c_str(), dataset.budget().epsilon(),
                dataset.budget().delta(), v1::NeighbouringRelation_Name(dataset.relation()).c_str());
  }
  return absl::OkStatus();
}

absl::Status RunUpload(const ParsedArgs& args) {
  if (args.Has("csv") == args.Has("arff")) {
    return absl::InvalidArgumentError(
        "give exactly one of --csv FILE and --arff FILE (see dpcurator upload --help)");
  }
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  // The dataset's own schema decides how cells are read.
  v1::ListDatasetsResponse list;
  auto context = connection->NewContext();
  grpc::Status status =
      connection->datasets().ListDatasets(context.get(), v1::ListDatasetsRequest(), &list);
  if (!status.ok()) return RpcError(status, "list datasets");
  const v1::Dataset* dataset = nullptr;
  for (const auto& d : list.datasets()) {
    if (d.id() == args.Get("dataset")) dataset = &d;
  }
  if (dataset == nullptr) {
    return absl::NotFoundError(absl::StrCat("no dataset '", args.Get("dataset"), "'"));
  }
  auto schema = SchemaFromProto(dataset->schema());
  if (!schema.ok()) return schema.status();
  auto response = args.Has("csv")
                      ? UploadCsv(*connection, dataset->id(), *schema, args.Get("csv"))
                      : UploadArff(*connection, dataset->id(), *schema, args.Get("arff"));
  if (!response.ok()) return response.status();
  if (args.Flag("json")) {
    nlohmann::json out = {{"rows_accepted", response->rows_accepted()},
                          {"cells_clamped", response->cells_clamped()},
                          {"total_rows", response->total_rows()}};
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("uploaded %lld rows (%lld cells clamped to declared bounds); dataset has %lld rows\n",
              static_cast<long long>(response->rows_accepted()),
              static_cast<long long>(response->cells_clamped()),
              static_cast<long long>(response->total_rows()));
  return absl::OkStatus();
}

absl::Status RunList(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  v1::ListDatasetsResponse list;
  auto context = connection->NewContext();
  grpc::Status status =
      connection->datasets().ListDatasets(context.get(), v1::ListDatasetsRequest(), &list);
  if (!status.ok()) return RpcError(status, "list datasets");
  std::printf("%-38s %-20s %-12s %10s %10s %10s\n", "id", "name", "relation", "epsilon", "delta",
              "rows");
  for (const auto& d : list.datasets()) {
    std::printf("%-38s %-20s %-12s %10g %10g %10s\n", d.id().c_str(), d.name().c_str(),
                d.relation() == v1::REPLACE_ONE ? "replace-one" : "add-remove",
                d.budget().epsilon(), d.budget().delta(),
                d.row_count() > 0 ? absl::StrCat(d.row_count()).c_str() : "private");
  }
  return absl::OkStatus();
}

absl::Status RunBudget(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  v1::GetBudgetRequest request;
  request.set_dataset_id(args.Get("dataset"));
  v1::BudgetReport report;
  auto context = connection->NewContext();
  grpc::Status status = connection->datasets().GetBudget(context.get(), request, &report);
  if (!status.ok()) return RpcError(status, "budget");
  if (args.Flag("json")) {
    nlohmann::json out;
    out["dataset_id"] = report.dataset_id();
    out["epsilon_cap"] = report.budget().epsilon();
    out["delta"] = report.budget().delta();
    out["epsilon_spent"] = report.epsilon_spent();
    out["epsilon_remaining"] = report.epsilon_remaining();
    out["epsilon_rdp"] = report.epsilon_rdp();
    if (report.has_epsilon_exact()) out["epsilon_exact"] = report.epsilon_exact();
    if (report.has_epsilon_discrete_exact()) {
      out["epsilon_discrete_exact"] = report.epsilon_discrete_exact();
    }
    out["events"] = nlohmann::json::array();
    for (const auto& e : report.events()) {
      out["events"].push_back({{"id", e.id()},
                               {"release_id", e.release_id()},
                               {"kind", e.kind()},
                               {"description", e.description()},
                               {"epsilon_alone", e.epsilon_alone()},
                               {"refund_of", e.refund_of()}});
    }
    out["sessions"] = nlohmann::json::array();
    for (const auto& session : report.sessions()) {
      out["sessions"].push_back({{"session_id", session.id()},
                                 {"state", session.state()},
                                 {"steps_reserved", session.steps_reserved()},
                                 {"steps_used", session.steps_used()},
                                 {"epsilon_reserved", session.epsilon_reserved()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("dataset %s: spent epsilon %.4f of %.4f at delta %g, remaining %.4f\n",
              report.dataset_id().c_str(), report.epsilon_spent(), report.budget().epsilon(),
              report.budget().delta(), report.epsilon_remaining());
  std::string exact;
  if (report.has_epsilon_exact()) {
    exact = absl::StrFormat("; exact Gaussian composition %.4f", report.epsilon_exact());
  } else if (report.has_epsilon_discrete_exact()) {
    exact = absl::StrFormat("; the one discrete Gaussian release's own profile %.4f",
                            report.epsilon_discrete_exact());
  }
  std::printf("  (RDP conversion %.4f at order %g%s)\n", report.epsilon_rdp(),
              report.optimal_order(), exact.c_str());
  std::printf("\n%5s  %-20s  %-14s  %10s  %s\n", "event", "time (UTC)", "kind", "eps alone",
              "mechanism / release");
  for (const auto& e : report.events()) {
    char when[32];
    std::time_t t = e.created_unix();
    std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", std::gmtime(&t));
    std::printf("%5lld  %-20s  %-14s  %10.4f  %s  %s\n", static_cast<long long>(e.id()), when,
                e.kind().c_str(), e.epsilon_alone(), e.description().c_str(),
                e.release_id().c_str());
  }
  if (report.sessions_size() > 0) {
    std::printf("\nsessions (reservations; closing returns the steps not run)\n");
    std::printf("%-38s %-10s %10s %10s %12s\n", "session", "state", "reserved", "used",
                "eps reserved");
    for (const auto& session : report.sessions()) {
      std::printf("%-38s %-10s %10lld %10lld %12.4f\n", session.id().c_str(),
                  session.state().c_str(), static_cast<long long>(session.steps_reserved()),
                  static_cast<long long>(session.steps_used()), session.epsilon_reserved());
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> DatasetCommands() {
  std::vector<Command> commands;
  commands.push_back(Command{
      "datasets create",
      "register a dataset with its public schema, budget and neighbouring relation (curator)",
      "The schema file is JSON (docs/schema.md; `dpcurator schema draft` writes a first one):\n"
      "column types, declared bounds and categories. Nothing about the domain is ever learned\n"
      "from rows, so a schema still carrying \"data_derived\": true markers is refused unless\n"
      "--accept-data-derived says to publish those values as they are.",
      WithConnection({{"name", "", "dataset name", false, true},
                      {"schema", "", "schema JSON file", false, true},
                      {kAcceptDataDerivedFlag, "",
                       "publish bounds and categories that `schema draft` read from the data "
                       "(they stay marked data_derived otherwise, and are refused)",
                       true},
                      {"epsilon", "", "total epsilon budget (cap)", false, true},
                      {"delta", "1e-5", "delta of the budget"},
                      {"relation", "add-remove", "neighbouring relation of the budget", false, false, "",
                       {"add-remove", "replace-one"}},
                      {"json", "", "print JSON", true}}),
      RunCreate});
  commands.push_back(Command{"datasets list", "list datasets (curator, analyst)",
                             "Row counts are shown to curators, and to analysts under replace-one.",
                             WithConnection({}), RunList});
  commands.push_back(Command{
      "upload", "stream a CSV or ARFF file's rows into a dataset (curator)",
      "The header (CSV) or the @attribute names (ARFF) are matched to the schema by column\n"
      "name; extra columns are ignored. Every row is checked before it is sent: a bad row\n"
      "stops the upload with FILE:LINE (1-based, header counted) and the column named; the\n"
      "rows before it are stored. Uploads are refused once a release has been made.",
      WithConnection({{"dataset", "", "dataset id", false, true},
                      {"csv", "", "CSV file with a header line (or --arff)"},
                      {"arff", "", "ARFF file: its @data section is uploaded (or --csv)"},
                      {"json", "", "print JSON (docs/json.md)", true}}),
      RunUpload});
  commands.push_back(Command{
      "budget", "spent and remaining epsilon, and the ledger's event history",
      "Spent epsilon is the composed bound the ledger uses (the smaller of the RDP conversion\n"
      "and, while every event is a plain Gaussian, the exact analytic composition).",
      WithConnection({{"dataset", "", "dataset id", false, true}, {"json", "", "print JSON", true}}),
      RunBudget});
  return commands;
}

}  // namespace dpcurator::client
