// The first hour on unseen data (issue 25 item 2, docs/first-hour.md): the
// frictions a new user met, each checked where a test can fail. These run
// the commands' own code (the command tables of client/commands/) on files
// in a scratch folder; none needs a server.
#include <gtest/gtest.h>

#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "client/cli.h"
#include "client/commands.h"
#include "client/commands/eval_report.h"
#include "client/methods/aim.h"
#include "client/methods/registry.h"
#include "client/model_package.h"
#include "client/proto_file.h"
#include "client/schema_file.h"
#include "client/text_upload.h"
#include "client/upload.h"
#include "core/data/csv.h"
#include "core/data/schema.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

namespace fs = std::filesystem;

class FrictionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("friction_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // An mst release artefact as `dpcurator release --kind mst --out` writes it.
  std::string WriteMstRelease(const std::string& name) {
    v1::Release release;
    release.set_id("rel_0123");
    release.set_dataset_id("ds_0123");
    release.set_kind(v1::MST);
    release.mutable_mst()->set_format_version(1);
    release.mutable_mst()->set_release_id("rel_0123");
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(WriteProtoFile(release, path).ok());
    return path;
  }

  fs::path dir_;
};

data::Schema PatientSchema() {
  auto schema = data::Schema::Builder()
                    .AddNumeric("Patient Age", 0, 120, /*integer=*/true)
                    .AddCategorical("smoker", {"yes", "no"}, /*nullable=*/true)
                    .AddCategorical("outcome", {"good", "bad"})
                    .SetLabel("outcome")
                    .Build();
  EXPECT_TRUE(schema.ok()) << schema.status();
  return *schema;
}

const Command* FindCommand(const std::vector<Command>& commands, const std::string& name) {
  for (const Command& command : commands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

absl::Status RunCommand(const Command& command, const std::vector<std::string>& args) {
  auto parsed = ParseArgs(command.options, args);
  if (!parsed.ok()) return parsed.status();
  return command.run(*parsed);
}

// "Missing synthetic values are written as `?`": a missing level is an
// empty cell, and it reads back as missing.
// Issue 25: 200 images at epsilon 1 gave pure noise and nothing said so.
TEST(ImageDataSizeWarningTest, WarnsBelowTheBenchmarksSmallestWorkingPoint) {
  const auto trial = ImageDataSizeWarning(200, 1.0);
  ASSERT_TRUE(trial.has_value());
  EXPECT_NE(trial->find("200 images under a budget of epsilon 1"), std::string::npos) << *trial;
  EXPECT_NE(trial->find("here 200;"), std::string::npos) << *trial;
  EXPECT_TRUE(ImageDataSizeWarning(50000, 0.1).has_value());  // 5,000
  EXPECT_FALSE(ImageDataSizeWarning(60000, 0.2).has_value());  // 12,000: the benchmark
  EXPECT_FALSE(ImageDataSizeWarning(10000, 1.0).has_value());
}

// Issue 38: a 1,930-row table at epsilon 1 gave AIM and MST rows at chance
// with no warning; rows x epsilon below kLabelRowsTimesEpsilon now says so.
TEST(LabelRowsWarningTest, WarnsWhenRowsTimesEpsilonCannotCarryALabelPair) {
  const auto tiny = LabelRowsWarning("mst", 2000.4, 0.05);
  ASSERT_TRUE(tiny.has_value());
  EXPECT_NE(tiny->find("mst release of about 2000 rows at epsilon 0.05"), std::string::npos)
      << *tiny;
  EXPECT_NE(tiny->find("rows x epsilon is 100"), std::string::npos) << *tiny;
  EXPECT_TRUE(LabelRowsWarning("aim", 2000, 0.1).has_value());    // 200: chance in the bench
  EXPECT_FALSE(LabelRowsWarning("aim", 2000, 0.3).has_value());   // 600: 0.65-0.79
  EXPECT_FALSE(LabelRowsWarning("merf", 32561, 1.0).has_value());  // Adult
}

// The embedding methods (DP-MERF's rff, PEARL's charfn) read their rows from
// the release: the noisy class totals under add/remove, the public n under
// replace-one; an unlabelled schema gets no warning.
TEST(LabelRowsWarningTest, EmbeddingReleasesWarnFromTheirOwnCounts) {
  v1::Release release;
  v1::EmbeddingArtefact* artefact = release.mutable_embedding();
  artefact->mutable_schema()->set_label("y");
  artefact->set_epsilon(0.1);
  artefact->add_class_totals(1200.0);
  artefact->add_class_totals(800.0);  // 2,000 rows x 0.1 = 200
  const auto warning = EmbeddingLabelWarning("pearl", release);
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("pearl release of about 2000 rows at epsilon 0.1"), std::string::npos)
      << *warning;
  artefact->set_epsilon(1.0);
  EXPECT_FALSE(EmbeddingLabelWarning("pearl", release).has_value());
  artefact->set_relation(v1::REPLACE_ONE);  // class totals are shares: the public n counts
  artefact->set_public_n(300);
  EXPECT_TRUE(EmbeddingLabelWarning("merf", release).has_value());
  artefact->mutable_schema()->clear_label();
  EXPECT_FALSE(EmbeddingLabelWarning("merf", release).has_value());
}

// An aim artefact with a labelled schema of three columns (y the label),
// 1-way tables summing to `rows`, and one round per clique.
v1::AimArtefact LabelledAimArtefact(const std::vector<std::vector<int>>& cliques, double rows,
                                    double epsilon) {
  v1::AimArtefact artefact;
  for (const char* name : {"a", "b", "y"}) {
    v1::ColumnSchema& column = *artefact.mutable_schema()->add_columns();
    column.set_name(name);
    column.set_type(v1::ColumnSchema::CATEGORICAL);
    column.add_categories("0");
    column.add_categories("1");
  }
  artefact.mutable_schema()->set_label("y");
  artefact.set_epsilon(epsilon);
  for (int c = 0; c < 3; ++c) {
    v1::NoisyMarginalTable& table = *artefact.add_one_way();
    table.add_clique(c);
    table.add_shape(2);
    table.add_counts(rows / 2);
    table.add_counts(rows / 2);
  }
  for (const auto& clique : cliques) {
    v1::NoisyMarginalTable& table = *artefact.add_rounds()->mutable_measurement();
    for (int c : clique) table.add_clique(c);
  }
  return artefact;
}

// Issue 38: `train aim` said "0 of 8 rounds' pairs in its tree" (an MST
// edge count, always 0 for AIM); it now says what AIM measured, and warns
// when no round measured the label with a feature.
TEST(AimMeasuredSummaryTest, SaysWhatAimMeasuredAndWarnsWithoutALabelPair) {
  const std::string with_label =
      AimMeasuredSummary(LabelledAimArtefact({{0}, {1, 2}, {0, 1}, {0, 1, 2}}, 2000, 1.0));
  EXPECT_NE(with_label.find("aim measured: 3 1-way tables, then 4 rounds: 1 on 1-way, 2 on "
                            "2-way, 1 on 3-way tables; 2 with the label (y)"),
            std::string::npos)
      << with_label;
  EXPECT_EQ(with_label.find("warning"), std::string::npos) << with_label;
  const std::string without =
      AimMeasuredSummary(LabelledAimArtefact({{0}, {2}, {0, 1}}, 2000, 1.0));
  EXPECT_NE(without.find("0 with the label (y)"), std::string::npos) << without;
  EXPECT_NE(without.find("warning: no round measured the label (y) with a feature"),
            std::string::npos)
      << without;
  // Rows x epsilon, the rows estimated from the noisy 1-way tables.
  const std::string small =
      AimMeasuredSummary(LabelledAimArtefact({{1, 2}}, 2000, 0.05));
  EXPECT_NE(small.find("warning: aim release of about 2000 rows at epsilon 0.05"),
            std::string::npos)
      << small;
}

TEST_F(FrictionTest, MissingSyntheticValuesAreEmptyCells) {
  const data::Schema schema = PatientSchema();
  data::Table table;
  table.cells.resize(1, 3);
  table.cells << 40, 2, 0;  // level 2 of smoker: the missing level
  std::ostringstream csv;
  data::WriteCsv(schema, table, &csv);
  EXPECT_EQ(csv.str(), "Patient Age,smoker,outcome\n40,,good\n");
  std::istringstream back(csv.str());
  auto read = data::ReadCsv(schema, &back, {}, "back");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->cells(0, 1), 2);
}

// "`eval` and `report` do not read ARFF; `eval` fails on the first
// undeclared category": the ARFF file is read by its name, and the row with
// a stray category is counted, named and left out.
TEST_F(FrictionTest, EvalReadsArffAndCountsUndeclaredCategories) {
  const data::Schema schema = PatientSchema();
  const std::string arff = Write("real.arff",
                                 "@relation patients\n"
                                 "@attribute 'Patient Age' integer\n"
                                 "@attribute smoker {yes,no}\n"
                                 "@attribute outcome {good,bad}\n"
                                 "@data\n"
                                 "31,yes,good\n"
                                 "45,?,bad\n"
                                 "52,sometimes,bad\n"
                                 "60,no,good\n");
  int64_t skipped = -1;
  auto real = ReadEvalFile(schema, arff, /*real=*/true, &skipped);
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(real->num_rows(), 3);
  EXPECT_EQ(skipped, 1);
  auto local = ReadLocalTable(schema, arff, {TextFormat::kArff}, /*skip_undeclared=*/true);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->skipped_detail, "column 'smoker': 'sometimes' (1 row)");
  // A synthetic file is the sampler's: a stray value there is an error with
  // its line.
  auto synthetic = ReadEvalFile(schema, arff, /*real=*/false, nullptr);
  ASSERT_FALSE(synthetic.ok());
  EXPECT_TRUE(absl::StrContains(synthetic.status().message(), "real.arff:8:"))
      << synthetic.status();
}

// Issue 38: "`eval` stops at a real row with a missing non-nullable value":
// such a row, a cell that is no number and a line of the wrong width are
// each left out and counted, by reason, like a stray category; a synthetic
// file is still read strictly.
TEST_F(FrictionTest, EvalLeavesOutRealRowsItCannotRead) {
  const data::Schema schema = PatientSchema();
  const std::string csv = Write("real.csv",
                                "Patient Age,smoker,outcome\n"
                                "31,yes,good\n"
                                ",no,bad\n"
                                "?,no,bad\n"
                                "forty,yes,good\n"
                                "50,no\n"
                                "52,,bad\n");
  int64_t skipped = -1;
  auto real = ReadEvalFile(schema, csv, /*real=*/true, &skipped);
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(real->num_rows(), 2);
  EXPECT_EQ(skipped, 4);
  auto local = ReadLocalTable(schema, csv, {}, /*skip_unreadable=*/true);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->skipped_detail,
            "column 'Patient Age': a missing value (2 rows), column 'Patient Age': 'forty' "
            "(1 row), a wrong number of fields (1 row)");
  auto synthetic = ReadEvalFile(schema, csv, /*real=*/false, nullptr);
  ASSERT_FALSE(synthetic.ok());
  EXPECT_TRUE(absl::StrContains(synthetic.status().message(), "real.csv:3:"))
      << synthetic.status();
}

// The hand-made CSV of the trial: BOM, CRLF, quoted commas, empty cells.
TEST_F(FrictionTest, EvalReadsTheHandMadeCsv) {
  const data::Schema schema = PatientSchema();
  const std::string csv = Write("real.csv",
                                "\xEF\xBB\xBFPatient Age,note,smoker,outcome\r\n"
                                "31,\"likes tea, coffee\",yes,good\r\n"
                                "45,,,bad\r\n"
                                "50,x,maybe,good\r\n");
  int64_t skipped = 0;
  auto real = ReadEvalFile(schema, csv, /*real=*/true, &skipped);
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(real->num_rows(), 2);
  EXPECT_EQ(skipped, 1);
}

// "A release passed to `sample` says 'model format version 0'": it names
// the file's kind and the command that takes it.
TEST_F(FrictionTest, SampleNamesAReleaseFile) {
  const std::string release = WriteMstRelease("mst.release");
  const std::vector<Command> commands = SampleCommands();
  const Command* sample = FindCommand(commands, "sample");
  ASSERT_NE(sample, nullptr);
  const absl::Status status =
      RunCommand(*sample, {"--model", release, "--out", (dir_ / "s.csv").string()});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "release artefact of kind mst")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(),
                                "`dpcurator train mst --release " + release + "`"))
      << status;
}

// "An mst release passed to `train merf` says 'Schema must have at least
// one column'": it says it is an mst release and which train command takes
// it, before anything is read as an embedding.
TEST_F(FrictionTest, TrainMerfNamesAnMstRelease) {
  const std::string release = WriteMstRelease("mst.release");
  const std::vector<Command> commands = TrainCommands();
  for (const Method* method : RegisteredMethods()) {
    const std::vector<v1::ReleaseKind> kinds = method->ReleaseKinds();
    if (kinds.empty() || kinds[0] == v1::MST) continue;  // merf, pearl
    const Command* train = FindCommand(commands, "train " + std::string(method->name()));
    ASSERT_NE(train, nullptr);
    const absl::Status status = RunCommand(
        *train, {"--release", release, "--out", (dir_ / "m.pb").string(), "--steps", "1"});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "release artefact of kind mst")) << status;
    EXPECT_TRUE(absl::StrContains(status.message(),
                                  "`dpcurator train mst --release " + release + "`"))
        << status;
  }
  EXPECT_EQ(TrainCommandForRelease(v1::MST, "F"), "`dpcurator train mst --release F`");
}

// A model file as `train` writes it (format and method checked by the
// registry; the sampler is not run), its packed parameters last.
v1::GeneratorModel SmallModel() {
  v1::GeneratorModel model;
  model.set_format_version(kModelFormatVersion);
  model.set_method("merf");
  model.set_release_id("rel_feedface");
  model.set_dataset_id("ds_0123");
  *model.mutable_schema() = SchemaToProto(PatientSchema());
  model.set_epsilon(1.0);
  model.set_delta(1e-5);
  for (int i = 0; i < 64; ++i) model.add_parameters(0.01 * i);
  return model;
}

// The files a user gives by mistake where a model, a release, a schema or
// rows belong (issue 25 item 2: "Wrong file kinds give wrong messages").
struct WrongFiles {
  std::string release;    // an mst release artefact
  std::string model;      // a model file
  std::string schema;     // a schema file (JSON)
  std::string csv;        // rows
  std::string empty;      // 0 bytes
  std::string truncated;  // a model file cut short
};

// "A release passed to `sample` says 'model format version 0'", and so did
// `eval --model` and `report --model`; a schema, a CSV, an empty or a
// truncated file were no better. Every command that takes a model names the
// file's kind and the command that takes it.
TEST_F(FrictionTest, EveryModelReaderNamesAWrongFileKind) {
  const data::Schema schema = PatientSchema();
  WrongFiles files;
  files.release = WriteMstRelease("mst.release");
  files.schema = Write("s.json",
                       R"({"columns": [{"name": "Patient Age", "type": "NUMERIC", )"
                       R"("lower": 0, "upper": 120}]})");
  files.csv = Write("rows.csv", "Patient Age,smoker,outcome\n40,yes,good\n50,no,bad\n");
  files.empty = Write("empty.pb", "");
  std::string bytes;
  ASSERT_TRUE(SmallModel().SerializeToString(&bytes));
  files.truncated = Write("cut.pb", bytes.substr(0, bytes.size() - 100));
  const std::string rows = files.csv;
  // What each wrong file must be called, and a command the message names.
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {files.release, {"is a release artefact of kind mst",
                       "`dpcurator train mst --release " + files.release + "`"}},
      {files.schema, {"is a schema file (JSON), not a model file", "--schema " + files.schema}},
      {files.csv, {"is a table (CSV), not a model file", "--real or --synthetic"}},
      {files.empty, {"is empty (0 bytes), not a model file", "`dpcurator train "}},
      {files.truncated, {"is not a complete model file", "truncated or damaged"}},
  };
  std::vector<Command> commands = SampleCommands();
  for (auto group : {EvalCommands(), ReportCommands()}) {
    for (auto& command : group) commands.push_back(std::move(command));
  }
  for (const char* name : {"sample", "eval", "report"}) {
    const Command* command = FindCommand(commands, name);
    ASSERT_NE(command, nullptr) << name;
    for (const auto& [file, said] : expected) {
      std::vector<std::string> args = {"--model", file, "--out", (dir_ / "out").string()};
      if (std::string(name) != "sample") {
        args.insert(args.end(), {"--synthetic", rows, "--real", rows, "--no-tstr"});
      }
      if (std::string(name) == "eval") args = {"--model", file, "--synthetic", rows, "--real", rows};
      const absl::Status status = RunCommand(*command, args);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name << " " << status;
      EXPECT_TRUE(absl::StartsWith(status.message(), "'" + file + "' ")) << name << " " << status;
      for (const std::string& part : said) {
        EXPECT_TRUE(absl::StrContains(status.message(), part))
            << name << " --model " << file << ": wanted '" << part << "' in: " << status;
      }
      EXPECT_FALSE(absl::StrContains(status.message(), "format version")) << status;
    }
  }
}

// The other way round: a model or a release where `eval` and `report` want
// rows (--synthetic, --real) or a schema (--schema), and a model where
// `report --release` wants the release. Each is named, with the flag or
// command that takes it.
// `datasets create --schema`, `schema check` and every other schema reader
// given a model or a release file: named, with the command that takes it,
// not the JSON parser's complaint about its bytes.
TEST_F(FrictionTest, SchemaReadersNameAModelOrReleaseFile) {
  std::string bytes;
  ASSERT_TRUE(SmallModel().SerializeToString(&bytes));
  const std::string model = Write("model.pb", bytes);
  const std::string release = WriteMstRelease("mst.release");
  for (const auto& [file, said] : std::vector<std::pair<std::string, std::string>>{
           {model, "a model file (written by `dpcurator train "},
           {release, "a release artefact of kind mst"}}) {
    for (const bool publishing : {false, true}) {
      const absl::StatusOr<v1::TableSchema> read =
          publishing ? ReadSchemaForPublishing(file, false) : ReadSchemaForLocalUse(file);
      ASSERT_FALSE(read.ok()) << file;
      EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument) << read.status();
      EXPECT_TRUE(absl::StrContains(read.status().message(), "is not a schema file (JSON)"))
          << read.status();
      EXPECT_TRUE(absl::StrContains(read.status().message(), said)) << read.status();
    }
  }
}

TEST_F(FrictionTest, EvalAndReportNameAModelOrReleaseGivenAsRowsOrSchema) {
  const std::string model = (dir_ / "m.pb").string();
  ASSERT_TRUE(WriteProtoFile(SmallModel(), model).ok());
  const std::string release = WriteMstRelease("mst.release");
  const std::string rows = Write("rows.csv", "Patient Age,smoker,outcome\n40,yes,good\n");
  const std::string schema = Write(
      "s.json", R"({"columns": [{"name": "Patient Age", "type": "NUMERIC", "lower": 0, )"
                R"("upper": 120}, {"name": "smoker", "type": "CATEGORICAL", "categories": )"
                R"(["yes", "no"], "nullable": true}, {"name": "outcome", "type": )"
                R"("CATEGORICAL", "categories": ["good", "bad"]}], "label": "outcome"})");
  std::vector<Command> commands = EvalCommands();
  for (auto& command : ReportCommands()) commands.push_back(std::move(command));
  struct Case {
    std::vector<std::string> args;
    std::string file;
    std::vector<std::string> said;
  };
  const std::vector<Case> cases = {
      {{"--schema", schema, "--synthetic", model, "--real", rows}, model,
       {"is a model file", "`dpcurator sample --model " + model}},
      {{"--schema", schema, "--synthetic", rows, "--real", release}, release,
       {"is a release artefact of kind mst", "--real"}},
      {{"--schema", model, "--synthetic", rows, "--real", rows}, model,
       {"is a model file", "--model " + model}},
      {{"--schema", rows, "--synthetic", rows, "--real", rows}, rows,
       {"is a table (CSV), not a schema file", "`dpcurator schema draft"}},
  };
  for (const char* name : {"eval", "report"}) {
    const Command* command = FindCommand(commands, name);
    ASSERT_NE(command, nullptr);
    for (const Case& c : cases) {
      std::vector<std::string> args = c.args;
      if (std::string(name) == "report") {
        args.insert(args.end(), {"--out", (dir_ / "p.html").string(), "--no-tstr"});
      }
      const absl::Status status = RunCommand(*command, args);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name << " " << status;
      EXPECT_TRUE(absl::StartsWith(status.message(), "'" + c.file + "' ")) << name << " " << status;
      for (const std::string& part : c.said) {
        EXPECT_TRUE(absl::StrContains(status.message(), part))
            << name << ": wanted '" << part << "' in: " << status;
      }
    }
  }
  // report --release given the model.
  const Command* report = FindCommand(commands, "report");
  const absl::Status status =
      RunCommand(*report, {"--model", model, "--release", model, "--synthetic", rows, "--real",
                           rows, "--out", (dir_ / "p.html").string(), "--no-tstr"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "is a model file")) << status;
}

// `report --release` read the file `release --out` writes (a Release
// envelope) as a bare artefact, so the privacy table listed the dataset id
// as a release and lost the relation. It reads the envelope.
TEST_F(FrictionTest, ReportReadsTheReleaseFileThatReleaseWrites) {
  const std::string model = (dir_ / "m.pb").string();
  v1::GeneratorModel trained = SmallModel();
  ASSERT_TRUE(WriteProtoFile(trained, model).ok());
  v1::Release release;
  release.set_id("rel_feedface");
  release.set_dataset_id("ds_0123");
  release.set_kind(v1::RFF_EMBEDDING);
  v1::EmbeddingArtefact* artefact = release.mutable_embedding();
  artefact->set_format_version(2);
  artefact->set_release_id("rel_feedface");
  artefact->set_dataset_id("ds_0123");
  artefact->set_relation(v1::REPLACE_ONE);
  artefact->set_kind(v1::RFF_EMBEDDING);
  const std::string path = (dir_ / "r.release").string();
  ASSERT_TRUE(WriteProtoFile(release, path).ok());
  const std::string rows = Write("rows.csv", "Patient Age,smoker,outcome\n40,yes,good\n"
                                             "50,no,bad\n60,,good\n");
  const std::vector<Command> commands = ReportCommands();
  const std::string html = (dir_ / "p.html").string();
  const absl::Status status =
      RunCommand(commands[0], {"--model", model, "--release", path, "--synthetic", rows, "--real",
                               rows, "--out", html, "--no-tstr"});
  ASSERT_TRUE(status.ok()) << status;
  std::ifstream input(html);
  std::stringstream page;
  page << input.rdbuf();
  EXPECT_TRUE(absl::StrContains(page.str(), "replace one row (REPLACE_ONE)"));
  EXPECT_TRUE(absl::StrContains(page.str(), "rel_feedface"));
  // The dataset id once, as the dataset, never as a release.
  const size_t first = page.str().find("ds_0123");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(page.str().find("ds_0123", first + 1), std::string::npos);
}

// `train <method> --release F` with a table, a schema or an empty file names
// it (an mst release is TrainMerfNamesAnMstRelease's).
TEST_F(FrictionTest, TrainNamesATableSchemaOrEmptyFileGivenAsARelease) {
  const std::vector<std::pair<std::string, std::string>> files = {
      {Write("rows.csv", "a,b\n1,2\n"), "is a table (CSV), not a release artefact"},
      {Write("s.json", R"({"columns": [{"name": "a", "type": "NUMERIC", "lower": 0, )"
                       R"("upper": 1}]})"),
       "is a schema file (JSON), not a release artefact"},
      {Write("empty.release", ""), "is empty (0 bytes), not a release artefact"},
  };
  const std::vector<Command> commands = TrainCommands();
  for (const Method* method : RegisteredMethods()) {
    if (method->ReleaseKinds().empty()) continue;  // trains on sessions or reports
    const Command* train = FindCommand(commands, "train " + std::string(method->name()));
    ASSERT_NE(train, nullptr);
    for (const auto& [file, said] : files) {
      const absl::Status status =
          RunCommand(*train, {"--release", file, "--out", (dir_ / "m.pb").string()});
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
      EXPECT_TRUE(absl::StrContains(status.message(), said))
          << "train " << method->name() << ": wanted '" << said << "' in: " << status;
    }
  }
}

// "Nothing helps a user hold out a test split": `split` holds out exactly
// round(fraction x rows) records, each once, the same ones for a seed, in
// files `upload` and `eval` read (a quoted comma survives).
TEST_F(FrictionTest, SplitHoldsOutATestFraction) {
  std::string csv = "\xEF\xBB\xBFPatient Age,smoker,outcome\r\n";
  for (int i = 0; i < 50; ++i) {
    csv += std::to_string(20 + i) + (i == 7 ? ",\"yes, daily\"" : ",no") + ",good\r\n";
  }
  const std::string in = Write("data.csv", csv);
  const std::vector<Command> commands = SplitCommands();
  ASSERT_EQ(commands.size(), 1u);
  const auto split = [&](const std::string& seed, const std::string& suffix) {
    return RunCommand(commands[0], {"--in", in, "--test-fraction", "0.2", "--seed", seed,
                                    "--train-out", (dir_ / ("train" + suffix)).string(),
                                    "--test-out", (dir_ / ("test" + suffix)).string()});
  };
  ASSERT_TRUE(split("1", "1.csv").ok());
  ASSERT_TRUE(split("1", "1b.csv").ok());
  ASSERT_TRUE(split("2", "2.csv").ok());
  const auto lines = [&](const std::string& name) {
    std::ifstream input(dir_ / name);
    std::vector<std::string> out;
    for (std::string line; std::getline(input, line);) out.push_back(line);
    return out;
  };
  const auto train = lines("train1.csv");
  const auto test = lines("test1.csv");
  ASSERT_EQ(test.size(), 1u + 10u);  // header + round(0.2 x 50)
  ASSERT_EQ(train.size(), 1u + 40u);
  EXPECT_EQ(test[0], "Patient Age,smoker,outcome");
  std::multiset<std::string> rows(train.begin() + 1, train.end());
  rows.insert(test.begin() + 1, test.end());
  EXPECT_EQ(rows.size(), 50u);
  EXPECT_EQ(std::set<std::string>(rows.begin(), rows.end()).size(), 50u);  // each row once
  EXPECT_EQ(rows.count("27,\"yes, daily\",good"), 1u);
  EXPECT_EQ(lines("test1b.csv"), test);   // same seed, same split
  EXPECT_NE(lines("test2.csv"), test);    // another seed, another split
  // A fraction that leaves one side empty is refused.
  EXPECT_FALSE(RunCommand(commands[0], {"--in", in, "--test-fraction", "0.001"}).ok());
}

// Issue 38: `schema draft` proposed no bins for a heavy-tailed money column
// (the default 16 equal-width bins put 95% of rows in one) and stopped at the
// first bad column. It now writes suggested bins into the schema (marked
// data-derived with the bounds) and drafts the good columns while listing
// every bad one with what to do.
TEST_F(FrictionTest, SchemaDraftSuggestsBinsAndListsEveryBadColumn) {
  std::mt19937_64 rng(38);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::string csv = "income,code,blank,age,y\n";
  for (int i = 0; i < 2000; ++i) {
    const long long income = std::llround(std::exp(10.0 + 1.5 * normal(rng)));
    csv += std::to_string(income) + ",K" + std::to_string(i) + ",," +
           std::to_string(20 + i % 50) + "," + (i % 3 == 0 ? "a" : "b") + "\n";
  }
  const std::string in = Write("money.csv", csv);
  const std::string out = (dir_ / "s.json").string();
  const std::vector<Command> commands = SchemaCommands();
  const Command* draft = FindCommand(commands, "schema draft");
  ASSERT_NE(draft, nullptr);
  ::testing::internal::CaptureStdout();
  const absl::Status status = RunCommand(*draft, {"--csv", in, "--out", out, "--label", "y"});
  const std::string report = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_NE(report.find("2 column(s) left out of the draft"), std::string::npos) << report;
  EXPECT_NE(report.find("  code: more than 1000 distinct values"), std::string::npos) << report;
  EXPECT_NE(report.find("  blank: no values at all"), std::string::npos) << report;
  EXPECT_NE(report.find("bins suggested (a 1-2-5 log scale)"), std::string::npos) << report;
  auto file = ReadSchemaFileWithMarkers(out);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->schema.columns_size(), 3);  // income, age, y
  EXPECT_EQ(file->schema.columns(0).name(), "income");
  EXPECT_GE(file->schema.columns(0).bins_size(), 5);
  EXPECT_EQ(file->schema.columns(1).bins_size(), 0);  // age: 50 integers, one cell each
  EXPECT_EQ(file->data_derived, (std::vector<std::string>{"income", "age", "y"}));
}

// "`sample` and `train merf|mst` have no --json".
TEST_F(FrictionTest, SampleAndEveryTrainCommandTakeJson) {
  std::vector<Command> commands = TrainCommands();
  for (Command& command : SampleCommands()) commands.push_back(std::move(command));
  ASSERT_GE(commands.size(), RegisteredMethods().size() + 1);
  for (const Command& command : commands) {
    bool json = false;
    for (const OptionSpec& option : command.options) json = json || option.name == "json";
    EXPECT_TRUE(json) << command.name << " has no --json";
  }
}

// Issue 38: "`--rows 1e7` refused". Count flags take whole numbers in
// scientific notation, exactly; a fraction or a value past int64 is refused
// saying which.
TEST_F(FrictionTest, CountFlagsTakeWholeNumbersInScientificNotation) {
  const std::vector<Command> sample = SampleCommands();
  const Command* command = FindCommand(sample, "sample");
  ASSERT_NE(command, nullptr);
  auto parsed = ParseArgs(command->options, {"--model", "m.pb", "--rows", "1e7"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto rows = parsed->GetInt("rows");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, 10'000'000);

  const std::vector<std::pair<std::string, int64_t>> good = {
      {"10000", 10000},    {"1e4", 10000},         {"1E4", 10000},
      {"2.5e3", 2500},     {"+3e0", 3},            {"-2e2", -200},
      {"1200e-2", 12},     {"0.0", 0},             {"0e999999999", 0},
      {"9.223372036854775807e18", INT64_MAX},      {"9223372036854775807", INT64_MAX}};
  for (const auto& [text, value] : good) {
    auto got = ParseWholeNumber("rows", text);
    ASSERT_TRUE(got.ok()) << text << ": " << got.status();
    EXPECT_EQ(*got, value) << text;
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"1.5", "--rows 1.5 is not a whole number"},
      {"1e-3", "--rows 1e-3 is not a whole number"},
      {"1e19", "--rows 1e19 is out of range"},
      {"9223372036854775808", "is out of range"},
      {"1e999999999999", "is out of range"},
      {"ten", "--rows expects a whole number (e.g. 10000 or 1e4), got 'ten'"},
      {"1e", "expects a whole number"},
      {"", "expects a whole number"},
      {"1e7 ", "expects a whole number"},
      {"0x10", "expects a whole number"}};
  for (const auto& [text, message] : bad) {
    auto got = ParseWholeNumber("rows", text);
    ASSERT_FALSE(got.ok()) << text << " gave " << *got;
    EXPECT_NE(got.status().message().find(message), std::string::npos)
        << text << ": " << got.status();
  }
}

// Issue 38: no "did you mean" for commands and options. NearestName finds
// a typo's word (a swap, a missing or extra letter) and nothing for a word
// far from every candidate; ParseArgs names it for an unknown option.
TEST_F(FrictionTest, UnknownOptionsNameTheNearestOne) {
  const std::vector<std::string> names = {"dataset", "datasets", "train", "epsilon", "json"};
  EXPECT_EQ(NearestName("trian", names), "train");
  EXPECT_EQ(NearestName("datset", names), "dataset");
  EXPECT_EQ(NearestName("epsilonn", names), "epsilon");
  EXPECT_EQ(NearestName("JSON", names), "json");
  EXPECT_EQ(NearestName("zzz", names), "");
  EXPECT_EQ(NearestName("upload", names), "");
  const std::vector<Command> sample = SampleCommands();
  const Command* command = FindCommand(sample, "sample");
  ASSERT_NE(command, nullptr);
  auto parsed = ParseArgs(command->options, {"--modle", "m.pb"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("unknown option --modle; did you mean --model?"),
            std::string::npos)
      << parsed.status();
}

// "list commands ... and `release get` have no --json": every listing
// command (a name ending in "list", `releases`, `admin audit`) and `release
// get` takes it.
TEST_F(FrictionTest, ListCommandsAndReleaseGetTakeJson) {
  std::vector<Command> commands;
  for (auto group : {DatasetCommands(), ReleaseCommands(), AdminCommands(), SessionCommands(),
                     CollectionCommands()}) {
    for (auto& command : group) commands.push_back(std::move(command));
  }
  int checked = 0;
  for (const Command& command : commands) {
    const std::string& name = command.name;
    if (!absl::EndsWith(name, " list") && name != "releases" && name != "admin audit" &&
        name != "release get") {
      continue;
    }
    ++checked;
    bool json = false;
    for (const OptionSpec& option : command.options) json = json || option.name == "json";
    EXPECT_TRUE(json) << name << " has no --json";
  }
  EXPECT_GE(checked, 5);  // datasets list, admin token list, releases, admin audit, release get
}

// "Hints name commands that do not exist" (`dpcurator datasets`, `session
// get`): every "`dpcurator WORDS" in a client source names a command of the
// client's table (its first words, or a command group).
TEST_F(FrictionTest, EveryCommandNamedInAHintExists) {
  std::vector<Command> all;
  for (auto group : {DemoCommands(), SchemaCommands(), SplitCommands(), DatasetCommands(),
                     ReleaseCommands(),
                     SessionCommands(), CollectionCommands(), AdminCommands(), TrainCommands(),
                     SampleCommands(), EvalCommands(), ReportCommands(), AuditCommands(),
                     PrivacyCommands()}) {
    for (auto& command : group) all.push_back(std::move(command));
  }
  std::set<std::string> names;
  for (const Command& command : all) names.insert(command.name);
  const std::regex hint(R"re(`dpcurator ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)*))re");
  std::vector<std::string> wrong;
  const fs::path root = fs::path(DPC_SOURCE_DIR) / "client";
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
    std::ifstream input(entry.path());
    std::stringstream text;
    text << input.rdbuf();
    const std::string source = text.str();
    for (std::sregex_iterator it(source.begin(), source.end(), hint), end; it != end; ++it) {
      // The longest run of the hint's words that is a command; a bare
      // group word ("train" before a method's name) is fine when it starts
      // some command.
      std::vector<std::string> words;
      std::istringstream split((*it)[1].str());
      for (std::string word; split >> word;) words.push_back(word);
      bool found = false;
      std::string prefix;
      for (const std::string& word : words) {
        prefix += (prefix.empty() ? "" : " ") + word;
        found = found || names.count(prefix) > 0;
      }
      // A literal that stops after a group word ("`dpcurator train " and
      // then a method's name, joined at run time) is fine when the group
      // exists; "`dpcurator datasets`", closed there, is not a command.
      const size_t after = static_cast<size_t>(it->position(0) + it->length(0));
      const bool closed = after < source.size() && source[after] == '`';
      if (!found && !closed && words.size() == 1) {
        for (const std::string& name : names) {
          found = found || absl::StartsWith(name, words[0] + " ");
        }
      }
      if (!found) {
        wrong.push_back(fs::relative(entry.path(), root.parent_path()).string() + ": `dpcurator " +
                        (*it)[1].str());
      }
    }
  }
  std::string listed;
  for (const auto& w : wrong) listed += "\n  " + w;
  EXPECT_TRUE(wrong.empty()) << "hints that name no command:" << listed;
}

}  // namespace
}  // namespace dpcurator::client
