#ifndef DPCURATOR_CORE_EMBED_PAIRWISE_DISTANCE_H_
#define DPCURATOR_CORE_EMBED_PAIRWISE_DISTANCE_H_

#include <cstdint>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/encoder.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"

namespace dpcurator::embed {

// PEARL's auxiliary release (Liew et al. 2022, App. D; pearl.md 1.2 A): a DP
// estimate D~ of the mean pairwise distance of the encoded rows, whose
// inverse is the standard deviation of the base frequency distribution
// (std(t) = 1/D~, pearl.md 1.2 B). Two estimators:
//
//  * the exact mean over all n(n-1)/2 pairs (the paper's D_n), O(n^2 d),
//    computed in blocks through the Gram matrix; and
//  * the "hash chain": consecutive rows of a keyed-hash order of the
//    multiset of rows, O(n log n + n d). Each of its n-1 edges is a
//    uniformly random pair, so its mean is an unbiased estimate of D_n; and
//    because the order is a function of the multiset (not of n or of the
//    storage order), a neighbouring dataset changes at most two edges
//    (docs/privacy.md; derivations on each sensitivity function).
//
// Domain: encoded rows (data::EncodeFeatures), numerics in [0,1], one-hot
// blocks in {0,1} with at most one 1. Entries are clamped to [0,1] and every
// distance to the diameter below, so each term lies in [0, diam] for any
// input whatsoever: the sensitivities hold unconditionally.

// Euclidean diameter of the encoded domain: sqrt(d_num + 2 V) for d_num
// numerics and V one-hot blocks (a numeric coordinate differs by at most 1;
// two one-hot vectors by at most sqrt(2)). Tighter than PEARL's sqrt(d)
// (App. D), which would count every one-hot level.
double EncodedRowDiameter(const data::FeatureLayout& layout);

// The exact (private) statistic before noise.
struct DistanceStatistic {
  double distance_sum = 0.0;  // sum of min(||x_a - x_b||, diam) over the pairs
  int64_t num_pairs = 0;      // pairs summed
  int64_t num_rows = 0;       // rows seen
};

// Mergeable accumulator of the hash-chain statistic: Add blocks of encoded
// rows where they live, Merge shards, Finish once. Keeps the (clamped) rows
// until Finish, which sorts them by a keyed hash and sums the distances of
// consecutive rows.
//
// Order: row content x gets h(x) = Hash(seed, x); the j-th identical copy of
// x (j = 0, 1, ...) gets the key Mix(h(x), j), and rows are sorted by
// (key, content, j). Copies of one row are therefore scattered like any
// other rows (no zero-distance runs of duplicates biasing the mean down), and
// the order is a function of the multiset {(x, j)}: adding or removing one
// row adds or removes exactly one element (the last copy index of its
// content) and leaves every other key unchanged.
class ChainDistanceAccumulator {
 public:
  // `dim` columns per row, the domain's `diameter` (EncodedRowDiameter), and
  // the public seed of the hash (stored with the release).
  static absl::StatusOr<ChainDistanceAccumulator> Create(int dim, double diameter,
                                                         uint64_t seed);

  // Adds rows (n x dim). Entries are clamped to [0,1] (NaN to 0).
  absl::Status Add(const Eigen::MatrixXd& rows);
  // Same dim, diameter and seed required.
  absl::Status Merge(const ChainDistanceAccumulator& other);
  // Sum over the n-1 consecutive pairs of the keyed order (0 pairs for n < 2).
  DistanceStatistic Finish() const;

  int dim() const { return dim_; }
  double diameter() const { return diameter_; }
  uint64_t seed() const { return seed_; }
  int64_t num_rows() const { return num_rows_; }

 private:
  int dim_ = 0;
  double diameter_ = 0.0;
  uint64_t seed_ = 0;
  int64_t num_rows_ = 0;
  std::vector<double> rows_;  // row-major, num_rows_ x dim_
};

// Exact sum over all pairs i < j of min(||x_i - x_j||, diam), in blocks of
// `block_rows` rows: ||a - b||^2 = ||a||^2 + ||b||^2 - 2 a.b (clamped at 0)
// from one matrix product per pair of blocks (pearl.md 1.2 A), so the
// distance buffer is O(block_rows^2) whatever n. Rows are clamped to [0,1]
// and centred at 1/2 first (reduces cancellation; distances are
// translation invariant).
absl::StatusOr<DistanceStatistic> AllPairsDistanceSum(const Eigen::MatrixXd& rows,
                                                      double diameter,
                                                      int64_t block_rows = 1024);

enum class DistanceEstimator { kHashChain, kAllPairs };

// L2 sensitivity of the released vector (distance units), derivations in
// pairwise_distance.cc and docs/privacy.md:
//   kHashChain, ADD_REMOVE: [S - diam E ; diam E]        -> sqrt(2) diam;
//   kHashChain, REPLACE_ONE (public n >= 2): S / (n-1)   -> 2 diam / (n-1);
//   kAllPairs,  REPLACE_ONE (public n >= 2): S / P(n)    -> 2 diam / n;
//   kAllPairs,  ADD_REMOVE (public minimum size n_min >= 2):
//               S / max(P(n), P(n_min))                  -> 2 diam / n_min,
// with S the distance sum, E the number of chain edges, P(n) = n(n-1)/2.
// `public_n` is n (REPLACE_ONE), n_min (all pairs, ADD_REMOVE), or unused.
absl::StatusOr<double> DistanceSensitivity(DistanceEstimator estimator,
                                           privacy::NeighbouringRelation relation,
                                           double diameter, int64_t public_n);

struct NoisyDistanceStatistic {
  DistanceEstimator estimator = DistanceEstimator::kHashChain;
  privacy::NeighbouringRelation relation = privacy::NeighbouringRelation::kAddRemove;
  // The released vector, as listed at DistanceSensitivity (one or two
  // entries), noised.
  Eigen::VectorXd values;
  double diameter = 0.0;
  double sensitivity = 0.0;
  double noise_multiplier = 0.0;
  double noise_stddev = 0.0;  // = noise_multiplier * sensitivity
  int64_t public_n = 0;       // n, n_min, or 0 (as passed)
  // Grid and discrete Gaussian scale actually used (>= noise_stddev,
  // inflated for the rounding distance; docs/privacy.md 4.2).
  double noise_grid = 0.0;
  double applied_noise_stddev = 0.0;
};

// The grid Gaussian noise ReleaseMeanDistance draws, from public values
// only (the sensitivity above, and the released vector's length: 2 for the
// hash chain under ADD_REMOVE, else 1). A release kind calls it before
// admission, so a multiplier or a public n the noise step cannot take
// (s * Delta outside the grid, n < 2 under REPLACE_ONE) is refused before
// the charge, never after the rows are read (docs/privacy.md 6.4).
absl::StatusOr<privacy::GridNoise> MeanDistanceNoise(DistanceEstimator estimator,
                                                     privacy::NeighbouringRelation relation,
                                                     double diameter, double noise_multiplier,
                                                     int64_t public_n);

// The Gaussian mechanism on the released vector: one accounting event with
// RDP alpha / (2 s^2) (PRIVACY.md, "Gaussian mechanism"). REPLACE_ONE
// requires statistic.num_rows == public_n (n is public, the rows used must
// be exactly n).
absl::StatusOr<NoisyDistanceStatistic> ReleaseMeanDistance(
    const DistanceStatistic& statistic, DistanceEstimator estimator,
    privacy::NeighbouringRelation relation, double diameter, double noise_multiplier,
    int64_t public_n, privacy::NoiseSource* noise);

// Post-processing: the noisy mean distance D~ (may be <= 0 or > diam after
// noise). Hash chain, ADD_REMOVE, released [A ; B] = [S - diam E ; diam E]:
// S~ = A + B and E~ = B / diam, so D~ = diam (A + B) / max(B, diam), the
// noisy edge count floored at one edge. Otherwise the single released value.
double NoisyMeanDistance(const NoisyDistanceStatistic& release);

// PEARL's length-scale l = D~ (std(t) = 1/D~, pearl.md 1.2 B), clamped to
// [floor_fraction * diam, diam]: noise can make D~ <= 0 (pearl.md 1.2 B,
// "guard against D~ <= 0"), a tiny l makes the phases t.x huge so the
// features decorrelate and the embedding carries no signal, and the true
// mean never exceeds diam. Post-processing only. The result always lies
// in [kMinLengthScale, kMaxLengthScale] (frequency_bounds.h), whatever the
// noisy mean (NaN and infinities included), so the feature map built from it
// cannot be refused after the rows were read (docs/privacy.md 6.4).
inline constexpr double kLengthScaleFloorFraction = 0.05;
double LengthScaleFromMeanDistance(double noisy_mean, double diameter,
                                   double floor_fraction = kLengthScaleFloorFraction);

}  // namespace dpcurator::embed

#endif  // DPCURATOR_CORE_EMBED_PAIRWISE_DISTANCE_H_
