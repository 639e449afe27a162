#ifndef DPCURATOR_CLIENT_METHODS_AIM_H_
#define DPCURATOR_CLIENT_METHODS_AIM_H_

// AIM (McKenna, Mullins, Sheldon, Miklau 2022; issue 26 item 3) as a client
// method: the server's "aim" recipe release (noisy 1-way marginals, then
// adaptive rounds of private selection and measurement until rho is spent;
// docs/privacy.md 2.12), the client-side fit (post-processing, no budget)
// and sampling. The fit is Private-PGM (core/pgm) over every released
// measurement, with the cells the measurements cannot tell from empty fixed
// at 0 (AimFitOptions).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"
#include "client/methods/label_warning.h"
#include "client/methods/method.h"
#include "core/data/table.h"
#include "core/train/aim.h"
#include "dpcurator/v1/dpcurator.pb.h"

namespace dpcurator::client {

// The unit (registry.cc).
const Method& AimMethod();

// Requests the AIM release of `dataset_id` at `epsilon` (the dataset's
// delta), idempotency key `key`, with `params` (workload, model size,
// rounds; empty for the defaults).
absl::StatusOr<v1::Release> RequestAimRelease(Connection& analyst, const std::string& dataset_id,
                                              double epsilon, const v1::AimParams& params,
                                              const std::string& key);

// --workload ("a,b;c,d,e": cliques of column names), --max-model-cells and
// --rounds as the request's parameters (unset: the server's defaults); for
// `train aim --dataset` and `release --kind aim`.
absl::StatusOr<v1::AimParams> AimParamsFromArgs(const ParsedArgs& args);

// One line per round, for people: the selected clique by column names, its
// noise, and the budget used after it ("round 3: (age, income) ...").
std::vector<std::string> AimProgressLines(const v1::AimArtefact& artefact);

// The client's fit (public choices, post-processing): mirror-descent
// iterations, and the zero threshold of pgm::EstimateOptions in multiples
// of the release's smallest noise std (0: off).
struct AimFitOptions {
  int iterations = train::kAimFinalFitIterations;
  double zero_below_sigmas = train::kAimFinalFitZeroBelowSigmas;
};

// Fits the model to an "aim" release (no budget): Private-PGM over every
// released measurement (core/pgm), packaged with its junction tree.
absl::StatusOr<v1::GeneratorModel> TrainAimModel(const v1::Release& release,
                                                 const AimFitOptions& fit = {});

// num_rows rows of an aim model file, decoded in its schema; DATA_LOSS
// naming the retrain command when the file's model does not rebuild.
absl::StatusOr<data::Table> SampleAimModel(const v1::GeneratorModel& model, int64_t num_rows,
                                           uint64_t seed);

// AIM's summary of what it measured (rounds on 1-, 2- and 3-way tables, how
// many with the label) and, when the schema declares a label that no round
// measured with a feature, a warning line; then LabelRowsWarning's. Each
// line ends in '\n'.
std::string AimMeasuredSummary(const v1::AimArtefact& artefact);

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_METHODS_AIM_H_
