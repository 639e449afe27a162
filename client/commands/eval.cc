// `dpcurator eval` and `eval images`: synthetic rows or images judged
// against real held-out ones. Neither talks to the server or sees a
// private row.
#include "client/commands/eval_report.h"

#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/methods/registry.h"
#include "client/proto_file.h"
#include "client/schema_file.h"
#include "client/text_upload.h"
#include "core/data/csv.h"
#include "core/data/idx.h"
#include "core/eval/cnn_classifier.h"
#include "core/eval/evaluator.h"
#include "core/eval/html_report.h"
#include "core/eval/image_judge.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

// DP-auto-GAN's metrics and issue 17's shape checks (core/eval/paper_metrics.h).
nlohmann::json PaperMetricsJson(const eval::PaperMetrics& m) {
  nlohmann::json out;
  if (m.dimension_wise.has_value()) {
    nlohmann::json columns = nlohmann::json::array();
    for (const auto& c : m.dimension_wise->columns) {
      columns.push_back({{"column", c.column},
                         {"metric", c.metric},
                         {"score", c.score},
                         {"constant_predictor", c.constant_predictor}});
    }
    out["dimension_wise_prediction"] = {{"columns", columns},
                                        {"mean_score", m.dimension_wise->mean_score},
                                        {"train_rows", m.dimension_wise->train_rows},
                                        {"test_rows", m.dimension_wise->test_rows}};
  }
  if (m.three_way.triples > 0) {
    out["three_way_marginals"] = {{"triples", m.three_way.triples},
                                  {"mean_l1", m.three_way.mean_l1},
                                  {"max_l1", m.three_way.max_l1},
                                  {"max_triple", m.three_way.max_triple}};
  }
  const auto& w = m.pca_wasserstein;
  out["pca_wasserstein"] = {{"score", w.score},
                            {"w1", w.w1},
                            {"explained_variance_ratio", w.explained_variance_ratio},
                            {"diameter", w.diameter},
                            {"sample_rows", w.sample_rows},
                            {"repetitions", w.repetitions}};
  nlohmann::json shape;
  shape["named"] = nlohmann::json::array();
  for (const auto& n : m.shape.named) {
    shape["named"].push_back({{"name", n.name}, {"real", n.reference}, {"value", n.value}});
  }
  shape["point_masses"] = nlohmann::json::array();
  for (const auto& p : m.shape.point_masses) {
    shape["point_masses"].push_back({{"column", p.column},
                                     {"value", p.value},
                                     {"real", p.reference_share},
                                     {"share", p.share}});
  }
  shape["dependencies"] = nlohmann::json::array();
  for (const auto& f : m.shape.dependencies) {
    shape["dependencies"].push_back({{"columns", {f.column_a, f.column_b}},
                                     {"pairs", f.pairs},
                                     {"agreement", f.agreement}});
  }
  shape["impossible_combinations"] = nlohmann::json::array();
  for (const auto& c : m.shape.impossible) {
    shape["impossible_combinations"].push_back(
        {{"columns", {c.column_a, c.column_b}}, {"empty_cells", c.empty_cells}, {"share", c.share}});
  }
  shape["impossible_mean_share"] = m.shape.impossible_mean_share;
  out["shape_checks"] = shape;
  return out;
}

nlohmann::json EvalJson(const eval::EvalReport& report) {
  nlohmann::json out;
  out["num_classes"] = report.num_classes;
  out["synthetic_rows"] = report.synthetic_rows;
  out["real_test_rows"] = report.real_test_rows;
  out["utility"] = nlohmann::json::array();
  for (const auto& row : report.utility) {
    out["utility"].push_back({{"classifier", row.classifier},
                              {"train_source", row.train_source},
                              {"train_rows", row.train_rows},
                              {"roc_auc", row.roc_auc},
                              {"pr_auc", row.pr_auc},
                              {"accuracy", row.accuracy},
                              {"macro_f1", row.macro_f1},
                              {"fit_seconds", row.fit_seconds},
                              {"single_class_training", row.single_class_training}});
  }
  if (report.fidelity.has_value()) {
    nlohmann::json columns = nlohmann::json::object();
    for (const auto& c : report.fidelity->columns) columns[c.column] = c.tv_distance;
    out["fidelity"] = {{"mean_tv_distance", report.fidelity->mean_tv_distance},
                       {"max_tv_distance", report.fidelity->max_tv_distance},
                       {"correlation_mean_abs_difference",
                        report.fidelity->correlation_mean_abs_difference},
                       {"tv_distance_by_column", columns}};
  }
  if (report.paper_metrics.has_value()) {
    out["paper_metrics"] = PaperMetricsJson(*report.paper_metrics);
  }
  if (report.real_train_paper_metrics.has_value()) {
    out["real_train_paper_metrics"] = PaperMetricsJson(*report.real_train_paper_metrics);
    // The paper's summary of the dimension-wise plot: how far the synthetic-
    // trained scores fall below the real-trained ones, on average.
    if (report.paper_metrics.has_value() && report.paper_metrics->dimension_wise.has_value() &&
        report.real_train_paper_metrics->dimension_wise.has_value()) {
      out["paper_metrics"]["dimension_wise_prediction"]["mean_gap_to_real"] =
          report.real_train_paper_metrics->dimension_wise->mean_score -
          report.paper_metrics->dimension_wise->mean_score;
    }
  }
  out["warnings"] = report.warnings;
  // TSTR at or below chance, or far below train-on-real (issue 38), as
  // eval::UtilityFlags words them; empty when none.
  out["tstr_flags"] = eval::UtilityFlags(report.utility);
  // How roc_auc and pr_auc average over the label's classes.
  out["auc_averaging"] = report.num_classes > 2 ? "macro_one_vs_rest" : "binary";
  return out;
}

// Synthetic images (an IDX pair from `sample --idx`) judged against real
// held-out ones: the papers' CNN over seeds, and logistic regression.
absl::Status RunEvalImages(const ParsedArgs& args) {
  auto seeds = args.GetInt("seeds");
  auto resize = args.GetInt("resize");
  auto classes = args.GetInt("classes");
  for (const absl::Status& s : {seeds.status(), resize.status(), classes.status()}) {
    if (!s.ok()) return s;
  }
  if (*classes < 2 || *classes > 256) return absl::InvalidArgumentError("--classes: 2 to 256");
  data::IdxImageOptions read;
  read.num_classes = static_cast<int>(*classes);
  // One prefix, or several (e.g. one per class collection) read as one set.
  absl::StatusOr<data::ImageSet> synthetic;
  for (absl::string_view prefix : absl::StrSplit(args.Get("synthetic"), ',', absl::SkipEmpty())) {
    auto part = data::ReadIdxImages(absl::StrCat(prefix, "-images-idx3-ubyte"),
                                    absl::StrCat(prefix, "-labels-idx1-ubyte"), read);
    if (!part.ok()) return part.status();
    if (!synthetic.ok()) {
      synthetic = std::move(part);
      continue;
    }
    if (part->height != synthetic->height || part->width != synthetic->width) {
      return absl::InvalidArgumentError(absl::StrCat("'", prefix, "' images are another size"));
    }
    synthetic->pixels.insert(synthetic->pixels.end(), part->pixels.begin(), part->pixels.end());
    synthetic->labels.insert(synthetic->labels.end(), part->labels.begin(), part->labels.end());
  }
  if (!synthetic.ok()) return absl::InvalidArgumentError("--synthetic names no IDX prefix");
  auto real = data::ReadIdxImages(args.Get("real-images"), args.Get("real-labels"), read);
  if (!real.ok()) return real.status();
  if (real->height != synthetic->height || real->width != synthetic->width) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "synthetic images are %dx%d but the real ones %dx%d", synthetic->height,
        synthetic->width, real->height, real->width));
  }
  eval::ImageJudgeOptions options;
  options.seeds = static_cast<int>(*seeds);
  options.resize = static_cast<int>(*resize);
  const bool json = args.Flag("json");
  options.progress = [&](int seed, double accuracy) {
    if (!json) std::fprintf(stderr, "CNN seed %d: accuracy %.4f\n", seed, accuracy);
  };
  auto judged = eval::JudgeImages(eval::ImageMatrix(*synthetic), synthetic->labels,
                                  eval::ImageMatrix(*real), real->labels,
                                  static_cast<int>(real->height), static_cast<int>(real->width),
                                  static_cast<int>(*classes), options);
  if (!judged.ok()) return judged.status();
  if (json) {
    nlohmann::json out = {{"synthetic_images", synthetic->size()},
                          {"real_test_images", real->size()},
                          {"cnn_accuracy", judged->cnn_accuracy},
                          {"cnn_mean", judged->cnn_mean},
                          {"cnn_sd", judged->cnn_sd}};
    if (judged->lr_accuracy.has_value()) {
      out["logistic_regression_accuracy"] = *judged->lr_accuracy;
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("trained on %lld synthetic images, tested on %lld real ones\n",
                static_cast<long long>(synthetic->size()), static_cast<long long>(real->size()));
    const std::string size =
        options.resize > 0 ? absl::StrFormat(", at %dx%d", options.resize, options.resize) : "";
    std::printf("CNN (papers' judge, %d seed(s)%s): accuracy %.2f%% +- %.2f\n", options.seeds,
                size.c_str(), 100 * judged->cnn_mean, 100 * judged->cnn_sd);
    if (judged->lr_accuracy.has_value()) {
      std::printf("logistic regression: accuracy %.2f%%\n", 100 * *judged->lr_accuracy);
    }
  }
  return absl::OkStatus();
}

absl::Status RunEval(const ParsedArgs& args) {
  v1::TableSchema schema_proto;
  if (args.Has("model")) {
    v1::GeneratorModel model;
    // A file of another kind, or from a method this client lacks, is named
    // as such rather than read as an empty schema.
    if (auto method = ReadModelFile(args.Get("model"), &model); !method.ok()) {
      return method.status();
    }
    schema_proto = model.schema();
  } else if (args.Has("schema")) {
    auto read = ReadEvalSchemaFile(args.Get("schema"));
    if (!read.ok()) return read.status();
    schema_proto = *read;
  } else {
    return absl::InvalidArgumentError("give --schema or --model");
  }
  auto schema = SchemaFromProto(schema_proto);
  if (!schema.ok()) return schema.status();
  // CSV or ARFF (by name); rows of the real files the schema cannot read
  // (undeclared categories, missing values in columns that are not
  // nullable) are counted and left out, not the end of the run (issue 25
  // item 2, issue 38).
  auto synthetic = ReadEvalFile(*schema, args.Get("synthetic"), /*real=*/false, nullptr);
  if (!synthetic.ok()) return synthetic.status();
  int64_t real_skipped = 0;
  int64_t real_train_skipped = 0;
  auto real = ReadEvalFile(*schema, args.Get("real"), /*real=*/true, &real_skipped);
  if (!real.ok()) return real.status();
  std::optional<data::Table> real_train;
  if (args.Has("real-train")) {
    auto loaded = ReadEvalFile(*schema, args.Get("real-train"), /*real=*/true,
                               &real_train_skipped);
    if (!loaded.ok()) return loaded.status();
    real_train = *std::move(loaded);
  }
  eval::EvalOptions options;
  auto report = eval::Evaluate(*schema, *synthetic, *real, options,
                               real_train.has_value() ? &*real_train : nullptr);
  if (!report.ok()) return report.status();
  if (args.Flag("json")) {
    nlohmann::json out = EvalJson(*report);
    out["real_rows_skipped"] = real_skipped;
    if (real_train.has_value()) out["real_train_rows_skipped"] = real_train_skipped;
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%s", FormatEvalReport(*report).c_str());
    if (report->paper_metrics.has_value()) {
      std::printf("%s", eval::FormatPaperMetrics(*report->paper_metrics,
                                                 report->real_train_paper_metrics.has_value()
                                                     ? &*report->real_train_paper_metrics
                                                     : nullptr)
                            .c_str());
    }
  }
  return absl::OkStatus();
}

}  // namespace

nlohmann::json EvalReportJson(const eval::EvalReport& report) { return EvalJson(report); }

absl::StatusOr<v1::TableSchema> ReadEvalSchemaFile(const std::string& path) {
  auto read = ReadSchemaForLocalUse(path);
  if (read.ok() || read.status().code() == absl::StatusCode::kNotFound) return read;
  // A model, a release or a table given as the schema is named, not
  // reported as bad JSON (issue 25 item 2).
  std::string bytes;
  if (!ReadFileBytes(path, &bytes)) return read;
  const TextFileKind text = DescribeTextFile(bytes, path);
  if (!text.what.empty() && text.what != "a schema file (JSON)") {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is ", text.what,
                                                   ", not a schema file",
                                                   text.hint.empty() ? "" : ". ", text.hint));
  }
  if (const std::string kind = DescribeFileKind(path); !kind.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is ", kind, ". --schema takes a schema file (JSON); `eval` "
                     "and `report` take a model file as --model ", path));
  }
  return read;
}

absl::StatusOr<data::Table> ReadEvalFile(const data::Schema& schema, const std::string& path,
                                         bool real, int64_t* skipped) {
  TextUploadOptions options;
  options.format = TextFormatOfPath(path);
  auto read = ReadLocalTable(schema, path, options, /*skip_unreadable=*/real);
  if (!read.ok()) {
    // A model or a release given where rows belong is named, not read as a
    // header with no such column (issue 25 item 2).
    if (const std::string kind = DescribeFileKind(path); !kind.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' is ", kind, ". --synthetic and --real take rows (CSV or ARFF)"));
    }
    return read.status();
  }
  if (read->rows_skipped > 0) {
    std::fprintf(stderr,
                 "%s: left out %lld of %lld rows the schema cannot read (%s); judged on the "
                 "other %lld\n",
                 path.c_str(), static_cast<long long>(read->rows_skipped),
                 static_cast<long long>(read->rows_skipped + read->table.num_rows()),
                 read->skipped_detail.c_str(), static_cast<long long>(read->table.num_rows()));
  }
  if (skipped != nullptr) *skipped = read->rows_skipped;
  return std::move(read->table);
}

std::string FormatEvalReport(const eval::EvalReport& report) {
  std::string out;
  absl::StrAppend(&out, absl::StrFormat("%-22s %-10s %8s %8s %9s %9s %8s\n", "classifier",
                                        "trained on", "rows", "ROC-AUC", "PR-AUC", "accuracy",
                                        "fit s"));
  for (const auto& row : report.utility) {
    absl::StrAppend(&out, absl::StrFormat("%-22s %-10s %8d %8.4f %9.4f %9.4f %8.2f%s\n",
                                          eval::HumanClassifierName(row.classifier),
                                          row.train_source, row.train_rows,
                                          row.roc_auc, row.pr_auc, row.accuracy, row.fit_seconds,
                                          row.single_class_training ? "  (single class!)" : ""));
  }
  if (!report.utility.empty() && report.num_classes > 2) {
    absl::StrAppend(&out, absl::StrFormat("ROC-AUC and PR-AUC: macro one-vs-rest means over the "
                                          "%d classes (chance: ROC-AUC 0.5)\n",
                                          report.num_classes));
  }
  for (const std::string& flag : eval::UtilityFlags(report.utility)) {
    absl::StrAppend(&out, "FLAG: ", flag, "\n");
  }
  if (report.fidelity.has_value()) {
    const auto& f = *report.fidelity;
    absl::StrAppend(&out, absl::StrFormat(
                              "marginals (synthetic vs real test): mean TV %.4f, max TV %.4f "
                              "(%s); pairwise correlation |diff| %.4f\n",
                              f.mean_tv_distance, f.max_tv_distance, f.max_tv_column,
                              f.correlation_mean_abs_difference));
  }
  if (report.real_train_fidelity.has_value()) {
    const auto& f = *report.real_train_fidelity;
    absl::StrAppend(&out, absl::StrFormat(
                              "reference (real train vs real test): mean TV %.4f, max TV %.4f; "
                              "correlation |diff| %.4f\n",
                              f.mean_tv_distance, f.max_tv_distance,
                              f.correlation_mean_abs_difference));
  }
  for (const auto& warning : report.warnings) absl::StrAppend(&out, "warning: ", warning, "\n");
  return out;
}


std::vector<Command> EvalCommands() {
  std::vector<Command> commands;
  commands.push_back(Command{
      "eval images",
      "judge synthetic images: the papers' CNN and logistic regression, tested on real ones",
      "Trains the evaluation CNN of DP-MERF and PEARL (Conv 32 k3 s2, dropout, Conv 64 k3 s2,\n"
      "dropout, linear; Adam 1e-3, batch 200, 5 epochs) on the synthetic images of --synthetic\n"
      "(an IDX pair from `dpcurator sample --idx PREFIX`) and reports its accuracy on the real\n"
      "held-out images (mean +- sd over --seeds), and multinomial logistic regression's.",
      {{"synthetic", "synthetic",
        "IDX prefix(es), comma-separated: PREFIX-images-idx3-ubyte, PREFIX-labels-idx1-ubyte"},
       {"real-images", "", "real held-out IDX images (e.g. t10k-images-idx3-ubyte.gz)", false, true},
       {"real-labels", "", "their IDX labels", false, true},
       {"classes", "10", "number of classes"},
       {"seeds", "5", "CNN seeds"},
       {"resize", "32", "the CNN sees images resized to this square size (0: as they are)"},
       {"json", "", "print JSON", true}},
      RunEvalImages});
  commands.push_back(Command{
      "eval",
      "train-on-synthetic, test-on-real utility and marginal fidelity",
      "Fits logistic regression and gradient-boosted trees on the synthetic rows and scores\n"
      "them on real held-out rows (ROC-AUC and PR-AUC from scores); per-column total variation\n"
      "distance and pairwise correlation difference; DP-auto-GAN's metrics (dimension-wise\n"
      "prediction, 3-way marginal 2*TV, 2-way PCA Wasserstein score) and the shape checks\n"
      "(point masses, one-to-one column pairs, level pairs absent from the real rows). With\n"
      "--real-train, each is also shown for the real training rows.",
      {{"synthetic", "synthetic.csv", "synthetic CSV"},
       {"real", "", "real held-out CSV or ARFF (read by its name)", false, true},
       {"real-train", "", "optional real training CSV or ARFF: adds the train-on-real baseline"},
       {"schema", "", "schema JSON (or --model)"},
       {"model", "", "take the schema from this model file"},
       {"json", "", "print JSON", true}},
      RunEval});
  return commands;
}

}  // namespace dpcurator::client
