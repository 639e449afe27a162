#ifndef DPCURATOR_CLIENT_METHODS_REGISTRY_H_
#define DPCURATOR_CLIENT_METHODS_REGISTRY_H_

// The client's methods, bound in one place (registry.cc: one exhaustive
// switch over MethodId, the way plan/release_kinds.cc binds release
// kinds). `train`, `sample`, `eval`, `report`, `demo --method` and `--help`
// find methods only here, so a new method is its unit plus one line.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/methods/method.h"
#include "core/data/table.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// The unit of `id`; null only for a value outside the enum.
const Method* MethodFor(MethodId id);

// Every registered method, in MethodId order.
const std::vector<const Method*>& RegisteredMethods();

// The method named `name` (a command word or a model file's `method`);
// NotFound listing the registered names otherwise.
absl::StatusOr<const Method*> FindMethod(absl::string_view name);

// The method that wrote `model`, after checking the file's format version
// (kModelFormatVersion) and naming what is wrong otherwise.
absl::StatusOr<const Method*> MethodOfModel(const v1::GeneratorModel& model);

// The `train` command that reads release artefacts of `kind`
// ("`dpcurator train mst --release FILE`"), FILE spelled as `path`; empty
// when no registered method does.
std::string TrainCommandForRelease(v1::ReleaseKind kind, absl::string_view path);

// What the file at `path` is, when it is a release artefact or a model
// file, with the command that takes it: "a release artefact of kind mst
// (from `dpcurator release`): train a model from it with `dpcurator train
// mst --release F`, then sample rows from that model". Empty when it is
// neither (or unreadable), so the caller keeps its own message. For
// commands given the wrong kind of file (issue 25 item 2).
std::string DescribeFileKind(const std::string& path);

// The model file at `path` and the method that wrote it, for every command
// that takes --model (`sample`, `eval`, `report`). A file of another kind
// is named with the command that takes it (a release, by DescribeFileKind;
// a schema, a table, an empty or a truncated file, by ReadProtoFile),
// InvalidArgument; NotFound when it cannot be opened; a model of another
// format or method as MethodOfModel says.
absl::StatusOr<const Method*> ReadModelFile(const std::string& path, v1::GeneratorModel* model);

// Before `train <method> --release FILE`: OK when FILE holds a release kind
// the method reads (or is missing: the method's own reader says so);
// otherwise names what FILE is and the train command that takes it ("an
// mst release given to `train merf`: train it with `dpcurator train mst
// --release FILE`"; an empty, text or damaged file as ReadProtoFile does).
absl::Status CheckReleaseFileFor(const Method& method, const std::string& path);

// Rows drawn from a tabular model by its method's sampler.
absl::StatusOr<data::Table> SampleModel(const v1::GeneratorModel& model, int64_t num_rows,
                                        uint64_t seed);

// Large samples are drawn in chunks of kSampleChunkRows rows, so memory
// stays bounded however many are asked for (issue 25 item 2); chunk k > 0
// uses SampleChunkSeed(seed, k), chunk 0 the seed itself. `dpcurator
// sample` and the Python module (dpcurator.load_model) both follow it, so
// the same model and seed give the same rows.
inline constexpr int64_t kSampleChunkRows = 100000;
uint64_t SampleChunkSeed(uint64_t seed, int64_t chunk);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_REGISTRY_H_
