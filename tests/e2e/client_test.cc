// Unit tests of the client library (client/): the pieces of issue 11 C that
// need no server.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "client/cli.h"
#include "client/connection.h"
#include "client/device.h"
#include "client/upload.h"
#include "client/progress.h"
#include "client/schema_file.h"
#include "core/data/draft.h"

namespace dpcurator::client {
namespace {

// ---------------------------------------------------- environment fallbacks

class EnvTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* name :
         {"DPCURATOR_SERVER", "DPCURATOR_TOKEN", "DPCURATOR_INSECURE", "DPCURATOR_TLS_CA",
          "DPCURATOR_TLS_CERT", "DPCURATOR_TLS_KEY", "DPCURATOR_DEADLINE"}) {
      unsetenv(name);
    }
  }
};

TEST_F(EnvTest, EveryConnectionOptionHasADpcuratorVariable) {
  for (const OptionSpec& spec : ConnectionOptions()) {
    std::string expected = "DPCURATOR_";
    for (char c : spec.name)
      expected.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
    EXPECT_EQ(spec.env, expected) << spec.name;
  }
}

TEST_F(EnvTest, VariablesFillOptionsLeftOut) {
  setenv("DPCURATOR_INSECURE", "1", 1);
  setenv("DPCURATOR_TLS_CA", "/etc/ca.pem", 1);
  setenv("DPCURATOR_DEADLINE", "7", 1);
  setenv("DPCURATOR_SERVER", "curator:1", 1);
  auto parsed = ParseArgs(WithConnection({}), {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->Flag("insecure"));
  EXPECT_EQ(parsed->Get("tls-ca"), "/etc/ca.pem");
  EXPECT_EQ(parsed->Get("deadline"), "7");  // the variable wins over the default
  EXPECT_EQ(parsed->Get("server"), "curator:1");
  EXPECT_FALSE(parsed->Has("tls-cert"));
}

TEST_F(EnvTest, AnExplicitOptionWins) {
  setenv("DPCURATOR_INSECURE", "1", 1);
  setenv("DPCURATOR_SERVER", "curator:1", 1);
  setenv("DPCURATOR_DEADLINE", "7", 1);
  auto parsed =
      ParseArgs(WithConnection({}), {"--insecure=false", "--server", "other:2", "--deadline=9"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->Flag("insecure"));
  EXPECT_EQ(parsed->Get("server"), "other:2");
  EXPECT_EQ(parsed->Get("deadline"), "9");
}

// --insecure against the TLS options: the command line beats the
// environment; two of a kind conflict and say so.
TEST_F(EnvTest, PlaintextOrTlsExplicitBeatsEnvironment) {
  auto plaintext = [](std::vector<std::string> args) {
    auto parsed = ParseArgs(WithConnection({}), args);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return UsePlaintext(*parsed);
  };
  EXPECT_EQ(*plaintext({}), false);
  EXPECT_EQ(*plaintext({"--insecure"}), true);
  EXPECT_FALSE(plaintext({"--insecure", "--tls-ca", "ca.pem"}).ok());
  setenv("DPCURATOR_INSECURE", "1", 1);
  EXPECT_EQ(*plaintext({}), true);
  EXPECT_EQ(*plaintext({"--tls-ca", "ca.pem"}), false);  // explicit TLS wins
  setenv("DPCURATOR_TLS_CA", "ca.pem", 1);
  auto both_env = plaintext({});
  ASSERT_FALSE(both_env.ok());
  EXPECT_NE(std::string(both_env.status().message()).find("unset one"), std::string::npos);
  unsetenv("DPCURATOR_INSECURE");
  EXPECT_EQ(*plaintext({}), false);
  EXPECT_EQ(*plaintext({"--insecure"}), true);  // explicit plaintext ignores DPCURATOR_TLS_CA
}

TEST_F(EnvTest, WithoutVariablesDefaultsApply) {
  auto parsed = ParseArgs(WithConnection({}), {});
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->Flag("insecure"));
  EXPECT_EQ(parsed->Get("deadline"), "120");
  EXPECT_FALSE(parsed->Has("server"));
}

// IsDefault tells a declared default from the same value given explicitly
// (train on an image release swaps in the image defaults only for the
// former).
TEST(ParseArgsTest, IsDefaultOnlyForOptionsLeftOut) {
  const std::vector<OptionSpec> specs = {{"steps", "1000", "updates"},
                                         {"batch-size", "1024", "rows"},
                                         {"quiet", "", "no progress", true}};
  auto left_out = ParseArgs(specs, {});
  ASSERT_TRUE(left_out.ok()) << left_out.status();
  EXPECT_TRUE(left_out->IsDefault("steps"));
  EXPECT_EQ(left_out->Get("steps"), "1000");
  auto given = ParseArgs(specs, {"--steps", "1000", "--batch-size=7", "--quiet"});
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_FALSE(given->IsDefault("steps"));  // the default's value, but given
  EXPECT_FALSE(given->IsDefault("batch-size"));
  EXPECT_FALSE(given->IsDefault("quiet"));
}

TEST_F(EnvTest, HelpNamesTheVariable) {
  const std::string help = FormatHelp("dpcurator x", "x", WithConnection({}));
  EXPECT_NE(help.find("--insecure"), std::string::npos);
  EXPECT_NE(help.find("(env DPCURATOR_INSECURE)"), std::string::npos) << help;
  EXPECT_NE(help.find("(env DPCURATOR_TLS_KEY)"), std::string::npos) << help;
}

// ------------------------------------------------------------ progress lines

std::string Contents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  size_t read;
  while ((read = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, read);
  return text;
}

TEST(ProgressTest, OffATerminalPlainLinesAtMostEveryInterval) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  auto now = std::chrono::steady_clock::time_point{};
  Progress progress(out, /*terminal=*/false, std::chrono::seconds(5), [&] { return now; });
  for (int step = 1; step <= 100; ++step) {
    now += std::chrono::milliseconds(200);  // 20 s in all
    progress.Update("step " + std::to_string(step));
  }
  progress.Finish("step 100 done");
  const std::string text = Contents(out);
  std::fclose(out);
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  // First update, then one per 5 s (at 5.2, 10.2, 15.2 s), then the final line.
  EXPECT_EQ(text, "step 1\nstep 26\nstep 51\nstep 76\nstep 100 done\n");
}

TEST(ProgressTest, OnATerminalOneRewrittenLine) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  auto now = std::chrono::steady_clock::time_point{};
  Progress progress(out, /*terminal=*/true, std::chrono::seconds(5), [&] { return now; });
  progress.Update("step 10");
  progress.Update("step 9");
  progress.Finish("done");
  const std::string text = Contents(out);
  std::fclose(out);
  EXPECT_EQ(text, "\rstep 10\rstep 9 \rdone  \n");
}

// --------------------------------------------------------------- schema files

TEST(SchemaFileTest, TypeNamesAreCaseInsensitiveAndIncludeArffSpellings) {
  auto file = ParseSchemaFileText(R"({"columns": [
      {"name": "a", "type": "numeric", "lower": 0, "upper": 1},
      {"name": "b", "type": "Integer", "lower": 0, "upper": 9},
      {"name": "c", "type": "nominal", "categories": ["x", "y"]},
      {"name": "d", "type": "Categorical", "categories": ["u", "v"]}],
      "label": "d"})",
                                  "s.json");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->schema.columns(0).type(), v1::ColumnSchema::NUMERIC);
  EXPECT_FALSE(file->schema.columns(0).integer());
  EXPECT_TRUE(file->schema.columns(1).integer());
  EXPECT_EQ(file->schema.columns(2).type(), v1::ColumnSchema::CATEGORICAL);
  EXPECT_TRUE(file->data_derived.empty());
}

TEST(SchemaFileTest, AnUnknownTypeListsTheAcceptedNames) {
  auto file = ParseSchemaFileText(
      R"({"columns": [{"name": "age", "type": "numerc", "lower": 0, "upper": 1}]})", "s.json");
  ASSERT_FALSE(file.ok());
  const std::string message(file.status().message());
  EXPECT_NE(message.find("s.json: column 1 ('age'): unknown type 'numerc'"), std::string::npos)
      << message;
  for (const char* name :
       {"NUMERIC", "CATEGORICAL", "REAL", "INTEGER", "NOMINAL", "case-insensitive"}) {
    EXPECT_NE(message.find(name), std::string::npos) << message;
  }
}

TEST(SchemaFileTest, AnUnknownKeyListsTheAcceptedKeys) {
  auto file = ParseSchemaFileText(
      R"({"columns": [{"name": "c", "type": "CATEGORICAL", "categories": ["a"], "nulable": true}]})",
      "s.json");
  ASSERT_FALSE(file.ok());
  const std::string message(file.status().message());
  EXPECT_NE(message.find("unknown key \"nulable\""), std::string::npos) << message;
  EXPECT_NE(message.find("nullable"), std::string::npos) << message;
  EXPECT_NE(message.find("data_derived"), std::string::npos) << message;
}

TEST(SchemaFileTest, SyntaxErrorsNameLineAndColumn) {
  auto file = ParseSchemaFileText("{\n  \"columns\": [\n    {\"name\": \"a\",, }\n]}", "s.json");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(std::string(file.status().message()).find("s.json:3:"), std::string::npos)
      << file.status();
}

TEST(SchemaFileTest, DataDerivedMarkersAreReportedStrippedAndGuarded) {
  const std::string text = R"({"columns": [
      {"name": "age", "type": "NUMERIC", "lower": 19, "upper": 75, "data_derived": true},
      {"name": "job", "type": "CATEGORICAL", "categories": ["a", "b"], "data_derived": false},
      {"name": "y", "type": "CATEGORICAL", "categories": ["g", "b"], "data_derived": true}],
      "label": "y"})";
  auto file = ParseSchemaFileText(text, "s.json");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->data_derived, (std::vector<std::string>{"age", "y"}));
  // The wire schema has no such field: nothing to strip but the marker list.
  EXPECT_EQ(file->schema.columns_size(), 3);
  absl::Status refused = CheckDataDerived(*file, "s.json", /*accepted=*/false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(refused.message());
  EXPECT_NE(message.find("age, y"), std::string::npos) << message;
  EXPECT_NE(message.find("--accept-data-derived"), std::string::npos) << message;
  EXPECT_NE(message.find("public values"), std::string::npos) << message;
  EXPECT_TRUE(CheckDataDerived(*file, "s.json", /*accepted=*/true).ok());
}

TEST(SchemaFileTest, TheDraftReadsBackWithItsMarkers) {
  data::SchemaDrafter drafter({"n", "c", "y"}, {});
  for (const auto& row : std::vector<std::vector<std::string>>{
           {"4", "red", "yes"}, {"10", "?", "no"}, {"7", "blue", "no"}}) {
    ASSERT_TRUE(drafter.AddRow(row).ok());
  }
  auto draft = drafter.Finish(std::string("y"));
  ASSERT_TRUE(draft.ok()) << draft.status();
  const std::string json = DraftToSchemaJson(*draft);
  EXPECT_NE(json.find("\"lower\": 4,"), std::string::npos) << json;
  auto file = ParseSchemaFileText(json, "draft");
  ASSERT_TRUE(file.ok()) << file.status() << json;
  EXPECT_EQ(file->data_derived, (std::vector<std::string>{"n", "c", "y"}));
  EXPECT_TRUE(file->schema.columns(1).nullable());
  EXPECT_EQ(file->schema.label(), "y");
}

// ----------------------------------------------------- upload line citations

TEST(UploadLineTest, ServerRowIndicesMapToFileLines) {
  // Rows of messages of 2: lines 2, 3 | 5, 6 | 9 (blank lines and comments
  // in between, header on line 1).
  const std::vector<int64_t> lines = {2, 3, 5, 6, 9};
  absl::Status server = absl::InvalidArgumentError(
      "upload refused: upload message 1, row 1 (2 rows of this upload were stored before it): "
      "Column 'age': 'x' is not a finite number");
  absl::Status cited = CiteUploadLine(server, "data.csv", lines, 2);
  EXPECT_EQ(cited.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(cited.message()).rfind("data.csv:6: upload refused", 0), 0u) << cited;
  EXPECT_EQ(std::string(CiteUploadLine(absl::InvalidArgumentError("upload message 2, row 0: x"),
                                       "d.csv", lines, 2)
                            .message()),
            "d.csv:9: upload message 2, row 0: x");
  // Out of range or unrelated messages stay as they are.
  EXPECT_EQ(
      CiteUploadLine(absl::InvalidArgumentError("upload message 3, row 0: x"), "d.csv", lines, 2)
          .message(),
      "upload message 3, row 0: x");
  EXPECT_EQ(CiteUploadLine(absl::UnavailableError("down"), "d.csv", lines, 2).message(), "down");
}

// ----------------------------------------------------------- device ceiling

v1::CollectionParams Announced(const std::string& mechanism, double epsilon, double delta = 0) {
  v1::CollectionParams params;
  params.set_mechanism(mechanism);
  params.set_epsilon(epsilon);
  params.set_delta(delta);
  return params;
}

TEST(DeviceLimitsTest, DefaultsAcceptTheUsualRange) {
  DeviceLimits limits;
  EXPECT_EQ(limits.max_epsilon, 10.0);
  EXPECT_TRUE(CheckDeviceLimits(Announced("laplace-l1", 5), limits).ok());
  EXPECT_TRUE(CheckDeviceLimits(Announced("laplace-l1", 10), limits).ok());
  EXPECT_TRUE(CheckDeviceLimits(Announced("gaussian-l2", 1, 1e-6), limits).ok());
}

TEST(DeviceLimitsTest, RefusesAnEpsilonAboveTheCeilingAndSaysWhich) {
  absl::Status status = CheckDeviceLimits(Announced("laplace-l1", 50), DeviceLimits{});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(status.message());
  EXPECT_NE(message.find("epsilon 50"), std::string::npos) << message;
  EXPECT_NE(message.find("--max-epsilon 10"), std::string::npos) << message;
  DeviceLimits strict;
  strict.max_epsilon = 1;
  EXPECT_FALSE(CheckDeviceLimits(Announced("laplace-l1", 2), strict).ok());
  absl::Status zero = CheckDeviceLimits(Announced("laplace-l1", 0), strict);
  EXPECT_NE(std::string(zero.message()).find("not a positive finite number"), std::string::npos)
      << zero;
}

TEST(DeviceLimitsTest, RefusesAGaussianDeltaAboveTheCeiling) {
  absl::Status status = CheckDeviceLimits(Announced("gaussian-l2", 1, 0.01), DeviceLimits{});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(status.message()).find("--max-delta 1e-05"), std::string::npos) << status;
}

}  // namespace
}  // namespace dpcurator::client

namespace dpcurator::client {
namespace {

TEST(ChoicesTest, OptionsWithFixedValuesRefuseOthersAndListThem) {
  const std::vector<OptionSpec> specs = {
      {"relation", "add-remove", "relation", false, false, "", {"add-remove", "replace-one"}}};
  EXPECT_TRUE(ParseArgs(specs, {"--relation", "replace-one"}).ok());
  EXPECT_TRUE(ParseArgs(specs, {}).ok());
  auto refused = ParseArgs(specs, {"--relation=both"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(std::string(refused.status().message()),
            "--relation 'both' is not one of: add-remove, replace-one");
  EXPECT_NE(FormatHelp("u", "d", specs).find("{add-remove|replace-one}"), std::string::npos);
}

}  // namespace
}  // namespace dpcurator::client
