// MST through the command line against a local dpcurator-server (issue 17):
// Adult at epsilon 1, `release --kind mst` -> `train mst` -> `sample` ->
// `eval --json`; the four shape checks within 5 points of real and
// logistic-regression TSTR ROC-AUC >= 0.80; the ledger's charge; and the
// one-command form `train mst --dataset --epsilon`.

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "tests/e2e/local_server.h"

namespace dpcurator {
namespace {

using e2e::CliRun;

class MstCliTest : public e2e::LocalServerTest {
 protected:
  void SetUp() override {
    StartServer("dpc_mst_cli_", "curator curator-token-mst\nanalyst analyst-token-mst\n");
  }
  static std::string Source(const std::string& path) {
    return std::string(DPC_SOURCE_DIR) + "/" + path;
  }
};

TEST_F(MstCliTest, AdultReleaseTrainSampleEval) {
  const std::string curator = Env("curator-token-mst");
  const std::string analyst = Env("analyst-token-mst");
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

  CliRun released = RunCli("release --kind mst --dataset " + dataset +
                               " --epsilon 1 --key mst-e2e --out mst.release --json",
                           analyst);
  ASSERT_EQ(released.exit_code, 0) << released.err;
  const auto release = nlohmann::json::parse(released.out);
  EXPECT_EQ(release["kind"], "mst");
  const double epsilon = release["epsilon"].get<double>();
  EXPECT_LE(epsilon, 1.0 + 1e-9);
  EXPECT_GT(epsilon, 0.99);
  EXPECT_NEAR(release["epsilon_spent_total"].get<double>(), epsilon, 1e-9);

  CliRun trained = RunCli("train mst --release mst.release --out m.pb", "");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
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
      EXPECT_GE(row["roc_auc"].get<double>(), 0.80);
    }
  }
  EXPECT_TRUE(saw_lr) << evaluated.out;
  // The four checks, in percent (the JSON's shares are fractions or
  // percents; compare like with like).
  int checks = 0;
  for (const auto& check : report["paper_metrics"]["shape_checks"]["named"]) {
    const double real = check["real"].get<double>();
    const double value = check["value"].get<double>();
    const double scale = real > 1.0 || value > 1.0 ? 1.0 : 100.0;
    EXPECT_LE(std::abs(value - real) * scale, 5.0) << check.dump();
    ++checks;
  }
  EXPECT_EQ(checks, 4) << report["paper_metrics"].dump();

  // One command: release and fit; the ledger charges the second release.
  CliRun one = RunCli("train mst --dataset " + dataset + " --epsilon 0.5 --out m2.pb", analyst);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  CliRun budget = RunCli("budget --dataset " + dataset + " --json", analyst);
  ASSERT_EQ(budget.exit_code, 0) << budget.err;
  const double spent = nlohmann::json::parse(budget.out)["epsilon_spent"].get<double>();
  EXPECT_GT(spent, epsilon);
  EXPECT_LE(spent, epsilon + 0.5 + 1e-6);
  // A bad request is refused before admission: nothing more is charged.
  CliRun bad = RunCli("release --kind mst --dataset " + dataset +
                          " --noise-multiplier 2 --out bad.release",
                      analyst);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("epsilon"), std::string::npos) << bad.err;
  CliRun again = RunCli("budget --dataset " + dataset + " --json", analyst);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NEAR(nlohmann::json::parse(again.out)["epsilon_spent"].get<double>(), spent, 1e-12);
}

}  // namespace
}  // namespace dpcurator
