#ifndef DPCURATOR_PROTO_COLLECTION_H_
#define DPCURATOR_PROTO_COLLECTION_H_

// Local-DP collections: the derivations from public CollectionParams that the
// server (CreateCollection), the device (SubmitReports) and the trainer
// (`train sinkhorn`) must agree on. Everything here is a function of the
// public schema and parameters only, never of data.

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/ldp/mechanism.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator {

// The collection's record schema with the label cleared: a label column is
// then encoded as an ordinary one-hot block, like every other categorical.
absl::StatusOr<data::Schema> CollectionSchema(const v1::CollectionParams& params);

// Encoded width d = d_num + V of the label-less schema.
int CollectionDimension(const data::Schema& label_free);

// Where a collection's records live when the device projects and noises
// them: record = scale * encoded + offset, per coordinate. Tables: the
// encoded row itself (numerics in [0, 1], one-hot blocks). Image schemas:
// pixels mapped to [-1, 1] (2v - 1), the LDP paper's pixel space
// (ldp-sinkhorn.md Sec. 3, "pixels in [-1,1]"), so the origin-centred ball
// is centred on mid-grey and a blank image is not its most extreme point.
// A function of the public schema only.
struct RecordSpace {
  double scale = 1.0;
  double offset = 0.0;
  // The box the records' coordinates lie in before noise; a generator of
  // this collection's records bounds its outputs to it (images), or is
  // unbounded when low == high == 0 (tables: one-hot blocks are not boxes).
  double low = 0.0;
  double high = 0.0;
};
RecordSpace CollectionRecordSpace(const data::Schema& label_free);

// Encoded rows (n x d) to records and back, coordinate-wise.
Eigen::MatrixXd ToRecordSpace(const RecordSpace& space, Eigen::MatrixXd encoded);
Eigen::MatrixXd FromRecordSpace(const RecordSpace& space, Eigen::MatrixXd records);

// The default public radius: the largest norm of an encoded row (numerics in
// [0,1], one one-hot bit per categorical column), sqrt(d_num + C) for the l2
// ball and d_num + C for the l1 ball, C the number of categorical columns.
// (The "sqrt(d_num + V)" / "d_num + V" over-bounds this for V > C; we
// use the tight bound.) Images in [-1, 1]: sqrt(pixels) and pixels, the
// norms of an all-black or all-white image.
double DefaultCollectionRadius(const data::Schema& label_free, ldp::LdpKind kind);

// Validates the parameters, fills in the default radius, and builds the
// mechanism. `resolved` (optional) receives the parameters with the radius
// set and the schema canonical.
absl::StatusOr<ldp::LdpMechanism> MechanismFromParams(const v1::CollectionParams& params,
                                                      v1::CollectionParams* resolved = nullptr);

// The mechanism of a stored collection (params already resolved).
absl::StatusOr<ldp::LdpMechanism> MechanismFromCollection(const v1::Collection& collection);

// A report id is exactly this many random bytes (128 bits), drawn on the
// device; the server stores each id once.
inline constexpr size_t kReportIdBytes = 16;

// Largest |value| accepted in a report coordinate of this collection: the
// tail bound of its own noise law, LdpMechanism::ReportCoordinateBound
// (docs/privacy.md 2.6 "Report bounds and quotas"): an honest device's
// report exceeds it with probability at most ldp::kHonestReportRejection
// (1e-9), while a report beyond it cannot come from the declared mechanism
// and could only drag the trainer's fit (issue 24, item 3). About R + 22 b
// for Laplace at d = 4 (b = 2R / eps), R + 6.8 sigma for Gaussian.
// A function of public parameters only, so refusing a report reveals
// nothing about other reports.
double ReportValueBound(const ldp::LdpMechanism& mechanism);

// The server's check of one report against its collection (dimension and
// value bound from the stored, resolved collection): id length, number of
// values, every value finite and within the bound. InvalidArgument names
// the first problem; the message is the rejection reason sent back to the
// device. Pure, so the fuzz target (fuzz/report_fuzz.cc) runs the same code.
absl::Status ValidateReport(const v1::Report& report, int dimension, double value_bound);

}  // namespace dpcurator

#endif  // DPCURATOR_PROTO_COLLECTION_H_
