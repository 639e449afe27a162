#ifndef DPCURATOR_CLIENT_METHODS_LABEL_WARNING_H_
#define DPCURATOR_CLIENT_METHODS_LABEL_WARNING_H_

// The warning shared by aim, mst and merf (and the demo) when a release's
// rows cannot carry the label (issue 38); its own unit so that the methods
// that print it need not include one another.

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// Warnings when a release's rows cannot carry the label (issue 38), as
// image uploads warn (ImageDataSizeWarning). Both read released values only
// (post-processing) and print numbers of the release, never of rows.
//
// Rows x epsilon: a marginal or embedding release hides each count behind
// noise whose std grows as 1 / epsilon, so what a label pair's table can say
// about the label shrinks as 1 / (rows x epsilon). bench/steward_aim on the
// generated steward table (7-class label, docs/benchmarks.md "AIM on a small
// table"): with 2,000 rows, TSTR ROC-AUC is 0.65-0.83 on every seed at
// epsilon 1 and 0.3 (rows x epsilon 2,000 and 600) and 0.48-0.51 on 4 seeds
// of 5 at epsilon 0.1 (200; 0.61 on the fifth); below kLabelRowsTimesEpsilon
// the rows may carry no label at all. `estimated_rows` comes from the release's own noisy counts.
inline constexpr double kLabelRowsTimesEpsilon = 500.0;
std::optional<std::string> LabelRowsWarning(absl::string_view method, double estimated_rows,
                                            double epsilon);

// The rows of an aim or mst release, estimated from its noisy 1-way tables
// (the mean of their sums; each is an unbiased estimate of the row count).
double EstimatedRows(const google::protobuf::RepeatedPtrField<v1::NoisyMarginalTable>& one_way);

// LabelRowsWarning for a one-shot embedding release (DP-MERF's rff, PEARL's
// charfn) of a labelled schema: the rows are the sum of the released noisy
// class counts under ADD_REMOVE, the public n under REPLACE_ONE (where the
// class totals are proportions). nullopt for an unlabelled schema.
std::optional<std::string> EmbeddingLabelWarning(absl::string_view method,
                                                 const v1::Release& release);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_LABEL_WARNING_H_
