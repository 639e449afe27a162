#include "client/oracles/session_channel.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/privacy/noise_source.h"

namespace dpcurator::client {
namespace {

// Runs `call` (which makes one RPC with a fresh context) until it succeeds,
// fails for a reason a retry cannot fix, or max_attempts are used.
template <typename Call>
grpc::Status WithRetries(int max_attempts, std::chrono::milliseconds backoff, Call call) {
  grpc::Status status;
  for (int attempt = 0; attempt < std::max(1, max_attempts); ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    }
    status = call();
    if (status.ok() || !IsRetryable(status.error_code())) return status;
  }
  return status;
}

}  // namespace

bool IsRetryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

absl::StatusOr<SessionChannel> SessionChannel::Open(Connection* connection,
                                                    const SessionOpenOptions& options,
                                                    const v1::SessionParams& step,
                                                    absl::string_view kind) {
  if (options.epsilon.has_value() == options.noise_multiplier.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ", kind, " session needs exactly one of epsilon (for all steps) or noise_multiplier"));
  }
  v1::OpenSessionRequest request;
  request.set_dataset_id(options.dataset_id);
  // One key for every attempt: a retried open replays the same session.
  request.set_idempotency_key(
      options.idempotency_key.empty()
          ? absl::StrFormat("%s-%016x", kind, privacy::SecureRandomU64())
          : options.idempotency_key);
  v1::SessionParams& params = *request.mutable_params();
  params = step;
  params.set_steps(options.steps);
  params.set_sampling_rate(options.sampling_rate);
  if (options.epsilon.has_value()) params.set_epsilon(*options.epsilon);
  if (options.noise_multiplier.has_value()) {
    params.set_noise_multiplier(*options.noise_multiplier);
  }
  v1::Session session;
  const grpc::Status status =
      WithRetries(options.max_attempts, options.initial_backoff, [&] {
        auto context = connection->NewContext();
        return connection->sessions().OpenSession(context.get(), request, &session);
      });
  if (!status.ok()) return RpcError(status, absl::StrCat("open ", kind, " session"));
  return SessionChannel(connection, std::move(session), std::string(kind),
                        options.max_attempts, options.initial_backoff);
}

absl::StatusOr<SessionChannel> SessionChannel::Resume(Connection* connection,
                                                      const std::string& session_id,
                                                      v1::SessionParams::StepCase expected,
                                                      absl::string_view kind,
                                                      absl::string_view how_to_open,
                                                      int max_attempts) {
  v1::GetSessionRequest request;
  request.set_session_id(session_id);
  v1::Session session;
  const std::chrono::milliseconds backoff{50};
  const grpc::Status status = WithRetries(max_attempts, backoff, [&] {
    auto context = connection->NewContext();
    return connection->sessions().GetSession(context.get(), request, &session);
  });
  if (!status.ok()) return RpcError(status, absl::StrCat("get session ", session_id));
  if (session.params().step_case() != expected) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session '", session_id, "' is not a ", kind, " session; ", how_to_open));
  }
  return SessionChannel(connection, std::move(session), std::string(kind), max_attempts,
                        backoff);
}

absl::StatusOr<v1::SessionStepResponse> SessionChannel::Step(v1::SessionStepRequest request) {
  request.set_session_id(session_.id());
  v1::SessionStepResponse response;
  const grpc::Status status = WithRetries(max_attempts_, backoff_, [&] {
    response.Clear();
    auto context = connection_->NewContext();
    return connection_->sessions().Step(context.get(), request, &response);
  });
  if (!status.ok()) {
    return RpcError(status,
                    absl::StrCat(kind_, " step ", request.step(), " of session ", session_.id()));
  }
  if (response.has_session()) session_ = response.session();
  return response;
}

absl::StatusOr<v1::Session> SessionChannel::Close() {
  v1::CloseSessionRequest request;
  request.set_session_id(session_.id());
  v1::Session session;
  const grpc::Status status = WithRetries(max_attempts_, backoff_, [&] {
    auto context = connection_->NewContext();
    return connection_->sessions().CloseSession(context.get(), request, &session);
  });
  if (!status.ok()) return RpcError(status, absl::StrCat("close session ", session_.id()));
  session_ = session;
  return session;
}

}  // namespace dpcurator::client
