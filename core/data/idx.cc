#include "core/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/util/status_macros.h"

namespace dpcurator::data {
namespace {

constexpr uint8_t kUnsignedByteType = 0x08;
// zlib's read buffer: larger than its 8 KiB default, so that a 47 MB image
// file is not read in thousands of small system calls.
constexpr unsigned kGzBufferBytes = 128 * 1024;
// gzread takes an unsigned length and returns an int: read at most this
// much per call.
constexpr int64_t kMaxGzReadBytes = int64_t{1} << 30;
// ReadIdxImages converts pixels in blocks of this many records (about 800 KB
// of bytes for 28 x 28 images) so the byte copy stays small beside the
// floats.
constexpr int64_t kImageBlockRecords = 1024;

// The IDX element types other than 0x08, named in the refusal.
const char* TypeName(uint8_t type) {
  switch (type) {
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return nullptr;
  }
}

// Reads up to `size` bytes; returns how many were read (fewer only at the
// end of the file) or the error zlib reports (a corrupt gzip stream).
absl::StatusOr<int64_t> ReadBytes(gzFile file, const std::string& path, int64_t offset,
                                  uint8_t* data, int64_t size) {
  int64_t done = 0;
  while (done < size) {
    const int64_t want = std::min(size - done, kMaxGzReadBytes);
    const int got = gzread(file, data + done, static_cast<unsigned>(want));
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": cannot read at byte offset ", offset + done, ": ",
          code == Z_ERRNO ? std::strerror(errno) : message));
    }
    done += got;
    if (got < want) break;
  }
  return done;
}

uint32_t BigEndian32(const uint8_t* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) |
         uint32_t{bytes[3]};
}

}  // namespace

void IdxReader::GzCloser::operator()(gzFile_s* file) const { gzclose(file); }

IdxReader::IdxReader(std::string path, std::unique_ptr<gzFile_s, GzCloser> file,
                     std::vector<int64_t> dims, int64_t record_size)
    : path_(std::move(path)),
      file_(std::move(file)),
      dims_(std::move(dims)),
      record_size_(record_size),
      header_bytes_(4 + 4 * static_cast<int64_t>(dims_.size())) {}

IdxReader::IdxReader(IdxReader&&) noexcept = default;
IdxReader& IdxReader::operator=(IdxReader&&) noexcept = default;
IdxReader::~IdxReader() = default;

absl::StatusOr<IdxReader> IdxReader::Open(const std::string& path) {
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    const int error = errno;
    const std::string message = absl::StrCat(
        path, ": cannot open: ", error != 0 ? std::strerror(error) : "out of memory");
    if (error == ENOENT) return absl::NotFoundError(message);
    if (error == EACCES) return absl::PermissionDeniedError(message);
    return absl::InternalError(message);
  }
  gzbuffer(file.get(), kGzBufferBytes);

  std::array<uint8_t, 4> magic{};
  DPC_ASSIGN_OR_RETURN(const int64_t magic_bytes,
                       ReadBytes(file.get(), path, 0, magic.data(), magic.size()));
  if (magic_bytes < 4) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated header: the file has ",
                                                   magic_bytes,
                                                   " bytes, an IDX header needs at least 4"));
  }
  if (magic[0] != 0 || magic[1] != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: wrong magic 0x%02x%02x%02x%02x: an IDX file starts with two zero bytes, the "
        "element type and the number of dimensions",
        path, magic[0], magic[1], magic[2], magic[3]));
  }
  if (magic[2] != kUnsignedByteType) {
    const char* name = TypeName(magic[2]);
    if (name == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: wrong magic: unknown IDX element type 0x%02x (0x08 is unsigned byte)", path,
          magic[2]));
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: unsupported IDX element type 0x%02x (%s): only 0x08 (unsigned byte) is read",
        path, magic[2], name));
  }
  const int num_dims = magic[3];
  if (num_dims == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the header declares 0 dimensions (at least 1 needed)"));
  }

  std::vector<uint8_t> dim_bytes(4 * num_dims);
  DPC_ASSIGN_OR_RETURN(const int64_t got, ReadBytes(file.get(), path, 4, dim_bytes.data(),
                                                    static_cast<int64_t>(dim_bytes.size())));
  if (got < static_cast<int64_t>(dim_bytes.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": truncated header: the file ends at byte offset ", 4 + got, ", the header of ",
        num_dims, " dimensions needs ", 4 + dim_bytes.size(), " bytes"));
  }
  std::vector<int64_t> dims(num_dims);
  int64_t record_size = 1;
  for (int i = 0; i < num_dims; ++i) {
    dims[i] = BigEndian32(&dim_bytes[4 * i]);
    if (i == 0) continue;
    if (dims[i] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": dimension ", i, " of the header is 0"));
    }
    // Each factor is < 2^32 and the product so far <= 2^30: no overflow.
    record_size *= dims[i];
    if (record_size > kMaxRecordBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": a record of the declared shape is larger than ", kMaxRecordBytes, " bytes"));
    }
  }
  return IdxReader(path, std::move(file), std::move(dims), record_size);
}

absl::StatusOr<int64_t> IdxReader::Read(int64_t max_records, std::vector<uint8_t>* out) {
  out->clear();
  if (max_records <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": Read needs max_records > 0, got ", max_records));
  }
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": the reader has no open file"));
  }
  const int64_t count = std::min(max_records, num_records() - next_record_);
  if (count == 0) return 0;
  const int64_t offset = header_bytes_ + next_record_ * record_size_;
  out->resize(count * record_size_);
  auto got = ReadBytes(file_.get(), path_, offset, out->data(), count * record_size_);
  if (!got.ok()) {
    out->clear();
    return got.status();
  }
  if (*got < count * record_size_) {
    out->clear();
    const int64_t record = next_record_ + *got / record_size_;
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": truncated: the data ends at byte offset ", offset + *got, ", inside record ",
        record, " of the ", num_records(), " the header declares (", record_size_,
        " bytes each)"));
  }
  next_record_ += count;
  if (next_record_ == num_records()) {
    uint8_t extra = 0;
    const int64_t end = header_bytes_ + num_records() * record_size_;
    auto trailing = ReadBytes(file_.get(), path_, end, &extra, 1);
    if (!trailing.ok() || *trailing > 0) {
      out->clear();
      if (!trailing.ok()) return trailing.status();
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": trailing data at byte offset ", end, ", after the ",
                       num_records(), " records the header declares"));
    }
  }
  return count;
}

absl::StatusOr<ImageSet> ReadIdxImages(const std::string& images_path,
                                       const std::string& labels_path,
                                       const IdxImageOptions& options) {
  if (options.num_classes < 1 || options.num_classes > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_classes must be in [1, 256], got ", options.num_classes));
  }
  if (options.max_records < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_records must be -1 (all) or >= 0, got ", options.max_records));
  }
  DPC_ASSIGN_OR_RETURN(IdxReader images, IdxReader::Open(images_path));
  DPC_ASSIGN_OR_RETURN(IdxReader labels, IdxReader::Open(labels_path));
  if (images.dims().size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, ": an image file has 3 dimensions (count, height, width), this one has ",
        images.dims().size()));
  }
  if (labels.dims().size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels_path, ": a label file has 1 dimension (count), this one has ",
        labels.dims().size()));
  }
  if (images.num_records() != labels.num_records()) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, " declares ", images.num_records(), " images but ", labels_path,
        " declares ", labels.num_records(), " labels"));
  }
  // Reading every record also checks that each file holds all the records
  // it declares and nothing after them; with max_records only the records
  // read are checked (the point of the option is not to read the rest).
  int64_t n = images.num_records();
  if (options.max_records >= 0) n = std::min(n, options.max_records);

  ImageSet set;
  set.height = images.dims()[1];
  set.width = images.dims()[2];
  set.num_classes = options.num_classes;
  set.labels.reserve(n);
  std::vector<uint8_t> bytes;
  while (static_cast<int64_t>(set.labels.size()) < n) {
    DPC_ASSIGN_OR_RETURN(const int64_t got,
                         labels.Read(n - static_cast<int64_t>(set.labels.size()), &bytes));
    for (int64_t i = 0; i < got; ++i) {
      const int label = bytes[i];
      if (label >= options.num_classes) {
        return absl::InvalidArgumentError(absl::StrCat(
            labels_path, ": label ", label, " of record ", set.labels.size(),
            " is outside the allowed range [0, ", options.num_classes, ")"));
      }
      set.labels.push_back(label);
    }
  }

  std::array<float, 256> scale{};
  for (int v = 0; v < 256; ++v) scale[v] = static_cast<float>(v) / 255.0f;
  set.pixels.reserve(n * images.record_size());
  int64_t done = 0;
  while (done < n) {
    DPC_ASSIGN_OR_RETURN(const int64_t got,
                         images.Read(std::min(kImageBlockRecords, n - done), &bytes));
    for (const uint8_t byte : bytes) set.pixels.push_back(scale[byte]);
    done += got;
  }
  return set;
}

absl::Status WriteIdx(const std::string& path, const std::vector<int64_t>& dims,
                      absl::Span<const uint8_t> bytes) {
  if (dims.empty() || dims.size() > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("an IDX file has 1 to 255 dimensions, got ", dims.size()));
  }
  int64_t total = 1;
  for (int64_t dim : dims) {
    if (dim < 0 || dim > int64_t{0xffffffff}) {
      return absl::InvalidArgumentError(
          absl::StrCat("IDX dimensions are 32-bit unsigned, got ", dim));
    }
    if (dim > 0 && total > std::numeric_limits<int64_t>::max() / dim) {
      return absl::InvalidArgumentError("IDX dimensions overflow");
    }
    total *= dim;
  }
  if (total != static_cast<int64_t>(bytes.size())) {
    return absl::InvalidArgumentError(absl::StrCat("IDX dimensions give ", total,
                                                   " elements but ", bytes.size(),
                                                   " bytes were given"));
  }
  std::vector<uint8_t> header = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (int64_t dim : dims) {
    const auto value = static_cast<uint32_t>(dim);
    for (int shift = 24; shift >= 0; shift -= 8) header.push_back((value >> shift) & 0xff);
  }
  const std::string temporary = absl::StrCat(path, ".tmp");
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot write '", path, "': ", std::strerror(errno)));
  }
  const bool written =
      std::fwrite(header.data(), 1, header.size(), file) == header.size() &&
      (bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size());
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed || std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write '", path, "' (disk full?)"));
  }
  return absl::OkStatus();
}

absl::Status WriteIdxImages(const std::string& images_path, const std::string& labels_path,
                            const ImageSet& images) {
  const int64_t n = images.size();
  if (static_cast<int64_t>(images.pixels.size()) != n * images.pixels_per_image()) {
    return absl::InvalidArgumentError("image set: pixel count does not match its shape");
  }
  std::vector<uint8_t> levels(images.pixels.size());
  for (size_t i = 0; i < levels.size(); ++i) {
    const float v = images.pixels[i];
    if (std::isnan(v)) return absl::InvalidArgumentError("image set: NaN pixel");
    levels[i] = static_cast<uint8_t>(std::lround(255.0f * std::clamp(v, 0.0f, 1.0f)));
  }
  std::vector<uint8_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (images.labels[i] < 0 || images.labels[i] > 255) {
      return absl::InvalidArgumentError("IDX labels are bytes: a label is outside [0, 255]");
    }
    labels[i] = static_cast<uint8_t>(images.labels[i]);
  }
  DPC_RETURN_IF_ERROR(WriteIdx(images_path, {n, images.height, images.width}, levels));
  return WriteIdx(labels_path, {n}, labels);
}

}  // namespace dpcurator::data
