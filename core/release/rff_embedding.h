#ifndef DPCURATOR_CORE_RELEASE_RFF_EMBEDDING_H_
#define DPCURATOR_CORE_RELEASE_RFF_EMBEDDING_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/embed/labelled_embedding.h"
#include "core/embed/rff.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/encoded_rows.h"
#include "core/release/mechanism_record.h"

namespace dpcurator::release {

// DP-MERF's release (dp-merf.md 1.2-1.3; docs/privacy.md 2.2): the labelled
// random-Fourier-feature mean embedding of the rows, one Gaussian release
// of the whole [per-class embedding ; per-class counts] vector. One unit:
// parameters and their data-independent bounds, the planned mechanism (and
// so the accounting event), the engine, and the feature map a trainer
// rebuilds from the artefact. Also the step of an rff_embedding session,
// run on a subsampled batch (dp-merf.md 1.6 (a)).
class RffEmbeddingKind {
 public:
  static constexpr std::string_view kName = "rff_embedding";

  // As on the wire: 0 (unset) means the default.
  struct Params {
    int num_frequencies = 0;               // 0: kDefaultNumFrequencies (images: kImage*Frequencies)
    double length_scale = 0.0;             // 0: embed::DefaultLengthScale(layout)
    std::optional<double> numeric_weight;  // unset: embed::DefaultNumericWeight(layout)
    uint64_t seed = 0;                     // 0: a fresh public seed
  };

  struct Result {
    embed::NoisyLabelledEmbedding embedding;
    // The feature map as run, every default resolved: a trainer rebuilds the
    // same map from these (FeatureMap below).
    embed::RffOptions feature_map;
    GaussianMechanismRecord ran;
  };

  // Fills defaults and checks every parameter against bounds that depend on
  // the public schema only (INVALID_ARGUMENT stating the accepted range).
  static absl::StatusOr<Params> Resolve(Params params, const data::Schema& schema);

  // The mechanism Run performs for noise multiplier s: one Gaussian release.
  static GaussianMechanismRecord Plan(const Params& resolved, double noise_multiplier);

  // Every way the noise step could fail, checked from public values only:
  // the grid Gaussian of the released vector ((2k + categorical + 1) x C
  // coordinates) at multiplier s, with public_n the public row count
  // (REPLACE_ONE; unused under ADD_REMOVE). The server calls it before
  // admission (PlanRelease, PlanSession); Run calls it again, so the two
  // cannot drift (docs/privacy.md 6.4).
  static absl::Status CheckNoise(const Params& resolved, const data::FeatureLayout& layout,
                                 int num_classes, privacy::NeighbouringRelation relation,
                                 double noise_multiplier, int64_t public_n);

  // What the engine allocates from public values alone, built before any
  // row is read (the frequency matrix, k x numeric_dim doubles, bounded by
  // Resolve): an allocation failure then happens before the read.
  struct Prepared {
    Params resolved;
    embed::RandomFourierFeatureMap feature_map;
  };
  static absl::StatusOr<Prepared> Prepare(const Params& resolved,
                                          const data::FeatureLayout& layout);

  // The engine over prepared state. public_n: the public row count
  // (REPLACE_ONE) or the batch's.
  static absl::StatusOr<Result> Run(const Prepared& prepared, const EncodedRows& rows,
                                    privacy::NeighbouringRelation relation,
                                    double noise_multiplier, int64_t public_n,
                                    privacy::NoiseSource* noise);
  // Run's noise step over the exact statistic of rows embedded with
  // prepared.feature_map (release::ExactLabelledEmbedding), `layout` and
  // `num_classes` the rows': Run ends with this call, and the server makes
  // it on a statistic the curator's cluster computed (RunnerService,
  // docs/scale-out.md "External datasets"), so both paths noise alike.
  static absl::StatusOr<Result> ReleaseExact(const Prepared& prepared,
                                             const embed::LabelledEmbeddingAccumulator& exact,
                                             const data::FeatureLayout& layout, int num_classes,
                                             privacy::NeighbouringRelation relation,
                                             double noise_multiplier, int64_t public_n,
                                             privacy::NoiseSource* noise);
  // Prepare, then Run (session steps and tests).
  static absl::StatusOr<Result> Run(const Params& resolved, const EncodedRows& rows,
                                    privacy::NeighbouringRelation relation,
                                    double noise_multiplier, int64_t public_n,
                                    privacy::NoiseSource* noise);

  // The trainer's side: the map of a released artefact.
  static absl::StatusOr<embed::RandomFourierFeatureMap> FeatureMap(
      const data::FeatureLayout& layout, const embed::RffOptions& released);
};

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_RFF_EMBEDDING_H_
