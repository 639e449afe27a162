#ifndef DPCURATOR_PLAN_CATEGORY_FIT_H_
#define DPCURATOR_PLAN_CATEGORY_FIT_H_

// The "category_fit" release (ReleaseRequest.category_fit; issue 38;
// docs/privacy.md 2.11.2): the values of one open categorical column that
// enough rows share, by Gaussian thresholding of their counts
// (core/release/category_fit.h), planned before admission from the public
// schema and request only, and run after admission over the column's stored
// values (Store::LoadOpenColumn).

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/privacy/events.h"
#include "core/privacy/noise_source.h"
#include "core/release/category_fit.h"
#include "dpcurator/v1/dpcurator.pb.h"
#include "plan/footprint.h"

namespace dpcurator::plan {

// CategoryFitParams.max_categories when the request leaves it 0: a list a
// steward can still read and a marginal method can still measure (every
// level is a cell of each table the column is in).
inline constexpr int64_t kDefaultFitCategories = 1000;
// The most values one fit may publish (docs/limits.md): the artefact holds
// at most this many values of at most kMaxFitValueBytes each (2.6 MB), and
// a schema's categorical column beyond it is no use to the marginal methods.
inline constexpr int64_t kMaxFitCategories = 10000;
// A stored value's bytes at most (an open column's bound, checked as each
// cell is parsed), for the artefact's size.
inline constexpr int64_t kMaxFitValueBytes = data::kMaxOpenValueBytes;
// CategoryFitParams.delta_0 when the request leaves it 0: this share of the
// dataset's delta, so that nine more fits at the default still fit under it.
inline constexpr double kDefaultDeltaZeroShare = 0.1;

struct CategoryFitPlan {
  int column = 0;           // the column's index in the schema
  std::string column_name;  // as the schema names it
  // The mechanism's parameters (sigma and tau calibrated, max_categories
  // resolved): what ComputeCategoryFitRelease runs.
  release::CategoryFitParams params;
  double delta_0 = 0.0;  // CategoryThresholdDelta(sigma, tau), <= the requested one
  // release::CategoryFitEvent(sigma, tau, relation): what the ledger charges.
  std::optional<privacy::PrivacyEvent> event;
  PlanFootprint footprint;
};

// Before admission (a refusal charges nothing), from public values only:
//  - an ordinary stored dataset (no partition: INVALID_ARGUMENT);
//  - `column` names a CATEGORICAL column of the dataset's schema declared
//    `open` (INVALID_ARGUMENT naming the column and, for an unknown name,
//    the open columns there are); its categories may be empty;
//  - the privacy level is `epsilon` (finite, > 0); a noise_multiplier is
//    refused (the fit's noise is a whole-number discrete Gaussian scale
//    calibrated with its threshold, not a multiplier);
//  - max_categories 0 -> kDefaultFitCategories, else in [1, kMaxFitCategories];
//  - delta_0 0 -> kDefaultDeltaZeroShare x the dataset's delta, else finite in
//    (0, delta) (the ledger refuses one that brings the dataset's summed
//    delta_0 to its delta);
//  - rows uploaded (FAILED_PRECONDITION otherwise, as every kind);
//  - sigma and tau by release::CalibrateCategoryFit at the dataset's delta
//    and relation, the event release::CategoryFitEvent of them.
// Every message says what to do.
absl::StatusOr<CategoryFitPlan> PlanCategoryFitRelease(const v1::ReleaseRequest& request,
                                                       const v1::Dataset& dataset);

// After admission: release::FitOpenColumn of the column's stored values
// with the plan's parameters, in a CategoryFitArtefact (the published values
// as bytes, sorted; sigma, tau, delta_0, the charge alone at the dataset's
// delta, the relation, the schema's fingerprint). A total function of the
// values: never fails, whatever they are.
v1::Release ComputeCategoryFitRelease(const CategoryFitPlan& plan, const v1::Dataset& dataset,
                                      const release::OpenColumnValues& values,
                                      const std::string& release_id,
                                      const std::string& idempotency_key, double epsilon_alone,
                                      privacy::NoiseSource* noise);

}  // namespace dpcurator::plan

#endif  // DPCURATOR_PLAN_CATEGORY_FIT_H_
