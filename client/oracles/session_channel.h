#ifndef DPCURATOR_CLIENT_ORACLES_SESSION_CHANNEL_H_
#define DPCURATOR_CLIENT_ORACLES_SESSION_CHANNEL_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/connection.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// What every session is opened with, whatever its step kind (docs/privacy.md
// 3.4). The step kind's own parameters go beside it (DpSgdSessionOptions,
// KernelSessionOptions).
struct SessionOpenOptions {
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
  // Retries of a call that failed in transport (UNAVAILABLE,
  // DEADLINE_EXCEEDED) or hit the per-session step rate
  // (RESOURCE_EXHAUSTED), with doubling waits from initial_backoff.
  int max_attempts = 8;
  std::chrono::milliseconds initial_backoff{50};
};

// One open session seen from a trainer: the OpenSession / Step /
// CloseSession calls with retries. Every retry of a call repeats it
// unchanged, so a retried step keeps its index and the server replays the
// stored answer instead of charging a second step. The step kinds' oracles
// (dp_sgd_oracle.h, kernel_oracle.h) build their queries and read their
// answers around it.
class SessionChannel {
 public:
  // Opens a session of the step kind set in `step` (one case of
  // SessionParams.step; its other fields are taken from `options`).
  // `kind` names the kind in errors and in a fresh idempotency key.
  static absl::StatusOr<SessionChannel> Open(Connection* connection,
                                             const SessionOpenOptions& options,
                                             const v1::SessionParams& step,
                                             absl::string_view kind);
  // An open session by id (a resumed trainer). Refused unless its step
  // kind is `expected`; `how_to_open` tells the user what to run instead.
  static absl::StatusOr<SessionChannel> Resume(Connection* connection,
                                               const std::string& session_id,
                                               v1::SessionParams::StepCase expected,
                                               absl::string_view kind,
                                               absl::string_view how_to_open,
                                               int max_attempts = 8);

  // Sends `request` (its session id is set here) and returns the response;
  // the session is updated from it.
  absl::StatusOr<v1::SessionStepResponse> Step(v1::SessionStepRequest request);

  // Closes the session; the steps not run are refunded.
  absl::StatusOr<v1::Session> Close();

  const v1::Session& session() const { return session_; }
  absl::string_view kind() const { return kind_; }

 private:
  SessionChannel(Connection* connection, v1::Session session, std::string kind,
                 int max_attempts, std::chrono::milliseconds backoff)
      : connection_(connection),
        session_(std::move(session)),
        kind_(std::move(kind)),
        max_attempts_(max_attempts),
        backoff_(backoff) {}

  Connection* connection_;
  v1::Session session_;
  std::string kind_;
  int max_attempts_;
  std::chrono::milliseconds backoff_;
};

// Whether a failed call may be retried unchanged.
bool IsRetryable(grpc::StatusCode code);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_ORACLES_SESSION_CHANNEL_H_
