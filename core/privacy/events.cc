#include "core/privacy/events.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"

namespace dpcurator::privacy {

std::string RelationName(NeighbouringRelation relation) {
  switch (relation) {
    case NeighbouringRelation::kAddRemove:
      return "ADD_REMOVE";
    case NeighbouringRelation::kReplaceOne:
      return "REPLACE_ONE";
  }
  return "UNKNOWN";
}

PrivacyEvent::PrivacyEvent(Variant variant, bool valid_add_remove,
                           bool valid_replace_one)
    : variant_(std::make_shared<const Variant>(std::move(variant))),
      valid_add_remove_(valid_add_remove),
      valid_replace_one_(valid_replace_one) {}

absl::StatusOr<PrivacyEvent> PrivacyEvent::Gaussian(double noise_multiplier) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  return PrivacyEvent(GaussianEvent{noise_multiplier}, true, true);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::DiscreteGaussian(double noise_multiplier) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  return PrivacyEvent(DiscreteGaussianEvent{noise_multiplier}, true, true);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::GridGaussian(double noise_multiplier) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  return PrivacyEvent(GridGaussianEvent{noise_multiplier}, true, true);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::PoissonSampledGaussian(
    double sampling_rate, double noise_multiplier) {
  DPC_RETURN_IF_ERROR(ValidateInUnitInterval(sampling_rate, "Sampling rate"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  return PrivacyEvent(
      PoissonSampledGaussianEvent{sampling_rate, noise_multiplier}, true, false);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::SampledWithoutReplacementGaussian(
    double sampling_rate, double noise_multiplier) {
  DPC_RETURN_IF_ERROR(ValidateInUnitInterval(sampling_rate, "Sampling rate"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  return PrivacyEvent(
      SampledWithoutReplacementGaussianEvent{sampling_rate, noise_multiplier},
      false, true);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::PoissonSampledDiscreteGaussian(
    double sampling_rate, double noise_multiplier) {
  DPC_RETURN_IF_ERROR(ValidateInUnitInterval(sampling_rate, "Sampling rate"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  return PrivacyEvent(
      PoissonSampledDiscreteGaussianEvent{sampling_rate, noise_multiplier}, true,
      false);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::SampledWithoutReplacementDiscreteGaussian(
    double sampling_rate, double noise_multiplier) {
  DPC_RETURN_IF_ERROR(ValidateInUnitInterval(sampling_rate, "Sampling rate"));
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  return PrivacyEvent(SampledWithoutReplacementDiscreteGaussianEvent{
                          sampling_rate, noise_multiplier},
                      false, true);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::Laplace(double noise_multiplier) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(noise_multiplier, "Noise multiplier"));
  return PrivacyEvent(LaplaceEvent{noise_multiplier}, true, true);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::RandomizedResponse(
    int64_t num_categories, double epsilon) {
  if (num_categories < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Number of categories must be at least 2, got ", num_categories));
  }
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(epsilon, "Epsilon"));
  return PrivacyEvent(RandomizedResponseEvent{num_categories, epsilon}, false,
                      true);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::ExponentialMechanism(double epsilon) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(epsilon, "Epsilon"));
  return PrivacyEvent(ExponentialMechanismEvent{epsilon}, true, true);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::Zcdp(double rho) {
  DPC_RETURN_IF_ERROR(ValidateFinitePositive(rho, "Rho"));
  return PrivacyEvent(ZcdpEvent{rho}, true, true);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::Approximate(PrivacyEvent event, double delta) {
  if (!std::isfinite(delta) || !(delta > 0) || !(delta < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Approximate delta must be finite and in (0, 1), got ", delta));
  }
  const bool add_remove = event.valid_add_remove_;
  const bool replace_one = event.valid_replace_one_;
  return PrivacyEvent(
      ApproximateEvent{std::make_shared<const PrivacyEvent>(std::move(event)), delta},
      add_remove, replace_one);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::Compose(
    std::vector<PrivacyEvent> events) {
  bool add_remove = true;
  bool replace_one = true;
  for (const PrivacyEvent& e : events) {
    add_remove = add_remove && e.valid_add_remove_;
    replace_one = replace_one && e.valid_replace_one_;
  }
  if (!add_remove && !replace_one) {
    std::vector<std::string> parts;
    parts.reserve(events.size());
    for (const PrivacyEvent& e : events) parts.push_back(Describe(e));
    return absl::InvalidArgumentError(absl::StrCat(
        "Composed events share no neighbouring relation: ",
        absl::StrJoin(parts, ", ")));
  }
  return PrivacyEvent(ComposedEvent{std::move(events)}, add_remove, replace_one);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::SelfCompose(PrivacyEvent event,
                                                       int64_t count) {
  DPC_RETURN_IF_ERROR(ValidatePositiveInt(count, "Count"));
  const bool add_remove = event.valid_add_remove_;
  const bool replace_one = event.valid_replace_one_;
  return PrivacyEvent(
      SelfComposedEvent{std::make_shared<const PrivacyEvent>(std::move(event)),
                        count},
      add_remove, replace_one);
}

namespace {

absl::Status ValidatePartCount(size_t count) {
  if (count < 1 || count > static_cast<size_t>(kMaxPartitionParts)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "A partitioned event must have 1 to ", kMaxPartitionParts, " parts, got ", count));
  }
  return absl::OkStatus();
}

absl::Status ValidateParts(const std::vector<PrivacyEvent>& parts,
                           NeighbouringRelation relation, absl::string_view role) {
  for (size_t k = 0; k < parts.size(); ++k) {
    if (!parts[k].IsValidFor(relation)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Part ", k, "'s ", role, " event ", Describe(parts[k]), " is not defined under ",
          RelationName(relation), " neighbours"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PrivacyEvent> PrivacyEvent::PartitionedAddRemove(
    std::vector<PrivacyEvent> parts) {
  DPC_RETURN_IF_ERROR(ValidatePartCount(parts.size()));
  DPC_RETURN_IF_ERROR(ValidateParts(parts, NeighbouringRelation::kAddRemove, "add/remove"));
  return PrivacyEvent(
      PartitionedEvent{NeighbouringRelation::kAddRemove, std::move(parts), {}}, true, false);
}

absl::StatusOr<PrivacyEvent> PrivacyEvent::PartitionedReplaceOne(
    std::vector<PrivacyEvent> add_remove, std::vector<PrivacyEvent> replace_one) {
  DPC_RETURN_IF_ERROR(ValidatePartCount(add_remove.size()));
  if (replace_one.size() != add_remove.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "A replace-one partitioned event needs one replace-one event per part: ",
        add_remove.size(), " parts, ", replace_one.size(), " replace-one events"));
  }
  DPC_RETURN_IF_ERROR(ValidateParts(add_remove, NeighbouringRelation::kAddRemove, "add/remove"));
  DPC_RETURN_IF_ERROR(
      ValidateParts(replace_one, NeighbouringRelation::kReplaceOne, "replace-one"));
  return PrivacyEvent(PartitionedEvent{NeighbouringRelation::kReplaceOne, std::move(add_remove),
                                       std::move(replace_one)},
                      false, true);
}

bool PrivacyEvent::IsValidFor(NeighbouringRelation relation) const {
  return relation == NeighbouringRelation::kAddRemove ? valid_add_remove_
                                                      : valid_replace_one_;
}

absl::Status CheckRelation(const PrivacyEvent& event,
                           NeighbouringRelation relation) {
  if (event.IsValidFor(relation)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("Event ", Describe(event), " is not defined under ",
                   RelationName(relation), " neighbours"));
}

std::optional<double> PlainGaussianInverseVarianceSum(
    const PrivacyEvent& event) {
  const PrivacyEvent::Variant& v = event.variant();
  if (const auto* g = std::get_if<GaussianEvent>(&v)) {
    return 1.0 / (g->noise_multiplier * g->noise_multiplier);
  }
  // DiscreteGaussianEvent falls through to nullopt on purpose (events.h).
  if (const auto* c = std::get_if<ComposedEvent>(&v)) {
    double sum = 0.0;
    for (const PrivacyEvent& e : c->events) {
      std::optional<double> part = PlainGaussianInverseVarianceSum(e);
      if (!part.has_value()) return std::nullopt;
      sum += *part;
    }
    return sum;
  }
  if (const auto* sc = std::get_if<SelfComposedEvent>(&v)) {
    std::optional<double> part = PlainGaussianInverseVarianceSum(*sc->event);
    if (!part.has_value()) return std::nullopt;
    return *part * static_cast<double>(sc->count);
  }
  return std::nullopt;
}

std::optional<double> SingleGridGaussianInverseVariance(const PrivacyEvent& event) {
  const PrivacyEvent::Variant& v = event.variant();
  if (const auto* g = std::get_if<GridGaussianEvent>(&v)) {
    return 1.0 / (g->noise_multiplier * g->noise_multiplier);
  }
  // K copies of one bare GridGaussian over the parts of a public partition,
  // under ADD_REMOVE (docs/privacy.md 3.7, "One part's profile"): a pair of
  // neighbours changes one part's rows (or none), and the other parts'
  // outputs are independent of it with the same law on both datasets, so
  // every divergence of the joint output, the hockey-stick divergence
  // included, is that one part's: a single grid Gaussian of multiplier s.
  // Parts of different multipliers get RDP only: the discrete Gaussian's
  // profile is not proven monotone in s, so no one part stands for all.
  const auto* p = std::get_if<PartitionedEvent>(&v);
  if (p == nullptr || p->relation != NeighbouringRelation::kAddRemove) return std::nullopt;
  std::optional<double> multiplier;
  for (const PrivacyEvent& part : p->add_remove) {
    const auto* g = std::get_if<GridGaussianEvent>(&part.variant());
    if (g == nullptr) return std::nullopt;
    if (multiplier.has_value() && *multiplier != g->noise_multiplier) return std::nullopt;
    multiplier = g->noise_multiplier;
  }
  if (!multiplier.has_value()) return std::nullopt;
  return 1.0 / (*multiplier * *multiplier);
}

double ApproximateDelta(const PrivacyEvent& event) {
  // Every addition and product is rounded up, so the result is never below
  // the exact sum (the ledger's conversion then uses a smaller delta).
  auto add_up = [](double a, double b) {
    const double sum = a + b;
    return b == 0 ? a : std::nextafter(sum, std::numeric_limits<double>::infinity());
  };
  const PrivacyEvent::Variant& v = event.variant();
  if (const auto* a = std::get_if<ApproximateEvent>(&v)) {
    return add_up(a->delta, ApproximateDelta(*a->event));
  }
  if (const auto* c = std::get_if<ComposedEvent>(&v)) {
    double sum = 0.0;
    for (const PrivacyEvent& e : c->events) sum = add_up(sum, ApproximateDelta(e));
    return sum;
  }
  if (const auto* sc = std::get_if<SelfComposedEvent>(&v)) {
    const double part = ApproximateDelta(*sc->event);
    if (part == 0) return 0.0;
    return std::nextafter(part * static_cast<double>(sc->count),
                          std::numeric_limits<double>::infinity());
  }
  if (const auto* p = std::get_if<PartitionedEvent>(&v)) {
    double sum = 0.0;
    for (const PrivacyEvent& e : p->add_remove) sum = add_up(sum, ApproximateDelta(e));
    for (const PrivacyEvent& e : p->replace_one) sum = add_up(sum, ApproximateDelta(e));
    return sum;
  }
  return 0.0;
}

bool IsPlainGaussian(const PrivacyEvent& event) {
  return PlainGaussianInverseVarianceSum(event).has_value();
}

namespace {

struct Describer {
  std::string operator()(const GaussianEvent& e) const {
    return absl::StrCat("Gaussian(s=", e.noise_multiplier, ")");
  }
  std::string operator()(const DiscreteGaussianEvent& e) const {
    return absl::StrCat("DiscreteGaussian(s=", e.noise_multiplier, ")");
  }
  std::string operator()(const GridGaussianEvent& e) const {
    return absl::StrCat("GridGaussian(s=", e.noise_multiplier, ")");
  }
  std::string operator()(const PoissonSampledGaussianEvent& e) const {
    return absl::StrCat("PoissonSampledGaussian(q=", e.sampling_rate,
                        ", s=", e.noise_multiplier, ")");
  }
  std::string operator()(const SampledWithoutReplacementGaussianEvent& e) const {
    return absl::StrCat("SampledWithoutReplacementGaussian(q=", e.sampling_rate,
                        ", s=", e.noise_multiplier, ")");
  }
  std::string operator()(const PoissonSampledDiscreteGaussianEvent& e) const {
    return absl::StrCat("PoissonSampledDiscreteGaussian(q=", e.sampling_rate,
                        ", s=", e.noise_multiplier, ")");
  }
  std::string operator()(
      const SampledWithoutReplacementDiscreteGaussianEvent& e) const {
    return absl::StrCat("SampledWithoutReplacementDiscreteGaussian(q=",
                        e.sampling_rate, ", s=", e.noise_multiplier, ")");
  }
  std::string operator()(const LaplaceEvent& e) const {
    return absl::StrCat("Laplace(b=", e.noise_multiplier, ")");
  }
  std::string operator()(const RandomizedResponseEvent& e) const {
    return absl::StrCat("RandomizedResponse(k=", e.num_categories,
                        ", eps=", e.epsilon, ")");
  }
  std::string operator()(const ExponentialMechanismEvent& e) const {
    return absl::StrCat("ExponentialMechanism(eps=", e.epsilon, ")");
  }
  std::string operator()(const ZcdpEvent& e) const {
    return absl::StrCat("Zcdp(rho=", e.rho, ")");
  }
  std::string operator()(const ComposedEvent& e) const {
    std::vector<std::string> parts;
    parts.reserve(e.events.size());
    for (const PrivacyEvent& p : e.events) parts.push_back(Describe(p));
    return absl::StrCat("Composed[", absl::StrJoin(parts, ", "), "]");
  }
  std::string operator()(const SelfComposedEvent& e) const {
    return absl::StrCat(Describe(*e.event), " x ", e.count);
  }
  std::string operator()(const ApproximateEvent& e) const {
    return absl::StrCat(Describe(*e.event), " except with probability ", e.delta);
  }
  std::string operator()(const PartitionedEvent& e) const {
    auto join = [](const std::vector<PrivacyEvent>& events) {
      std::vector<std::string> parts;
      parts.reserve(events.size());
      for (const PrivacyEvent& p : events) parts.push_back(Describe(p));
      return absl::StrJoin(parts, ", ");
    };
    if (e.relation == NeighbouringRelation::kAddRemove) {
      return absl::StrCat("Partitioned(ADD_REMOVE)[", join(e.add_remove), "]");
    }
    return absl::StrCat("Partitioned(REPLACE_ONE)[", join(e.add_remove), " | ",
                        join(e.replace_one), "]");
  }
};

}  // namespace

std::string Describe(const PrivacyEvent& event) {
  return std::visit(Describer{}, event.variant());
}

}  // namespace dpcurator::privacy
