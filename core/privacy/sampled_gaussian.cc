#include "core/privacy/sampled_gaussian.h"

namespace dpcurator::privacy {

SamplingScheme SamplingSchemeFor(NeighbouringRelation relation) {
  return relation == NeighbouringRelation::kAddRemove ? SamplingScheme::kPoisson
                                                      : SamplingScheme::kWithoutReplacement;
}

NeighbouringRelation RelationOf(SamplingScheme scheme) {
  return scheme == SamplingScheme::kPoisson ? NeighbouringRelation::kAddRemove
                                            : NeighbouringRelation::kReplaceOne;
}

absl::StatusOr<PrivacyEvent> SampledGaussianEvent(SamplingScheme scheme, double sampling_rate,
                                                  double noise_multiplier, SampledNoise noise) {
  const double q = sampling_rate;
  const double s = noise_multiplier;
  if (noise == SampledNoise::kDiscrete) {
    return scheme == SamplingScheme::kPoisson
               ? PrivacyEvent::PoissonSampledDiscreteGaussian(q, s)
               : PrivacyEvent::SampledWithoutReplacementDiscreteGaussian(q, s);
  }
  return scheme == SamplingScheme::kPoisson
             ? PrivacyEvent::PoissonSampledGaussian(q, s)
             : PrivacyEvent::SampledWithoutReplacementGaussian(q, s);
}

}  // namespace dpcurator::privacy
