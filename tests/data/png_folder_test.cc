#include "core/data/png_folder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpcurator::data {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// A fresh folder per test (ctest runs tests in parallel).
std::string TestDir() {
  const std::string dir = absl::StrCat(
      testing::TempDir(), "/png_test_",
      testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Writes a PNG with libpng's simplified API in any of its formats (grey,
// grey + alpha, RGB, 16-bit, colour-mapped), so the reader's conversions
// are tested on files libpng itself wrote.
void WritePng(const std::string& path, png_uint_32 format, int width, int height,
              const void* buffer, const void* colormap = nullptr, int colormap_entries = 0) {
  fs::create_directories(fs::path(path).parent_path());
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = width;
  image.height = height;
  image.format = format;
  image.colormap_entries = colormap_entries;
  ASSERT_NE(png_image_write_to_file(&image, path.c_str(), 0, buffer, 0, colormap), 0)
      << path << ": " << image.message;
}

void WriteGrey(const std::string& path, int width, int height, const std::vector<uint8_t>& px) {
  ASSERT_EQ(px.size(), static_cast<size_t>(width * height));
  WritePng(path, PNG_FORMAT_GRAY, width, height, px.data());
}

std::vector<char> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void ExpectInvalid(const absl::Status& status, const std::string& path,
                   const std::string& fragment) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), HasSubstr(fragment));
}

TEST(PngFolderTest, ClassesAreSortedSubFoldersAndLabelsTheirIndices) {
  const std::string root = TestDir();
  // Written out of order: classes and files are read sorted by name.
  WriteGrey(root + "/shirt/b.png", 3, 2, {1, 2, 3, 4, 5, 6});
  WriteGrey(root + "/shirt/a.png", 3, 2, {0, 0, 0, 255, 255, 255});
  WriteGrey(root + "/bag/x.PNG", 3, 2, {10, 20, 30, 40, 50, 60});
  WriteGrey(root + "/boot/y.png", 3, 2, {7, 7, 7, 7, 7, 7});
  // Skipped: hidden entries, non-PNG names, files in the root.
  WriteGrey(root + "/.hidden/z.png", 2, 2, {0, 0, 0, 0});
  WriteGrey(root + "/boot/.z.png", 2, 2, {0, 0, 0, 0});
  WriteBytes(root + "/boot/notes.txt", {'h', 'i'});
  WriteBytes(root + "/README", {'h', 'i'});

  auto set = ReadPngFolder(root);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->class_names, (std::vector<std::string>{"bag", "boot", "shirt"}));
  EXPECT_EQ(set->num_classes, 3);
  EXPECT_EQ(set->labels, (std::vector<int>{0, 1, 2, 2}));
  EXPECT_EQ(set->height, 2);
  EXPECT_EQ(set->width, 3);
  const std::vector<int> bytes = {10, 20, 30, 40, 50, 60, 7, 7,   7,   7,   7,   7,
                                  0,  0,  0,  255, 255, 255, 1, 2, 3, 4, 5, 6};
  ASSERT_EQ(set->pixels.size(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    EXPECT_FLOAT_EQ(set->pixels[i], bytes[i] / 255.0f) << "pixel " << i;
  }
}

TEST(PngFolderTest, ColourPaletteAlphaAnd16BitBecome8BitGrey) {
  const std::string dir = TestDir();
  const std::vector<uint8_t> grey = {0, 64, 128, 255};
  // RGB with equal channels keeps the grey level; pure red, green and blue
  // get libpng's default weights (0.2126, 0.7152, 0.0722), applied in linear
  // light since the simplified writer tags the file sRGB (gamma 1/2.2).
  const std::vector<uint8_t> rgb = {0, 0, 0, 64, 64, 64, 128, 128, 128, 255, 255, 255};
  WritePng(dir + "/rgb.png", PNG_FORMAT_RGB, 2, 2, rgb.data());
  const std::vector<uint8_t> primaries = {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255};
  WritePng(dir + "/primaries.png", PNG_FORMAT_RGB, 2, 2, primaries.data());
  const std::vector<uint8_t> grey_alpha = {0, 255, 64, 0, 128, 17, 255, 255};
  WritePng(dir + "/grey_alpha.png", PNG_FORMAT_GA, 2, 2, grey_alpha.data());
  std::vector<uint16_t> wide;
  for (const uint8_t v : grey) wide.push_back(static_cast<uint16_t>(v * 257));
  WritePng(dir + "/sixteen.png", PNG_FORMAT_LINEAR_Y, 2, 2, wide.data());
  const std::vector<uint8_t> colormap = {0, 0, 0, 64, 64, 64, 128, 128, 128, 255, 255, 255};
  const std::vector<uint8_t> indices = {0, 1, 2, 3};
  WritePng(dir + "/palette.png", PNG_FORMAT_RGB_COLORMAP, 2, 2, indices.data(), colormap.data(),
           4);

  for (const char* name : {"rgb.png", "grey_alpha.png", "sixteen.png", "palette.png"}) {
    SCOPED_TRACE(name);
    auto image = ReadGreyPng(dir + "/" + name);
    ASSERT_TRUE(image.ok()) << image.status();
    EXPECT_EQ(image->height, 2);
    EXPECT_EQ(image->width, 2);
    EXPECT_EQ(image->pixels, grey);
  }
  auto image = ReadGreyPng(dir + "/primaries.png");
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_EQ(image->pixels.size(), 4u);
  EXPECT_NEAR(image->pixels[0], 255 * std::pow(0.2126, 1 / 2.2), 2.0);  // 126
  EXPECT_NEAR(image->pixels[1], 255 * std::pow(0.7152, 1 / 2.2), 2.0);  // 219
  EXPECT_NEAR(image->pixels[2], 255 * std::pow(0.0722, 1 / 2.2), 2.0);  // 77
  EXPECT_EQ(image->pixels[3], 255);
}

TEST(PngFolderTest, SizeMismatchNamesTheFile) {
  const std::string root = TestDir();
  WriteGrey(root + "/a/1.png", 2, 2, {0, 0, 0, 0});
  WriteGrey(root + "/a/2.png", 2, 2, {0, 0, 0, 0});
  WriteGrey(root + "/b/3.png", 3, 2, {0, 0, 0, 0, 0, 0});
  ExpectInvalid(ReadPngFolder(root).status(), root + "/b/3.png is 3 x 2",
                "1 of 3 images are not 2 x 2 (the size most have)");
}

// Issue 25: the odd image out is blamed even when it is read first (the
// reader blamed every later image against the first), and a declared size
// is the one every image is judged by.
TEST(PngFolderTest, SizeMismatchBlamesTheOddImageOutNotTheFirstRead) {
  const std::string root = TestDir();
  WriteGrey(root + "/a/0.png", 3, 2, {0, 0, 0, 0, 0, 0});
  WriteGrey(root + "/a/1.png", 2, 2, {0, 0, 0, 0});
  WriteGrey(root + "/b/2.png", 2, 2, {0, 0, 0, 0});
  const absl::Status status = ReadPngFolder(root).status();
  ExpectInvalid(status, root + "/a/0.png is 3 x 2", "1 of 3 images are not 2 x 2");
  EXPECT_THAT(std::string(status.message()), Not(HasSubstr("1.png")));
  const absl::Status declared = ReadPngFolder(root, std::make_pair(2, 3)).status();
  ExpectInvalid(declared, root + "/a/1.png is 2 x 2",
                "2 of 3 images are not 3 x 2 (the size the dataset declares)");
}

TEST(PngFolderTest, NotAPngNamesTheFile) {
  const std::string root = TestDir();
  WriteGrey(root + "/a/1.png", 2, 2, {0, 0, 0, 0});
  fs::create_directories(root + "/b");
  WriteBytes(root + "/b/fake.png", {'G', 'I', 'F', '8', '9', 'a', 0, 0, 0, 0});
  ExpectInvalid(ReadPngFolder(root).status(), root + "/b/fake.png", "not a PNG file");
  WriteBytes(root + "/b/fake.png", {});
  ExpectInvalid(ReadPngFolder(root).status(), root + "/b/fake.png", "not a PNG file");
}

// Truncated and corrupt files make libpng call its error function, which
// longjmps: the reader must come back with an error, not crash or leak.
TEST(PngFolderTest, TruncatedAndCorruptPngsAreRefused) {
  const std::string dir = TestDir();
  std::vector<uint8_t> pixels(32 * 32);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = (i * 2654435761u) >> 24;
  WriteGrey(dir + "/full.png", 32, 32, pixels);
  const std::vector<char> bytes = ReadBytes(dir + "/full.png");
  ASSERT_GT(bytes.size(), 200u);
  for (const size_t size : {size_t{12}, size_t{40}, bytes.size() / 2, bytes.size() - 13}) {
    SCOPED_TRACE(size);
    const std::string path = absl::StrCat(dir, "/cut_", size, ".png");
    WriteBytes(path, std::vector<char>(bytes.begin(), bytes.begin() + size));
    ExpectInvalid(ReadGreyPng(path).status(), path, "not a readable PNG");
  }
  std::vector<char> corrupt = bytes;
  corrupt[bytes.size() / 2] ^= 0x55;  // inside the image data: its CRC fails
  const std::string path = dir + "/corrupt.png";
  WriteBytes(path, corrupt);
  ExpectInvalid(ReadGreyPng(path).status(), path, "not a readable PNG");
}

TEST(PngFolderTest, EmptyAndMissingFoldersAreRefused) {
  const std::string root = TestDir();
  ExpectInvalid(ReadPngFolder(root).status(), root, "no class sub-folders");
  fs::create_directories(root + "/empty");
  WriteBytes(root + "/empty/notes.txt", {'x'});
  ExpectInvalid(ReadPngFolder(root).status(), root + "/empty", "class folder with no .png file");
  const absl::Status missing = ReadPngFolder(root + "/no_such_folder").status();
  ExpectInvalid(missing, root + "/no_such_folder", "cannot list the folder");
  const absl::Status no_file = ReadGreyPng(root + "/no_such.png").status();
  EXPECT_EQ(no_file.code(), absl::StatusCode::kNotFound) << no_file;
}

TEST(PngGridTest, RoundTripsThroughTheReader) {
  const std::string dir = TestDir();
  constexpr int kHeight = 3;
  constexpr int kWidth = 2;
  constexpr int kImages = 5;
  constexpr int kColumns = 2;
  std::vector<float> pixels(kImages * kHeight * kWidth);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i) / 29.0f;
  pixels[0] = -0.5f;  // clamped to 0
  pixels[1] = 1.5f;   // clamped to 1
  const std::string path = dir + "/grid.png";
  ASSERT_TRUE(WritePngGrid(path, pixels, kHeight, kWidth, kColumns).ok());
  auto grid = ReadGreyPng(path);
  ASSERT_TRUE(grid.ok()) << grid.status();
  ASSERT_EQ(grid->height, 3 * kHeight);  // 5 images in rows of 2
  ASSERT_EQ(grid->width, kColumns * kWidth);
  for (int i = 0; i < 6; ++i) {  // the sixth cell is empty: black
    for (int y = 0; y < kHeight; ++y) {
      for (int x = 0; x < kWidth; ++x) {
        const int grid_y = (i / kColumns) * kHeight + y;
        const int grid_x = (i % kColumns) * kWidth + x;
        int expected = 0;
        if (i < kImages) {
          const float v = std::clamp(pixels[(i * kHeight + y) * kWidth + x], 0.0f, 1.0f);
          expected = static_cast<int>(std::lround(255.0f * v));
        }
        EXPECT_EQ(grid->pixels[grid_y * grid->width + grid_x], expected)
            << "image " << i << " (" << y << ", " << x << ")";
      }
    }
  }
  EXPECT_EQ(grid->pixels[0], 0);
  EXPECT_EQ(grid->pixels[1], 255);
}

TEST(PngGridTest, BadArgumentsAreRefused) {
  const std::string path = TestDir() + "/grid.png";
  std::vector<float> pixels(12, 0.5f);
  ExpectInvalid(WritePngGrid(path, pixels, 5, 2, 1), path, "not a whole, non-zero number");
  ExpectInvalid(WritePngGrid(path, {}, 2, 2, 1), path, "not a whole, non-zero number");
  ExpectInvalid(WritePngGrid(path, pixels, 2, 2, 0), path, "columns >= 1");
  pixels[7] = std::numeric_limits<float>::quiet_NaN();
  ExpectInvalid(WritePngGrid(path, pixels, 2, 2, 3), path, "pixel (1, 1) of image 1 is NaN");
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace dpcurator::data
