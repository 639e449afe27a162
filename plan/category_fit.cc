#include "plan/category_fit.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"
#include "proto/convert.h"

namespace dpcurator::plan {
namespace {

// The schema's open categorical columns, for a message naming a column
// that is not one.
std::string OpenColumnNames(const v1::TableSchema& schema) {
  std::vector<std::string> names;
  for (const v1::ColumnSchema& column : schema.columns()) {
    if (column.type() == v1::ColumnSchema::CATEGORICAL && column.open()) {
      names.push_back(column.name());
    }
  }
  return names.empty() ? std::string("it has none; declare one with \"open\": true in the schema")
                       : absl::StrCat("its open ones: ", absl::StrJoin(names, ", "));
}

// The published list, an artefact's size at most: kMaxFitValueBytes and a
// tag and length a value, the fixed fields, the answer's copies.
PlanFootprint CategoryFitFootprint(int64_t max_categories) {
  constexpr int64_t kFixedBytes = 1024;
  constexpr int64_t kAnswerCopies = 3;  // built, serialized, parsed back
  PlanFootprint footprint;
  footprint.what = "category_fit release";
  footprint.hint = "ask for fewer max_categories";
  footprint.artefact_bytes =
      SaturatingAdd(SaturatingMul(max_categories, kMaxFitValueBytes + 4), kFixedBytes);
  footprint.public_bytes = SaturatingMul(kAnswerCopies, footprint.artefact_bytes);
  return footprint;
}

}  // namespace

absl::StatusOr<CategoryFitPlan> PlanCategoryFitRelease(const v1::ReleaseRequest& request,
                                                       const v1::Dataset& dataset) {
  if (request.kind_case() != v1::ReleaseRequest::kCategoryFit) {
    return absl::InternalError("not a category_fit request");
  }
  const v1::CategoryFitParams& params = request.category_fit();
  if (request.has_partition()) {
    return absl::InvalidArgumentError(
        "a category_fit release is not partitioned: it fits one column's list over all rows. "
        "Leave the partition out. Nothing was charged");
  }
  // The column: open and categorical, from the public schema only.
  CategoryFitPlan plan;
  const v1::TableSchema& schema = dataset.schema();
  int found = -1;
  for (int i = 0; i < schema.columns_size(); ++i) {
    if (schema.columns(i).name() == params.column()) found = i;
  }
  if (params.column().empty() || found < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "category_fit needs the name of an open categorical column of dataset '", dataset.id(),
        "'; ",
        params.column().empty() ? "none was given" : "it has no column '" + params.column() + "'",
        " (", OpenColumnNames(schema), "). Nothing was charged"));
  }
  const v1::ColumnSchema& column = schema.columns(found);
  if (column.type() != v1::ColumnSchema::CATEGORICAL) {
    return absl::InvalidArgumentError(absl::StrCat(
        "column '", column.name(), "' is not categorical: a category_fit publishes the values of "
        "an open categorical column (a numeric column's bins are fitted by a marginals release "
        "with fit_grid: dpcurator schema fit). Nothing was charged"));
  }
  if (!column.open()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "column '", column.name(), "' declares its categories (it is not open), so its list is "
        "already public; a category_fit is for a column declared with \"open\": true, whose "
        "values the server keeps. Nothing was charged"));
  }
  plan.column = found;
  plan.column_name = column.name();
  // The privacy level: epsilon only.
  switch (request.privacy_case()) {
    case v1::ReleaseRequest::kEpsilon:
      DPC_RETURN_IF_ERROR(ValidateFinitePositive(request.epsilon(), "Epsilon"));
      break;
    case v1::ReleaseRequest::kNoiseMultiplier:
      return absl::InvalidArgumentError(
          "a category_fit takes epsilon as its privacy level, not a noise multiplier: its noise "
          "is a whole-number discrete Gaussian scale calibrated together with its threshold. "
          "Give --epsilon. Nothing was charged");
    case v1::ReleaseRequest::PRIVACY_NOT_SET:
      return absl::InvalidArgumentError(
          "a category_fit needs a privacy level: give epsilon. Nothing was charged");
  }
  // max_categories: 0 -> the default; bounded.
  const int64_t max_categories =
      params.max_categories() == 0 ? kDefaultFitCategories : params.max_categories();
  if (max_categories < 1 || max_categories > kMaxFitCategories) {
    return absl::InvalidArgumentError(absl::StrCat(
        "category_fit max_categories must be in [1, ", kMaxFitCategories, "] (0: ",
        kDefaultFitCategories, "), got ", params.max_categories(),
        ". Nothing was charged"));
  }
  // delta_0: 0 -> a share of the dataset's delta; else in (0, delta).
  const double delta = dataset.budget().delta();
  const double delta_0 = params.delta_0() == 0 ? kDefaultDeltaZeroShare * delta : params.delta_0();
  if (!std::isfinite(delta_0) || !(delta_0 > 0) || !(delta_0 < delta)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "category_fit delta_0 (the chance that a value only one row has is published) must be "
        "in (0, ", delta, "), the dataset's delta, and below what earlier fits left of it; got ",
        params.delta_0(), ". Leave it 0 for ", kDefaultDeltaZeroShare,
        " of the delta. Nothing was charged"));
  }
  if (dataset.external()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset '", dataset.id(), "' is external: its rows, and so an open column's values, "
        "are not on this server. Nothing was charged"));
  }
  if (dataset.row_count() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("dataset '", dataset.id(), "' has no rows; upload rows first"));
  }
  // Calibrated on the ledger's own path (CalibrateCategoryFit), at the
  // dataset's delta and relation.
  const privacy::NeighbouringRelation relation = RelationFromProto(dataset.relation());
  absl::StatusOr<release::CalibratedCategoryFit> fit =
      release::CalibrateCategoryFit(request.epsilon(), delta, delta_0, relation);
  if (!fit.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "category_fit at epsilon ", request.epsilon(), " and delta_0 ", delta_0,
        " cannot be calibrated (", fit.status().message(),
        "). Ask for a larger epsilon or delta_0. Nothing was charged"));
  }
  plan.params.sigma = fit->sigma;
  plan.params.tau = fit->tau;
  plan.params.max_categories = max_categories;
  plan.delta_0 = fit->delta_0;
  DPC_RETURN_IF_ERROR(release::ValidateCategoryFitParams(plan.params));
  DPC_ASSIGN_OR_RETURN(plan.event, release::CategoryFitEvent(fit->sigma, fit->tau, relation));
  plan.footprint = CategoryFitFootprint(max_categories);
  return plan;
}

v1::Release ComputeCategoryFitRelease(const CategoryFitPlan& plan, const v1::Dataset& dataset,
                                      const release::OpenColumnValues& values,
                                      const std::string& release_id,
                                      const std::string& idempotency_key, double epsilon_alone,
                                      privacy::NoiseSource* noise) {
  std::vector<std::string> published = release::FitOpenColumn(values, plan.params, noise);
  v1::Release release;
  release.set_id(release_id);
  release.set_dataset_id(dataset.id());
  release.set_idempotency_key(idempotency_key);
  release.set_kind(v1::CATEGORY_FIT);
  v1::CategoryFitArtefact& artefact = *release.mutable_category_fit();
  artefact.set_format_version(1);
  artefact.set_release_id(release_id);
  artefact.set_dataset_id(dataset.id());
  artefact.set_schema_fingerprint(dataset.schema_fingerprint());
  artefact.set_column(plan.column_name);
  for (std::string& value : published) artefact.add_categories(std::move(value));
  artefact.set_sigma(plan.params.sigma);
  artefact.set_threshold(plan.params.tau);
  artefact.set_delta_0(plan.delta_0);
  artefact.set_epsilon(epsilon_alone);
  artefact.set_delta(dataset.budget().delta());
  artefact.set_relation(dataset.relation() == v1::REPLACE_ONE ? v1::REPLACE_ONE
                                                              : v1::ADD_REMOVE);
  return release;
}

}  // namespace dpcurator::plan
