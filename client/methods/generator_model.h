#ifndef DPCURATOR_CLIENT_METHODS_GENERATOR_MODEL_H_
#define DPCURATOR_CLIENT_METHODS_GENERATOR_MODEL_H_

// The generator networks that several methods package (DP-MERF, PEARL and
// DP-kernel all fit core/train's TabularGenerator to tables and its
// ImageGenerator to images): shaping them from a schema and sampling them
// back from a model file. Each method's unit calls these; none of them
// knows a method's name.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cli.h"
#include "core/data/image_set.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/train/image_generator.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// Whether a release or model is over images (its schema has an IMAGE
// column): those train an image generator and sample images.
bool IsImageSchema(const v1::TableSchema& schema);

// Sets the image generator's shape from an image schema: one grey image
// column and the label's classes (the architecture and code width stay the
// caller's).
absl::Status ShapeImageGenerator(const data::Schema& schema,
                                 train::ImageGeneratorOptions* options);

// Rows from a tabular generator model, labels drawn from its class weights
// (DP-MERF's G2: multinomial over the noisy proportions).
absl::StatusOr<data::Table> SampleTabularGenerator(const v1::GeneratorModel& model,
                                                   int64_t num_rows, uint64_t seed);

// Draws `num_images` images from an image model, labels balanced and
// interleaved (0, 1, ..., C-1, 0, 1, ...: every prefix is balanced), or
// all of class `only_class` when it is >= 0.
absl::StatusOr<data::ImageSet> SampleImageModel(const v1::GeneratorModel& model,
                                                int64_t num_images, uint64_t seed,
                                                int only_class = -1);

// `sample` for a class-conditional image model: a PNG grid (--png, one row
// of --grid-per-class images per class) and/or an IDX pair (--idx PREFIX,
// `num_images` images with balanced labels).
absl::Status WriteImageModelSamples(const ParsedArgs& args, const v1::GeneratorModel& model,
                                    int64_t num_images, uint64_t seed);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_GENERATOR_MODEL_H_
