// `dpcurator sample`: rows (CSV) or images (PNG grid, IDX) from a model
// file, drawn by the sampler of the method that wrote it (the registry).
// It talks to no server and sees no private row.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "client/methods/generator_model.h"
#include "client/methods/registry.h"
#include "client/progress.h"
#include "core/data/csv.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

absl::Status RunSample(const ParsedArgs& args) {
  v1::GeneratorModel model;
  // A file of another kind is named with the command that takes it.
  const absl::StatusOr<const Method*> method = ReadModelFile(args.Get("model"), &model);
  if (!method.ok()) return method.status();
  auto rows = args.GetInt("rows");
  auto seed = args.GetInt("seed");
  if (!rows.ok()) return rows.status();
  if (!seed.ok()) return seed.status();
  if (!model.image_architecture().empty() || IsImageSchema(model.schema())) {
    if (!args.Has("png") && !args.Has("idx")) {
      return absl::InvalidArgumentError(
          "this is an image model: give --png GRID.png (one row of images per class) and/or "
          "--idx PREFIX (PREFIX-images-idx3-ubyte and PREFIX-labels-idx1-ubyte, --rows images)");
    }
    return (*method)->SampleImages(args, model, *rows, static_cast<uint64_t>(*seed));
  }
  if (args.Has("png") || args.Has("idx")) {
    return absl::InvalidArgumentError("--png and --idx are for image models; this one samples "
                                      "table rows (--out FILE.csv)");
  }
  if (*rows < 1) return absl::InvalidArgumentError("--rows must be at least 1");
  auto schema = SchemaFromProto(model.schema());
  if (!schema.ok()) return schema.status();
  // Rows are sampled and written in chunks, so memory stays bounded however
  // many are asked for (issue 25 item 2: 10^12 rows died with bad_alloc).
  // The first chunk keeps --seed, so small outputs are as before; chunk k
  // uses a seed derived from (--seed, k) (registry.h: SampleChunkSeed).
  const std::string out = args.Get("out");
  std::ofstream file;
  std::ostream* output = &std::cout;
  if (out != "-") {
    file.open(out);
    if (!file) return absl::UnavailableError(absl::StrCat("cannot write '", out, "'"));
    output = &file;
  }
  Progress progress;
  int64_t written = 0;
  for (int64_t chunk = 0; written < *rows; ++chunk) {
    const int64_t n = std::min(kSampleChunkRows, *rows - written);
    const uint64_t chunk_seed = SampleChunkSeed(static_cast<uint64_t>(*seed), chunk);
    auto table = SampleModel(model, n, chunk_seed);
    if (!table.ok()) return table.status();
    data::WriteCsv(*schema, *table, output, /*header=*/chunk == 0);
    written += n;
    if (!*output) {
      return absl::UnavailableError(absl::StrCat("writing '", out, "' failed after ", written,
                                                 " rows (disk full?)"));
    }
    if (chunk == 0 && written < *rows && out != "-") {
      // A size the disk cannot hold is refused now, not after hours.
      output->flush();
      std::error_code error;
      const auto space = std::filesystem::space(std::filesystem::absolute(out).parent_path(), error);
      const double bytes_per_row = static_cast<double>(file.tellp()) / static_cast<double>(written);
      const double needed = bytes_per_row * static_cast<double>(*rows - written);
      if (!error && needed > static_cast<double>(space.available)) {
        file.close();
        std::filesystem::remove(out, error);
        return absl::InvalidArgumentError(absl::StrFormat(
            "--rows %lld would need about %.3g GB for '%s' (%.0f bytes a row) and its disk has "
            "%.3g GB free; nothing was written",
            static_cast<long long>(*rows), needed / 1e9 + bytes_per_row * written / 1e9,
            out, bytes_per_row, static_cast<double>(space.available) / 1e9));
      }
    }
    if (out != "-") {
      progress.Update(absl::StrFormat("sample: %lld / %lld rows", static_cast<long long>(written),
                                      static_cast<long long>(*rows)));
    }
  }
  if (out != "-") {
    progress.Finish(absl::StrFormat("sample: %lld / %lld rows", static_cast<long long>(written),
                                    static_cast<long long>(*rows)));
    if (args.Flag("json")) {
      const nlohmann::json said = {{"out", out},
                                   {"rows", written},
                                   {"method", model.method()},
                                   {"release_id", model.release_id()},
                                   {"dataset_id", model.dataset_id()},
                                   {"seed", *seed}};
      std::printf("%s\n", said.dump(2).c_str());
    } else {
      std::printf("%lld synthetic rows written to %s\n", static_cast<long long>(written),
                  out.c_str());
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> SampleCommands() {
  std::vector<Command> commands;
  commands.push_back(Command{
      "sample", "draw synthetic rows in the original schema (CSV), or images (PNG grid, IDX)",
      "Table models write CSV (--out). Image models write a PNG grid with one row of\n"
      "--grid-per-class images per class (--png), and/or --rows images with balanced labels\n"
      "as an IDX pair for tools (--idx PREFIX).",
      {{"model", "model.pb", "model file"},
       {"rows", "10000", "number of rows (images for --idx)"},
       {"seed", "7", "sampling seed"},
       {"out", "synthetic.csv", "output CSV ('-' for stdout); table models"},
       {"png", "", "image models: PNG grid to write"},
       {"grid-per-class", "10", "image models: images per class in the --png grid"},
       {"idx", "", "image models: IDX prefix to write"},
       {"label", "0", "local-DP image models (one per class collection): the IDX label"},
       {"json", "", "print JSON (docs/json.md; table models writing --out FILE)", true}},
      RunSample});
  return commands;
}

}  // namespace dpcurator::client
