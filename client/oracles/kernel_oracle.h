#ifndef DPCURATOR_CLIENT_ORACLES_KERNEL_ORACLE_H_
#define DPCURATOR_CLIENT_ORACLES_KERNEL_ORACLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "client/oracles/session_channel.h"
#include "core/train/kernel_trainer.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// What a kernel_witness session is opened with (docs/privacy.md 2.10): the
// common session fields and the kernel.
struct KernelSessionOptions : SessionOpenOptions {
  v1::KernelWitnessParams kernel;
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
  // The parallel variant (docs/privacy.md 2.10, 3.7): one unconditional
  // kernel_witness session per declared category of the label column
  // `column`, opened as ONE admission (OpenPartitionedSessions; `kernel`
  // gets parallel = true, and options.epsilon is one part's, which is the
  // group's charge). Returns the members in the label's declared order and
  // sets `values` to the category each one reads. A retry of the open
  // (same key) returns the same sessions uncharged.
  static absl::StatusOr<std::vector<KernelOracle>> OpenPartitioned(
      Connection* connection, const KernelSessionOptions& options, const std::string& column,
      std::vector<std::string>* values);
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
  const v1::Session& session() const { return channel_.session(); }
  const v1::KernelWitnessParams& kernel() const { return session().params().kernel_witness(); }
  std::vector<double> bandwidths() const {
    return {kernel().bandwidths().begin(), kernel().bandwidths().end()};
  }
  int64_t next_step() const { return next_step_; }

 private:
  explicit KernelOracle(SessionChannel channel)
      : channel_(std::move(channel)), next_step_(channel_.session().steps_used()) {}

  SessionChannel channel_;
  int64_t next_step_;
};

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_ORACLES_KERNEL_ORACLE_H_
