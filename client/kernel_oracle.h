#ifndef DPCURATOR_CLIENT_KERNEL_ORACLE_H_
#define DPCURATOR_CLIENT_KERNEL_ORACLE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "core/train/kernel_trainer.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// What a kernel_witness session is opened with (docs/privacy.md 2.10).
struct KernelSessionOptions {
  std::string dataset_id;
  // Empty: a fresh random key. Reusing a key reopens (replays) the same
  // session, so a restarted trainer is not charged twice.
  std::string idempotency_key;
  double sampling_rate = 0.0;  // q
  // Exactly one: the privacy of all T steps (calibrated by the server at
  // the dataset's delta) or the per-step noise multiplier sigma.
  std::optional<double> epsilon;
  std::optional<double> noise_multiplier;
  int64_t steps = 0;  // T, reserved at open
  v1::KernelWitnessParams kernel;
  // Retries of a call that failed in transport (UNAVAILABLE,
  // DEADLINE_EXCEEDED) or hit the per-session step rate
  // (RESOURCE_EXHAUSTED), with doubling waits from initial_backoff.
  int max_attempts = 8;
  std::chrono::milliseconds initial_backoff{50};
};

// The trainer's side of a kernel_witness session: a remote
// train::KernelWitnessOracle. Each Step sends the generated points (and
// labels) as step index steps_used and returns the server's noisy witness
// values and gradients there. A call that fails in transport is retried
// with the SAME index, so the server replays the stored answer instead of
// charging a second step; a trainer restarted with Resume continues at the
// session's next index.
class KernelOracle final : public train::KernelWitnessOracle {
 public:
  // `connection` must outlive the oracle.
  static absl::StatusOr<KernelOracle> Open(Connection* connection,
                                           const KernelSessionOptions& options);
  // An open session by id; it must be a kernel_witness session.
  static absl::StatusOr<KernelOracle> Resume(Connection* connection,
                                             const std::string& session_id,
                                             int max_attempts = 8);

  absl::StatusOr<train::KernelWitnessAnswer> Step(const Eigen::MatrixXd& points,
                                                  const Eigen::VectorXi& labels) override;

  // Closes the session; the steps not run are refunded.
  absl::StatusOr<v1::Session> Close();

  // The session as last seen (resolved kernel: bandwidths, dimension,
  // num_classes; noise multiplier; steps used; epsilon reserved and spent).
  const v1::Session& session() const { return session_; }
  const v1::KernelWitnessParams& kernel() const { return session_.params().kernel_witness(); }
  std::vector<double> bandwidths() const {
    return {kernel().bandwidths().begin(), kernel().bandwidths().end()};
  }
  int64_t next_step() const { return next_step_; }

 private:
  KernelOracle(Connection* connection, v1::Session session, int max_attempts,
               std::chrono::milliseconds backoff)
      : connection_(connection),
        session_(std::move(session)),
        max_attempts_(max_attempts),
        backoff_(backoff),
        next_step_(session_.steps_used()) {}

  Connection* connection_;
  v1::Session session_;
  int max_attempts_;
  std::chrono::milliseconds backoff_;
  int64_t next_step_;
};

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_KERNEL_ORACLE_H_
