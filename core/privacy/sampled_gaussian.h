#ifndef DPCURATOR_CORE_PRIVACY_SAMPLED_GAUSSIAN_H_
#define DPCURATOR_CORE_PRIVACY_SAMPLED_GAUSSIAN_H_

// A subsampled Gaussian step as the accountant sees it: the sampling scheme
// that goes with a dataset's neighbouring relation, and the event one step
// is charged as. The one place that maps relation -> scheme -> event, for
// the server's session plans, calibration and the CLI's accounting.

#include "absl/status/statusor.h"
#include "core/privacy/events.h"

namespace dpcurator::privacy {

enum class SamplingScheme {
  kPoisson,             // ADD_REMOVE, PoissonSampledGaussian
  kWithoutReplacement,  // REPLACE_ONE, SampledWithoutReplacementGaussian
};

// The noise a sampled Gaussian step draws: continuous (PoissonSampledGaussian,
// SampledWithoutReplacementGaussian) or the grid's discrete Gaussian
// (PoissonSampledDiscreteGaussian, SampledWithoutReplacementDiscreteGaussian:
// what the server's session steps draw and are charged as).
enum class SampledNoise { kContinuous, kDiscrete };

// The scheme whose bound holds under `relation`: Poisson sampling under
// ADD_REMOVE (Mironov, Talwar, Zhang 2019), fixed-size sampling without
// replacement under REPLACE_ONE (Wang, Balle, Kasiviswanathan 2019).
SamplingScheme SamplingSchemeFor(NeighbouringRelation relation);

// The inverse: the relation a scheme's bound is stated for.
NeighbouringRelation RelationOf(SamplingScheme scheme);

// One step: sampling at rate q under `scheme`, then the Gaussian mechanism
// with noise multiplier s, continuous or discrete (events.h).
absl::StatusOr<PrivacyEvent> SampledGaussianEvent(SamplingScheme scheme, double sampling_rate,
                                                  double noise_multiplier, SampledNoise noise);

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_SAMPLED_GAUSSIAN_H_
