#include "client/device.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/data/encoder.h"
#include "core/util/status_macros.h"
#include "proto/collection.h"

namespace dpcurator::client {

Eigen::MatrixXd EncodeRows(const data::Schema& label_free, const data::Table& table) {
  const data::FeatureLayout layout = data::FeatureLayout::ForFeatures(label_free);
  return ToRecordSpace(CollectionRecordSpace(label_free),
                       data::EncodeFeatures(label_free, layout, table));
}

absl::StatusOr<data::Table> ImageTable(const data::Schema& label_free,
                                       const data::ImageSet& images, int only_class) {
  if (!label_free.image_index().has_value()) {
    return absl::InvalidArgumentError(
        "this collection's records are not images: submit them with --csv");
  }
  const data::Column& column = label_free.column(*label_free.image_index());
  if (images.height != column.image_height || images.width != column.image_width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the images are ", images.height, "x", images.width, " but the collection's are ",
        column.image_height, "x", column.image_width));
  }
  std::vector<int64_t> chosen;
  for (int64_t i = 0; i < images.size(); ++i) {
    if (only_class < 0 || images.labels[i] == only_class) chosen.push_back(i);
  }
  const int64_t pixels = images.pixels_per_image();
  data::Table table;
  table.cells = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(chosen.size()),
                                      label_free.num_columns());
  table.pixels.resize(chosen.size() * static_cast<size_t>(pixels));
  for (size_t r = 0; r < chosen.size(); ++r) {
    const float* source = images.pixels.data() + chosen[r] * pixels;
    uint8_t* target = table.pixels.data() + r * static_cast<size_t>(pixels);
    // ImageSet pixels are level / 255: back to the level the store keeps.
    for (int64_t p = 0; p < pixels; ++p) {
      target[p] = static_cast<uint8_t>(std::lround(std::clamp(source[p], 0.0f, 1.0f) * 255.0f));
    }
  }
  return table;
}

absl::Status CheckDeviceLimits(const v1::CollectionParams& announced, const DeviceLimits& limits) {
  const double epsilon = announced.epsilon();
  if (!(epsilon > 0) || !std::isfinite(epsilon)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to privatise: the collection announces epsilon ", epsilon,
        ", not a positive finite number; nothing was sent"));
  }
  if (!(epsilon <= limits.max_epsilon)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to privatise: the collection announces epsilon ", epsilon,
        " per report, above this device's ceiling --max-epsilon ", limits.max_epsilon,
        " (raise --max-epsilon or DPCURATOR_MAX_EPSILON only if you accept weaker privacy "
        "for your record; nothing was sent)"));
  }
  if (announced.mechanism() == "gaussian-l2" && !(announced.delta() <= limits.max_delta)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to privatise: the collection announces delta ", announced.delta(),
        ", above this device's ceiling --max-delta ", limits.max_delta,
        " (raise --max-delta or DPCURATOR_MAX_DELTA only if you accept weaker privacy for "
        "your record; nothing was sent)"));
  }
  return absl::OkStatus();
}

std::string NewReportId() {
  const uint64_t words[2] = {privacy::SecureRandomU64(), privacy::SecureRandomU64()};
  std::string id(16, '\0');
  std::memcpy(id.data(), words, sizeof(words));
  return id;
}

absl::StatusOr<std::vector<v1::Report>> PrivatizeReports(const ldp::LdpMechanism& mechanism,
                                                         const Eigen::MatrixXd& encoded,
                                                         privacy::NoiseSource* noise) {
  std::vector<v1::Report> reports;
  reports.reserve(encoded.rows());
  for (Eigen::Index i = 0; i < encoded.rows(); ++i) {
    auto noisy = mechanism.Privatize(encoded.row(i).transpose(), noise);
    if (!noisy.ok()) {
      return absl::Status(noisy.status().code(),
                          absl::StrCat("row ", i + 1, ": ", noisy.status().message()));
    }
    v1::Report& report = reports.emplace_back();
    report.set_report_id(NewReportId());
    report.mutable_values()->Add(noisy->data(), noisy->data() + noisy->size());
  }
  return reports;
}

namespace {

// RESOURCE_EXHAUSTED is final: the server's per-token report quota
// (docs/privacy.md 2.6) or a message over gRPC's size limit; a retry would
// be refused the same way.
bool Retryable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::CANCELLED:
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<SubmitSummary> SubmitReports(Connection& connection,
                                            const std::string& collection_id,
                                            const std::vector<v1::Report>& reports,
                                            int batch_size, int max_attempts) {
  if (batch_size <= 0) return absl::InvalidArgumentError("--batch must be positive");
  const int64_t n = static_cast<int64_t>(reports.size());
  const int64_t num_batches = (n + batch_size - 1) / batch_size;
  SubmitSummary summary;
  // Acks arrive in stream order, so the unacknowledged batches are always the
  // suffix from `acked`.
  int64_t acked = 0;
  grpc::Status last_status;
  while (acked < num_batches) {
    if (summary.attempts >= max_attempts) {
      return RpcError(last_status, absl::StrCat("SubmitReports gave up after ", max_attempts,
                                                " attempts with ", num_batches - acked,
                                                " batches unacknowledged"));
    }
    if (summary.attempts > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200 << std::min(summary.attempts, 5)));
    }
    ++summary.attempts;
    const int64_t first = acked;
    auto context = connection.NewContext();
    auto stream = connection.collections().SubmitReports(context.get());
    // One thread writes the batches while this one reads the acks.
    std::thread writer([&] {
      v1::SubmitReportsRequest batch;
      for (int64_t b = first; b < num_batches; ++b) {
        batch.Clear();
        if (b == first) batch.set_collection_id(collection_id);
        const int64_t begin = b * batch_size;
        const int64_t end = std::min<int64_t>(n, begin + batch_size);
        batch.mutable_reports()->Reserve(static_cast<int>(end - begin));
        for (int64_t i = begin; i < end; ++i) *batch.add_reports() = reports[i];
        if (!stream->Write(batch)) return;  // broken; Finish() says why
      }
      stream->WritesDone();
    });
    v1::SubmitReportsAck ack;
    while (stream->Read(&ack)) {
      const int64_t batch = first + ack.batch_index();
      if (batch != acked) {
        // Out of order: should never happen; stop trusting this stream.
        context->TryCancel();
        break;
      }
      summary.accepted += ack.accepted();
      summary.duplicates += ack.duplicates();
      for (const auto& rejection : ack.rejections()) {
        v1::Rejection& global = summary.rejections.emplace_back(rejection);
        global.set_index(static_cast<int32_t>(batch * batch_size + rejection.index()));
      }
      ++acked;
    }
    writer.join();
    last_status = stream->Finish();
    if (last_status.ok() && acked == num_batches) break;
    if (!last_status.ok() && !Retryable(last_status.error_code())) {
      return RpcError(last_status, "SubmitReports");
    }
  }
  return summary;
}

}  // namespace dpcurator::client
