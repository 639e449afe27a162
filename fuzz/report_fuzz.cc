// Fuzz target: the LDP report decoder and validator (SubmitReports).
//
// Input: one byte choosing a fixed collection (laplace-l1 over a mixed
// schema with a label, or gaussian-l2 over four numerics), then a serialized
// SubmitReportsRequest, decoded as the gRPC server decodes it (protobuf
// ParseFromArray) and checked report by report with ValidateReport against
// the collection's stored dimension and ReportValueBound of the collection's
// own mechanism (the noise law's tail bound, docs/privacy.md 2.6), the exact
// calls Store::IngestReports makes.
//
// Invariants, beyond "no crash":
// - the validator agrees with an independent statement of the rule: a
//   report is accepted iff its id has 16 bytes, it has `dimension` values,
//   and every value is finite with |v| <= the bound; a refusal is
//   InvalidArgument with a reason;
// - the bound is the documented tail bound, restated here from the noise
//   law (R + 2g + s ln(d / 1e-9) for Laplace, R + 2g + s sqrt(2 ln(2d /
//   1e-9)) for Gaussian, s the applied scale), and far below the old
//   garbage bound 1e6 (R + 1);
// - the device side is accepted: the first report's values, projected and
//   noised by the collection's own mechanism (client/device.cc's path),
//   pass the server's validation (an honest report fails with probability
//   at most 1e-9, so a failure here is a bug, not bad luck);
// - a stored collection resolves back to the same mechanism.

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "absl/strings/str_cat.h"
#include "core/privacy/noise_source.h"
#include "fuzz/fuzz_check.h"
#include "proto/collection.h"

namespace {

namespace v1 = dpcurator::v1;

struct FixedCollection {
  v1::Collection collection;
  std::unique_ptr<dpcurator::ldp::LdpMechanism> mechanism;
};

v1::ColumnSchema* AddColumn(v1::TableSchema* schema, const std::string& name) {
  v1::ColumnSchema* column = schema->add_columns();
  column->set_name(name);
  return column;
}

FixedCollection Make(const v1::CollectionParams& params) {
  FixedCollection fixed;
  v1::CollectionParams resolved;
  auto mechanism = dpcurator::MechanismFromParams(params, &resolved);
  DPC_FUZZ_CHECK(mechanism.ok(), "fixed collection: %s",
                 std::string(mechanism.status().message()).c_str());
  fixed.collection.set_id("col_fuzz");
  *fixed.collection.mutable_params() = resolved;
  fixed.collection.set_dimension(mechanism->dimension());
  fixed.mechanism = std::make_unique<dpcurator::ldp::LdpMechanism>(*std::move(mechanism));
  // What the server does with a stored collection (DownloadReports, trainer).
  auto again = dpcurator::MechanismFromCollection(fixed.collection);
  DPC_FUZZ_CHECK(again.ok() && again->dimension() == fixed.mechanism->dimension() &&
                     again->noise_scale() == fixed.mechanism->noise_scale(),
                 "stored collection does not resolve to its mechanism");
  return fixed;
}

const std::vector<FixedCollection>& Collections() {
  static const auto* collections = [] {
    auto* out = new std::vector<FixedCollection>();
    v1::CollectionParams mixed;
    auto* age = AddColumn(mixed.mutable_schema(), "age");
    age->set_type(v1::ColumnSchema::NUMERIC);
    age->set_lower(17);
    age->set_upper(90);
    auto* income = AddColumn(mixed.mutable_schema(), "income");
    income->set_type(v1::ColumnSchema::NUMERIC);
    income->set_lower(-1000);
    income->set_upper(1e6);
    auto* city = AddColumn(mixed.mutable_schema(), "city");
    city->set_type(v1::ColumnSchema::CATEGORICAL);
    for (const char* c : {"Paris", "Rome", "Oslo"}) city->add_categories(c);
    city->set_nullable(true);
    auto* y = AddColumn(mixed.mutable_schema(), "y");
    y->set_type(v1::ColumnSchema::CATEGORICAL);
    y->add_categories("no");
    y->add_categories("yes");
    mixed.mutable_schema()->set_label("y");
    mixed.set_mechanism("laplace-l1");
    mixed.set_epsilon(1.0);
    out->push_back(Make(mixed));

    v1::CollectionParams numeric;
    for (int j = 0; j < 4; ++j) {
      auto* x = AddColumn(numeric.mutable_schema(), absl::StrCat("x", j));
      x->set_type(v1::ColumnSchema::NUMERIC);
      x->set_lower(0);
      x->set_upper(1);
    }
    numeric.set_mechanism("gaussian-l2");
    numeric.set_epsilon(2.0);
    numeric.set_delta(1e-5);
    numeric.set_radius(1.5);
    out->push_back(Make(numeric));
    return out;
  }();
  return *collections;
}

bool Acceptable(const v1::Report& report, int dimension, double bound) {
  if (report.report_id().size() != 16) return false;
  if (report.values_size() != dimension) return false;
  for (double v : report.values()) {
    if (std::isnan(v) || std::isinf(v) || v > bound || v < -bound) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Protobuf logs every string field with invalid UTF-8 it refuses; the
  // refusal itself is what matters here.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  const auto& collections = Collections();
  const FixedCollection& fixed = collections[data[0] % collections.size()];
  v1::SubmitReportsRequest batch;
  if (!batch.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;

  const int dimension = fixed.collection.dimension();
  const dpcurator::ldp::LdpMechanism& mechanism = *fixed.mechanism;
  const double bound = dpcurator::ReportValueBound(mechanism);
  const double radius = fixed.collection.params().radius();
  const double s = mechanism.applied_noise_scale();
  const double tail = mechanism.kind() == dpcurator::ldp::LdpKind::kLaplaceL1
                          ? s * std::log(dimension / 1e-9)
                          : s * std::sqrt(2.0 * std::log(2.0 * dimension / 1e-9));
  const double expected = radius + 2.0 * mechanism.noise_grid() + tail;
  DPC_FUZZ_CHECK(std::isfinite(bound) && std::fabs(bound - expected) <= 1e-12 * expected &&
                     bound < 1e6 * (radius + 1.0),
                 "bound %g, the noise law's tail bound is %g", bound, expected);
  for (int i = 0; i < batch.reports_size(); ++i) {
    const v1::Report& report = batch.reports(i);
    const absl::Status status = dpcurator::ValidateReport(report, dimension, bound);
    const bool acceptable = Acceptable(report, dimension, bound);
    DPC_FUZZ_CHECK(status.ok() == acceptable, "report %d: validator says '%s', rule says %s", i,
                   status.ToString().c_str(), acceptable ? "accept" : "refuse");
    if (!status.ok()) {
      DPC_FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument &&
                         !status.message().empty(),
                     "refusal without a reason: %s", status.ToString().c_str());
    }
  }

  // The device side: whatever record a device holds, its privatized report
  // passes the server's check. Records with non-finite entries are refused
  // on the device (Privatize), never sent.
  if (batch.reports_size() > 0 && batch.reports(0).values_size() >= dimension) {
    Eigen::VectorXd record(dimension);
    for (int j = 0; j < dimension; ++j) record(j) = batch.reports(0).values(j);
    // Any finite record, however large: the projections land inside the
    // ball at every scale (fuzz/README.md, "Findings").
    dpcurator::privacy::SeededNoiseSource noise(static_cast<uint64_t>(size) * 0x9e3779b97f4a7c15ULL);
    auto privatized = fixed.mechanism->Privatize(record, &noise);
    if (!record.allFinite()) {
      DPC_FUZZ_CHECK(!privatized.ok(), "a non-finite record was privatized");
    } else {
      DPC_FUZZ_CHECK(privatized.ok(), "Privatize failed: %s",
                     std::string(privatized.status().message()).c_str());
      const Eigen::VectorXd projected = fixed.mechanism->Project(record);
      const double norm = fixed.mechanism->kind() == dpcurator::ldp::LdpKind::kLaplaceL1
                              ? projected.lpNorm<1>()
                              : projected.stableNorm();
      DPC_FUZZ_CHECK(norm <= fixed.mechanism->radius(),
                     "projection has norm %g above the radius %g", norm,
                     fixed.mechanism->radius());
      v1::Report report;
      report.set_report_id(std::string(16, '\x5a'));
      for (double v : *privatized) report.add_values(v);
      const absl::Status status = dpcurator::ValidateReport(report, dimension, bound);
      DPC_FUZZ_CHECK(status.ok(), "a device report is refused: %s", status.ToString().c_str());
    }
  }
  return 0;
}
