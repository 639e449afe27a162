// The DP-kernel unit (issue 16 item 4): DP-kernel on a kernel_witness
// session. Each step sends the generator's M points (and labels) to the
// server and gets back the noisy witness's values and gradients there
// (docs/privacy.md 2.10); the MMD loss and the generator update are
// post-processing (core/train/kernel_trainer.h). The model is the tabular
// generator of `train merf` for tables and its fc image generator (issue
// 14) for images, so `sample` and `eval` read it unchanged (method
// of this unit).
#include "client/methods/kernel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli.h"
#include "client/methods/generator_model.h"
#include "client/methods/label_warning.h"
#include "client/oracles/kernel_oracle.h"
#include "client/model_package.h"
#include "client/proto_file.h"
#include "client/progress.h"
#include "core/data/encoder.h"
#include "core/nn/adam.h"
#include "core/release/kernel_witness.h"
#include "core/train/kernel_trainer.h"
#include "core/util/shard_pool.h"
#include "core/util/status_macros.h"
#include "core/train/image_generator.h"
#include "core/train/image_kernel_generator.h"
#include "core/train/tabular_generator.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

constexpr absl::string_view kKernelName = "kernel";

// The tabular generator of DP-MERF as the kernel trainer's PointGenerator:
// encoded rows in [0, 1]^d (sigmoid numerics, softmax categorical blocks),
// labels drawn uniformly (the conditional variant's generated labels,
// dp-kernel-frdp.md sec. 2), Adam on dL/dY through the heads and the MLP.
class TabularKernelGenerator final : public train::PointGenerator {
 public:
  TabularKernelGenerator(train::TabularGenerator generator, nn::Adam adam, bool conditional)
      : generator_(std::move(generator)),
        adam_(std::move(adam)),
        conditional_(conditional),
        grad_(Eigen::VectorXd::Zero(generator_.num_parameters())) {}

  void Sample(int count, PublicRng* rng, Eigen::MatrixXd* points,
              Eigen::VectorXi* labels) override {
    Eigen::MatrixXd z(count, generator_.noise_dim());
    rng->FillNormal(z);
    const int classes = generator_.num_classes();
    Eigen::VectorXi drawn(classes > 1 ? count : 0);
    for (Eigen::Index i = 0; i < drawn.size(); ++i) {
      drawn(i) = static_cast<int>(rng->UniformInt(static_cast<uint64_t>(classes)));
    }
    *points = generator_.Forward(z, drawn, &workspace_);
    *labels = conditional_ ? drawn : Eigen::VectorXi();
  }

  void Update(const Eigen::MatrixXd& point_gradients) override {
    grad_.setZero();
    generator_.Backward(point_gradients, &workspace_, &grad_);
    // A non-finite gradient (never expected: the answer is checked finite
    // by its size and the loss is smooth) leaves the parameters unchanged.
    status_.Update(adam_.Step(generator_.parameters(), grad_));
  }

  const train::TabularGenerator& generator() const { return generator_; }
  const absl::Status& status() const { return status_; }

 private:
  train::TabularGenerator generator_;
  nn::Adam adam_;
  bool conditional_;
  train::GeneratorWorkspace workspace_;
  Eigen::VectorXd grad_;
  absl::Status status_;
};

// The session's own charge and the dataset's total after it, on `out`
// (stdout; stderr under --json; nothing under --quiet, which the demo sets
// for its --json report). The model records the session's epsilon for all
// T reserved steps: exact when every step ran, an upper bound otherwise
// (the unused steps were refunded).
void PrintSessionCharge(std::FILE* out, const v1::Session& closed) {
  std::fprintf(out,
               "session %s: %lld of %lld steps, epsilon %.4f for the session (at delta); "
               "dataset total spent %.4f\n",
               closed.id().c_str(), static_cast<long long>(closed.steps_used()),
               static_cast<long long>(closed.steps_reserved()), closed.epsilon_reserved(),
               closed.epsilon_spent_total());
}

// The session options both variants share: dataset, key, Poisson rate
// m / n (n the caller's public row guess), epsilon and T. For the parallel
// variant these are each part's, at the full epsilon: the group's charge is
// one part's (docs/privacy.md 3.7).
KernelSessionOptions KernelCommonSessionOptions(const KernelRun& run) {
  KernelSessionOptions session;
  session.dataset_id = run.dataset_id;
  session.idempotency_key = run.key.empty() ? NewIdempotencyKey() : run.key;
  session.sampling_rate = std::min(1.0, run.batch / static_cast<double>(run.rows_guess));
  session.epsilon = run.epsilon;
  session.steps = run.steps;
  return session;
}

// One progress line for the classes of the parallel variant training at
// once: steps summed over the classes, and how many have finished.
class ParallelClassProgress {
 public:
  ParallelClassProgress(const std::string& label, int classes, int total_steps, bool quiet)
      : classes_(classes),
        progress_(absl::StrCat("train kernel, ", classes, " classes of ", label, " in parallel"),
                  total_steps, quiet),
        update_(progress_.Callback()) {
    progress_.set_note(absl::StrCat("classes done 0 / ", classes_));
  }
  // A step of one class; `class_done` on its last.
  void Step(double loss, bool class_done) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++steps_;
    if (class_done) progress_.set_note(absl::StrCat("classes done ", ++done_, " / ", classes_));
    update_(steps_, loss);
  }

 private:
  const int classes_;
  StepProgress progress_;
  std::function<void(int, double)> update_;
  std::mutex mutex_;
  int steps_ = 0;
  int done_ = 0;
};

// A class's oracle that stops (Aborted) once another class has failed, so
// that a failure ends the whole run at the next step instead of after every
// running class has trained to its end.
class StoppableKernelOracle final : public train::KernelWitnessOracle {
 public:
  StoppableKernelOracle(KernelOracle* oracle, const std::atomic<bool>* stop)
      : oracle_(oracle), stop_(stop) {}
  absl::StatusOr<train::KernelWitnessAnswer> Step(const Eigen::MatrixXd& points,
                                                  const Eigen::VectorXi& labels) override {
    if (stop_->load()) return absl::AbortedError("stopped: another class failed");
    return oracle_->Step(points, labels);
  }
  std::vector<double> bandwidths() const { return oracle_->bandwidths(); }

 private:
  KernelOracle* oracle_;
  const std::atomic<bool>* stop_;
};

// The parallel variant (issue 27; dp-kernel-frdp.md sec. 2, "Parallel
// variant"; docs/privacy.md 2.10, 3.7): one unconditional kernel_witness
// session per declared class, opened as ONE admission (its charge is one
// part's under add/remove), and one unconditional image generator trained
// on each, in turn. The model holds the K generators (class_generators);
// `sample` draws each label's images from its class's generator, so the
// labels are balanced. Each part's session: Poisson rate q = batch / rows
// over its own rows, and the public divisor batch / K (q times the
// expected part size rows / K: the class sizes are not public).
absl::StatusOr<v1::GeneratorModel> TrainKernelParallel(
    Connection& analyst, const KernelRun& run, const data::Schema& schema,
    train::ImageGeneratorArchitecture architecture) {
  const int classes = schema.num_classes();
  const int max_points = release::KernelWitnessKind::MaxQueryPoints(false, classes);
  if (run.points < 1 || run.points > max_points) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--points must be in [1, ", max_points, "] for --variant parallel (one "
        "Gaussian-process factor per class and step), got ", run.points));
  }
  KernelSessionOptions session = KernelCommonSessionOptions(run);
  session.kernel.set_conditional(false);
  session.kernel.set_expected_batch_size(std::max(1.0, run.batch / classes));
  session.kernel.set_max_points(run.points);
  const data::Column& label = schema.column(*schema.label_index());
  std::vector<std::string> values;
  auto oracles = KernelOracle::OpenPartitioned(&analyst, session, label.name, &values);
  if (!oracles.ok()) return oracles.status();
  if (static_cast<int>(oracles->size()) != classes) {
    return absl::DataLossError("the server opened another number of parts than the classes");
  }
  for (const KernelOracle& oracle : *oracles) {
    if (oracle.session().state() != "OPEN") {
      return absl::FailedPreconditionError(absl::StrCat(
          "session ", oracle.session().id(), " of --key '", session.idempotency_key, "' is ",
          oracle.session().state(), " (the group's epsilon ", oracle.session().epsilon_reserved(),
          " was charged); nothing more is charged. Train again with a new --key"));
    }
  }
  const data::Column& image = schema.column(*schema.image_index());
  ModelSource source;
  source.schema = run.schema;
  source.schema_fingerprint = schema.FingerprintHex();
  source.delta = run.delta;
  // The classes train at once, one per hardware thread (a class's step is
  // the server's witness then the client's update, so one class at a time
  // leaves a core idle on a two-core machine). Each class has its own
  // session, seed and generator, so the models do not depend on the order
  // the classes run in. Every session is closed after all trained, in class
  // order; on a failure none is, so the same --key resumes every class.
  std::vector<int> class_steps(static_cast<size_t>(classes));
  int total_steps = 0;
  for (int c = 0; c < classes; ++c) {
    const v1::Session& member = (*oracles)[static_cast<size_t>(c)].session();
    class_steps[static_cast<size_t>(c)] =
        static_cast<int>(member.steps_reserved() - member.steps_used());
    total_steps += class_steps[static_cast<size_t>(c)];
  }
  ParallelClassProgress progress(label.name, classes, total_steps, run.quiet);
  std::vector<std::optional<v1::GeneratorModel>> generators(static_cast<size_t>(classes));
  std::vector<double> final_losses(static_cast<size_t>(classes), 0.0);
  std::mutex failure_mutex;
  absl::Status failure;
  std::atomic<bool> failed{false};
  const auto train_class = [&](int c) -> absl::Status {
    StoppableKernelOracle oracle(&(*oracles)[static_cast<size_t>(c)], &failed);
    train::KernelTrainerOptions options;
    options.steps = class_steps[static_cast<size_t>(c)];
    options.points_per_step = run.points;
    options.seed = run.seed * 1000 + static_cast<uint64_t>(c);
    train::ImageGeneratorOptions image_options;
    image_options.architecture = architecture;
    image_options.code_dim = train::kImageKernelCodeDim;
    image_options.height = image.image_height;
    image_options.width = image.image_width;
    image_options.num_classes = 1;  // unconditional: the part is one class
    image_options.seed = options.seed;
    train::ImageKernelGeneratorOptions kernel_options;
    kernel_options.average_decay = run.average_decay;
    auto point_generator =
        train::ImageKernelGenerator::Create(image_options, run.learning_rate, kernel_options);
    if (!point_generator.ok()) return point_generator.status();
    const auto on_step = [&](const train::KernelTrainerProgress& p) {
      final_losses[static_cast<size_t>(c)] = p.loss;
      progress.Step(p.loss, p.step == options.steps);
    };
    DPC_RETURN_IF_ERROR(train::TrainKernelGenerator(options, oracle.bandwidths(), &oracle,
                                                    &*point_generator, on_step));
    DPC_RETURN_IF_ERROR(point_generator->status());
    point_generator->UseAverage(run.points);
    const train::ImageGenerator& g = point_generator->generator();
    v1::GeneratorModel generator;
    generator.set_image_architecture(
        train::ImageGeneratorArchitectureName(g.options().architecture));
    generator.set_code_dim(g.options().code_dim);
    generator.set_num_classes(1);
    for (float value : g.parameters()) generator.add_parameters(value);
    for (float value : g.running_statistics()) generator.add_running_statistics(value);
    generators[static_cast<size_t>(c)] = std::move(generator);
    return absl::OkStatus();
  };
  {
    ShardPool pool(static_cast<int>(
        std::min<unsigned>(static_cast<unsigned>(classes),
                           std::max(1u, std::thread::hardware_concurrency()))));
    pool.Run(classes, [&](int c) {
      if (failed.load()) return;
      absl::Status s = train_class(c);
      if (s.ok()) return;
      std::lock_guard<std::mutex> lock(failure_mutex);
      // The first failure is the one to report, with its class (a declared
      // label value): the classes stopped by it fail with
      // StoppableKernelOracle's Aborted after it is recorded.
      if (failure.ok()) {
        failure = absl::Status(s.code(), absl::StrCat("class '", values[static_cast<size_t>(c)],
                                                      "': ", s.message()));
      }
      failed.store(true);
    });
  }
  if (!failure.ok()) return failure;
  int64_t steps_run = 0;
  std::optional<v1::Session> last;
  for (int c = 0; c < classes; ++c) {
    auto closed = (*oracles)[static_cast<size_t>(c)].Close();
    if (!closed.ok()) return closed.status();
    steps_run += closed->steps_used();
    (*generators[static_cast<size_t>(c)]).set_steps(static_cast<int>(closed->steps_used()));
    last = *closed;
  }
  const double final_loss = final_losses.back();
  // The group's one charge (one part's T steps), settled at the last close.
  source.epsilon = last->epsilon_reserved();
  if (!run.quiet) {
    std::printf("%d sessions partitioned by %s: %lld steps in all, epsilon %.4f for the group "
                "(one part's, at delta); dataset total spent %.4f\n",
                classes, label.name.c_str(), static_cast<long long>(steps_run),
                last->epsilon_reserved(), last->epsilon_spent_total());
  }
  v1::GeneratorModel model = PackageModel(kKernelName, source, {}, nn::Activation::kRelu,
                                          Eigen::VectorXd(), static_cast<int>(run.steps),
                                          final_loss);
  model.clear_activation();
  model.set_dataset_id(run.dataset_id);
  model.set_image_architecture(generators.front()->image_architecture());
  model.set_code_dim(generators.front()->code_dim());
  model.set_num_classes(classes);
  for (std::optional<v1::GeneratorModel>& generator : generators) {
    *model.add_class_generators() = std::move(*generator);
  }
  return model;
}

absl::StatusOr<int64_t> IntFlag(const ParsedArgs& args, const char* name, int64_t fallback) {
  if (!args.Has(name)) return fallback;
  return args.GetInt(name);
}
absl::StatusOr<double> DoubleFlag(const ParsedArgs& args, const char* name, double fallback) {
  if (!args.Has(name)) return fallback;
  return args.GetDouble(name);
}

absl::StatusOr<TrainResult> RunTrainKernel(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto found = FindDataset(&*connection, args.Get("dataset"));
  if (!found.ok()) return found.status();
  const v1::Dataset* dataset = &*found;
  KernelRun run;
  run.dataset_id = dataset->id();
  run.schema = dataset->schema();
  run.delta = dataset->budget().delta();
  run.rows_guess = dataset->row_count();
  if (args.Has("rows")) {
    auto rows = args.GetInt("rows");
    if (!rows.ok()) return rows.status();
    run.rows_guess = *rows;
  }
  auto epsilon = args.GetDouble("epsilon");
  if (!epsilon.ok()) return epsilon.status();
  run.epsilon = *epsilon;
  run.variant = args.Has("variant") ? args.Get("variant") : "";
  auto steps = IntFlag(args, "steps", run.steps);
  auto batch = DoubleFlag(args, "batch", run.batch);
  auto points = IntFlag(args, "points", run.points);
  auto learning_rate = DoubleFlag(args, "lr", run.learning_rate);
  auto average = DoubleFlag(args, "average", run.average_decay);
  auto seed = IntFlag(args, "seed", 1);
  for (const absl::Status& s : {steps.status(), batch.status(), points.status(),
                                learning_rate.status(), average.status(), seed.status()}) {
    if (!s.ok()) return s;
  }
  // A given flag must be valid: 0 would silently mean "the default".
  if (args.Has("steps") && *steps < 1) return absl::InvalidArgumentError("--steps must be >= 1");
  if (args.Has("points") && *points < 1) {
    return absl::InvalidArgumentError("--points must be >= 1");
  }
  if (args.Has("lr") && !(*learning_rate > 0)) {
    return absl::InvalidArgumentError("--lr must be positive");
  }
  if (args.Has("average") && !(*average >= 0 && *average < 1)) {
    return absl::InvalidArgumentError(
        "--average must be in [0, 1): the decay per step of the parameter average (0: off)");
  }
  run.steps = *steps;
  run.batch = *batch;
  run.points = static_cast<int>(std::clamp<int64_t>(*points, 0, 1 << 20));
  run.learning_rate = *learning_rate;
  run.average_decay = *average;
  run.generator = args.Has("generator") ? args.Get("generator") : "";
  run.seed = static_cast<uint64_t>(*seed);
  run.key = args.Has("key") ? args.Get("key") : "";
  run.quiet = args.Flag("quiet");
  run.json = args.Flag("json");
  auto model = TrainKernelModel(*connection, run);
  if (!model.ok()) return model.status();
  TrainResult result;
  result.message = absl::StrFormat("model written to %s (%s%s, epsilon %g, delta %g)\n",
                                   args.Get("out"), kKernelName,
                                   model->image_architecture().empty() ? "" : ", images",
                                   model->epsilon(), model->delta());
  // Issue 38: rows x epsilon too small for the label. A session's steps
  // carry no count, so the rows are the public guess (--rows) or the public
  // row count that set the sampling rate.
  if (!run.schema.label().empty()) {
    if (auto warning = LabelRowsWarning(kKernelName, static_cast<double>(run.rows_guess),
                                        run.epsilon)) {
      absl::StrAppend(&result.message, *warning, "\n");
    }
  }
  result.model = *std::move(model);
  return result;
}

}  // namespace

absl::StatusOr<v1::GeneratorModel> TrainKernelModel(Connection& analyst,
                                                     const KernelRun& requested) {
  auto schema = SchemaFromProto(requested.schema);
  if (!schema.ok()) return schema.status();
  const bool images = schema->image_index().has_value();
  // Fill the defaults of the dataset's kind (kernel.h).
  KernelRun run = requested;
  const bool parallel = run.variant == "parallel";
  if (parallel && run.points == 0) run.points = train::kImageKernelParallelPoints;
  if (run.steps == 0) run.steps = images ? train::kImageKernelSteps : kTableKernelSteps;
  if (run.batch == 0.0) run.batch = images ? train::kImageKernelBatch : kTableKernelBatch;
  if (run.points == 0) run.points = images ? train::kImageKernelPoints : kTableKernelPoints;
  if (run.learning_rate == 0.0) {
    run.learning_rate = images ? train::kImageKernelLearningRate : kTableKernelLearningRate;
  }
  if (run.average_decay < 0.0) {
    run.average_decay = images ? train::kImageKernelAverageDecay : 0.0;
  }
  if (!images && (!run.generator.empty() || run.average_decay > 0.0)) {
    return absl::InvalidArgumentError(
        "--generator and --average are for image datasets; this dataset is a table");
  }
  absl::StatusOr<train::ImageGeneratorArchitecture> architecture =
      train::ParseImageGeneratorArchitecture(run.generator.empty() ? "conv" : run.generator);
  if (!architecture.ok()) return architecture.status();
  const std::string& variant = run.variant;
  const bool labelled = schema->label_index().has_value();
  if (!variant.empty() && variant != "conditional" && variant != "unconditional" &&
      variant != "parallel") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--variant must be conditional, unconditional or parallel, got '", variant, "'"));
  }
  if (parallel) {
    // Checked before anything is opened (nothing charged).
    if (!images || !labelled) {
      return absl::InvalidArgumentError(
          "--variant parallel (one image generator per class, parallel composition over the "
          "classes) needs an image dataset with a label column; use --variant conditional");
    }
    if (!(run.epsilon > 0)) return absl::InvalidArgumentError("--epsilon must be positive");
    if (run.rows_guess <= 0) {
      return absl::InvalidArgumentError(
          "the dataset's size is private: give --rows N, a public guess of its number of rows");
    }
    if (!(run.batch >= 1.0)) return absl::InvalidArgumentError("--batch must be at least 1");
    return TrainKernelParallel(analyst, run, *schema, *architecture);
  }
  const bool conditional = variant.empty() ? labelled : variant == "conditional";
  if (conditional && !labelled) {
    return absl::InvalidArgumentError(
        "--variant conditional needs a label column in the dataset's schema; omit --variant");
  }
  if (!conditional && labelled) {
    return absl::InvalidArgumentError(
        "the dataset has a label column: an unconditional generator would draw labels "
        "independent of the features; use --variant conditional (the default)");
  }
  if (!(run.epsilon > 0)) return absl::InvalidArgumentError("--epsilon must be positive");
  if (run.rows_guess <= 0) {
    return absl::InvalidArgumentError(
        "the dataset's size is private: give --rows N, a public guess of its number of rows "
        "(it sets the sampling rate q = batch / N; the privacy guarantee does not depend on it)");
  }
  if (!(run.batch >= 1.0)) return absl::InvalidArgumentError("--batch must be at least 1");
  // Checked here, before the session (and its charge) is opened.
  const int max_points =
      release::KernelWitnessKind::MaxQueryPoints(conditional, schema->num_classes());
  if (run.points < 1 || run.points > max_points) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--points must be in [1, ", max_points, "] for this ",
        conditional ? "conditional" : "unconditional",
        " session (at most 64 per Gaussian-process factor: ",
        conditional ? "one per label" : "one over all points", "), got ", run.points));
  }

  KernelSessionOptions session = KernelCommonSessionOptions(run);
  session.kernel.set_conditional(conditional);
  // The public divisor m: the declared expected batch (pitfall 4).
  session.kernel.set_expected_batch_size(run.batch);
  session.kernel.set_max_points(run.points);
  auto oracle = KernelOracle::Open(&analyst, session);
  if (!oracle.ok()) return oracle.status();
  if (oracle->session().state() != "OPEN") {
    return absl::FailedPreconditionError(absl::StrCat(
        "session ", oracle->session().id(), " of --key '", session.idempotency_key, "' is ",
        oracle->session().state(), " (its epsilon ", oracle->session().epsilon_reserved(),
        " was charged); nothing more is charged. Train again with a new --key"));
  }
  const int64_t remaining = oracle->session().steps_reserved() - oracle->session().steps_used();
  // Under --json stdout holds the JSON document alone (docs/json.md).
  std::FILE* const said = run.json ? stderr : stdout;
  if (oracle->session().steps_used() > 0) {
    std::fprintf(said, "resuming session %s at step %lld (the generator restarts)\n",
                 oracle->session().id().c_str(),
                 static_cast<long long>(oracle->session().steps_used()));
  }

  train::KernelTrainerOptions options;
  options.steps = static_cast<int>(remaining);
  options.points_per_step = run.points;
  options.seed = run.seed;
  StepProgress progress("train kernel (MMD loss)", options.steps, run.quiet);
  auto update = progress.Callback();
  double final_loss = 0.0;
  const auto on_step = [&](const train::KernelTrainerProgress& p) {
    final_loss = p.loss;
    update(p.step, p.loss);
  };
  ModelSource source;
  source.schema = run.schema;
  source.schema_fingerprint = schema->FingerprintHex();
  source.delta = run.delta;

  if (images) {
    const data::Column& image = schema->column(*schema->image_index());
    train::ImageGeneratorOptions image_options;
    image_options.architecture = *architecture;
    image_options.code_dim = train::kImageKernelCodeDim;
    image_options.height = image.image_height;
    image_options.width = image.image_width;
    image_options.num_classes = schema->num_classes();
    image_options.seed = run.seed;
    train::ImageKernelGeneratorOptions kernel_options;
    kernel_options.average_decay = run.average_decay;
    // One GP per label in a step: every class gets its share of the points
    // (and at most max_points / classes of them, the per-label limit).
    kernel_options.balanced_labels = true;
    auto point_generator =
        train::ImageKernelGenerator::Create(image_options, run.learning_rate, kernel_options);
    if (!point_generator.ok()) return point_generator.status();
    if (auto s = train::TrainKernelGenerator(options, oracle->bandwidths(), &*oracle,
                                             &*point_generator, on_step);
        !s.ok()) {
      return s;
    }
    if (!point_generator->status().ok()) return point_generator->status();
    point_generator->UseAverage(run.points);
    auto closed = oracle->Close();
    if (!closed.ok()) return closed.status();
    if (!run.quiet) PrintSessionCharge(said, *closed);
    source.epsilon = closed->epsilon_reserved();
    const train::ImageGenerator& g = point_generator->generator();
    v1::GeneratorModel model =
        PackageModel(kKernelName, source, {}, nn::Activation::kRelu,
                     g.parameters().cast<double>(), static_cast<int>(closed->steps_used()),
                     final_loss);
    model.clear_activation();
    model.set_dataset_id(run.dataset_id);
    model.set_image_architecture(
        train::ImageGeneratorArchitectureName(g.options().architecture));
    model.set_code_dim(g.options().code_dim);
    model.set_num_classes(g.options().num_classes);
    for (float value : g.running_statistics()) model.add_running_statistics(value);
    return model;
  }

  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(*schema);
  train::GeneratorOptions generator_options;
  generator_options.noise_dim = 16;
  generator_options.hidden = {256, 256};
  generator_options.seed = run.seed;
  auto generator = train::TabularGenerator::Create(layout, schema->num_classes(),
                                                   generator_options);
  if (!generator.ok()) return generator.status();
  nn::AdamOptions adam_options;
  adam_options.learning_rate = run.learning_rate;
  auto adam = nn::Adam::Create(generator->num_parameters(), adam_options);
  if (!adam.ok()) return adam.status();
  TabularKernelGenerator point_generator(*std::move(generator), *std::move(adam), conditional);
  const absl::Status trained = train::TrainKernelGenerator(
      options, oracle->bandwidths(), &*oracle, &point_generator, on_step);
  if (!trained.ok()) return trained;
  if (!point_generator.status().ok()) return point_generator.status();
  auto closed = oracle->Close();
  if (!closed.ok()) return closed.status();
  if (!run.quiet) PrintSessionCharge(said, *closed);

  source.epsilon = closed->epsilon_reserved();
  const train::TabularGenerator& g = point_generator.generator();
  v1::GeneratorModel model = PackageModel(kKernelName, source, g.options().hidden,
                                          g.options().activation, g.parameters(),
                                          static_cast<int>(closed->steps_used()), final_loss);
  model.set_dataset_id(run.dataset_id);
  model.set_noise_dim(g.options().noise_dim);
  model.set_layer_norm(g.options().layer_norm);
  model.set_num_classes(g.num_classes());
  // Generated labels are uniform (the conditional variant's); the class
  // proportions are not released by the session.
  for (int c = 0; c < g.num_classes(); ++c) model.add_class_weights(1.0 / g.num_classes());
  return model;
}

namespace {

class KernelUnit final : public Method {
 public:
  MethodId id() const override { return MethodId::kKernel; }
  absl::string_view name() const override { return kKernelName; }
  absl::string_view title() const override { return "DP-kernel"; }

  std::string TrainSummary() const override {
    return "DP-kernel: a generator fitted to noisy kernel witnesses of a session (analyst)";
  }
  std::string TrainDescription() const override {
    return "Each step sends --points generated rows to a kernel_witness session; the server "
           "answers\n"
           "the kernel mean function of a Poisson-sampled batch plus one Gaussian-process path,\n"
           "with its gradient, at those points (dp-kernel-frdp.md; docs/privacy.md 2.10), and "
           "the\n"
           "generator descends the MMD. The session reserves --steps subsampled Gaussian steps "
           "for\n"
           "--epsilon. A dropped connection is retried on the same step (no second charge);\n"
           "rerunning with the same --key reopens the same session.";
  }
  std::vector<OptionSpec> TrainOptions() const override {
    return WithConnection({{"dataset", "", "dataset id or name", false, true},
           {"epsilon", "", "epsilon of all steps together", false, true},
           {"out", "model.pb", "model file to write"},
           {"variant", "",
            "conditional (default with a label column), unconditional, or parallel (images: "
            "one generator per class on partitioned sessions, charged as one class; the "
            "classes train at once, one per core)"},
           {"steps", "", "session steps T (default 8000 for tables, 4000 for images)"},
           {"batch", "",
            "expected batch size m, the public divisor (default 500 for tables, 1200 for "
            "images)"},
           {"points", "",
            "generated points per step M: at most 64 per class conditionally (1024 in all), 64 "
            "unconditionally or per class in parallel (default 32 for tables, 64 for images, "
            "16 per class in parallel)"},
           {"lr", "", "generator Adam learning rate (default 3e-4 for tables, 1e-3 for images)"},
           {"generator", "", "images: conv (default), conv-wide or fc"},
           {"average", "",
            "images: decay per step of the generator's parameter average, in [0, 1) "
            "(default 0.998; 0: off)"},
           {"rows", "",
            "public guess of the dataset's size for q = batch / rows (default: the dataset's "
            "row count where it is public)"},
           {"seed", "", "seed of the public randomness (default 1)"},
           {"key", "", "idempotency key of the session"},
           {"quiet", "", "no progress lines", true}});
  }
  absl::StatusOr<TrainResult> Train(const ParsedArgs& args) const override {
    return RunTrainKernel(args);
  }

  // No release: one kernel_witness session at the demo's epsilon; the
  // demo's --steps (given or its default) is the session's T.
  absl::StatusOr<DemoOutput> TrainInDemo(const DemoInput& input) const override {
    KernelRun run;
    run.dataset_id = input.dataset_id;
    run.schema = input.schema;
    run.epsilon = input.epsilon;
    run.delta = input.delta;
    run.rows_guess = input.rows;
    if (input.args->Has("steps")) {
      DPC_ASSIGN_OR_RETURN(run.steps, input.args->GetInt("steps"));
    }
    run.quiet = input.quiet;
    DemoOutput out;
    out.release.set_id("kernel_witness session");
    out.release.mutable_embedding()->set_epsilon(input.epsilon);
    DPC_ASSIGN_OR_RETURN(out.model, TrainKernelModel(*input.analyst, run));
    return out;
  }

  // The tabular generator of DP-MERF, or its image generator.
  absl::StatusOr<data::Table> SampleTable(const v1::GeneratorModel& model, int64_t num_rows,
                                          uint64_t seed) const override {
    return SampleTabularGenerator(model, num_rows, seed);
  }
  absl::Status SampleImages(const ParsedArgs& args, const v1::GeneratorModel& model,
                            int64_t num_images, uint64_t seed) const override {
    return WriteImageModelSamples(args, model, num_images, seed);
  }
};

}  // namespace

const Method& KernelMethod() {
  static const KernelUnit* const unit = new KernelUnit();
  return *unit;
}

}  // namespace dpcurator::client
