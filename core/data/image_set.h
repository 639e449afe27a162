#ifndef DPCURATOR_CORE_DATA_IMAGE_SET_H_
#define DPCURATOR_CORE_DATA_IMAGE_SET_H_

// A labelled set of grey images, as the image readers (idx.h, png_folder.h)
// return it: one float per pixel in [0, 1], so releases and trainers see the
// same pixel vectors whatever the file format was.

#include <cstdint>
#include <string>
#include <vector>

namespace dpcurator::data {

struct ImageSet {
  int64_t height = 0;
  int64_t width = 0;
  // size() x (height * width), row-major (image, then row, then column);
  // each value is the 8-bit grey level divided by 255.
  std::vector<float> pixels;
  // One per image, in [0, num_classes).
  std::vector<int> labels;
  int num_classes = 0;
  // Names indexed by label where the source has them (a PNG folder's
  // sub-folder names); empty for IDX, whose labels are bare numbers.
  std::vector<std::string> class_names;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t pixels_per_image() const { return height * width; }
};

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_IMAGE_SET_H_
