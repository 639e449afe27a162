#include "client/methods/registry.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/methods/aim.h"
#include "client/methods/autogan.h"
#include "client/methods/kernel.h"
#include "client/methods/merf.h"
#include "client/methods/mst.h"
#include "client/methods/pearl.h"
#include "client/methods/sinkhorn.h"
#include "client/model_package.h"
#include "client/proto_file.h"
#include "proto/release_kinds.h"

namespace dpcurator::client {

const Method* MethodFor(MethodId id) {
  switch (id) {
    // One line per method: its enumerator, its unit.
    case MethodId::kMerf:
      return &MerfMethod();
    case MethodId::kPearl:
      return &PearlMethod();
    case MethodId::kAutogan:
      return &AutoganMethod();
    case MethodId::kKernel:
      return &KernelMethod();
    case MethodId::kMst:
      return &MstMethod();
    case MethodId::kSinkhorn:
      return &SinkhornMethod();
    case MethodId::kAim:
      return &AimMethod();
  }
  return nullptr;
}

const std::vector<const Method*>& RegisteredMethods() {
  // The enumerators are consecutive from 0: walk them until the switch
  // knows no more, so the list needs no line of its own.
  static const std::vector<const Method*>* const methods = [] {
    auto* list = new std::vector<const Method*>();
    for (int i = 0;; ++i) {
      const Method* method = MethodFor(static_cast<MethodId>(i));
      if (method == nullptr) break;
      list->push_back(method);
    }
    return list;
  }();
  return *methods;
}

absl::StatusOr<const Method*> FindMethod(absl::string_view name) {
  std::vector<std::string> names;
  for (const Method* method : RegisteredMethods()) {
    if (method->name() == name) return method;
    names.emplace_back(method->name());
  }
  return absl::NotFoundError(absl::StrCat("no method '", name, "' in this client (it knows ",
                                          absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<const Method*> MethodOfModel(const v1::GeneratorModel& model) {
  if (model.format_version() != kModelFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model format version ", model.format_version(), " is not supported (expected ",
        kModelFormatVersion, "); retrain with this version of dpcurator"));
  }
  auto method = FindMethod(model.method());
  if (!method.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this model was written by method '", model.method(),
        "', which this client does not know; sample it with the dpcurator that trained it"));
  }
  return method;
}

std::string TrainCommandForRelease(v1::ReleaseKind kind, absl::string_view path) {
  for (const Method* method : RegisteredMethods()) {
    for (v1::ReleaseKind taken : method->ReleaseKinds()) {
      if (taken == kind) {
        return absl::StrCat("`dpcurator train ", method->name(), " --release ", path, "`");
      }
    }
  }
  return "";
}

std::string DescribeFileKind(const std::string& path) {
  std::ifstream input(path, std::ios::binary);
  if (!input) return "";
  std::stringstream bytes;
  bytes << input.rdbuf();
  const std::string text = bytes.str();
  // Release and GeneratorModel do not read as each other: field 1 is a
  // string (the release id) in one and a varint (the format version) in
  // the other, so a wrong guess leaves it empty or zero.
  v1::GeneratorModel model;
  if (model.ParseFromString(text) && model.format_version() != 0 && !model.method().empty()) {
    if (auto method = MethodOfModel(model); method.ok()) {
      return absl::StrCat("a model file (written by `dpcurator train ", (*method)->name(),
                          "`), not a release artefact: sample it with `dpcurator sample --model ",
                          path, "`");
    }
  }
  v1::Release release;
  if (release.ParseFromString(text) && !release.id().empty() &&
      (release.has_embedding() || release.has_mst())) {
    v1::ReleaseKind kind = v1::MST;
    if (release.has_embedding()) {
      auto embedding = ArtefactKind(release.embedding());
      if (!embedding.ok()) return "";
      kind = *embedding;
    }
    std::string said = absl::StrCat("a release artefact of kind ", ReleaseKindName(kind),
                                    " (from `dpcurator release`), not a model");
    const std::string train = TrainCommandForRelease(kind, path);
    if (!train.empty()) {
      absl::StrAppend(&said, ": train a model from it with ", train, ", then use that model");
    }
    return said;
  }
  return "";
}

absl::Status CheckReleaseFileFor(const Method& method, const std::string& path) {
  const std::vector<v1::ReleaseKind> kinds = method.ReleaseKinds();
  std::error_code error;
  if (kinds.empty() || !std::filesystem::is_regular_file(path, error)) return absl::OkStatus();
  v1::Release release;
  if (!ReadProtoFile(path, &release).ok() || release.id().empty() ||
      (!release.has_embedding() && !release.has_mst())) {
    const std::string kind = DescribeFileKind(path);
    if (kind.empty()) return absl::OkStatus();  // the method's reader says what is wrong
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is ", kind));
  }
  v1::ReleaseKind held = v1::MST;
  if (release.has_embedding()) {
    auto embedding = ArtefactKind(release.embedding());
    if (!embedding.ok()) return absl::OkStatus();  // the method's reader names the fault
    held = *embedding;
  }
  for (v1::ReleaseKind kind : kinds) {
    if (kind == held) return absl::OkStatus();
  }
  std::string text = absl::StrCat("'", path, "' is a release artefact of kind ",
                                  ReleaseKindName(held), "; `train ", method.name(),
                                  "` reads ", ReleaseKindName(kinds[0]), " releases");
  const std::string train = TrainCommandForRelease(held, path);
  if (!train.empty()) absl::StrAppend(&text, ". Train this one with ", train);
  return absl::InvalidArgumentError(text);
}

absl::StatusOr<data::Table> SampleModel(const v1::GeneratorModel& model, int64_t num_rows,
                                        uint64_t seed) {
  auto method = MethodOfModel(model);
  if (!method.ok()) return method.status();
  if (num_rows <= 0) return absl::InvalidArgumentError("--rows must be positive");
  return (*method)->SampleTable(model, num_rows, seed);
}

uint64_t SampleChunkSeed(uint64_t seed, int64_t chunk) {
  return chunk == 0 ? seed : seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(chunk);
}

}  // namespace dpcurator::client
