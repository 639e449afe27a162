// `dpcurator sample`: rows (CSV) or images (PNG grid, IDX) from a model
// file, drawn by the sampler of the method that wrote it (the registry).
// It talks to no server and sees no private row.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/methods/generator_model.h"
#include "client/methods/registry.h"
#include "client/proto_file.h"
#include "core/data/csv.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

absl::Status RunSample(const ParsedArgs& args) {
  v1::GeneratorModel model;
  if (auto s = ReadProtoFile(args.Get("model"), &model); !s.ok()) return s;
  auto rows = args.GetInt("rows");
  auto seed = args.GetInt("seed");
  if (!rows.ok()) return rows.status();
  if (!seed.ok()) return seed.status();
  auto method = MethodOfModel(model);
  if (!method.ok()) return method.status();
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
  auto table = SampleModel(model, *rows, static_cast<uint64_t>(*seed));
  if (!table.ok()) return table.status();
  auto schema = SchemaFromProto(model.schema());
  if (!schema.ok()) return schema.status();
  const std::string out = args.Get("out");
  if (out == "-") {
    data::WriteCsv(*schema, *table, &std::cout);
  } else {
    std::ofstream output(out);
    if (!output) return absl::UnavailableError(absl::StrCat("cannot write '", out, "'"));
    data::WriteCsv(*schema, *table, &output);
    std::printf("%lld synthetic rows written to %s\n", static_cast<long long>(table->num_rows()),
                out.c_str());
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
       {"label", "0", "local-DP image models (one per class collection): the IDX label"}},
      RunSample});
  return commands;
}

}  // namespace dpcurator::client
