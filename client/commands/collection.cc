// Local-DP collections: the curator declares one (public mechanism), devices
// privatise their records locally and submit them, analysts download the
// reports (no budget: already local DP) and fit a generator with the
// deconvolving Sinkhorn trainer (ldp-sinkhorn.md; `train sinkhorn` is its
// method unit, client/methods/sinkhorn.cc).
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "client/progress.h"
#include "client/connection.h"
#include "client/device.h"
#include "client/methods/sinkhorn.h"
#include "client/model_package.h"
#include "client/proto_file.h"
#include "client/schema_file.h"
#include "client/printable.h"
#include "core/data/csv.h"
#include "core/data/idx.h"
#include "proto/collection.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

const char* StateName(v1::Collection::State state) {
  return state == v1::Collection::OPEN ? "OPEN" : "CLOSED";
}

void PrintCollection(const v1::Collection& c, bool json) {
  if (json) {
    nlohmann::json out = {{"collection_id", c.id()},
                          {"name", c.name()},
                          {"state", StateName(c.state())},
                          {"mechanism", c.params().mechanism()},
                          {"epsilon", c.params().epsilon()},
                          {"delta", c.params().delta()},
                          {"radius", c.params().radius()},
                          {"dimension", c.dimension()},
                          {"noise_scale", c.noise_scale()},
                          {"regularizer", c.regularizer()},
                          {"cost_exponent", c.cost_exponent()},
                          {"report_count", c.report_count()}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("collection %s '%s' (%s): %lld reports\n", Printable(c.id()).c_str(),
              Printable(c.name()).c_str(),
              StateName(c.state()), static_cast<long long>(c.report_count()));
  std::printf("  mechanism %s, epsilon %g, delta %g, radius %g, dimension %d\n",
              c.params().mechanism().c_str(), c.params().epsilon(), c.params().delta(),
              c.params().radius(), c.dimension());
  std::printf("  noise scale %.6g per coordinate; trainer cost p=%d, lambda %.6g\n",
              c.noise_scale(), c.cost_exponent(), c.regularizer());
}

absl::Status RunCollectionCreate(const ParsedArgs& args) {
  if (args.Has("schema") == args.Has("images")) {
    return absl::InvalidArgumentError(
        "give --schema FILE (table records) or --images HxW (grey images), one of them");
  }
  auto schema = args.Has("images")
                    ? ImageSchemaFromArgs(args)
                    : ReadSchemaForPublishing(args.Get("schema"), args.Flag(kAcceptDataDerivedFlag));
  if (!schema.ok()) return schema.status();
  v1::CreateCollectionRequest request;
  request.set_name(args.Get("name"));
  auto* params = request.mutable_params();
  *params->mutable_schema() = *schema;
  params->set_mechanism(args.Get("mechanism"));
  auto epsilon = args.GetDouble("epsilon");
  if (!epsilon.ok()) return epsilon.status();
  params->set_epsilon(*epsilon);
  if (args.Has("delta")) {
    auto delta = args.GetDouble("delta");
    if (!delta.ok()) return delta.status();
    params->set_delta(*delta);
  }
  if (args.Has("radius")) {
    auto radius = args.GetDouble("radius");
    if (!radius.ok()) return radius.status();
    params->set_radius(*radius);
  }
  // Validate locally first for a clear message (the server checks again).
  if (auto mechanism = MechanismFromParams(*params); !mechanism.ok()) {
    return mechanism.status();
  }
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto context = connection->NewContext();
  v1::Collection collection;
  grpc::Status status = connection->collections().CreateCollection(context.get(), request,
                                                                    &collection);
  if (!status.ok()) return RpcError(status, "CreateCollection");
  PrintCollection(collection, args.Flag("json"));
  return absl::OkStatus();
}

absl::StatusOr<v1::Collection> FetchCollection(Connection& connection, const std::string& id) {
  auto context = connection.NewContext();
  v1::GetCollectionRequest request;
  request.set_collection_id(id);
  v1::Collection collection;
  grpc::Status status = connection.collections().GetCollection(context.get(), request, &collection);
  if (!status.ok()) return RpcError(status, "GetCollection");
  return collection;
}

absl::Status RunCollectionShow(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto collection = FetchCollection(*connection, args.Get("collection"));
  if (!collection.ok()) return collection.status();
  PrintCollection(*collection, args.Flag("json"));
  return absl::OkStatus();
}

absl::Status RunCollectionClose(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto context = connection->NewContext();
  v1::CloseCollectionRequest request;
  request.set_collection_id(args.Get("collection"));
  v1::Collection collection;
  grpc::Status status =
      connection->collections().CloseCollection(context.get(), request, &collection);
  if (!status.ok()) return RpcError(status, "CloseCollection");
  PrintCollection(collection, args.Flag("json"));
  return absl::OkStatus();
}

absl::Status RunDownload(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto context = connection->NewContext();
  v1::DownloadReportsRequest request;
  request.set_collection_id(args.Get("collection"));
  auto reader = connection->collections().DownloadReports(context.get(), request);
  v1::ReportsFile file;
  file.set_format_version(kReportsFileFormatVersion);
  v1::ReportChunk chunk;
  bool first = true;
  while (reader->Read(&chunk)) {
    if (first) *file.mutable_collection() = chunk.collection();
    first = false;
    file.set_rows(file.rows() + chunk.rows());
    file.mutable_values()->Add(chunk.values().begin(), chunk.values().end());
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return RpcError(status, "DownloadReports");
  if (file.values_size() != file.rows() * file.collection().dimension()) {
    return absl::DataLossError("downloaded reports do not match their dimension");
  }
  if (auto s = WriteProtoFile(file, args.Get("out")); !s.ok()) return s;
  std::printf("%lld reports of collection %s (%s, epsilon %g, lambda %.6g) written to %s\n",
              static_cast<long long>(file.rows()), file.collection().id().c_str(),
              file.collection().params().mechanism().c_str(),
              file.collection().params().epsilon(), file.collection().regularizer(),
              args.Get("out").c_str());
  return absl::OkStatus();
}

// An IDX image file without labels (every image labelled 0).
absl::StatusOr<data::ImageSet> ReadUnlabelledIdxImages(const std::string& path) {
  auto reader = data::IdxReader::Open(path);
  if (!reader.ok()) return reader.status();
  if (reader->dims().size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' is not an IDX image file (count x height x width): it has ",
        reader->dims().size(), " dimensions"));
  }
  std::vector<uint8_t> levels;
  auto read = reader->Read(reader->num_records(), &levels);
  if (!read.ok()) return read.status();
  data::ImageSet set;
  set.height = reader->dims()[1];
  set.width = reader->dims()[2];
  set.num_classes = 1;
  set.pixels.resize(levels.size());
  for (size_t i = 0; i < levels.size(); ++i) set.pixels[i] = static_cast<float>(levels[i]) / 255.0f;
  set.labels.assign(static_cast<size_t>(*read), 0);
  return set;
}

absl::Status RunSubmit(const ParsedArgs& args) {
  auto batch = args.GetInt("batch");
  if (!batch.ok()) return batch.status();
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  // The public parameters; the record never leaves this process un-noised.
  auto collection = FetchCollection(*connection, args.Get("collection"));
  if (!collection.ok()) return collection.status();
  DeviceLimits limits;
  auto max_epsilon = args.GetDouble("max-epsilon");
  auto max_delta = args.GetDouble("max-delta");
  if (!max_epsilon.ok()) return max_epsilon.status();
  if (!max_delta.ok()) return max_delta.status();
  limits.max_epsilon = *max_epsilon;
  limits.max_delta = *max_delta;
  if (auto status = CheckDeviceLimits(collection->params(), limits); !status.ok()) {
    return status;
  }
  auto mechanism = MechanismFromCollection(*collection);
  if (!mechanism.ok()) return mechanism.status();
  auto schema = CollectionSchema(collection->params());
  if (!schema.ok()) return schema.status();
  if (args.Has("csv") == args.Has("idx")) {
    return absl::InvalidArgumentError(
        "give --csv FILE (table records) or --idx IMAGES (image records), one of them");
  }
  absl::StatusOr<data::Table> table;
  if (args.Has("idx")) {
    // This device's images; with --labels and --class, only that class's
    // (a per-class collection).
    if (args.Has("class") != args.Has("labels")) {
      return absl::InvalidArgumentError(
          "--class K picks images by their label: give it with --labels LABELS");
    }
    auto only_class = args.Has("class") ? args.GetInt("class") : absl::StatusOr<int64_t>(-1);
    if (!only_class.ok()) return only_class.status();
    if (*only_class < -1 || *only_class > 255) {
      return absl::InvalidArgumentError("--class must be in [0, 255] (IDX labels are bytes)");
    }
    data::IdxImageOptions read;
    read.num_classes = 256;
    absl::StatusOr<data::ImageSet> images;
    if (args.Has("labels")) {
      images = data::ReadIdxImages(args.Get("idx"), args.Get("labels"), read);
    } else {
      images = ReadUnlabelledIdxImages(args.Get("idx"));
    }
    if (!images.ok()) return images.status();
    table = ImageTable(*schema, *images, static_cast<int>(*only_class));
    if (table.ok() && table->num_rows() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("no image of '", args.Get("idx"),
                                                     "' has label ", *only_class,
                                                     "; nothing was sent"));
    }
  } else {
    table = data::ReadCsvFile(*schema, args.Get("csv"));
  }
  if (!table.ok()) return table.status();
  auto noise = privacy::SecureNoiseSource::Create();
  if (!noise.ok()) return noise.status();
  auto reports = PrivatizeReports(*mechanism, EncodeRows(*schema, *table), noise->get());
  if (!reports.ok()) return reports.status();
  auto summary =
      SubmitReports(*connection, collection->id(), *reports, static_cast<int>(*batch));
  if (!summary.ok()) return summary.status();
  std::printf("accepted %lld, duplicates %lld, rejected %zu (of %zu reports, %d stream%s)\n",
              static_cast<long long>(summary->accepted),
              static_cast<long long>(summary->duplicates), summary->rejections.size(),
              reports->size(), summary->attempts, summary->attempts == 1 ? "" : "s");
  for (const auto& r : summary->rejections) {
    std::printf("  rejected row %d (report %s): %s\n", r.index() + 1, r.report_id_hex().c_str(),
                r.reason().c_str());
  }
  return summary->rejections.empty() ? absl::OkStatus() : QuietExit(1);
}

}  // namespace

std::vector<Command> CollectionCommands() {
  std::vector<Command> commands;
  commands.push_back(Command{
      "collections create", "declare a local-DP collection (curator)",
      "Devices project each record onto the public ball of radius R (l1 or l2) and add\n"
      "Laplace or Gaussian noise calibrated to the diameter 2R (docs/privacy.md).",
      WithConnection({{"name", "", "collection name", false, true},
                      {"schema", "", "schema JSON (a label is encoded as an ordinary column)"},
                      {"images", "",
                       "HxW: records are grey images this size (pixels in [-1, 1] on the "
                       "device; or --schema)"},
                      {kAcceptDataDerivedFlag, "",
                       "publish bounds and categories `schema draft` read from the data", true},
                      {"mechanism", "", "local mechanism", false, true, "", {"laplace-l1", "gaussian-l2"}},
                      {"epsilon", "", "per-report epsilon", false, true},
                      {"delta", "", "delta (gaussian-l2 only)"},
                      {"radius", "", "ball radius R (default: the encoded rows' max norm)"},
                      {"json", "", "print JSON", true}}),
      RunCollectionCreate});
  commands.push_back(Command{"collections show", "a collection's public parameters and count", "",
                             WithConnection({{"collection", "", "collection id", false, true},
                                             {"json", "", "print JSON", true}}),
                             RunCollectionShow});
  commands.push_back(Command{"collections close", "stop accepting reports (curator)", "",
                             WithConnection({{"collection", "", "collection id", false, true},
                                             {"json", "", "print JSON", true}}),
                             RunCollectionClose});
  commands.push_back(Command{
      "collections download", "download the privatised reports (analyst; no budget)", "",
      WithConnection({{"collection", "", "collection id", false, true},
                      {"out", "reports.pb", "output reports file"}}),
      RunDownload});
  commands.push_back(Command{
      "device submit", "privatise CSV rows or images locally and submit them (device)",
      "Fetches the collection's public mechanism, encodes and privatises each row on this\n"
      "machine, and streams the reports with random 128-bit ids; a broken stream is resumed\n"
      "and resent batches are deduplicated by the server. The device does not trust the\n"
      "announced parameters: it refuses (and sends nothing) when they are weaker than its\n"
      "own ceiling, --max-epsilon and, for gaussian-l2, --max-delta.",
      WithConnection({{"collection", "", "collection id", false, true},
                      {"csv", "", "CSV of records (header line), or --idx"},
                      {"idx", "", "image collections: IDX file of this device's images"},
                      {"labels", "", "with --idx and --class: the IDX label file"},
                      {"class", "", "with --idx: submit only the images of this label"},
                      {"batch", "1000", "reports per acknowledged batch"},
                      {"max-epsilon", "10",
                       "largest per-report epsilon this device accepts (the local-DP paper's "
                       "experiments stay within 10; at 10 one report's likelihood ratio can "
                       "reach e^10 ~ 22,000)",
                       false, false, "DPCURATOR_MAX_EPSILON"},
                      {"max-delta", "1e-5", "largest delta accepted for gaussian-l2", false,
                       false, "DPCURATOR_MAX_DELTA"}}),
      RunSubmit});
  return commands;
}

}  // namespace dpcurator::client
