#include "python/src/partials.h"

#include <openssl/sha.h>

#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/data/csv.h"
#include "core/data/encoder.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/encoded_rows.h"
#include "core/release/labelled_release.h"
#include "plan/releases.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"

namespace dpcurator::python {
namespace {

constexpr char kMagic[] = "DPCPART2";
constexpr size_t kMagicBytes = 8;
constexpr size_t kDigestBytes = SHA256_DIGEST_LENGTH;
// magic, fingerprint, digest, rows, length.
constexpr size_t kRowsOffset = kMagicBytes + sizeof(uint64_t) + kDigestBytes;
constexpr size_t kHeaderBytes = kRowsOffset + 2 * sizeof(uint64_t);

// FNV-1a (64 bits), as data::Schema::Fingerprint.
uint64_t Fnv1a(uint64_t hash, const std::string& bytes) {
  for (unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;

// SHA-256(a || b), the pending job's plan_digest (the server computes it
// over the bytes it stores and hands out).
// (The one-shot SHA256: the streaming SHA256_Init family is deprecated in
// OpenSSL 3, and the inputs are a few KB.)
std::string Sha256(const std::string& a, const std::string& b) {
  const std::string both = a + b;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(both.data()), both.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

absl::StatusOr<data::Schema> ParseSchema(const std::string& bytes, std::string* canonical) {
  v1::TableSchema proto;
  if (!proto.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        "the schema is not a serialized dpcurator.v1.TableSchema (schema_from_json makes one)");
  }
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(proto));
  if (schema.image_index().has_value()) {
    return absl::UnimplementedError(
        "image schemas have no partials yet: the module reads table rows (docs/scale-out.md)");
  }
  *canonical = schema.FingerprintHex();
  return schema;
}

// Rows in the engine's shape: data::Table -> EncodedRows (the encoder of
// every embedding kind, core/release/encoded_rows.h).
release::EncodedRows Encode(const data::Schema& schema, const data::Table& rows) {
  return release::EncodeRows(schema, rows);
}

Eigen::VectorXd Flatten(const Eigen::MatrixXd& values, const Eigen::VectorXd& totals) {
  Eigen::VectorXd out(values.size() + totals.size());
  out.head(values.size()) = Eigen::Map<const Eigen::VectorXd>(values.data(), values.size());
  out.tail(totals.size()) = totals;
  return out;
}

void PutU64(std::string* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
uint64_t GetU64(const char* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return value;
}

}  // namespace

const char* Plan::kind_name() const {
  switch (kind_) {
    case PlanKind::kRffEmbedding:
      return "rff_embedding";
    case PlanKind::kCharfnEmbedding:
      return "charfn_embedding";
    case PlanKind::kMarginals:
      return "marginals";
    case PlanKind::kMst:
      return "mst";
    case PlanKind::kAim:
      return "aim";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<Plan>> Plan::FromRequest(const std::string& schema,
                                                        const std::string& request) {
  std::unique_ptr<Plan> plan(new Plan());
  std::string schema_text;
  DPC_ASSIGN_OR_RETURN(plan->schema_, ParseSchema(schema, &schema_text));
  plan->schema_bytes_ = schema;
  plan->request_bytes_ = request;
  v1::ReleaseRequest proto;
  if (!proto.ParseFromString(request)) {
    return absl::InvalidArgumentError(
        "the request is not a serialized dpcurator.v1.ReleaseRequest");
  }
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(plan->schema_);
  const int num_classes = plan->schema_.num_classes();
  std::string parameters;
  switch (proto.kind_case()) {
    case v1::ReleaseRequest::kRffEmbedding: {
      if (proto.rff_embedding().seed() == 0) {
        return absl::FailedPreconditionError(
            "the request's seed is 0: give the request as the server resolved and stored it "
            "(seed set), or each worker would draw its own feature map");
      }
      plan->kind_ = PlanKind::kRffEmbedding;
      DPC_ASSIGN_OR_RETURN(plan->rff_, release::RffEmbeddingKind::Resolve(
                                           ParamsFromProto(proto.rff_embedding()), plan->schema_));
      DPC_ASSIGN_OR_RETURN(release::RffEmbeddingKind::Prepared prepared,
                           release::RffEmbeddingKind::Prepare(plan->rff_, layout));
      plan->feature_map_ =
          std::make_unique<embed::RandomFourierFeatureMap>(std::move(prepared.feature_map));
      v1::RffEmbeddingParams resolved;
      ParamsToProto(plan->rff_, &resolved);
      parameters = resolved.SerializeAsString();
      break;
    }
    case v1::ReleaseRequest::kCharfnEmbedding: {
      if (proto.charfn_embedding().seed() == 0) {
        return absl::FailedPreconditionError(
            "the request's seed is 0: give the request as the server resolved and stored it "
            "(seed set), or each worker would draw its own feature map");
      }
      plan->kind_ = PlanKind::kCharfnEmbedding;
      DPC_ASSIGN_OR_RETURN(plan->charfn_,
                           release::CharfnEmbeddingKind::Resolve(
                               ParamsFromProto(proto.charfn_embedding()), plan->schema_));
      if (plan->charfn_.private_length_scale) {
        return absl::UnimplementedError(
            "charfn_embedding with private_length_scale releases the length-scale from the rows "
            "before the embedding (two phases); the scale-out path runs one-phase releases only "
            "for now: declare length_scale instead");
      }
      DPC_ASSIGN_OR_RETURN(release::CharfnEmbeddingKind::Prepared prepared,
                           release::CharfnEmbeddingKind::Prepare(plan->charfn_, layout));
      DPC_RETURN_IF_ERROR(release::CharfnEmbeddingKind::ScaleFeatureMap(
                              plan->charfn_, layout,
                              release::CharfnEmbeddingKind::DeclaredLengthScale(plan->charfn_,
                                                                               layout),
                              &prepared.feature_map)
                              .status());
      plan->feature_map_ =
          std::make_unique<embed::CharacteristicFunctionMap>(std::move(prepared.feature_map));
      v1::CharfnEmbeddingParams resolved;
      ParamsToProto(plan->charfn_, &resolved);
      parameters = resolved.SerializeAsString();
      break;
    }
    case v1::ReleaseRequest::kMst:
    case v1::ReleaseRequest::kAim: {
      // Issue 41: the tables of every clique the recipe may read, from the
      // public schema and the resolved request, by the server's own function
      // (plan::ExternalRecipeTables), whose list its plan stores and runs the
      // recipe over.
      if (proto.kind_case() == v1::ReleaseRequest::kAim && proto.aim().workload().empty()) {
        return absl::FailedPreconditionError(
            "the aim request names no workload: give the request as the server resolved and "
            "stored it (its workload listed)");
      }
      plan->kind_ =
          proto.kind_case() == v1::ReleaseRequest::kMst ? PlanKind::kMst : PlanKind::kAim;
      DPC_ASSIGN_OR_RETURN(plan->marginals_.cliques,
                           ::dpcurator::plan::ExternalRecipeTables(proto, plan->schema_));
      DPC_ASSIGN_OR_RETURN(const data::Discretizer domain,
                           data::Discretizer::Create(plan->schema_));
      std::vector<int> sizes;
      for (int c = 0; c < plan->schema_.num_columns(); ++c) {
        sizes.push_back(domain.domain_size(c));
      }
      plan->dimension_ = release::TotalCells(plan->marginals_.cliques, sizes);
      for (const std::vector<int>& clique : plan->marginals_.cliques) {
        parameters += absl::StrCat(absl::StrJoin(clique, ","), ";");
      }
      plan->fingerprint_ =
          Fnv1a(Fnv1a(Fnv1a(kFnvOffset, plan->kind_name()), schema_text), parameters);
      plan->digest_ = Sha256(schema, request);
      return plan;
    }
    default: {
      const google::protobuf::FieldDescriptor* field =
          proto.GetReflection()->GetOneofFieldDescriptor(
              proto, proto.GetDescriptor()->FindOneofByName("kind"));
      return absl::UnimplementedError(absl::StrCat(
          "release kind '", field == nullptr ? "(none)" : field->name(),
          "' has no partials: the scale-out path runs rff_embedding, charfn_embedding, mst, "
          "aim and marginals (Plan.marginals)"));
    }
  }
  plan->dimension_ = (int64_t{plan->feature_map_->output_dim()} + 1) * num_classes;
  plan->fingerprint_ = Fnv1a(Fnv1a(Fnv1a(kFnvOffset, plan->kind_name()), schema_text), parameters);
  plan->digest_ = Sha256(schema, request);
  return plan;
}

absl::StatusOr<std::unique_ptr<Plan>> Plan::Marginals(const std::string& schema,
                                                      std::vector<std::vector<int>> cliques) {
  std::unique_ptr<Plan> plan(new Plan());
  std::string schema_text;
  DPC_ASSIGN_OR_RETURN(plan->schema_, ParseSchema(schema, &schema_text));
  plan->schema_bytes_ = schema;
  plan->kind_ = PlanKind::kMarginals;
  release::MarginalsKind::Params params;
  params.cliques = std::move(cliques);
  DPC_ASSIGN_OR_RETURN(plan->marginals_,
                       release::MarginalsKind::Resolve(std::move(params), plan->schema_));
  // The shape from the public schema alone: the count of no rows.
  data::Table no_rows;
  no_rows.cells.resize(0, plan->schema_.num_columns());
  DPC_ASSIGN_OR_RETURN(const release::MarginalsKind::ExactCounts empty,
                       release::MarginalsKind::Count(plan->marginals_, plan->schema_, no_rows));
  plan->dimension_ = empty.counts.size();
  std::string parameters;
  for (const std::vector<int>& clique : plan->marginals_.cliques) {
    parameters += absl::StrCat(absl::StrJoin(clique, ","), ";");
  }
  plan->fingerprint_ = Fnv1a(Fnv1a(Fnv1a(kFnvOffset, plan->kind_name()), schema_text), parameters);
  plan->digest_ = Sha256(schema, parameters);
  return plan;
}

Partial Plan::Empty() const {
  Partial partial;
  partial.plan_fingerprint = fingerprint_;
  partial.plan_digest = digest_;
  partial.values = Eigen::VectorXd::Zero(dimension_);
  return partial;
}

absl::StatusOr<Partial> Plan::Compute(const data::Table& rows) const {
  if (rows.cells.cols() != schema_.num_columns()) {
    return absl::InvalidArgumentError(absl::StrCat("the block has ", rows.cells.cols(),
                                                   " columns and the schema ",
                                                   schema_.num_columns()));
  }
  Partial partial;
  partial.plan_fingerprint = fingerprint_;
  partial.plan_digest = digest_;
  partial.num_rows = rows.num_rows();
  if (kind_ == PlanKind::kMarginals || kind_ == PlanKind::kMst || kind_ == PlanKind::kAim) {
    DPC_ASSIGN_OR_RETURN(release::MarginalsKind::ExactCounts exact,
                         release::MarginalsKind::Count(marginals_, schema_, rows));
    partial.values = std::move(exact.counts);
    return partial;
  }
  const release::EncodedRows encoded = Encode(schema_, rows);
  // One thread: a partial runs inside a Dask worker, and the cluster's
  // workers (one thread each) are the parallelism; a second thread of our
  // own would oversubscribe the cores they were given (issue 28's bench:
  // 2 workers of one thread against the engine's 2 threads).
  DPC_ASSIGN_OR_RETURN(const embed::LabelledEmbeddingAccumulator accumulator,
                       release::ExactLabelledEmbedding(*feature_map_, encoded,
                                                       /*max_threads=*/1));
  partial.values = release::FlattenExactEmbedding(accumulator);
  return partial;
}

absl::StatusOr<Partial> Plan::ComputeCsv(std::istream* input, const std::string& source,
                                         int64_t chunk_rows, MalformedRows* malformed) const {
  if (chunk_rows < 1) return absl::InvalidArgumentError("chunk_rows must be at least 1");
  data::CsvOptions options;
  // Null rows instead of errors (docs/privacy.md 6.5): after admission the
  // analyst's view must not depend on whether some row could be read.
  options.drop_malformed_records = true;
  DPC_ASSIGN_OR_RETURN(std::unique_ptr<data::CsvTableReader> reader,
                       data::CsvTableReader::Open(schema_, input, options, source));
  Partial total = Empty();
  data::Table chunk;
  while (true) {
    DPC_ASSIGN_OR_RETURN(const bool more, reader->Next(chunk_rows, &chunk));
    if (!more) break;
    if (chunk.num_rows() == 0) continue;  // every record of the chunk was dropped
    DPC_ASSIGN_OR_RETURN(const Partial part, Compute(chunk));
    total.num_rows += part.num_rows;
    total.values += part.values;
  }
  // A null row's contribution is the zero vector; it is one of the rows.
  total.num_rows += reader->malformed_records();
  if (malformed != nullptr) {
    malformed->count = reader->malformed_records();
    malformed->examples = reader->malformed_examples();
  }
  return total;
}

absl::StatusOr<Partial> Plan::ComputeCsvFile(const std::string& path, int64_t chunk_rows,
                                             MalformedRows* malformed) const {
  std::ifstream input(path, std::ios::binary);
  if (!input) {
    return absl::NotFoundError(absl::StrCat("cannot open '", path, "' for reading"));
  }
  return ComputeCsv(&input, path, chunk_rows, malformed);
}

absl::StatusOr<Eigen::VectorXd> Plan::EngineStatistic(const data::Table& rows) const {
  privacy::ZeroNoiseSource zero;
  constexpr auto kRelation = privacy::NeighbouringRelation::kAddRemove;
  // Any multiplier the grid accepts: a zero source adds nothing.
  constexpr double kNoiseMultiplier = 1.0;
  switch (kind_) {
    case PlanKind::kRffEmbedding: {
      const release::EncodedRows encoded = Encode(schema_, rows);
      DPC_ASSIGN_OR_RETURN(const release::RffEmbeddingKind::Result result,
                           release::RffEmbeddingKind::Run(rff_, encoded, kRelation,
                                                          kNoiseMultiplier, 0, &zero));
      return Flatten(result.embedding.class_values, result.embedding.class_totals);
    }
    case PlanKind::kCharfnEmbedding: {
      const release::EncodedRows encoded = Encode(schema_, rows);
      DPC_ASSIGN_OR_RETURN(const release::CharfnEmbeddingKind::Result result,
                           release::CharfnEmbeddingKind::Run(charfn_, encoded, kRelation,
                                                             kNoiseMultiplier, 0, &zero));
      return Flatten(result.embedding.class_values, result.embedding.class_totals);
    }
    case PlanKind::kMarginals:
    case PlanKind::kMst:
    case PlanKind::kAim: {
      DPC_ASSIGN_OR_RETURN(const release::MarginalsKind::Result result,
                           release::MarginalsKind::Run(marginals_, schema_, rows, kRelation,
                                                       kNoiseMultiplier, &zero));
      Eigen::VectorXd out(dimension_);
      int64_t offset = 0;
      for (const release::NoisyMarginal& m : result.marginals) {
        out.segment(offset, m.counts.size()) = m.counts;
        offset += m.counts.size();
      }
      return out;
    }
  }
  return absl::InternalError("unknown plan kind");
}

absl::StatusOr<Partial> Merge(const Partial& a, const Partial& b) {
  if (a.plan_fingerprint != b.plan_fingerprint || a.plan_digest != b.plan_digest ||
      a.values.size() != b.values.size()) {
    return absl::FailedPreconditionError(
        "these partials belong to different plans (kind, schema or parameters differ)");
  }
  Partial merged;
  merged.plan_fingerprint = a.plan_fingerprint;
  merged.plan_digest = a.plan_digest;
  merged.num_rows = a.num_rows + b.num_rows;
  merged.values = a.values + b.values;
  return merged;
}

std::string Serialize(const Partial& partial) {
  std::string out(kMagic, kMagicBytes);
  out.reserve(kHeaderBytes + sizeof(double) * static_cast<size_t>(partial.values.size()));
  PutU64(&out, partial.plan_fingerprint);
  // Always 32 bytes (a partial made by hand with no digest writes zeros).
  std::string digest = partial.plan_digest;
  digest.resize(kDigestBytes, '\0');
  out += digest;
  PutU64(&out, static_cast<uint64_t>(partial.num_rows));
  PutU64(&out, static_cast<uint64_t>(partial.values.size()));
  for (Eigen::Index i = 0; i < partial.values.size(); ++i) {
    uint64_t bits;
    std::memcpy(&bits, &partial.values[i], sizeof(bits));
    PutU64(&out, bits);
  }
  return out;
}

absl::StatusOr<Partial> Parse(const std::string& bytes) {
  if (bytes.size() < kHeaderBytes || bytes.compare(0, kMagicBytes, kMagic) != 0) {
    return absl::DataLossError("not a dpcurator partial (no DPCPART2 header)");
  }
  Partial partial;
  partial.plan_fingerprint = GetU64(bytes.data() + kMagicBytes);
  partial.plan_digest = bytes.substr(kMagicBytes + sizeof(uint64_t), kDigestBytes);
  partial.num_rows = static_cast<int64_t>(GetU64(bytes.data() + kRowsOffset));
  const uint64_t length = GetU64(bytes.data() + kRowsOffset + sizeof(uint64_t));
  if (partial.num_rows < 0 || length > (bytes.size() - kHeaderBytes) / sizeof(double) ||
      bytes.size() != kHeaderBytes + length * sizeof(double)) {
    return absl::DataLossError(absl::StrCat("a dpcurator partial of ", bytes.size(),
                                            " bytes does not match its header"));
  }
  partial.values.resize(static_cast<Eigen::Index>(length));
  for (uint64_t i = 0; i < length; ++i) {
    const uint64_t bits = GetU64(bytes.data() + kHeaderBytes + i * sizeof(double));
    std::memcpy(&partial.values[static_cast<Eigen::Index>(i)], &bits, sizeof(bits));
  }
  return partial;
}

}  // namespace dpcurator::python
