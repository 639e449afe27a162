#ifndef DPCURATOR_CORE_RELEASE_RELEASE_KIND_H_
#define DPCURATOR_CORE_RELEASE_RELEASE_KIND_H_

#include <concepts>
#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/data/schema.h"
#include "core/embed/labelled_embedding.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/encoded_rows.h"
#include "core/release/mechanism_record.h"

namespace dpcurator::release {

// What a one-shot release kind is: one class in core/release/ named after
// the kind (rff_embedding.h, charfn_embedding.h) that owns, together,
//   Params   - the request's parameters, with 0 meaning "default";
//   Resolve  - defaults and validation against data-independent bounds,
//              before admission (docs/privacy.md 6.2);
//   Plan     - the mechanism Run will perform for a noise multiplier, from
//              which the ledger's event follows (OneShotEvent);
//   CheckNoise - every way the noise step could fail, from public values
//              (layout, classes, relation, s, public n) with the code the
//              noise step runs; called before admission and again by Run
//              (docs/privacy.md 6.4);
//   Prepare  - what the engine allocates from public values (the feature
//              map), built before any row is read;
//   Run      - the engine over the prepared state: the noiseless statistic
//              with its sensitivity, noised, with `ran`, the engine's own
//              record of its mechanism;
//   ReleaseExact - Run's noise step alone, over an exact statistic computed
//              elsewhere (the curator's cluster, docs/scale-out.md "External
//              datasets"): Run ends with the same step, so a statistic
//              submitted by a runner is noised as the engine noises its own;
//   FeatureMap - how a trainer rebuilds the map from the artefact.
// The server binds a kind only through this concept (server/release_kinds.cc),
// so a kind without a planned mechanism, and hence without an event, does
// not compile; the server refuses to deliver when ran != planned.
template <typename Kind>
concept OneShotReleaseKind =
    requires(const typename Kind::Params& params, const data::Schema& schema,
             const data::FeatureLayout& layout, int num_classes, const EncodedRows& rows,
             privacy::NeighbouringRelation relation, double noise_multiplier, int64_t public_n,
             privacy::NoiseSource* noise, typename Kind::Prepared prepared,
             const embed::LabelledEmbeddingAccumulator& exact,
             const typename Kind::Result& result) {
      { Kind::kName } -> std::convertible_to<std::string_view>;
      { Kind::Resolve(params, schema) } -> std::same_as<absl::StatusOr<typename Kind::Params>>;
      { Kind::Plan(params, noise_multiplier) } -> std::same_as<GaussianMechanismRecord>;
      {
        Kind::CheckNoise(params, layout, num_classes, relation, noise_multiplier, public_n)
        } -> std::same_as<absl::Status>;
      {
        Kind::Prepare(params, layout)
        } -> std::same_as<absl::StatusOr<typename Kind::Prepared>>;
      {
        Kind::Run(std::move(prepared), rows, relation, noise_multiplier, public_n, noise)
        } -> std::same_as<absl::StatusOr<typename Kind::Result>>;
      {
        Kind::ReleaseExact(std::move(prepared), exact, layout, num_classes, relation,
                           noise_multiplier, public_n, noise)
        } -> std::same_as<absl::StatusOr<typename Kind::Result>>;
      { result.ran } -> std::convertible_to<GaussianMechanismRecord>;
    };

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_RELEASE_KIND_H_
