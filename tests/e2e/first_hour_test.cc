// End-to-end: the first hour of a new user (issue 11, part C), with the real
// binaries against a local dpcurator-server. A German-credit-like ARFF file
// (generated here: 7 numeric and 13 nominal attributes plus a binary class,
// 400 rows; no data set is downloaded or copied) goes from `schema draft`
// to a release, a trained model and synthetic rows, with no hand-written
// JSON beyond replacing the bounds the draft flagged as data-derived.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadAll(const fs::path& path) {
  std::ifstream input(path);
  std::stringstream buffer;
  buffer << input.rdbuf();
  return buffer.str();
}

// A local server on a temporary database, plaintext, with one curator and
// one analyst token; stopped when the fixture ends.
class FirstHourTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dpc_first_hour_" + std::to_string(getpid()) + "_" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "tokens.txt") << "curator curator-token-e2e\nanalyst analyst-token-e2e\n"
                                          "device device-token-e2e-0\n";
    const std::string port_file = (dir_ / "port").string();
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      FILE* log = std::freopen((dir_ / "server.log").c_str(), "w", stderr);
      (void)log;
      const std::string db = "--db=" + (dir_ / "curator.db").string();
      const std::string tokens = "--tokens=" + (dir_ / "tokens.txt").string();
      const std::string port = "--port_file=" + port_file;
      execl(DPC_SERVER, DPC_SERVER, db.c_str(), "--listen=127.0.0.1:0", tokens.c_str(),
            "--insecure_dev", port.c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    for (int i = 0; i < 600 && address_.empty(); ++i) {
      std::ifstream input(port_file);
      int port = 0;
      if (input >> port && port > 0) address_ = "127.0.0.1:" + std::to_string(port);
      if (address_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_FALSE(address_.empty()) << ReadAll(dir_ / "server.log");
  }

  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  // Runs the CLI in the work directory with `env` (VAR=value ...) prepended;
  // stdout and stderr are captured apart (neither is a terminal).
  CliRun Cli(const std::string& arguments, const std::string& env = "") {
    const fs::path out = dir_ / "stdout.txt";
    const fs::path err = dir_ / "stderr.txt";
    const std::string command = "cd '" + dir_.string() + "' && env " + env + " " + DPC_CLI + " " +
                                arguments + " >'" + out.string() + "' 2>'" + err.string() +
                                "' </dev/null";
    const int status = std::system(command.c_str());
    CliRun run;
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.out = ReadAll(out);
    run.err = ReadAll(err);
    return run;
  }

  // The connection, from the environment only (issue 11 C: --insecure and
  // every connection flag from DPCURATOR_*).
  std::string Env(const std::string& token) const {
    return "DPCURATOR_SERVER=" + address_ + " DPCURATOR_TOKEN=" + token + " DPCURATOR_INSECURE=1";
  }

  fs::path dir_;
  pid_t pid_ = -1;
  std::string address_;
};

// Writes a German-credit-like ARFF file: the attribute names, types and
// value sets of the well-known credit data's codebook style, rows drawn here
// from a fixed seed with the class depending on checking status, duration
// and savings. '?' marks a few missing savings values; names and values are
// quoted where ARFF needs it, keywords in mixed case, %-comments throughout.
void WriteGermanLikeArff(const fs::path& path, int rows, uint64_t seed,
                         const std::string& bad_row = "") {
  std::mt19937_64 rng(seed);
  auto pick = [&](const std::vector<std::string>& values) {
    return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
  };
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::vector<std::string> checking = {"'<0'", "'0<=X<200'", "'>=200'", "'no checking'"};
  const std::vector<std::string> history = {"'no credits/all paid'", "'all paid'",
                                            "'existing paid'", "'delayed previously'",
                                            "'critical/other existing credit'"};
  const std::vector<std::string> purpose = {
      "'new car'", "'used car'", "furniture/equipment", "radio/tv", "'domestic appliance'",
      "repairs",   "education",  "retraining",          "business", "other"};
  const std::vector<std::string> savings = {"'<100'", "'100<=X<500'", "'500<=X<1000'", "'>=1000'",
                                            "'no known savings'"};
  const std::vector<std::string> employment = {"unemployed", "'<1'", "'1<=X<4'", "'4<=X<7'",
                                               "'>=7'"};
  const std::vector<std::string> personal = {"'male div/sep'", "'female div/dep/mar'",
                                             "'male single'", "'male mar/wid'"};
  const std::vector<std::string> parties = {"none", "'co applicant'", "guarantor"};
  const std::vector<std::string> property = {"'real estate'", "'life insurance'", "car",
                                             "'no known property'"};
  const std::vector<std::string> plans = {"bank", "stores", "none"};
  const std::vector<std::string> housing = {"rent", "own", "'for free'"};
  const std::vector<std::string> job = {"'unemp/unskilled non res'", "'unskilled resident'",
                                        "skilled", "'high qualif/self emp/mgmt'"};
  std::ofstream out(path);
  out << "% German-credit-like data, generated by first_hour_test.cc\n"
         "% (same shape as the UCI Statlog credit data; no real rows)\n"
         "@RELATION 'german credit like'\n\n"
         "@attribute checking_status { '<0', '0<=X<200', '>=200', 'no checking'}\n"
         "@attribute duration INTEGER\n"
         "@attribute credit_history { 'no credits/all paid', 'all paid', 'existing paid', "
         "'delayed previously', 'critical/other existing credit'}\n"
         "@attribute purpose { 'new car', 'used car', furniture/equipment, radio/tv, "
         "'domestic appliance', repairs, education, retraining, business, other}\n"
         "@attribute 'credit amount' numeric   % in DM\n"
         "@attribute savings_status { '<100', '100<=X<500', '500<=X<1000', '>=1000', "
         "'no known savings'}\n"
         "@Attribute employment { unemployed, '<1', '1<=X<4', '4<=X<7', '>=7'}\n"
         "@attribute installment_commitment integer\n"
         "@attribute personal_status { 'male div/sep', 'female div/dep/mar', 'male single', "
         "'male mar/wid'}\n"
         "@attribute other_parties { none, 'co applicant', guarantor}\n"
         "@attribute residence_since INTEGER\n"
         "@attribute property_magnitude { 'real estate', 'life insurance', car, "
         "'no known property'}\n"
         "@attribute age real\n"
         "@attribute other_payment_plans { bank, stores, none}\n"
         "@attribute housing { rent, own, 'for free'}\n"
         "@attribute existing_credits integer\n"
         "@attribute job { 'unemp/unskilled non res', 'unskilled resident', skilled, "
         "'high qualif/self emp/mgmt'}\n"
         "@attribute num_dependents integer\n"
         "@attribute own_telephone { none, yes}\n"
         "@attribute foreign_worker { yes, no}\n"
         "@attribute class { good, bad}\n\n"
         "@DATA\n";
  for (int i = 0; i < rows; ++i) {
    if (i == 5) out << "% a comment between rows\n\n";
    if (!bad_row.empty() && i == 7) out << bad_row << "\n";
    const std::string check = pick(checking);
    const int duration = uniform(4, 60);
    const std::string saving = uniform(0, 40) == 0 ? "?" : pick(savings);
    double risk = (check == "'<0'"            ? 1.2
                   : check == "'no checking'" ? -1.2
                                              : 0.0) +
                  (duration - 24) / 15.0 + (saving == "'<100'" ? 0.5 : -0.2);
    const bool bad = std::bernoulli_distribution(1.0 / (1.0 + std::exp(-risk)))(rng);
    out << check << "," << duration << "," << pick(history) << "," << pick(purpose) << ","
        << uniform(250, 15000) + 0.5 * uniform(0, 1) << "," << saving << "," << pick(employment)
        << "," << uniform(1, 4) << "," << pick(personal) << "," << pick(parties) << ","
        << uniform(1, 4) << "," << pick(property) << "," << uniform(19, 75) << "," << pick(plans)
        << "," << pick(housing) << "," << uniform(1, 4) << "," << pick(job) << "," << uniform(1, 2)
        << "," << pick({"none", "yes"}) << "," << pick({"yes", "no"}) << ","
        << (bad ? "bad" : "good") << "\n";
  }
}

// Public bounds a curator would take from the codebook, not from the rows.
const std::map<std::string, std::pair<double, double>> kPublicBounds = {
    {"duration", {1, 72}},
    {"credit amount", {0, 20000}},
    {"installment_commitment", {1, 4}},
    {"residence_since", {1, 4}},
    {"age", {18, 100}},
    {"existing_credits", {1, 4}},
    {"num_dependents", {1, 2}},
};

TEST_F(FirstHourTest, ArffFromSchemaDraftToReleaseModelAndSamples) {
  WriteGermanLikeArff(dir_ / "german.arff", 400, 2026);

  // 1. Draft: numeric bounds come from the rows and are flagged; the
  // nominal lists come from the header and are not.
  CliRun draft = Cli("schema draft --arff german.arff --out german.schema.json");
  ASSERT_EQ(draft.exit_code, 0) << draft.err;
  EXPECT_NE(draft.out.find("data_derived"), std::string::npos) << draft.out;
  EXPECT_NE(draft.out.find("accept-data-derived"), std::string::npos);
  nlohmann::json schema = nlohmann::json::parse(ReadAll(dir_ / "german.schema.json"));
  ASSERT_EQ(schema["columns"].size(), 21u);
  EXPECT_EQ(schema["label"], "class");
  int numeric = 0;
  for (const auto& column : schema["columns"]) {
    const bool is_numeric = column["type"] == "NUMERIC";
    numeric += is_numeric ? 1 : 0;
    EXPECT_EQ(column.value("data_derived", false), is_numeric) << column.dump();
    if (column["name"] == "savings_status") {
      EXPECT_EQ(column.value("nullable", false), true);
    }
    if (column["name"] == "checking_status") {
      EXPECT_EQ(column["categories"][3], "no checking");
    }
    if (column["name"] == "duration") {
      EXPECT_EQ(column.value("integer", false), true);
    }
  }
  EXPECT_EQ(numeric, 7);

  // 2. The flagged schema cannot be registered by accident; `schema check`
  // says so too (exit 4).
  CliRun refused = Cli("datasets create --name german --schema german.schema.json --epsilon 3",
                       Env("curator-token-e2e"));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("data_derived"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("credit amount"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--accept-data-derived"), std::string::npos) << refused.err;
  EXPECT_EQ(Cli("schema check --schema german.schema.json").exit_code, 4);

  // 3. Replace the flagged bounds with public values and drop the markers.
  for (auto& column : schema["columns"]) {
    if (!column.value("data_derived", false)) continue;
    const auto bounds = kPublicBounds.find(column["name"].get<std::string>());
    ASSERT_NE(bounds, kPublicBounds.end()) << column.dump();
    column["lower"] = bounds->second.first;
    column["upper"] = bounds->second.second;
    column.erase("data_derived");
  }
  std::ofstream(dir_ / "german.schema.json") << schema.dump(2);
  ASSERT_EQ(Cli("schema check --schema german.schema.json").exit_code, 0);

  // 4. Register and upload the ARFF data section; the connection comes from
  // the environment alone.
  CliRun created =
      Cli("datasets create --name german --schema german.schema.json --epsilon 3 --json",
          Env("curator-token-e2e"));
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string dataset = nlohmann::json::parse(created.out)["dataset_id"];
  CliRun uploaded =
      Cli("upload --dataset " + dataset + " --arff german.arff --json", Env("curator-token-e2e"));
  ASSERT_EQ(uploaded.exit_code, 0) << uploaded.err;
  EXPECT_EQ(nlohmann::json::parse(uploaded.out)["rows_accepted"], 400);

  // 5. Analyst: one release; trainer: a model (progress off a terminal is
  // plain lines, no '\r'); samples in the original schema.
  CliRun release = Cli("release --dataset " + dataset + " --epsilon 1 --out german.release --json",
                       Env("analyst-token-e2e"));
  ASSERT_EQ(release.exit_code, 0) << release.err;
  const nlohmann::json released = nlohmann::json::parse(release.out);
  EXPECT_EQ(released["kind"], "rff_embedding");
  EXPECT_NEAR(released["epsilon"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(released["epsilon_remaining"].get<double>(), 2.0, 1e-6);
  CliRun train = Cli("train merf --release german.release --out german.model --steps 150");
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_EQ(train.err.find('\r'), std::string::npos);
  EXPECT_NE(train.err.find("step    150 / 150"), std::string::npos) << train.err;
  CliRun sample = Cli("sample --model german.model --rows 300 --out synthetic.csv");
  ASSERT_EQ(sample.exit_code, 0) << sample.err;
  std::ifstream synthetic(dir_ / "synthetic.csv");
  std::string header;
  std::getline(synthetic, header);
  EXPECT_EQ(header.rfind("checking_status,duration,credit_history,purpose,credit amount,", 0), 0u)
      << header;
  int lines = 0;
  std::map<std::string, int> classes;
  for (std::string line; std::getline(synthetic, line);) {
    ++lines;
    classes[line.substr(line.rfind(',') + 1)]++;
  }
  EXPECT_EQ(lines, 300);
  EXPECT_EQ(classes.size(), 2u);
}

// A bad cell stops the upload with FILE:LINE (1-based, header counted), and
// the rows before it are stored; --accept-data-derived publishes a draft.
TEST_F(FirstHourTest, UploadErrorCitesTheFileLine) {
  // Row 8 of the data section is bad: 'maybe' is not a declared class.
  const std::string bad =
      "'<0',12,'all paid',repairs,1000,'<100',unemployed,2,'male single',none,2,car,30,"
      "none,own,1,skilled,1,yes,yes,maybe";
  WriteGermanLikeArff(dir_ / "bad.arff", 20, 7, bad);
  const std::string text = ReadAll(dir_ / "bad.arff");
  int bad_line = 0;
  {
    std::istringstream lines(text);
    int n = 0;
    for (std::string line; std::getline(lines, line);) {
      ++n;
      if (line == bad) bad_line = n;
    }
  }
  ASSERT_GT(bad_line, 20);
  WriteGermanLikeArff(dir_ / "good.arff", 50, 8);
  ASSERT_EQ(Cli("schema draft --arff good.arff --out s.json").exit_code, 0);
  CliRun created =
      Cli("datasets create --name bad --schema s.json --epsilon 1 --accept-data-derived "
          "--json",
          Env("curator-token-e2e"));
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string dataset = nlohmann::json::parse(created.out)["dataset_id"];
  // The draft's bounds come from good.arff; bad.arff's numbers are clamped.
  CliRun upload = Cli("upload --dataset " + dataset + " --arff bad.arff", Env("curator-token-e2e"));
  EXPECT_EQ(upload.exit_code, 2) << upload.err;
  EXPECT_NE(upload.err.find("bad.arff:" + std::to_string(bad_line) + ": "), std::string::npos)
      << upload.err << " (expected line " << bad_line << ")";
  EXPECT_NE(upload.err.find("'maybe'"), std::string::npos) << upload.err;
  EXPECT_NE(upload.err.find("7 rows before it are stored"), std::string::npos) << upload.err;

  // CSV: the same, counted with the header as line 1.
  std::ofstream(dir_ / "bad.csv") << "class,duration\n";  // too few columns: header error
  CliRun csv = Cli("upload --dataset " + dataset + " --csv bad.csv", Env("curator-token-e2e"));
  EXPECT_NE(csv.exit_code, 0);
  EXPECT_NE(csv.err.find("bad.csv:1: "), std::string::npos) << csv.err;
}

TEST_F(FirstHourTest, EveryCommandAnswersHelpAndGroupsListTheirCommands) {
  CliRun train = Cli("train --help");
  EXPECT_EQ(train.exit_code, 0);
  for (const char* name : {"train merf", "train pearl", "train sinkhorn"}) {
    EXPECT_NE(train.out.find(name), std::string::npos) << train.out;
  }
  EXPECT_EQ(Cli("train").exit_code, 2);
  CliRun all = Cli("--help");
  ASSERT_EQ(all.exit_code, 0);
  // Every listed command's --help works.
  std::istringstream lines(all.out);
  int commands = 0;
  bool in_list = false;
  const std::string json_doc = ReadAll(std::string(DPC_SOURCE_DIR) + "/docs/json.md");
  ASSERT_FALSE(json_doc.empty());
  std::string undocumented_json;
  for (std::string line; std::getline(lines, line);) {
    if (line == "commands:") {
      in_list = true;
      continue;
    }
    if (!in_list || line.rfind("  ", 0) != 0) {
      in_list = in_list && !line.empty();
      continue;
    }
    const std::string name = line.substr(2, line.find("  ", 2) - 2);
    CliRun help = Cli(name + " --help");
    EXPECT_EQ(help.exit_code, 0) << name;
    EXPECT_NE(help.out.find("usage: dpcurator " + name), std::string::npos) << name;
    if (help.out.find("  --json ") != std::string::npos &&
        json_doc.find("`" + name + " --json`") == std::string::npos) {
      undocumented_json += " " + name;
    }
    ++commands;
  }
  EXPECT_GT(commands, 25);
  EXPECT_TRUE(undocumented_json.empty())
      << "--json of these commands is not in docs/json.md:" << undocumented_json;
  CliRun upload = Cli("upload --help");
  EXPECT_NE(upload.out.find("(env DPCURATOR_INSECURE)"), std::string::npos) << upload.out;
  EXPECT_NE(upload.out.find("--arff"), std::string::npos);
}

// A CSV drafts too (to standard output, the report on standard error), and
// a schema error lists the accepted values.
TEST_F(FirstHourTest, CsvDraftAndSchemaErrors) {
  std::ofstream(dir_ / "s.csv") << "age,colour,outcome\n31,red,yes\n45,,no\n19,blue,no\n";
  CliRun draft = Cli("schema draft --csv s.csv --label outcome");
  ASSERT_EQ(draft.exit_code, 0) << draft.err;
  const nlohmann::json schema = nlohmann::json::parse(draft.out);
  EXPECT_EQ(schema["columns"][0]["type"], "NUMERIC");
  EXPECT_EQ(schema["columns"][0]["lower"], 19);
  EXPECT_EQ(schema["columns"][1]["nullable"], true);
  EXPECT_EQ(schema["label"], "outcome");
  EXPECT_NE(draft.err.find("DATA-DERIVED"), std::string::npos) << draft.err;
  EXPECT_NE(draft.err.find("age, colour, outcome"), std::string::npos) << draft.err;

  std::ofstream(dir_ / "bad.json")
      << R"({"columns": [{"name": "age", "type": "numeric", "lower": 0, "upper": 99},
                         {"name": "job", "type": "text", "categories": ["a"]}]})";
  CliRun check = Cli("schema check --schema bad.json");
  EXPECT_EQ(check.exit_code, 2);
  EXPECT_NE(check.err.find("bad.json: column 2 ('job'): unknown type 'text' (accepted: NUMERIC, "
                           "CATEGORICAL"),
            std::string::npos)
      << check.err;
  CliRun create =
      Cli("datasets create --name x --schema bad.json --epsilon 1", Env("curator-token-e2e"));
  EXPECT_EQ(create.exit_code, 2);
  EXPECT_NE(create.err.find("unknown type 'text'"), std::string::npos) << create.err;
}

// A device refuses an announced epsilon above its own ceiling, names the
// limit and sends nothing; raising its ceiling (here from the environment)
// lets it submit.
TEST_F(FirstHourTest, DeviceRefusesParametersWeakerThanItsCeiling) {
  std::ofstream(dir_ / "survey.json")
      << R"({"columns": [{"name": "x", "type": "numeric", "lower": 0, "upper": 1},
                         {"name": "c", "type": "nominal", "categories": ["a", "b"]}]})";
  CliRun created =
      Cli("collections create --name s --schema survey.json --mechanism laplace-l1 "
          "--epsilon 20 --json",
          Env("curator-token-e2e"));
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string collection = nlohmann::json::parse(created.out)["collection_id"];
  std::ofstream(dir_ / "mine.csv") << "x,c\n0.5,a\n";
  CliRun refused = Cli("device submit --collection " + collection + " --csv mine.csv",
                       Env("device-token-e2e-0"));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("epsilon 20"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--max-epsilon 10"), std::string::npos) << refused.err;
  CliRun shown =
      Cli("collections show --collection " + collection + " --json", Env("curator-token-e2e"));
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(nlohmann::json::parse(shown.out)["report_count"], 0);

  CliRun accepted = Cli("device submit --collection " + collection + " --csv mine.csv",
                        Env("device-token-e2e-0") + " DPCURATOR_MAX_EPSILON=25");
  EXPECT_EQ(accepted.exit_code, 0) << accepted.err;
  shown = Cli("collections show --collection " + collection + " --json", Env("curator-token-e2e"));
  EXPECT_EQ(nlohmann::json::parse(shown.out)["report_count"], 1);
}

}  // namespace
