#ifndef DPCURATOR_PLAN_RELEASE_KINDS_H_
#define DPCURATOR_PLAN_RELEASE_KINDS_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/data/schema.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/encoded_rows.h"
#include "core/release/mechanism_record.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::plan {

// What a kind's engine made: the artefact with the kind's own fields set
// (the caller adds the dataset's), and the engine's record of its mechanism.
struct EngineOutput {
  v1::EmbeddingArtefact artefact;
  release::GaussianMechanismRecord ran;
};

// A kind's engine with everything it allocates from public values already
// built (release::OneShotReleaseKind's Prepare): made before any row is
// read, run once after.
class PreparedEngine {
 public:
  virtual ~PreparedEngine() = default;
  virtual absl::StatusOr<EngineOutput> Run(const release::EncodedRows& rows,
                                           privacy::NeighbouringRelation relation,
                                           double noise_multiplier, int64_t public_n,
                                           privacy::NoiseSource* noise) = 0;
  // The length of the exact statistic RunOnStatistic takes for a schema of
  // `num_classes` classes (release::ExactEmbeddingLength): public.
  virtual int64_t StatisticLength(int num_classes) const = 0;
  // Instead of Run, on an external dataset: the kind's noise step
  // (Kind::ReleaseExact, the step Run ends with) over the exact statistic
  // the curator's cluster computed, in the partials' layout
  // (release::ExactEmbeddingFromVector), of `rows` rows with `layout` and
  // `num_classes` from the public schema.
  virtual absl::StatusOr<EngineOutput> RunOnStatistic(absl::Span<const double> statistic,
                                                      int64_t rows,
                                                      const data::FeatureLayout& layout,
                                                      int num_classes,
                                                      privacy::NeighbouringRelation relation,
                                                      double noise_multiplier, int64_t public_n,
                                                      privacy::NoiseSource* noise) = 0;
};

// The server's handle on one one-shot release kind: its core unit
// (core/release/, bound through release::OneShotReleaseKind) seen through
// its case of ReleaseRequest.kind.
class ReleaseKindBinding {
 public:
  virtual ~ReleaseKindBinding() = default;

  virtual v1::ReleaseKind kind() const = 0;
  // Fills defaults of the kind's parameters in `request` and validates them
  // against bounds that depend on the public schema only.
  virtual absl::Status Resolve(const data::Schema& schema, v1::ReleaseRequest* request) const = 0;
  // The mechanism the engine will run for noise multiplier s: what the
  // ledger charges (release::OneShotEvent).
  virtual release::GaussianMechanismRecord Plan(const v1::ReleaseRequest& resolved,
                                                double noise_multiplier) const = 0;
  // Before admission: every way the engine's noise step could fail for
  // this multiplier and public size, from the public schema only (the
  // kind's CheckNoise, which its Run calls again; docs/privacy.md 6.4).
  virtual absl::Status CheckNoise(const v1::ReleaseRequest& resolved, const data::Schema& schema,
                                  privacy::NeighbouringRelation relation,
                                  double noise_multiplier, int64_t public_n) const = 0;
  // After admission, before any row is read: the engine's allocations.
  virtual absl::StatusOr<std::unique_ptr<PreparedEngine>> Prepare(
      const v1::ReleaseRequest& resolved, const data::Schema& schema) const = 0;
};

// The registry: one line per kind in release_kinds.cc. nullptr for
// KIND_NOT_SET. The switch has no default, so a ReleaseRequest.kind case
// without a binding is a compile error in CI (-Wswitch -Werror).
const ReleaseKindBinding* BindingFor(v1::ReleaseRequest::KindCase kind_case);

}  // namespace dpcurator::plan

#endif  // DPCURATOR_PLAN_RELEASE_KINDS_H_
