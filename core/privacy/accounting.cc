#include "core/privacy/accounting.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"

namespace dpcurator::privacy {
namespace {

using internal::Fixed128;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint64_t kSaturationHi = uint64_t{1} << 40;  // == kRdpSaturation
// Totals stay below 2^62 so that one more addition cannot wrap.
constexpr uint64_t kMaxTotalHi = uint64_t{1} << 62;
constexpr uint8_t kFormatVersion = 1;
// With GridGaussian totals appended (only while they are non-zero).
constexpr uint8_t kFormatVersionWithGrid = 2;
constexpr size_t kGridExtraBytes = 8 + 16;
// Format 2's fields, then the sum of approximate deltas (only while it is
// non-zero, so ledgers without thresholding keep their bytes).
constexpr uint8_t kFormatVersionWithDelta = 3;
constexpr size_t kDeltaExtraBytes = 16;
constexpr size_t kHeaderBytes = 1 + 1 + 2 + 8 + 8;
constexpr size_t kFixedBytes = 16;

static_assert(static_cast<double>(kSaturationHi) == kRdpSaturation);

// Rounds v >= 0 (or +inf) up onto the 2^-64 grid; saturates at 2^40.
Fixed128 Quantize(double v) {
  if (!(v < kRdpSaturation)) return Fixed128{kSaturationHi, 0};
  const double whole = std::floor(v);
  const double frac = v - whole;  // exact: the low bits of v
  const double scaled = std::ceil(std::ldexp(frac, 64));  // < 2^64, exact
  return Fixed128{static_cast<uint64_t>(whole), static_cast<uint64_t>(scaled)};
}

// Rounds up to a double (never below the exact value); +inf if saturated.
double ToDouble(const Fixed128& f) {
  if (f.hi >= kSaturationHi) return kInf;
  double d = static_cast<double>(f.hi) + std::ldexp(static_cast<double>(f.lo), -64);
  if (f.lo != 0) d = std::nextafter(d, kInf);
  return d;
}

bool Less(const Fixed128& a, const Fixed128& b) {
  return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
}

// a + b; false (a unchanged) if the total would reach kMaxTotalHi.
bool AddTo(Fixed128& a, const Fixed128& b) {
  const uint64_t lo = a.lo + b.lo;
  const uint64_t carry = lo < a.lo ? 1 : 0;
  const uint64_t hi = a.hi + b.hi + carry;  // both < 2^62: no wrap
  if (hi >= kMaxTotalHi) return false;
  a = Fixed128{hi, lo};
  return true;
}

// a - b, assuming !Less(a, b).
void SubtractFrom(Fixed128& a, const Fixed128& b) {
  const uint64_t borrow = a.lo < b.lo ? 1 : 0;
  a.lo -= b.lo;
  a.hi = a.hi - b.hi - borrow;
}

void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetU64(std::string_view in, size_t pos) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[pos + i])) << (8 * i);
  }
  return v;
}

}  // namespace

absl::StatusOr<EventCharge> EventCharge::Of(const PrivacyEvent& event) {
  DPC_ASSIGN_OR_RETURN(RdpCurve curve, RdpCurve::FromEvent(event));
  return WithCurve(event, curve);
}

absl::StatusOr<EventCharge> EventCharge::WithCurve(const PrivacyEvent& event,
                                                   const RdpCurve& curve) {
  EventCharge charge;
  charge.rdp_.reserve(curve.values().size());
  for (double v : curve.values()) {
    if (std::isnan(v) || v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("RDP values must be non-negative or +inf, got ", v));
    }
    charge.rdp_.push_back(Quantize(v));
  }
  const std::optional<double> inverse_variance =
      PlainGaussianInverseVarianceSum(event);
  charge.plain_gaussian_ = inverse_variance.has_value();
  if (inverse_variance.has_value()) {
    charge.inverse_variance_sum_ = Quantize(*inverse_variance);
  }
  const std::optional<double> grid = SingleGridGaussianInverseVariance(event);
  charge.grid_gaussian_ = grid.has_value();
  if (grid.has_value()) charge.grid_inverse_variance_ = Quantize(*grid);
  charge.approximate_delta_ = Quantize(ApproximateDelta(event));
  charge.valid_add_remove_ = event.IsValidFor(NeighbouringRelation::kAddRemove);
  charge.valid_replace_one_ = event.IsValidFor(NeighbouringRelation::kReplaceOne);
  charge.description_ = Describe(event);
  return charge;
}

AccountantState::AccountantState(NeighbouringRelation relation)
    : relation_(relation), rdp_(DefaultRdpOrders().size()) {}

double AccountantState::plain_gaussian_inverse_variance_sum() const {
  return ToDouble(inverse_variance_sum_);
}

double AccountantState::approximate_delta() const { return ToDouble(approximate_delta_); }

std::vector<double> AccountantState::Rdp() const {
  std::vector<double> out;
  out.reserve(rdp_.size());
  for (const Fixed128& f : rdp_) out.push_back(ToDouble(f));
  return out;
}

absl::Status AccountantState::CheckCharge(const EventCharge& charge) const {
  const bool valid = relation_ == NeighbouringRelation::kAddRemove
                         ? charge.valid_add_remove_
                         : charge.valid_replace_one_;
  if (!valid) {
    return absl::InvalidArgumentError(
        absl::StrCat("Event ", charge.description_, " is not defined under ",
                     RelationName(relation_), " neighbours"));
  }
  if (charge.rdp_.size() != rdp_.size()) {
    return absl::InternalError("RDP grid size mismatch");
  }
  return absl::OkStatus();
}

absl::Status AccountantState::Add(const PrivacyEvent& event) {
  DPC_RETURN_IF_ERROR(CheckRelation(event, relation_));
  DPC_ASSIGN_OR_RETURN(EventCharge charge, EventCharge::Of(event));
  return Add(charge);
}

absl::Status AccountantState::Add(const EventCharge& charge) {
  DPC_RETURN_IF_ERROR(CheckCharge(charge));
  AccountantState next = *this;
  bool ok = true;
  for (size_t i = 0; i < rdp_.size() && ok; ++i) ok = AddTo(next.rdp_[i], charge.rdp_[i]);
  if (charge.plain_gaussian_ && ok) {
    ok = AddTo(next.inverse_variance_sum_, charge.inverse_variance_sum_);
  }
  if (charge.grid_gaussian_ && ok) {
    ok = AddTo(next.grid_inverse_variance_, charge.grid_inverse_variance_);
    ++next.grid_gaussian_count_;
  }
  if (ok) ok = AddTo(next.approximate_delta_, charge.approximate_delta_);
  if (!ok || event_count_ == std::numeric_limits<int64_t>::max()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("Privacy state overflow adding ", charge.description_));
  }
  ++next.event_count_;
  if (!charge.plain_gaussian_) ++next.non_gaussian_count_;
  *this = std::move(next);
  return absl::OkStatus();
}

absl::Status AccountantState::Subtract(const PrivacyEvent& event) {
  DPC_RETURN_IF_ERROR(CheckRelation(event, relation_));
  DPC_ASSIGN_OR_RETURN(EventCharge charge, EventCharge::Of(event));
  return Subtract(charge);
}

absl::Status AccountantState::Subtract(const EventCharge& charge) {
  DPC_RETURN_IF_ERROR(CheckCharge(charge));
  bool contained = event_count_ > 0 &&
                   (charge.plain_gaussian_ || non_gaussian_count_ > 0) &&
                   !(charge.plain_gaussian_ &&
                     Less(inverse_variance_sum_, charge.inverse_variance_sum_)) &&
                   !(charge.grid_gaussian_ &&
                     (grid_gaussian_count_ == 0 ||
                      Less(grid_inverse_variance_, charge.grid_inverse_variance_))) &&
                   !Less(approximate_delta_, charge.approximate_delta_);
  for (size_t i = 0; i < rdp_.size() && contained; ++i) {
    contained = !Less(rdp_[i], charge.rdp_[i]);
  }
  if (!contained) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Refund of ", charge.description_, " exceeds the recorded charges"));
  }
  for (size_t i = 0; i < rdp_.size(); ++i) SubtractFrom(rdp_[i], charge.rdp_[i]);
  if (charge.plain_gaussian_) {
    SubtractFrom(inverse_variance_sum_, charge.inverse_variance_sum_);
  } else {
    --non_gaussian_count_;
  }
  if (charge.grid_gaussian_) {
    SubtractFrom(grid_inverse_variance_, charge.grid_inverse_variance_);
    --grid_gaussian_count_;
  }
  SubtractFrom(approximate_delta_, charge.approximate_delta_);
  --event_count_;
  return absl::OkStatus();
}

absl::StatusOr<EpsilonReport> AccountantState::Epsilon(
    double delta, const ConversionOptions& options) const {
  std::optional<double> inverse_variance;
  if (all_plain_gaussian()) inverse_variance = ToDouble(inverse_variance_sum_);
  // The discrete Gaussian's profile covers one release only (grid_gaussian.h):
  // the net history must be exactly that event. ToDouble rounds 1/s^2 up.
  std::optional<double> grid_inverse_variance;
  if (event_count_ == 1 && grid_gaussian_count_ == 1) {
    grid_inverse_variance = ToDouble(grid_inverse_variance_);
  }
  // ToDouble rounds the summed deltas up.
  return MakeApproximateEpsilonReport(Rdp(), inverse_variance, grid_inverse_variance,
                                      ToDouble(approximate_delta_), delta, options);
}

absl::StatusOr<EpsilonReport> AccountantState::EpsilonIfAdded(
    const EventCharge& charge, double delta,
    const ConversionOptions& options) const {
  AccountantState next = *this;
  DPC_RETURN_IF_ERROR(next.Add(charge));
  return next.Epsilon(delta, options);
}

std::string AccountantState::Serialize() const {
  const bool with_delta = approximate_delta_ != internal::Fixed128{};
  const bool with_grid = with_delta || grid_gaussian_count_ != 0 ||
                         grid_inverse_variance_ != internal::Fixed128{};
  std::string out;
  out.reserve(kHeaderBytes + kFixedBytes * (rdp_.size() + 1) + kGridExtraBytes +
              kDeltaExtraBytes);
  out.push_back(static_cast<char>(with_delta  ? kFormatVersionWithDelta
                                  : with_grid ? kFormatVersionWithGrid
                                              : kFormatVersion));
  out.push_back(static_cast<char>(relation_ == NeighbouringRelation::kAddRemove ? 0 : 1));
  out.push_back(static_cast<char>(rdp_.size() & 0xff));
  out.push_back(static_cast<char>((rdp_.size() >> 8) & 0xff));
  PutU64(out, static_cast<uint64_t>(event_count_));
  PutU64(out, static_cast<uint64_t>(non_gaussian_count_));
  PutU64(out, inverse_variance_sum_.lo);
  PutU64(out, inverse_variance_sum_.hi);
  for (const Fixed128& f : rdp_) {
    PutU64(out, f.lo);
    PutU64(out, f.hi);
  }
  if (with_grid) {
    PutU64(out, static_cast<uint64_t>(grid_gaussian_count_));
    PutU64(out, grid_inverse_variance_.lo);
    PutU64(out, grid_inverse_variance_.hi);
  }
  if (with_delta) {
    PutU64(out, approximate_delta_.lo);
    PutU64(out, approximate_delta_.hi);
  }
  return out;
}

absl::StatusOr<AccountantState> AccountantState::Deserialize(
    std::string_view bytes) {
  const size_t grid = DefaultRdpOrders().size();
  const size_t expected = kHeaderBytes + kFixedBytes * (grid + 1);
  const uint8_t format = bytes.empty() ? 0 : static_cast<uint8_t>(bytes[0]);
  const bool with_delta = format == kFormatVersionWithDelta;
  const bool with_grid = format == kFormatVersionWithGrid || with_delta;
  if (with_delta) {
    if (bytes.size() != expected + kGridExtraBytes + kDeltaExtraBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("Privacy state must be ", expected + kGridExtraBytes + kDeltaExtraBytes,
                       " bytes, got ", bytes.size()));
    }
  } else if (with_grid) {
    if (bytes.size() != expected + kGridExtraBytes) {
      return absl::InvalidArgumentError(absl::StrCat("Privacy state must be ",
                                                     expected + kGridExtraBytes,
                                                     " bytes, got ", bytes.size()));
    }
  } else if (bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Privacy state must be ", expected, " bytes, got ", bytes.size()));
  }
  if (format != kFormatVersion && !with_grid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Unknown privacy state format ", static_cast<int>(static_cast<uint8_t>(bytes[0]))));
  }
  const uint8_t relation_byte = static_cast<uint8_t>(bytes[1]);
  if (relation_byte > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Unknown neighbouring relation ", static_cast<int>(relation_byte)));
  }
  const size_t stored_grid = static_cast<uint8_t>(bytes[2]) |
                             (static_cast<size_t>(static_cast<uint8_t>(bytes[3])) << 8);
  if (stored_grid != grid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Privacy state has ", stored_grid, " orders, expected ", grid));
  }
  AccountantState state(relation_byte == 0 ? NeighbouringRelation::kAddRemove
                                           : NeighbouringRelation::kReplaceOne);
  state.event_count_ = static_cast<int64_t>(GetU64(bytes, 4));
  state.non_gaussian_count_ = static_cast<int64_t>(GetU64(bytes, 12));
  if (state.event_count_ < 0 || state.non_gaussian_count_ < 0 ||
      state.non_gaussian_count_ > state.event_count_) {
    return absl::InvalidArgumentError("Privacy state has inconsistent counts");
  }
  size_t pos = kHeaderBytes;
  auto read_fixed = [&](Fixed128& f) -> bool {
    f.lo = GetU64(bytes, pos);
    f.hi = GetU64(bytes, pos + 8);
    pos += kFixedBytes;
    return f.hi < kMaxTotalHi;
  };
  bool ok = read_fixed(state.inverse_variance_sum_);
  for (Fixed128& f : state.rdp_) ok = read_fixed(f) && ok;
  if (with_grid) {
    state.grid_gaussian_count_ = static_cast<int64_t>(GetU64(bytes, pos));
    pos += 8;
    ok = read_fixed(state.grid_inverse_variance_) && ok;
    if (state.grid_gaussian_count_ < 0 ||
        state.grid_gaussian_count_ > state.non_gaussian_count_) {
      return absl::InvalidArgumentError("Privacy state has inconsistent counts");
    }
  }
  if (with_delta) ok = read_fixed(state.approximate_delta_) && ok;
  if (!ok) return absl::InvalidArgumentError("Privacy state value out of range");
  return state;
}

}  // namespace dpcurator::privacy
