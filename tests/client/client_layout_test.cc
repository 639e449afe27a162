// The client's layout (issue 25 item 1), read from its sources:
//  - commands live in client/commands/: no *_cmd.cc, *_model.h or the old
//    pipeline.{h,cc} at client/'s top level;
//  - a method's name is a string literal only in client/methods/ (its unit;
//    the registry binds units by MethodId, so it holds none), so a command
//    never branches on a method's name;
//  - the include graph of client/ (built from its #include lines) has no
//    cycle.
// Each check takes the tree it scans, so a test can plant each fault in a
// scratch tree and see the check catch it. DPC_CLIENT_SCAN_ROOT, when set,
// scans another tree's client/ (how the report shows the tests failing on
// the code before the moves).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "client/methods/registry.h"

namespace dpcurator::client {
namespace {

namespace fs = std::filesystem;

// The repository root whose client/ is scanned.
fs::path RepoRoot() {
  const char* root = std::getenv("DPC_CLIENT_SCAN_ROOT");
  return fs::path(root != nullptr ? root : DPC_SOURCE_DIR);
}

// Every .cc and .h under repo/client/, as paths relative to the repository
// root ("client/methods/mst.cc").
std::vector<std::string> ClientSources(const fs::path& repo) {
  std::vector<std::string> files;
  const fs::path root = repo / "client";
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
    files.push_back((fs::path("client") / fs::relative(entry.path(), root)).generic_string());
  }
  return files;
}

std::string ReadSource(const fs::path& repo, const std::string& relative) {
  std::ifstream input(repo / relative);
  std::stringstream text;
  text << input.rdbuf();
  return text.str();
}

// The string literals of a C++ source (comments and character literals
// skipped; adjacent pieces are separate literals, as a name would not be
// split across them).
std::vector<std::string> StringLiterals(const std::string& text) {
  std::vector<std::string> literals;
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
    } else if (text.compare(i, 2, "/*") == 0) {
      i = text.find("*/", i + 2);
      if (i == std::string::npos) break;
      i += 2;
    } else if (text[i] == '\'') {
      for (++i; i < text.size() && text[i] != '\''; ++i) {
        if (text[i] == '\\') ++i;
      }
      ++i;
    } else if (text[i] == '"') {
      std::string literal;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') literal.push_back(text[i++]);
        literal.push_back(text[i]);
      }
      ++i;
      literals.push_back(literal);
    } else {
      ++i;
    }
  }
  return literals;
}

TEST(ClientLayoutTest, LiteralScannerSeesStringsNotComments) {
  const auto literals =
      StringLiterals("a = \"mst\"; // \"merf\"\n/* \"pearl\" */ c = '\"'; d = \"x\\\"y\";");
  ASSERT_EQ(literals.size(), 2u);
  EXPECT_EQ(literals[0], "mst");
  EXPECT_EQ(literals[1], "x\\\"y");
}

// The names a method literal must not spell outside client/methods/: every
// registered method's, and those of methods announced but not yet
// registered (AIM, issue 26), so the scan is armed before their unit lands.
std::set<std::string> MethodNames() {
  std::set<std::string> names = {"merf", "pearl", "autogan", "kernel", "mst", "sinkhorn", "aim"};
  for (const Method* method : RegisteredMethods()) names.emplace(method->name());
  return names;
}

// "file: \"name\"" for each method-name literal outside client/methods/.
std::vector<std::string> MisplacedMethodNames(const fs::path& repo) {
  const std::set<std::string> names = MethodNames();
  std::vector<std::string> misplaced;
  for (const std::string& file : ClientSources(repo)) {
    if (file.rfind("client/methods/", 0) == 0) continue;
    for (const std::string& literal : StringLiterals(ReadSource(repo, file))) {
      if (names.count(literal) > 0) misplaced.push_back(file + ": \"" + literal + "\"");
    }
  }
  return misplaced;
}

// Files at client/'s top level that the layout retired: a command is
// client/commands/<name>.cc (not <name>_cmd.cc), a method's model is its
// unit in client/methods/ (not <name>_model.h), and pipeline.{h,cc} (which
// trained and sampled several methods at once) is gone.
std::vector<std::string> RetiredTopLevelFiles(const fs::path& repo) {
  std::vector<std::string> retired;
  for (const std::string& file : ClientSources(repo)) {
    const fs::path path(file);
    if (path.parent_path() != "client") continue;
    const std::string stem = path.stem().string();
    const auto ends_with = [&](const std::string& suffix) {
      return stem.size() > suffix.size() &&
             stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends_with("_cmd") || ends_with("_model") || stem == "pipeline") retired.push_back(file);
  }
  return retired;
}

std::string Listed(const std::vector<std::string>& items) {
  std::string listed;
  for (const auto& item : items) listed += "\n  " + item;
  return listed;
}

TEST(ClientLayoutTest, MethodNamesAreLiteralsOnlyInTheirUnits) {
  ASSERT_GE(RegisteredMethods().size(), 6u);
  const auto misplaced = MisplacedMethodNames(RepoRoot());
  EXPECT_TRUE(misplaced.empty()) << "method names outside client/methods/:" << Listed(misplaced);
}

TEST(ClientLayoutTest, NoCommandOrPipelineFilesAtClientTopLevel) {
  const auto retired = RetiredTopLevelFiles(RepoRoot());
  EXPECT_TRUE(retired.empty()) << "files that belong in client/commands/ or client/methods/:"
                               << Listed(retired);
}

// A unit of the include graph: a header and the .cc that implements it.
// Before client/methods/ a method's header was X_model.h and its code
// X_cmd.cc, so those suffixes are dropped to pair them.
std::string UnitOf(const std::string& file) {
  std::string unit = file.substr(0, file.rfind('.'));
  for (const std::string suffix : {"_cmd", "_model"}) {
    if (unit.size() > suffix.size() &&
        unit.compare(unit.size() - suffix.size(), suffix.size(), suffix) == 0) {
      unit.resize(unit.size() - suffix.size());
    }
  }
  return unit;
}

// Unit -> the units it includes (client/ headers only).
std::map<std::string, std::set<std::string>> IncludeGraph(const fs::path& repo) {
  std::map<std::string, std::set<std::string>> graph;
  const std::regex include(R"re(^\s*#\s*include\s*"(client/[^"]+)")re");
  for (const std::string& file : ClientSources(repo)) {
    const std::string from = UnitOf(file);
    graph[from];
    std::istringstream lines(ReadSource(repo, file));
    std::string line;
    std::smatch match;
    while (std::getline(lines, line)) {
      if (!std::regex_search(line, match, include)) continue;
      const std::string to = UnitOf(match[1].str());
      if (to != from) graph[from].insert(to);
    }
  }
  return graph;
}

// The first cycle found by a depth-first search, as "a -> b -> a"; empty
// when there is none.
std::string FindCycle(const std::map<std::string, std::set<std::string>>& graph) {
  std::map<std::string, int> state;  // 0 new, 1 on the stack, 2 done
  std::vector<std::string> stack;
  std::string cycle;
  std::function<bool(const std::string&)> visit = [&](const std::string& node) {
    state[node] = 1;
    stack.push_back(node);
    auto edges = graph.find(node);
    if (edges != graph.end()) {
      for (const std::string& next : edges->second) {
        if (state[next] == 1) {
          bool in = false;
          for (const std::string& s : stack) {
            in = in || s == next;
            if (in) cycle += s + " -> ";
          }
          cycle += next;
          return true;
        }
        if (state[next] == 0 && visit(next)) return true;
      }
    }
    stack.pop_back();
    state[node] = 2;
    return false;
  };
  for (const auto& [node, edges] : graph) {
    if (state[node] == 0 && visit(node)) return cycle;
  }
  return "";
}

TEST(ClientLayoutTest, CycleFinderFindsACycle) {
  EXPECT_EQ(FindCycle({{"a", {"b"}}, {"b", {"c"}}, {"c", {"a"}}}), "a -> b -> c -> a");
  EXPECT_EQ(FindCycle({{"a", {"b", "c"}}, {"b", {"c"}}, {"c", {}}}), "");
  EXPECT_EQ(UnitOf("client/autogan_cmd.cc"), UnitOf("client/autogan_model.h"));
}

TEST(ClientLayoutTest, NoIncludeCyclesInClient) {
  const auto graph = IncludeGraph(RepoRoot());
  ASSERT_GT(graph.size(), 20u);
  EXPECT_EQ(FindCycle(graph), "") << "include cycle among client/ units";
}


// Each check catches its fault in a scratch tree: a command file and the
// pipeline header back at the top level, an unregistered method's name in a
// command, and a two-file include cycle. (The real tree passing proves
// nothing unless the same scans can fail.)
TEST(ClientLayoutTest, ChecksCatchPlantedFaults) {
  const fs::path repo = fs::temp_directory_path() /
                        ("client_layout_test_" + std::to_string(::testing::UnitTest::GetInstance()
                                                                     ->random_seed()));
  fs::remove_all(repo);
  fs::create_directories(repo / "client" / "commands");
  fs::create_directories(repo / "client" / "methods");
  const auto write = [&](const std::string& relative, const std::string& text) {
    std::ofstream(repo / relative) << text;
  };
  write("client/methods/aim.cc", "const char* kName = \"aim\";\n");  // allowed: its unit
  write("client/commands/train.cc",
        "#include \"client/commands/sample.h\"\nbool IsAim(s) { return s == \"aim\"; }\n");
  write("client/commands/sample.h", "#include \"client/commands/train.h\"\n");
  write("client/commands/train.h", "// \"merf\" in a comment is fine\n");
  write("client/dataset_cmd.cc", "");
  write("client/pipeline.h", "");
  write("client/cli.h", "");

  EXPECT_EQ(MisplacedMethodNames(repo),
            std::vector<std::string>{"client/commands/train.cc: \"aim\""});
  auto retired = RetiredTopLevelFiles(repo);
  std::sort(retired.begin(), retired.end());
  EXPECT_EQ(retired, (std::vector<std::string>{"client/dataset_cmd.cc", "client/pipeline.h"}));
  EXPECT_EQ(FindCycle(IncludeGraph(repo)),
            "client/commands/sample -> client/commands/train -> client/commands/sample");
  fs::remove_all(repo);
}

}  // namespace
}  // namespace dpcurator::client
