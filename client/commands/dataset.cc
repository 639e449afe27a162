// Curator and analyst commands about datasets: create, list, upload, budget.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/progress.h"
#include "client/schema_file.h"
#include "client/text_upload.h"
#include "client/upload.h"
#include "client/printable.h"
#include "core/data/idx.h"
#include "core/data/png_folder.h"
#include "core/privacy/relation.h"
#include "proto/convert.h"

namespace dpcurator::client {
namespace {

// Column names of the schema `datasets create --images` declares.
constexpr char kImageColumn[] = "pixels";
constexpr char kLabelColumn[] = "label";

}  // namespace

// The image schema of `datasets create --images HxW --classes N |
// --class-names a,b,...`: an IMAGE column "pixels" and, with classes, the
// categorical label column "label" (class names default to "0".."N-1", as
// IDX label files number them).
absl::StatusOr<v1::TableSchema> ImageSchemaFromArgs(const ParsedArgs& args) {
  const std::string shape = args.Get("images");
  std::vector<std::string> sides = absl::StrSplit(shape, absl::ByAnyChar("xX"));
  int height = 0;
  int width = 0;
  if (sides.size() != 2 || !absl::SimpleAtoi(sides[0], &height) ||
      !absl::SimpleAtoi(sides[1], &width)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--images '", shape, "' is not a shape: write HEIGHTxWIDTH in pixels, e.g. 28x28"));
  }
  v1::TableSchema schema;
  auto* image = schema.add_columns();
  image->set_name(kImageColumn);
  image->set_type(v1::ColumnSchema::IMAGE);
  image->mutable_image()->set_height(height);
  image->mutable_image()->set_width(width);
  image->mutable_image()->set_channels(1);
  if (args.Has("classes") && args.Has("class-names")) {
    return absl::InvalidArgumentError("give --classes N or --class-names a,b,..., not both");
  }
  std::vector<std::string> names;
  if (args.Has("class-names")) {
    names = absl::StrSplit(args.Get("class-names"), ',');
  } else if (args.Has("classes")) {
    auto classes = args.GetInt("classes");
    if (!classes.ok()) return classes.status();
    if (*classes < 2 || *classes > 65536) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--classes must be in [2, 65536], got ", *classes,
          "; leave it out for an unlabelled image dataset"));
    }
    for (int64_t c = 0; c < *classes; ++c) names.push_back(absl::StrCat(c));
  }
  if (!names.empty()) {
    auto* label = schema.add_columns();
    label->set_name(kLabelColumn);
    label->set_type(v1::ColumnSchema::CATEGORICAL);
    for (const auto& name : names) label->add_categories(name);
    schema.set_label(kLabelColumn);
  }
  // The same checks as the server's, with the same messages, before a call.
  if (auto parsed = SchemaFromProto(schema); !parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--images / --classes: ", parsed.status().message()));
  }
  return schema;
}

namespace {

// Pixel bytes per upload message, at most: under gRPC's 4 MB default with
// room for the labels (1000 images of 28 x 28 are 784 KB).
constexpr int64_t kMaxBatchPixelBytes = int64_t{3} << 20;
constexpr int64_t kMaxImagesPerBatch = 1000;

absl::Status RunCreate(const ParsedArgs& args) {
  if (args.Has("schema") == args.Has("images")) {
    return absl::InvalidArgumentError(
        "give exactly one of --schema FILE (tabular data) and --images HEIGHTxWIDTH (see "
        "dpcurator datasets create --help)");
  }
  if (!args.Has("images") && (args.Has("classes") || args.Has("class-names"))) {
    return absl::InvalidArgumentError(
        "--classes and --class-names go with --images; a schema file declares its own label");
  }
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto schema = args.Has("images")
                    ? ImageSchemaFromArgs(args)
                    : ReadSchemaForPublishing(args.Get("schema"), args.Flag(kAcceptDataDerivedFlag));
  if (!schema.ok()) return schema.status();
  auto epsilon = args.GetDouble("epsilon");
  auto delta = args.GetDouble("delta");
  if (!epsilon.ok()) return epsilon.status();
  if (!delta.ok()) return delta.status();
  WarnIfUnlikelyEpsilonCap("--epsilon", *epsilon);
  WarnIfUnlikelyEpsilon("--epsilon", *epsilon);
  auto relation = privacy::ParseRelation(args.Get("relation"));
  if (!relation.has_value()) {
    return absl::InvalidArgumentError("--relation must be add-remove or replace-one");
  }
  // Names are accepted wherever ids are, so a name must name one dataset:
  // a name in use is refused here (the server itself allows duplicates).
  {
    auto listed = ListAllDatasets(&*connection);  // every page
    if (!listed.ok()) return listed.status();
    for (const auto& d : *listed) {
      if (d.name() == args.Get("name")) {
        return absl::AlreadyExistsError(absl::StrCat(
            "a dataset named '", d.name(), "' exists (", d.id(),
            "); choose another --name, or delete that one with `dpcurator datasets delete "
            "--dataset ", d.id(), " --yes`"));
      }
    }
  }
  v1::CreateDatasetRequest request;
  request.set_name(args.Get("name"));
  *request.mutable_schema() = *schema;
  request.mutable_budget()->set_epsilon(*epsilon);
  request.mutable_budget()->set_delta(*delta);
  request.set_relation(RelationToProto(*relation));
  if (args.Has("public-row-bound") && !args.Flag("external")) {
    return absl::InvalidArgumentError(
        "--public-row-bound goes with --external (a dataset with uploaded rows counts them)");
  }
  request.set_external(args.Flag("external"));
  if (args.Has("public-row-bound")) {
    auto bound = args.GetInt("public-row-bound");
    if (!bound.ok()) return bound.status();
    request.set_public_row_bound(*bound);
  }
  v1::Dataset dataset;
  auto context = connection->NewContext();
  grpc::Status status = connection->datasets().CreateDataset(context.get(), request, &dataset);
  if (!status.ok()) return RpcError(status, "create dataset");
  if (args.Flag("json")) {
    std::printf("{\"dataset_id\": \"%s\"}\n", dataset.id().c_str());
  } else {
    std::printf("created %sdataset %s (%s), budget epsilon %g at delta %g, relation %s\n",
                dataset.external() ? "external " : "", dataset.id().c_str(),
                dataset.name().c_str(), dataset.budget().epsilon(), dataset.budget().delta(),
                v1::NeighbouringRelation_Name(dataset.relation()).c_str());
    if (dataset.external()) {
      std::printf(
          "its rows stay in your cluster: releases on it wait until `python3 -m "
          "dpcurator.dask_runner --dataset %s ...` computes them (docs/scale-out.md)\n",
          dataset.id().c_str());
    }
  }
  return absl::OkStatus();
}

// Streams images to an image dataset: batches of at most kMaxImagesPerBatch
// images (and kMaxBatchPixelBytes), labels as level indices. `source(max,
// pixels, labels)` fills the next batch and returns its size (0 at the end).
// Every image was validated before this is called, so a refusal here is the
// server's (or the connection's). The server stores the upload as one
// transaction: a refusal or a cancelled stream stores nothing.
using ImageSource =
    std::function<absl::StatusOr<int64_t>(int64_t, std::string*, std::vector<uint32_t>*)>;

absl::StatusOr<v1::UploadRowsResponse> SendImages(Connection& connection,
                                                  const std::string& dataset_id,
                                                  const data::Schema& schema, int64_t total,
                                                  bool append, const ImageSource& source) {
  const int64_t per_image = schema.pixels_per_image();
  const int64_t batch_images =
      std::max<int64_t>(1, std::min(kMaxImagesPerBatch, kMaxBatchPixelBytes / per_image));
  auto context = connection.NewContext();
  v1::UploadRowsResponse response;
  auto writer = connection.datasets().UploadRows(context.get(), &response);
  Progress progress;
  int64_t sent = 0;
  std::string pixels;
  std::vector<uint32_t> labels;
  bool stream_ended = false;
  while (true) {
    auto count = source(batch_images, &pixels, &labels);
    if (!count.ok()) {
      // Cancelled, not finished: a finished stream would be committed.
      context->TryCancel();
      (void)writer->Finish();
      return absl::Status(count.status().code(),
                          absl::StrCat(count.status().message(), " (nothing was stored)"));
    }
    if (*count == 0) break;
    v1::UploadRowsRequest message;
    if (sent == 0) {
      message.set_dataset_id(dataset_id);
      message.set_append(append);
    }
    auto* batch = message.mutable_images();
    batch->set_count(static_cast<int>(*count));
    batch->set_pixels(std::move(pixels));
    if (schema.label_index().has_value()) {
      batch->mutable_label_levels()->Assign(labels.begin(), labels.end());
    }
    if (!writer->Write(message)) {
      stream_ended = true;  // the server ended the stream: Finish says why
      break;
    }
    sent += *count;
    progress.Update(absl::StrFormat("upload: %lld / %lld images", static_cast<long long>(sent),
                                    static_cast<long long>(total)));
  }
  if (!stream_ended) {
    progress.Finish(absl::StrFormat("upload: %lld / %lld images sent",
                                    static_cast<long long>(sent),
                                    static_cast<long long>(total)));
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return RpcError(status, "upload refused");
  if (response.rows_accepted() != sent) {
    return absl::DataLossError(absl::StrCat(
        "the server stored ", response.rows_accepted(), " of the ", sent,
        " images sent (the stream was cut short); upload the images after the stored ones "
        "again"));
  }
  return response;
}

// The label file's labels, all read and checked against the dataset's
// classes before any image is sent.
absl::StatusOr<std::vector<uint32_t>> ReadIdxLabels(const std::string& path,
                                                    const data::Schema& schema) {
  auto reader = data::IdxReader::Open(path);
  if (!reader.ok()) return reader.status();
  if (reader->dims().size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": has ", reader->dims().size(),
        " dimensions; a label file has 1 (one byte per image): is it the images file? Pass "
        "the labels with --labels and the images with --idx"));
  }
  if (!schema.label_index().has_value()) {
    return absl::InvalidArgumentError(
        "the dataset has no label column, so --labels cannot be stored; leave it out, or "
        "create the dataset with --classes N");
  }
  const int classes = schema.NumLevels(*schema.label_index());
  std::vector<uint32_t> labels;
  labels.reserve(static_cast<size_t>(reader->num_records()));
  std::vector<uint8_t> block;
  while (true) {
    const int64_t first = reader->next_record();
    auto got = reader->Read(64 * 1024, &block);
    if (!got.ok()) return got.status();
    if (*got == 0) break;
    for (int64_t i = 0; i < *got; ++i) {
      if (block[i] >= classes) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": record ", first + i, " (0-based) has label ", block[i],
            ", outside the dataset's ", classes, " classes (0 to ", classes - 1,
            "); fix the label file, or create the dataset with the right --classes"));
      }
      labels.push_back(block[i]);
    }
  }
  return labels;
}

// Opens an IDX image file and checks its shape against the dataset's.
absl::StatusOr<data::IdxReader> OpenIdxImages(const std::string& path,
                                              const data::Schema& schema) {
  auto reader = data::IdxReader::Open(path);
  if (!reader.ok()) return reader.status();
  const data::Column& image = schema.column(*schema.image_index());
  const auto& dims = reader->dims();
  if (dims.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": has ", dims.size(),
        " dimensions; an image file has 3 (count x height x width): is it the labels file? "
        "Pass the images with --idx and the labels with --labels"));
  }
  if (dims[1] != image.image_height || dims[2] != image.image_width) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": holds ", dims[1], " x ", dims[2], " images; the dataset declares ",
        image.image_height, " x ", image.image_width,
        ". Resize the images, or create a dataset with --images ", dims[1], "x", dims[2]));
  }
  return reader;
}

absl::StatusOr<v1::UploadRowsResponse> UploadIdx(Connection& connection,
                                                 const std::string& dataset_id,
                                                 const data::Schema& schema,
                                                 const std::string& images_path,
                                                 const std::string& labels_path, bool append) {
  // Everything is checked before anything is sent: the labels (count,
  // range) and a full pass over the images (a truncated or overlong file
  // is found here, with the record where it stops).
  auto images = OpenIdxImages(images_path, schema);
  if (!images.ok()) return images.status();
  std::vector<uint32_t> labels;
  if (!labels_path.empty()) {
    auto read = ReadIdxLabels(labels_path, schema);
    if (!read.ok()) return read.status();
    labels = *std::move(read);
    if (static_cast<int64_t>(labels.size()) != images->num_records()) {
      return absl::InvalidArgumentError(absl::StrCat(
          images_path, " holds ", images->num_records(), " images but ", labels_path,
          " holds ", labels.size(), " labels; they must be one label per image, in order"));
    }
  } else if (schema.label_index().has_value()) {
    return absl::InvalidArgumentError(
        "the dataset has a label column: pass the label file with --labels LABELS");
  }
  if (images->num_records() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, ": holds no images"));
  }
  std::vector<uint8_t> block;
  while (true) {
    auto got = images->Read(4096, &block);
    if (!got.ok()) {
      return absl::Status(got.status().code(),
                          absl::StrCat(got.status().message(),
                                       ". Nothing was uploaded; fix or re-export the file "
                                       "and upload it again."));
    }
    if (*got == 0) break;
  }
  // Second pass: stream.
  auto reader = OpenIdxImages(images_path, schema);
  if (!reader.ok()) return reader.status();
  const int64_t total = reader->num_records();
  return SendImages(connection, dataset_id, schema, total, append,
                    [&](int64_t max, std::string* pixels,
                        std::vector<uint32_t>* batch_labels) -> absl::StatusOr<int64_t> {
                      const int64_t first = reader->next_record();
                      auto got = reader->Read(max, &block);
                      if (!got.ok()) return got.status();  // the file changed since
                      pixels->assign(block.begin(), block.end());
                      batch_labels->clear();
                      if (!labels.empty()) {
                        batch_labels->assign(labels.begin() + first,
                                             labels.begin() + first + *got);
                      }
                      return *got;
                    });
}

absl::StatusOr<v1::UploadRowsResponse> UploadPngFolder(Connection& connection,
                                                       const std::string& dataset_id,
                                                       const data::Schema& schema,
                                                       const std::string& root, bool append) {
  const data::Column& image = schema.column(*schema.image_index());
  // Every image is judged by the declared size, so a refusal names the
  // files that differ from it (not the ones that differ from the first).
  auto set = data::ReadPngFolder(root, std::make_pair(image.image_height, image.image_width));
  if (!set.ok()) return set.status();
  if (set->height != image.image_height || set->width != image.image_width) {
    return absl::InvalidArgumentError(absl::StrCat(
        root, ": holds ", set->height, " x ", set->width, " images; the dataset declares ",
        image.image_height, " x ", image.image_width,
        ". Resize the images, or create a dataset with --images ", set->height, "x",
        set->width));
  }
  // Sub-folder names are class names: each must be a declared one.
  std::vector<uint32_t> level_of(set->class_names.size());
  if (!schema.label_index().has_value()) {
    if (set->class_names.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          root, ": has ", set->class_names.size(),
          " class folders but the dataset has no label column; create it with --classes or "
          "--class-names"));
    }
  } else {
    const data::Column& label = schema.column(*schema.label_index());
    for (size_t c = 0; c < set->class_names.size(); ++c) {
      auto found = std::find(label.categories.begin(), label.categories.end(),
                             set->class_names[c]);
      if (found == label.categories.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            root, "/", set->class_names[c], ": the folder name is not a declared class (",
            absl::StrJoin(label.categories, ", "),
            "); rename the folder to its class name, or create the dataset with "
            "--class-names"));
      }
      level_of[c] = static_cast<uint32_t>(found - label.categories.begin());
    }
  }
  const int64_t per_image = set->pixels_per_image();
  const int64_t total = set->size();
  int64_t next = 0;
  return SendImages(connection, dataset_id, schema, total, append,
                    [&](int64_t max, std::string* pixels,
                        std::vector<uint32_t>* labels) -> absl::StatusOr<int64_t> {
                      const int64_t count = std::min(max, total - next);
                      pixels->resize(static_cast<size_t>(count * per_image));
                      labels->clear();
                      for (int64_t i = 0; i < count; ++i) {
                        for (int64_t p = 0; p < per_image; ++p) {
                          // The readers store level / 255: this is the level.
                          const float v = set->pixels[(next + i) * per_image + p];
                          (*pixels)[i * per_image + p] =
                              static_cast<char>(static_cast<uint8_t>(std::lround(v * 255.0f)));
                        }
                        labels->push_back(level_of[set->labels[next + i]]);
                      }
                      next += count;
                      return count;
                    });
}

// --delimiter and --decimal-comma of a text upload.
absl::StatusOr<TextUploadOptions> TextOptionsFromArgs(const ParsedArgs& args) {
  TextUploadOptions options;
  options.format = args.Has("arff") ? TextFormat::kArff : TextFormat::kCsv;
  if (options.format == TextFormat::kArff &&
      (!args.IsDefault("delimiter") || args.Flag("decimal-comma"))) {
    return absl::InvalidArgumentError(
        "--delimiter and --decimal-comma go with --csv (ARFF is comma-separated with "
        "decimal points)");
  }
  auto delimiter = ParseDelimiter(args.Get("delimiter"));
  if (!delimiter.ok()) return delimiter.status();
  options.delimiter = *delimiter;
  options.decimal_comma = args.Flag("decimal-comma");
  return options;
}

absl::Status RunUpload(const ParsedArgs& args) {
  const int sources = static_cast<int>(args.Has("csv")) + static_cast<int>(args.Has("arff")) +
                      static_cast<int>(args.Has("idx")) + static_cast<int>(args.Has("png-folder"));
  if (sources != 1) {
    return absl::InvalidArgumentError(
        "give exactly one of --csv FILE, --arff FILE, --idx IMAGES (with --labels LABELS) and "
        "--png-folder DIR (see dpcurator upload --help)");
  }
  if (args.Has("labels") && !args.Has("idx")) {
    return absl::InvalidArgumentError("--labels goes with --idx IMAGES");
  }
  const bool images = args.Has("idx") || args.Has("png-folder");
  if (images && args.Flag("dry-run")) {
    return absl::InvalidArgumentError(
        "--dry-run checks --csv and --arff files; image files are checked in full before "
        "any image is sent anyway");
  }
  absl::StatusOr<TextUploadOptions> text_options = TextUploadOptions();
  if (!images) {
    text_options = TextOptionsFromArgs(args);
    if (!text_options.ok()) return text_options.status();
    text_options->append = args.Flag("append");
  }
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto found = FindDataset(&*connection, args.Get("dataset"));
  if (!found.ok()) return found.status();
  const v1::Dataset* dataset = &*found;
  auto schema = SchemaFromProto(dataset->schema());
  if (!schema.ok()) return schema.status();
  if (images != schema->image_index().has_value()) {
    return absl::InvalidArgumentError(
        images ? absl::StrCat("dataset '", dataset->id(),
                              "' has no image column; upload its rows with --csv or --arff")
               : absl::StrCat("dataset '", dataset->id(),
                              "' is an image dataset; upload with --idx IMAGES --labels LABELS "
                              "or --png-folder DIR"));
  }
  const std::string text_path = args.Has("csv") ? args.Get("csv") : args.Get("arff");
  if (args.Flag("dry-run")) {
    // Parsed and checked here against the dataset's schema; nothing is sent.
    auto check = CheckTextFile(*schema, text_path, *text_options);
    if (!check.ok()) return check.status();
    if (args.Flag("json")) {
      nlohmann::json out = {{"dry_run", true},
                            {"rows", check->rows},
                            {"cells_out_of_bounds", check->cells_out_of_bounds},
                            {"ignored_columns", check->ignored_columns}};
      // A Latin-1 header is not UTF-8: replaced, not thrown on.
      std::printf("%s\n",
                  out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::printf("dry run: %s holds %lld good rows for dataset %s (%lld cells outside the "
                  "declared bounds would be clamped); nothing was sent\n",
                  text_path.c_str(), static_cast<long long>(check->rows),
                  dataset->id().c_str(), static_cast<long long>(check->cells_out_of_bounds));
      // Columns the schema does not name are dropped silently by an upload:
      // say which, so that a misspelt schema column is seen before it costs.
      if (!check->ignored_columns.empty()) {
        std::string names;
        for (const std::string& name : check->ignored_columns) {
          absl::StrAppend(&names, names.empty() ? "" : ", ", "'", Printable(name), "'");
        }
        std::printf("the schema ignores %zu of the file's columns (not uploaded): %s\n",
                    check->ignored_columns.size(), names.c_str());
      }
    }
    return absl::OkStatus();
  }
  absl::StatusOr<v1::UploadRowsResponse> response;
  if (args.Has("idx")) {
    response = UploadIdx(*connection, dataset->id(), *schema, args.Get("idx"),
                         args.Has("labels") ? args.Get("labels") : "", args.Flag("append"));
  } else if (args.Has("png-folder")) {
    response = UploadPngFolder(*connection, dataset->id(), *schema, args.Get("png-folder"),
                               args.Flag("append"));
  } else {
    response = UploadTextFile(*connection, dataset->id(), *schema, text_path, *text_options);
  }
  if (!response.ok()) return response.status();
  if (images) {
    if (auto warning = ImageDataSizeWarning(response->total_rows(), dataset->budget().epsilon())) {
      std::fprintf(stderr, "%s\n", warning->c_str());
    }
  }
  if (images && !args.Flag("json")) {
    std::printf("uploaded %lld images; dataset has %lld rows\n",
                static_cast<long long>(response->rows_accepted()),
                static_cast<long long>(response->total_rows()));
    return absl::OkStatus();
  }
  if (args.Flag("json")) {
    nlohmann::json out = {{"rows_accepted", response->rows_accepted()},
                          {"cells_clamped", response->cells_clamped()},
                          {"total_rows", response->total_rows()}};
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("uploaded %lld rows (%lld cells clamped to declared bounds); dataset has %lld rows\n",
              static_cast<long long>(response->rows_accepted()),
              static_cast<long long>(response->cells_clamped()),
              static_cast<long long>(response->total_rows()));
  return absl::OkStatus();
}

absl::Status RunDelete(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto found = FindDataset(&*connection, args.Get("dataset"));
  if (!found.ok()) return found.status();
  if (!args.Flag("yes")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "deleting dataset ", found->id(), " (", found->name(),
        ") removes its rows for good; add --yes to confirm"));
  }
  v1::DeleteDatasetRequest request;
  request.set_dataset_id(found->id());
  v1::DeleteDatasetResponse response;
  auto context = connection->NewContext();
  grpc::Status status = connection->datasets().DeleteDataset(context.get(), request, &response);
  if (!status.ok()) return RpcError(status, "delete dataset");
  if (args.Flag("json")) {
    nlohmann::json out = {{"dataset_id", response.dataset_id()},
                          {"rows_deleted", response.rows_deleted()}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("deleted dataset %s (%s): %lld rows removed. Its budget history stays (`dpcurator "
                "budget --dataset %s`); the budget spent is not returned and the id is never "
                "reused.\n",
                response.dataset_id().c_str(), found->name().c_str(),
                static_cast<long long>(response.rows_deleted()), response.dataset_id().c_str());
  }
  return absl::OkStatus();
}

// `datasets set-bins` and `set-categories`: read the schema file, send it
// with `send` (the dataset's id, the schema), and name the columns whose
// `what` (bins, categories) changed, from the two public schemas.
using SchemaChangeRpc = std::function<grpc::Status(
    Connection& connection, grpc::ClientContext* context, const std::string& dataset_id,
    const v1::TableSchema& schema, v1::Dataset* updated)>;
using ColumnChanged =
    std::function<bool(const v1::ColumnSchema& before, const v1::ColumnSchema& after)>;

absl::Status RunSchemaChange(const ParsedArgs& args, const std::string& what,
                             const SchemaChangeRpc& send, const ColumnChanged& column_changed,
                             const char* consequence) {
  const std::string path = args.Get("schema");
  auto schema = ReadSchemaForPublishing(path, args.Flag(kAcceptDataDerivedFlag));
  if (!schema.ok()) return schema.status();
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto found = FindDataset(&*connection, args.Get("dataset"));
  if (!found.ok()) return found.status();
  v1::Dataset updated;
  auto context = connection->NewContext();
  grpc::Status status = send(*connection, context.get(), found->id(), *schema, &updated);
  if (!status.ok()) return RpcError(status, "set " + what);
  std::vector<std::string> changed;
  for (int c = 0; c < updated.schema().columns_size() && c < found->schema().columns_size();
       ++c) {
    if (column_changed(found->schema().columns(c), updated.schema().columns(c))) {
      changed.push_back(updated.schema().columns(c).name());
    }
  }
  if (args.Flag("json")) {
    nlohmann::json out = {{"dataset_id", updated.id()},
                          {"columns_changed", changed},
                          {"schema_fingerprint", updated.schema_fingerprint()},
                          {"previous_schema_fingerprint", found->schema_fingerprint()}};
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("dataset %s: %s set for %s; schema fingerprint %s (was %s).%s The ledger "
              "continues; earlier releases keep the fingerprint they were made under.\n",
              updated.id().c_str(), what.c_str(),
              changed.empty() ? "no column (unchanged)" : absl::StrJoin(changed, ", ").c_str(),
              updated.schema_fingerprint().c_str(), found->schema_fingerprint().c_str(),
              consequence);
  return absl::OkStatus();
}

template <typename List>
bool ListsDiffer(const List& before, const List& after) {
  return !std::equal(before.begin(), before.end(), after.begin(), after.end());
}

absl::Status RunSetBins(const ParsedArgs& args) {
  return RunSchemaChange(
      args, "bins",
      [](Connection& connection, grpc::ClientContext* context, const std::string& dataset_id,
         const v1::TableSchema& schema, v1::Dataset* updated) {
        v1::SetBinsRequest request;
        request.set_dataset_id(dataset_id);
        *request.mutable_schema() = schema;
        return connection.datasets().SetBins(context, request, updated);
      },
      [](const v1::ColumnSchema& before, const v1::ColumnSchema& after) {
        return ListsDiffer(before.bins(), after.bins());
      },
      "");
}

absl::Status RunSetCategories(const ParsedArgs& args) {
  return RunSchemaChange(
      args, "categories",
      [](Connection& connection, grpc::ClientContext* context, const std::string& dataset_id,
         const v1::TableSchema& schema, v1::Dataset* updated) {
        v1::SetCategoriesRequest request;
        request.set_dataset_id(dataset_id);
        *request.mutable_schema() = schema;
        return connection.datasets().SetCategories(context, request, updated);
      },
      [](const v1::ColumnSchema& before, const v1::ColumnSchema& after) {
        return ListsDiffer(before.categories(), after.categories());
      },
      " Values not listed now read as the last category.");
}

absl::Status RunList(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  // Every page (server/paging.h), not only the first.
  auto listed = ListAllDatasets(&*connection);
  if (!listed.ok()) return listed.status();
  const std::vector<v1::Dataset>& datasets = *listed;
  // The spent budget of each, from the ledger (one GetBudget a dataset).
  std::vector<std::optional<double>> spent;
  for (const auto& d : datasets) {
    v1::GetBudgetRequest request;
    request.set_dataset_id(d.id());
    request.set_page_size(1);  // only the totals, which every page carries
    v1::BudgetReport report;
    auto budget_context = connection->NewContext();
    grpc::Status got = connection->datasets().GetBudget(budget_context.get(), request, &report);
    spent.push_back(got.ok() ? std::optional<double>(report.epsilon_spent()) : std::nullopt);
  }
  auto date = [](int64_t unix) {
    char when[32];
    std::time_t t = unix;
    std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M", std::gmtime(&t));
    return std::string(when);
  };
  if (args.Flag("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < datasets.size(); ++i) {
      const auto& d = datasets[i];
      nlohmann::json entry = {{"dataset_id", d.id()},
                              {"name", d.name()},
                              {"relation", d.relation() == v1::REPLACE_ONE ? "replace-one"
                                                                           : "add-remove"},
                              {"epsilon_cap", d.budget().epsilon()},
                              {"delta", d.budget().delta()},
                              {"created_unix", d.created_unix()},
                              {"sealed", d.sealed()}};
      if (spent[i].has_value()) entry["epsilon_spent"] = *spent[i];
      // 0 is a count too (an empty dataset); a withheld count is left out.
      if (!d.row_count_hidden() && !d.external()) entry["rows"] = d.row_count();
      if (d.external()) entry["external"] = true;
      out.push_back(std::move(entry));
    }
    std::printf("%s\n", nlohmann::json{{"datasets", out}}.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("%-38s %-20s %-16s %-12s %10s %10s %10s %10s\n", "id", "name", "created (UTC)",
              "relation", "eps spent", "eps cap", "delta", "rows");
  for (size_t i = 0; i < datasets.size(); ++i) {
    const auto& d = datasets[i];
    std::printf("%-38s %-20s %-16s %-12s %10s %10g %10g %10s\n", Printable(d.id()).c_str(),
                Printable(d.name()).c_str(), date(d.created_unix()).c_str(),
                d.relation() == v1::REPLACE_ONE ? "replace-one" : "add-remove",
                spent[i].has_value() ? absl::StrFormat("%.4g", *spent[i]).c_str() : "?",
                d.budget().epsilon(), d.budget().delta(),
                d.external()           ? "external"
                : d.row_count_hidden() ? "private"
                                       : absl::StrCat(d.row_count()).c_str());
  }
  return absl::OkStatus();
}

absl::Status RunBudget(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto dataset_id = ResolveDatasetId(&*connection, args.Get("dataset"));
  if (!dataset_id.ok()) return dataset_id.status();
  // Every page (server/paging.h): the same output as before paging.
  auto whole = GetWholeBudget(&*connection, *dataset_id);
  if (!whole.ok()) return whole.status();
  const v1::BudgetReport& report = *whole;
  if (args.Flag("json")) {
    nlohmann::json out;
    out["dataset_id"] = report.dataset_id();
    out["epsilon_cap"] = report.budget().epsilon();
    out["delta"] = report.budget().delta();
    out["epsilon_spent"] = report.epsilon_spent();
    out["epsilon_remaining"] = report.epsilon_remaining();
    out["epsilon_rdp"] = report.epsilon_rdp();
    if (report.has_epsilon_exact()) out["epsilon_exact"] = report.epsilon_exact();
    if (report.has_epsilon_discrete_exact()) {
      out["epsilon_discrete_exact"] = report.epsilon_discrete_exact();
    }
    out["events"] = nlohmann::json::array();
    for (const auto& e : report.events()) {
      out["events"].push_back({{"id", e.id()},
                               {"release_id", e.release_id()},
                               {"kind", e.kind()},
                               {"description", e.description()},
                               {"epsilon_alone", e.epsilon_alone()},
                               {"refund_of", e.refund_of()}});
    }
    out["sessions"] = nlohmann::json::array();
    for (const auto& session : report.sessions()) {
      out["sessions"].push_back({{"session_id", session.id()},
                                 {"state", session.state()},
                                 {"steps_reserved", session.steps_reserved()},
                                 {"steps_used", session.steps_used()},
                                 {"epsilon_reserved", session.epsilon_reserved()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("dataset %s: spent epsilon %.4f of %.4f at delta %g, remaining %.4f\n",
              report.dataset_id().c_str(), report.epsilon_spent(), report.budget().epsilon(),
              report.budget().delta(), report.epsilon_remaining());
  std::string exact;
  if (report.has_epsilon_exact()) {
    exact = absl::StrFormat("; exact Gaussian composition %.4f", report.epsilon_exact());
  } else if (report.has_epsilon_discrete_exact()) {
    exact = absl::StrFormat("; the one discrete Gaussian release's own profile %.4f",
                            report.epsilon_discrete_exact());
  }
  std::printf("  (RDP conversion %.4f at order %g%s)\n", report.epsilon_rdp(),
              report.optimal_order(), exact.c_str());
  std::printf("\n%5s  %-20s  %-14s  %10s  %s\n", "event", "time (UTC)", "kind", "eps alone",
              "mechanism / release");
  for (const auto& e : report.events()) {
    char when[32];
    std::time_t t = e.created_unix();
    std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", std::gmtime(&t));
    std::printf("%5lld  %-20s  %-14s  %10.4f  %s  %s\n", static_cast<long long>(e.id()), when,
                Printable(e.kind()).c_str(), e.epsilon_alone(),
                Printable(e.description()).c_str(), Printable(e.release_id()).c_str());
  }
  if (report.sessions_size() > 0) {
    std::printf("\nsessions (reservations; closing returns the steps not run)\n");
    std::printf("%-38s %-10s %10s %10s %12s\n", "session", "state", "reserved", "used",
                "eps reserved");
    for (const auto& session : report.sessions()) {
      std::printf("%-38s %-10s %10lld %10lld %12.4f\n", session.id().c_str(),
                  session.state().c_str(), static_cast<long long>(session.steps_reserved()),
                  static_cast<long long>(session.steps_used()), session.epsilon_reserved());
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> DatasetCommands() {
  std::vector<Command> commands;
  commands.push_back(Command{
      "datasets create",
      "register a dataset with its public schema, budget and neighbouring relation (curator)",
      "The schema file is JSON (docs/schema.md; `dpcurator schema draft` writes a first one):\n"
      "column types, declared bounds and categories. Nothing about the domain is ever learned\n"
      "from rows, so a schema still carrying \"data_derived\": true markers is refused unless\n"
      "--accept-data-derived says to publish those values as they are.\n"
      "An image dataset needs no schema file: --images 28x28 --classes 10 declares grey\n"
      "28 x 28 images (column \"pixels\", values in [0, 1]) with a label column \"label\" of\n"
      "classes \"0\"..\"9\" (or --class-names a,b,...). Upload them with `upload --idx` or\n"
      "`upload --png-folder`.\n"
      "An external dataset (--external) keeps its rows in the curator's cluster: nothing is\n"
      "uploaded, and each release on it waits as a pending job until the curator's runner\n"
      "(`python3 -m dpcurator.dask_runner`) computes it there (docs/scale-out.md). Under\n"
      "replace-one, --public-row-bound N declares its public row count.",
      WithConnection({{"name", "", "dataset name", false, true},
                      {"schema", "", "schema JSON file (or --images)"},
                      {"images", "",
                       "HEIGHTxWIDTH: an image dataset of grey images this size (or --schema)"},
                      {"classes", "", "with --images: N label classes named 0..N-1"},
                      {"class-names", "", "with --images: the label classes' names, a,b,..."},
                      {kAcceptDataDerivedFlag, "",
                       "publish bounds and categories that `schema draft` read from the data "
                       "(they stay marked data_derived otherwise, and are refused)",
                       true},
                      {"epsilon", "", "total epsilon budget (cap)", false, true},
                      {"delta", "1e-5", "delta of the budget"},
                      {"relation", "add-remove", "neighbouring relation of the budget", false, false, "",
                       {"add-remove", "replace-one"}},
                      {"external", "",
                       "the rows stay in the curator's cluster; its releases are computed "
                       "there by the runner",
                       true},
                      {"public-row-bound", "",
                       "with --external: the public row count (required under replace-one)"},
                      {"json", "", "print JSON", true}}),
      RunCreate});
  commands.push_back(Command{
      "datasets list", "list datasets with their spent budget (curator, analyst)",
      "Row counts are shown to curators (0 for an empty dataset), and to analysts under\n"
      "replace-one; elsewhere the column says \"private\". The spent epsilon\n"
      "is the ledger's composed figure (as `dpcurator budget` shows it).",
      WithConnection({{"json", "", "print JSON (docs/json.md)", true}}), RunList});
  commands.push_back(Command{
      "datasets delete", "delete a dataset's rows for good (curator)",
      "The rows are deleted from the server's database; the dataset is listed no more and\n"
      "takes no upload, release or session. Its ledger stays: `dpcurator budget` still shows\n"
      "its history, the releases made from it stay, the budget spent is NOT returned, and\n"
      "the id is never reused (docs/privacy.md, \"Deleting a dataset\"). Refused while a\n"
      "session is open on it.",
      WithConnection({{"dataset", "", "dataset id or name", false, true},
                      {"yes", "", "confirm: the rows cannot be recovered", true},
                      {"json", "", "print JSON (docs/json.md)", true}}),
      RunDelete});
  commands.push_back(Command{
      "datasets set-bins", "change numeric columns' bins on a stored dataset (curator)",
      "Bins are public metadata of the discretisation that marginal methods (mst, aim,\n"
      "marginals) use; the stored rows and the ledger stay as they are. --schema is the\n"
      "dataset's schema with only numeric columns' \"bins\" changed, as `schema fit` writes\n"
      "it; any other difference (bounds, atoms, categories, label) is refused. The schema\n"
      "fingerprint changes: releases made before keep theirs, and models trained after use\n"
      "the new bins. Refused while a release is in progress or a session is open.\n\n"
      "  dpcurator datasets set-bins --dataset ds_... --schema fit.json",
      WithConnection({{"dataset", "", "dataset id or name", false, true},
                      {"schema", "", "schema JSON file (e.g. from `schema fit`)", false, true},
                      {kAcceptDataDerivedFlag, "",
                       "set bins still marked \"data_derived\" as they are", true},
                      {"json", "", "print JSON (docs/json.md)", true}}),
      RunSetBins});
  commands.push_back(Command{
      "datasets set-categories", "give open categorical columns their categories (curator)",
      "An open column (\"open\": true in the schema, docs/schema.md \"Open columns\") has no\n"
      "public category list: the server keeps its values, and every release but a category\n"
      "fit, and every session, is refused until it has one. `dpcurator schema fit --dataset\n"
      "ID --categories COLUMN` runs that fit (a charged release) and writes the schema with\n"
      "the published values plus a catch-all \"other\", last; this command sets it. The last\n"
      "category is the catch-all: every stored value not listed reads as it, so rare values\n"
      "(which the fit never publishes) stay together in one level. --schema is the dataset's\n"
      "schema with only open columns' \"categories\" changed; anything else is refused. The\n"
      "stored values and the ledger stay; the schema fingerprint changes. Refused while a\n"
      "release is in progress or a session is open.\n\n"
      "  dpcurator datasets set-categories --dataset ds_... --schema fit.json",
      WithConnection({{"dataset", "", "dataset id or name", false, true},
                      {"schema", "", "schema JSON file (from `schema fit --categories`)", false,
                       true},
                      {kAcceptDataDerivedFlag, "",
                       "set categories still marked \"data_derived\" as they are", true},
                      {"json", "", "print JSON (docs/json.md)", true}}),
      RunSetCategories});
  commands.push_back(Command{
      "upload", "stream a CSV or ARFF file's rows, or images, into a dataset (curator)",
      "The header (CSV) or the @attribute names (ARFF) are matched to the schema by column\n"
      "name; extra columns are ignored. The whole file is checked before anything is sent:\n"
      "every bad line (the first 20, then a count) is listed as FILE:LINE (1-based, header\n"
      "counted) with the column and the reason (missing values in a column that is not\n"
      "nullable: one line per column, the count and the first lines), and nothing is sent.\n"
      "--dry-run also names the file's columns the schema ignores. The server stores an\n"
      "upload as one transaction: all its rows, or none. --dry-run checks the file against\n"
      "the dataset's schema and sends nothing. A UTF-8 byte order mark is ignored;\n"
      "--delimiter ';' (or tab) reads other separators, and --decimal-comma reads \"1,5\" as\n"
      "1.5 in numeric columns (with a delimiter other than ','). Uploads are refused once a\n"
      "release has been made; `dpcurator datasets delete` removes a dataset's rows.\n"
      "An upload any of whose rows equals a row already stored is refused (the same file\n"
      "uploaded twice would store every person twice, which halves their protection);\n"
      "--append stores it when the repeats are different people who share values.\n"
      "Image datasets (`datasets create --images`): --idx IMAGES --labels LABELS reads IDX\n"
      "files (MNIST / Fashion-MNIST format, plain or gzipped); --png-folder DIR reads\n"
      "DIR/<class name>/*.png (any PNG, converted to 8-bit grey). The files are checked in\n"
      "full before any image is sent (magic, image size against the dataset's, truncation,\n"
      "one label per image, labels within the classes): an error names the file and the\n"
      "record (0-based), and nothing is stored.",
      WithConnection({{"dataset", "", "dataset id or name", false, true},
                      {"csv", "", "CSV file with a header line (or --arff, --idx, --png-folder)"},
                      {"delimiter", ",", "with --csv: the field separator (one character, or tab)"},
                      {"decimal-comma", "",
                       "with --csv: numbers use a decimal comma (1,5); needs --delimiter ';'", true},
                      {"dry-run", "",
                       "check every row against the dataset's schema and send nothing", true},
                      {"append", "",
                       "store rows equal to rows already stored (distinct people who share "
                       "values); without it such an upload is refused",
                       true},
                      {"arff", "", "ARFF file: its @data section is uploaded"},
                      {"idx", "", "IDX image file (count x height x width bytes) of an image dataset"},
                      {"labels", "", "with --idx: the IDX label file (one byte per image)"},
                      {"png-folder", "", "folder of class sub-folders of PNG images"},
                      {"json", "", "print JSON (docs/json.md)", true}}),
      RunUpload});
  commands.push_back(Command{
      "budget", "spent and remaining epsilon, and the ledger's event history",
      "Spent epsilon is the composed bound the ledger uses (the smaller of the RDP conversion\n"
      "and, while every event is a plain Gaussian, the exact analytic composition).",
      WithConnection(
          {{"dataset", "", "dataset id or name", false, true}, {"json", "", "print JSON", true}}),
      RunBudget});
  return commands;
}

}  // namespace dpcurator::client
