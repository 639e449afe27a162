#ifndef DPCURATOR_CLIENT_DEVICE_H_
#define DPCURATOR_CLIENT_DEVICE_H_

// The device side of a local-DP collection: encode a record under the
// collection's label-less schema, privatise it locally (projection onto the
// public ball plus noise, core/ldp/mechanism.h) and submit the reports with
// random 128-bit ids over the acknowledged SubmitReports stream.

#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "client/connection.h"
#include "core/data/image_set.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/ldp/mechanism.h"
#include "core/privacy/noise_source.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// The device's own floor: the weakest privacy it will apply to its record,
// whatever a server announces. Defaults: epsilon <= 10 per report (the
// local-DP paper's experiments stay within 10; at 10 one report's likelihood
// ratio can reach e^10 ~ 22,000, already little protection) and, for
// gaussian-l2, delta <= 1e-5.
struct DeviceLimits {
  static constexpr double kDefaultMaxEpsilon = 10.0;
  static constexpr double kDefaultMaxDelta = 1e-5;
  double max_epsilon = kDefaultMaxEpsilon;
  double max_delta = kDefaultMaxDelta;
};

// OK when the announced parameters are at least as private as `limits`;
// otherwise FailedPrecondition naming the limit hit, the announced value and
// the option that raises the limit. Nothing is privatised or sent then.
absl::Status CheckDeviceLimits(const v1::CollectionParams& announced, const DeviceLimits& limits);

// Encodes each row of `table` (read under `label_free`, the collection's
// schema with the label cleared) with FeatureLayout: numerics scaled to
// [0,1] by the declared bounds, one one-hot block per categorical column;
// then maps it into the collection's record space (proto/collection.h:
// image pixels to [-1, 1]).
Eigen::MatrixXd EncodeRows(const data::Schema& label_free, const data::Table& table);

// A device's images as a table under `label_free` (an image schema): the
// images whose label is `only_class` (all of them when it is < 0), pixels
// as 8-bit levels, as the store keeps them. InvalidArgument when the
// schema has no image column or the shapes differ.
absl::StatusOr<data::Table> ImageTable(const data::Schema& label_free,
                                       const data::ImageSet& images, int only_class);

// 16 random bytes from OpenSSL (privacy::SecureRandomU64 twice).
std::string NewReportId();

// Privatises every encoded row (n x d) with `mechanism` and `noise`, and
// gives each report a fresh random id.
absl::StatusOr<std::vector<v1::Report>> PrivatizeReports(const ldp::LdpMechanism& mechanism,
                                                         const Eigen::MatrixXd& encoded,
                                                         privacy::NoiseSource* noise);

struct SubmitSummary {
  int64_t accepted = 0;
  int64_t duplicates = 0;
  // Rejections with `index` rewritten to the report's position in the input.
  std::vector<v1::Rejection> rejections;
  // Streams opened (1 when nothing broke).
  int attempts = 0;
};

// Sends `reports` in batches of `batch_size` over SubmitReports, one ack per
// batch (sent by the server after the batch's commit). A broken stream is
// reopened and the unacknowledged batches resent: a report id already stored
// comes back as a duplicate, so a resend never stores a report twice. Errors
// other than transport failures (closed collection, permission) end it.
absl::StatusOr<SubmitSummary> SubmitReports(Connection& connection,
                                            const std::string& collection_id,
                                            const std::vector<v1::Report>& reports,
                                            int batch_size = 1000, int max_attempts = 5);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_DEVICE_H_
