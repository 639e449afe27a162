#ifndef DPCURATOR_CORE_DATA_IDX_H_
#define DPCURATOR_CORE_DATA_IDX_H_

// IDX files, the format of MNIST and Fashion-MNIST
// (http://yann.lecun.com/exdb/mnist/, "file formats"): a 4-byte magic of two
// zero bytes, an element type and the number of dimensions, then one
// big-endian uint32 per dimension, then the elements in row-major order. The
// first dimension counts records (images, labels); the others give a
// record's shape. Only unsigned bytes (type 0x08) are read: the other types
// are refused by name.
//
// Files are read through zlib's gzread, so gzip-compressed files (as Debian's
// dataset-fashion-mnist ships them) and plain ones read the same. Byte
// offsets in errors count from the start of the (decompressed) IDX data.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/data/image_set.h"

// zlib's handle type (zlib.h: typedef struct gzFile_s* gzFile), declared here
// so that users of this header do not include zlib.h.
struct gzFile_s;

namespace dpcurator::data {

// Streams the records of one IDX file of unsigned bytes, a block at a time,
// so that a 60000 x 784 file is never held twice. Every error names the file
// and, past the header, the record where the data went wrong; all are
// InvalidArgument except a file that cannot be opened (NotFound for a
// missing file, PermissionDenied, or Internal).
class IdxReader {
 public:
  // Opens `path` and reads and checks its header: magic, element type
  // (0x08 only), at least one dimension, no zero dimension past the first,
  // and a record of at most kMaxRecordBytes.
  static absl::StatusOr<IdxReader> Open(const std::string& path);

  // A record larger than this (1 GiB) is refused: no real image or label
  // file comes near it, and it keeps every size computation far from
  // overflow.
  static constexpr int64_t kMaxRecordBytes = int64_t{1} << 30;

  IdxReader(IdxReader&&) noexcept;
  IdxReader& operator=(IdxReader&&) noexcept;
  ~IdxReader();

  const std::string& path() const { return path_; }
  // As the header declares them; dims()[0] is the number of records.
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t num_records() const { return dims_[0]; }
  // Bytes per record: the product of dims()[1..] (1 for a 1-dim file).
  int64_t record_size() const { return record_size_; }
  // Index of the next record Read returns.
  int64_t next_record() const { return next_record_; }

  // Replaces `out` with the next min(max_records, records left) records,
  // row-major (records x record_size()), and returns how many; 0 once every
  // declared record has been read. The call that reads the last record also
  // checks that the file ends there (trailing data is refused). A file that
  // ends early is refused with the record where its data stops; on any
  // error `out` is cleared and the reader should be dropped.
  absl::StatusOr<int64_t> Read(int64_t max_records, std::vector<uint8_t>* out);

 private:
  struct GzCloser {
    void operator()(gzFile_s* file) const;
  };

  IdxReader(std::string path, std::unique_ptr<gzFile_s, GzCloser> file, std::vector<int64_t> dims,
            int64_t record_size);

  std::string path_;
  std::unique_ptr<gzFile_s, GzCloser> file_;
  std::vector<int64_t> dims_;
  int64_t record_size_ = 1;
  int64_t header_bytes_ = 0;
  int64_t next_record_ = 0;
};

struct IdxImageOptions {
  // Reads only the first max_records images and labels; -1 reads them all.
  int64_t max_records = -1;
  // Labels must lie in [0, num_classes); at most 256 (labels are bytes).
  int num_classes = 10;
};

// Reads an image file (3 dims: count x height x width) and its label file
// (1 dim: count) into an ImageSet with pixels / 255. Checks, before any
// pixel is read, that the shapes are right and the two counts agree; then
// that every label is in range (naming the record and the allowed range).
// On error nothing is returned: no partial set.
absl::StatusOr<ImageSet> ReadIdxImages(const std::string& images_path,
                                       const std::string& labels_path,
                                       const IdxImageOptions& options = {});

// Writes an IDX file of unsigned bytes (type 0x08) with the given
// dimensions (dims[0] records; at most 255 dimensions, each < 2^32) and
// `bytes` (row-major, exactly the product of dims). Uncompressed; written to
// `path`.tmp and renamed, so a failure never leaves a partial file under
// `path`. IdxReader reads it back.
absl::Status WriteIdx(const std::string& path, const std::vector<int64_t>& dims,
                      absl::Span<const uint8_t> bytes);

// An image set as the IDX pair tools expect: `images_path` (count x height x
// width, levels round(255 v) of pixels clamped to [0, 1]) and `labels_path`
// (count labels, each < 256).
absl::Status WriteIdxImages(const std::string& images_path, const std::string& labels_path,
                            const ImageSet& images);

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_IDX_H_
