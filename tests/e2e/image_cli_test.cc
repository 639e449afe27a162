// End-to-end: image datasets through the command line (issue 14, item 1),
// with the real binaries against a local dpcurator-server. The IDX files
// and PNG folders are written here (small, from a fixed seed; no data set
// is downloaded): `datasets create --images`, `upload --idx` and
// `upload --png-folder`, a release over the pixels, and malformed inputs
// (wrong magic, a 32 x 32 file for a 28 x 28 dataset, a truncated images
// file, a label out of range, a count mismatch, an undeclared class folder),
// each refused with an error naming the file and storing nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/data/png_folder.h"

#include "tests/e2e/local_server.h"

namespace dpcurator {
namespace {

namespace fs = std::filesystem;

using e2e::CliRun;
using e2e::ReadAll;

void PutBigEndian32(std::string* out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(value >> shift));
}

// An IDX file of unsigned bytes: magic 00 00 08 <dims>, the dims, the data.
void WriteIdx(const fs::path& path, const std::vector<uint32_t>& dims, const std::string& data) {
  std::string bytes = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (uint32_t d : dims) PutBigEndian32(&bytes, d);
  bytes += data;
  std::ofstream(path, std::ios::binary) << bytes;
}

struct IdxPair {
  std::string pixels;  // count x side x side
  std::string labels;  // count
};
IdxPair MakeImages(int count, int side, int classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  IdxPair pair;
  for (int i = 0; i < count; ++i) {
    const int label = static_cast<int>(rng() % classes);
    pair.labels.push_back(static_cast<char>(label));
    for (int p = 0; p < side * side; ++p) {
      // A class-dependent brightness, so the images are not pure noise.
      pair.pixels.push_back(static_cast<char>((label * 25 + rng() % 32) & 0xff));
    }
  }
  return pair;
}

class ImageCliTest : public e2e::LocalServerTest {
 protected:
  void SetUp() override {
    StartServer("dpc_image_cli_",
                "curator curator-token-e2e\nanalyst analyst-token-e2e\ndevice device-token-e2e\n");
  }

  CliRun Cli(const std::string& arguments, const std::string& token = "curator-token-e2e") {
    return RunCli(arguments, Env(token));
  }

  // `datasets create --images 28x28 --classes 10`: the new dataset's id.
  std::string CreateImageDataset(const std::string& extra = "--classes 10") {
    CliRun run = Cli("datasets create --name fashion --images 28x28 " + extra +
                     " --epsilon 10 --json");
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return nlohmann::json::parse(run.out)["dataset_id"].get<std::string>();
  }

  // Uploads `count` good images and returns the dataset's total afterwards:
  // equal to `count` exactly when every refused upload before it stored
  // nothing.
  int64_t TotalAfterGoodUpload(const std::string& dataset, int count) {
    const IdxPair good = MakeImages(count, 28, 10, 99);
    WriteIdx(dir_ / "good-images.idx", {static_cast<uint32_t>(count), 28, 28}, good.pixels);
    WriteIdx(dir_ / "good-labels.idx", {static_cast<uint32_t>(count)}, good.labels);
    CliRun run = Cli("upload --dataset " + dataset +
                     " --idx good-images.idx --labels good-labels.idx --json");
    EXPECT_EQ(run.exit_code, 0) << run.err;
    if (run.exit_code != 0) return -1;
    return nlohmann::json::parse(run.out)["total_rows"].get<int64_t>();
  }

};

TEST_F(ImageCliTest, CreateUploadIdxAndRelease) {
  const std::string dataset = CreateImageDataset();
  const IdxPair images = MakeImages(1500, 28, 10, 1);  // two upload messages
  WriteIdx(dir_ / "images.idx", {1500, 28, 28}, images.pixels);
  WriteIdx(dir_ / "labels.idx", {1500}, images.labels);
  CliRun upload = Cli("upload --dataset " + dataset + " --idx images.idx --labels labels.idx");
  ASSERT_EQ(upload.exit_code, 0) << upload.err;
  EXPECT_NE(upload.out.find("uploaded 1500 images; dataset has 1500 rows"), std::string::npos)
      << upload.out;
  EXPECT_NE(upload.err.find("1500 / 1500 images"), std::string::npos) << upload.err;

  CliRun release = Cli("release --dataset " + dataset +
                           " --kind charfn_embedding --epsilon 1 --num-frequencies 50 "
                           "--out img.release --json",
                       "analyst-token-e2e");
  ASSERT_EQ(release.exit_code, 0) << release.err;
  EXPECT_EQ(nlohmann::json::parse(release.out)["kind"].get<std::string>(), "charfn_embedding");

  // CSV into an image dataset is refused with what to do instead.
  std::ofstream(dir_ / "rows.csv") << "pixels,label\n0.5,3\n";
  CliRun csv = Cli("upload --dataset " + dataset + " --csv rows.csv");
  EXPECT_NE(csv.exit_code, 0);
  EXPECT_NE(csv.err.find("--idx"), std::string::npos) << csv.err;
}

TEST_F(ImageCliTest, MalformedIdxFilesAreRefusedAndStoreNothing) {
  const std::string dataset = CreateImageDataset();
  const IdxPair images = MakeImages(40, 28, 10, 2);
  WriteIdx(dir_ / "labels.idx", {40}, images.labels);
  auto upload = [&](const std::string& images_file, const std::string& labels_file) {
    return Cli("upload --dataset " + dataset + " --idx " + images_file + " --labels " +
               labels_file);
  };

  // Wrong magic: not an IDX file at all.
  std::ofstream(dir_ / "magic.idx", std::ios::binary) << "P5\n28 28\n255\n" << images.pixels;
  CliRun run = upload("magic.idx", "labels.idx");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("magic.idx"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("wrong magic"), std::string::npos) << run.err;

  // 32 x 32 images for a 28 x 28 dataset.
  const IdxPair big = MakeImages(40, 32, 10, 3);
  WriteIdx(dir_ / "big.idx", {40, 32, 32}, big.pixels);
  run = upload("big.idx", "labels.idx");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("big.idx: holds 32 x 32 images; the dataset declares 28 x 28"),
            std::string::npos)
      << run.err;

  // Truncated: the header says 40 images, the file holds 30 and a half.
  WriteIdx(dir_ / "short.idx", {40, 28, 28}, images.pixels.substr(0, 30 * 784 + 392));
  run = upload("short.idx", "labels.idx");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("short.idx"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("30"), std::string::npos) << run.err;  // the record where it stops
  EXPECT_NE(run.err.find("Nothing was uploaded"), std::string::npos) << run.err;

  // A label outside the 10 classes, at record 17.
  WriteIdx(dir_ / "images.idx", {40, 28, 28}, images.pixels);
  std::string bad_labels = images.labels;
  bad_labels[17] = 12;
  WriteIdx(dir_ / "bad-labels.idx", {40}, bad_labels);
  run = upload("images.idx", "bad-labels.idx");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("bad-labels.idx: record 17 (0-based) has label 12, outside the "
                         "dataset's 10 classes"),
            std::string::npos)
      << run.err;

  // 40 images, 39 labels.
  WriteIdx(dir_ / "fewer-labels.idx", {39}, images.labels.substr(0, 39));
  run = upload("images.idx", "fewer-labels.idx");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("images.idx holds 40 images but fewer-labels.idx holds 39 labels"),
            std::string::npos)
      << run.err;

  // Images and labels swapped.
  run = upload("labels.idx", "images.idx");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("is it the labels file?"), std::string::npos) << run.err;

  // None of them stored anything.
  EXPECT_EQ(TotalAfterGoodUpload(dataset, 20), 20);
}

TEST_F(ImageCliTest, PngFolderOfDeclaredClasses) {
  const std::string dataset = CreateImageDataset("--class-names shirt,shoe,bag");
  std::mt19937_64 rng(5);
  auto write_png = [&](const fs::path& path, int side) {
    std::vector<float> pixels(static_cast<size_t>(side) * side);
    for (float& p : pixels) p = static_cast<float>(rng() % 256) / 255.0f;
    ASSERT_TRUE(dpcurator::data::WritePngGrid(path.string(), pixels, side, side, 1).ok());
  };
  for (const char* name : {"shirt", "bag"}) {
    fs::create_directories(dir_ / "pngs" / name);
    for (int i = 0; i < 3; ++i) write_png(dir_ / "pngs" / name / (std::to_string(i) + ".png"), 28);
  }
  // An undeclared class folder is refused before anything is sent.
  fs::create_directories(dir_ / "pngs" / "hat");
  write_png(dir_ / "pngs" / "hat" / "0.png", 28);
  CliRun run = Cli("upload --dataset " + dataset + " --png-folder pngs");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("pngs/hat: the folder name is not a declared class"), std::string::npos)
      << run.err;
  fs::remove_all(dir_ / "pngs" / "hat");
  // A file that is not a PNG (or a truncated one) is named.
  std::ofstream(dir_ / "pngs" / "bag" / "9.png") << "not a png";
  run = Cli("upload --dataset " + dataset + " --png-folder pngs");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("9.png"), std::string::npos) << run.err;
  fs::remove(dir_ / "pngs" / "bag" / "9.png");
  // Images of the wrong size too.
  fs::create_directories(dir_ / "small" / "shoe");
  write_png(dir_ / "small" / "shoe" / "0.png", 14);
  run = Cli("upload --dataset " + dataset + " --png-folder small");
  EXPECT_NE(run.exit_code, 0);
  // Judged by the declared size, the file that differs is named.
  EXPECT_NE(run.err.find("1 of 1 images are not 28 x 28 (the size the dataset declares): "),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("small/shoe/0.png is 14 x 14"), std::string::npos) << run.err;

  run = Cli("upload --dataset " + dataset + " --png-folder pngs --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["total_rows"].get<int64_t>(), 6);
}

TEST_F(ImageCliTest, CreateRefusesBadShapesAndMixedOptions) {
  CliRun run = Cli("datasets create --name x --images 28 --classes 10 --epsilon 1");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("HEIGHTxWIDTH"), std::string::npos) << run.err;
  run = Cli("datasets create --name x --images 5000x28 --classes 10 --epsilon 1");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("[1, 4096]"), std::string::npos) << run.err;
  run = Cli("datasets create --name x --images 28x28 --classes 10 --class-names a,b --epsilon 1");
  EXPECT_NE(run.exit_code, 0);
  run = Cli("datasets create --name x --epsilon 1");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("--images"), std::string::npos) << run.err;

  // A schema file declares the same column with "type": "image".
  std::ofstream(dir_ / "image.schema.json")
      << R"({"columns": [{"name": "pixels", "type": "image", "height": 28, "width": 28},
                         {"name": "label", "type": "categorical",
                          "categories": ["0","1","2","3","4","5","6","7","8","9"]}],
             "label": "label"})";
  run = Cli("schema check --schema image.schema.json");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  run = Cli("datasets create --name from-file --schema image.schema.json --epsilon 5 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string dataset = nlohmann::json::parse(run.out)["dataset_id"].get<std::string>();
  EXPECT_EQ(TotalAfterGoodUpload(dataset, 30), 30);
  // The shape is required, and belongs to image columns only.
  std::ofstream(dir_ / "no-shape.schema.json")
      << R"({"columns": [{"name": "pixels", "type": "IMAGE"}]})";
  run = Cli("schema check --schema no-shape.schema.json");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("needs \"height\" and \"width\""), std::string::npos) << run.err;
  std::ofstream(dir_ / "stray.schema.json")
      << R"({"columns": [{"name": "x", "type": "numeric", "lower": 0, "upper": 1, "height": 3}]})";
  run = Cli("schema check --schema stray.schema.json");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("belong to IMAGE columns only"), std::string::npos) << run.err;
}

// An IDX file's header and byte payload, for checking what `sample --idx`
// wrote without the library under test.
struct IdxRead {
  std::vector<uint32_t> dims;
  std::string data;
};
IdxRead ReadIdxBytes(const fs::path& path) {
  const std::string bytes = ReadAll(path);
  IdxRead read;
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08) return read;
  const int rank = static_cast<unsigned char>(bytes[3]);
  size_t at = 4;
  for (int d = 0; d < rank && at + 4 <= bytes.size(); ++d, at += 4) {
    uint32_t value = 0;
    for (int b = 0; b < 4; ++b) value = value << 8 | static_cast<unsigned char>(bytes[at + b]);
    read.dims.push_back(value);
  }
  read.data = bytes.substr(at);
  return read;
}

// The image trainers through the command line (issue 14 items 2-4): a
// DP-MERF and a PEARL release over the uploaded images, each trained into
// an image model; DP-MERF's minibatch variant from a session's step
// artefacts; `sample` writes a PNG grid (one row per class) and an IDX pair
// with balanced labels; `eval images` judges them against real images.
TEST_F(ImageCliTest, TrainSampleAndJudgeImageModels) {
  const std::string dataset = CreateImageDataset();
  const IdxPair images = MakeImages(1200, 28, 10, 5);
  WriteIdx(dir_ / "images.idx", {1200, 28, 28}, images.pixels);
  WriteIdx(dir_ / "labels.idx", {1200}, images.labels);
  ASSERT_EQ(Cli("upload --dataset " + dataset + " --idx images.idx --labels labels.idx").exit_code,
            0);
  const std::string analyst = "analyst-token-e2e";
  for (const std::string kind : {"rff_embedding", "charfn_embedding"}) {
    CliRun release = Cli("release --dataset " + dataset + " --kind " + kind +
                             " --epsilon 1 --num-frequencies 50 --out " + kind + ".release",
                         analyst);
    ASSERT_EQ(release.exit_code, 0) << release.err;
  }
  CliRun merf = Cli("train merf --release rff_embedding.release --out merf.pb --steps 12 "
                    "--batch-size 40 --generator fc --quiet");
  ASSERT_EQ(merf.exit_code, 0) << merf.err;
  EXPECT_NE(merf.out.find("image model written to merf.pb"), std::string::npos) << merf.out;
  CliRun pearl = Cli("train pearl --release charfn_embedding.release --out pearl.pb --steps 12 "
                     "--batch-size 40 --quiet");
  ASSERT_EQ(pearl.exit_code, 0) << pearl.err;
  // Table-generator flags are refused for images, naming the image flag.
  CliRun hidden = Cli("train merf --release rff_embedding.release --out x.pb --hidden 64,64");
  EXPECT_NE(hidden.exit_code, 0);
  EXPECT_NE(hidden.err.find("--generator"), std::string::npos) << hidden.err;

  // The minibatch variant: a session's steps, then offline training.
  CliRun open = Cli("session open --dataset " + dataset +
                        " --steps 4 --sampling-rate 0.1 --epsilon 1 --num-frequencies 50 --json",
                    analyst);
  ASSERT_EQ(open.exit_code, 0) << open.err;
  const std::string session = nlohmann::json::parse(open.out)["session_id"].get<std::string>();
  ASSERT_EQ(Cli("session step --session " + session + " --count 4 --out steps.bin --quiet",
                analyst)
                .exit_code,
            0);
  CliRun steps = Cli("train merf --session-steps steps.bin --out steps.pb --steps 6 "
                     "--batch-size 40 --generator fc --quiet");
  ASSERT_EQ(steps.exit_code, 0) << steps.err;
  EXPECT_NE(steps.out.find("its privacy is the session's"), std::string::npos) << steps.out;

  for (const std::string model : {"merf.pb", "pearl.pb", "steps.pb"}) {
    // An image model writes images only, and says how.
    CliRun csv = Cli("sample --model " + model + " --out rows.csv");
    EXPECT_NE(csv.exit_code, 0);
    EXPECT_NE(csv.err.find("--png"), std::string::npos) << csv.err;

    CliRun sample = Cli("sample --model " + model + " --png grid.png --grid-per-class 4 " +
                        "--idx synthetic --rows 200");
    ASSERT_EQ(sample.exit_code, 0) << model << ": " << sample.err;
    // PNG: 4 images of 28 pixels across, 10 class rows of 28 down (IHDR
    // width and height, big-endian, at bytes 16-23).
    const std::string png = ReadAll(dir_ / "grid.png");
    ASSERT_GT(png.size(), 24u);
    auto be32 = [&](size_t at) {
      uint32_t value = 0;
      for (int b = 0; b < 4; ++b) value = value << 8 | static_cast<unsigned char>(png[at + b]);
      return value;
    };
    EXPECT_EQ(be32(16), 4u * 28);
    EXPECT_EQ(be32(20), 10u * 28);
    const IdxRead pixels = ReadIdxBytes(dir_ / "synthetic-images-idx3-ubyte");
    const IdxRead labels = ReadIdxBytes(dir_ / "synthetic-labels-idx1-ubyte");
    ASSERT_EQ(pixels.dims, (std::vector<uint32_t>{200, 28, 28}));
    ASSERT_EQ(labels.dims, (std::vector<uint32_t>{200}));
    ASSERT_EQ(pixels.data.size(), 200u * 784);
    std::vector<int> per_class(10, 0);
    for (char label : labels.data) ++per_class[static_cast<unsigned char>(label) % 10];
    EXPECT_EQ(per_class, std::vector<int>(10, 20)) << model;
  }

  CliRun judged = Cli("eval images --synthetic synthetic --real-images images.idx "
                      "--real-labels labels.idx --seeds 1 --resize 0 --json");
  ASSERT_EQ(judged.exit_code, 0) << judged.err;
  const auto report = nlohmann::json::parse(judged.out);
  EXPECT_EQ(report["synthetic_images"].get<int>(), 200);
  EXPECT_EQ(report["real_test_images"].get<int>(), 1200);
  const double accuracy = report["cnn_mean"].get<double>();
  EXPECT_GE(accuracy, 0.0);
  EXPECT_LE(accuracy, 1.0);
  EXPECT_TRUE(report.contains("logistic_regression_accuracy"));
}

// Local DP on images through the command line (issue 14 item 5): an image
// collection, a device submitting only its class-2 images (in [-1, 1],
// projected and noised on the device), the reports trained into a bounded
// Sinkhorn generator, sampled to a PNG grid and an IDX pair labelled 2.
TEST_F(ImageCliTest, LocalDpImageCollectionToSamples) {
  CliRun create = Cli("collections create --name class2 --images 8x8 --mechanism gaussian-l2 "
                      "--epsilon 30 --delta 1e-4 --radius 4 --json");
  ASSERT_EQ(create.exit_code, 0) << create.err;
  const auto collection = nlohmann::json::parse(create.out);
  EXPECT_EQ(collection["dimension"].get<int>(), 64);
  const std::string id = collection["collection_id"].get<std::string>();

  const IdxPair images = MakeImages(300, 8, 4, 11);
  WriteIdx(dir_ / "mine.idx", {300, 8, 8}, images.pixels);
  WriteIdx(dir_ / "mine-labels.idx", {300}, images.labels);
  int class2 = 0;
  for (char label : images.labels) class2 += label == 2;
  ASSERT_GT(class2, 20);
  const std::string device = "device-token-e2e";
  // The device's own ceiling refuses epsilon 30 unless raised; nothing sent.
  CliRun refused = Cli("device submit --collection " + id +
                           " --idx mine.idx --labels mine-labels.idx --class 2",
                       device);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("--max-epsilon"), std::string::npos) << refused.err;
  // --class needs the labels that pick the images.
  CliRun unlabelled = Cli("device submit --collection " + id + " --idx mine.idx --class 2 " +
                              "--max-epsilon 30 --max-delta 1e-4",
                          device);
  EXPECT_NE(unlabelled.exit_code, 0);
  EXPECT_NE(unlabelled.err.find("--labels"), std::string::npos) << unlabelled.err;
  CliRun submit = Cli("device submit --collection " + id +
                          " --idx mine.idx --labels mine-labels.idx --class 2 "
                          "--max-epsilon 30 --max-delta 1e-4",
                      device);
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  EXPECT_NE(submit.out.find("accepted " + std::to_string(class2) + ","), std::string::npos)
      << submit.out;

  ASSERT_EQ(Cli("collections download --collection " + id + " --out reports.pb",
                "analyst-token-e2e")
                .exit_code,
            0);
  CliRun train = Cli("train sinkhorn --reports reports.pb --out ldp.pb --steps 5 --batch-size 16 "
                     "--quiet");
  ASSERT_EQ(train.exit_code, 0) << train.err;
  CliRun sample = Cli("sample --model ldp.pb --png ldp.png --grid-per-class 2 --idx ldp "
                      "--label 2 --rows 30");
  ASSERT_EQ(sample.exit_code, 0) << sample.err;
  const IdxRead pixels = ReadIdxBytes(dir_ / "ldp-images-idx3-ubyte");
  const IdxRead labels = ReadIdxBytes(dir_ / "ldp-labels-idx1-ubyte");
  ASSERT_EQ(pixels.dims, (std::vector<uint32_t>{30, 8, 8}));
  ASSERT_EQ(labels.dims, (std::vector<uint32_t>{30}));
  EXPECT_EQ(labels.data, std::string(30, '\x02'));
  // 2 x 10 images, 10 a row, 8 pixels each way.
  const std::string png = ReadAll(dir_ / "ldp.png");
  ASSERT_GT(png.size(), 24u);
  auto be32 = [&](size_t at) {
    uint32_t value = 0;
    for (int b = 0; b < 4; ++b) value = value << 8 | static_cast<unsigned char>(png[at + b]);
    return value;
  };
  EXPECT_EQ(be32(16), 10u * 8);
  EXPECT_EQ(be32(20), 2u * 8);
}

}  // namespace
}  // namespace dpcurator
