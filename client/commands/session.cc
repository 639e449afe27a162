// Analyst commands for iterative releases: open a session (reserving the
// budget of T steps), run steps, close it (returning the unused budget).
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/progress.h"
#include "client/connection.h"
#include "client/proto_file.h"
#include "client/printable.h"

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

// The K sessions of a partitioned open, each with the part it reads.
void PrintPartitionedSessions(const v1::PartitionedSessions& opened, bool json) {
  if (json) {
    nlohmann::json parts = nlohmann::json::array();
    for (int k = 0; k < opened.sessions_size(); ++k) {
      parts.push_back({{"value", opened.values(k)}, {"session_id", opened.sessions(k).id()}});
    }
    const v1::Session& first = opened.sessions(0);
    nlohmann::json out = {{"dataset_id", opened.dataset_id()},
                          {"partition_by", opened.column()},
                          {"parts", parts},
                          {"replayed", opened.replayed()},
                          {"steps_reserved", first.steps_reserved()},
                          {"noise_multiplier", first.noise_multiplier()},
                          {"sampling_rate", first.params().sampling_rate()},
                          {"epsilon_reserved", first.epsilon_reserved()},
                          {"epsilon_spent_total", first.epsilon_spent_total()},
                          {"epsilon_remaining", first.epsilon_remaining()}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%d sessions partitioned by %s%s (one charge for all of them):\n",
              opened.sessions_size(), Printable(opened.column()).c_str(),
              opened.replayed() ? ", opened earlier with this key" : "");
  for (int k = 0; k < opened.sessions_size(); ++k) {
    std::printf("  %-24s %s\n", Printable(opened.values(k)).c_str(),
                opened.sessions(k).id().c_str());
  }
  if (opened.sessions_size() == 0) return;
  const v1::Session& s = opened.sessions(0);
  std::printf("each: %lld steps, q %g over its part, noise multiplier %.4f\n",
              static_cast<long long>(s.steps_reserved()), s.params().sampling_rate(),
              s.noise_multiplier());
  std::printf("  reserved epsilon %.4f (the group's); dataset spent %.4f, remaining %.4f\n",
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
  if (args.Has("parts") && !args.Has("partition-by")) {
    return absl::InvalidArgumentError("--parts names values of the --partition-by column");
  }
  if (args.Has("partition-by")) {
    // One session per part, one admission (docs/privacy.md 3.7).
    v1::OpenPartitionedSessionsRequest group;
    group.set_dataset_id(request.dataset_id());
    group.set_idempotency_key(request.idempotency_key());
    *group.mutable_params() = request.params();
    group.mutable_partition()->set_column(args.Get("partition-by"));
    if (args.Has("parts")) {
      for (absl::string_view value : absl::StrSplit(args.Get("parts"), ',')) {
        group.mutable_partition()->add_values(std::string(value));
      }
    }
    v1::PartitionedSessions opened;
    auto context = connection->NewContext();
    grpc::Status status =
        connection->sessions().OpenPartitionedSessions(context.get(), group, &opened);
    if (!status.ok()) return RpcError(status, "open partitioned sessions");
    PrintPartitionedSessions(opened, args.Flag("json"));
    return absl::OkStatus();
  }
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
      "The whole reservation is charged now; `session close` returns the steps not run.\n"
      "--partition-by LABEL opens one session per declared category of the label column (or\n"
      "per --parts value), each reading only its rows, all charged as ONE session under\n"
      "add-remove (parallel composition, docs/privacy.md 3.7); it prints the sessions.\n\n"
      "  dpcurator session open --dataset ds_... --steps 1000 --sampling-rate 0.01 "
      "--noise-multiplier 1.1",
      WithConnection({{"dataset", "", "dataset id or name", false, true},
                      {"steps", "", "steps T to reserve", false, true},
                      {"sampling-rate", "", "sampling rate q per step", false, true},
                      {"epsilon", "", "epsilon for all T steps (calibrates the noise)"},
                      {"noise-multiplier", "", "explicit per-step noise multiplier"},
                      {"num-frequencies", "500", "rff: D/2 frequencies of the per-step embedding"},
                      {"key", "", "idempotency key (default: fresh)"},
                      {"partition-by", "",
                       "open one session per part of this column (the declared label)"},
                      {"parts", "", "with --partition-by: values v1,v2,... (default: all)"},
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
