#ifndef DPCURATOR_CORE_PRIVACY_EVENTS_H_
#define DPCURATOR_CORE_PRIVACY_EVENTS_H_

// Privacy events: what the ledger records for one release or session, as an
// immutable value type. Every event states the neighbouring relations it is
// valid for (PRIVACY.md "Unit of privacy and neighbouring relations"); a
// composition is valid for a relation only if all of its parts are, and a
// composition that is valid for none is refused when it is built.
//
// Factories validate their arguments; a PrivacyEvent that exists is valid.
// Noise multipliers are noise std / L2 (Gaussian) or Laplace scale / L1
// sensitivity, so every mechanism's sensitivity is 1 in these units.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dpcurator::privacy {

enum class NeighbouringRelation { kAddRemove, kReplaceOne };

// "ADD_REMOVE" / "REPLACE_ONE", the spelling of PRIVACY.md.
std::string RelationName(NeighbouringRelation relation);

class PrivacyEvent;

// Gaussian mechanism with continuous noise, no subsampling. RDP
// alpha / (2 s^2) (Mironov 2017, Prop. 7) and, besides, the exact Gaussian
// privacy profile (Balle & Wang 2018, Thm. 8). Both relations. Kept for
// continuous-noise mechanisms and for the ledgers written before the server
// drew discrete noise ("gaussian(s)" rows keep this meaning).
struct GaussianEvent {
  double noise_multiplier;
};
// Discrete Gaussian noise on a grid (docs/privacy.md 4.2: integer shift of at
// most 1/s noise standard deviations, core/privacy/discrete_noise.h), no
// subsampling. Its RDP is exactly the continuous curve alpha / (2 s^2)
// (Canonne, Kamath, Steinke 2020, Thm. 4 / Prop. 5, additive over
// independent coordinates), and that curve is the only guarantee we claim:
// the continuous Gaussian's exact (eps, delta) profile is not proven for it,
// so such an event is never a "plain Gaussian" below. Both relations.
struct DiscreteGaussianEvent {
  double noise_multiplier;
};
// The successor of DiscreteGaussianEvent for the server's one-shot
// releases ("grid_gaussian(s)"): the same grid noise, with the release's
// dimension at most kMaxGridGaussianDimension (grid_gaussian.h). Its RDP
// curve is alpha / (2 s^2) as above; besides, while it is the only event of
// a dataset's net history, the discrete Gaussian's own privacy profile
// (grid_gaussian.h, docs/privacy.md 4.6) applies. "discrete_gaussian(s)"
// rows keep their RDP-only meaning. Both relations.
struct GridGaussianEvent {
  double noise_multiplier;
};
// Poisson subsampling at rate q, then the Gaussian mechanism. ADD_REMOVE only
// (Mironov, Talwar, Zhang 2019).
struct PoissonSampledGaussianEvent {
  double sampling_rate;
  double noise_multiplier;
};
// Fixed-size subsampling without replacement (m = q n, n public), then the
// Gaussian mechanism. REPLACE_ONE only (Wang, Balle, Kasiviswanathan 2019).
struct SampledWithoutReplacementGaussianEvent {
  double sampling_rate;
  double noise_multiplier;
};
// The two session steps above with the grid's discrete Gaussian noise (what
// the server draws since it snaps to a grid; docs/privacy.md 4.7). Their
// curves are bounds proven for discrete noise with an integer shift, not the
// continuous ones (rdp.h PoissonSampledDiscreteGaussianRdp and
// SampledWithoutReplacementDiscreteGaussianRdp). Stored as
// "discrete_poisson(q,s)" and "discrete_wor(q,s)"; "poisson(q,s)" and
// "wor(q,s)" rows keep their continuous meaning. Relations as above.
struct PoissonSampledDiscreteGaussianEvent {
  double sampling_rate;
  double noise_multiplier;
};
struct SampledWithoutReplacementDiscreteGaussianEvent {
  double sampling_rate;
  double noise_multiplier;
};
// Laplace mechanism with scale b per unit L1 sensitivity (pure DP epsilon
// 1/b). Both relations (Mironov 2017, Prop. 6).
struct LaplaceEvent {
  double noise_multiplier;
};
// k-ary randomized response reporting the true category with probability
// e^eps / (e^eps + k - 1). Per-record local randomization of curator-held
// rows, defined only under REPLACE_ONE (PRIVACY.md).
struct RandomizedResponseEvent {
  int64_t num_categories;
  double epsilon;
};
// One exponential mechanism (McSherry & Talwar 2007) choosing among
// candidates with probability proportional to exp(eps q / (2 Delta)), Delta
// the quality score's sensitivity under the dataset's relation: eps-DP and
// eps-bounded-range, hence (eps^2 / 8)-zCDP (Cesar & Rogers 2021, their
// bounded-range bound; docs/privacy.md 2.11), RDP min(alpha eps^2 / 8, eps). Valid
// for both relations (the caller's Delta is the relation's). Stored as
// "exponential(eps)". MST's pair selection (core/train/mst.h).
struct ExponentialMechanismEvent {
  double epsilon;
};
// A mechanism that is rho-zCDP as a whole (Bun & Steinke 2016, Def. 1.1):
// RDP alpha * rho at every order. The ledger's event for a recipe whose
// steps are chosen adaptively from its own releases but whose zCDP costs
// add up to at most rho by construction (AIM, core/train/aim.h;
// docs/privacy.md 2.12): with each step's cost chosen from earlier
// outputs, the Renyi filter (Feldman & Zrnic 2021, Thm. 3.1) bounds the
// whole interaction by alpha * rho at every order whenever the realised
// costs add up to at most rho on every run, however many rounds it takes.
// Valid for both relations (each step's sensitivity is the relation's).
// Stored as "zcdp(rho)".
struct ZcdpEvent {
  double rho;
};
// An event whose guarantee holds outside a failure of probability at most
// `delta` (docs/privacy.md 2.11.2): the mechanism's law on each of two
// neighbours is a mixture (1 - delta) A + delta B, (1 - delta) A' +
// delta B', with `event`'s RDP curve bounding D_alpha(A || A') at every
// order: "delta-approximate" RDP (the mixture form of Bun & Steinke 2016's
// approximate zCDP, order by order). Its RDP curve is `event`'s; its delta
// adds up under adaptive composition and is subtracted from the dataset's
// delta before the RDP-to-(eps, delta) conversion (ApproximateDelta below;
// both proved in docs/privacy.md 2.11.2).
// Valid for the relations `event` is. Stored as "approx(delta;e)". Gaussian
// thresholding of a category list (core/release/category_fit.h).
struct ApproximateEvent {
  std::shared_ptr<const PrivacyEvent> event;
  double delta;
};
// Several events on the same data, in any order.
struct ComposedEvent {
  std::vector<PrivacyEvent> events;
};
// The same event repeated `count` times.
struct SelfComposedEvent {
  std::shared_ptr<const PrivacyEvent> event;
  int64_t count;
};
// Parallel composition (docs/privacy.md 3.7): K releases or sessions, the
// k-th reading only the rows of part k of a partition of the rows by a
// PUBLIC function of one row (a declared column's declared values, never
// values looked up in the data). McSherry 2009 ("Privacy Integrated
// Queries", Thm. 2) for pure DP; in RDP, per order alpha:
//  * ADD_REMOVE: an added or removed row lies in at most one part, so the
//    curve is max_k add_remove[k] (rows in no opened part change nothing).
//  * REPLACE_ONE: a replaced row either stays in its part (that part's
//    replace-one curve), or leaves part j and enters part k != j (part j
//    loses a row and part k gains one: two add/remove neighbours of
//    independent mechanisms, composed: add_remove[j] + add_remove[k]), or
//    moves between an opened part and an unopened value (one add/remove
//    neighbour). Curve: max(max_k replace_one[k], max_k add_remove[k],
//    max_{j != k} add_remove[j] + add_remove[k]).
// Valid for `relation` only (the curve is the relation's). Every
// add_remove[k] must be valid under ADD_REMOVE, with its noise multiplier in
// units of part k's add/remove sensitivity; under REPLACE_ONE every
// replace_one[k] must be valid under REPLACE_ONE, in units of part k's
// sensitivity to a row replaced inside the part (the part's size is NOT
// public under a partition, so a part is never a fixed-size WOR sample).
struct PartitionedEvent {
  NeighbouringRelation relation;
  std::vector<PrivacyEvent> add_remove;
  // Empty under ADD_REMOVE; one per part under REPLACE_ONE.
  std::vector<PrivacyEvent> replace_one;
};

// At most this many parts in one partitioned event (a label column's
// declared categories; the ledger stores one event text per admission).
inline constexpr int64_t kMaxPartitionParts = 4096;

class PrivacyEvent {
 public:
  using Variant =
      std::variant<GaussianEvent, DiscreteGaussianEvent, GridGaussianEvent,
                   PoissonSampledGaussianEvent,
                   SampledWithoutReplacementGaussianEvent,
                   PoissonSampledDiscreteGaussianEvent,
                   SampledWithoutReplacementDiscreteGaussianEvent, LaplaceEvent,
                   RandomizedResponseEvent, ExponentialMechanismEvent, ZcdpEvent,
                   ComposedEvent, SelfComposedEvent, PartitionedEvent,
                   ApproximateEvent>;

  // noise_multiplier finite and > 0.
  static absl::StatusOr<PrivacyEvent> Gaussian(double noise_multiplier);
  // The same for discrete (grid) Gaussian noise: every release the server
  // draws is charged as this.
  static absl::StatusOr<PrivacyEvent> DiscreteGaussian(double noise_multiplier);
  // One release of the grid's discrete Gaussian with at most
  // kMaxGridGaussianDimension coordinates: what the server charges its
  // one-shot releases as.
  static absl::StatusOr<PrivacyEvent> GridGaussian(double noise_multiplier);
  // sampling_rate in [0, 1]; noise_multiplier finite and > 0.
  static absl::StatusOr<PrivacyEvent> PoissonSampledGaussian(
      double sampling_rate, double noise_multiplier);
  static absl::StatusOr<PrivacyEvent> SampledWithoutReplacementGaussian(
      double sampling_rate, double noise_multiplier);
  // The same with discrete (grid) Gaussian noise: every session step the
  // server draws is charged as one of these.
  static absl::StatusOr<PrivacyEvent> PoissonSampledDiscreteGaussian(
      double sampling_rate, double noise_multiplier);
  static absl::StatusOr<PrivacyEvent> SampledWithoutReplacementDiscreteGaussian(
      double sampling_rate, double noise_multiplier);
  // noise_multiplier = Laplace scale / L1 sensitivity, finite and > 0.
  static absl::StatusOr<PrivacyEvent> Laplace(double noise_multiplier);
  // num_categories >= 2; epsilon finite and > 0.
  static absl::StatusOr<PrivacyEvent> RandomizedResponse(int64_t num_categories,
                                                         double epsilon);
  // epsilon finite and > 0.
  static absl::StatusOr<PrivacyEvent> ExponentialMechanism(double epsilon);
  // rho finite and > 0.
  static absl::StatusOr<PrivacyEvent> Zcdp(double rho);
  // `event` with an additive failure probability: delta finite, in (0, 1).
  static absl::StatusOr<PrivacyEvent> Approximate(PrivacyEvent event, double delta);
  // Fails if no neighbouring relation is valid for all parts. An empty
  // composition is the event "nothing happened".
  static absl::StatusOr<PrivacyEvent> Compose(std::vector<PrivacyEvent> events);
  // count >= 1.
  static absl::StatusOr<PrivacyEvent> SelfCompose(PrivacyEvent event,
                                                  int64_t count);
  // Parallel composition over a public partition under ADD_REMOVE: 1 to
  // kMaxPartitionParts parts, each valid under ADD_REMOVE.
  static absl::StatusOr<PrivacyEvent> PartitionedAddRemove(
      std::vector<PrivacyEvent> parts);
  // The same under REPLACE_ONE: add_remove.size() == replace_one.size() in
  // [1, kMaxPartitionParts], add_remove[k] valid under ADD_REMOVE and
  // replace_one[k] valid under REPLACE_ONE.
  static absl::StatusOr<PrivacyEvent> PartitionedReplaceOne(
      std::vector<PrivacyEvent> add_remove, std::vector<PrivacyEvent> replace_one);

  const Variant& variant() const { return *variant_; }

  // Whether the event's accounting is valid under `relation`.
  bool IsValidFor(NeighbouringRelation relation) const;

 private:
  PrivacyEvent(Variant variant, bool valid_add_remove, bool valid_replace_one);
  // Shared and immutable: copies are cheap and deep trees stay O(1) to copy.
  std::shared_ptr<const Variant> variant_;
  bool valid_add_remove_;
  bool valid_replace_one_;
};

// InvalidArgument naming both relations unless event.IsValidFor(relation).
absl::Status CheckRelation(const PrivacyEvent& event,
                           NeighbouringRelation relation);

// True when the event is a plain (not subsampled) continuous Gaussian or a
// composition of those only; such a composition is exactly one Gaussian with
// mu = sqrt(sum_i 1/s_i^2) (Dong, Roth, Su 2019, Cor. 3.3; dp_accounting's
// _effective_gaussian_noise_multiplier). Vacuously true for an empty
// composition. False as soon as a DiscreteGaussian is involved: that
// identity (and the analytic conversion built on it) is a statement about
// the continuous Gaussian only.
bool IsPlainGaussian(const PrivacyEvent& event);

// sum_i 1/s_i^2 over the plain Gaussians of the event (a self-composition
// counts `count` times), or nullopt unless IsPlainGaussian(event).
std::optional<double> PlainGaussianInverseVarianceSum(const PrivacyEvent& event);

// 1/s^2 when the event is a single bare GridGaussian, or an ADD_REMOVE
// partition whose parts are all the same bare GridGaussian of multiplier s
// (one part's loss: docs/privacy.md 3.7) -- the only event shapes the
// discrete Gaussian's privacy profile is used for -- else nullopt.
std::optional<double> SingleGridGaussianInverseVariance(const PrivacyEvent& event);

// The event's total delta: the sum of its ApproximateEvents' deltas, a
// self-composition counting `count` times (the good parts' weights
// multiply: 1 - prod(1 - delta_i) <= sum delta_i), and every part of a partition
// summed (a neighbouring pair touches one or two parts, so the sum bounds
// them). 0 for an event without any. Rounded up (never below the exact sum).
double ApproximateDelta(const PrivacyEvent& event);

// For people, e.g. "PoissonSampledGaussian(q=0.01, s=1.1) x 10000".
std::string Describe(const PrivacyEvent& event);

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_EVENTS_H_
