#include "core/embed/pairwise_distance.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/embed/frequency_bounds.h"
#include "core/privacy/discrete_noise.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::embed {
namespace {

using privacy::NeighbouringRelation;

// SplitMix64's finaliser (Steele, Lea & Flood 2014), a bijective 64-bit mixer.
// Public randomness only: the sensitivities below hold for every order, so
// nothing rests on the hash being unpredictable.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// Encoded domain [0,1]: NaN to 0, and -0.0 to +0.0 so that equal values have
// equal bits (the content hash reads the bits).
double ClampEntry(double value) {
  if (std::isnan(value)) return 0.0;
  return std::clamp(value, 0.0, 1.0) + 0.0;
}

uint64_t HashRow(uint64_t seed, const double* row, int dim) {
  uint64_t h = Mix64(seed ^ kGolden);
  for (int l = 0; l < dim; ++l) {
    uint64_t bits;
    std::memcpy(&bits, &row[l], sizeof(bits));
    h = Mix64(h + bits + kGolden * static_cast<uint64_t>(l + 1));
  }
  return h;
}

// Lexicographic order of two rows of `dim` doubles (all finite).
int CompareRows(const double* a, const double* b, int dim) {
  for (int l = 0; l < dim; ++l) {
    if (a[l] < b[l]) return -1;
    if (a[l] > b[l]) return 1;
  }
  return 0;
}

absl::Status ValidateAtLeastTwo(int64_t value, const char* name) {
  if (value < 2) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be at least 2, got ", value));
  }
  return absl::OkStatus();
}

double PairCount(int64_t n) { return 0.5 * static_cast<double>(n) * static_cast<double>(n - 1); }

}  // namespace

double EncodedRowDiameter(const data::FeatureLayout& layout) {
  // ||x - x'||^2 = sum_numeric (u - u')^2 + sum_blocks ||e_a - e_b||^2
  //             <= d_num * 1 + V * 2.
  return std::sqrt(static_cast<double>(layout.numeric_dim) +
                   2.0 * static_cast<double>(layout.num_categorical_columns()));
}

absl::StatusOr<ChainDistanceAccumulator> ChainDistanceAccumulator::Create(int dim,
                                                                          double diameter,
                                                                          uint64_t seed) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(dim, "Row dimension"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(diameter, "Diameter"));
  ChainDistanceAccumulator accumulator;
  accumulator.dim_ = dim;
  accumulator.diameter_ = diameter;
  accumulator.seed_ = seed;
  return accumulator;
}

absl::Status ChainDistanceAccumulator::Add(const Eigen::MatrixXd& rows) {
  if (rows.cols() != dim_) {
    return absl::InvalidArgumentError(
        absl::StrCat("distance accumulator expects ", dim_, " columns, got ", rows.cols()));
  }
  const size_t start = rows_.size();
  rows_.resize(start + static_cast<size_t>(rows.rows()) * dim_);
  for (Eigen::Index i = 0; i < rows.rows(); ++i)
    for (int l = 0; l < dim_; ++l) rows_[start + i * dim_ + l] = ClampEntry(rows(i, l));
  num_rows_ += rows.rows();
  return absl::OkStatus();
}

absl::Status ChainDistanceAccumulator::Merge(const ChainDistanceAccumulator& other) {
  if (other.dim_ != dim_ || other.diameter_ != diameter_ || other.seed_ != seed_) {
    return absl::InvalidArgumentError(
        "cannot merge distance accumulators of different dimension, diameter or seed");
  }
  rows_.insert(rows_.end(), other.rows_.begin(), other.rows_.end());
  num_rows_ += other.num_rows_;
  return absl::OkStatus();
}

DistanceStatistic ChainDistanceAccumulator::Finish() const {
  DistanceStatistic statistic;
  statistic.num_rows = num_rows_;
  if (num_rows_ < 2) return statistic;
  const int64_t n = num_rows_;
  auto row = [this](int64_t i) { return rows_.data() + i * dim_; };
  std::vector<uint64_t> content_hash(n);
  for (int64_t i = 0; i < n; ++i) content_hash[i] = HashRow(seed_, row(i), dim_);
  // Group identical rows to number their copies j = 0, 1, ... .
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (content_hash[a] != content_hash[b]) return content_hash[a] < content_hash[b];
    return CompareRows(row(a), row(b), dim_) < 0;
  });
  std::vector<uint64_t> copy(n, 0);
  std::vector<uint64_t> key(n);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t i = order[t];
    if (t > 0 && content_hash[order[t - 1]] == content_hash[i] &&
        CompareRows(row(order[t - 1]), row(i), dim_) == 0) {
      copy[i] = copy[order[t - 1]] + 1;
    }
    key[i] = Mix64(content_hash[i] ^ Mix64(copy[i] + kGolden));
  }
  // The keyed order of the multiset {(x, j)}: a total order (content and j
  // break ties), independent of storage order and of n.
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (key[a] != key[b]) return key[a] < key[b];
    const int c = CompareRows(row(a), row(b), dim_);
    if (c != 0) return c < 0;
    return copy[a] < copy[b];
  });
  double sum = 0.0;
  for (int64_t t = 0; t + 1 < n; ++t) {
    const Eigen::Map<const Eigen::VectorXd> a(row(order[t]), dim_);
    const Eigen::Map<const Eigen::VectorXd> b(row(order[t + 1]), dim_);
    sum += std::min((a - b).norm(), diameter_);
  }
  statistic.distance_sum = sum;
  statistic.num_pairs = n - 1;
  return statistic;
}

absl::StatusOr<DistanceStatistic> AllPairsDistanceSum(const Eigen::MatrixXd& rows,
                                                      double diameter, int64_t block_rows) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(diameter, "Diameter"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(block_rows, "Block size"));
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(rows.cols(), "Row dimension"));
  const Eigen::Index n = rows.rows();
  DistanceStatistic statistic;
  statistic.num_rows = n;
  if (n < 2) return statistic;
  const Eigen::MatrixXd x = rows.unaryExpr([](double v) { return ClampEntry(v) - 0.5; });
  const Eigen::VectorXd norms = x.rowwise().squaredNorm();
  Eigen::MatrixXd gram;
  double sum = 0.0;
  for (Eigen::Index i0 = 0; i0 < n; i0 += block_rows) {
    const Eigen::Index bi = std::min<Eigen::Index>(block_rows, n - i0);
    for (Eigen::Index j0 = i0; j0 < n; j0 += block_rows) {
      const Eigen::Index bj = std::min<Eigen::Index>(block_rows, n - j0);
      // ||a - b||^2 = ||a||^2 + ||b||^2 - 2 a.b (pearl.md 1.2 A), clamped at 0.
      gram.noalias() = x.middleRows(i0, bi) * x.middleRows(j0, bj).transpose();
      double block_sum = 0.0;
      for (Eigen::Index c = 0; c < bj; ++c) {
        // Diagonal blocks: pairs a < c only.
        const Eigen::Index rows_here = (i0 == j0) ? c : bi;
        for (Eigen::Index a = 0; a < rows_here; ++a) {
          const double squared = norms(i0 + a) + norms(j0 + c) - 2.0 * gram(a, c);
          block_sum += std::min(std::sqrt(std::max(squared, 0.0)), diameter);
        }
      }
      sum += block_sum;
    }
  }
  statistic.distance_sum = sum;
  statistic.num_pairs = static_cast<int64_t>(n) * (n - 1) / 2;
  return statistic;
}

absl::StatusOr<double> DistanceSensitivity(DistanceEstimator estimator,
                                           NeighbouringRelation relation, double diameter,
                                           int64_t public_n) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(diameter, "Diameter"));
  if (estimator == DistanceEstimator::kHashChain) {
    if (relation == NeighbouringRelation::kAddRemove) {
      // Every edge term d lies in [0, diam] and min(||.||, diam) is a metric.
      // Adding a row x inserts one element into the keyed order (header):
      //  - between neighbours a, b: S gains d(a,x) + d(x,b) - d(a,b), in
      //    [0, 2 diam] by the triangle inequality; E gains 1;
      //  - at either end (or as the second row): S gains d(x, a) in
      //    [0, diam]; E gains 1;
      //  - as the first row: S and E unchanged.
      // So Delta(S - diam E) is in [-diam, diam] and Delta(diam E) in
      // {0, diam}; removal is the same with signs flipped. The vector
      // [S - diam E ; diam E] moves by at most sqrt(diam^2 + diam^2).
      // Attained: x antipodal to two identical rows it falls between.
      return std::sqrt(2.0) * diameter;
    }
    DPC_RETURN_IF_ERROR(ValidateAtLeastTwo(public_n, "Public dataset size n"));
    // Replacing x by x' = removing x (S changes by -(d(a,x) + d(x,b) -
    // d(a,b)) in [-2 diam, 0], or by -d(x,a) at an end) then inserting x'
    // (in [0, 2 diam]); E = n - 1 is fixed and public. |Delta S| <= 2 diam,
    // so the mean S/(n-1) moves by at most 2 diam/(n-1). Attained: x
    // antipodal between two copies of a, x' = a.
    return 2.0 * diameter / static_cast<double>(public_n - 1);
  }
  DPC_RETURN_IF_ERROR(ValidateAtLeastTwo(
      public_n, relation == NeighbouringRelation::kReplaceOne ? "Public dataset size n"
                                                              : "Public minimum size n_min"));
  const double n = static_cast<double>(public_n);
  if (relation == NeighbouringRelation::kReplaceOne) {
    // PEARL App. D with the encoded diameter: replacing x_n changes the n-1
    // terms d(x_n, x_j), each in [0, diam]: Delta = (n-1) diam / P(n)
    // = 2 diam / n. Attained: all rows equal, x_n' antipodal.
    return 2.0 * diameter / n;
  }
  // ADD_REMOVE, statistic D(X) = S(X) / max(P(|X|), P(n_min)). Let X have m
  // rows and X' = X + {x}.
  //  - m + 1 <= n_min: same denominator P(n_min); S grows by
  //    sum_j d(x, x_j) <= m diam <= (n_min - 1) diam:
  //    Delta <= (n_min - 1) diam / P(n_min) = 2 diam / n_min.
  //  - m >= n_min: with P(m+1) = P(m) + m,
  //    D(X') - D(X) = (sum_j d(x, x_j) - m D(X)) / P(m+1)
  //                 = 2 (mbar_x - D(X)) / (m + 1),
  //    mbar_x, D(X) in [0, diam]: |Delta| <= 2 diam / (n_min + 1).
  // Sup: 2 diam / n_min (attained at m = n_min - 1, all rows equal, x
  // antipodal). No refusal below n_min: the statistic is only biased there.
  return 2.0 * diameter / n;
}

absl::StatusOr<privacy::GridNoise> MeanDistanceNoise(DistanceEstimator estimator,
                                                     NeighbouringRelation relation,
                                                     double diameter, double noise_multiplier,
                                                     int64_t public_n) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  DPC_ASSIGN_OR_RETURN(const double sensitivity,
                       DistanceSensitivity(estimator, relation, diameter, public_n));
  const int64_t dimension =
      estimator == DistanceEstimator::kHashChain && relation == NeighbouringRelation::kAddRemove
          ? 2
          : 1;
  return privacy::GridGaussianNoise(noise_multiplier, sensitivity, dimension);
}

absl::StatusOr<NoisyDistanceStatistic> ReleaseMeanDistance(
    const DistanceStatistic& statistic, DistanceEstimator estimator,
    NeighbouringRelation relation, double diameter, double noise_multiplier, int64_t public_n,
    privacy::NoiseSource* noise) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  DPC_ASSIGN_OR_RETURN(const double sensitivity,
                       DistanceSensitivity(estimator, relation, diameter, public_n));
  const int64_t n = statistic.num_rows;
  const int64_t expected_pairs = estimator == DistanceEstimator::kHashChain
                                     ? std::max<int64_t>(n - 1, 0)
                                     : n * (n - 1) / 2;
  if (statistic.num_pairs != expected_pairs) {
    return absl::InvalidArgumentError(
        "the distance statistic was not computed by the requested estimator");
  }
  if (relation == NeighbouringRelation::kReplaceOne && n != public_n) {
    return absl::FailedPreconditionError(
        "replace-one release needs the public size n to equal the number of rows used");
  }
  NoisyDistanceStatistic release;
  release.estimator = estimator;
  release.relation = relation;
  release.diameter = diameter;
  release.sensitivity = sensitivity;
  release.noise_multiplier = noise_multiplier;
  release.noise_stddev = noise_multiplier * sensitivity;
  release.public_n = public_n;
  if (estimator == DistanceEstimator::kHashChain) {
    if (relation == NeighbouringRelation::kAddRemove) {
      const double edges = static_cast<double>(statistic.num_pairs);
      release.values.resize(2);
      release.values << statistic.distance_sum - diameter * edges, diameter * edges;
    } else {
      release.values.resize(1);
      release.values << statistic.distance_sum / static_cast<double>(public_n - 1);
    }
  } else {
    const double pairs = relation == NeighbouringRelation::kAddRemove
                             ? std::max(PairCount(n), PairCount(public_n))
                             : PairCount(public_n);
    release.values.resize(1);
    release.values << statistic.distance_sum / pairs;
  }
  // Grid-snapped discrete Gaussian noise (docs/privacy.md 4.2): same
  // multiplier s, noise inflated for the rounding distance.
  DPC_ASSIGN_OR_RETURN(const privacy::GridNoise grid_noise,
                       MeanDistanceNoise(estimator, relation, diameter, noise_multiplier,
                                         public_n));
  DPC_RETURN_IF_ERROR(privacy::AddGridNoise(grid_noise, release.values, noise));
  release.noise_grid = grid_noise.grid;
  release.applied_noise_stddev = grid_noise.scale();
  return release;
}

double NoisyMeanDistance(const NoisyDistanceStatistic& release) {
  if (release.estimator == DistanceEstimator::kHashChain &&
      release.relation == NeighbouringRelation::kAddRemove && release.values.size() == 2) {
    const double a = release.values(0);
    const double b = release.values(1);
    return release.diameter * (a + b) / std::max(b, release.diameter);
  }
  return release.values.size() > 0 ? release.values(0) : 0.0;
}

double LengthScaleFromMeanDistance(double noisy_mean, double diameter, double floor_fraction) {
  // Clamped into the feature maps' accepted range as well (a NaN or
  // non-positive diameter or fraction included), so no noisy value can make
  // CharacteristicFunctionMap refuse the length-scale after the read.
  double floor = floor_fraction * diameter;
  if (!(floor >= kMinLengthScale)) floor = kMinLengthScale;
  if (!(floor <= kMaxLengthScale)) floor = kMaxLengthScale;
  double ceiling = std::max(diameter, floor);
  if (!(ceiling <= kMaxLengthScale)) ceiling = kMaxLengthScale;
  if (!std::isfinite(noisy_mean)) return floor;
  return std::clamp(noisy_mean, floor, ceiling);
}

}  // namespace dpcurator::embed
