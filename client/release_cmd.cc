// Analyst commands: request a release, fetch or list stored ones.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/pipeline.h"
#include "proto/release_kinds.h"

namespace dpcurator::client {
namespace {

absl::Status RunRelease(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  v1::ReleaseRequest request;
  request.set_dataset_id(args.Get("dataset"));
  request.set_idempotency_key(args.Has("key") ? args.Get("key") : NewIdempotencyKey());
  if (auto set = SetPrivacyLevel(args, &request); !set.ok()) return set;
  auto frequencies = args.GetInt("num-frequencies");
  if (!frequencies.ok()) return frequencies.status();
  double length_scale = 0;
  if (args.Has("length-scale")) {
    auto parsed = args.GetDouble("length-scale");
    if (!parsed.ok()) return parsed.status();
    length_scale = *parsed;
  }
  uint64_t seed = 0;
  if (args.Has("seed")) {
    auto parsed = args.GetInt("seed");
    if (!parsed.ok()) return parsed.status();
    seed = static_cast<uint64_t>(*parsed);
  }
  switch (ReleaseKindFromName(args.Get("kind"))) {
    case v1::RFF_EMBEDDING: {
      auto* params = request.mutable_rff_embedding();
      params->set_num_frequencies(static_cast<int>(*frequencies));
      params->set_length_scale(length_scale);
      params->set_seed(seed);
      break;
    }
    case v1::CHARFN_EMBEDDING: {
      auto* params = request.mutable_charfn_embedding();
      params->set_num_frequencies(static_cast<int>(*frequencies));
      params->set_length_scale(length_scale);
      params->set_private_length_scale(args.Flag("private-length-scale"));
      params->set_seed(seed);
      break;
    }
    case v1::MST:
      // The recipe's parameters all come from the schema and --epsilon.
      request.mutable_mst();
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("--kind '", args.Get("kind"),
                       "' is not supported; use rff_embedding, charfn_embedding or mst"));
  }
  v1::Release release;
  auto context = connection->NewContext();
  grpc::Status status = connection->releases().RequestRelease(context.get(), request, &release);
  if (!status.ok()) {
    return RpcError(
        status, absl::StrCat("release refused (retry with --key ", request.idempotency_key(),
                             " to avoid a second charge)"));
  }
  auto written = WriteProtoFile(release, args.Get("out"));
  if (!written.ok()) return written;
  const double epsilon = release.has_mst() ? release.mst().epsilon() : release.embedding().epsilon();
  if (args.Flag("json")) {
    nlohmann::json out = {{"release_id", release.id()},
                          {"dataset_id", release.dataset_id()},
                          {"kind", ReleaseKindName(release.kind())},
                          {"replayed", release.replayed()},
                          {"epsilon", epsilon},
                          // mst: the 1-way (= 2-way) marginals' multiplier.
                          {"noise_multiplier", release.has_mst()
                                                   ? release.mst().one_way_noise_multiplier()
                                                   : release.embedding().noise_multiplier()},
                          {"epsilon_spent_total", release.epsilon_spent_total()},
                          {"epsilon_remaining", release.epsilon_remaining()},
                          {"idempotency_key", request.idempotency_key()},
                          {"out", args.Get("out")}};
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("%s %s: epsilon %.4f for this release; dataset spent %.4f, remaining %.4f\n",
              release.replayed() ? "replayed stored release" : "released", release.id().c_str(),
              epsilon, release.epsilon_spent_total(),
              release.epsilon_remaining());
  std::printf("artefact written to %s (idempotency key %s)\n", args.Get("out").c_str(),
              request.idempotency_key().c_str());
  return absl::OkStatus();
}

absl::Status RunGet(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  v1::GetReleaseRequest request;
  request.set_release_id(args.Get("id"));
  v1::Release release;
  auto context = connection->NewContext();
  grpc::Status status = connection->releases().GetRelease(context.get(), request, &release);
  if (!status.ok()) return RpcError(status, "get release");
  auto written = WriteProtoFile(release, args.Get("out"));
  if (!written.ok()) return written;
  std::printf("release %s written to %s (no charge)\n", release.id().c_str(),
              args.Get("out").c_str());
  return absl::OkStatus();
}

absl::Status RunList(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  v1::ListReleasesRequest request;
  request.set_dataset_id(args.Get("dataset"));
  v1::ListReleasesResponse response;
  auto context = connection->NewContext();
  grpc::Status status = connection->releases().ListReleases(context.get(), request, &response);
  if (!status.ok()) return RpcError(status, "list releases");
  std::printf("%-38s %-16s %-8s %10s\n", "release", "kind", "status", "epsilon");
  for (const auto& r : response.releases()) {
    std::printf("%-38s %-16s %-8s %10.4f\n", r.id().c_str(), r.kind().c_str(), r.status().c_str(),
                r.epsilon());
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> ReleaseCommands() {
  std::vector<Command> commands;
  commands.push_back(Command{
      "release",
      "request a differentially private release (analyst)",
      "Charges the dataset's ledger (refused if it would exceed the cap) and writes the\n"
      "artefact. Retrying with the same --key returns the stored artefact at no charge.\n\n"
      "  dpcurator release --dataset ds_... --epsilon 1 --out merf.release",
      WithConnection({{"dataset", "", "dataset id", false, true},
                      {"kind", "rff_embedding",
                       "release kind: rff_embedding (DP-MERF), charfn_embedding (PEARL) or mst "
                       "(MST's marginals and private tree; --epsilon only)",
                       false, false, "", {"rff_embedding", "charfn_embedding", "mst"}},
                      {"private-length-scale", "",
                       "charfn: release a DP mean distance as the length-scale (same event)",
                       true},
                      {"epsilon", "", "target epsilon of this release (at the dataset's delta)"},
                      {"noise-multiplier", "", "explicit noise multiplier instead of --epsilon"},
                      {"num-frequencies", "0",
                       "rff: D/2 frequencies; charfn: k frequencies (0: the kind's default, 500; "
                       "image datasets 4000 for rff, 1500 for charfn)"},
                      {"length-scale", "", "kernel length-scale (default: from the schema)"},
                      {"seed", "", "public seed of the frequencies (default: server draws one)"},
                      {"key", "", "idempotency key (default: a fresh random key)"},
                      {"out", "release.pb", "artefact file to write"},
                      {"json", "", "print JSON (docs/json.md)", true}}),
      RunRelease});
  commands.push_back(Command{"release get", "fetch a stored release again (free)", "",
                             WithConnection({{"id", "", "release id", false, true},
                                             {"out", "release.pb", "artefact file to write"}}),
                             RunGet});
  commands.push_back(Command{"releases", "list a dataset's releases", "",
                             WithConnection({{"dataset", "", "dataset id", false, true}}),
                             RunList});
  return commands;
}

}  // namespace dpcurator::client
