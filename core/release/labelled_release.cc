#include "core/release/labelled_release.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/embed/frequency_bounds.h"
#include "core/privacy/grid_gaussian.h"
#include "core/util/status_macros.h"

namespace dpcurator::release {

absl::Status ResolveFrequencyParams(int* num_frequencies, int default_frequencies,
                                    double length_scale, uint64_t* seed) {
  if (*num_frequencies == 0) *num_frequencies = default_frequencies;
  if (*num_frequencies < 1 || *num_frequencies > kMaxNumFrequencies) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_frequencies must be in [1, ", kMaxNumFrequencies, "], got ", *num_frequencies));
  }
  if (length_scale != 0) {
    DPC_RETURN_IF_ERROR(embed::ValidateLengthScale(length_scale, "length_scale"));
  }
  // Frequencies are public randomness; the server draws the seed when the
  // analyst leaves it to us, and stores it in the artefact.
  if (*seed == 0) *seed = privacy::SecureRandomU64() | 1;
  return absl::OkStatus();
}

absl::Status ValidateReleasedDimension(int num_frequencies, int extra_features, int num_classes) {
  const int64_t features = 2 * int64_t{num_frequencies} + extra_features;
  const int64_t dimension = (features + 1) * num_classes;
  if (dimension > privacy::kMaxGridGaussianDimension) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this release would have ", dimension, " coordinates ((", features, " features + 1) x ",
        num_classes, " classes); at most ", privacy::kMaxGridGaussianDimension,
        " are supported. Lower num_frequencies to at most ",
        std::max<int64_t>(
            0, (privacy::kMaxGridGaussianDimension / num_classes - 1 - extra_features) / 2),
        "."));
  }
  return absl::OkStatus();
}

absl::Status ValidateFrequencyMatrix(int num_frequencies, int64_t input_dim) {
  const int64_t entries = int64_t{num_frequencies} * std::max<int64_t>(input_dim, 0);
  if (entries <= kMaxFrequencyMatrixEntries) return absl::OkStatus();
  const int64_t fits = kMaxFrequencyMatrixEntries / std::max<int64_t>(input_dim, 1);
  return absl::InvalidArgumentError(absl::StrCat(
      "this release's frequency matrix would hold ", num_frequencies, " frequencies x ",
      input_dim, " encoded dimensions = ", entries, " numbers (", entries / (int64_t{1} << 17),
      " MiB); at most ", kMaxFrequencyMatrixEntries, " (512 MiB) are accepted. ",
      fits >= 1 ? absl::StrCat("Lower num_frequencies to at most ", fits, ".")
                : std::string("The dataset's rows are too wide for this release kind.")));
}

absl::StatusOr<privacy::GridNoise> LabelledEmbeddingNoise(privacy::NeighbouringRelation relation,
                                                          double noise_multiplier,
                                                          int64_t public_n, int64_t feature_dim,
                                                          int num_classes) {
  DPC_ASSIGN_OR_RETURN(const double sensitivity,
                       embed::LabelledEmbeddingSensitivity(relation, public_n));
  // ReleaseLabelledEmbedding's joint vector [values ; totals].
  return privacy::GridGaussianNoise(noise_multiplier, sensitivity,
                                    (feature_dim + 1) * int64_t{num_classes});
}

absl::StatusOr<embed::LabelledEmbeddingAccumulator> ExactLabelledEmbedding(
    const embed::FeatureMap& feature_map, const EncodedRows& rows, int max_threads) {
  return embed::AccumulateEmbedding(feature_map, rows.features, rows.labels, rows.num_classes,
                                    /*block_rows=*/0, max_threads);
}

int64_t ExactEmbeddingLength(int64_t feature_dim, int num_classes) {
  return (feature_dim + 1) * int64_t{num_classes};
}

Eigen::VectorXd FlattenExactEmbedding(const embed::LabelledEmbeddingAccumulator& exact) {
  const Eigen::MatrixXd& sums = exact.sums();
  Eigen::VectorXd out(sums.size() + exact.counts().size());
  out << Eigen::Map<const Eigen::VectorXd>(sums.data(), sums.size()), exact.counts();
  return out;
}

absl::StatusOr<embed::LabelledEmbeddingAccumulator> ExactEmbeddingFromVector(
    absl::Span<const double> values, int64_t feature_dim, int num_classes, int64_t num_rows) {
  const int64_t expected = ExactEmbeddingLength(feature_dim, num_classes);
  if (feature_dim < 1 || num_classes < 1 || static_cast<int64_t>(values.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the statistic has ", values.size(), " entries; this plan's has (", feature_dim,
        " features + 1) x ", num_classes, " classes = ", expected,
        " (per-class feature sums, class 0 first, then the per-class counts)"));
  }
  for (const double v : values) {
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError("the statistic has an entry that is not finite");
    }
  }
  if (num_rows < 0) {
    return absl::InvalidArgumentError("the statistic's row count must be at least 0");
  }
  Eigen::MatrixXd sums = Eigen::Map<const Eigen::MatrixXd>(values.data(), feature_dim,
                                                           num_classes);
  Eigen::VectorXd counts =
      Eigen::Map<const Eigen::VectorXd>(values.data() + feature_dim * num_classes, num_classes);
  return embed::LabelledEmbeddingAccumulator::FromTotals(std::move(sums), std::move(counts),
                                                         num_rows);
}

absl::StatusOr<embed::NoisyLabelledEmbedding> NoisyLabelledEmbeddingOf(
    const embed::FeatureMap& feature_map, const EncodedRows& rows,
    privacy::NeighbouringRelation relation, double noise_multiplier, int64_t public_n,
    privacy::NoiseSource* noise) {
  DPC_ASSIGN_OR_RETURN(auto accumulator, ExactLabelledEmbedding(feature_map, rows));
  return embed::ReleaseLabelledEmbedding(accumulator, relation, noise_multiplier, public_n, noise);
}

}  // namespace dpcurator::release
