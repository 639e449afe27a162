#ifndef DPCURATOR_CORE_EMBED_LABELLED_EMBEDDING_H_
#define DPCURATOR_CORE_EMBED_LABELLED_EMBEDDING_H_

#include <cstdint>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/embed/feature_map.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/relation.h"

namespace dpcurator::embed {

// Mergeable sufficient statistic of a labelled mean embedding (DP-MERF eq. 8,
// PEARL's joint embedding E[phi(x) (x) onehot(y)]): per-class feature sums
// and per-class counts. Shards are accumulated where the rows live, merged,
// and noised once (ARCHITECTURE.md, "mergeable accumulators").
class LabelledEmbeddingAccumulator {
 public:
  LabelledEmbeddingAccumulator(int feature_dim, int num_classes);
  // An accumulator holding totals computed elsewhere: the merged partials
  // of the curator's cluster (docs/scale-out.md "External datasets").
  // `sums` is feature_dim x C, `counts` has C entries.
  static LabelledEmbeddingAccumulator FromTotals(Eigen::MatrixXd sums, Eigen::VectorXd counts,
                                                 int64_t num_rows);

  // Adds rows of features (n x feature_dim) with labels in [0, num_classes).
  absl::Status Add(const Eigen::MatrixXd& features, const Eigen::VectorXi& labels);
  absl::Status Merge(const LabelledEmbeddingAccumulator& other);

  const Eigen::MatrixXd& sums() const { return sums_; }      // feature_dim x C
  const Eigen::VectorXd& counts() const { return counts_; }  // C
  int64_t num_rows() const { return num_rows_; }

 private:
  Eigen::MatrixXd sums_;
  Eigen::VectorXd counts_;
  int64_t num_rows_ = 0;
};

// Streams a table's encoded rows through a feature map in blocks, so memory
// stays O(block * feature_dim) whatever the number of rows. block_rows 0:
// as many rows as keep a block's features within kFeatureBlockBytes.
// max_threads 0: both cores (kMaxAccumulateThreads); 1: the calling thread
// only, as a Dask worker of one thread must (python/src/partials.cc).
inline constexpr int64_t kFeatureBlockBytes = int64_t{1} << 21;
absl::StatusOr<LabelledEmbeddingAccumulator> AccumulateEmbedding(
    const FeatureMap& feature_map, const Eigen::MatrixXd& encoded, const Eigen::VectorXi& labels,
    int num_classes, int64_t block_rows = 0, int max_threads = 0);

// L2 sensitivity of the released vector when ||h|| <= 1 (docs/privacy.md 2.2):
//   ADD_REMOVE: [per-class sums ; per-class counts] -> sqrt(1 + 1);
//   REPLACE_ONE with public n: [per-class means ; class proportions] -> 2/n.
absl::StatusOr<double> LabelledEmbeddingSensitivity(privacy::NeighbouringRelation relation,
                                                    int64_t public_n);

struct NoisyLabelledEmbedding {
  privacy::NeighbouringRelation relation = privacy::NeighbouringRelation::kAddRemove;
  // ADD_REMOVE: noisy sums and noisy counts. REPLACE_ONE: noisy means (sums/n)
  // and noisy class proportions (counts/n).
  Eigen::MatrixXd class_values;  // feature_dim x C
  Eigen::VectorXd class_totals;  // C
  double sensitivity = 0.0;
  double noise_multiplier = 0.0;
  double noise_stddev = 0.0;  // = noise_multiplier * sensitivity
  int64_t public_n = 0;       // REPLACE_ONE only
  // Every released entry is a multiple of this power of two, and the noise
  // is discrete Gaussian with scale applied_noise_stddev >= noise_stddev,
  // inflated for the rounding distance (docs/privacy.md 4.2). A
  // ZeroNoiseSource (tests) leaves the exact, unsnapped statistic.
  double noise_grid = 0.0;
  double applied_noise_stddev = 0.0;
};

// The Gaussian mechanism on the whole vector at once: one accounting event
// with RDP alpha / (2 s^2) (PRIVACY.md, "Gaussian mechanism"), drawn as
// grid-snapped discrete Gaussian noise (privacy::AddGridGaussianNoise).
absl::StatusOr<NoisyLabelledEmbedding> ReleaseLabelledEmbedding(
    const LabelledEmbeddingAccumulator& accumulator, privacy::NeighbouringRelation relation,
    double noise_multiplier, int64_t public_n, privacy::NoiseSource* noise);

// Post-processing into the trainer's target (dp-merf.md 1.3 eq. 12 and
// pitfall 3): class weights w_c = max(total_c, floor) normalised to sum 1,
// and class-conditional mean embeddings value_c / max(total_c, floor).
struct EmbeddingTarget {
  Eigen::MatrixXd class_means;   // feature_dim x C
  Eigen::VectorXd class_weights; // C, positive, sums to 1
  // Classes whose noisy total fell below the floor (clamped).
  int clamped_classes = 0;
};
EmbeddingTarget ToEmbeddingTarget(const NoisyLabelledEmbedding& release);

}  // namespace dpcurator::embed

#endif  // DPCURATOR_CORE_EMBED_LABELLED_EMBEDDING_H_
