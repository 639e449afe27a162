// `dpcurator report` as a user runs it (issue 17 item 4): on two halves of
// the real Adult training file the summary scores must read as "the same
// data" (>= 0.95), the page must be one self-contained file, and bad input
// must give a clear error and leave no report behind.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dpcurator/v1/dpcurator.pb.h"

namespace {

struct ReportCliRun {
  int exit_code;
  std::string output;
};

// `with_stderr`: the error messages too (false: stdout only, for --json).
ReportCliRun RunReportCli(const std::string& arguments, bool with_stderr = true) {
  const std::string command =
      std::string(DPC_CLI) + " " + arguments + (with_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string output;
  std::array<char, 4096> buffer;
  size_t read;
  while ((read = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), read);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

class ReportCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dpc_report_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    // Split adult.data into odd and even rows, both with the header.
    std::ifstream data(std::string(DPC_SOURCE_DIR) + "/../shared/data/adult/adult.data");
    ASSERT_TRUE(data) << "the shared Adult data is missing";
    std::string header;
    std::getline(data, header);
    std::ofstream first(dir_ / "first.csv");
    std::ofstream second(dir_ / "second.csv");
    first << header << "\n";
    second << header << "\n";
    std::string line;
    for (int i = 0; std::getline(data, line); ++i) {
      if (line.empty()) continue;
      (i % 2 == 0 ? first : second) << line << "\n";
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Schema() const { return std::string(DPC_SOURCE_DIR) + "/schemas/adult.schema.json"; }

  std::filesystem::path dir_;
};

TEST_F(ReportCliTest, RealHalvesScoreAsTheSameData) {
  const ReportCliRun run = RunReportCli("report --schema " + Schema() + " --synthetic " + Path("first.csv") +
                            " --real " + Path("second.csv") + " --no-tstr --out " +
                            Path("report.html") + " --json",
                            /*with_stderr=*/false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto json = nlohmann::json::parse(run.output);
  EXPECT_GE(json["column_shapes"].get<double>(), 0.95);
  EXPECT_GE(json["column_pair_trends"].get<double>(), 0.95);
  EXPECT_GE(json["overall"].get<double>(), 0.95);
  EXPECT_EQ(json["pairs"].get<int>(), 15 * 14 / 2);

  std::ifstream file(Path("report.html"));
  std::stringstream html;
  html << file.rdbuf();
  const std::string page = html.str();
  // One plot per column and the heatmap; nothing fetched from anywhere.
  size_t svgs = 0;
  for (size_t at = page.find("<svg"); at != std::string::npos; at = page.find("<svg", at + 1)) {
    ++svgs;
  }
  EXPECT_EQ(svgs, 16u);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);
  EXPECT_EQ(page.find("href="), std::string::npos);
  EXPECT_NE(page.find("hours-per-week"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(Path("report.html.tmp")));
}

TEST_F(ReportCliTest, SyntheticRowsOutsideTheSchemaAreRefusedAndNoReportIsWritten) {
  {
    std::ofstream bad(Path("bad.csv"));
    std::ifstream good(Path("first.csv"));
    std::string line;
    std::getline(good, line);
    bad << line << "\n";
    bad << "39, Martian, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, "
           "White, Male, 2174, 0, 40, United-States, <=50K\n";
  }
  const ReportCliRun run = RunReportCli("report --schema " + Schema() + " --synthetic " + Path("bad.csv") +
                            " --real " + Path("second.csv") + " --out " + Path("bad.html"));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("bad.csv"), std::string::npos) << run.output;
  EXPECT_FALSE(std::filesystem::exists(Path("bad.html")));
}

// Several synthetic files on one page (issue 26 item 4: AIM beside the
// other methods): one row each, in order, with its own scores; a table of
// only the high earners scores below the real half on the same page, and a
// --labels list of another length is refused before anything is written.
TEST_F(ReportCliTest, SeveralSyntheticFilesAreComparedOnOnePage) {
  {
    std::ifstream first(Path("first.csv"));
    std::ofstream rich(Path("rich.csv"));
    std::string line;
    std::getline(first, line);
    rich << line << "\n";
    while (std::getline(first, line)) {
      if (line.find(">50K") != std::string::npos) rich << line << "\n";
    }
  }
  const std::string files = Path("first.csv") + "," + Path("rich.csv");
  const ReportCliRun run = RunReportCli("report --schema " + Schema() + " --synthetic " + files +
                                " --labels half,rich --real " + Path("second.csv") +
                                " --no-tstr --out " + Path("compare.html") + " --json",
                            /*with_stderr=*/false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto json = nlohmann::json::parse(run.output);
  ASSERT_EQ(json["compared"].size(), 2u);
  EXPECT_EQ(json["compared"][0]["label"], "half");
  EXPECT_EQ(json["compared"][1]["label"], "rich");
  // The page's summary is the first file's, and so is the first row.
  EXPECT_DOUBLE_EQ(json["compared"][0]["overall"].get<double>(), json["overall"].get<double>());
  EXPECT_GE(json["compared"][0]["overall"].get<double>(), 0.95);
  EXPECT_LT(json["compared"][1]["overall"].get<double>(),
            json["compared"][0]["overall"].get<double>() - 0.02);
  std::ifstream file(Path("compare.html"));
  std::stringstream html;
  html << file.rdbuf();
  const std::string page = html.str();
  const size_t table = page.find("id=\"compared\"");
  ASSERT_NE(table, std::string::npos);
  EXPECT_LT(page.find("<td>half</td>", table), page.find("<td>rich</td>", table));

  const ReportCliRun mismatched = RunReportCli("report --schema " + Schema() + " --synthetic " + files +
                                   " --labels only-one --real " + Path("second.csv") +
                                   " --no-tstr --out " + Path("mismatch.html"));
  EXPECT_NE(mismatched.exit_code, 0);
  EXPECT_NE(mismatched.output.find("--labels"), std::string::npos) << mismatched.output;
  EXPECT_FALSE(std::filesystem::exists(Path("mismatch.html")));
}

TEST_F(ReportCliTest, NeedsExactlyOneOfModelAndSchema) {
  const ReportCliRun run = RunReportCli("report --synthetic " + Path("first.csv") + " --real " +
                            Path("second.csv") + " --out " + Path("x.html"));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("--model"), std::string::npos) << run.output;
}

// Issue 38: several compared files each list their own release (before: the
// first model's epsilon stood for every file), and the dataset's composed
// total is said to be unknown when the report is made offline.
TEST_F(ReportCliTest, EachComparedFileListsItsOwnRelease) {
  namespace v1 = dpcurator::v1;
  v1::TableSchema schema;
  for (const char* name : {"a", "b"}) {
    v1::ColumnSchema* column = schema.add_columns();
    column->set_name(name);
    column->set_type(v1::ColumnSchema::CATEGORICAL);
    column->add_categories("x");
    column->add_categories("y");
  }
  const auto write_model = [&](const std::string& path, const std::string& release_id,
                               double epsilon) {
    v1::GeneratorModel model;
    model.set_format_version(1);
    model.set_method("merf");
    model.set_dataset_id("ds_0123456789abcdef0123456789abcdef");
    model.set_release_id(release_id);
    *model.mutable_schema() = schema;
    model.set_epsilon(epsilon);
    model.set_delta(1e-5);
    std::ofstream out(path, std::ios::binary);
    ASSERT_TRUE(model.SerializeToOstream(&out));
  };
  write_model(Path("one.model"), "rel_one", 0.75);
  write_model(Path("two.model"), "rel_two", 0.25);
  {
    std::ofstream rows(Path("rows.csv"));
    rows << "a,b\n";
    for (int i = 0; i < 50; ++i) rows << (i % 2 ? "x" : "y") << "," << (i % 3 ? "x" : "y") << "\n";
  }
  const ReportCliRun run =
      RunReportCli("report --model " + Path("one.model") + "," + Path("two.model") + " --synthetic " +
                 Path("rows.csv") + "," + Path("rows.csv") + " --labels one,two --real " +
                 Path("rows.csv") + " --out " + Path("p.html") + " --json",
             /*with_stderr=*/false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto json = nlohmann::json::parse(run.output);
  ASSERT_EQ(json["privacy"].size(), 2u);
  EXPECT_EQ(json["privacy"][0]["label"], "one");
  EXPECT_DOUBLE_EQ(json["privacy"][0]["epsilon"].get<double>(), 0.75);
  EXPECT_EQ(json["privacy"][1]["release_ids"][0], "rel_two");
  EXPECT_DOUBLE_EQ(json["privacy"][1]["epsilon"].get<double>(), 0.25);
  EXPECT_NE(json["dataset_total"]["unknown"].get<std::string>().find("offline"),
            std::string::npos);
  std::ifstream file(Path("p.html"));
  std::stringstream html;
  html << file.rdbuf();
  EXPECT_NE(html.str().find("<td>0.25</td>"), std::string::npos);
  EXPECT_NE(html.str().find("composed total: unknown (made offline"), std::string::npos);
}

// Binary columns get DP-auto-GAN's two plots (issue 25 item 4): the JSON's
// mean probability gap is the hand value for a synthetic table that sets one
// of six columns to all ones, and the prediction plot needs --real-train.
TEST_F(ReportCliTest, BinaryColumnsGetTheDimensionWisePlots) {
  constexpr int kColumns = 6;
  constexpr int kRows = 400;
  {
    std::ofstream schema(Path("binary.schema.json"));
    schema << "{\"columns\": [";
    for (int j = 0; j < kColumns; ++j) {
      schema << (j ? ", " : "") << "{\"name\": \"d" << j
             << "\", \"type\": \"CATEGORICAL\", \"categories\": [\"0\", \"1\"]}";
    }
    schema << "]}\n";
  }
  // Column j of row i is 1 when i mod (j + 2) == 0; columns 0 and 2 share
  // rows (even multiples of 4), so they predict each other.
  auto write = [&](const std::string& name, bool column_one_all_ones) {
    std::ofstream csv(Path(name));
    for (int j = 0; j < kColumns; ++j) csv << (j ? "," : "") << "d" << j;
    csv << "\n";
    for (int i = 0; i < kRows; ++i) {
      for (int j = 0; j < kColumns; ++j) {
        const bool one = (column_one_all_ones && j == 1) || i % (j + 2) == 0;
        csv << (j ? "," : "") << (one ? 1 : 0);
      }
      csv << "\n";
    }
  };
  write("real.csv", false);
  write("synthetic.csv", true);
  const std::string common = "report --schema " + Path("binary.schema.json") + " --synthetic " +
                             Path("synthetic.csv") + " --real " + Path("real.csv") +
                             " --out " + Path("binary.html") + " --json";
  ReportCliRun run = RunReportCli(common, /*with_stderr=*/false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto json = nlohmann::json::parse(run.output);
  // Column d1 is 1 on every third row: its share moves from 134/400 to 1.
  EXPECT_NEAR(json["binary_probability_mean_gap"].get<double>(),
              (1.0 - 134.0 / kRows) / kColumns, 1e-12);
  EXPECT_FALSE(json.contains("binary_auroc_mean_gap"));
  std::ifstream file(Path("binary.html"));
  std::stringstream html;
  html << file.rdbuf();
  EXPECT_NE(html.str().find("Dimension-wise probability"), std::string::npos);

  run = RunReportCli(common + " --real-train " + Path("real.csv"), /*with_stderr=*/false);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  json = nlohmann::json::parse(run.output);
  EXPECT_TRUE(json.contains("binary_auroc_mean_gap")) << run.output;
}

// The privacy table goes to privacy officers (issue 25 item 2): an artefact
// without a recorded relation (RELATION_UNSPECIFIED, read as add/remove)
// reads "add or remove one row", never the enum's name, and a model that
// names its dataset where a release id would be (session-trained methods)
// does not list the dataset among the release ids.
TEST_F(ReportCliTest, PrivacyTableSpeaksWordsAndListsOnlyReleases) {
  namespace v1 = dpcurator::v1;
  v1::TableSchema schema;
  for (const char* name : {"a", "b"}) {
    v1::ColumnSchema* column = schema.add_columns();
    column->set_name(name);
    column->set_type(v1::ColumnSchema::CATEGORICAL);
    column->add_categories("x");
    column->add_categories("y");
  }
  v1::GeneratorModel model;
  model.set_format_version(1);
  model.set_method("merf");
  model.set_dataset_id("ds_0123456789abcdef0123456789abcdef");
  model.set_release_id(model.dataset_id());
  *model.mutable_schema() = schema;
  model.set_epsilon(1.0);
  model.set_delta(1e-5);
  // The file `release --out` writes: the artefact in its Release envelope.
  v1::Release release;
  release.set_id("rel_feedfacefeedfacefeedfacefeedface");
  release.set_dataset_id(model.dataset_id());
  v1::EmbeddingArtefact& artefact = *release.mutable_embedding();
  artefact.set_release_id(release.id());
  *artefact.mutable_schema() = schema;
  {
    std::ofstream out(Path("m.model"), std::ios::binary);
    ASSERT_TRUE(model.SerializeToOstream(&out));
    std::ofstream art(Path("a.release"), std::ios::binary);
    ASSERT_TRUE(release.SerializeToOstream(&art));
    std::ofstream rows(Path("rows.csv"));
    rows << "a,b\n";
    for (int i = 0; i < 50; ++i) rows << (i % 2 ? "x" : "y") << "," << (i % 3 ? "x" : "y") << "\n";
  }
  const ReportCliRun run = RunReportCli("report --model " + Path("m.model") + " --release " +
                            Path("a.release") + " --synthetic " + Path("rows.csv") + " --real " +
                            Path("rows.csv") + " --out " + Path("p.html"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream file(Path("p.html"));
  std::stringstream html;
  html << file.rdbuf();
  const std::string page = html.str();
  EXPECT_EQ(page.find("RELATION_UNSPECIFIED"), std::string::npos);
  EXPECT_NE(page.find("add or remove one row"), std::string::npos);
  EXPECT_NE(page.find("rel_feedfacefeedfacefeedfacefeedface"), std::string::npos);
  // The dataset id appears once, as the dataset, not again as a release.
  const size_t first = page.find(model.dataset_id());
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(page.find(model.dataset_id(), first + 1), std::string::npos);
}

}  // namespace
