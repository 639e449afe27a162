// `dpcurator split`: hold out a test split of a CSV or ARFF file on this
// machine, before the training part is uploaded, so `eval` and `report`
// judge synthetic rows on real rows the model never saw. It talks to no
// server.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "client/commands.h"
#include "client/text_upload.h"

namespace dpcurator::client {
namespace {

absl::Status RunSplit(const ParsedArgs& args) {
  TextUploadOptions options;
  options.format = TextFormatOfPath(args.Get("in"));
  auto delimiter = ParseDelimiter(args.Get("delimiter"));
  if (!delimiter.ok()) return delimiter.status();
  options.delimiter = *delimiter;
  auto fraction = args.GetDouble("test-fraction");
  if (!fraction.ok()) return fraction.status();
  auto seed = args.GetInt("seed");
  if (!seed.ok()) return seed.status();
  auto counts = SplitTextFile(args.Get("in"), options, *fraction, static_cast<uint64_t>(*seed),
                              args.Get("train-out"), args.Get("test-out"));
  if (!counts.ok()) return counts.status();
  if (args.Flag("json")) {
    const nlohmann::json out = {{"train_out", args.Get("train-out")},
                                {"test_out", args.Get("test-out")},
                                {"train_rows", counts->train_rows},
                                {"test_rows", counts->test_rows}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%lld rows to %s (upload these), %lld held out in %s (eval --real)\n",
                static_cast<long long>(counts->train_rows), args.Get("train-out").c_str(),
                static_cast<long long>(counts->test_rows), args.Get("test-out").c_str());
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> SplitCommands() {
  std::vector<Command> commands;
  commands.push_back(Command{
      "split",
      "hold out a test split of a CSV or ARFF file (local, before upload)",
      "Writes exactly round(fraction x rows) records, drawn by a seeded shuffle, to --test-out\n"
      "and the rest to --train-out, each with the header line, as CSV (an ARFF file's\n"
      "attribute names become the header). Upload the train part; give the test part to\n"
      "`dpcurator eval --real` and `dpcurator report --real`.\n\n"
      "  dpcurator split --in data.csv --test-fraction 0.2 --seed 1 --train-out train.csv "
      "--test-out test.csv",
      {{"in", "", "CSV or ARFF file (ARFF by its name)", false, true},
       {"test-fraction", "0.2", "share of the rows held out, strictly between 0 and 1"},
       {"seed", "1", "seed of the shuffle (public)"},
       {"train-out", "train.csv", "the rows to upload"},
       {"test-out", "test.csv", "the held-out rows"},
       {"delimiter", ",", "CSV field separator (one character, or tab); kept in the outputs"},
       {"json", "", "print JSON (docs/json.md)", true}},
      RunSplit});
  return commands;
}

}  // namespace dpcurator::client
