// Trainer-side commands: fit a generator from a release, sample, evaluate.
// None of them talks to the server or sees a private row.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/autogan_model.h"
#include "client/commands.h"
#include "client/progress.h"
#include "client/schema_file.h"
#include "client/pipeline.h"
#include "core/data/csv.h"
#include "core/data/idx.h"
#include "core/data/png_folder.h"
#include "core/train/image_generator.h"
#include "core/eval/cnn_classifier.h"
#include "core/eval/evaluator.h"
#include "core/eval/image_judge.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

absl::StatusOr<std::vector<int>> ParseHidden(const std::string& text) {
  std::vector<int> hidden;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int width;
    if (!absl::SimpleAtoi(part, &width) || width <= 0 || width > 8192) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hidden expects comma-separated layer widths, got '", text, "'"));
    }
    hidden.push_back(width);
  }
  return hidden;
}

absl::StatusOr<train::EmbeddingTrainerOptions> TrainerOptionsFromArgs(const ParsedArgs& args) {
  train::EmbeddingTrainerOptions options;
  auto steps = args.GetInt("steps");
  auto batch = args.GetInt("batch-size");
  auto lr = args.GetDouble("learning-rate");
  auto seed = args.GetInt("seed");
  auto noise_dim = args.GetInt("noise-dim");
  auto hidden = ParseHidden(args.Get("hidden"));
  for (const absl::Status& s : {steps.status(), batch.status(), lr.status(), seed.status(),
                                noise_dim.status(), hidden.status()}) {
    if (!s.ok()) return s;
  }
  options.steps = static_cast<int>(*steps);
  options.batch_size = static_cast<int>(*batch);
  options.learning_rate = *lr;
  options.seed = static_cast<uint64_t>(*seed);
  options.generator.noise_dim = static_cast<int>(*noise_dim);
  options.generator.hidden = *hidden;
  return options;
}

// The image trainers' defaults where the tabular ones do not fit (a flag
// given on the command line wins), from the papers' image settings and our
// Fashion-MNIST tuning at epsilon 1 (bench/fmnist.cc records it):
//  - DP-MERF one-shot: the FC generator, 2000 steps of 500 images
//    (76.7% CNN accuracy; the conv generator 75.6% at 4x the time);
//  - PEARL: ConvCondGen with the paper's schedule (pearl.md Sec. 4: 3000
//    steps of 100, a critic step every 5), the critic at Adam 1e-3 (at the
//    code's 1e-2 its weights collapse onto a few frequencies: 64.0% vs
//    75.6%);
//  - DP-MERF minibatch (--session-steps): the FC generator, one update per
//    released step, 2000 images per update;
//  - Adam 1e-2 for the generators (both papers).
struct ImageTrainDefaults {
  const char* generator;
  int steps;  // 0: one per session step
  int batch_size;
};
constexpr ImageTrainDefaults kImageMerf{"fc", 2000, 500};
constexpr ImageTrainDefaults kImagePearl{"conv", 3000, 100};
constexpr ImageTrainDefaults kImageMerfSteps{"fc", 0, 2000};
constexpr double kImageLearningRate = 1e-2;
constexpr int kImagePearlCriticEvery = 5;  // pearl.md Sec. 4 [code], images
constexpr double kImagePearlCriticLearningRate = 1e-3;

absl::Status RunTrainImages(const ParsedArgs& args, const v1::Release& release,
                            const std::string& method) {
  train::ImagePearlOptions options;
  auto steps = args.GetInt("steps");
  auto batch = args.GetInt("batch-size");
  auto lr = args.GetDouble("learning-rate");
  auto seed = args.GetInt("seed");
  for (const absl::Status& s : {steps.status(), batch.status(), lr.status(), seed.status()}) {
    if (!s.ok()) return s;
  }
  const bool session_steps = args.Has("session-steps");
  const ImageTrainDefaults& defaults =
      method == "pearl" ? kImagePearl : (session_steps ? kImageMerfSteps : kImageMerf);
  options.steps = args.IsDefault("steps") ? defaults.steps : static_cast<int>(*steps);
  options.batch_size =
      args.IsDefault("batch-size") ? defaults.batch_size : static_cast<int>(*batch);
  if (options.steps == 0) {
    auto count = CountSessionSteps(args.Get("session-steps"));
    if (!count.ok()) return count.status();
    options.steps = static_cast<int>(std::min<int64_t>(*count, 1 << 30));
  }
  options.learning_rate = args.IsDefault("learning-rate") ? kImageLearningRate : *lr;
  options.seed = static_cast<uint64_t>(*seed);
  const std::string generator = args.Has("generator") ? args.Get("generator") : defaults.generator;
  auto architecture = train::ParseImageGeneratorArchitecture(generator);
  if (!architecture.ok()) return architecture.status();
  options.generator.architecture = *architecture;
  if (!args.IsDefault("hidden") || !args.IsDefault("noise-dim")) {
    return absl::InvalidArgumentError(
        "--hidden and --noise-dim shape table generators; for images choose --generator fc|conv");
  }
  StepProgress progress(absl::StrFormat("train %s (images, %s generator)", method, generator),
                        options.steps, args.Flag("quiet"));
  options.progress = progress.Callback();
  absl::StatusOr<v1::GeneratorModel> model;
  if (method == "pearl") {
    options.use_critic = !args.Flag("no-critic");
    auto every = args.GetInt("critic-every");
    auto critic_lr = args.GetDouble("critic-learning-rate");
    if (!every.ok()) return every.status();
    if (!critic_lr.ok()) return critic_lr.status();
    options.generator_steps_per_critic_step =
        args.IsDefault("critic-every") ? kImagePearlCriticEvery : static_cast<int>(*every);
    options.critic_learning_rate =
        args.IsDefault("critic-learning-rate") ? kImagePearlCriticLearningRate : *critic_lr;
    model = TrainImagePearlModel(release, options);
  } else if (args.Has("session-steps")) {
    model = TrainImageMerfFromSessionSteps(args.Get("session-steps"), options);
  } else {
    model = TrainImageMerfModel(release, options);
  }
  if (!model.ok()) return model.status();
  if (auto s = WriteProtoFile(*model, args.Get("out")); !s.ok()) return s;
  if (args.Has("session-steps")) {
    std::printf(
        "image model written to %s (session steps of %s; its privacy is the session's: "
        "`dpcurator session get`; training used no budget)\n",
        args.Get("out").c_str(), args.Get("session-steps").c_str());
  } else {
    std::printf(
        "image model written to %s (release %s, epsilon %.4f; training used no budget)\n",
        args.Get("out").c_str(), model->release_id().c_str(), model->epsilon());
  }
  std::printf("look at it: dpcurator sample --model %s --png grid.png\n", args.Get("out").c_str());
  return absl::OkStatus();
}

absl::Status RunTrain(const ParsedArgs& args, const std::string& method) {
  v1::Release release;
  if (args.Has("session-steps")) {
    if (!args.IsDefault("release")) {
      return absl::InvalidArgumentError("give one of --release and --session-steps");
    }
    return RunTrainImages(args, release, method);
  }
  if (auto s = ReadProtoFile(args.Get("release"), &release); !s.ok()) return s;
  if (release.has_embedding() && IsImageSchema(release.embedding().schema())) {
    return RunTrainImages(args, release, method);
  }
  auto options = TrainerOptionsFromArgs(args);
  if (!options.ok()) return options.status();
  StepProgress progress(absl::StrCat("train ", method), options->steps, args.Flag("quiet"));
  options->progress = progress.Callback();
  absl::StatusOr<v1::GeneratorModel> model;
  if (method == "pearl") {
    PearlOptions pearl;
    pearl.use_critic = !args.Flag("no-critic");
    auto every = args.GetInt("critic-every");
    auto critic_lr = args.GetDouble("critic-learning-rate");
    if (!every.ok()) return every.status();
    if (!critic_lr.ok()) return critic_lr.status();
    pearl.generator_steps_per_critic_step = static_cast<int>(*every);
    pearl.critic_learning_rate = *critic_lr;
    model = TrainPearlModel(release, *options, pearl);
  } else {
    model = TrainMerfModel(release, *options);
  }
  if (!model.ok()) return model.status();
  if (auto s = WriteProtoFile(*model, args.Get("out")); !s.ok()) return s;
  std::printf("model written to %s (release %s, epsilon %.4f; training used no budget)\n",
              args.Get("out").c_str(), model->release_id().c_str(), model->epsilon());
  return absl::OkStatus();
}

// A local-DP image model (one collection: one class, or unlabelled): a PNG
// grid of its images, 10 a row, and/or an IDX pair labelled --label.
absl::Status RunSampleSinkhornImages(const ParsedArgs& args, const v1::GeneratorModel& model,
                                     int64_t rows, uint64_t seed) {
  auto label = args.GetInt("label");
  if (!label.ok()) return label.status();
  if (*label < 0 || *label > 255) return absl::InvalidArgumentError("--label must be 0 to 255");
  auto per_class = args.GetInt("grid-per-class");
  if (!per_class.ok()) return per_class.status();
  const int64_t grid = args.Has("png") ? 10 * *per_class : 0;
  auto table = SampleModel(model, std::max(rows, grid), seed);
  if (!table.ok()) return table.status();
  auto schema = SchemaFromProto(model.schema());
  if (!schema.ok()) return schema.status();
  const data::Column& column = schema->column(*schema->image_index());
  data::ImageSet images;
  images.height = column.image_height;
  images.width = column.image_width;
  images.num_classes = static_cast<int>(*label) + 1;
  images.pixels.reserve(table->pixels.size());
  for (uint8_t level : table->pixels) images.pixels.push_back(static_cast<float>(level) / 255.0f);
  images.labels.assign(static_cast<size_t>(table->num_rows()), static_cast<int>(*label));
  if (args.Has("png")) {
    const std::vector<float> first(
        images.pixels.begin(),
        images.pixels.begin() + static_cast<std::ptrdiff_t>(grid * images.pixels_per_image()));
    if (auto s = data::WritePngGrid(args.Get("png"), first, static_cast<int>(images.height),
                                    static_cast<int>(images.width), 10);
        !s.ok()) {
      return s;
    }
    std::printf("%lld images written to %s (10 a row)\n", static_cast<long long>(grid),
                args.Get("png").c_str());
  }
  if (args.Has("idx")) {
    images.pixels.resize(static_cast<size_t>(rows * images.pixels_per_image()));
    images.labels.resize(static_cast<size_t>(rows));
    const std::string prefix = args.Get("idx");
    const std::string images_path = absl::StrCat(prefix, "-images-idx3-ubyte");
    const std::string labels_path = absl::StrCat(prefix, "-labels-idx1-ubyte");
    if (auto s = data::WriteIdxImages(images_path, labels_path, images); !s.ok()) return s;
    std::printf("%lld synthetic images (label %lld) written to %s and %s\n",
                static_cast<long long>(rows), static_cast<long long>(*label),
                images_path.c_str(), labels_path.c_str());
  }
  return absl::OkStatus();
}

// An image model's samples: a PNG grid (one row per class) and/or an IDX
// pair of balanced, interleaved labels.
absl::Status RunSampleImages(const ParsedArgs& args, const v1::GeneratorModel& model,
                             int64_t rows, uint64_t seed) {
  if (!args.Has("png") && !args.Has("idx")) {
    return absl::InvalidArgumentError(
        "this is an image model: give --png GRID.png (one row of images per class) and/or "
        "--idx PREFIX (PREFIX-images-idx3-ubyte and PREFIX-labels-idx1-ubyte, --rows images)");
  }
  if (model.method() == "sinkhorn") return RunSampleSinkhornImages(args, model, rows, seed);
  if (args.Has("png")) {
    auto per_class = args.GetInt("grid-per-class");
    if (!per_class.ok()) return per_class.status();
    if (*per_class < 1 || *per_class > 100) {
      return absl::InvalidArgumentError("--grid-per-class must be in [1, 100]");
    }
    std::vector<float> grid;
    int height = 0, width = 0, classes = model.num_classes();
    for (int c = 0; c < classes; ++c) {
      auto images = SampleImageModel(model, *per_class, seed + static_cast<uint64_t>(c), c);
      if (!images.ok()) return images.status();
      grid.insert(grid.end(), images->pixels.begin(), images->pixels.end());
      height = static_cast<int>(images->height);
      width = static_cast<int>(images->width);
    }
    if (auto s = data::WritePngGrid(args.Get("png"), grid, height, width,
                                    static_cast<int>(*per_class));
        !s.ok()) {
      return s;
    }
    std::printf("%d classes x %lld images written to %s (one row per class)\n", classes,
                static_cast<long long>(*per_class), args.Get("png").c_str());
  }
  if (args.Has("idx")) {
    auto images = SampleImageModel(model, rows, seed);
    if (!images.ok()) return images.status();
    const std::string prefix = args.Get("idx");
    const std::string images_path = absl::StrCat(prefix, "-images-idx3-ubyte");
    const std::string labels_path = absl::StrCat(prefix, "-labels-idx1-ubyte");
    if (auto s = data::WriteIdxImages(images_path, labels_path, *images); !s.ok()) return s;
    std::printf("%lld synthetic images written to %s and %s (labels balanced)\n",
                static_cast<long long>(rows), images_path.c_str(), labels_path.c_str());
  }
  return absl::OkStatus();
}

absl::Status RunSample(const ParsedArgs& args) {
  v1::GeneratorModel model;
  if (auto s = ReadProtoFile(args.Get("model"), &model); !s.ok()) return s;
  auto rows = args.GetInt("rows");
  auto seed = args.GetInt("seed");
  if (!rows.ok()) return rows.status();
  if (!seed.ok()) return seed.status();
  if (!model.image_architecture().empty() || IsImageSchema(model.schema())) {
    return RunSampleImages(args, model, *rows, static_cast<uint64_t>(*seed));
  }
  if (args.Has("png") || args.Has("idx")) {
    return absl::InvalidArgumentError("--png and --idx are for image models; this one samples "
                                      "table rows (--out FILE.csv)");
  }
  auto table = SampleModel(model, *rows, static_cast<uint64_t>(*seed));
  if (!table.ok()) return table.status();
  auto schema = SchemaFromProto(model.schema());
  if (!schema.ok()) return schema.status();
  const std::string out = args.Get("out");
  if (out == "-") {
    data::WriteCsv(*schema, *table, &std::cout);
  } else {
    std::ofstream output(out);
    if (!output) return absl::UnavailableError(absl::StrCat("cannot write '", out, "'"));
    data::WriteCsv(*schema, *table, &output);
    std::printf("%lld synthetic rows written to %s\n", static_cast<long long>(table->num_rows()),
                out.c_str());
  }
  return absl::OkStatus();
}

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
    if (auto s = ReadProtoFile(args.Get("model"), &model); !s.ok()) return s;
    schema_proto = model.schema();
  } else if (args.Has("schema")) {
    auto read = ReadSchemaForLocalUse(args.Get("schema"));
    if (!read.ok()) return read.status();
    schema_proto = *read;
  } else {
    return absl::InvalidArgumentError("give --schema or --model");
  }
  auto schema = SchemaFromProto(schema_proto);
  if (!schema.ok()) return schema.status();
  auto synthetic = data::ReadCsvFile(*schema, args.Get("synthetic"));
  if (!synthetic.ok()) return synthetic.status();
  auto real = data::ReadCsvFile(*schema, args.Get("real"));
  if (!real.ok()) return real.status();
  std::optional<data::Table> real_train;
  if (args.Has("real-train")) {
    auto loaded = data::ReadCsvFile(*schema, args.Get("real-train"));
    if (!loaded.ok()) return loaded.status();
    real_train = *std::move(loaded);
  }
  eval::EvalOptions options;
  auto report = eval::Evaluate(*schema, *synthetic, *real, options,
                               real_train.has_value() ? &*real_train : nullptr);
  if (!report.ok()) return report.status();
  if (args.Flag("json")) {
    std::printf("%s\n", EvalJson(*report).dump(2).c_str());
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

std::vector<OptionSpec> TrainerOptionSpecs() {
  return {{"steps", "1000", "generator updates"},
          {"batch-size", "1024", "generated rows per update"},
          {"learning-rate", "0.002", "Adam learning rate (decays linearly to a tenth)"},
          {"hidden", "128,128", "generator hidden layer widths"},
          {"noise-dim", "16", "generator latent dimension"},
          {"seed", "1", "seed of the generator's public randomness"},
          {"generator", "",
           "image releases: generator, fc or conv (PEARL's ConvCondGen); default fc for "
           "DP-MERF, conv for PEARL"},
          {"quiet", "", "no progress line", true}};
}

}  // namespace

std::vector<OptionSpec> TrainerOptionSpecsForDemo() { return TrainerOptionSpecs(); }
absl::StatusOr<train::EmbeddingTrainerOptions> TrainerOptionsForDemo(const ParsedArgs& args) {
  return TrainerOptionsFromArgs(args);
}
nlohmann::json EvalReportJson(const eval::EvalReport& report) { return EvalJson(report); }

std::vector<Command> ModelCommands() {
  std::vector<Command> commands;
  std::vector<OptionSpec> train_options = {
      {"release", "release.pb", "rff_embedding artefact from `dpcurator release`"},
      {"out", "model.pb", "model file to write"}};
  for (auto& o : TrainerOptionSpecs()) train_options.push_back(o);
  std::vector<OptionSpec> merf_options = train_options;
  merf_options.push_back({"session-steps", "",
                          "images: the step artefacts of an rff_embedding session (`session "
                          "step --out FILE`) instead of --release: DP-MERF's minibatch variant"});
  commands.push_back(Command{
      "train merf",
      "fit a generator to a DP-MERF release (no budget, no private data)",
      "Minimises the distance between the released class-conditional mean embedding and the\n"
      "generator's (Harder et al. 2021, Alg. 1), with labels from the released class weights.\n"
      "Image releases fit a class-conditional image generator (--generator), labels balanced;\n"
      "with --session-steps each update fits the next step's fresh noisy embedding of a\n"
      "Poisson-sampled batch (dp-merf.md 1.6 (a)), cycling through the file.",
      merf_options, [](const ParsedArgs& args) { return RunTrain(args, "merf"); }});
  std::vector<OptionSpec> pearl_options = train_options;
  pearl_options[0] = {"release", "release.pb", "charfn_embedding artefact from `dpcurator release`"};
  pearl_options.push_back({"critic-every", "10", "generator steps per critic step"});
  pearl_options.push_back({"critic-learning-rate", "0.01", "critic Adam learning rate"});
  pearl_options.push_back({"no-critic", "", "keep frequency weights uniform (ablation)", true});
  commands.push_back(Command{
      "train pearl",
      "fit a generator to a PEARL release with the adversarial critic (no budget)",
      "Matches the released class-conditional characteristic-function embedding, with a\n"
      "critic that re-weights frequencies (Liew et al. 2022, Alg. 1; per-dimension precisions,\n"
      "self-normalised weights), one critic step every --critic-every generator steps.",
      pearl_options, [](const ParsedArgs& args) { return RunTrain(args, "pearl"); }});
  for (auto& command : AutoganCommands()) commands.push_back(std::move(command));
  commands.push_back(Command{
      "sample", "draw synthetic rows in the original schema (CSV), or images (PNG grid, IDX)",
      "Table models write CSV (--out). Image models write a PNG grid with one row of\n"
      "--grid-per-class images per class (--png), and/or --rows images with balanced labels\n"
      "as an IDX pair for tools (--idx PREFIX).",
      {{"model", "model.pb", "model file"},
       {"rows", "10000", "number of rows (images for --idx)"},
       {"seed", "7", "sampling seed"},
       {"out", "synthetic.csv", "output CSV ('-' for stdout); table models"},
       {"png", "", "image models: PNG grid to write"},
       {"grid-per-class", "10", "image models: images per class in the --png grid"},
       {"idx", "", "image models: IDX prefix to write"},
       {"label", "0", "local-DP image models (one per class collection): the IDX label"}},
      RunSample});
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
       {"real", "", "real held-out CSV (header line)", false, true},
       {"real-train", "", "optional real training CSV: adds the train-on-real baseline rows"},
       {"schema", "", "schema JSON (or --model)"},
       {"model", "", "take the schema from this model file"},
       {"json", "", "print JSON", true}},
      RunEval});
  return commands;
}

}  // namespace dpcurator::client
