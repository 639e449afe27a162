#include "plan/release_kinds.h"

#include "core/release/charfn_embedding.h"
#include "core/release/labelled_release.h"
#include "core/release/release_kind.h"
#include "core/release/rff_embedding.h"
#include "core/util/status_macros.h"
#include "proto/release_kinds.h"

namespace dpcurator::plan {
namespace {

// A core unit bound to its case of ReleaseRequest.kind: `Params` reads the
// case, `MutableParams` writes it. The concept makes a unit without a
// planned mechanism (and so without an accounting event) fail to compile.
template <release::OneShotReleaseKind Kind, v1::ReleaseKind kKind, auto Params,
          auto MutableParams>
class Binding final : public ReleaseKindBinding {
 public:
  v1::ReleaseKind kind() const override { return kKind; }

  absl::Status Resolve(const data::Schema& schema, v1::ReleaseRequest* request) const override {
    DPC_ASSIGN_OR_RETURN(typename Kind::Params resolved,
                         Kind::Resolve(ParamsFromProto((request->*Params)()), schema));
    ParamsToProto(resolved, (request->*MutableParams)());
    return absl::OkStatus();
  }

  release::GaussianMechanismRecord Plan(const v1::ReleaseRequest& resolved,
                                        double noise_multiplier) const override {
    return Kind::Plan(ParamsFromProto((resolved.*Params)()), noise_multiplier);
  }

  absl::Status CheckNoise(const v1::ReleaseRequest& resolved, const data::Schema& schema,
                          privacy::NeighbouringRelation relation, double noise_multiplier,
                          int64_t public_n) const override {
    return Kind::CheckNoise(ParamsFromProto((resolved.*Params)()),
                            data::FeatureLayout::ForFeatures(schema), schema.num_classes(),
                            relation, noise_multiplier, public_n);
  }

  absl::StatusOr<std::unique_ptr<PreparedEngine>> Prepare(
      const v1::ReleaseRequest& resolved, const data::Schema& schema) const override {
    DPC_ASSIGN_OR_RETURN(typename Kind::Prepared prepared,
                         Kind::Prepare(ParamsFromProto((resolved.*Params)()),
                                       data::FeatureLayout::ForFeatures(schema)));
    return std::unique_ptr<PreparedEngine>(new Prepared(std::move(prepared)));
  }

 private:
  class Prepared final : public PreparedEngine {
   public:
    explicit Prepared(typename Kind::Prepared prepared) : prepared_(std::move(prepared)) {}
    absl::StatusOr<EngineOutput> Run(const release::EncodedRows& rows,
                                     privacy::NeighbouringRelation relation,
                                     double noise_multiplier, int64_t public_n,
                                     privacy::NoiseSource* noise) override {
      DPC_ASSIGN_OR_RETURN(typename Kind::Result result,
                           Kind::Run(std::move(prepared_), rows, relation, noise_multiplier,
                                     public_n, noise));
      return Output(std::move(result));
    }

    int64_t StatisticLength(int num_classes) const override {
      return release::ExactEmbeddingLength(prepared_.feature_map.output_dim(), num_classes);
    }

    absl::StatusOr<EngineOutput> RunOnStatistic(absl::Span<const double> statistic,
                                                int64_t rows, const data::FeatureLayout& layout,
                                                int num_classes,
                                                privacy::NeighbouringRelation relation,
                                                double noise_multiplier, int64_t public_n,
                                                privacy::NoiseSource* noise) override {
      DPC_ASSIGN_OR_RETURN(
          const embed::LabelledEmbeddingAccumulator exact,
          release::ExactEmbeddingFromVector(statistic, prepared_.feature_map.output_dim(),
                                            num_classes, rows));
      DPC_ASSIGN_OR_RETURN(typename Kind::Result result,
                           Kind::ReleaseExact(std::move(prepared_), exact, layout, num_classes,
                                              relation, noise_multiplier, public_n, noise));
      return Output(std::move(result));
    }

   private:
    static EngineOutput Output(typename Kind::Result result) {
      EngineOutput output;
      SetArtefactFields(result, &output.artefact);
      output.ran = std::move(result.ran);
      return output;
    }

    typename Kind::Prepared prepared_;
  };
};

template <typename BindingType>
const ReleaseKindBinding* Instance() {
  static const BindingType* const binding = new BindingType();
  return binding;
}

}  // namespace

const ReleaseKindBinding* BindingFor(v1::ReleaseRequest::KindCase kind_case) {
  using v1::ReleaseRequest;
  switch (kind_case) {
    // One line per kind: its case, its unit, its ReleaseKind, its fields.
    case ReleaseRequest::kRffEmbedding:
      return Instance<Binding<release::RffEmbeddingKind, v1::RFF_EMBEDDING,
                              &ReleaseRequest::rff_embedding,
                              &ReleaseRequest::mutable_rff_embedding>>();
    case ReleaseRequest::kCharfnEmbedding:
      return Instance<Binding<release::CharfnEmbeddingKind, v1::CHARFN_EMBEDDING,
                              &ReleaseRequest::charfn_embedding,
                              &ReleaseRequest::mutable_charfn_embedding>>();
    // A recipe of several mechanisms, not one Gaussian: planned and run by
    // PlanRelease / ComputeMstRelease (plan/releases.cc).
    case ReleaseRequest::kMst:
      return nullptr;
    // Likewise (PlanRelease / ComputeAimRelease).
    case ReleaseRequest::kAim:
      return nullptr;
    // Reads the stored values, not the encoded rows (PlanMarginalsRelease /
    // ComputeMarginalsRelease, plan/partition.h).
    case ReleaseRequest::kMarginals:
      return nullptr;
    // Reads an open column's stored values (issue 38; H1b's kind).
    case ReleaseRequest::kCategoryFit:
      return nullptr;
    case ReleaseRequest::KIND_NOT_SET:
      return nullptr;
  }
  return nullptr;
}

}  // namespace dpcurator::plan
