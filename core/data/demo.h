#ifndef DPCURATOR_CORE_DATA_DEMO_H_
#define DPCURATOR_CORE_DATA_DEMO_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/data/table.h"

namespace dpcurator::data {

// The embedded demo dataset: a mixed-type "customer churn" table that the
// project generates itself, so `dpcurator demo` needs no download.
//
// Generative model (all draws independent across rows; docs/demo-data.md):
//   region    ~ Categorical(north .30, south .30, east .25, west .15)
//   age       ~ 18 + 62 * Beta(2, 3)                       (integer, [18, 80])
//   education ~ Categorical over {primary, secondary, bachelor, master,
//               doctorate}, shifted towards higher levels with age < 45
//   income    ~ LogNormal(3.4 + 0.25 * edu_level + 0.012 * (age - 18), 0.35)
//               thousands, clamped to [5, 250]
//   plan      ~ basic / plus / premium, by income tercile cut points
//               (40, 90) with 15% uniform mixing
//   tenure    ~ min(age - 18, Exponential(mean 6)) years, [0, 40]
//   usage     ~ Normal(20 + 8 * [plan = premium] - 0.15 * (age - 40), 6),
//               hours per month, [0, 60]
//   churn     ~ Bernoulli(sigmoid(f)), with the non-linear score
//       f = -1.2 + 1.6 * [tenure < 2] - 0.9 * [plan = premium]
//           + 1.4 * sin((age - 18) / 9) * [region in {east, west}]
//           + 0.08 * (usage - 20)^2 / 10 - 0.5 * [education >= master]
//           + 0.6 * [income < 30] * [plan != basic]
// The label "churn" depends on interactions a linear model cannot express
// exactly, so non-linear classifiers have headroom over logistic regression.
Schema DemoSchema();

// n rows from the model above, reproducible from `seed`.
Table GenerateDemoTable(int64_t num_rows, uint64_t seed);

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_DEMO_H_
