#ifndef DPCURATOR_CLIENT_ORACLES_DP_SGD_ORACLE_H_
#define DPCURATOR_CLIENT_ORACLES_DP_SGD_ORACLE_H_

#include <cstdint>
#include <optional>
#include <string>

#include <Eigen/Core>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "client/oracles/session_channel.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// What a dp_sgd session is opened with (docs/privacy.md 2.9): the common
// session fields and the declared network.
struct DpSgdSessionOptions : SessionOpenOptions {
  v1::DpSgdParams network;
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
  const v1::Session& session() const { return channel_.session(); }
  int64_t num_parameters() const { return session().params().dp_sgd().num_parameters(); }

 private:
  explicit DpSgdOracle(SessionChannel channel) : channel_(std::move(channel)) {}

  SessionChannel channel_;
};

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_ORACLES_DP_SGD_ORACLE_H_
