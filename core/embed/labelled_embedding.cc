#include "core/embed/labelled_embedding.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/privacy/discrete_noise.h"
#include "core/util/shard_pool.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::embed {
namespace {

// std::thread::hardware_concurrency() reads /sys/devices/system/cpu/online
// on every call (glibc); the accumulation is called per release and per
// session step, so the machine's thread count is read once.
int64_t HardwareThreads() {
  static const int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  return threads;
}


// The release path uses at most this many threads (the machines we size
// for have two cores; more would oversubscribe concurrent releases).
constexpr int64_t kMaxAccumulateThreads = 2;

}  // namespace

LabelledEmbeddingAccumulator::LabelledEmbeddingAccumulator(int feature_dim, int num_classes)
    : sums_(Eigen::MatrixXd::Zero(feature_dim, num_classes)),
      counts_(Eigen::VectorXd::Zero(num_classes)) {}

LabelledEmbeddingAccumulator LabelledEmbeddingAccumulator::FromTotals(Eigen::MatrixXd sums,
                                                                       Eigen::VectorXd counts,
                                                                       int64_t num_rows) {
  LabelledEmbeddingAccumulator accumulator(0, 0);
  accumulator.sums_ = std::move(sums);
  accumulator.counts_ = std::move(counts);
  accumulator.num_rows_ = num_rows;
  return accumulator;
}

absl::Status LabelledEmbeddingAccumulator::Add(const Eigen::MatrixXd& features,
                                               const Eigen::VectorXi& labels) {
  if (features.cols() != sums_.rows() || features.rows() != labels.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "embedding accumulator expects ", sums_.rows(), " features per row and one label per row"));
  }
  const int classes = static_cast<int>(counts_.size());
  for (Eigen::Index i = 0; i < labels.size(); ++i) {
    if (labels(i) < 0 || labels(i) >= classes) {
      // No value and no row index: both are private (docs/privacy.md 6.1).
      return absl::InvalidArgumentError(
          absl::StrCat("a label is outside the declared levels [0, ", classes, ")"));
    }
  }
  // Per-class sums as products with the block's one-hot labels,
  // sums_c += features^T onehot_c: one pass down each feature column (a
  // transposed GEMV per class; the classes are few), instead of a strided
  // column update per row or a GEMM that first packs the whole block.
  Eigen::MatrixXd onehot = Eigen::MatrixXd::Zero(features.rows(), classes);
  for (Eigen::Index i = 0; i < labels.size(); ++i) onehot(i, labels(i)) = 1.0;
  for (int c = 0; c < classes; ++c) {
    sums_.col(c).noalias() += features.transpose() * onehot.col(c);
  }
  counts_ += onehot.colwise().sum().transpose();
  num_rows_ += features.rows();
  return absl::OkStatus();
}

absl::Status LabelledEmbeddingAccumulator::Merge(const LabelledEmbeddingAccumulator& other) {
  if (other.sums_.rows() != sums_.rows() || other.sums_.cols() != sums_.cols()) {
    return absl::InvalidArgumentError("cannot merge embeddings of different shapes");
  }
  sums_ += other.sums_;
  counts_ += other.counts_;
  num_rows_ += other.num_rows_;
  return absl::OkStatus();
}

absl::StatusOr<LabelledEmbeddingAccumulator> AccumulateEmbedding(
    const FeatureMap& feature_map, const Eigen::MatrixXd& encoded, const Eigen::VectorXi& labels,
    int num_classes, int64_t block_rows, int max_threads) {
  if (encoded.cols() != feature_map.input_dim()) {
    return absl::InvalidArgumentError(absl::StrCat("encoded rows have ", encoded.cols(),
                                                   " columns, the feature map expects ",
                                                   feature_map.input_dim()));
  }
  // Labels are read block by block below: a label vector of the wrong length
  // would be read past its end (or silently truncated).
  if (labels.size() != encoded.rows()) {
    // No counts in the message: the row count is private under add/remove.
    return absl::InvalidArgumentError("embedding needs exactly one label per row");
  }
  // A block's features (rows x output_dim doubles) are written by the
  // sin/cos pass and read back by the per-class sums: sized to stay in a
  // core's cache (2 MiB) they are read from there, not from memory (a 1M-row
  // release ran 20-40% faster at 256 rows x 1016 features than at 1024).
  if (block_rows == 0) {
    block_rows = std::clamp<int64_t>(
        kFeatureBlockBytes / (int64_t{8} * std::max(1, feature_map.output_dim())), 32, 4096);
  }
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(block_rows, "Block size"));
  // Both cores (issue 13): each thread streams a contiguous range of blocks
  // into its own accumulator, and the shards are merged in order, so the
  // result depends on the thread count only through the order of the sums.
  const int64_t blocks = (encoded.rows() + block_rows - 1) / block_rows;
  const int64_t thread_cap =
      max_threads > 0 ? std::min<int64_t>(max_threads, kMaxAccumulateThreads)
                      : kMaxAccumulateThreads;
  const int threads = static_cast<int>(std::clamp<int64_t>(
      std::min<int64_t>(HardwareThreads(), thread_cap), 1,
      std::max<int64_t>(blocks, 1)));
  std::vector<LabelledEmbeddingAccumulator> shards(
      threads, LabelledEmbeddingAccumulator(feature_map.output_dim(), num_classes));
  std::vector<absl::Status> outcomes(threads);
  auto accumulate = [&](int shard) {
    Eigen::MatrixXd features;
    const int64_t first = blocks * shard / threads, last = blocks * (shard + 1) / threads;
    for (int64_t block = first; block < last; ++block) {
      const int64_t start = block * block_rows;
      const int64_t rows = std::min<int64_t>(block_rows, encoded.rows() - start);
      feature_map.Features(encoded.middleRows(start, rows), &features);
      outcomes[shard] = shards[shard].Add(features, labels.segment(start, rows));
      if (!outcomes[shard].ok()) return;
    }
  };
  ShardPool pool(threads);
  pool.Run(threads, accumulate);
  for (const absl::Status& outcome : outcomes) DPC_RETURN_IF_ERROR(outcome);
  LabelledEmbeddingAccumulator accumulator = std::move(shards[0]);
  for (int shard = 1; shard < threads; ++shard) {
    DPC_RETURN_IF_ERROR(accumulator.Merge(shards[shard]));
  }
  return accumulator;
}

absl::StatusOr<double> LabelledEmbeddingSensitivity(privacy::NeighbouringRelation relation,
                                                    int64_t public_n) {
  if (relation == privacy::NeighbouringRelation::kAddRemove) {
    // One row adds h(x) (norm <= 1) to one class column and 1 to one count.
    return std::sqrt(2.0);
  }
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(public_n, "Public dataset size n"));
  // Replacing x (class a) by x' (class b): same class, ||h - h'||/n <= 2/n;
  // different classes, sqrt(|h|^2 + |h'|^2 + 1 + 1)/n <= 2/n.
  return 2.0 / static_cast<double>(public_n);
}

absl::StatusOr<NoisyLabelledEmbedding> ReleaseLabelledEmbedding(
    const LabelledEmbeddingAccumulator& accumulator, privacy::NeighbouringRelation relation,
    double noise_multiplier, int64_t public_n, privacy::NoiseSource* noise) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  DPC_ASSIGN_OR_RETURN(const double sensitivity,
                       LabelledEmbeddingSensitivity(relation, public_n));
  NoisyLabelledEmbedding release;
  release.relation = relation;
  release.sensitivity = sensitivity;
  release.noise_multiplier = noise_multiplier;
  release.noise_stddev = noise_multiplier * sensitivity;
  if (relation == privacy::NeighbouringRelation::kAddRemove) {
    release.class_values = accumulator.sums();
    release.class_totals = accumulator.counts();
  } else {
    if (accumulator.num_rows() != public_n) {
      return absl::FailedPreconditionError(
          "replace-one release needs the public size n to equal the number of rows used");
    }
    release.class_values = accumulator.sums() / static_cast<double>(public_n);
    release.class_totals = accumulator.counts() / static_cast<double>(public_n);
    release.public_n = public_n;
  }
  // One Gaussian mechanism on the joint vector [values ; totals], snapped to
  // a power-of-two grid with discrete Gaussian noise (docs/privacy.md 4.2):
  // the noise is inflated for the rounding distance, the charged multiplier
  // s is unchanged.
  const Eigen::Index num_values = release.class_values.size();
  const Eigen::Index num_totals = release.class_totals.size();
  Eigen::VectorXd joint(num_values + num_totals);
  joint << Eigen::Map<const Eigen::VectorXd>(release.class_values.data(), num_values),
      release.class_totals;
  DPC_ASSIGN_OR_RETURN(const privacy::GridNoise grid_noise,
                       privacy::AddGridGaussianNoise(joint, noise_multiplier, sensitivity, noise));
  Eigen::Map<Eigen::VectorXd>(release.class_values.data(), num_values) = joint.head(num_values);
  release.class_totals = joint.tail(num_totals);
  release.noise_grid = grid_noise.grid;
  release.applied_noise_stddev = grid_noise.scale();
  return release;
}

EmbeddingTarget ToEmbeddingTarget(const NoisyLabelledEmbedding& release) {
  // Floor on a noisy class total: DP-MERF's code clamps negative proportions
  // to 1e-3; for sums we clamp to the larger of one row and 1e-3 of the total.
  const double total = std::max(release.class_totals.sum(), 0.0);
  const double floor =
      release.relation == privacy::NeighbouringRelation::kAddRemove
          ? std::max(1.0, 1e-3 * total)
          : std::max(1e-3, 1.0 / std::max<int64_t>(release.public_n, 1));
  EmbeddingTarget target;
  const Eigen::Index classes = release.class_totals.size();
  Eigen::VectorXd clamped(classes);
  for (Eigen::Index c = 0; c < classes; ++c) {
    if (release.class_totals(c) < floor) ++target.clamped_classes;
    clamped(c) = std::max(release.class_totals(c), floor);
  }
  target.class_weights = clamped / clamped.sum();
  target.class_means = release.class_values * clamped.cwiseInverse().asDiagonal();
  return target;
}

}  // namespace dpcurator::embed
