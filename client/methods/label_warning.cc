#include "client/methods/label_warning.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace dpcurator::client {

std::optional<std::string> LabelRowsWarning(absl::string_view method, double estimated_rows,
                                            double epsilon) {
  const double product = estimated_rows * epsilon;
  if (!(product < kLabelRowsTimesEpsilon)) return std::nullopt;
  return absl::StrFormat(
      "warning: %s release of about %.0f rows at epsilon %.4g: rows x epsilon is %.0f, below "
      "about %.0f a label pair's noise can hide the label's relation to every feature, and "
      "synthetic rows may predict it no better than chance (docs/benchmarks.md, \"AIM on a "
      "small table\"). Judge the model with `dpcurator eval` before relying on it, or release "
      "at a larger epsilon",
      method, std::max(estimated_rows, 0.0), epsilon, std::max(product, 0.0),
      kLabelRowsTimesEpsilon);
}

double EstimatedRows(const google::protobuf::RepeatedPtrField<v1::NoisyMarginalTable>& one_way) {
  if (one_way.empty()) return 0.0;
  double sum = 0.0;
  for (const v1::NoisyMarginalTable& table : one_way) {
    for (double count : table.counts()) sum += count;
  }
  return sum / one_way.size();
}

std::optional<std::string> EmbeddingLabelWarning(absl::string_view method,
                                                 const v1::Release& release) {
  if (!release.has_embedding() || release.embedding().schema().label().empty()) {
    return std::nullopt;
  }
  const v1::EmbeddingArtefact& artefact = release.embedding();
  double rows = static_cast<double>(artefact.public_n());
  if (artefact.relation() != v1::REPLACE_ONE) {
    rows = 0.0;
    for (double total : artefact.class_totals()) rows += total;
  }
  return LabelRowsWarning(method, rows, artefact.epsilon());
}

}  // namespace dpcurator::client
