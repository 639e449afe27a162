#ifndef DPCURATOR_CORE_PRIVACY_ACCOUNTING_H_
#define DPCURATOR_CORE_PRIVACY_ACCOUNTING_H_

// The ledger's running privacy state for one dataset (PRIVACY.md
// "Accounting"): the composed RDP curve on DefaultRdpOrders(), whether every
// event so far is a plain continuous Gaussian (IsPlainGaussian: a discrete
// Gaussian counts as "not plain", so while one is in the net history the
// exact path is off), and sum 1/s_i^2 for the exact Gaussian conversion;
// and whether the net history is exactly one GridGaussian release, which
// then gets the discrete Gaussian's own profile (grid_gaussian.h).
// Admission is O(grid): copy, Add, Epsilon; never O(history).
//
// Exactness. Totals are kept in unsigned 128-bit fixed point (64 integer and
// 64 fraction bits) per order; each event's value is rounded UP onto that
// grid once (error < 5.5e-20, always against the curator's favour). Integer
// addition is exact and associative, so:
//   - Subtract(e) after Add(e) restores the state bit for bit (refunds);
//   - the state does not depend on the order events were added, so the
//     ledger can rebuild it from history and compare bytes.
// Values of at least kRdpSaturation (2^40) at an order are treated as +inf
// there: such an order can never give a useful epsilon.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/privacy/conversion.h"
#include "core/privacy/events.h"
#include "core/privacy/rdp.h"

namespace dpcurator::privacy {

inline constexpr double kRdpSaturation = 1099511627776.0;  // 2^40

namespace internal {
// 128-bit unsigned fixed point: value = hi + lo * 2^-64.
struct Fixed128 {
  uint64_t hi = 0;
  uint64_t lo = 0;
  friend bool operator==(const Fixed128&, const Fixed128&) = default;
};
}  // namespace internal

// One event's contribution, quantised once; Add/Subtract of a charge is
// O(grid). Build it once per event and reuse it (e.g. for the admission check
// and then the actual Add).
class EventCharge {
 public:
  static absl::StatusOr<EventCharge> Of(const PrivacyEvent& event);
  // As Of(event), with the event's curve already computed (e.g. stored by the
  // ledger). Contract: curve == RdpCurve::FromEvent(event).
  static absl::StatusOr<EventCharge> WithCurve(const PrivacyEvent& event,
                                               const RdpCurve& curve);

  const std::string& description() const { return description_; }

 private:
  friend class AccountantState;
  EventCharge() = default;
  std::vector<internal::Fixed128> rdp_;
  bool plain_gaussian_ = false;
  internal::Fixed128 inverse_variance_sum_;
  bool valid_add_remove_ = false;
  bool valid_replace_one_ = false;
  // A single bare GridGaussian event, and its 1/s^2 (rounded up).
  bool grid_gaussian_ = false;
  internal::Fixed128 grid_inverse_variance_;
  // ApproximateDelta(event), rounded up onto the grid (0 for most events).
  internal::Fixed128 approximate_delta_;
  std::string description_;
};

class AccountantState {
 public:
  // An empty state (nothing spent) for a dataset with this relation.
  explicit AccountantState(NeighbouringRelation relation);

  NeighbouringRelation relation() const { return relation_; }
  // Net number of events (adds minus refunds).
  int64_t event_count() const { return event_count_; }
  bool all_plain_gaussian() const { return non_gaussian_count_ == 0; }
  // sum 1/s_i^2 over plain Gaussian events (meaningful when
  // all_plain_gaussian()); +inf if saturated.
  double plain_gaussian_inverse_variance_sum() const;
  // The composed curve on DefaultRdpOrders() (+inf where saturated).
  std::vector<double> Rdp() const;
  // The sum of the net history's approximate deltas (events.h
  // ApproximateEvent), rounded up; 0 for a ledger without any.
  double approximate_delta() const;

  // InvalidArgument if the event is not valid for relation(); ResourceExhausted
  // if a total would overflow (after ~4 million saturated events). On error
  // the state is unchanged.
  absl::Status Add(const PrivacyEvent& event);
  absl::Status Add(const EventCharge& charge);
  // A refund: exactly negates an earlier Add of the same event.
  // FailedPrecondition (state unchanged) if the state does not contain it.
  absl::Status Subtract(const PrivacyEvent& event);
  absl::Status Subtract(const EventCharge& charge);

  // The composed guarantee at delta in (0, 1): every bound is computed at
  // delta - approximate_delta() (docs/privacy.md 2.11.2: (eps, delta')-DP
  // of the mixtures' good parts is (eps, delta' + sum delta_i)-DP of the
  // whole); epsilon +inf (every bound) once approximate_delta() >= delta.
  absl::StatusOr<EpsilonReport> Epsilon(
      double delta, const ConversionOptions& options = {}) const;
  // Admission check: Epsilon of a copy with the charge added (the state
  // itself is unchanged). O(grid).
  absl::StatusOr<EpsilonReport> EpsilonIfAdded(
      const EventCharge& charge, double delta,
      const ConversionOptions& options = {}) const;

  // Compact little-endian encoding (2,532 bytes): format byte, relation byte,
  // uint16 grid size, int64 event count, int64 non-Gaussian count, then
  // 128-bit fixed-point values (lo word, hi word, each uint64 LE): sum 1/s^2
  // and one per order. Format 1 while no GridGaussian event is in the net
  // history (byte for byte what ledgers written before it hold); otherwise
  // format 2 (2,556 bytes): the same, then int64 GridGaussian count and
  // their 128-bit sum 1/s^2. Format 3 (2,572 bytes) while an approximate
  // event is in the net history: format 2's fields, then the 128-bit sum
  // of the approximate deltas; formats 1 and 2 read as a sum of 0.
  std::string Serialize() const;
  static absl::StatusOr<AccountantState> Deserialize(std::string_view bytes);

  friend bool operator==(const AccountantState&, const AccountantState&) = default;

 private:
  absl::Status CheckCharge(const EventCharge& charge) const;

  NeighbouringRelation relation_;
  int64_t event_count_ = 0;
  int64_t non_gaussian_count_ = 0;
  internal::Fixed128 inverse_variance_sum_;
  std::vector<internal::Fixed128> rdp_;
  // Net count of single GridGaussian events and the sum of their 1/s^2:
  // while the whole net history is one of them (event_count_ == 1), its
  // privacy profile applies (grid_gaussian.h).
  int64_t grid_gaussian_count_ = 0;
  internal::Fixed128 grid_inverse_variance_;
  // Sum of the approximate deltas (events.h ApproximateEvent).
  internal::Fixed128 approximate_delta_;
};

}  // namespace dpcurator::privacy

#endif  // DPCURATOR_CORE_PRIVACY_ACCOUNTING_H_
