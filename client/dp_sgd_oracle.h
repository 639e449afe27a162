#ifndef DPCURATOR_CLIENT_DP_SGD_ORACLE_H_
#define DPCURATOR_CLIENT_DP_SGD_ORACLE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <Eigen/Core>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// What a dp_sgd session is opened with (docs/privacy.md 2.9).
struct DpSgdSessionOptions {
  std::string dataset_id;
  // Empty: a fresh random key. Reusing a key reopens (replays) the same
  // session, so a trainer restarted after a dropped connection is not
  // charged twice.
  std::string idempotency_key;
  double sampling_rate = 0.0;  // q
  // Exactly one: the privacy of all T steps (calibrated by the server at
  // the dataset's delta) or the per-step noise multiplier sigma.
  std::optional<double> epsilon;
  std::optional<double> noise_multiplier;
  int64_t steps = 0;  // T, reserved at open
  v1::DpSgdParams network;
  // Retries of a call that failed in transport (UNAVAILABLE,
  // DEADLINE_EXCEEDED) or hit the per-session step rate
  // (RESOURCE_EXHAUSTED), with doubling waits from initial_backoff.
  int max_attempts = 8;
  std::chrono::milliseconds initial_backoff{50};
};

// The trainer's side of a dp_sgd session: a remote DP-SGD oracle. Step
// sends the current parameters (nn::Mlp::parameters() of the network
// declared at open, as float) and returns the server's noisy clipped
// gradient, already divided by the public divisor. A retried step keeps its
// index, so the server replays the stored answer (no second charge).
class DpSgdOracle {
 public:
  // `connection` must outlive the oracle.
  static absl::StatusOr<DpSgdOracle> Open(Connection* connection,
                                          const DpSgdSessionOptions& options);
  // An open session by id (a resumed trainer); it must be a dp_sgd session.
  static absl::StatusOr<DpSgdOracle> Resume(Connection* connection, const std::string& session_id,
                                            int max_attempts = 8);

  // Step `index` (0-based; dp_sgd steps run in order: index = steps used,
  // or the last index again to fetch its answer once more).
  absl::StatusOr<Eigen::VectorXf> Step(int64_t index, const Eigen::VectorXf& parameters);

  // Closes the session; the steps not run are refunded.
  absl::StatusOr<v1::Session> Close();

  // The session as last seen (resolved params: row_width, num_parameters,
  // noise multiplier; steps used, epsilon reserved and spent).
  const v1::Session& session() const { return session_; }
  int64_t num_parameters() const { return session_.params().dp_sgd().num_parameters(); }

 private:
  DpSgdOracle(Connection* connection, v1::Session session, int max_attempts,
              std::chrono::milliseconds backoff)
      : connection_(connection),
        session_(std::move(session)),
        max_attempts_(max_attempts),
        backoff_(backoff) {}

  Connection* connection_;
  v1::Session session_;
  int max_attempts_;
  std::chrono::milliseconds backoff_;
};

// Whether a failed call may be retried unchanged.
bool IsRetryable(grpc::StatusCode code);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_DP_SGD_ORACLE_H_
