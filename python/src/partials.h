#ifndef DPCURATOR_PYTHON_SRC_PARTIALS_H_
#define DPCURATOR_PYTHON_SRC_PARTIALS_H_

// Exact partials of the one-shot sum-over-rows release kinds over blocks of
// rows (issue 28 item 1; docs/scale-out.md): what a Dask worker computes on
// its shard, merged on the cluster, and noised once by the server. Nothing
// here adds noise: a partial is the exact statistic of its rows and must
// never leave the curator's trust boundary.

#include <cstdint>
#include <istream>
#include <memory>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/csv.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/embed/charfn.h"
#include "core/embed/rff.h"
#include "core/release/charfn_embedding.h"
#include "core/release/marginals.h"
#include "core/release/rff_embedding.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::python {

// The exact statistic of a block of rows under one plan, and its row count.
//   rff_embedding, charfn_embedding: [per-class feature sums (feature_dim x
//     C, column-major: class 0's sums first) ; per-class counts (C)], the
//     vector ReleaseLabelledEmbedding noises (docs/privacy.md 2.2) before
//     any division by a public n (REPLACE_ONE divides after the merge);
//   marginals, mst, aim: every clique's count table, concatenated in plan
//     order (release::MarginalsKind::Count).
// Partials of one plan add: Merge is the sum, so the order of shards and
// merges changes only floating-point rounding.
struct Partial {
  uint64_t plan_fingerprint = 0;
  // The plan's digest (Plan::digest): what the server's job names its plan
  // by, sent with the statistic (dpcurator.Curator.submit).
  std::string plan_digest;
  int64_t num_rows = 0;
  Eigen::VectorXd values;
};

// Rows per chunk of Plan::ComputeCsv: 64k rows of the demo table's 18
// encoded features are 9 MB of encoded doubles, and a chunk amortises the
// embedding's per-call thread start (core/embed/labelled_embedding.cc).
inline constexpr int64_t kCsvChunkRows = int64_t{1} << 16;

// The records a CSV partial read as null rows (docs/privacy.md 6.5): each
// is counted in Partial::num_rows and adds nothing to the statistic. For the
// curator only (the runner's stderr): it is not part of the partial, so it
// never reaches the server.
struct MalformedRows {
  int64_t count = 0;
  // The first data::kMaxMalformedExamples, in file order.
  std::vector<data::MalformedRecord> examples;
};

// kMst, kAim (issue 41): the exact count tables of every clique the
// recipe may read (the server's plan fixes the same list from the same
// schema and resolved request: train::MstTableCliques, AimTableCliques),
// in the marginals layout; the server runs the recipe over them.
enum class PlanKind { kRffEmbedding, kCharfnEmbedding, kMarginals, kMst, kAim };

// A release plan the partials follow: the dataset's public schema and the
// kind's resolved parameters (everything that fixes the feature map or the
// cliques), with the map built once from public values.
class Plan {
 public:
  // rff_embedding or charfn_embedding: `schema` is a serialized
  // v1.TableSchema, `request` a serialized v1.ReleaseRequest as the server
  // resolved and stored it (its seed set: a request with seed 0 would draw
  // a fresh random map on every worker, so it is refused).
  // charfn_embedding with private_length_scale is a two-phase release (l
  // is released from the rows first) and is refused for now.
  static absl::StatusOr<std::unique_ptr<Plan>> FromRequest(const std::string& schema,
                                                           const std::string& request);
  // marginals (the measurement step of the mst and aim recipes): the
  // cliques' column indices, checked as the server checks them.
  static absl::StatusOr<std::unique_ptr<Plan>> Marginals(const std::string& schema,
                                                         std::vector<std::vector<int>> cliques);

  PlanKind kind() const { return kind_; }
  const char* kind_name() const;
  const data::Schema& schema() const { return schema_; }
  // Length of Partial::values.
  int64_t dimension() const { return dimension_; }
  // Identifies the plan (FNV-1a of its kind, schema and parameters), so
  // partials of different plans are never merged.
  uint64_t fingerprint() const { return fingerprint_; }
  // SHA-256 over (schema bytes || request bytes), the 32 bytes the server's
  // pending job carries as its plan_digest (docs/scale-out.md): a runner
  // submits a statistic under the digest of the plan it computed. For a
  // marginals plan (no request on the wire) the request bytes are replaced
  // by the cliques' text ("0;2;0,3;" in plan order).
  const std::string& digest() const { return digest_; }
  // The inputs it was made from (pickling).
  const std::string& schema_bytes() const { return schema_bytes_; }
  const std::string& request_bytes() const { return request_bytes_; }
  const std::vector<std::vector<int>>& cliques() const { return marginals_.cliques; }

  // The exact partial of `rows` (read under schema()).
  absl::StatusOr<Partial> Compute(const data::Table& rows) const;
  // The exact partial of CSV text with a header line, read by the upload's
  // reader (data::CsvTableReader: the server's rules) kCsvChunkRows rows at
  // a time, each chunk's partial added in, so memory stays bounded whatever
  // the file's size. Nothing of a chunk outlives it.
  //
  // A total function of the records (docs/privacy.md 6.5), which are the
  // non-blank lines after the header (CsvOptions::drop_malformed_records:
  // a record ends at its line's end, inside quotes too): a record the
  // upload would refuse (an undeclared category, a cell that is not a
  // finite number, a field count other than the header's, a line longer
  // than the reader's limit, a quoted field not closed on its line) is a
  // null row: it adds nothing to the sums or the counts and is counted in
  // num_rows (under REPLACE_ONE the server checks num_rows against the
  // public n, so num_rows is the number of lines whatever they hold).
  // `malformed`, when given, gets their count and first lines.
  // Only a header the schema cannot map is an error ("<source>: <detail>").
  absl::StatusOr<Partial> ComputeCsv(std::istream* input, const std::string& source,
                                     int64_t chunk_rows = kCsvChunkRows,
                                     MalformedRows* malformed = nullptr) const;
  // ComputeCsv of the file at `path` (NOT_FOUND when it cannot be opened).
  absl::StatusOr<Partial> ComputeCsvFile(const std::string& path,
                                         int64_t chunk_rows = kCsvChunkRows,
                                         MalformedRows* malformed = nullptr) const;
  // A partial of no rows (the merge's identity).
  Partial Empty() const;

  // The in-process engine's own exact statistic over `rows`: the kind's
  // Run with a zero noise source (ADD_REMOVE), in the same layout as
  // Partial::values. Tests compare merged shard partials against it.
  absl::StatusOr<Eigen::VectorXd> EngineStatistic(const data::Table& rows) const;

 private:
  Plan() = default;

  PlanKind kind_ = PlanKind::kRffEmbedding;
  data::Schema schema_;
  std::string schema_bytes_;
  std::string request_bytes_;
  release::RffEmbeddingKind::Params rff_;
  release::CharfnEmbeddingKind::Params charfn_;
  release::MarginalsKind::Params marginals_;
  std::unique_ptr<embed::FeatureMap> feature_map_;
  int64_t dimension_ = 0;
  uint64_t fingerprint_ = 0;
  std::string digest_;
};

// a + b; FAILED_PRECONDITION when they belong to different plans (their
// fingerprints or digests differ).
absl::StatusOr<Partial> Merge(const Partial& a, const Partial& b);

// A partial's bytes (docs/scale-out.md, "Partials on the wire"): the magic
// "DPCPART2", the plan fingerprint (u64), the plan digest (32 bytes), the
// row count (i64), the length (i64) and the values (f64), all
// little-endian. Parse checks the length and refuses anything else
// (DATA_LOSS), version 1 (no digest) included: partials live only as long
// as a job's computation, so none of version 1 is kept anywhere.
std::string Serialize(const Partial& partial);
absl::StatusOr<Partial> Parse(const std::string& bytes);

}  // namespace dpcurator::python

#endif  // DPCURATOR_PYTHON_SRC_PARTIALS_H_
