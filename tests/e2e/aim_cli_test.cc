// AIM through the command line against a local dpcurator-server (issue 26
// item 3): Adult at epsilon 1, `train aim --dataset --epsilon` (one command:
// release, progress per round, fit) -> `sample` -> `eval --json`; the
// ledger's one charge; a refused request charges nothing. The quality bars
// are the stand-in fit's (a tree of the selected pairs), not the issue's.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <sstream>

#include "tests/e2e/local_server.h"

namespace dpcurator {
namespace {

using e2e::CliRun;

class AimCliTest : public e2e::LocalServerTest {
 protected:
  void SetUp() override {
    StartServer("dpc_aim_cli_", "curator curator-token-aim\nanalyst analyst-token-aim\n");
  }
  static std::string Source(const std::string& path) {
    return std::string(DPC_SOURCE_DIR) + "/" + path;
  }
};

TEST_F(AimCliTest, AdultTrainSampleEval) {
  const std::string curator = Env("curator-token-aim");
  const std::string analyst = Env("analyst-token-aim");
  CliRun created = RunCli("datasets create --name adult --schema " +
                              Source("schemas/adult.schema.json") + " --epsilon 3 --json",
                          curator);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string dataset = nlohmann::json::parse(created.out)["dataset_id"];
  CliRun uploaded = RunCli(
      "upload --dataset " + dataset + " --csv " + Source("../shared/data/adult/adult.data") +
          " --json",
      curator);
  ASSERT_EQ(uploaded.exit_code, 0) << uploaded.err;

  CliRun trained = RunCli("train aim --dataset " + dataset +
                              " --epsilon 1 --key aim-e2e --release-out aim.release --out m.pb",
                          analyst);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  // Progress from the artefact: the 1-way line and one line per round.
  EXPECT_NE(trained.out.find("aim: 15 1-way marginals"), std::string::npos) << trained.out;
  EXPECT_NE(trained.out.find("round   1: ("), std::string::npos) << trained.out;
  EXPECT_NE(trained.out.find("rho used"), std::string::npos) << trained.out;
  CliRun budget = RunCli("budget --dataset " + dataset + " --json", analyst);
  ASSERT_EQ(budget.exit_code, 0) << budget.err;
  const auto report_budget = nlohmann::json::parse(budget.out);
  const double spent = report_budget["epsilon_spent"].get<double>();
  EXPECT_LE(spent, 1.0 + 1e-9);
  EXPECT_GT(spent, 0.99);
  // The saved release fits again with no server (a short fit: this checks
  // the path, the first fit's quality is checked below).
  CliRun again = RunCli("train aim --release aim.release --fit-iterations 100 --out m2.pb", "");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  // `release --kind aim` makes the same kind of release without `train aim`
  // (as `release --kind mst`), with the request's workload, and `train aim
  // --release` fits it.
  CliRun released = RunCli("release --dataset " + dataset +
                               " --kind aim --epsilon 0.5 --workload 'age,Y;education,Y' "
                               "--out aim2.release --json",
                           analyst);
  ASSERT_EQ(released.exit_code, 0) << released.err;
  const auto release_json = nlohmann::json::parse(released.out);
  EXPECT_EQ(release_json["kind"], "aim");
  // The recipe's budget is the largest rho whose conversion stays within
  // the target (LargestRhoWithin, in conservative arithmetic): at most 0.5,
  // and within the search's tolerance of it.
  EXPECT_LE(release_json["epsilon"].get<double>(), 0.5);
  EXPECT_NEAR(release_json["epsilon"].get<double>(), 0.5, 1e-6);
  EXPECT_GT(release_json["noise_multiplier"].get<double>(), 0.0);
  CliRun fitted =
      RunCli("train aim --release aim2.release --fit-iterations 100 --out m3.pb", "");
  ASSERT_EQ(fitted.exit_code, 0) << fitted.err;
  // Only the workload's cliques (and their subsets) were candidates.
  EXPECT_EQ(fitted.out.find("(fnlwgt, "), std::string::npos) << fitted.out;
  const double spent_after_release =
      nlohmann::json::parse(RunCli("budget --dataset " + dataset + " --json", analyst).out)
          ["epsilon_spent"]
              .get<double>();
  EXPECT_GT(spent_after_release, spent + 0.1);

  CliRun sampled = RunCli("sample --model m.pb --rows 32561 --out syn.csv", "");
  ASSERT_EQ(sampled.exit_code, 0) << sampled.err;
  CliRun evaluated =
      RunCli("eval --model m.pb --synthetic syn.csv --real " +
                 Source("../shared/data/adult/adult.test") + " --json",
             "");
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
  const auto report = nlohmann::json::parse(evaluated.out);
  bool saw_lr = false;
  for (const auto& row : report["utility"]) {
    if (row["classifier"] == "logistic_regression" && row["train_source"] == "synthetic") {
      saw_lr = true;
      std::printf("aim stand-in LR TSTR ROC-AUC %.4f\n", row["roc_auc"].get<double>());
      EXPECT_GE(row["roc_auc"].get<double>(), 0.70);
    }
  }
  EXPECT_TRUE(saw_lr) << evaluated.out;

  // Refused before admission: nothing more is charged.
  CliRun bad = RunCli("train aim --dataset " + dataset +
                          " --epsilon 1 --workload 'age,no_such_column' --out bad.pb",
                      analyst);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("no_such_column"), std::string::npos) << bad.err;
  CliRun after = RunCli("budget --dataset " + dataset + " --json", analyst);
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_NEAR(nlohmann::json::parse(after.out)["epsilon_spent"].get<double>(),
              spent_after_release, 1e-12);
}

// Issue 38: the generated steward table (2,000 rows, a 124-level district, a
// heavy-tailed money column, a 7-class label; docs/demo-data.md), as a user
// gets it (`demo --table steward --write-data`), through create, upload,
// `train aim`, sample and eval. AIM at epsilon 1 measures the label with a
// feature (the label round) and its rows carry the label (TSTR ROC-AUC at
// least 0.65; real rows reach 0.8, bench/steward_aim.sh has the 5 seeds); at
// epsilon 0.05 (rows x epsilon 100) it warns that they may not.
// The cells of one column of a CSV file with a header line, as written by
// `sample` and `demo --write-data` (no quoted commas in these files): the
// numbers, and the count of empty (missing) cells.
struct CsvColumn {
  std::vector<double> values;
  int missing = 0;
  int rows = 0;
};
std::vector<std::string> SplitCommas(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream stream(line);
  std::string cell;
  while (std::getline(stream, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}
CsvColumn ReadCsvColumn(const std::filesystem::path& path, const std::string& name) {
  std::ifstream input(path);
  std::string line;
  std::getline(input, line);
  const std::vector<std::string> header = SplitCommas(line);
  const auto at = std::find(header.begin(), header.end(), name);
  CsvColumn column;
  if (at == header.end()) return column;
  const size_t index = at - header.begin();
  while (std::getline(input, line)) {
    const std::vector<std::string> cells = SplitCommas(line);
    if (cells.size() != header.size()) continue;
    ++column.rows;
    if (cells[index].empty()) {
      ++column.missing;
    } else {
      column.values.push_back(std::strtod(cells[index].c_str(), nullptr));
    }
  }
  return column;
}
double Quantile(std::vector<double> values, double share) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(share * (values.size() - 1))];
}

// Issue 38's "done when": the steward table (2,000 rows, nullable numerics
// with 12-28% missing cells, a money column over five decades, a 124-level
// district, a 7-class label; docs/demo-data.md) goes through create, upload,
// `train aim`, `sample` and `eval` with no imputation; on each of 5 runs at
// epsilon 1 (the server's noise is fresh each time) AIM's TSTR ROC-AUC is at
// least 0.65 (the family's average, and logistic regression's) where real
// rows reach 0.8, the money column's 50th and 90th percentiles are within a
// factor 2 of real, and the missing shares are kept; and a method whose
// rows x epsilon cannot carry the label says so (aim and mst at 0.05).
TEST_F(AimCliTest, StewardTableCarriesTheLabelAndWarnsWhenItCannot) {
  const std::string curator = Env("curator-token-aim");
  const std::string analyst = Env("analyst-token-aim");
  CliRun wrote = RunCli("demo --table steward --write-data steward", "");
  ASSERT_EQ(wrote.exit_code, 0) << wrote.err;
  EXPECT_NE(wrote.out.find("train.csv (2000 rows)"), std::string::npos) << wrote.out;
  CliRun created = RunCli(
      "datasets create --name steward --schema steward/schema.json --epsilon 6 --json", curator);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string dataset = nlohmann::json::parse(created.out)["dataset_id"];
  CliRun uploaded =
      RunCli("upload --dataset " + dataset + " --csv steward/train.csv --json", curator);
  ASSERT_EQ(uploaded.exit_code, 0) << uploaded.err;

  const CsvColumn real_income = ReadCsvColumn(dir_ / "steward/test.csv", "income");
  const CsvColumn real_score = ReadCsvColumn(dir_ / "steward/test.csv", "score");
  ASSERT_GT(real_income.values.size(), 900u);
  ASSERT_GT(real_score.missing, 0) << "the table has missing numerics";
  for (int run = 1; run <= 5; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    const std::string model = "m" + std::to_string(run) + ".pb";
    const std::string rows = "syn" + std::to_string(run) + ".csv";
    CliRun trained =
        RunCli("train aim --dataset " + dataset + " --epsilon 1 --out " + model, analyst);
    ASSERT_EQ(trained.exit_code, 0) << trained.err;
    // What AIM measured, not an MST edge count; a label pair; no warning.
    EXPECT_EQ(trained.out.find("in its tree"), std::string::npos) << trained.out;
    EXPECT_NE(trained.out.find("aim measured: 12 1-way tables"), std::string::npos)
        << trained.out;
    EXPECT_EQ(trained.out.find(" 0 with the label (outcome)"), std::string::npos)
        << trained.out;
    EXPECT_NE(trained.out.find("with the label (outcome)"), std::string::npos) << trained.out;
    EXPECT_EQ(trained.out.find("warning"), std::string::npos) << trained.out;
    CliRun sampled = RunCli(
        "sample --model " + model + " --rows 2000 --seed " + std::to_string(run) + " --out " + rows,
        "");
    ASSERT_EQ(sampled.exit_code, 0) << sampled.err;
    CliRun evaluated =
        RunCli("eval --model " + model + " --synthetic " + rows + " --real steward/test.csv --json",
               "");
    ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
    const auto report = nlohmann::json::parse(evaluated.out);
    double sum = 0.0, real_sum = 0.0;
    int count = 0, real_count = 0;
    for (const auto& row : report["utility"]) {
      const double auc = row["roc_auc"].get<double>();
      const std::string classifier = row["classifier"].get<std::string>();
      if (row["train_source"] == "real") {
        real_sum += auc;
        ++real_count;
        continue;
      }
      std::printf("steward run %d aim TSTR %s ROC-AUC %.4f\n", run, classifier.c_str(), auc);
      if (classifier == "logistic_regression") {
        EXPECT_GE(auc, 0.65);
      }
      sum += auc;
      ++count;
    }
    ASSERT_GE(count, 2) << evaluated.out;
    EXPECT_GE(sum / count, 0.65) << evaluated.out;
    if (real_count > 0) {
      EXPECT_GE(real_sum / real_count, 0.8) << evaluated.out;
    }

    const CsvColumn income = ReadCsvColumn(dir_ / rows, "income");
    for (double share : {0.5, 0.9}) {
      const double ratio = Quantile(income.values, share) / Quantile(real_income.values, share);
      std::printf("steward run %d income p%.0f synthetic / real %.3f\n", run, 100 * share, ratio);
      EXPECT_GT(ratio, 0.5) << share;
      EXPECT_LT(ratio, 2.0) << share;
    }
    const CsvColumn score = ReadCsvColumn(dir_ / rows, "score");
    const double real_share = static_cast<double>(real_score.missing) / real_score.rows;
    const double synthetic_share = static_cast<double>(score.missing) / score.rows;
    EXPECT_NEAR(synthetic_share, real_share, 0.1) << "score's missing share";
  }

  // Rows x epsilon = 100: the label round still measures a label pair, but
  // the noise can hide the label; the output says so (rows estimated from
  // the release's noisy 1-way tables). MST says so too.
  CliRun tiny = RunCli(
      "train aim --dataset " + dataset + " --epsilon 0.05 --fit-iterations 100 --out tiny.pb",
      analyst);
  ASSERT_EQ(tiny.exit_code, 0) << tiny.err;
  EXPECT_NE(tiny.out.find("warning: aim release of about"), std::string::npos) << tiny.out;
  EXPECT_NE(tiny.out.find("at epsilon 0.05: rows x epsilon is"), std::string::npos) << tiny.out;
  CliRun tiny_mst =
      RunCli("train mst --dataset " + dataset + " --epsilon 0.05 --out tiny_mst.pb", analyst);
  ASSERT_EQ(tiny_mst.exit_code, 0) << tiny_mst.err;
  EXPECT_NE((tiny_mst.out + tiny_mst.err).find("rows x epsilon is"), std::string::npos)
      << tiny_mst.out << tiny_mst.err;
}

}  // namespace
}  // namespace dpcurator
