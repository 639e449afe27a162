// `dpcurator demo`: the whole product on one machine. Starts a local
// dpcurator-server on a temporary database, uploads a table, requests a
// DP-MERF release, trains, samples and evaluates, and prints a report. With
// --schema/--train-csv/--test-csv it runs the same pipeline on any table (the
// Adult benchmark: bench/adult.sh).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/commands/eval_report.h"
#include "client/connection.h"
#include "client/methods/registry.h"
#include "client/schema_file.h"
#include "client/text_upload.h"
#include "client/upload.h"
#include "core/data/csv.h"
#include "core/data/demo.h"
#include "core/data/steward.h"
#include "core/eval/evaluator.h"
#include "core/privacy/noise_source.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"

namespace dpcurator::client {

namespace {

// The epsilon a release was calibrated to and its (first) noise multiplier,
// whatever its artefact (for the demo's table; the 1-way tables' for the
// recipes).
double ReleaseEpsilon(const v1::Release& release) {
  switch (release.artefact_case()) {
    case v1::Release::kMst:
      return release.mst().epsilon();
    case v1::Release::kAim:
      return release.aim().epsilon();
    case v1::Release::kMarginals:
      return release.marginals().epsilon();
    case v1::Release::kPartitioned:  // the demo makes none
    case v1::Release::kCategoryFit:  // nor these (issue 38)
    case v1::Release::kEmbedding:
    case v1::Release::ARTEFACT_NOT_SET:
      break;
  }
  return release.embedding().epsilon();
}

double ReleaseNoiseMultiplier(const v1::Release& release) {
  switch (release.artefact_case()) {
    case v1::Release::kMst:
      return release.mst().one_way_noise_multiplier();
    case v1::Release::kAim:
      return release.aim().one_way_noise_multiplier();
    case v1::Release::kMarginals:
      return release.marginals().noise_multiplier();
    case v1::Release::kPartitioned:  // the demo makes none
    case v1::Release::kCategoryFit:  // nor these (issue 38)
    case v1::Release::kEmbedding:
    case v1::Release::ARTEFACT_NOT_SET:
      break;
  }
  return release.embedding().noise_multiplier();
}

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A dpcurator-server child process on a temporary database, stopped (SIGTERM,
// then SIGKILL after a grace period) when this object goes away.
class LocalServer {
 public:
  static absl::StatusOr<std::unique_ptr<LocalServer>> Start(const fs::path& work_dir,
                                                            const std::string& tokens_path) {
    auto binary = FindServerBinary();
    if (!binary.ok()) return binary.status();
    auto server = std::unique_ptr<LocalServer>(new LocalServer());
    server->log_path_ = work_dir / "server.log";
    const fs::path port_file = work_dir / "port";
    const std::string db = (work_dir / "curator.db").string();
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {
      FILE* log = std::freopen(server->log_path_.c_str(), "w", stderr);
      (void)log;
      const std::string port_flag = absl::StrCat("--port_file=", port_file.string());
      const std::string db_flag = absl::StrCat("--db=", db);
      const std::string tokens_flag = absl::StrCat("--tokens=", tokens_path);
      execl(binary->c_str(), binary->c_str(), db_flag.c_str(), "--listen=127.0.0.1:0",
            tokens_flag.c_str(), "--insecure_dev", port_flag.c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    server->pid_ = pid;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      std::ifstream port_input(port_file);
      int port = 0;
      if (port_input >> port && port > 0) {
        server->address_ = absl::StrCat("127.0.0.1:", port);
        return server;
      }
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        server->pid_ = -1;
        return absl::UnavailableError(absl::StrCat(
            "the local dpcurator-server exited at start; see ", server->log_path_.string()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return absl::DeadlineExceededError("the local dpcurator-server did not start in 30 s");
  }

  ~LocalServer() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 200; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

  const std::string& address() const { return address_; }

 private:
  static absl::StatusOr<std::string> FindServerBinary() {
    std::error_code error;
    const fs::path self = fs::read_symlink("/proc/self/exe", error);
    if (!error) {
      for (const fs::path& candidate :
           {self.parent_path() / "dpcurator-server",
            self.parent_path().parent_path() / "server" / "dpcurator-server"}) {
        if (fs::exists(candidate)) return candidate.string();
      }
    }
    if (const char* path = std::getenv("PATH")) {
      std::string entries = path;
      size_t start = 0;
      while (start <= entries.size()) {
        const size_t end = entries.find(':', start);
        const fs::path candidate =
            fs::path(entries.substr(start, end == std::string::npos ? std::string::npos
                                                                      : end - start)) /
            "dpcurator-server";
        if (fs::exists(candidate)) return candidate.string();
        if (end == std::string::npos) break;
        start = end + 1;
      }
    }
    return absl::NotFoundError(
        "cannot find the dpcurator-server binary next to dpcurator or on PATH; build it "
        "(cmake --build build) or install both");
  }

  LocalServer() = default;
  pid_t pid_ = -1;
  std::string address_;
  fs::path log_path_;
};

struct DemoData {
  v1::TableSchema schema_proto;
  data::Table train;
  data::Table test;
  std::string name;
  std::string train_csv;  // non-empty: upload by streaming this file
};

absl::StatusOr<DemoData> LoadData(const ParsedArgs& args) {
  DemoData demo;
  if (args.Has("schema") || args.Has("train-csv") || args.Has("test-csv")) {
    if (!args.Has("schema") || !args.Has("train-csv") || !args.Has("test-csv")) {
      return absl::InvalidArgumentError(
          "--schema, --train-csv and --test-csv go together (a table of your own)");
    }
    auto schema_proto = ReadSchemaForLocalUse(args.Get("schema"));
    if (!schema_proto.ok()) return schema_proto.status();
    demo.schema_proto = *schema_proto;
    auto schema = SchemaFromProto(demo.schema_proto);
    if (!schema.ok()) return schema.status();
    auto train = data::ReadCsvFile(*schema, args.Get("train-csv"));
    if (!train.ok()) return train.status();
    auto test = data::ReadCsvFile(*schema, args.Get("test-csv"));
    if (!test.ok()) return test.status();
    demo.train = *std::move(train);
    demo.test = *std::move(test);
    demo.name = fs::path(args.Get("train-csv")).stem().string();
    demo.train_csv = args.Get("train-csv");
    return demo;
  }
  const std::string table = args.Get("table");
  if (table != "churn" && table != "steward") {
    return absl::InvalidArgumentError("--table must be churn or steward (docs/demo-data.md)");
  }
  auto rows = args.GetInt("rows");
  if (!rows.ok()) return rows.status();
  // The steward table is small by design (issue 38): 2,000 rows unless --rows.
  if (table == "steward" && args.IsDefault("rows")) *rows = data::kStewardDefaultRows;
  if (*rows < 100) return absl::InvalidArgumentError("--rows must be at least 100");
  const data::Schema schema = table == "steward" ? data::StewardSchema() : data::DemoSchema();
  demo.schema_proto = SchemaToProto(schema);
  // Train and held-out test rows come from the same generative model with
  // different seeds.
  const int64_t test_rows = std::max<int64_t>(*rows / 4, 1000);
  if (table == "steward") {
    demo.train = data::GenerateStewardTable(*rows, 20261122);
    demo.test = data::GenerateStewardTable(test_rows, 424242);
    demo.name = "demo-steward";
  } else {
    demo.train = data::GenerateDemoTable(*rows, 20261122);
    demo.test = data::GenerateDemoTable(test_rows, 424242);
    demo.name = "demo-churn";
  }
  return demo;
}

// `--method`'s words beside the methods' names: every method the demo can
// run, and the two one-shot embedding methods (DP-MERF then PEARL) on one
// ledger.
constexpr absl::string_view kAllMethods = "all";
constexpr absl::string_view kBothEmbeddings = "both";

std::vector<const Method*> DemoCapable() {
  std::vector<const Method*> methods;
  for (const Method* method : RegisteredMethods()) {
    if (method->RunsInDemo()) methods.push_back(method);
  }
  return methods;
}

absl::StatusOr<std::vector<const Method*>> DemoMethods(const std::string& word) {
  if (word == kAllMethods) return DemoCapable();
  if (word == kBothEmbeddings) {
    return std::vector<const Method*>{MethodFor(MethodId::kMerf), MethodFor(MethodId::kPearl)};
  }
  for (const Method* method : DemoCapable()) {
    if (method->name() == word) return std::vector<const Method*>{method};
  }
  std::vector<std::string> names;
  for (const Method* method : DemoCapable()) names.emplace_back(method->name());
  return absl::InvalidArgumentError(absl::StrCat("--method must be ", absl::StrJoin(names, ", "),
                                                 ", ", kBothEmbeddings, " or ", kAllMethods));
}

absl::Status RunDemo(const ParsedArgs& args) {
  const auto wall_start = Clock::now();
  const bool json = args.Flag("json");
  auto say = [&](const std::string& line) {
    if (!json) std::fprintf(stderr, "%s\n", line.c_str());
  };
  auto epsilon = args.GetDouble("epsilon");
  auto delta = args.GetDouble("delta");
  auto budget = args.GetDouble("budget");
  if (!epsilon.ok()) return epsilon.status();
  if (!delta.ok()) return delta.status();
  if (!budget.ok()) return budget.status();
  auto methods = DemoMethods(args.Get("method"));
  if (!methods.ok()) return methods.status();

  auto demo = LoadData(args);
  if (!demo.ok()) return demo.status();
  auto schema = SchemaFromProto(demo->schema_proto);
  if (!schema.ok()) return schema.status();
  if (args.Has("write-data")) {
    // The generated table as files, for `datasets create` and `upload` (no
    // server, nothing released): schema.json, train.csv, test.csv.
    const fs::path dir = args.Get("write-data");
    std::error_code error;
    fs::create_directories(dir, error);
    std::string json;
    google::protobuf::util::JsonPrintOptions print;
    print.add_whitespace = true;
    print.preserve_proto_field_names = true;
    if (error || !google::protobuf::util::MessageToJsonString(demo->schema_proto, &json, print)
                      .ok()) {
      return absl::UnavailableError(absl::StrCat("cannot write the demo table to ", dir.string()));
    }
    std::ofstream(dir / "schema.json") << json << "\n";
    std::ofstream train_out(dir / "train.csv");
    data::WriteCsv(*schema, demo->train, &train_out);
    std::ofstream test_out(dir / "test.csv");
    data::WriteCsv(*schema, demo->test, &test_out);
    if (!train_out || !test_out) {
      return absl::UnavailableError(absl::StrCat("cannot write the demo table to ", dir.string()));
    }
    std::printf("wrote %s: schema.json, train.csv (%lld rows), test.csv (%lld rows)\n",
                dir.string().c_str(), static_cast<long long>(demo->train.num_rows()),
                static_cast<long long>(demo->test.num_rows()));
    return absl::OkStatus();
  }
  say(absl::StrFormat("data: %s, %d training rows, %d held-out rows, %d columns",
                      demo->name, demo->train.num_rows(), demo->test.num_rows(),
                      schema->num_columns()));

  // A private workspace for the server's database and tokens.
  std::string pattern = (fs::temp_directory_path() / "dpcurator-demo-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::UnavailableError("cannot create a temporary directory");
  }
  const fs::path work_dir = pattern;
  const std::string curator_token =
      absl::StrFormat("cur_%016x%016x", privacy::SecureRandomU64(), privacy::SecureRandomU64());
  const std::string analyst_token =
      absl::StrFormat("ana_%016x%016x", privacy::SecureRandomU64(), privacy::SecureRandomU64());
  const std::string tokens_path = (work_dir / "tokens.txt").string();
  {
    std::ofstream tokens(tokens_path);
    tokens << "curator " << curator_token << "\nanalyst " << analyst_token << "\n";
  }
  fs::permissions(tokens_path, fs::perms::owner_read | fs::perms::owner_write);
  {
    auto server = LocalServer::Start(work_dir, tokens_path);
    if (!server.ok()) return server.status();
    say(absl::StrCat("server: dpcurator-server on ", (*server)->address(), " (temporary db in ",
                     work_dir.string(), ")"));
    Connection curator = Connection::Plaintext((*server)->address(), curator_token);
    Connection analyst = Connection::Plaintext((*server)->address(), analyst_token);

    // 1. Curator: register and upload.
    auto t = Clock::now();
    v1::CreateDatasetRequest create;
    create.set_name(demo->name);
    *create.mutable_schema() = demo->schema_proto;
    create.mutable_budget()->set_epsilon(*budget);
    create.mutable_budget()->set_delta(*delta);
    create.set_relation(v1::ADD_REMOVE);
    v1::Dataset dataset;
    {
      auto context = curator.NewContext();
      grpc::Status status = curator.datasets().CreateDataset(context.get(), create, &dataset);
      if (!status.ok()) return RpcError(status, "create dataset");
    }
    auto uploaded = demo->train_csv.empty()
                        ? UploadTable(curator, dataset.id(), *schema, demo->train)
                        : UploadTextFile(curator, dataset.id(), *schema, demo->train_csv,
                                         TextUploadOptions{});
    if (!uploaded.ok()) return uploaded.status();
    const double upload_seconds = SecondsSince(t);
    say(absl::StrFormat("curator: dataset %s, %d rows uploaded in %.2fs", dataset.id(),
                        uploaded->rows_accepted(), upload_seconds));

    // 2-3. For each method: analyst requests a release, the trainer fits,
    // samples and evaluates from the artefact alone.
    struct MethodResult {
      std::string method;
      v1::Release release;
      eval::EvalReport report;
      double release_seconds = 0, train_seconds = 0, sample_seconds = 0, eval_seconds = 0;
    };
    std::vector<MethodResult> results;
    for (const Method* method : *methods) {
      MethodResult result;
      result.method = std::string(method->name());
      t = Clock::now();
      DemoInput input;
      input.analyst = &analyst;
      input.dataset_id = dataset.id();
      input.schema = demo->schema_proto;
      input.epsilon = *epsilon;
      input.delta = *delta;
      input.rows = demo->train.num_rows();
      input.args = &args;
      input.quiet = json;
      input.say = say;
      auto trained = method->TrainInDemo(input);
      if (!trained.ok()) return trained.status();
      result.release = std::move(trained->release);
      result.release_seconds = trained->release_seconds;
      result.train_seconds = SecondsSince(t) - trained->release_seconds;
      const v1::GeneratorModel& model = trained->model;
      t = Clock::now();
      auto synthetic = SampleModel(model, demo->train.num_rows(), 7);
      if (!synthetic.ok()) return synthetic.status();
      result.sample_seconds = SecondsSince(t);
      t = Clock::now();
      eval::EvalOptions eval_options;
      // The real-data reference rows once, with the first method.
      auto report = eval::Evaluate(*schema, *synthetic, demo->test, eval_options,
                                   results.empty() ? &demo->train : nullptr);
      if (!report.ok()) return report.status();
      result.report = *std::move(report);
      result.eval_seconds = SecondsSince(t);
      if (args.Has("save-synthetic")) {
        std::ofstream output(methods->size() == 1
                                 ? args.Get("save-synthetic")
                                 : absl::StrCat(args.Get("save-synthetic"), ".", result.method));
        data::WriteCsv(*schema, *synthetic, &output);
      }
      results.push_back(std::move(result));
    }

    v1::BudgetReport budget_report;
    {
      v1::GetBudgetRequest budget_request;
      budget_request.set_dataset_id(dataset.id());
      auto context = analyst.NewContext();
      grpc::Status status = analyst.datasets().GetBudget(context.get(), budget_request, &budget_report);
      if (!status.ok()) return RpcError(status, "budget");
    }
    const double wall_seconds = SecondsSince(wall_start);
    auto average_auc = [](const eval::EvalReport& report) {
      double sum = 0;
      int count = 0;
      for (const auto& row : report.utility) {
        if (row.train_source == "synthetic") {
          sum += row.roc_auc;
          ++count;
        }
      }
      return count > 0 ? sum / count : 0.0;
    };
    if (json) {
      nlohmann::json out;
      out["dataset"] = demo->name;
      out["epsilon_spent"] = budget_report.epsilon_spent();
      out["epsilon_remaining"] = budget_report.epsilon_remaining();
      out["epsilon_cap"] = budget_report.budget().epsilon();
      out["delta"] = budget_report.budget().delta();
      out["results"] = nlohmann::json::array();
      for (const auto& r : results) {
        out["results"].push_back(
            {{"method", r.method},
             {"release_id", r.release.id()},
             {"epsilon_release", ReleaseEpsilon(r.release)},
             {"noise_multiplier", ReleaseNoiseMultiplier(r.release)},
             {"length_scale", r.release.embedding().length_scale()},
             {"average_tstr_roc_auc", average_auc(r.report)},
             {"evaluation", EvalReportJson(r.report)},
             {"seconds",
              {{"release", r.release_seconds}, {"train", r.train_seconds},
               {"sample", r.sample_seconds}, {"eval", r.eval_seconds}}}});
      }
      // The first method's fields at the top level, for simple consumers.
      out["release_id"] = results[0].release.id();
      out["evaluation"] = EvalReportJson(results[0].report);
      out["seconds"] = {{"upload", upload_seconds}, {"wall", wall_seconds}};
      std::printf("%s\n", out.dump(2).c_str());
    } else {
      std::printf("\n== dpcurator demo report ==\n");
      std::printf("dataset            %s (%lld train rows, %lld held-out rows)\n",
                  demo->name.c_str(), static_cast<long long>(demo->train.num_rows()),
                  static_cast<long long>(demo->test.num_rows()));
      for (const auto& r : results) {
        std::printf("artefact (%s)     %s (%s, noise multiplier %.4f, epsilon %.4f)\n",
                    r.method.c_str(), r.release.id().c_str(),
                    ReleaseKindName(r.release.kind()).c_str(),
                    ReleaseNoiseMultiplier(r.release), ReleaseEpsilon(r.release));
      }
      std::printf("privacy            epsilon spent %.4f of %.4f at delta %g; remaining %.4f\n",
                  budget_report.epsilon_spent(), budget_report.budget().epsilon(),
                  budget_report.budget().delta(), budget_report.epsilon_remaining());
      for (const auto& r : results) {
        std::printf("\n[%s] train on synthetic / test on real%s (average synthetic ROC-AUC "
                    "%.4f):\n%s",
                    r.method.c_str(), &r == &results[0] ? " (and the real-data reference)" : "",
                    average_auc(r.report), FormatEvalReport(r.report).c_str());
        // The real reference (real train vs real test) was computed with the
        // first method; every method's block shows it beside its own.
        if (r.report.paper_metrics.has_value()) {
          const auto& real = results[0].report.real_train_paper_metrics;
          std::printf("%s", eval::FormatPaperMetrics(*r.report.paper_metrics,
                                                     real.has_value() ? &*real : nullptr)
                                .c_str());
        }
        std::printf("[%s] timings: release %.2fs, train %.2fs, sample %.2fs, eval %.2fs\n",
                    r.method.c_str(), r.release_seconds, r.train_seconds, r.sample_seconds,
                    r.eval_seconds);
      }
      std::printf("\nwall time          %.2fs (upload %.2fs)\n", wall_seconds, upload_seconds);
    }
  }
  std::error_code ignored;
  fs::remove_all(work_dir, ignored);
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> DemoCommands() {
  // --method: every method that runs in the demo, by name and title.
  std::vector<std::string> choices;
  std::vector<std::string> described;
  for (const Method* method : DemoCapable()) {
    choices.emplace_back(method->name());
    described.push_back(absl::StrCat(method->name(), " (", method->title(), ")"));
  }
  choices.emplace_back(kBothEmbeddings);
  choices.emplace_back(kAllMethods);
  const std::string method_help = absl::StrCat(
      absl::StrJoin(described, ", "), ", ", kBothEmbeddings, " (",
      MethodFor(MethodId::kMerf)->name(), ", ", MethodFor(MethodId::kPearl)->name(), ") or ",
      kAllMethods, " (every one), on the same split and budget");
  std::vector<OptionSpec> options = {
      {"epsilon", "1", "epsilon of the release"},
      {"delta", "1e-5", "delta of the dataset budget"},
      {"budget", "3", "epsilon cap of the dataset"},
      {"table", "churn",
       "generated table: churn (20,000 rows) or steward (2,000 rows, a 124-level column, a "
       "heavy-tailed money column, a 7-class label; docs/demo-data.md)"},
      {"rows", "20000",
       "demo table: training rows (held-out: a quarter, at least 1000; steward: 2000)"},
      {"write-data", "",
       "write the generated table to this directory (schema.json, train.csv, test.csv) and stop"},
      {"method", std::string(MethodFor(MethodId::kMerf)->name()), method_help, false, false, "",
       choices},
      {"schema", "", "your own table: schema JSON (with --train-csv, --test-csv)"},
      {"train-csv", "", "your own table: training rows, uploaded to the local server"},
      {"test-csv", "", "your own table: held-out rows for evaluation"},
      {"save-synthetic", "", "also write the synthetic rows to this CSV"},
      {"json", "", "print the report as JSON", true},
  };
  // Each method's own options, merged by name (the first declaration wins).
  for (const Method* method : DemoCapable()) {
    for (auto& o : method->DemoOptions()) {
      bool seen = false;
      for (const auto& existing : options) seen = seen || existing.name == o.name;
      if (!seen) options.push_back(o);
    }
  }
  return {Command{
      "demo",
      "the whole pipeline on a local server: upload, release at epsilon 1, train, evaluate",
      "Starts dpcurator-server on a temporary database, creates a dataset from a generated\n"
      "mixed-type table (docs/demo-data.md), uploads it, requests a DP-MERF release, trains a\n"
      "generator, samples and evaluates it against held-out rows. Needs no arguments.\n\n"
      "  dpcurator demo\n"
      "  dpcurator demo --schema schemas/adult.schema.json --train-csv ../shared/data/adult/adult.data "
      "--test-csv ../shared/data/adult/adult.test",
      options, RunDemo}};
}

}  // namespace dpcurator::client
