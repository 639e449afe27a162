#include "client/methods/registry.h"

#include <filesystem>
#include <optional>
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

namespace {

// The kind of a release file's artefact; nullopt when it holds none (or an
// embedding of an unknown kind), e.g. a file of another message type.
std::optional<v1::ReleaseKind> KindOfRelease(const v1::Release& release) {
  if (release.id().empty()) return std::nullopt;
  switch (release.artefact_case()) {
    case v1::Release::kEmbedding: {
      auto kind = ArtefactKind(release.embedding());
      if (!kind.ok()) return std::nullopt;
      return *kind;
    }
    case v1::Release::kMst:
      return v1::MST;
    case v1::Release::kAim:
      return v1::AIM;
    case v1::Release::kMarginals:
    case v1::Release::kPartitioned:
      return v1::MARGINALS;
    case v1::Release::kCategoryFit:
      return v1::CATEGORY_FIT;
    case v1::Release::ARTEFACT_NOT_SET:
      break;
  }
  return std::nullopt;
}

}  // namespace

std::string DescribeFileKind(const std::string& path) {
  std::string text;
  if (!ReadFileBytes(path, &text)) return "";
  // Release and GeneratorModel do not read as each other: field 1 is a
  // string (the release id) in one and a varint (the format version) in
  // the other, so a wrong guess leaves it empty or zero.
  v1::GeneratorModel model;
  if (model.ParseFromString(text) && model.format_version() != 0 && !model.method().empty()) {
    if (auto method = MethodOfModel(model); method.ok()) {
      return absl::StrCat("a model file (written by `dpcurator train ", (*method)->name(),
                          "`): sample rows from it with `dpcurator sample --model ", path, "`");
    }
  }
  v1::Release release;
  if (!release.ParseFromString(text)) return "";
  const std::optional<v1::ReleaseKind> kind = KindOfRelease(release);
  if (!kind.has_value()) return "";
  std::string said = absl::StrCat("a release artefact of kind ", ReleaseKindName(*kind),
                                  " (from `dpcurator release`)");
  const std::string train = TrainCommandForRelease(*kind, path);
  if (!train.empty()) {
    absl::StrAppend(&said, ": train a model from it with ", train,
                    ", then sample rows from that model");
  }
  return said;
}

absl::StatusOr<const Method*> ReadModelFile(const std::string& path, v1::GeneratorModel* model) {
  absl::Status read = ReadProtoFile(path, model);
  if (read.ok()) {
    auto method = MethodOfModel(*model);
    if (method.ok()) return method;
    read = method.status();
  }
  // A release artefact (or another file dpcurator wrote) is named as what
  // it is, with the command that takes it, not as "model format version
  // 0" (issue 25 item 2).
  const std::string kind = DescribeFileKind(path);
  if (!kind.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is ", kind));
  }
  return read;
}

absl::Status CheckReleaseFileFor(const Method& method, const std::string& path) {
  const std::vector<v1::ReleaseKind> kinds = method.ReleaseKinds();
  std::error_code error;
  if (kinds.empty() || !std::filesystem::is_regular_file(path, error)) return absl::OkStatus();
  v1::Release release;
  const absl::Status read = ReadProtoFile(path, &release);
  const std::optional<v1::ReleaseKind> held =
      read.ok() ? KindOfRelease(release) : std::optional<v1::ReleaseKind>();
  if (!held.has_value()) {
    // A model does not parse as a release (its packed parameters are no
    // message): name it before the reader's "truncated or damaged?".
    const std::string kind = DescribeFileKind(path);
    if (!kind.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "' is ", kind, "; `train ", method.name(), "` reads ",
                       ReleaseKindName(kinds[0]), " releases"));
    }
    // An empty, text or damaged file as the reader names it; one that
    // parses, as the method's own reader does.
    return read;
  }
  for (v1::ReleaseKind kind : kinds) {
    if (kind == *held) return absl::OkStatus();
  }
  std::string text = absl::StrCat("'", path, "' is a release artefact of kind ",
                                  ReleaseKindName(*held), "; `train ", method.name(),
                                  "` reads ", ReleaseKindName(kinds[0]), " releases");
  const std::string train = TrainCommandForRelease(*held, path);
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
