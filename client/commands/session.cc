// Analyst commands for iterative releases: open a session (reserving the
// budget of T steps), run steps, close it (returning the unused budget).
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "client/progress.h"
#include "client/connection.h"
#include "client/proto_file.h"

namespace dpcurator::client {
namespace {

void PrintSession(const v1::Session& s, bool json) {
  if (json) {
    nlohmann::json out = {{"session_id", s.id()},
                          {"dataset_id", s.dataset_id()},
                          {"state", s.state()},
                          {"steps_reserved", s.steps_reserved()},
                          {"steps_used", s.steps_used()},
                          {"noise_multiplier", s.noise_multiplier()},
                          {"sampling_rate", s.params().sampling_rate()},
                          {"epsilon_reserved", s.epsilon_reserved()},
                          {"epsilon_spent_total", s.epsilon_spent_total()},
                          {"epsilon_remaining", s.epsilon_remaining()}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("session %s (%s): %lld of %lld steps used, q %g, noise multiplier %.4f\n",
              s.id().c_str(), s.state().c_str(), static_cast<long long>(s.steps_used()),
              static_cast<long long>(s.steps_reserved()), s.params().sampling_rate(),
              s.noise_multiplier());
  std::printf("  reserved epsilon %.4f (all steps); dataset spent %.4f, remaining %.4f\n",
              s.epsilon_reserved(), s.epsilon_spent_total(), s.epsilon_remaining());
}

absl::Status RunOpen(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  // A dataset name is accepted where its id is (issue 25 item 2).
  auto dataset_id = ResolveDatasetId(&*connection, args.Get("dataset"));
  if (!dataset_id.ok()) return dataset_id.status();
  v1::OpenSessionRequest request;
  request.set_dataset_id(*dataset_id);
  request.set_idempotency_key(args.Has("key") ? args.Get("key") : NewIdempotencyKey());
  auto* params = request.mutable_params();
  auto steps = args.GetInt("steps");
  auto q = args.GetDouble("sampling-rate");
  auto frequencies = args.GetInt("num-frequencies");
  if (!steps.ok()) return steps.status();
  if (!q.ok()) return q.status();
  if (!frequencies.ok()) return frequencies.status();
  params->set_steps(*steps);
  params->set_sampling_rate(*q);
  params->mutable_rff_embedding()->set_num_frequencies(static_cast<int>(*frequencies));
  if (auto set = SetPrivacyLevel(args, params); !set.ok()) return set;
  v1::Session session;
  auto context = connection->NewContext();
  grpc::Status status = connection->sessions().OpenSession(context.get(), request, &session);
  if (!status.ok()) return RpcError(status, "open session");
  PrintSession(session, args.Flag("json"));
  return absl::OkStatus();
}

absl::Status RunStep(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto first = args.GetInt("first");
  auto count = args.GetInt("count");
  if (!first.ok()) return first.status();
  if (!count.ok()) return count.status();
  v1::SessionStepResponse response;
  std::ofstream out;
  if (args.Has("out")) out.open(args.Get("out"), std::ios::binary | std::ios::app);
  Progress progress;
  for (int64_t step = *first; step < *first + *count; ++step) {
    v1::SessionStepRequest request;
    request.set_session_id(args.Get("session"));
    request.set_step(step);
    auto context = connection->NewContext();
    grpc::Status status = connection->sessions().Step(context.get(), request, &response);
    if (!status.ok()) {
      return RpcError(status, absl::StrCat("step ", step, " (retry it: steps are "
                                                       "idempotent by index)"));
    }
    if (out.is_open()) {
      // Length-delimited artefacts, one per step.
      const std::string bytes = response.batch().SerializeAsString();
      const uint64_t size = bytes.size();
      out.write(reinterpret_cast<const char*>(&size), sizeof(size));
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    if (!args.Flag("quiet")) {
      const std::string line = absl::StrFormat(
          "step %d done (%d of %d used)", step, response.session().steps_used(),
          response.session().steps_reserved());
      if (step + 1 == *first + *count) {
        progress.Finish(line);
      } else {
        progress.Update(line);
      }
    }
  }
  PrintSession(response.session(), args.Flag("json"));
  return absl::OkStatus();
}

absl::Status RunClose(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  v1::CloseSessionRequest request;
  request.set_session_id(args.Get("session"));
  v1::Session session;
  auto context = connection->NewContext();
  grpc::Status status = connection->sessions().CloseSession(context.get(), request, &session);
  if (!status.ok()) return RpcError(status, "close session");
  PrintSession(session, args.Flag("json"));
  return absl::OkStatus();
}

absl::Status RunShow(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  v1::GetSessionRequest request;
  request.set_session_id(args.Get("session"));
  v1::Session session;
  auto context = connection->NewContext();
  grpc::Status status = connection->sessions().GetSession(context.get(), request, &session);
  if (!status.ok()) return RpcError(status, "get session");
  PrintSession(session, args.Flag("json"));
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> SessionCommands() {
  std::vector<Command> commands;
  commands.push_back(Command{
      "session open",
      "reserve the budget of T subsampled steps (analyst)",
      "Each step releases the noisy labelled random-feature embedding of a fresh subsample\n"
      "(Poisson at rate q under add-remove, q*n rows without replacement under replace-one).\n"
      "The whole reservation is charged now; `session close` returns the steps not run.\n\n"
      "  dpcurator session open --dataset ds_... --steps 1000 --sampling-rate 0.01 "
      "--noise-multiplier 1.1",
      WithConnection({{"dataset", "", "dataset id or name", false, true},
                      {"steps", "", "steps T to reserve", false, true},
                      {"sampling-rate", "", "sampling rate q per step", false, true},
                      {"epsilon", "", "epsilon for all T steps (calibrates the noise)"},
                      {"noise-multiplier", "", "explicit per-step noise multiplier"},
                      {"num-frequencies", "500", "rff: D/2 frequencies of the per-step embedding"},
                      {"key", "", "idempotency key (default: fresh)"},
                      {"json", "", "print JSON", true}}),
      RunOpen});
  commands.push_back(Command{
      "session step", "run steps of an open session",
      "Steps are numbered from 0; retrying an index returns the stored result at no cost.",
      WithConnection({{"session", "", "session id", false, true},
                      {"first", "0", "index of the first step to run"},
                      {"count", "1", "number of consecutive steps"},
                      {"out", "", "append each step's artefact (length-prefixed) to this file"},
                      {"quiet", "", "no progress line", true},
                      {"json", "", "print JSON", true}}),
      RunStep});
  commands.push_back(Command{"session close", "close a session, returning the unused budget",
                             "",
                             WithConnection({{"session", "", "session id", false, true},
                                             {"json", "", "print JSON", true}}),
                             RunClose});
  commands.push_back(Command{"session show", "a session's state and reservation", "",
                             WithConnection({{"session", "", "session id", false, true},
                                             {"json", "", "print JSON", true}}),
                             RunShow});
  return commands;
}

}  // namespace dpcurator::client
