#ifndef DPCURATOR_CLIENT_PIPELINE_H_
#define DPCURATOR_CLIENT_PIPELINE_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/eval/evaluator.h"
#include "core/data/image_set.h"
#include "core/train/embedding_trainer.h"
#include "core/train/image_trainer.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// The steps of the product's main path, shared by the individual commands
// and by `dpcurator demo` / the Adult benchmark.

// Uploads a table as text rows in chunks over one client stream.
absl::StatusOr<v1::UploadRowsResponse> UploadTable(Connection& connection,
                                                   const std::string& dataset_id,
                                                   const data::Schema& schema,
                                                   const data::Table& table,
                                                   int rows_per_message = 2000);

// Streams a CSV file (header matched to the schema by name) to the server
// without holding the file in memory.
absl::StatusOr<v1::UploadRowsResponse> UploadCsv(Connection& connection,
                                                 const std::string& dataset_id,
                                                 const data::Schema& schema,
                                                 const std::string& csv_path,
                                                 int rows_per_message = 2000);

// Streams the data section of an ARFF file; the @attribute names are matched
// to the schema like a CSV header.
absl::StatusOr<v1::UploadRowsResponse> UploadArff(Connection& connection,
                                                  const std::string& dataset_id,
                                                  const data::Schema& schema,
                                                  const std::string& arff_path,
                                                  int rows_per_message = 2000);

// A server refusal that names "upload message M, row R" rewritten to start
// with "path:LINE: ", LINE the 1-based line of that row in the file (the
// header counted), from `row_lines` (the line of each row sent, in order).
// Other statuses come back unchanged.
absl::Status CiteUploadLine(const absl::Status& status, const std::string& path,
                            const std::vector<int64_t>& row_lines, int rows_per_message);

// A fresh idempotency key (128 random bits).
std::string NewIdempotencyKey();

// Fits a generator to an rff_embedding release (DP-MERF) and packages it as
// a model.
absl::StatusOr<v1::GeneratorModel> TrainMerfModel(const v1::Release& release,
                                                  const train::EmbeddingTrainerOptions& options);

// PEARL's critic settings on top of the shared trainer options.
struct PearlOptions {
  bool use_critic = true;
  double critic_learning_rate = 1e-2;
  int generator_steps_per_critic_step = 10;
};

// Fits a generator with PEARL's adversarial re-weighting to a
// charfn_embedding release.
absl::StatusOr<v1::GeneratorModel> TrainPearlModel(const v1::Release& release,
                                                   const train::EmbeddingTrainerOptions& options,
                                                   const PearlOptions& pearl);

// Whether a release or model is over images (its schema has an IMAGE
// column): those train an image generator and sample images.
bool IsImageSchema(const v1::TableSchema& schema);

// Fits a class-conditional image generator (core/train/image_generator.h)
// to an rff_embedding release over images (DP-MERF, one-shot) and packages
// it as a model.
absl::StatusOr<v1::GeneratorModel> TrainImageMerfModel(const v1::Release& release,
                                                       const train::ImageTrainerOptions& options);

// The same for a charfn_embedding release (PEARL, with its critic).
absl::StatusOr<v1::GeneratorModel> TrainImagePearlModel(const v1::Release& release,
                                                        const train::ImagePearlOptions& options);

// DP-MERF's minibatch variant on images (dp-merf.md 1.6 (a)): fits an image
// generator to the per-step artefacts of an rff_embedding session, as
// `dpcurator session step --out FILE` writes them (each a uint64 length
// then the EmbeddingArtefact), training step t on artefact t (cycling when
// options.steps exceeds the artefacts in the file). The file is read one
// artefact at a time. Every artefact must come from the same session's
// feature map (same frequencies, seed and schema).
// The number of step artefacts in a session-steps file (the default
// number of training steps: one update per released step).
absl::StatusOr<int64_t> CountSessionSteps(const std::string& steps_path);

absl::StatusOr<v1::GeneratorModel> TrainImageMerfFromSessionSteps(
    const std::string& steps_path, const train::ImageTrainerOptions& options);

// Draws `num_images` images from an image model, labels balanced and
// interleaved (0, 1, ..., C-1, 0, 1, ...: every prefix is balanced), or
// all of class `only_class` when it is >= 0.
absl::StatusOr<data::ImageSet> SampleImageModel(const v1::GeneratorModel& model,
                                                int64_t num_images, uint64_t seed,
                                                int only_class = -1);

// Draws rows in the original schema from a model (tabular models; image
// models sample with SampleImageModel).
absl::StatusOr<data::Table> SampleModel(const v1::GeneratorModel& model, int64_t num_rows,
                                        uint64_t seed);

// Protobuf files (artefacts, models) with a clear error on a bad file.
absl::Status WriteProtoFile(const google::protobuf::Message& message, const std::string& path);
absl::Status ReadProtoFile(const std::string& path, google::protobuf::Message* message);

// Human tables for the evaluation report.
std::string FormatEvalReport(const eval::EvalReport& report);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_PIPELINE_H_
