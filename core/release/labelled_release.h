#ifndef DPCURATOR_CORE_RELEASE_LABELLED_RELEASE_H_
#define DPCURATOR_CORE_RELEASE_LABELLED_RELEASE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/embed/feature_map.h"
#include "core/embed/labelled_embedding.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"
#include "core/release/encoded_rows.h"

namespace dpcurator::release {

// What the embedding kinds share: the number of frequencies, the
// length-scale bounds, the public seed, the released vector's length, and
// the labelled-embedding Gaussian mechanism itself.

inline constexpr int kDefaultNumFrequencies = 500;
inline constexpr int kMaxNumFrequencies = 20000;
// Image schemas' defaults (declared constants; the released vector's length
// is public). DP-MERF: 4000 frequencies, the best of our Fashion-MNIST
// tuning at epsilon 1 (bench/fmnist: 76.7% CNN accuracy against 76.0% at
// 2000; the MNIST code's D = 1000 features is 500). PEARL: 1500 complex
// frequencies, its Fashion-MNIST code's "3000 features" (pearl.md Sec. 4:
// counts are of real features).
inline constexpr int kImageRffFrequencies = 4000;
inline constexpr int kImageCharfnFrequencies = 1500;

// Resolves the frequency parameters every embedding kind has, in place:
// 0 frequencies -> default_frequencies, then [1, kMaxNumFrequencies];
// a declared length-scale (0: the kind's schema default) must lie in the
// data-independent range of core/embed/frequency_bounds.h (docs/privacy.md
// 6.2: inside it no row of the declared domain can make a feature
// non-finite, so nothing after the rows are read can fail on a chosen
// parameter); seed 0 -> a fresh public seed from the CSPRNG (odd, never 0).
absl::Status ResolveFrequencyParams(int* num_frequencies, int default_frequencies,
                                    double length_scale, uint64_t* seed);

// The released vector has (features + 1) coordinates per class (the class
// sums and the count). Its length follows from public parameters alone, so
// a length the noise layer cannot take (the grid Gaussian's proof holds up
// to privacy::kMaxGridGaussianDimension coordinates, docs/privacy.md 4.6)
// is refused before admission rather than failing after the charge.
// features = 2 x num_frequencies + extra_features (RFF: the categorical
// block; PEARL: none). The refusal names the largest num_frequencies that
// would fit.
absl::Status ValidateReleasedDimension(int num_frequencies, int extra_features, int num_classes);

// The frequency matrix (num_frequencies x input_dim doubles) is allocated
// by the engine whatever the rows, so its size is a request parameter like
// any other and is bounded before admission (docs/privacy.md 6.2): 2^26
// doubles = 512 MiB. Fashion-MNIST's defaults (4000 x 784 for rff, 1500 x
// 784 for charfn) are 3.1M and 1.2M entries; a 1024 x 1024 image schema's
// defaults (33.5 GB and 12.6 GB) are refused with the largest
// num_frequencies that fits.
inline constexpr int64_t kMaxFrequencyMatrixEntries = int64_t{1} << 26;
// OK when num_frequencies x input_dim <= kMaxFrequencyMatrixEntries;
// otherwise INVALID_ARGUMENT saying what to lower. Public values only.
absl::Status ValidateFrequencyMatrix(int num_frequencies, int64_t input_dim);

// The grid Gaussian noise ReleaseLabelledEmbedding draws for a released
// vector of (feature_dim + 1) x num_classes coordinates at noise multiplier
// s, from public values only: the sensitivity (LabelledEmbeddingSensitivity,
// public_n used under REPLACE_ONE only) and privacy::GridGaussianNoise, the
// code the noise step runs. A kind calls it at plan time (before admission)
// and again in Run, so a multiplier whose s * Delta the grid cannot take is
// refused before any charge and can never fail after the rows are read
// (docs/privacy.md 6.4).
absl::StatusOr<privacy::GridNoise> LabelledEmbeddingNoise(privacy::NeighbouringRelation relation,
                                                          double noise_multiplier,
                                                          int64_t public_n, int64_t feature_dim,
                                                          int num_classes);

// The exact (noiseless) labelled embedding of `rows` under `feature_map`:
// per-class feature sums and counts, accumulated in blocks. The one place
// both the engine (NoisyLabelledEmbeddingOf) and the scale-out partials
// (python/, docs/scale-out.md) compute it, so a sum of shard partials is
// the engine's statistic up to floating-point summation order.
// max_threads as embed::AccumulateEmbedding's (0: both cores).
absl::StatusOr<embed::LabelledEmbeddingAccumulator> ExactLabelledEmbedding(
    const embed::FeatureMap& feature_map, const EncodedRows& rows, int max_threads = 0);

// The exact statistic's layout on the wire, as the scale-out partials
// (python/src/partials.h) and RunnerService.SubmitStatistic carry it:
// [per-class feature sums, column-major (feature_dim x C, class 0's sums
// first) ; per-class counts (C)], (feature_dim + 1) x C doubles.
int64_t ExactEmbeddingLength(int64_t feature_dim, int num_classes);
Eigen::VectorXd FlattenExactEmbedding(const embed::LabelledEmbeddingAccumulator& exact);
// The inverse, for a statistic computed in the curator's cluster: an
// accumulator of `num_rows` rows. INVALID_ARGUMENT when the length is not
// ExactEmbeddingLength, an entry is not finite, or num_rows < 0. The checks
// are of the shape alone and the message quotes no entry.
absl::StatusOr<embed::LabelledEmbeddingAccumulator> ExactEmbeddingFromVector(
    absl::Span<const double> values, int64_t feature_dim, int num_classes, int64_t num_rows);

// The labelled embedding of `rows` under `feature_map` with the Gaussian
// noise of multiplier s (docs/privacy.md 2.2): the noiseless statistic is
// accumulated in blocks, then one grid Gaussian draw covers the whole
// [per-class values ; per-class totals] vector.
absl::StatusOr<embed::NoisyLabelledEmbedding> NoisyLabelledEmbeddingOf(
    const embed::FeatureMap& feature_map, const EncodedRows& rows,
    privacy::NeighbouringRelation relation, double noise_multiplier, int64_t public_n,
    privacy::NoiseSource* noise);

}  // namespace dpcurator::release

#endif  // DPCURATOR_CORE_RELEASE_LABELLED_RELEASE_H_
