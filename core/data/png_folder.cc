#include "core/data/png_folder.h"

#include <png.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"

namespace dpcurator::data {
namespace {

constexpr size_t kPngSignatureBytes = 8;

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

absl::Status OpenError(const std::string& path, int error) {
  const std::string message = absl::StrCat(path, ": cannot open: ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  if (error == EACCES) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

// libpng reports errors by calling the error function, which must not
// return. Ours copies the message into a plain buffer and longjmps back to
// the setjmp of ReadPngHeader or ReadPngRows below. Those are kept C-style
// (only trivially destructible locals, no C++ object alive across a libpng
// call), so the longjmp skips nothing but libpng's own C frames (libpng
// manual, "Setting up error handling"); every C++ object (the FILE, the
// libpng structs, the pixel buffer) lives in the caller's frame and is
// released normally.
struct PngErrorContext {
  char message[256];
};

void OnPngError(png_structp png, png_const_charp message) {
  auto* context = static_cast<PngErrorContext*>(png_get_error_ptr(png));
  std::snprintf(context->message, sizeof(context->message), "%s", message);
  png_longjmp(png, 1);
}

// Warnings (an sRGB profile libpng finds odd, an unknown chunk) do not stop
// a read; the image is decoded all the same.
void OnPngWarning(png_structp, png_const_charp) {}

struct PngShape {
  png_uint_32 width;
  png_uint_32 height;
  int channels;
  int bit_depth;
  size_t row_bytes;
};

// Reads the header (after the signature) and asks libpng for 8-bit grey.
// C-style: see PngErrorContext.
bool ReadPngHeader(png_structp png, png_infop info, std::FILE* file, PngShape* shape) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_init_io(png, file);
  png_set_sig_bytes(png, static_cast<int>(kPngSignatureBytes));
  png_read_info(png, info);
  const int color_type = png_get_color_type(png, info);
  // Palette -> RGB, grey of 1, 2 or 4 bits -> 8 bits, tRNS -> alpha.
  png_set_expand(png);
  png_set_scale_16(png);
  png_set_strip_alpha(png);
  if ((color_type & PNG_COLOR_MASK_COLOR) != 0) {
    // -1, -1: libpng's default weights; NONE: colour pixels are expected.
    png_set_rgb_to_gray_fixed(png, PNG_ERROR_ACTION_NONE, -1, -1);
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  shape->width = png_get_image_width(png, info);
  shape->height = png_get_image_height(png, info);
  shape->channels = png_get_channels(png, info);
  shape->bit_depth = png_get_bit_depth(png, info);
  shape->row_bytes = png_get_rowbytes(png, info);
  return true;
}

// Decodes every row and reads the chunks after the image (checking their
// CRCs). C-style: see PngErrorContext.
bool ReadPngRows(png_structp png, png_infop info, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  return true;
}

class PngReadStructs {
 public:
  explicit PngReadStructs(PngErrorContext* context)
      : png_(png_create_read_struct(PNG_LIBPNG_VER_STRING, context, OnPngError, OnPngWarning)),
        info_(png_ != nullptr ? png_create_info_struct(png_) : nullptr) {}
  ~PngReadStructs() {
    if (png_ != nullptr) {
      png_destroy_read_struct(&png_, info_ != nullptr ? &info_ : nullptr, nullptr);
    }
  }
  PngReadStructs(const PngReadStructs&) = delete;
  PngReadStructs& operator=(const PngReadStructs&) = delete;

  bool ok() const { return png_ != nullptr && info_ != nullptr; }
  png_structp png() const { return png_; }
  png_infop info() const { return info_; }

 private:
  png_structp png_;
  png_infop info_;
};

absl::Status PngError(const std::string& path, const PngErrorContext& context) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": not a readable PNG: ", context.message));
}

}  // namespace

absl::StatusOr<GreyImage> ReadGreyPng(const std::string& path) {
  FilePtr file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) return OpenError(path, errno);
  std::array<png_byte, kPngSignatureBytes> signature{};
  const size_t got = std::fread(signature.data(), 1, signature.size(), file.get());
  if (got < signature.size() || png_sig_cmp(signature.data(), 0, signature.size()) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a PNG file (it does not start with the PNG signature)"));
  }
  PngErrorContext context{};
  PngReadStructs structs(&context);
  if (!structs.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ": libpng could not allocate"));
  }
  PngShape shape{};
  if (!ReadPngHeader(structs.png(), structs.info(), file.get(), &shape)) {
    return PngError(path, context);
  }
  const int64_t pixels = int64_t{shape.width} * int64_t{shape.height};
  if (pixels > kMaxPngPixels) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", shape.width, " x ", shape.height,
                                                   " pixels is more than the ", kMaxPngPixels,
                                                   " an image may have"));
  }
  if (shape.channels != 1 || shape.bit_depth != 8 || shape.row_bytes != shape.width) {
    // The transforms above always give 8-bit grey; this guards against a
    // libpng that does not.
    return absl::InternalError(absl::StrCat(path, ": libpng gave ", shape.channels,
                                            " channels of ", shape.bit_depth,
                                            " bits, not 8-bit grey"));
  }
  GreyImage image;
  image.height = shape.height;
  image.width = shape.width;
  image.pixels.resize(pixels);
  std::vector<png_bytep> rows(shape.height);
  for (png_uint_32 y = 0; y < shape.height; ++y) rows[y] = &image.pixels[int64_t{y} * shape.width];
  if (!ReadPngRows(structs.png(), structs.info(), rows.data())) return PngError(path, context);
  return image;
}

absl::StatusOr<ImageSet> ReadPngFolder(const std::string& root,
                                       std::optional<std::pair<int, int>> expected) {
  namespace fs = std::filesystem;
  // Lists the sub-folders (or the .png files) of `folder`, sorted by name.
  auto list = [](const fs::path& folder, bool want_directories,
                 std::vector<std::string>* names) -> absl::Status {
    std::error_code error;
    fs::directory_iterator it(folder, error);
    const fs::directory_iterator end;
    for (; !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (name.empty() || name[0] == '.') continue;
      std::error_code type_error;
      if (want_directories) {
        if (it->is_directory(type_error)) names->push_back(name);
      } else if (it->is_regular_file(type_error) &&
                 absl::EndsWithIgnoreCase(name, ".png")) {
        names->push_back(name);
      }
    }
    if (error) {
      return absl::InvalidArgumentError(
          absl::StrCat(folder.string(), ": cannot list the folder: ", error.message()));
    }
    std::sort(names->begin(), names->end());
    return absl::OkStatus();
  };

  ImageSet set;
  DPC_RETURN_IF_ERROR(list(root, /*want_directories=*/true, &set.class_names));
  if (set.class_names.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(root, ": no class sub-folders (one folder of PNG files per class)"));
  }
  set.num_classes = static_cast<int>(set.class_names.size());
  // Read every image first, then judge the sizes against the expected one
  // (or the most common), so a refusal blames the images that differ.
  struct Read {
    std::string path;
    GreyImage image;
    int label;
  };
  std::vector<Read> images;
  std::map<std::pair<int, int>, int64_t> size_counts;
  for (int label = 0; label < set.num_classes; ++label) {
    const fs::path folder = fs::path(root) / set.class_names[label];
    std::vector<std::string> files;
    DPC_RETURN_IF_ERROR(list(folder, /*want_directories=*/false, &files));
    if (files.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(folder.string(), ": class folder with no .png file"));
    }
    for (const std::string& file : files) {
      const std::string path = (folder / file).string();
      DPC_ASSIGN_OR_RETURN(GreyImage image, ReadGreyPng(path));
      ++size_counts[{image.height, image.width}];
      images.push_back({path, std::move(image), label});
    }
  }
  std::pair<int, int> size = size_counts.begin()->first;
  for (const auto& [candidate, count] : size_counts) {
    if (count > size_counts[size]) size = candidate;
  }
  const bool declared = expected.has_value();
  if (declared) size = *expected;
  std::vector<std::string> differing;
  int64_t num_differing = 0;
  for (const Read& read : images) {
    if (read.image.height == size.first && read.image.width == size.second) continue;
    ++num_differing;
    if (differing.size() < 5) {
      differing.push_back(absl::StrCat(read.path, " is ", read.image.width, " x ",
                                       read.image.height));
    }
  }
  if (num_differing > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        num_differing, " of ", images.size(), " images are not ", size.second, " x ",
        size.first, declared ? " (the size the dataset declares)" : " (the size most have)",
        ": ", absl::StrJoin(differing, "; "), num_differing > 5 ? "; ..." : "",
        ". All must be the same size"));
  }
  set.height = size.first;
  set.width = size.second;
  for (const Read& read : images) {
    for (const uint8_t value : read.image.pixels) {
      set.pixels.push_back(static_cast<float>(value) / 255.0f);
    }
    set.labels.push_back(read.label);
  }
  return set;
}

absl::Status WritePngGrid(const std::string& path, absl::Span<const float> pixels, int height,
                          int width, int columns) {
  if (height < 1 || width < 1 || columns < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a grid needs height, width and columns >= 1, got ", height, ", ", width, ", ",
        columns));
  }
  const int64_t per_image = int64_t{height} * width;
  if (pixels.empty() || pixels.size() % per_image != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", pixels.size(), " pixel values are not a whole, non-zero number of ", height,
        " x ", width, " images"));
  }
  const int64_t images = static_cast<int64_t>(pixels.size()) / per_image;
  const int64_t grid_columns = columns;
  const int64_t grid_rows = (images + grid_columns - 1) / grid_columns;
  const int64_t grid_width = grid_columns * width;
  const int64_t grid_height = grid_rows * height;
  if (grid_width * grid_height > kMaxPngPixels) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": a grid of ", grid_width, " x ",
                                                   grid_height, " pixels is more than the ",
                                                   kMaxPngPixels, " an image may have"));
  }
  std::vector<png_byte> grid(grid_width * grid_height, 0);
  for (int64_t i = 0; i < images; ++i) {
    const int64_t top = (i / grid_columns) * height;
    const int64_t left = (i % grid_columns) * width;
    for (int64_t y = 0; y < height; ++y) {
      for (int64_t x = 0; x < width; ++x) {
        const float value = pixels[i * per_image + y * width + x];
        if (std::isnan(value)) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": pixel (", y, ", ", x, ") of image ", i, " is NaN"));
        }
        grid[(top + y) * grid_width + left + x] =
            static_cast<png_byte>(std::lround(255.0f * std::clamp(value, 0.0f, 1.0f)));
      }
    }
  }
  // libpng's simplified API (1.6) does its own setjmp inside: errors come
  // back as a return value and a message, and it frees what it allocated.
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(grid_width);
  image.height = static_cast<png_uint_32>(grid_height);
  image.format = PNG_FORMAT_GRAY;
  if (png_image_write_to_file(&image, path.c_str(), /*convert_to_8bit=*/0, grid.data(),
                              /*row_stride=*/0, /*colormap=*/nullptr) == 0) {
    const std::string message = image.message;
    png_image_free(&image);
    return absl::InternalError(absl::StrCat(path, ": cannot write the PNG: ", message));
  }
  return absl::OkStatus();
}

}  // namespace dpcurator::data
