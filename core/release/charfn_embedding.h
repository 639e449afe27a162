#ifndef DPCURATOR_CORE_RELEASE_CHARFN_EMBEDDING_H_
#define DPCURATOR_CORE_RELEASE_CHARFN_EMBEDDING_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/embed/charfn.h"
#include "core/embed/labelled_embedding.h"
#include "core/embed/pairwise_distance.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/encoded_rows.h"
#include "core/release/mechanism_record.h"

namespace dpcurator::release {

// PEARL's release (pearl.md 1.1-1.2; docs/privacy.md 2.2, 2.5): the
// labelled characteristic-function embedding of the rows, optionally after
// a private mean-distance release that sets the length-scale (hash-chain
// estimator). Both are Gaussian releases with the same noise multiplier
// (pearl.md section 2, "equal share"), so the planned mechanism has one or
// two entries. One unit: parameters and bounds, plan, engine, trainer map.
class CharfnEmbeddingKind {
 public:
  static constexpr std::string_view kName = "charfn_embedding";

  // As on the wire: 0 (unset) means the default.
  struct Params {
    int num_frequencies = 0;     // 0: kDefaultNumFrequencies (images: kImage*Frequencies)
    double length_scale = 0.0;   // declared l; 0: embed::DefaultCharfnLengthScale(layout)
    bool private_length_scale = false;  // l from a private mean distance instead
    // The numeric block's own length-scale: > 0 declared, 0 the schema
    // default embed::DefaultLengthScale(layout), < 0 the same as l.
    double numeric_length_scale = 0.0;
    uint64_t seed = 0;  // 0: a fresh public seed
  };

  struct Result {
    embed::NoisyLabelledEmbedding embedding;
    // The feature map as run (length-scales resolved): a trainer rebuilds
    // the same map from these (FeatureMap below).
    embed::CharfnOptions feature_map;
    double row_diameter = 0.0;
    // Set with private_length_scale: the released mean-distance statistic.
    std::optional<embed::NoisyDistanceStatistic> distance;
    GaussianMechanismRecord ran;
  };

  static absl::StatusOr<Params> Resolve(Params params, const data::Schema& schema);

  // One Gaussian release, two with private_length_scale (same multiplier).
  static GaussianMechanismRecord Plan(const Params& resolved, double noise_multiplier);

  // Every way the noise steps could fail, from public values only: the
  // private length-scale's distance release (embed::MeanDistanceNoise: s x
  // Delta on the grid, public n >= 2 under REPLACE_ONE) and the embedding's
  // grid Gaussian (2k + 1) x C coordinates. Called before admission by the
  // server and again by Run (docs/privacy.md 6.4).
  static absl::Status CheckNoise(const Params& resolved, const data::FeatureLayout& layout,
                                 int num_classes, privacy::NeighbouringRelation relation,
                                 double noise_multiplier, int64_t public_n);

  // The frequency matrix (k x total_dim doubles, bounded by Resolve),
  // allocated and drawn before any row is read; with a private
  // length-scale it is scaled once the noisy distance is released
  // (CharacteristicFunctionMap::SetLengthScale).
  struct Prepared {
    Params resolved;
    embed::CharacteristicFunctionMap feature_map;
  };
  static absl::StatusOr<Prepared> Prepare(const Params& resolved,
                                          const data::FeatureLayout& layout);

  // l when it is not released: the declared one, or the schema default.
  static double DeclaredLengthScale(const Params& resolved, const data::FeatureLayout& layout);
  // Scales a prepared map to l (and the numeric block to its own scale),
  // returning the options as run, which a trainer rebuilds the map from.
  // Run calls it with the declared or released l; the scale-out partials
  // (python/) with DeclaredLengthScale, so both embed rows with one map.
  static absl::StatusOr<embed::CharfnOptions> ScaleFeatureMap(
      const Params& resolved, const data::FeatureLayout& layout, double length_scale,
      embed::CharacteristicFunctionMap* feature_map);

  static absl::StatusOr<Result> Run(Prepared prepared, const EncodedRows& rows,
                                    privacy::NeighbouringRelation relation,
                                    double noise_multiplier, int64_t public_n,
                                    privacy::NoiseSource* noise);
  // Run's noise step over the exact statistic of rows embedded with the
  // prepared map scaled to the declared l (ScaleFeatureMap with
  // DeclaredLengthScale, as the scale-out partials embed them), `layout`
  // and `num_classes` the rows'. The server makes this call on a statistic
  // the curator's cluster computed (RunnerService, docs/scale-out.md
  // "External datasets"); Run ends with the same noise step. A private
  // length-scale is released from the rows first, so it is refused here
  // (FAILED_PRECONDITION; the server refuses it before admission).
  static absl::StatusOr<Result> ReleaseExact(Prepared prepared,
                                             const embed::LabelledEmbeddingAccumulator& exact,
                                             const data::FeatureLayout& layout, int num_classes,
                                             privacy::NeighbouringRelation relation,
                                             double noise_multiplier, int64_t public_n,
                                             privacy::NoiseSource* noise);
  // Prepare, then Run.
  static absl::StatusOr<Result> Run(const Params& resolved, const EncodedRows& rows,
                                    privacy::NeighbouringRelation relation,
                                    double noise_multiplier, int64_t public_n,
                                    privacy::NoiseSource* noise);

  static absl::StatusOr<embed::CharacteristicFunctionMap> FeatureMap(
      const data::FeatureLayout& layout, const embed::CharfnOptions& released);
};

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_CHARFN_EMBEDDING_H_
