#ifndef DPCURATOR_SERVER_RELEASE_KINDS_H_
#define DPCURATOR_SERVER_RELEASE_KINDS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/encoded_rows.h"
#include "core/release/mechanism_record.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::server {

// What a kind's engine made: the artefact with the kind's own fields set
// (the caller adds the dataset's), and the engine's record of its mechanism.
struct EngineOutput {
  v1::EmbeddingArtefact artefact;
  release::GaussianMechanismRecord ran;
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
  virtual absl::StatusOr<EngineOutput> Run(const v1::ReleaseRequest& resolved,
                                           const release::EncodedRows& rows,
                                           privacy::NeighbouringRelation relation,
                                           double noise_multiplier, int64_t public_n,
                                           privacy::NoiseSource* noise) const = 0;
};

// The registry: one line per kind in release_kinds.cc. nullptr for
// KIND_NOT_SET. The switch has no default, so a ReleaseRequest.kind case
// without a binding is a compile error in CI (-Wswitch -Werror).
const ReleaseKindBinding* BindingFor(v1::ReleaseRequest::KindCase kind_case);

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_RELEASE_KINDS_H_
