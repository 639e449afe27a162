#ifndef DPCURATOR_CORE_DATA_PNG_FOLDER_H_
#define DPCURATOR_CORE_DATA_PNG_FOLDER_H_

// Users' own images as PNG files (libpng 1.6), one sub-folder per class, and
// the PNG grid `dpcurator sample` writes so a person can look at a model's
// images.
//
// Every PNG is read as 8-bit grey through libpng's transforms: palette
// images are expanded, grey below 8 bits is scaled up, 16-bit samples are
// scaled down (v * 255 / 65535, rounded), RGB becomes grey with libpng's
// default luminance weights (0.2126 R + 0.7152 G + 0.0722 B; libpng applies
// them in linear light when the file declares its gamma or sRGB, and to the
// stored values otherwise; either way R = G = B = v gives v), and alpha (or
// a tRNS transparent colour) is dropped, keeping the colour values as
// stored. Grey files are never gamma-corrected: their values are kept.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/data/image_set.h"

namespace dpcurator::data {

struct GreyImage {
  int64_t height = 0;
  int64_t width = 0;
  // height x width, row-major.
  std::vector<uint8_t> pixels;
};

// An image of more pixels than this (64 Mi) is refused before its rows are
// allocated: a training image is far smaller, and a hostile header must not
// make us allocate gigabytes.
inline constexpr int64_t kMaxPngPixels = int64_t{1} << 26;

// Reads one PNG file as 8-bit grey (see the conversions above). Errors name
// the file: NotFound / PermissionDenied when it cannot be opened,
// InvalidArgument for a file that is not a PNG, is corrupt or truncated
// (libpng's message is quoted), or is larger than kMaxPngPixels.
absl::StatusOr<GreyImage> ReadGreyPng(const std::string& path);

// Reads `root`/<class>/<image>.png: the class names are the names of the
// sub-folders of `root`, sorted bytewise, and an image's label is the index
// of its class. Within a class the files are read in bytewise name order.
// Names starting with '.' are skipped, as are files in `root` itself and
// files in a class folder whose name does not end in ".png" (any case).
// Refused, naming the folder or file: no class folder, a class folder with
// no PNG, an unreadable PNG, and images of another size. The size every
// image must have is `expected` (height, width) when given (a dataset's
// declared size), else the size most images have; the refusal names up to
// five files that differ and how many there are, never blaming the many
// for the one (issue 25: a 32 x 32 first image made every 28 x 28 one
// "wrong"). On error nothing is returned.
absl::StatusOr<ImageSet> ReadPngFolder(
    const std::string& root,
    std::optional<std::pair<int, int>> expected = std::nullopt);

// Writes images of height x width (pixels: row-major images, as in
// ImageSet::pixels) as one 8-bit grey PNG, `columns` images per row, rows
// top to bottom, unused cells of the last row black. Values are clamped to
// [0, 1] and stored as round(255 * v); NaN is refused.
absl::Status WritePngGrid(const std::string& path, absl::Span<const float> pixels, int height,
                          int width, int columns);

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_PNG_FOLDER_H_
