// End-to-end: the frictions a new user met in the first hour on unseen data
// (issue 25, item 2), each checked with the real binaries against a local
// dpcurator-server.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/e2e/local_server.h"

namespace dpcurator {
namespace {

namespace fs = std::filesystem;

using e2e::CliRun;
using e2e::ReadAll;

constexpr char kCurator[] = "curator-token-e2e";
constexpr char kAnalyst[] = "analyst-token-e2e";

class FrictionTest : public e2e::LocalServerTest {
 protected:
  void SetUp() override {
    StartServer("dpc_friction_", "curator curator-token-e2e\nanalyst analyst-token-e2e\n");
    // A patient-like table: a name with a space, a category, the label.
    std::ofstream(dir_ / "s.json") << R"({"columns": [
      {"name": "Patient Age", "type": "NUMERIC", "lower": 0, "upper": 100},
      {"name": "ward", "type": "CATEGORICAL", "categories": ["a", "b", "c"]},
      {"name": "outcome", "type": "CATEGORICAL", "categories": ["no", "yes"]}],
      "label": "outcome"})";
  }

  CliRun Cli(const std::string& arguments, const std::string& token = "") {
    return RunCli(arguments, token.empty() ? "" : Env(token));
  }

  // Creates a dataset from s.json; returns its id.
  std::string Create(const std::string& name, const std::string& epsilon = "5") {
    CliRun created = Cli("datasets create --name " + name + " --schema s.json --epsilon " +
                             epsilon + " --json",
                         kCurator);
    EXPECT_EQ(created.exit_code, 0) << created.err;
    if (created.exit_code != 0) return "";
    return nlohmann::json::parse(created.out)["dataset_id"];
  }

  // The dataset's row count as `datasets list --json` shows it to the
  // curator (0 when absent: the key is left out for an empty dataset).
  int64_t Rows(const std::string& id) {
    CliRun list = Cli("datasets list --json", kCurator);
    EXPECT_EQ(list.exit_code, 0) << list.err;
    const nlohmann::json listed = nlohmann::json::parse(list.out);
    for (const auto& d : listed["datasets"]) {
      if (d["dataset_id"] == id) return d.value("rows", int64_t{0});
    }
    return -1;  // not listed
  }

  // `rows` good rows of the table, with a byte order mark, CRLF line ends
  // and quoted fields (the header is line 1).
  void WriteGood(const fs::path& path, int rows) {
    std::ofstream out(path, std::ios::binary);
    out << "\xEF\xBB\xBF" << "\"Patient Age\",ward,outcome\r\n";
    for (int i = 0; i < rows; ++i) {
      out << (20 + i % 60) << ",\"" << "abc"[i % 3] << "\"," << (i % 2 ? "yes" : "no") << "\r\n";
    }
  }
};

// Bad input changes nothing: every bad line is listed in one pass with its
// line and why, nothing is stored, --dry-run sends nothing, and the fixed
// file is stored whole. (Before: the rows before the first bad line were
// stored, 77 -> 94 rows after a few tries.)
TEST_F(FrictionTest, UploadIsAllOrNothingAndListsEveryBadLine) {
  const std::string id = Create("patients");
  ASSERT_FALSE(id.empty());
  {
    std::ofstream out(dir_ / "bad.csv", std::ios::binary);
    out << "\xEF\xBB\xBF" << "Patient Age,ward,outcome\r\n";
    out << "30,a,no\r\n";          // 2
    out << "forty,b,yes\r\n";      // 3: not a number
    out << "31,a,no\r\n";          // 4
    out << "32,a,no,extra\r\n";    // 5: too many fields
    out << "nan,c,yes\r\n";        // 6: nan
    out << "33,d,no\r\n";          // 7: undeclared category
    out << "34,\"a, b\",no\r\n";   // 8: quoted comma, still undeclared
    out << "35,b,yes\r\n";         // 9
  }
  CliRun upload = Cli("upload --dataset " + id + " --csv bad.csv", kCurator);
  EXPECT_EQ(upload.exit_code, 2) << upload.err;
  for (int line : {3, 5, 6, 7, 8}) {
    EXPECT_NE(upload.err.find("bad.csv:" + std::to_string(line) + ": "), std::string::npos)
        << "line " << line << " not listed:\n" << upload.err;
  }
  for (int line : {2, 4, 9}) {
    EXPECT_EQ(upload.err.find("bad.csv:" + std::to_string(line) + ": "), std::string::npos)
        << "good line " << line << " listed:\n" << upload.err;
  }
  EXPECT_NE(upload.err.find("5 bad lines"), std::string::npos) << upload.err;
  EXPECT_NE(upload.err.find("nothing was uploaded"), std::string::npos) << upload.err;
  EXPECT_EQ(Rows(id), 0);

  // More bad lines than the limit: 20 listed, the rest counted.
  {
    std::ofstream out(dir_ / "many.csv");
    out << "Patient Age,ward,outcome\n";
    for (int i = 0; i < 25; ++i) out << "x,a,no\n";
  }
  CliRun many = Cli("upload --dataset " + id + " --csv many.csv", kCurator);
  EXPECT_EQ(many.exit_code, 2);
  EXPECT_NE(many.err.find("many.csv:21: "), std::string::npos) << many.err;
  EXPECT_EQ(many.err.find("many.csv:22: "), std::string::npos) << many.err;
  EXPECT_NE(many.err.find("... and 5 more"), std::string::npos) << many.err;

  // --dry-run checks a good file and sends nothing.
  WriteGood(dir_ / "good.csv", 40);
  CliRun dry = Cli("upload --dataset " + id + " --csv good.csv --dry-run --json", kCurator);
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_EQ(nlohmann::json::parse(dry.out)["rows"], 40);
  EXPECT_EQ(Rows(id), 0);
  CliRun dry_bad = Cli("upload --dataset " + id + " --csv bad.csv --dry-run", kCurator);
  EXPECT_EQ(dry_bad.exit_code, 2);
  EXPECT_NE(dry_bad.err.find("bad.csv:3: "), std::string::npos) << dry_bad.err;

  // The good file, by the dataset's name, is stored whole.
  CliRun good = Cli("upload --dataset patients --csv good.csv --json", kCurator);
  ASSERT_EQ(good.exit_code, 0) << good.err;
  EXPECT_EQ(nlohmann::json::parse(good.out)["total_rows"], 40);
  EXPECT_EQ(Rows(id), 40);
}

// Issue 38: the same file uploaded twice stored every person twice (the
// guarantee halves for them). An upload that repeats stored rows is refused,
// counting them and naming --append, unless --append says it is meant; rows
// repeated within one file are distinct people and pass. An empty dataset
// lists 0 rows to its curator, not "private".
TEST_F(FrictionTest, DuplicateUploadsNeedAppendAndAnEmptyDatasetListsZeroRows) {
  const std::string id = Create("dups");
  ASSERT_FALSE(id.empty());
  CliRun empty = Cli("datasets list --json", kCurator);
  ASSERT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_EQ(nlohmann::json::parse(empty.out)["datasets"][0].value("rows", int64_t{-1}), 0)
      << empty.out;
  CliRun empty_table = Cli("datasets list", kCurator);
  EXPECT_EQ(empty_table.out.find("private"), std::string::npos) << empty_table.out;
  // An analyst under add-remove still sees no count, and no "rows" key.
  CliRun hidden = Cli("datasets list --json", kAnalyst);
  ASSERT_EQ(hidden.exit_code, 0) << hidden.err;
  EXPECT_FALSE(nlohmann::json::parse(hidden.out)["datasets"][0].contains("rows")) << hidden.out;
  EXPECT_NE(Cli("datasets list", kAnalyst).out.find("private"), std::string::npos);

  WriteGood(dir_ / "good.csv", 40);
  ASSERT_EQ(Cli("upload --dataset dups --csv good.csv", kCurator).exit_code, 0);
  CliRun again = Cli("upload --dataset dups --csv good.csv", kCurator);
  EXPECT_EQ(again.exit_code, 3) << again.err;
  EXPECT_NE(again.err.find("all 40 rows of this upload repeat rows already stored"),
            std::string::npos)
      << again.err;
  EXPECT_NE(again.err.find("half the strength"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("--append"), std::string::npos) << again.err;
  EXPECT_EQ(Rows(id), 40);

  // 3 stored rows among 10 new ones (ages above the stored 20..59).
  {
    std::ofstream out(dir_ / "more.csv");
    out << "Patient Age,ward,outcome\n";
    for (int i = 0; i < 10; ++i) out << (80 + i) << ",a,no\n";
    out << "20,a,no\n21,b,yes\n22,c,no\n";  // rows 0..2 of good.csv
  }
  CliRun overlap = Cli("upload --dataset dups --csv more.csv", kCurator);
  EXPECT_EQ(overlap.exit_code, 3) << overlap.err;
  EXPECT_NE(overlap.err.find("3 of the 13 rows of this upload repeat rows already stored"),
            std::string::npos)
      << overlap.err;
  EXPECT_EQ(Rows(id), 40);
  CliRun appended = Cli("upload --dataset dups --csv more.csv --append --json", kCurator);
  ASSERT_EQ(appended.exit_code, 0) << appended.err;
  EXPECT_EQ(nlohmann::json::parse(appended.out)["total_rows"], 53);

  // Twins in one file, into an empty dataset: stored.
  ASSERT_FALSE(Create("twins").empty());
  std::ofstream(dir_ / "twins.csv") << "Patient Age,ward,outcome\n30,a,no\n30,a,no\n";
  CliRun twins = Cli("upload --dataset twins --csv twins.csv --json", kCurator);
  ASSERT_EQ(twins.exit_code, 0) << twins.err;
  EXPECT_EQ(nlohmann::json::parse(twins.out)["total_rows"], 2);
}

// Issue 38: `upload --dry-run` names the file's columns the schema ignores;
// missing values in a column that is not nullable are summarised per
// column (count and first lines), not listed as 20 identical lines that
// hide every other fault.
TEST_F(FrictionTest, DryRunNamesIgnoredColumnsAndMissingValuesAreSummarised) {
  ASSERT_FALSE(Create("gaps").empty());
  {
    std::ofstream out(dir_ / "extra.csv");
    out << "Patient Age,ward,notes,outcome,site id\n";
    for (int i = 0; i < 5; ++i) out << (30 + i) << ",a,x," << (i % 2 ? "yes" : "no") << ",7\n";
  }
  CliRun dry = Cli("upload --dataset gaps --csv extra.csv --dry-run", kCurator);
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("the schema ignores 2 of the file's columns (not uploaded): 'notes', "
                         "'site id'"),
            std::string::npos)
      << dry.out;
  CliRun dry_json = Cli("upload --dataset gaps --csv extra.csv --dry-run --json", kCurator);
  ASSERT_EQ(dry_json.exit_code, 0) << dry_json.err;
  EXPECT_EQ(nlohmann::json::parse(dry_json.out)["ignored_columns"],
            nlohmann::json::array({"notes", "site id"}))
      << dry_json.out;

  {
    std::ofstream out(dir_ / "gaps.csv");
    out << "Patient Age,ward,outcome\n";
    for (int i = 0; i < 25; ++i) out << ",a,no\n";  // lines 2..26: no age
    out << "40,,yes\n";                              // 27: no ward
    out << "forty,b,yes\n";                          // 28: another fault
  }
  CliRun gaps = Cli("upload --dataset gaps --csv gaps.csv", kCurator);
  EXPECT_EQ(gaps.exit_code, 2) << gaps.err;
  EXPECT_NE(gaps.err.find("27 bad lines"), std::string::npos) << gaps.err;
  EXPECT_NE(gaps.err.find("column 'Patient Age': 25 missing values and the column is not "
                          "nullable (lines 2, 3, 4, 5, 6, ...)"),
            std::string::npos)
      << gaps.err;
  EXPECT_NE(gaps.err.find("column 'ward': 1 missing value and the column is not nullable "
                          "(line 27)"),
            std::string::npos)
      << gaps.err;
  EXPECT_NE(gaps.err.find("gaps.csv:28: "), std::string::npos) << gaps.err;
  EXPECT_EQ(gaps.err.find("gaps.csv:7: "), std::string::npos) << "listed line by line:\n"
                                                               << gaps.err;
  EXPECT_EQ(gaps.err.find("... and"), std::string::npos) << gaps.err;
}

// A ';'-separated export with decimal commas: refused with the header as
// read and the option to use; read with --delimiter ';' --decimal-comma.
TEST_F(FrictionTest, DelimiterAndDecimalComma) {
  const std::string id = Create("semicolons");
  ASSERT_FALSE(id.empty());
  std::ofstream(dir_ / "semi.csv") << "Patient Age;ward;outcome\n30,5;a;no\n41,25;b;yes\n";
  CliRun plain = Cli("upload --dataset " + id + " --csv semi.csv", kCurator);
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_NE(plain.err.find("header read has 1 field: 'Patient Age;ward;outcome'"),
            std::string::npos)
      << plain.err;
  EXPECT_NE(plain.err.find("--delimiter ';'"), std::string::npos) << plain.err;
  CliRun no_comma = Cli("upload --dataset " + id + " --csv semi.csv --delimiter ';'", kCurator);
  EXPECT_EQ(no_comma.exit_code, 2);
  EXPECT_NE(no_comma.err.find("semi.csv:2: "), std::string::npos) << no_comma.err;
  CliRun refused = Cli("upload --dataset " + id + " --csv semi.csv --decimal-comma", kCurator);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--decimal-comma needs another field separator"), std::string::npos)
      << refused.err;
  CliRun read = Cli(
      "upload --dataset " + id + " --csv semi.csv --delimiter ';' --decimal-comma --json",
      kCurator);
  ASSERT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(nlohmann::json::parse(read.out)["rows_accepted"], 2);

  // schema draft reads the same file, byte order mark and all.
  std::ofstream(dir_ / "semi_bom.csv", std::ios::binary)
      << "\xEF\xBB\xBF" << "Patient Age;ward;outcome\r\n30,5;a;no\r\n41,25;b;yes\r\n";
  CliRun draft =
      Cli("schema draft --csv semi_bom.csv --delimiter ';' --decimal-comma --out d.json");
  ASSERT_EQ(draft.exit_code, 0) << draft.err;
  const nlohmann::json schema = nlohmann::json::parse(ReadAll(dir_ / "d.json"));
  EXPECT_EQ(schema["columns"][0]["name"], "Patient Age");
  EXPECT_EQ(schema["columns"][0]["type"], "NUMERIC");
  EXPECT_EQ(schema["columns"][0]["upper"], 41.25);
}

// Names work where ids do, a name in use is refused, and `datasets delete`
// removes the rows while the budget history stays readable.
TEST_F(FrictionTest, NamesListAndDelete) {
  const std::string id = Create("ward7");
  ASSERT_FALSE(id.empty());
  CliRun twice = Cli("datasets create --name ward7 --schema s.json --epsilon 5", kCurator);
  EXPECT_EQ(twice.exit_code, 2) << twice.err;
  EXPECT_NE(twice.err.find("a dataset named 'ward7' exists (" + id + ")"), std::string::npos)
      << twice.err;
  WriteGood(dir_ / "good.csv", 300);
  ASSERT_EQ(Cli("upload --dataset ward7 --csv good.csv", kCurator).exit_code, 0);
  CliRun release = Cli("release --dataset ward7 --epsilon 1 --num-frequencies 20 --out r.pb",
                       kAnalyst);
  ASSERT_EQ(release.exit_code, 0) << release.err;

  CliRun list = Cli("datasets list --json", kAnalyst);
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const nlohmann::json listed = nlohmann::json::parse(list.out)["datasets"][0];
  EXPECT_EQ(listed["name"], "ward7");
  EXPECT_GT(listed["epsilon_spent"].get<double>(), 0.5);
  EXPECT_GT(listed["created_unix"].get<int64_t>(), 1700000000);
  CliRun table = Cli("datasets list", kAnalyst);
  EXPECT_NE(table.out.find("eps spent"), std::string::npos) << table.out;

  // Upload to a sealed dataset: refused by the server, exit 3.
  EXPECT_EQ(Cli("upload --dataset ward7 --csv good.csv", kCurator).exit_code, 3);

  CliRun unconfirmed = Cli("datasets delete --dataset ward7", kCurator);
  EXPECT_EQ(unconfirmed.exit_code, 2);
  EXPECT_NE(unconfirmed.err.find("--yes"), std::string::npos) << unconfirmed.err;
  EXPECT_EQ(Cli("datasets delete --dataset ward7 --yes", kAnalyst).exit_code, 3);
  CliRun deleted = Cli("datasets delete --dataset ward7 --yes --json", kCurator);
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_EQ(nlohmann::json::parse(deleted.out)["rows_deleted"], 300);
  EXPECT_EQ(Rows(id), -1);
  CliRun budget = Cli("budget --dataset " + id + " --json", kAnalyst);
  ASSERT_EQ(budget.exit_code, 0) << budget.err;
  EXPECT_GT(nlohmann::json::parse(budget.out)["epsilon_spent"].get<double>(), 0.5);
  // Gone: not found is an input error (exit 2), and the name is free again.
  EXPECT_EQ(Cli("upload --dataset ward7 --csv good.csv", kCurator).exit_code, 2);
  EXPECT_FALSE(Create("ward7").empty());
}

// release --out is checked before the request (nothing charged); a refusal
// that charged nothing does not say "retry with --key", and --json prints
// an error object; release get --json.
TEST_F(FrictionTest, ReleaseOutRetryHintsAndJsonErrors) {
  const std::string id = Create("rel", "2");
  ASSERT_FALSE(id.empty());
  WriteGood(dir_ / "good.csv", 300);
  ASSERT_EQ(Cli("upload --dataset rel --csv good.csv", kCurator).exit_code, 0);

  CliRun nowhere = Cli("release --dataset rel --epsilon 1 --out /nonexistent/x.release", kAnalyst);
  EXPECT_EQ(nowhere.exit_code, 2);
  EXPECT_NE(nowhere.err.find("nothing was requested"), std::string::npos) << nowhere.err;
  CliRun budget = Cli("budget --dataset rel --json", kAnalyst);
  ASSERT_EQ(budget.exit_code, 0) << budget.err;
  EXPECT_EQ(nlohmann::json::parse(budget.out)["events"].size(), 0u) << "charged anyway";

  CliRun first = Cli("release --dataset rel --epsilon 1 --num-frequencies 20 --key k1 --out "
                     "r.pb --json",
                     kAnalyst);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string release_id = nlohmann::json::parse(first.out)["release_id"];

  // Over the cap: refused, nothing charged.
  CliRun over = Cli("release --dataset rel --epsilon 1.9 --out r2.pb --json", kAnalyst);
  EXPECT_EQ(over.exit_code, 3) << over.err;
  EXPECT_EQ(over.err.find("retry with --key"), std::string::npos) << over.err;
  EXPECT_NE(over.err.find("nothing was charged"), std::string::npos) << over.err;
  const nlohmann::json error = nlohmann::json::parse(over.out);
  EXPECT_EQ(error["may_have_charged"], false);
  EXPECT_EQ(error["code"], "RESOURCE_EXHAUSTED");
  EXPECT_FALSE(error["error"].get<std::string>().empty());

  // The same for `train mst` and `train aim` (issue 38): a refusal before
  // admission charged nothing and says so, without the retry hint.
  for (const char* method : {"mst", "aim"}) {
    CliRun train = Cli(std::string("train ") + method + " --dataset rel --epsilon 1.9 --out m.pb",
                       kAnalyst);
    EXPECT_EQ(train.exit_code, 3) << method << ": " << train.err;
    EXPECT_EQ(train.err.find("--key"), std::string::npos) << method << ": " << train.err;
    EXPECT_EQ(train.err.find("second charge"), std::string::npos) << method << ": " << train.err;
    EXPECT_NE(train.err.find(std::string(method) + " release refused (nothing was charged)"),
              std::string::npos)
        << method << ": " << train.err;
  }

  // The key reused for another request: not suggested again.
  CliRun reuse =
      Cli("release --dataset rel --epsilon 0.3 --num-frequencies 20 --key k1 --out r3.pb",
          kAnalyst);
  EXPECT_EQ(reuse.exit_code, 3) << reuse.err;
  EXPECT_EQ(reuse.err.find("retry with --key"), std::string::npos) << reuse.err;

  CliRun get = Cli("release get --id " + release_id + " --out again.pb --json", kAnalyst);
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(nlohmann::json::parse(get.out)["release_id"], release_id);
  CliRun releases = Cli("releases --dataset rel --json", kAnalyst);
  ASSERT_EQ(releases.exit_code, 0) << releases.err;
  EXPECT_EQ(nlohmann::json::parse(releases.out)["releases"].size(), 1u);

  // admin audit composes per dataset: the ledger's figure is shown.
  CliRun audit = Cli("admin audit", kCurator);
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  EXPECT_NE(audit.out.find("composed"), std::string::npos) << audit.out;
}

// Values almost surely a mistake are warned about, printed with %g; exit
// codes of unreadable files and missing datasets are 2.
TEST_F(FrictionTest, WarningsAndExitCodes) {
  CliRun huge = Cli("datasets create --name huge --schema s.json --epsilon 1e6", kCurator);
  EXPECT_EQ(huge.exit_code, 0) << huge.err;
  EXPECT_NE(huge.err.find("warning: --epsilon 1e+06"), std::string::npos) << huge.err;
  WriteGood(dir_ / "good.csv", 200);
  ASSERT_EQ(Cli("upload --dataset huge --csv good.csv", kCurator).exit_code, 0);
  CliRun tiny = Cli("release --dataset huge --epsilon 1e-9 --num-frequencies 10 --out t.pb",
                    kAnalyst);
  EXPECT_NE(tiny.err.find("warning: --epsilon 1e-09"), std::string::npos) << tiny.err;
  EXPECT_EQ(tiny.out.find("0.0000 for this release"), std::string::npos) << tiny.out;

  EXPECT_EQ(Cli("upload --dataset huge --csv missing.csv", kCurator).exit_code, 2);
  EXPECT_EQ(Cli("upload --dataset no_such --csv good.csv", kCurator).exit_code, 2);
  EXPECT_EQ(Cli("schema draft --csv missing.csv").exit_code, 2);
  // A schema still marked data_derived is the user's input to fix: 2.
  ASSERT_EQ(Cli("schema draft --csv good.csv --out drafted.json").exit_code, 0);
  EXPECT_EQ(Cli("datasets create --name drafted --schema drafted.json --epsilon 1", kCurator)
                .exit_code,
            2);
}

// schema draft: atom 0 suggested for a column of 40% zeros, category counts
// shown rarest first so a stray spelling shows.
TEST_F(FrictionTest, SchemaDraftAtomsAndCounts) {
  {
    std::ofstream out(dir_ / "gain.csv");
    out << "gain,sex\n";
    for (int i = 0; i < 50; ++i) {
      out << (i % 5 < 2 ? 0 : 100 + i) << "," << (i == 7 ? "femal" : i % 2 ? "Male" : "Female")
          << "\n";
    }
  }
  CliRun draft = Cli("schema draft --csv gain.csv --out g.json");
  ASSERT_EQ(draft.exit_code, 0) << draft.err;
  const nlohmann::json schema = nlohmann::json::parse(ReadAll(dir_ / "g.json"));
  EXPECT_EQ(schema["columns"][0]["atoms"], nlohmann::json::array({0}));
  EXPECT_EQ(schema["columns"][0]["data_derived"], true);
  EXPECT_NE(draft.out.find("counts, rarest first: 'femal' 1,"), std::string::npos) << draft.out;
  EXPECT_EQ(ReadAll(dir_ / "g.json").find("count"), std::string::npos) << "counts published";
}

// `train <method> --json` prints one JSON document on stdout (docs/json.md)
// for every method that trains on a dataset: `train kernel` printed its
// session line there first, so stdout did not parse. Session lines and
// progress go to stderr. The dataset is given by its name throughout
// (`session open`, `train mst` and the session trainers take names).
TEST_F(FrictionTest, TrainJsonIsTheDocumentAloneAndNamesAreAccepted) {
  e2e::WriteLabelledMixedTable(dir_, 300, /*seed=*/3);  // s.json: x, c, label y
  const std::string dataset = Create("tiny", "20");
  ASSERT_FALSE(dataset.empty());
  CliRun uploaded = Cli("upload --dataset tiny --csv data.csv", kCurator);
  ASSERT_EQ(uploaded.exit_code, 0) << uploaded.err;
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"kernel",
       "--rows 300 --steps 5 --batch 50 --points 8 --key json-kernel"},
      {"autogan",
       "--rows 300 --steps-ae 5 --steps-gan 5 --batch-ae 50 --batch-gan 50 --hidden-ae 8 "
       "--latent-dim 4 --hidden-critic 8 --key json-autogan"},
      {"mst", "--key json-mst"},
      {"aim", "--key json-aim"},
  };
  for (const auto& [method, flags] : runs) {
    const std::string out = method + ".pb";
    CliRun trained = Cli("train " + method + " --dataset tiny --epsilon 0.5 " + flags +
                             " --out " + out + " --json",
                         kAnalyst);
    ASSERT_EQ(trained.exit_code, 0) << method << ": " << trained.err;
    nlohmann::json document;
    ASSERT_NO_THROW(document = nlohmann::json::parse(trained.out))
        << "train " << method << " --json: stdout is not one JSON document:\n" << trained.out;
    ASSERT_TRUE(document.is_object()) << trained.out;
    EXPECT_EQ(document["method"], method);
    EXPECT_EQ(document["model"], out);
    EXPECT_EQ(document["dataset_id"], dataset);
    EXPECT_GT(document["epsilon"].get<double>(), 0.0);
    // What stdout held before is on stderr now, not lost.
    if (method == "aim") {
      EXPECT_NE(trained.err.find("released "), std::string::npos) << method << ": " << trained.err;
    } else if (method != "mst") {
      EXPECT_NE(trained.err.find("session "), std::string::npos) << method << ": " << trained.err;
    }
  }
  // `session open` takes the name too.
  CliRun opened = Cli("session open --dataset tiny --steps 2 "
                      "--sampling-rate 0.1 --epsilon 0.5 --json",
                      kAnalyst);
  ASSERT_EQ(opened.exit_code, 0) << opened.err;
  EXPECT_EQ(nlohmann::json::parse(opened.out)["dataset_id"], dataset);
}

// Issue 38's minors: a mistyped command or option names the nearest one; a
// bad token is said to be the token's fault, not the name lookup's that met
// it first; an analyst's upload is refused before the file is read (before:
// every bad line of the file listed, then the role refusal after a whole
// pass).
TEST_F(FrictionTest, TyposAreSuggestedAndRefusalsNameTheirCause) {
  CliRun command = Cli("trian mst");
  EXPECT_EQ(command.exit_code, 2);
  EXPECT_NE(command.err.find("unknown command 'trian'; did you mean 'train'?"), std::string::npos)
      << command.err;
  CliRun subcommand = Cli("datasets lsit");
  EXPECT_EQ(subcommand.exit_code, 2);
  EXPECT_NE(subcommand.err.find("did you mean 'datasets list'?"), std::string::npos)
      << subcommand.err;
  CliRun option = Cli("datasets list --jsno", kCurator);
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_NE(option.err.find("unknown option --jsno; did you mean --json?"), std::string::npos)
      << option.err;

  const std::string id = Create("patients");
  ASSERT_FALSE(id.empty());
  WriteGood(dir_ / "good.csv", 20);
  CliRun token = Cli("upload --dataset patients --csv good.csv", "not-a-token");
  EXPECT_EQ(token.exit_code, 3);
  EXPECT_NE(token.err.find("dpcurator: the token was refused: "), std::string::npos) << token.err;
  EXPECT_EQ(token.err.find("dpcurator: list datasets"), std::string::npos) << token.err;

  {
    std::ofstream out(dir_ / "bad.csv", std::ios::binary);
    out << "Patient Age,ward,outcome\n30,a,no\nforty,b,yes\n";
  }
  CliRun analyst = Cli("upload --dataset patients --csv bad.csv", kAnalyst);
  EXPECT_EQ(analyst.exit_code, 3) << analyst.err;
  EXPECT_NE(analyst.err.find("role analyst may not call"), std::string::npos) << analyst.err;
  EXPECT_EQ(analyst.err.find("bad.csv:3"), std::string::npos) << analyst.err;
  // The curator's upload of the same file still lists its bad line, and the
  // good file is stored whole after the opening message.
  CliRun curator = Cli("upload --dataset patients --csv bad.csv", kCurator);
  EXPECT_EQ(curator.exit_code, 2);
  EXPECT_NE(curator.err.find("bad.csv:3: "), std::string::npos) << curator.err;
  ASSERT_EQ(Cli("upload --dataset patients --csv good.csv", kCurator).exit_code, 0);
  EXPECT_EQ(Rows(id), 20);
}

// dpcurator-server --help lists its flags.
TEST_F(FrictionTest, ServerHelpListsItsFlags) {
  const fs::path out = dir_ / "help.txt";
  const std::string command = std::string(DPC_SERVER) + " --help >'" + out.string() + "' 2>&1";
  (void)std::system(command.c_str());
  const std::string help = ReadAll(out);
  EXPECT_EQ(help.find("No flags matched"), std::string::npos) << help;
  EXPECT_NE(help.find("--db"), std::string::npos) << help;
  EXPECT_NE(help.find("--insecure_dev"), std::string::npos) << help;
}

// Bins that fit the data (issue 38): a lognormal money column declared over
// [0, 1e9] with no bins. AIM over the default 16 equal-width bins puts every
// value in [0, 6.25e7) and samples money's 50th and 90th percentiles far
// from the real ones; `schema fit --epsilon 0.1` (one charge) writes the
// schema with fitted bins, marked as from a DP release; `datasets set-bins`
// applies them to the same dataset (the ledger continues, a change of
// bounds is refused); AIM then samples both percentiles within a factor 2.
TEST_F(FrictionTest, SchemaFitAndSetBinsFitAHeavyTail) {
  std::ofstream(dir_ / "s.json") << R"({"columns": [
      {"name": "money", "type": "NUMERIC", "lower": 0, "upper": 1000000000},
      {"name": "grp", "type": "CATEGORICAL", "categories": ["a", "b"]},
      {"name": "visits", "type": "NUMERIC", "lower": 0, "upper": 50, "nullable": true}]})";
  // `visits` is a nullable numeric with gaps: the fitted schema file must
  // keep its `nullable`, or set-bins refuses it as changing more than bins.
  std::mt19937_64 engine(38);
  std::normal_distribution<double> normal(std::log(30000.0), 1.0);
  std::vector<double> money;
  {
    std::ofstream out(dir_ / "data.csv");
    out << "money,grp,visits\n";
    for (int i = 0; i < 2000; ++i) {
      money.push_back(std::round(std::exp(normal(engine))));
      out << money.back() << "," << (money.back() > 30000 ? "b" : "a") << ",";
      if (i % 10 != 0) out << i % 7;
      out << "\n";
    }
  }
  auto percentile = [](std::vector<double> values, double p) {
    std::sort(values.begin(), values.end());
    return values[static_cast<size_t>(p * (values.size() - 1))];
  };
  const double real50 = percentile(money, 0.5);
  const double real90 = percentile(money, 0.9);
  auto within_factor_2 = [](double synthetic, double real) {
    return synthetic >= real / 2 && synthetic <= real * 2;
  };
  const std::string wide = Create("wide", "10");
  ASSERT_FALSE(wide.empty());
  ASSERT_EQ(Cli("upload --dataset wide --csv data.csv", kCurator).exit_code, 0);
  auto sampled_money = [&](const std::string& name) {
    CliRun trained =
        Cli("train aim --dataset wide --epsilon 1 --out " + name + ".pb", kAnalyst);
    EXPECT_EQ(trained.exit_code, 0) << trained.err;
    CliRun sampled =
        Cli("sample --model " + name + ".pb --rows 2000 --seed 1 --out " + name + ".csv");
    EXPECT_EQ(sampled.exit_code, 0) << sampled.err;
    std::vector<double> values;
    std::ifstream in(dir_ / (name + ".csv"));
    std::string line;
    std::getline(in, line);  // header: money,grp,visits
    while (std::getline(in, line)) values.push_back(std::atof(line.c_str()));
    return values;
  };
  const std::vector<double> without = sampled_money("default");
  ASSERT_GE(without.size(), 1000u);
  EXPECT_FALSE(within_factor_2(percentile(without, 0.5), real50) &&
               within_factor_2(percentile(without, 0.9), real90))
      << percentile(without, 0.5) << " " << percentile(without, 0.9);

  CliRun fit = Cli("schema fit --dataset wide --epsilon 0.1 --columns money --out fit.json",
                   kAnalyst);
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  EXPECT_NE(fit.out.find("epsilon 0.1 for this release"), std::string::npos) << fit.out;
  nlohmann::json fitted = nlohmann::json::parse(ReadAll(dir_ / "fit.json"));
  EXPECT_NEAR(fitted["dp_release"]["epsilon"].get<double>(), 0.1, 1e-6);
  EXPECT_FALSE(fitted["dp_release"]["release_id"].get<std::string>().empty());
  EXPECT_GE(fitted["columns"][0]["bins"].size(), 8u) << fitted.dump();
  EXPECT_NE(fitted["columns"][0]["note"].get<std::string>().find("suggested bounds"),
            std::string::npos);
  // Only bins may change: another bound is refused.
  nlohmann::json narrowed = fitted;
  narrowed["columns"][0]["upper"] = 2000000000;
  std::ofstream(dir_ / "narrowed.json") << narrowed.dump();
  CliRun refused = Cli("datasets set-bins --dataset wide --schema narrowed.json", kCurator);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("more than its bins"), std::string::npos) << refused.err;
  CliRun set = Cli("datasets set-bins --dataset wide --schema fit.json --json", kCurator);
  ASSERT_EQ(set.exit_code, 0) << set.err;
  const nlohmann::json changed = nlohmann::json::parse(set.out);
  EXPECT_EQ(changed["columns_changed"], nlohmann::json::array({"money"}));
  EXPECT_NE(changed["schema_fingerprint"], changed["previous_schema_fingerprint"]);

  const std::vector<double> with_fit = sampled_money("fitted");
  ASSERT_GE(with_fit.size(), 1000u);
  EXPECT_TRUE(within_factor_2(percentile(with_fit, 0.5), real50))
      << percentile(with_fit, 0.5) << " vs " << real50;
  EXPECT_TRUE(within_factor_2(percentile(with_fit, 0.9), real90))
      << percentile(with_fit, 0.9) << " vs " << real90 << "\n" << fitted.dump() << "\n"
      << fit.out;
  // One ledger: aim, the fit, aim.
  CliRun budget = Cli("budget --dataset wide --json", kCurator);
  ASSERT_EQ(budget.exit_code, 0) << budget.err;
  EXPECT_EQ(nlohmann::json::parse(budget.out)["events"].size(), 3u) << budget.out;
}

// Issue 38: an open categorical column from upload to synthetic rows. A
// steward without a public list of cities declares the column open; every
// other release waits for a category fit (nothing charged); the fit
// publishes the values many rows share and never one that a single row
// holds; the curator sets the list with its catch-all; MST then trains on
// it and samples only published values or the catch-all.
TEST_F(FrictionTest, AnOpenColumnIsFittedSetAndTrainedOn) {
  std::ofstream(dir_ / "s.json") << R"({"columns": [
      {"name": "city", "type": "CATEGORICAL", "open": true, "nullable": true},
      {"name": "age", "type": "NUMERIC", "lower": 0, "upper": 100},
      {"name": "outcome", "type": "CATEGORICAL", "categories": ["no", "yes"]}],
      "label": "outcome"})";
  const std::vector<std::string> common = {"Aarhus", "Bergen", "Cork", "Delft", "Espoo"};
  {
    std::ofstream out(dir_ / "data.csv");
    out << "city,age,outcome\n";
    for (int i = 0; i < 2000; ++i) {
      // 100 values of one row each (rows 0-99), a missing city every 50th
      // row, the five common cities (about 370 rows each) for the rest.
      std::string city = i < 100 ? "solo-" + std::to_string(i) : common[i % 5];
      if (i % 50 == 49) city = "";
      out << city << "," << 20 + i % 60 << "," << (i % 5 < 2 ? "yes" : "no") << "\n";
    }
  }
  const std::string id = Create("open", "5");
  ASSERT_FALSE(id.empty());
  CliRun uploaded = Cli("upload --dataset open --csv data.csv", kCurator);
  ASSERT_EQ(uploaded.exit_code, 0) << uploaded.err;
  auto spent = [&] {
    CliRun budget = Cli("budget --dataset open --json", kAnalyst);
    EXPECT_EQ(budget.exit_code, 0) << budget.err;
    return nlohmann::json::parse(budget.out)["epsilon_spent"].get<double>();
  };

  CliRun early = Cli("train mst --dataset open --epsilon 1 --out early.pb", kAnalyst);
  EXPECT_NE(early.exit_code, 0);
  EXPECT_NE(early.err.find("schema fit"), std::string::npos) << early.err;
  EXPECT_NE(early.err.find("--categories city"), std::string::npos) << early.err;
  EXPECT_EQ(spent(), 0.0);

  CliRun fit = Cli("schema fit --dataset open --epsilon 1 --categories city --out cats.json",
                   kAnalyst);
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  EXPECT_NE(fit.out.find("datasets set-categories"), std::string::npos) << fit.out;
  const double after_fit = spent();
  EXPECT_GT(after_fit, 0.5);
  EXPECT_LE(after_fit, 1.0 + 1e-9);
  const nlohmann::json fitted = nlohmann::json::parse(ReadAll(dir_ / "cats.json"));
  std::vector<std::string> listed = fitted["columns"][0]["categories"];
  // The five common cities, sorted, then the catch-all: ~370 rows each is
  // far above any threshold at epsilon 1, and a value of one row is
  // published with probability delta_0 (1e-6 here).
  std::vector<std::string> expected = common;
  expected.push_back("other");
  EXPECT_EQ(listed, expected) << fitted.dump();
  EXPECT_TRUE(fitted["columns"][0].value("open", false)) << fitted.dump();

  CliRun analyst_set = Cli("datasets set-categories --dataset open --schema cats.json", kAnalyst);
  EXPECT_NE(analyst_set.exit_code, 0);
  CliRun set = Cli("datasets set-categories --dataset open --schema cats.json", kCurator);
  ASSERT_EQ(set.exit_code, 0) << set.err;

  CliRun trained = Cli("train mst --dataset open --epsilon 1 --out m.pb", kAnalyst);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  CliRun sampled = Cli("sample --model m.pb --rows 4000 --seed 1 --out syn.csv");
  ASSERT_EQ(sampled.exit_code, 0) << sampled.err;
  std::ifstream in(dir_ / "syn.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "city,age,outcome");
  std::map<std::string, int> counts;
  int rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    ++counts[line.substr(0, line.find(','))];
  }
  EXPECT_EQ(rows, 4000);
  for (const auto& [city, count] : counts) {
    EXPECT_TRUE(city.empty() || std::find(expected.begin(), expected.end(), city) !=
                                    expected.end())
        << city << " sampled " << count << " times";
  }
  // The 100 single-row values (5% of rows) read as the catch-all, so it is
  // sampled (about 200 of 4,000 rows; MST's noise at epsilon 1 is a few
  // counts of 2,000 rows).
  EXPECT_GT(counts["other"], 50) << counts["other"];
  EXPECT_LT(counts["other"], 500) << counts["other"];
}
}  // namespace
}  // namespace dpcurator
