#include "core/data/idx.h"

#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpcurator::data {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> IdxBytes(uint8_t type, const std::vector<uint32_t>& dims,
                              const std::vector<uint8_t>& data) {
  std::vector<uint8_t> bytes = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (const uint32_t dim : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back((dim >> shift) & 0xff);
  }
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

enum class Compression { kPlain, kGzip };

// Writes `bytes` to a fresh file under the test temp dir, gzipped through
// zlib's gzopen when asked (as Debian ships the IDX files).
std::string WriteFile(const std::string& name, const std::vector<uint8_t>& bytes,
                      Compression compression) {
  // Named after the running test too: ctest runs tests in parallel.
  std::string test = testing::UnitTest::GetInstance()->current_test_info()->name();
  std::replace(test.begin(), test.end(), '/', '_');
  const std::string path = absl::StrCat(testing::TempDir(), "/idx_test_", test, "_", name,
                                        compression == Compression::kGzip ? ".gz" : "");
  if (compression == Compression::kGzip) {
    gzFile file = gzopen(path.c_str(), "wb");
    EXPECT_NE(file, nullptr) << path;
    if (!bytes.empty()) {
      EXPECT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
                static_cast<int>(bytes.size()));
    }
    EXPECT_EQ(gzclose(file), Z_OK);
  } else {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << path;
  }
  return path;
}

// Three 2 x 3 images whose bytes cover 0 and 255, and their labels.
constexpr int kImages = 3;
constexpr int kHeight = 2;
constexpr int kWidth = 3;
std::vector<uint8_t> PixelBytes() {
  return {0, 1, 2, 3, 4, 255, 10, 20, 30, 40, 50, 60, 128, 127, 200, 100, 99, 254};
}
std::vector<uint8_t> ImageFile() {
  return IdxBytes(0x08, {kImages, kHeight, kWidth}, PixelBytes());
}
std::vector<uint8_t> LabelFile() { return IdxBytes(0x08, {kImages}, {0, 9, 4}); }

class IdxTest : public testing::TestWithParam<Compression> {
 protected:
  std::string Write(const std::string& name, const std::vector<uint8_t>& bytes) {
    return WriteFile(name, bytes, GetParam());
  }
};

INSTANTIATE_TEST_SUITE_P(PlainAndGzip, IdxTest,
                         testing::Values(Compression::kPlain, Compression::kGzip),
                         [](const auto& info) {
                           return info.param == Compression::kGzip ? std::string("Gzip")
                                                                   : std::string("Plain");
                         });

TEST_P(IdxTest, DecodesPixelsAndLabels) {
  const std::string images = Write("images", ImageFile());
  const std::string labels = Write("labels", LabelFile());
  auto set = ReadIdxImages(images, labels);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->height, kHeight);
  EXPECT_EQ(set->width, kWidth);
  EXPECT_EQ(set->num_classes, 10);
  EXPECT_EQ(set->labels, (std::vector<int>{0, 9, 4}));
  const std::vector<uint8_t> bytes = PixelBytes();
  ASSERT_EQ(set->pixels.size(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    EXPECT_FLOAT_EQ(set->pixels[i], bytes[i] / 255.0f) << "pixel " << i;
  }
  EXPECT_EQ(set->pixels[0], 0.0f);
  EXPECT_EQ(set->pixels[5], 1.0f);
}

TEST_P(IdxTest, MaxRecordsReadsTheFirstRecords) {
  const std::string images = Write("images", ImageFile());
  const std::string labels = Write("labels", LabelFile());
  auto set = ReadIdxImages(images, labels, {.max_records = 2});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->labels, (std::vector<int>{0, 9}));
  EXPECT_EQ(set->pixels.size(), 2u * kHeight * kWidth);
  EXPECT_FLOAT_EQ(set->pixels.back(), 60 / 255.0f);
}

TEST_P(IdxTest, ReaderStreamsInBlocks) {
  auto reader = IdxReader::Open(Write("images", ImageFile()));
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->dims(), (std::vector<int64_t>{kImages, kHeight, kWidth}));
  EXPECT_EQ(reader->num_records(), kImages);
  EXPECT_EQ(reader->record_size(), kHeight * kWidth);
  const std::vector<uint8_t> bytes = PixelBytes();
  std::vector<uint8_t> block;
  auto got = reader->Read(2, &block);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, 2);
  EXPECT_EQ(block, std::vector<uint8_t>(bytes.begin(), bytes.begin() + 12));
  got = reader->Read(2, &block);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, 1);
  EXPECT_EQ(block, std::vector<uint8_t>(bytes.begin() + 12, bytes.end()));
  got = reader->Read(2, &block);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, 0);
  EXPECT_TRUE(block.empty());
}

TEST_P(IdxTest, GzipAndPlainGiveTheSameSet) {
  std::vector<uint8_t> pixels(50 * 4 * 5);
  std::iota(pixels.begin(), pixels.end(), 0);  // wraps at 256
  std::vector<uint8_t> labels(50);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = (i * 7) % 10;
  const auto image_bytes = IdxBytes(0x08, {50, 4, 5}, pixels);
  const auto label_bytes = IdxBytes(0x08, {50}, labels);
  auto plain = ReadIdxImages(WriteFile("same_i", image_bytes, Compression::kPlain),
                             WriteFile("same_l", label_bytes, Compression::kPlain));
  auto gzip = ReadIdxImages(WriteFile("same_i", image_bytes, Compression::kGzip),
                            WriteFile("same_l", label_bytes, Compression::kGzip));
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(gzip.ok()) << gzip.status();
  EXPECT_EQ(plain->pixels, gzip->pixels);
  EXPECT_EQ(plain->labels, gzip->labels);
  EXPECT_EQ(plain->labels[3], 1);
  EXPECT_EQ(plain->height, 4);
  EXPECT_EQ(plain->width, 5);
}

void ExpectInvalid(const absl::Status& status, const std::string& path,
                   const std::string& fragment) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), HasSubstr(fragment));
}

TEST_P(IdxTest, WrongMagicIsRefused) {
  std::vector<uint8_t> bytes = ImageFile();
  bytes[0] = 0x1f;
  const std::string images = Write("images", bytes);
  ExpectInvalid(ReadIdxImages(images, Write("labels", LabelFile())).status(), images,
                "wrong magic 0x1f000803");
  bytes = ImageFile();
  bytes[2] = 0x07;
  const std::string unknown = Write("unknown_type", bytes);
  ExpectInvalid(IdxReader::Open(unknown).status(), unknown, "unknown IDX element type 0x07");
}

TEST_P(IdxTest, OtherElementTypesAreRefusedByName) {
  const std::string path = Write("floats", IdxBytes(0x0D, {1, 1}, {0, 0, 0, 0}));
  ExpectInvalid(IdxReader::Open(path).status(), path,
                "unsupported IDX element type 0x0d (float32): only 0x08 (unsigned byte)");
}

TEST_P(IdxTest, WrongNumberOfDimensionsIsRefused) {
  const std::string labels = Write("labels", LabelFile());
  const std::string flat = Write("flat_images", IdxBytes(0x08, {kImages, 6}, PixelBytes()));
  ExpectInvalid(ReadIdxImages(flat, labels).status(), flat, "this one has 2");
  const std::string images = Write("images", ImageFile());
  const std::string wide = Write("wide_labels", IdxBytes(0x08, {kImages, 1}, {0, 1, 2}));
  ExpectInvalid(ReadIdxImages(images, wide).status(), wide, "a label file has 1 dimension");
  const std::string none = Write("no_dims", IdxBytes(0x08, {}, {}));
  ExpectInvalid(IdxReader::Open(none).status(), none, "0 dimensions");
  const std::string zero = Write("zero_dim", IdxBytes(0x08, {2, 0, 3}, {}));
  ExpectInvalid(IdxReader::Open(zero).status(), zero, "dimension 1 of the header is 0");
}

TEST_P(IdxTest, CountMismatchNamesBothFiles) {
  const std::string images = Write("images", ImageFile());
  const std::string labels = Write("two_labels", IdxBytes(0x08, {2}, {0, 1}));
  const absl::Status status = ReadIdxImages(images, labels).status();
  ExpectInvalid(status, images, "declares 3 images");
  EXPECT_THAT(std::string(status.message()), HasSubstr(labels + " declares 2 labels"));
}

TEST_P(IdxTest, LabelOutOfRangeNamesTheRecordAndTheRange) {
  const std::string images = Write("images", ImageFile());
  const std::string labels = Write("bad_labels", IdxBytes(0x08, {kImages}, {0, 1, 10}));
  ExpectInvalid(ReadIdxImages(images, labels).status(), labels,
                "label 10 of record 2 is outside the allowed range [0, 10)");
  const std::string good = Write("labels", LabelFile());
  ExpectInvalid(ReadIdxImages(images, good, {.num_classes = 5}).status(), good,
                "label 9 of record 1 is outside the allowed range [0, 5)");
  EXPECT_EQ(ReadIdxImages(images, good, {.num_classes = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(IdxTest, TruncatedHeaderGivesTheOffset) {
  const std::vector<uint8_t> bytes = ImageFile();  // header: 4 + 3 * 4 = 16 bytes
  const std::string labels = Write("labels", LabelFile());
  struct Cut {
    size_t size;
    std::string fragment;
  };
  for (const Cut& cut : {Cut{0, "the file has 0 bytes"}, Cut{3, "the file has 3 bytes"},
                         Cut{4, "ends at byte offset 4"}, Cut{9, "ends at byte offset 9"},
                         Cut{15, "ends at byte offset 15"}}) {
    SCOPED_TRACE(cut.size);
    const std::string path = Write(absl::StrCat("header_cut_", cut.size),
                                   std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut.size));
    const absl::Status status = ReadIdxImages(path, labels).status();
    ExpectInvalid(status, path, "truncated header");
    EXPECT_THAT(std::string(status.message()), HasSubstr(cut.fragment));
  }
}

TEST_P(IdxTest, TruncatedDataGivesTheRecordWhereItEnds) {
  const std::vector<uint8_t> bytes = ImageFile();  // 16-byte header, 6-byte records
  const std::string labels = Write("labels", LabelFile());
  struct Cut {
    size_t size;
    std::string fragment;
  };
  for (const Cut& cut : {Cut{16, "byte offset 16, inside record 0 of the 3"},
                         Cut{17, "byte offset 17, inside record 0 of the 3"},
                         Cut{22, "byte offset 22, inside record 1 of the 3"},
                         Cut{31, "byte offset 31, inside record 2 of the 3"},
                         Cut{33, "byte offset 33, inside record 2 of the 3"}}) {
    SCOPED_TRACE(cut.size);
    const std::string path = Write(absl::StrCat("data_cut_", cut.size),
                                   std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut.size));
    const absl::Status status = ReadIdxImages(path, labels).status();
    ExpectInvalid(status, path, "truncated");
    EXPECT_THAT(std::string(status.message()), HasSubstr(cut.fragment));
  }
  std::vector<uint8_t> label_bytes = LabelFile();
  label_bytes.pop_back();
  const std::string short_labels = Write("short_labels", label_bytes);
  ExpectInvalid(ReadIdxImages(Write("images", ImageFile()), short_labels).status(), short_labels,
                "byte offset 10, inside record 2 of the 3");
}

TEST_P(IdxTest, TrailingDataIsRefused) {
  std::vector<uint8_t> bytes = ImageFile();
  bytes.push_back(7);
  const std::string path = Write("trailing", bytes);
  ExpectInvalid(ReadIdxImages(path, Write("labels", LabelFile())).status(), path,
                "trailing data at byte offset 34, after the 3 records");
}

TEST(IdxFileTest, MissingFileIsNotFound) {
  const std::string path = testing::TempDir() + "/idx_test_no_such_file";
  const absl::Status status = IdxReader::Open(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
}

TEST(IdxFileTest, CutGzipStreamIsRefusedWithTheFile) {
  std::vector<uint8_t> pixels(200 * 28 * 28);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = (i * 2654435761u) >> 24;  // incompressible
  const std::string full = WriteFile("gz_full", IdxBytes(0x08, {200, 28, 28}, pixels),
                                     Compression::kGzip);
  std::ifstream in(full, std::ios::binary);
  std::vector<char> gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(gz.size(), 1000u);
  const std::string cut = full + ".cut.gz";
  std::ofstream out(cut, std::ios::binary | std::ios::trunc);
  out.write(gz.data(), static_cast<std::streamsize>(gz.size() / 2));
  out.close();
  auto reader = IdxReader::Open(cut);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<uint8_t> block;
  auto got = reader->Read(200, &block);
  ASSERT_FALSE(got.ok());
  ExpectInvalid(got.status(), cut, "");
  EXPECT_TRUE(block.empty());
}

// The real Fashion-MNIST test set from Debian's dataset-fashion-mnist, which
// scripts/dev.sh installs: fail (never skip) when it is missing.
TEST(IdxFileTest, ReadsFashionMnistTestSet) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  const std::string images = dir + "/t10k-images-idx3-ubyte.gz";
  const std::string labels = dir + "/t10k-labels-idx1-ubyte.gz";
  ASSERT_TRUE(std::filesystem::exists(images) && std::filesystem::exists(labels))
      << images << " or " << labels
      << " is missing: run scripts/dev.sh, which installs the Debian package "
         "dataset-fashion-mnist";
  auto set = ReadIdxImages(images, labels);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->size(), 10000);
  EXPECT_EQ(set->height, 28);
  EXPECT_EQ(set->width, 28);
  ASSERT_EQ(set->pixels.size(), 10000u * 28 * 28);
  std::vector<int> per_class(10, 0);
  for (const int label : set->labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++per_class[label];
  }
  // The test set is balanced: 1000 images of each class.
  EXPECT_EQ(per_class, std::vector<int>(10, 1000));
  double sum = 0;
  for (const float pixel : set->pixels) {
    ASSERT_GE(pixel, 0.0f);
    ASSERT_LE(pixel, 1.0f);
    sum += pixel;
  }
  const double mean = sum / static_cast<double>(set->pixels.size());
  EXPECT_GT(mean, 0.25);
  EXPECT_LT(mean, 0.32);
}

// WriteIdxImages (what `dpcurator sample --idx` writes) reads back through
// the reader: levels round(255 v) of clamped pixels, labels, shape.
TEST(IdxWriteTest, WrittenImagesReadBack) {
  ImageSet set;
  set.height = 3;
  set.width = 2;
  set.num_classes = 4;
  set.pixels = {0.0f, 1.0f, 0.5f, -0.25f, 1.5f, 0.2f,   // clamped to [0, 1]
                0.1f, 0.9f, 0.3f, 0.7f, 0.004f, 0.996f};
  set.labels = {3, 0};
  const std::string images = absl::StrCat(testing::TempDir(), "/idx_write_images");
  const std::string labels = absl::StrCat(testing::TempDir(), "/idx_write_labels");
  ASSERT_TRUE(WriteIdxImages(images, labels, set).ok());
  IdxImageOptions options;
  options.num_classes = 4;
  auto read = ReadIdxImages(images, labels, options);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->height, 3);
  EXPECT_EQ(read->width, 2);
  EXPECT_EQ(read->labels, set.labels);
  ASSERT_EQ(read->pixels.size(), set.pixels.size());
  for (size_t i = 0; i < set.pixels.size(); ++i) {
    const float expected = std::round(255.0f * std::clamp(set.pixels[i], 0.0f, 1.0f)) / 255.0f;
    EXPECT_FLOAT_EQ(read->pixels[i], expected) << "pixel " << i;
  }
}

TEST(IdxWriteTest, MismatchedSizesAndNanAreRefusedAndWriteNothing) {
  const std::string path = absl::StrCat(testing::TempDir(), "/idx_write_bad");
  std::remove(path.c_str());
  const std::vector<uint8_t> five(5, 1);
  EXPECT_EQ(WriteIdx(path, {2, 2}, five).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteIdx(path, {}, five).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::fopen(path.c_str(), "rb"), nullptr);
  ImageSet set;
  set.height = set.width = 1;
  set.pixels = {std::nanf("")};
  set.labels = {0};
  EXPECT_EQ(WriteIdxImages(path, path + "_labels", set).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::fopen(path.c_str(), "rb"), nullptr);
}

}  // namespace
}  // namespace dpcurator::data
