// `dpcurator train autogan` against a local dpcurator-server (issue 15 item
// 4): a tiny network and few steps through both dp_sgd sessions, then
// `sample` and `eval` on the model unchanged; the dataset's spent epsilon
// is what the two sessions charged; rerunning with the same --key reopens
// the same sessions and charges nothing more.

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <random>
#include <regex>
#include <string>

#include "tests/e2e/local_server.h"

namespace dpcurator {
namespace {

using e2e::CliRun;

class AutoganCliTest : public e2e::LocalServerTest {
 protected:
  void SetUp() override {
    StartServer("dpc_autogan_cli_", "curator curator-token-ag\nanalyst analyst-token-ag\n");
  }
};

TEST_F(AutoganCliTest, TrainSampleEvalAndCharges) {
  e2e::WriteLabelledMixedTable(dir_, 600, /*seed=*/5);
  CliRun created = RunCli("datasets create --name t --schema s.json --epsilon 3 --json",
                          Env("curator-token-ag"));
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string dataset = nlohmann::json::parse(created.out)["dataset_id"];
  CliRun uploaded =
      RunCli("upload --dataset " + dataset + " --csv data.csv --json", Env("curator-token-ag"));
  ASSERT_EQ(uploaded.exit_code, 0) << uploaded.err;

  const std::string train_args =
      "train autogan --dataset " + dataset +
      " --epsilon 1 --rows 600 --steps-ae 30 --steps-gan 20 --batch-ae 60 --batch-gan 60"
      " --hidden-ae 8 --latent-dim 4 --hidden-critic 8 --autoencoder-share 0.6 --key e2e-key"
      " --out m.pb";
  CliRun train = RunCli(train_args, Env("analyst-token-ag"));
  ASSERT_EQ(train.exit_code, 0) << train.err;
  // 600 rows x epsilon 1 can carry the label (issue 38's warning: below 500).
  EXPECT_EQ((train.out + train.err).find("rows x epsilon is"), std::string::npos) << train.out;
  // One progress line per phase, and the charge of each session.
  EXPECT_NE(train.err.find("train autogan: autoencoder"), std::string::npos) << train.err;
  EXPECT_NE(train.err.find("train autogan: critic"), std::string::npos) << train.err;
  const std::regex closed(
      "(autoencoder|critic): session \\S+ closed after (\\d+) steps, noise multiplier \\S+, "
      "epsilon (\\S+) charged");
  double autoencoder_charged = 0, critic_charged = 0;
  int sessions = 0;
  for (std::sregex_iterator it(train.err.begin(), train.err.end(), closed), end; it != end; ++it) {
    ++sessions;
    EXPECT_EQ(std::stoi((*it)[2]), (*it)[1] == "autoencoder" ? 30 : 20);
    ((*it)[1] == "autoencoder" ? autoencoder_charged : critic_charged) = std::stod((*it)[3]);
  }
  ASSERT_EQ(sessions, 2) << train.err;
  // The autoencoder alone costs its share of epsilon 1 (0.6); the critic's
  // noise is calibrated so that both phases compose to epsilon 1, so its
  // own charge is above the remaining 0.4 (composition is subadditive).
  EXPECT_NEAR(autoencoder_charged, 0.6, 1e-3);
  EXPECT_GT(critic_charged, 0.4 + 1e-3);

  CliRun budget = RunCli("budget --dataset " + dataset + " --json", Env("analyst-token-ag"));
  ASSERT_EQ(budget.exit_code, 0) << budget.err;
  const double spent = nlohmann::json::parse(budget.out)["epsilon_spent"].get<double>();
  // The ledger composes the two sessions to the epsilon asked for: all of
  // it is used (calibrating each phase alone to its share left 23% unused
  // on Adult), and never more.
  EXPECT_LE(spent, 1.0 + 1e-9);
  EXPECT_GE(spent, 1.0 - 1e-3);

  CliRun sample = RunCli("sample --model m.pb --rows 300 --out syn.csv", "");
  ASSERT_EQ(sample.exit_code, 0) << sample.err;
  std::ifstream synthetic(dir_ / "syn.csv");
  std::string line;
  std::getline(synthetic, line);
  EXPECT_EQ(line, "x,c,y");
  int lines = 0;
  for (; std::getline(synthetic, line); ++lines) {
    const std::string y = line.substr(line.rfind(',') + 1);
    EXPECT_TRUE(y == "yes" || y == "no") << line;
  }
  EXPECT_EQ(lines, 300);
  CliRun eval = RunCli("eval --model m.pb --synthetic syn.csv --real data.csv --json", "");
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  EXPECT_FALSE(nlohmann::json::parse(eval.out)["utility"].empty());

  // The same command and key again: the server replays the session (no new
  // reservation), so nothing more is charged.
  // The rerun cannot resume the finished sessions and says what to do.
  CliRun rerun = RunCli(train_args, Env("analyst-token-ag"));
  EXPECT_NE(rerun.exit_code, 0);
  EXPECT_NE(rerun.err.find("rerun with a new --key"), std::string::npos) << rerun.err;
  CliRun again = RunCli("budget --dataset " + dataset + " --json", Env("analyst-token-ag"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NEAR(nlohmann::json::parse(again.out)["epsilon_spent"].get<double>(), spent, 1e-9);
}

}  // namespace
}  // namespace dpcurator
