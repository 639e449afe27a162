// `dpcurator report`: one self-contained HTML page comparing synthetic rows
// with real held-out rows (issue 17 item 4): column shapes, pair trends,
// train-on-synthetic-test-on-real, and what the synthetic rows cost.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/commands/eval_report.h"
#include "client/connection.h"
#include "client/methods/registry.h"
#include "client/proto_file.h"
#include "client/schema_file.h"
#include "core/data/csv.h"
#include "core/eval/evaluator.h"
#include "core/eval/binary_metrics.h"
#include "core/eval/html_report.h"
#include "core/eval/quality_report.h"
#include "nlohmann/json.hpp"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

// Writes to a temporary name and renames, so an interrupted run never
// leaves half a report where the last good one was.
absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  const std::string temporary = absl::StrCat(path, ".tmp");
  {
    std::ofstream output(temporary, std::ios::binary | std::ios::trunc);
    output << text;
    if (!output) return absl::UnavailableError(absl::StrCat("cannot write '", temporary, "'"));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot move '", temporary, "' to '", path, "'"));
  }
  return absl::OkStatus();
}

std::string TodayUtc() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M UTC", &utc);
  return buffer;
}

// The relation a release artefact was made under, in words for the privacy
// officer who reads the page; an artefact that predates the field
// (RELATION_UNSPECIFIED) was made under add/remove. INVALID_ARGUMENT for a
// file that is no release.
absl::StatusOr<std::string> ReleaseRelation(const std::string& path, const v1::Release& release) {
  v1::NeighbouringRelation relation = v1::RELATION_UNSPECIFIED;
  switch (release.artefact_case()) {
    case v1::Release::kEmbedding:
      relation = release.embedding().relation();
      break;
    case v1::Release::kMst:
      relation = release.mst().relation();
      break;
    case v1::Release::kAim:
      relation = release.aim().relation();
      break;
    case v1::Release::kMarginals:
      relation = release.marginals().relation();
      break;
    case v1::Release::kCategoryFit:
      relation = release.category_fit().relation();
      break;
    case v1::Release::kPartitioned:
      if (release.partitioned().marginals_size() > 0) {
        relation = release.partitioned().marginals(0).relation();
      }
      break;
    case v1::Release::ARTEFACT_NOT_SET: {
      const std::string kind = DescribeFileKind(path);
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' is ", kind.empty() ? "not a release artefact" : kind,
          ". --release takes the file `dpcurator release --out` wrote"));
    }
  }
  return std::string(relation == v1::REPLACE_ONE ? "replace one row (REPLACE_ONE)"
                                                 : "add or remove one row (ADD_REMOVE)");
}

// The dataset's composed total from the server's ledger when the command
// has a server to ask (--server or --token, or their variables), else why
// not. Never fails the report: the page says what is unknown.
eval::DatasetTotal AskDatasetTotal(const ParsedArgs& args,
                                   const std::vector<eval::PrivacySpent>& releases) {
  eval::DatasetTotal total;
  std::vector<std::string> datasets;
  for (const eval::PrivacySpent& r : releases) {
    if (!r.dataset_id.empty() &&
        std::find(datasets.begin(), datasets.end(), r.dataset_id) == datasets.end()) {
      datasets.push_back(r.dataset_id);
    }
  }
  if (datasets.empty()) {
    total.unknown_reason = "no model names its dataset";
    return total;
  }
  if (datasets.size() > 1) {
    total.unknown_reason = absl::StrCat("the files come from ", datasets.size(),
                                        " datasets; each has its own total");
    return total;
  }
  if (!args.Has("server") && !args.Has("token")) {
    total.unknown_reason =
        "made offline; give --server and --token (or DPCURATOR_SERVER, DPCURATOR_TOKEN) to "
        "ask the server";
    return total;
  }
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) {
    total.unknown_reason = std::string(connection.status().message());
    return total;
  }
  v1::GetBudgetRequest request;
  request.set_dataset_id(datasets.front());
  request.set_page_size(1);  // the totals are on every page
  v1::BudgetReport budget;
  auto context = connection->NewContext();
  const grpc::Status status = connection->datasets().GetBudget(context.get(), request, &budget);
  if (!status.ok()) {
    const absl::Status error = RpcError(status, "budget");
    std::fprintf(stderr, "dpcurator: warning: the dataset's total is left unknown: %s\n",
                 std::string(error.message()).c_str());
    total.unknown_reason = absl::StrCat("the server did not answer: ", error.message());
    return total;
  }
  total.known = true;
  total.epsilon_spent = budget.epsilon_spent();
  total.epsilon_cap = budget.budget().epsilon();
  total.delta = budget.budget().delta();
  return total;
}

// Whether two models' schemas name the same columns in the same order: the
// rows of every compared file are read with the first model's schema.
bool SameColumnNames(const v1::TableSchema& a, const v1::TableSchema& b) {
  if (a.columns_size() != b.columns_size()) return false;
  for (int c = 0; c < a.columns_size(); ++c) {
    if (a.columns(c).name() != b.columns(c).name()) return false;
  }
  return true;
}

absl::Status RunReport(const ParsedArgs& args) {
  if (args.Has("model") == args.Has("schema")) {
    return absl::InvalidArgumentError(
        "give exactly one of --model (a trained model: its schema and privacy spent) or "
        "--schema (a schema file: compare two tables, e.g. real against real)");
  }
  eval::HtmlReportInput input;
  v1::TableSchema schema_proto;
  // One synthetic file, or several compared on one page (issue 26 item 4),
  // each labelled by --labels or its file name.
  const std::vector<std::string> synthetic_paths =
      absl::StrSplit(args.Get("synthetic"), ',', absl::SkipEmpty());
  if (synthetic_paths.empty()) return absl::InvalidArgumentError("--synthetic names no file");
  std::vector<std::string> labels;
  if (args.Has("labels")) {
    labels = absl::StrSplit(args.Get("labels"), ',', absl::SkipEmpty());
    if (labels.size() != synthetic_paths.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--labels names %d label(s) for %d --synthetic file(s); give one each, in order",
          labels.size(), synthetic_paths.size()));
    }
  } else {
    for (const std::string& path : synthetic_paths) {
      labels.push_back(std::filesystem::path(path).stem().string());
    }
  }
  // One row of the privacy section per file (issue 38: one release's epsilon
  // was shown for several files).
  for (size_t k = 0; k < synthetic_paths.size(); ++k) {
    eval::PrivacySpent row;
    row.label = labels[k];
    row.file = synthetic_paths[k];
    input.releases.push_back(std::move(row));
  }
  if (args.Has("model")) {
    // A model per --synthetic file, in order, or one for the first file.
    const std::vector<std::string> model_paths =
        absl::StrSplit(args.Get("model"), ',', absl::SkipEmpty());
    if (model_paths.size() > synthetic_paths.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--model names %d model(s) for %d --synthetic file(s); give at most one each, in "
          "order",
          model_paths.size(), synthetic_paths.size()));
    }
    for (size_t k = 0; k < model_paths.size(); ++k) {
      v1::GeneratorModel model;
      // The method that wrote the model (its file checked by the registry; a
      // file of another kind is named with the command that takes it).
      auto method = ReadModelFile(model_paths[k], &model);
      if (!method.ok()) return method.status();
      if (k == 0) {
        schema_proto = model.schema();
      } else if (!SameColumnNames(model.schema(), schema_proto)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--model '", model_paths[k], "' names other columns than '", model_paths[0],
            "': one report compares tables of one schema"));
      }
      eval::PrivacySpent& row = input.releases[k];
      row.method = std::string((*method)->name());
      row.dataset_id = model.dataset_id();
      row.epsilon = model.epsilon();
      row.delta = model.delta();
      // Session-trained models name their dataset where a release id would
      // be: the page lists releases only (issue 25 item 2).
      if (!model.release_id().empty() && model.release_id() != model.dataset_id()) {
        row.release_ids.push_back(model.release_id());
      }
    }
  } else {
    auto read = ReadEvalSchemaFile(args.Get("schema"));
    if (!read.ok()) return read.status();
    schema_proto = *read;
  }
  if (args.Has("release")) {
    // The artefacts the models were fitted to: they carry the relation (and,
    // for a multi-release model, every release id). The file is the one
    // `release --out` and `release get --out` write, a Release envelope;
    // read as a bare artefact it gave the dataset id as the release id and
    // lost the relation. Each goes to the file whose model names its id;
    // one that no model names goes to the first file.
    for (absl::string_view part : absl::StrSplit(args.Get("release"), ',', absl::SkipEmpty())) {
      const std::string path(part);
      v1::Release release;
      const absl::Status read = ReadProtoFile(path, &release);
      if (read.code() == absl::StatusCode::kNotFound) return read;
      if (!read.ok()) {
        // A model does not parse as a release: name it before the reader's
        // "truncated or damaged?".
        const std::string kind = DescribeFileKind(path);
        if (kind.empty()) return read;
        return absl::InvalidArgumentError(
            absl::StrCat("'", path, "' is ", kind,
                         ". --release takes the file `dpcurator release --out` wrote"));
      }
      auto relation = ReleaseRelation(path, release);
      if (!relation.ok()) return relation.status();
      const std::string& id = release.id();
      eval::PrivacySpent* row = &input.releases.front();
      for (eval::PrivacySpent& candidate : input.releases) {
        if (std::find(candidate.release_ids.begin(), candidate.release_ids.end(), id) !=
            candidate.release_ids.end()) {
          row = &candidate;
          break;
        }
      }
      row->relation = *relation;
      if (!id.empty() &&
          std::find(row->release_ids.begin(), row->release_ids.end(), id) ==
              row->release_ids.end()) {
        row->release_ids.push_back(id);
      }
    }
  }
  input.privacy = input.releases.front();
  bool any_release = false;
  for (const eval::PrivacySpent& r : input.releases) any_release |= r.epsilon > 0.0;
  if (any_release) input.dataset_total = AskDatasetTotal(args, input.releases);
  auto schema = SchemaFromProto(schema_proto);
  if (!schema.ok()) return schema.status();
  // CSV or ARFF by name, as `eval` reads them (issue 25 item 2); every file
  // is read before anything is scored, so a bad one fails fast.
  std::vector<data::Table> tables;
  for (const std::string& path : synthetic_paths) {
    auto table = ReadEvalFile(*schema, path, /*real=*/false, nullptr);
    if (!table.ok()) return table.status();
    tables.push_back(*std::move(table));
  }
  const data::Table* synthetic = &tables.front();
  int64_t real_skipped = 0;
  auto real = ReadEvalFile(*schema, args.Get("real"), /*real=*/true, &real_skipped);
  if (!real.ok()) return real.status();
  if (real_skipped > 0) {
    input.notes.push_back(absl::StrFormat(
        "%lld rows of %s cannot be read under the schema (an undeclared category, a missing "
        "value in a column that is not nullable, a bad cell) and were left out.",
        static_cast<long long>(real_skipped), args.Get("real")));
  }

  const bool tstr = schema->label_index().has_value() && !args.Flag("no-tstr");
  std::optional<data::Table> real_train;
  if (tstr && args.Has("real-train")) {
    auto loaded = ReadEvalFile(*schema, args.Get("real-train"), /*real=*/true, nullptr);
    if (!loaded.ok()) return loaded.status();
    real_train = *std::move(loaded);
  }
  for (size_t k = 0; k < tables.size(); ++k) {
    std::fprintf(stderr, "%s: scoring column shapes and pair trends...\n", labels[k].c_str());
    auto quality = eval::ComputeQualityReport(*schema, *real, tables[k]);
    if (!quality.ok()) return quality.status();
    eval::ComparedTable compared{labels[k], synthetic_paths[k], tables[k].num_rows(),
                                 quality->column_shapes, quality->column_pair_trends,
                                 quality->overall, {}};
    if (k == 0) input.quality = *std::move(quality);
    if (tstr) {
      std::fprintf(stderr, "%s: training the TSTR classifiers...\n", labels[k].c_str());
      eval::EvalOptions options;
      options.compute_paper_metrics = false;  // `dpcurator eval` shows them; the page has TSTR
      // The real-data reference rows once, with the first table.
      auto evaluated = eval::Evaluate(*schema, tables[k], *real, options,
                                      k == 0 && real_train.has_value() ? &*real_train : nullptr);
      if (!evaluated.ok()) return evaluated.status();
      compared.utility = evaluated->utility;
      if (k == 0) input.utility = evaluated->utility;
    }
    input.compared.push_back(std::move(compared));
  }
  if (input.compared.size() < 2) input.compared.clear();
  // Binary columns: DP-auto-GAN's dimension-wise probability always, and its
  // dimension-wise prediction when real training rows are given (a model
  // trained on them is the x of each point; papers/dp-auto-gan.md §3.2).
  // From three binary columns on (a table with a binary label and one other
  // flag, as Adult, gets no two-point scatter).
  constexpr size_t kMinBinaryColumnsForPlots = 3;
  if (eval::BinaryColumns(*schema).size() >= kMinBinaryColumnsForPlots) {
    auto probability = eval::DimensionWiseProbability(*schema, *real, *synthetic);
    if (!probability.ok()) return probability.status();
    input.binary_probability = *std::move(probability);
    if (args.Has("real-train")) {
      std::fprintf(stderr, "fitting the dimension-wise prediction of binary columns...\n");
      auto real_train = ReadEvalFile(*schema, args.Get("real-train"), /*real=*/true, nullptr);
      if (!real_train.ok()) return real_train.status();
      auto auroc = eval::DimensionWiseAurocOf(*schema, *real_train, *synthetic, *real,
                                              eval::DimensionWiseAurocOptions{});
      // FAILED_PRECONDITION: no column has both levels in all three tables,
      // so there is no plot to draw; the page leaves it out.
      if (auroc.ok()) {
        input.binary_auroc = *std::move(auroc);
      } else if (auroc.status().code() != absl::StatusCode::kFailedPrecondition) {
        return auroc.status();
      }
    }
  }
  input.notes.push_back(absl::StrFormat(
      "Synthetic: %s (%lld rows). Real held-out: %s (%lld rows). Made %s by dpcurator report.",
      synthetic_paths.front(), static_cast<long long>(synthetic->num_rows()), args.Get("real"),
      static_cast<long long>(real->num_rows()), TodayUtc()));
  const std::string out = args.Get("out");
  if (auto s = WriteTextFile(out, eval::RenderHtmlReport(*schema, input)); !s.ok()) return s;
  const eval::QualityReport& q = input.quality;
  if (args.Flag("json")) {
    nlohmann::json json = {{"out", out},
                           {"column_shapes", q.column_shapes},
                           {"column_pair_trends", q.column_pair_trends},
                           {"overall", q.overall},
                           {"pairs", q.pairs.size()},
                           {"pairs_skipped", q.pairs_skipped}};
    if (input.binary_probability.has_value()) {
      json["binary_probability_mean_gap"] = input.binary_probability->mean_abs_gap;
    }
    if (input.binary_auroc.has_value()) {
      json["binary_auroc_mean_gap"] = input.binary_auroc->scatter.mean_abs_gap;
    }
    json["tstr_flags"] = eval::UtilityFlags(input.utility);
    json["privacy"] = nlohmann::json::array();
    for (const eval::PrivacySpent& r : input.releases) {
      nlohmann::json row = {{"label", r.label}, {"file", r.file}};
      if (r.epsilon > 0.0) {
        row.update({{"method", r.method},
                    {"dataset_id", r.dataset_id},
                    {"epsilon", r.epsilon},
                    {"delta", r.delta},
                    {"release_ids", r.release_ids}});
        if (!r.relation.empty()) row["relation"] = r.relation;
      }
      json["privacy"].push_back(row);
    }
    if (input.dataset_total.known) {
      json["dataset_total"] = {{"epsilon_spent", input.dataset_total.epsilon_spent},
                               {"epsilon_cap", input.dataset_total.epsilon_cap},
                               {"delta", input.dataset_total.delta}};
    } else if (!input.dataset_total.unknown_reason.empty()) {
      json["dataset_total"] = {{"unknown", input.dataset_total.unknown_reason}};
    }
    if (!input.compared.empty()) {
      json["compared"] = nlohmann::json::array();
      for (const eval::ComparedTable& t : input.compared) {
        nlohmann::json roc_auc = nlohmann::json::object();
        for (const auto& r : t.utility) {
          if (r.train_source == "synthetic") roc_auc[r.classifier] = r.roc_auc;
        }
        std::vector<eval::ClassifierResult> judged = t.utility;
        for (const auto& r : input.utility) {
          if (r.train_source == "real") judged.push_back(r);
        }
        json["compared"].push_back({{"label", t.label},
                                    {"tstr_flags", eval::UtilityFlags(judged)},
                                    {"file", t.file},
                                    {"rows", t.rows},
                                    {"column_shapes", t.column_shapes},
                                    {"column_pair_trends", t.column_pair_trends},
                                    {"overall", t.overall},
                                    {"tstr_roc_auc", roc_auc}});
      }
    }
    std::printf("%s\n", json.dump(2).c_str());
  } else if (!input.compared.empty()) {
    for (const eval::ComparedTable& t : input.compared) {
      std::vector<eval::ClassifierResult> judged = t.utility;
      for (const auto& r : input.utility) {
        if (r.train_source == "real") judged.push_back(r);
      }
      const std::vector<std::string> flags = eval::UtilityFlags(judged);
      std::printf("%-12s Column Shapes %.1f%%, Column Pair Trends %.1f%%, overall %.1f%%%s\n",
                  t.label.c_str(), 100 * t.column_shapes, 100 * t.column_pair_trends,
                  100 * t.overall, flags.empty() ? "" : "  (TSTR FLAG, below)");
      for (const std::string& flag : flags) std::printf("  FLAG: %s\n", flag.c_str());
    }
    std::printf("wrote %s\n", out.c_str());
  } else {
    const std::vector<std::string> flags = eval::UtilityFlags(input.utility);
    std::printf("Column Shapes %.1f%%, Column Pair Trends %.1f%%, overall %.1f%%%s\n",
                100 * q.column_shapes, 100 * q.column_pair_trends, 100 * q.overall,
                flags.empty() ? "" : "  (TSTR FLAG, below)");
    for (const std::string& flag : flags) std::printf("FLAG: %s\n", flag.c_str());
    std::printf("wrote %s\n", out.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> ReportCommands() {
  return {Command{
      "report",
      "a self-contained HTML quality report: synthetic rows against real held-out rows",
      "Writes one HTML file (inline SVG, no scripts, opens offline) with SDMetrics-style\n"
      "scores (Column Shapes: 1 - KS or 1 - TV per column; Column Pair Trends: correlation\n"
      "or contingency similarity per pair), real-vs-synthetic histograms of every column,\n"
      "a pair-trend heatmap, the train-on-synthetic-test-on-real table, and the privacy\n"
      "spent (epsilon, delta, relation, release ids) from --model and --release.\n"
      "Several --synthetic files (e.g. one per method) add a table comparing them all;\n"
      "the other sections describe the first. Give a --model per file to list each\n"
      "file's release; with --server and --token the page also shows the dataset's\n"
      "composed total from the server's ledger (offline it says the total is unknown).\n"
      "A TSTR ROC-AUC at or near chance, or far below train-on-real, is flagged beside\n"
      "the scores.\n\n"
      "  dpcurator report --model aim.pb,mst.pb,merf.pb --real adult.test \\\n"
      "    --synthetic aim.csv,mst.csv,merf.csv --labels AIM,MST,DP-MERF",
      WithConnection({{"synthetic", "synthetic.csv",
        "synthetic CSV (`dpcurator sample`), or several, comma-separated, to compare"},
       {"labels", "", "a name per --synthetic file, comma-separated (default: the file names)"},
       {"real", "", "real held-out CSV or ARFF (by its name)", false, true},
       {"model", "",
        "the model each synthetic file came from (schema, epsilon, delta, release), "
        "comma-separated in --synthetic order (or one, for the first file)"},
       {"schema", "", "schema file instead of --model (no privacy section)"},
       {"release", "", "the release artefact(s) the model was fitted to, comma-separated: "
                       "adds the neighbouring relation"},
       {"real-train", "", "optional real training CSV: adds train-on-real baseline rows"},
       {"no-tstr", "", "leave out the classifiers (faster)", true},
       {"out", "report.html", "HTML file to write"},
       {"json", "", "print the scores as JSON", true}}),
      RunReport}};
}

}  // namespace dpcurator::client
