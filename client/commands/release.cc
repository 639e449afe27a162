// Analyst commands: request a release, fetch or list stored ones.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>
#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/methods/aim.h"
#include "client/proto_file.h"
#include "proto/release_kinds.h"

namespace dpcurator::client {
namespace {

// Checked before a release is requested, so that a path that cannot be
// written fails before the budget is charged: its folder must exist and be
// writable, and an existing file must be a writable regular file.
absl::Status CheckWritable(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path file(path);
  fs::path folder = file.parent_path();
  if (folder.empty()) folder = ".";
  if (!fs::is_directory(folder, error)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--out ", path, ": the folder '", folder.string(),
        "' does not exist; create it or choose another path (nothing was requested)"));
  }
  if (fs::exists(file, error)) {
    if (fs::is_directory(file, error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--out ", path, " is a folder; name a file (nothing was requested)"));
    }
    if (access(path.c_str(), W_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--out ", path, " cannot be overwritten (permission); nothing was requested"));
    }
  } else if (access(folder.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--out ", path, ": the folder '", folder.string(),
        "' is not writable; choose another path (nothing was requested)"));
  }
  return absl::OkStatus();
}

// A refused `release --json`: one JSON object on stdout, so that a script
// reads the outcome either way (docs/json.md).
void PrintJsonError(const absl::Status& status, const std::string& idempotency_key,
                    bool may_have_charged) {
  nlohmann::json out = {{"error", std::string(status.message())},
                        {"code", absl::StatusCodeToString(status.code())},
                        {"may_have_charged", may_have_charged}};
  if (may_have_charged) out["idempotency_key"] = idempotency_key;
  std::printf("%s\n", out.dump(2).c_str());
}

// The exit status of a release that is admitted and charged but not
// computed yet (docs/json.md, "Exit status"): an external dataset's job,
// which the curator's runner computes in its cluster.
constexpr int kPendingExitCode = 5;

// A pending release (Release.state PENDING): said for people or as JSON,
// and the process ends with kPendingExitCode; no artefact is written.
absl::Status ReportPending(const v1::Release& release, bool json) {
  if (json) {
    nlohmann::json out = {{"release_id", release.id()},
                          {"dataset_id", release.dataset_id()},
                          {"kind", ReleaseKindName(release.kind())},
                          {"state", "pending"},
                          {"replayed", release.replayed()}};
    if (release.epsilon_spent_total() > 0 || release.epsilon_remaining() > 0) {
      out["epsilon_spent_total"] = release.epsilon_spent_total();
      out["epsilon_remaining"] = release.epsilon_remaining();
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf(
        "pending: the curator's runner computes it; fetch it later with `dpcurator release get "
        "--id %s`\n",
        release.id().c_str());
    if (release.epsilon_spent_total() > 0 || release.epsilon_remaining() > 0) {
      std::printf("release %s is charged: dataset spent %.4g, remaining %.4g\n",
                  release.id().c_str(), release.epsilon_spent_total(),
                  release.epsilon_remaining());
    }
  }
  return QuietExit(kPendingExitCode);
}

// The epsilon a release was calibrated to and its (first) noise multiplier,
// whatever its artefact (the recipes': their 1-way tables').
double ReleaseEpsilon(const v1::Release& release) {
  if (release.has_mst()) return release.mst().epsilon();
  if (release.has_marginals()) return release.marginals().epsilon();
  if (release.has_partitioned() && release.partitioned().marginals_size() > 0) {
    return release.partitioned().marginals(0).epsilon();  // the whole release's
  }
  if (release.has_aim()) return release.aim().epsilon();
  if (release.has_category_fit()) return release.category_fit().epsilon();
  return release.embedding().epsilon();
}

double ReleaseNoiseMultiplier(const v1::Release& release) {
  if (release.has_mst()) return release.mst().one_way_noise_multiplier();
  if (release.has_marginals()) return release.marginals().noise_multiplier();
  if (release.has_partitioned() && release.partitioned().marginals_size() > 0) {
    return release.partitioned().marginals(0).noise_multiplier();  // every part's
  }
  if (release.has_aim()) return release.aim().one_way_noise_multiplier();
  if (release.has_category_fit()) return 0.0;  // a discrete Gaussian sigma, not a multiplier
  return release.embedding().noise_multiplier();
}

// A category fit's result for people: how many values were published, the
// list (cut after a screenful), and what made it.
void PrintCategoryFit(const v1::CategoryFitArtefact& fit) {
  constexpr int kShown = 20;
  std::printf("column %s: %d value%s published (noise sigma %g, threshold %lld, delta_0 %.3g)\n",
              fit.column().c_str(), fit.categories_size(), fit.categories_size() == 1 ? "" : "s",
              fit.sigma(), static_cast<long long>(fit.threshold()), fit.delta_0());
  for (int i = 0; i < fit.categories_size() && i < kShown; ++i) {
    std::printf("  %s\n", fit.categories(i).c_str());
  }
  if (fit.categories_size() > kShown) {
    std::printf("  ... and %d more (all in the artefact)\n", fit.categories_size() - kShown);
  }
  if (fit.categories_size() == 0) {
    std::printf("no value was shared by enough rows: ask for a larger epsilon, or use this "
                "column with fewer distinct values\n");
  }
}

// A category fit's result as JSON fields.
void AddCategoryFitJson(const v1::Release& release, nlohmann::json* out) {
  if (!release.has_category_fit()) return;
  const v1::CategoryFitArtefact& fit = release.category_fit();
  (*out)["column"] = fit.column();
  (*out)["categories"] =
      std::vector<std::string>(fit.categories().begin(), fit.categories().end());
  (*out)["sigma"] = fit.sigma();
  (*out)["threshold"] = fit.threshold();
  (*out)["delta_0"] = fit.delta_0();
}

absl::Status RunRelease(const ParsedArgs& args) {
  const bool json = args.Flag("json");
  if (auto writable = CheckWritable(args.Get("out")); !writable.ok()) {
    if (json) PrintJsonError(writable, "", false);
    return writable;
  }
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto dataset_id = ResolveDatasetId(&*connection, args.Get("dataset"));
  if (!dataset_id.ok()) return dataset_id.status();
  v1::ReleaseRequest request;
  request.set_dataset_id(*dataset_id);
  request.set_idempotency_key(args.Has("key") ? args.Get("key") : NewIdempotencyKey());
  if (auto set = SetPrivacyLevel(args, &request); !set.ok()) return set;
  if (args.Has("epsilon")) WarnIfUnlikelyEpsilon("--epsilon", request.epsilon());
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
    case v1::AIM: {
      // As `train aim --dataset` sends it: --workload, --max-model-cells,
      // --rounds (all optional) and --epsilon.
      auto params = AimParamsFromArgs(args);
      if (!params.ok()) return params.status();
      *request.mutable_aim() = *std::move(params);
      break;
    }
    case v1::MARGINALS: {
      // --workload names the cliques, as for aim (empty: every 1-way table
      // but the label's).
      auto params = AimParamsFromArgs(args);
      if (!params.ok()) return params.status();
      *request.mutable_marginals()->mutable_cliques() = params->workload();
      break;
    }
    case v1::CATEGORY_FIT: {
      // One open column's shared values (issue 38): --column, --epsilon,
      // optionally --max-categories and --delta-0 (0: the server's defaults).
      if (!args.Has("column")) {
        return absl::InvalidArgumentError(
            "--kind category_fit needs --column NAME (an open categorical column)");
      }
      auto* params = request.mutable_category_fit();
      params->set_column(args.Get("column"));
      if (args.Has("max-categories")) {
        auto parsed = args.GetInt("max-categories");
        if (!parsed.ok()) return parsed.status();
        params->set_max_categories(static_cast<int32_t>(
            std::clamp<int64_t>(*parsed, -1, std::numeric_limits<int32_t>::max())));
      }
      if (args.Has("delta-0")) {
        auto parsed = args.GetDouble("delta-0");
        if (!parsed.ok()) return parsed.status();
        params->set_delta_0(*parsed);
      }
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "--kind '", args.Get("kind"),
          "' is not supported; use rff_embedding, charfn_embedding, mst, aim, marginals or "
          "category_fit"));
  }
  if (args.Has("partition-by")) {
    // One release per part of the label's declared values (docs/privacy.md
    // 3.7): the server refuses anything but the label column and its
    // declared values before any charge.
    v1::Partition& partition = *request.mutable_partition();
    partition.set_column(args.Get("partition-by"));
    for (absl::string_view value : absl::StrSplit(args.Get("parts"), ',', absl::SkipEmpty())) {
      partition.add_values(std::string(absl::StripAsciiWhitespace(value)));
    }
  } else if (args.Has("parts")) {
    return absl::InvalidArgumentError("--parts needs --partition-by LABEL");
  }
  v1::Release release;
  auto context = connection->NewContext();
  grpc::Status status = connection->releases().RequestRelease(context.get(), request, &release);
  if (!status.ok()) {
    const bool may_have_charged = MayHaveCharged(status.error_code());
    absl::Status refused = ReleaseRpcError(status, "release", request.idempotency_key());
    if (json) PrintJsonError(refused, request.idempotency_key(), may_have_charged);
    return refused;
  }
  if (release.state() == v1::RELEASE_STATE_PENDING) return ReportPending(release, json);
  auto written = WriteProtoFile(release, args.Get("out"));
  if (!written.ok()) {
    // Charged and stored on the server: say how to fetch it again.
    absl::Status late = absl::Status(
        written.code(),
        absl::StrCat(written.message(), ". The release was made and charged: its id is ",
                     release.id(), "; fetch it at no charge with `dpcurator release get --id ",
                     release.id(), " --out PATH`"));
    if (json) {
      nlohmann::json out = {{"error", std::string(late.message())},
                            {"code", absl::StatusCodeToString(late.code())},
                            {"may_have_charged", true},
                            {"release_id", release.id()}};
      std::printf("%s\n", out.dump(2).c_str());
    }
    return late;
  }
  const double epsilon = ReleaseEpsilon(release);
  if (args.Flag("json")) {
    nlohmann::json out = {{"release_id", release.id()},
                          {"dataset_id", release.dataset_id()},
                          {"kind", ReleaseKindName(release.kind())},
                          {"replayed", release.replayed()},
                          {"epsilon", epsilon},
                          // mst, aim: the 1-way marginals' multiplier.
                          {"noise_multiplier", ReleaseNoiseMultiplier(release)},
                          {"epsilon_spent_total", release.epsilon_spent_total()},
                          {"epsilon_remaining", release.epsilon_remaining()},
                          {"idempotency_key", request.idempotency_key()},
                          {"out", args.Get("out")}};
    AddCategoryFitJson(release, &out);
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("%s %s: epsilon %g for this release; dataset spent %.4g, remaining %.4g\n",
              release.replayed() ? "replayed stored release" : "released", release.id().c_str(),
              epsilon, release.epsilon_spent_total(),
              release.epsilon_remaining());
  if (release.has_category_fit()) PrintCategoryFit(release.category_fit());
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
  if (release.state() == v1::RELEASE_STATE_PENDING) return ReportPending(release, args.Flag("json"));
  auto written = WriteProtoFile(release, args.Get("out"));
  if (!written.ok()) return written;
  if (args.Flag("json")) {
    nlohmann::json out = {{"release_id", release.id()},
                          {"dataset_id", release.dataset_id()},
                          {"kind", ReleaseKindName(release.kind())},
                          {"epsilon", ReleaseEpsilon(release)},
                          {"out", args.Get("out")}};
    AddCategoryFitJson(release, &out);
    std::printf("%s\n", out.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("release %s written to %s (no charge)\n", release.id().c_str(),
              args.Get("out").c_str());
  if (release.has_category_fit()) PrintCategoryFit(release.category_fit());
  return absl::OkStatus();
}

absl::Status RunReleaseList(const ParsedArgs& args) {
  auto connection = Connection::FromArgs(args);
  if (!connection.ok()) return connection.status();
  auto dataset_id = ResolveDatasetId(&*connection, args.Get("dataset"));
  if (!dataset_id.ok()) return dataset_id.status();
  // Every page (server/paging.h), not only the first.
  auto releases = ListAllReleases(&*connection, *dataset_id);
  if (!releases.ok()) return releases.status();
  if (args.Flag("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : *releases) {
      out.push_back({{"release_id", r.id()},
                     {"kind", r.kind()},
                     {"created_unix", r.created_unix()},
                     {"status", r.status()},
                     {"epsilon", r.epsilon()}});
    }
    std::printf("%s\n", nlohmann::json{{"releases", out}}.dump(2).c_str());
    return absl::OkStatus();
  }
  std::printf("%-38s %-16s %-8s %10s\n", "release", "kind", "status", "epsilon");
  for (const auto& r : *releases) {
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
      "artefact. Retrying with the same --key returns the stored artefact at no charge.\n"
      "On an external dataset the release is charged and then computed in the curator's\n"
      "cluster: it prints \"pending\" (exit status 5, docs/json.md) and `release get --id`\n"
      "fetches it once the curator's runner has computed it.\n\n"
      "  dpcurator release --dataset ds_... --epsilon 1 --out merf.release",
      WithConnection({{"dataset", "", "dataset id or name", false, true},
                      {"kind", "rff_embedding",
                       "release kind: rff_embedding (DP-MERF), charfn_embedding (PEARL), mst "
                       "(MST's marginals and private tree; --epsilon only) or aim (AIM's "
                       "adaptive marginals; --epsilon, optionally --workload, --max-model-cells, "
                       "--rounds; fit with `train aim --release`) or marginals (noisy count "
                       "tables of the --workload cliques; with --partition-by, one per part) "
                       "or category_fit (the values of an open --column that enough rows share; "
                       "--epsilon only; `schema fit --categories` writes the schema from it)",
                       false, false, "",
                       {ReleaseKindName(v1::RFF_EMBEDDING), ReleaseKindName(v1::CHARFN_EMBEDDING),
                        ReleaseKindName(v1::MST), ReleaseKindName(v1::AIM),
                        ReleaseKindName(v1::MARGINALS), ReleaseKindName(v1::CATEGORY_FIT)}},
                      {"column", "", "category_fit: the open categorical column"},
                      {"max-categories", "",
                       "category_fit: publish at most this many values (default 1,000; at most "
                       "10,000)"},
                      {"delta-0", "",
                       "category_fit: the chance that a value only one row has is published "
                       "(default: a tenth of the dataset's delta)"},
                      {"workload", "",
                       "aim: cliques of 1 to 3 column names, 'a,b;c,d,e' (default: every pair, "
                       "plus every triple with the label); marginals: the cliques (default: "
                       "every 1-way table but the label's)"},
                      {"partition-by", "",
                       "marginals: the label column; one release per part as one charge (one "
                       "part's under add/remove; docs/privacy.md 3.7)"},
                      {"parts", "",
                       "with --partition-by: declared values 'a,b' (default: every one)"},
                      {"max-model-cells", "",
                       "aim: model-size limit in clique-table cells (default 10,000,000)"},
                      {"rounds", "", "aim: T, which sets the first rounds' budget rho / T "
                                     "(default 16 x columns)"},
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
  commands.push_back(Command{"release get", "fetch a stored release again (free)",
                             "A release still pending in the curator's cluster prints "
                             "\"pending\" and exits with status 5.",
                             WithConnection({{"id", "", "release id", false, true},
                                             {"out", "release.pb", "artefact file to write"},
                                             {"json", "", "print JSON (docs/json.md)", true}}),
                             RunGet});
  commands.push_back(Command{"releases", "list a dataset's releases", "",
                             WithConnection({{"dataset", "", "dataset id or name", false, true},
                                             {"json", "", "print JSON (docs/json.md)", true}}),
                             RunReleaseList});
  return commands;
}

}  // namespace dpcurator::client
