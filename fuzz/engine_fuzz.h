#ifndef DPCURATOR_FUZZ_ENGINE_FUZZ_H_
#define DPCURATOR_FUZZ_ENGINE_FUZZ_H_

// Shared decoding for the totality fuzz targets (issue 23, item 0(e)): the
// release kinds (release_rff, release_charfn, release_mst) and the session
// step kinds (step_rff, step_dp_sgd, step_kernel_witness).
//
// The rule they check (docs/privacy.md 6.1, issue 23): once a request is
// admitted, the mechanism is a TOTAL function of the rows. Each target
// decodes its input into a small dataset and arbitrary request parameters,
// runs exactly the server's path (plan/releases.h: PlanRelease, or
// PlanSession + CheckStepQuery; the ledger's admission as far as it depends
// on the event; then ComputeRelease / ComputeMstRelease /
// ComputeSessionStep with a SeededNoiseSource), and aborts unless an
// admitted request returns OK with a finite answer of the planned shape. A
// refusal before admission is fine: nothing was read.
//
// Input layout (fuzz/corpus/make_seeds.py writes the same):
//   dataset header   relation, delta, columns (bounds, bins, levels,
//                    label), n                     (ReadDatasetHeader)
//   parameters       the target's own               (each *_fuzz.cc)
//   rows             one byte per cell, then more bytes for "inside"
//                    values; an exhausted input reads as zeros (BuildRows)
// A double is one selector byte: below kHostileDoubles.size() it names a
// value of that table, otherwise the next 8 bytes are the raw
// little-endian double (NaN and Inf included). Floats likewise with
// kHostileFloats and 4 raw bytes.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/privacy/conversion.h"
#include "core/privacy/events.h"
#include "core/privacy/noise_source.h"
#include "core/release/encoded_rows.h"
#include "dpcurator/v1/dpcurator.pb.h"
#include "fuzz/fuzz_check.h"
#include "proto/convert.h"
#include "server/plans.h"

namespace dpcurator::fuzz {

// Values that broke mechanisms before (issue 23) or sit at the edges of
// double arithmetic: denormals, the clip norm 1e-305, grid-range noise
// multipliers 1e30..1e300, float's 3e38, DBL_MAX, signs and zeros.
inline constexpr std::array<double, 40> kHostileDoubles = {
    0.0,      -0.0,    4.9e-324, 1e-320, 2.2250738585072014e-308, 1e-305, 1e-300, 1e-200,
    1e-100,   1e-30,   1e-9,     1e-6,   1e-3,   0.01,   0.1,    0.29,   0.5,    0.999999,
    1.0,      1.5,     2.0,      3.0,    10.0,   100.0,  1e4,    1e6,    1e9,    1e30,
    3e38,     1e100,   1e200,    1e300,  1e305,  1.7976931348623157e308, -1.0, -1e-6, -3e38,
    -1e300,   64.0,    0.0625};
inline constexpr uint8_t kRawDouble = 255;

inline constexpr std::array<float, 24> kHostileFloats = {
    0.0f,   -0.0f,   1e-45f,  1e-40f, 1.17549435e-38f, 1e-20f, 1e-3f,  0.5f,
    1.0f,   -1.0f,   2.0f,    100.0f, 1e4f,            -1e4f,  1e20f,  1e36f,
    -1e36f, 3e38f,   -3e38f,  3.4028235e38f, -3.4028235e38f, 1e-6f, -0.5f, 7.0f};
inline constexpr uint8_t kRawFloat = 255;

// A reader that never fails: past the end every byte is 0.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint64_t U64() {
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value |= uint64_t{Byte()} << (8 * i);
    return value;
  }
  double RawDouble() {
    const uint64_t bits = U64();
    double value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }
  double Double() {
    const uint8_t selector = Byte();
    if (selector < kHostileDoubles.size()) return kHostileDoubles[selector];
    if (selector == kRawDouble) return RawDouble();
    // Other selectors: a small positive value, the common case of real use.
    return static_cast<double>(selector - kHostileDoubles.size() + 1) / 16.0;
  }
  float Float() {
    const uint8_t selector = Byte();
    if (selector < kHostileFloats.size()) return kHostileFloats[selector];
    if (selector == kRawFloat) {
      uint32_t bits = 0;
      for (int i = 0; i < 4; ++i) bits |= uint32_t{Byte()} << (8 * i);
      float value;
      std::memcpy(&value, &bits, sizeof(value));
      return value;
    }
    return static_cast<float>(selector - static_cast<int>(kHostileFloats.size())) / 64.0f - 1.0f;
  }
  // One byte: 0..4 name edge counts, above a small count.
  int Count(int edge_max) {
    const uint8_t selector = Byte();
    switch (selector) {
      case 0:
        return 0;
      case 1:
        return edge_max;
      case 2:
        return edge_max + 1;
      case 3:
        return -1;
      case 4:
        return std::numeric_limits<int>::max();
      default:
        return 1 + (selector - 5) % 64;
    }
  }
  bool Bool() { return (Byte() & 1) != 0; }
  bool exhausted() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// The dataset as the server holds it after CreateDataset and UploadRows.
struct FuzzDataset {
  v1::Dataset dataset;
  data::Schema schema;
  data::Table table;
  release::EncodedRows rows;
};

// What the header declares; the rows are read after the target's
// parameters (BuildRows).
struct DatasetHeader {
  v1::Dataset dataset;
  int64_t n = 0;
};

inline constexpr int kMaxFuzzRows = 100;

// Relation, delta, schema and n. The schema goes through SchemaFromProto
// (CreateDataset's check); nullopt when it refuses.
inline std::optional<DatasetHeader> ReadDatasetHeader(FuzzInput* in) {
  DatasetHeader header;
  v1::Dataset& dataset = header.dataset;
  dataset.set_id("ds_fuzz");
  dataset.set_relation(in->Bool() ? v1::REPLACE_ONE : v1::ADD_REMOVE);
  constexpr double kDeltas[] = {1e-5, 1e-2, 1e-8, 1e-12};
  dataset.mutable_budget()->set_delta(kDeltas[in->Byte() % 4]);
  dataset.mutable_budget()->set_epsilon(1e300);  // the admission check is on finiteness
  int numeric = in->Byte() % 4;
  const int categorical = in->Byte() % 3;
  const int label_classes = in->Byte() % 4;  // 0: no label; else 1..3 levels
  if (numeric + categorical == 0) numeric = 1;
  v1::TableSchema& schema = *dataset.mutable_schema();
  // Bounds of legal schemas, including ones far from [0, 1].
  struct Bounds {
    double lower, upper;
    bool integer;
  };
  constexpr Bounds kBounds[] = {{0, 1, false},         {17, 90, true},      {-1e6, 1e6, false},
                                {-1, 0, false},        {0, 1e-3, false},    {-1e150, 1e150, false},
                                {0, 1e300, false},     {-5e-300, 5e-300, false}};
  for (int c = 0; c < numeric; ++c) {
    v1::ColumnSchema& column = *schema.add_columns();
    column.set_name(absl::StrFormat("x%d", c));
    column.set_type(v1::ColumnSchema::NUMERIC);
    const Bounds& b = kBounds[in->Byte() % 8];
    column.set_lower(b.lower);
    column.set_upper(b.upper);
    column.set_integer(b.integer);
    const int bins = in->Byte() % 4;  // interior edges, evenly spaced
    for (int e = 1; e <= bins; ++e) {
      double edge = b.lower + (b.upper - b.lower) * e / (bins + 1);
      if (b.integer) edge = std::round(edge) + 0.5;
      column.add_bins(edge);
    }
  }
  for (int c = 0; c < categorical; ++c) {
    v1::ColumnSchema& column = *schema.add_columns();
    column.set_name(absl::StrFormat("c%d", c));
    column.set_type(v1::ColumnSchema::CATEGORICAL);
    const int levels = 1 + in->Byte() % 5;
    for (int l = 0; l < levels; ++l) column.add_categories(absl::StrFormat("l%d", l));
    column.set_nullable(in->Bool());
  }
  if (label_classes > 0) {
    v1::ColumnSchema& column = *schema.add_columns();
    column.set_name("y");
    column.set_type(v1::ColumnSchema::CATEGORICAL);
    for (int l = 0; l < label_classes; ++l) column.add_categories(absl::StrFormat("y%d", l));
    schema.set_label("y");
  }
  header.n = 1 + in->Byte() % kMaxFuzzRows;
  dataset.set_row_count(header.n);
  dataset.set_sealed(true);
  if (!SchemaFromProto(schema).ok()) return std::nullopt;
  return header;
}

// The rows, as UploadRows stores them: each cell a token through
// Schema::ParseCell (clamping included). Cell byte: numeric 0 lower,
// 1 upper, 2 midpoint, 3 inside (one more byte), 4 far outside (clamped);
// categorical: a level, or missing. nullopt if the upload would refuse.
inline std::optional<FuzzDataset> BuildRows(const DatasetHeader& header, FuzzInput* in) {
  absl::StatusOr<data::Schema> schema = SchemaFromProto(header.dataset.schema());
  if (!schema.ok()) return std::nullopt;
  FuzzDataset out{header.dataset, *std::move(schema), {}, {}};
  const v1::TableSchema& proto = header.dataset.schema();
  const int columns = out.schema.num_columns();
  out.table.cells.resize(header.n, columns);
  for (int64_t r = 0; r < header.n; ++r) {
    for (int c = 0; c < columns; ++c) {
      const v1::ColumnSchema& column = proto.columns(c);
      const uint8_t cell = in->Byte();
      std::string token;
      if (column.type() == v1::ColumnSchema::NUMERIC) {
        const double lo = column.lower(), hi = column.upper();
        double value = lo;
        switch (cell % 5) {
          case 0:
            value = lo;
            break;
          case 1:
            value = hi;
            break;
          case 2:
            value = lo / 2 + hi / 2;
            break;
          case 3:
            value = lo + (hi / 255 - lo / 255) * in->Byte();
            break;
          default:
            value = (cell & 8) ? -1e308 : 1e308;
            break;
        }
        token = absl::StrFormat("%.17g", value);
      } else {
        const int levels = column.categories_size();
        const int choice = cell % (levels + (column.nullable() ? 1 : 0));
        token = choice < levels ? column.categories(choice) : "";
      }
      absl::StatusOr<data::ParsedCell> parsed = out.schema.ParseCell(c, token);
      if (!parsed.ok()) return std::nullopt;
      out.table.cells(r, c) = parsed->value;
      if (parsed->clamped) ++out.table.clamped_cells;
    }
  }
  out.rows = release::EncodeRows(out.schema, out.table);
  return out;
}

// The ledger's admission as far as it depends on the event (the dataset's
// cap is the curator's choice, so any finite epsilon can be admitted):
// defined for the relation and with a finite epsilon at the delta.
inline bool LedgerWouldAdmit(const privacy::PrivacyEvent& event, const v1::Dataset& dataset) {
  const privacy::NeighbouringRelation relation = RelationFromProto(dataset.relation());
  if (!event.IsValidFor(relation)) return false;
  absl::StatusOr<privacy::EpsilonReport> report =
      privacy::ComputeEpsilonReport(event, dataset.budget().delta());
  return report.ok() && std::isfinite(report->epsilon);
}

// DPC_FUZZ_VERBOSE=1: print whether each input was admitted (and why not),
// to see what a seed exercises.
inline bool Verbose() {
  static const bool verbose = [] {
    const char* value = std::getenv("DPC_FUZZ_VERBOSE");
    return value != nullptr && std::string(value) == "1";
  }();
  return verbose;
}
inline void Note(const char* what, const absl::Status& status) {
  if (Verbose()) std::fprintf(stderr, "fuzz: %s: %s\n", what, status.ToString().c_str());
}

// Aborts with the request and the status when an admitted computation
// failed after the rows were read.
inline void FailAfterRowsRead(const char* what, const std::string& request,
                              const absl::Status& status) {
  std::fprintf(stderr, "%s failed after the rows were read (issue 23: must be total)\n", what);
  std::fprintf(stderr, "  request: %s\n", request.c_str());
  std::fprintf(stderr, "  status: %s\n", status.ToString().c_str());
  std::abort();
}

template <typename Values>
bool AllFinite(const Values& values) {
  for (const auto v : values) {
    if (!std::isfinite(static_cast<double>(v))) return false;
  }
  return true;
}

template <typename Values>
std::string FirstNonFinite(const Values& values) {
  int64_t i = 0;
  for (const auto v : values) {
    if (!std::isfinite(static_cast<double>(v))) {
      return absl::StrFormat("index %d of %d is %g", i,
                             static_cast<int64_t>(std::size(values)), static_cast<double>(v));
    }
    ++i;
  }
  return "all finite";
}

// The planned feature dimension: rff 2k + the one-hot block
// (embed::RffFeatureMap::output_dim), charfn 2k.
inline int64_t RffFeatureDim(int num_frequencies, const data::Schema& schema) {
  return 2 * int64_t{num_frequencies} + data::FeatureLayout::ForFeatures(schema).categorical_dim;
}
inline int64_t CharfnFeatureDim(int num_frequencies) { return 2 * int64_t{num_frequencies}; }

// An embedding artefact (release or rff step) of the planned shape:
// feature_dim values per class, one total per class, every number finite.
inline void CheckEmbeddingArtefact(const v1::EmbeddingArtefact& artefact, int64_t feature_dim,
                                   int num_classes, const std::string& request) {
  DPC_FUZZ_CHECK(artefact.feature_dim() == feature_dim && artefact.num_classes() == num_classes &&
                     artefact.class_values_size() == feature_dim * num_classes &&
                     artefact.class_totals_size() == num_classes,
                 "embedding of the wrong shape: feature_dim %d (planned %d), classes %d "
                 "(planned %d), %d values, %d totals\n  request: %s",
                 artefact.feature_dim(), static_cast<int>(feature_dim), artefact.num_classes(),
                 num_classes, artefact.class_values_size(), artefact.class_totals_size(),
                 request.c_str());
  DPC_FUZZ_CHECK(AllFinite(artefact.class_values()), "class_values: %s\n  request: %s",
                 FirstNonFinite(artefact.class_values()).c_str(), request.c_str());
  DPC_FUZZ_CHECK(AllFinite(artefact.class_totals()), "class_totals: %s\n  request: %s",
                 FirstNonFinite(artefact.class_totals()).c_str(), request.c_str());
  const double scalars[] = {artefact.length_scale(),   artefact.numeric_weight(),
                            artefact.sensitivity(),    artefact.noise_multiplier(),
                            artefact.noise_stddev(),   artefact.noisy_mean_distance(),
                            artefact.distance_sensitivity(), artefact.row_diameter(),
                            artefact.numeric_length_scale()};
  DPC_FUZZ_CHECK(AllFinite(scalars), "an artefact scalar is not finite: %s\n  request: %s",
                 FirstNonFinite(scalars).c_str(), request.c_str());
}

// Runs `body`, turning an escaping exception (bad_alloc included) into a
// finding: after the rows are read it is a failure like any other.
template <typename Body>
void NoThrow(const char* what, const std::string& request, Body body) {
  try {
    body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s threw %s after admission\n  request: %s\n", what, e.what(),
                 request.c_str());
    std::abort();
  }
}


// The privacy level of a release request: epsilon, noise multiplier, or
// neither (refused).
inline void ReadReleasePrivacy(FuzzInput* in, v1::ReleaseRequest* request) {
  switch (in->Byte() % 3) {
    case 0:
      request->set_epsilon(in->Double());
      break;
    case 1:
      request->set_noise_multiplier(in->Double());
      break;
    default:
      break;
  }
}

// A session's steps, sampling rate and privacy level (the step kind is the
// target's).
inline void ReadSessionCommon(FuzzInput* in, v1::SessionParams* params) {
  constexpr int64_t kSteps[] = {1, 2, 10, 1000, int64_t{1} << 30, (int64_t{1} << 30) + 1, 0, -1};
  params->set_steps(kSteps[in->Byte() % 8]);
  params->set_sampling_rate(in->Double());
  switch (in->Byte() % 3) {
    case 0:
      params->set_epsilon(in->Double());
      break;
    case 1:
      params->set_noise_multiplier(in->Double());
      break;
    default:
      break;
  }
}

// Up to 8 floats, then a fill pattern over them: cyclic, picked at random
// (seeded from the input), or the first value with every k-th replaced by
// the second. Network weights and query points are filled this way.
class FloatPattern {
 public:
  explicit FloatPattern(FuzzInput* in) {
    const int size = 1 + in->Byte() % 8;
    for (int i = 0; i < size; ++i) palette_.push_back(in->Float());
    mode_ = in->Byte() % 3;
    state_ = 0x9e3779b97f4a7c15ULL * (1 + in->Byte());
    stride_ = 1 + in->Byte() % 16;
  }
  float At(int64_t i) {
    switch (mode_) {
      case 0:
        return palette_[static_cast<size_t>(i) % palette_.size()];
      case 1: {
        state_ ^= state_ << 13;
        state_ ^= state_ >> 7;
        state_ ^= state_ << 17;
        return palette_[state_ % palette_.size()];
      }
      default:
        return (i % stride_ == stride_ - 1 && palette_.size() > 1) ? palette_[1] : palette_[0];
    }
  }
  std::string Describe() const {
    std::string out = absl::StrFormat("mode %d stride %d palette [", mode_, stride_);
    for (const float v : palette_) absl::StrAppendFormat(&out, " %a(%g)", v, v);
    return out + " ]";
  }

 private:
  std::vector<float> palette_;
  int mode_ = 0;
  uint64_t state_ = 1;
  int stride_ = 1;
};

inline std::string DescribeDataset(const FuzzDataset& ds) {
  return absl::StrFormat("dataset {relation %s delta %g n %d schema { %s }}",
                         v1::NeighbouringRelation_Name(ds.dataset.relation()),
                         ds.dataset.budget().delta(), ds.dataset.row_count(),
                         ds.dataset.schema().ShortDebugString());
}

// A one-shot release through the server's path: PlanRelease, the ledger's
// admission, then `compute` (ComputeRelease or ComputeMstRelease). Returns
// the delivered release (serialized and parsed, as the ledger stores it),
// nullopt when refused before admission; aborts when an admitted release
// fails or throws.
template <typename Compute>
std::optional<v1::Release> AdmitAndRun(const v1::ReleaseRequest& request, const FuzzDataset& ds,
                                       const std::string& description, Compute compute) {
  absl::StatusOr<server::ReleasePlan> plan = server::PlanRelease(request, ds.dataset, ds.schema);
  if (!plan.ok() || !plan->event.has_value()) {
    Note("plan refused", plan.status());
    return std::nullopt;
  }
  if (!LedgerWouldAdmit(*plan->event, ds.dataset)) {
    Note("ledger refused", absl::OkStatus());
    return std::nullopt;
  }
  Note("admitted", absl::OkStatus());
  absl::StatusOr<privacy::EpsilonReport> alone =
      privacy::ComputeEpsilonReport(*plan->event, ds.dataset.budget().delta());
  std::optional<v1::Release> delivered;
  NoThrow("release", description, [&] {
    absl::StatusOr<v1::Release> release = compute(*plan, alone->epsilon);
    if (!release.ok()) FailAfterRowsRead("release", description, release.status());
    v1::Release parsed;
    DPC_FUZZ_CHECK(parsed.ParseFromString(release->SerializeAsString()),
                   "release does not parse\n  request: %s", description.c_str());
    delivered = std::move(parsed);
  });
  return delivered;
}

// One session step through the server's path: PlanSession, the ledger's
// admission of the T reserved steps, CheckStepQuery and CheckStepOrder
// (before any row), then ComputeSessionStep with a seeded noise source and
// SetStepAnswer (what Step delivers). Returns the response and the
// resolved session, nullopt when refused before the rows are read; aborts
// when an admitted step fails or throws.
struct StepOutcome {
  v1::Session session;
  v1::SessionStepResponse response;
};
inline std::optional<StepOutcome> AdmitAndStep(const v1::OpenSessionRequest& open,
                                               const v1::SessionStepRequest& step,
                                               const FuzzDataset& ds, uint64_t noise_seed,
                                               const std::string& description) {
  absl::StatusOr<server::SessionPlan> plan = server::PlanSession(open, ds.dataset);
  if (!plan.ok() || !plan->step_event.has_value()) {
    Note("session plan refused", plan.status());
    return std::nullopt;
  }
  absl::StatusOr<privacy::PrivacyEvent> reserved =
      privacy::PrivacyEvent::SelfCompose(*plan->step_event, plan->steps);
  if (!reserved.ok() || !LedgerWouldAdmit(*reserved, ds.dataset)) {
    Note("ledger refused the session", reserved.status());
    return std::nullopt;
  }
  StepOutcome outcome;
  v1::Session& session = outcome.session;
  session.set_id("ses_fuzz");
  session.set_dataset_id(ds.dataset.id());
  *session.mutable_params() = plan->resolved_params;
  session.set_state("OPEN");
  session.set_steps_reserved(plan->steps);
  session.set_noise_multiplier(plan->noise_multiplier);
  if (absl::Status query = server::CheckStepQuery(session.params(), step); !query.ok()) {
    Note("step query refused", query);
    return std::nullopt;
  }
  if (!server::CheckStepOrder(session, step.step()).ok()) return std::nullopt;
  Note("step admitted", absl::OkStatus());
  const std::string full = absl::StrFormat("%s\n  resolved session: %s", description,
                                           session.ShortDebugString());
  NoThrow("session step", full, [&] {
    privacy::SeededNoiseSource noise(noise_seed);
    absl::StatusOr<std::string> answer =
        server::ComputeSessionStep(session, ds.dataset, ds.rows, "ses_fuzz/0", step, &noise);
    if (!answer.ok()) FailAfterRowsRead("session step", full, answer.status());
    const absl::Status set = server::SetStepAnswer(session.params(), *answer, &outcome.response);
    DPC_FUZZ_CHECK(set.ok(), "step answer does not parse: %s\n  request: %s",
                   set.ToString().c_str(), full.c_str());
  });
  return outcome;
}

}  // namespace dpcurator::fuzz

#endif  // DPCURATOR_FUZZ_ENGINE_FUZZ_H_
