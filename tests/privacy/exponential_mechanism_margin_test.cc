// The exponential race's first-pass margin (core/privacy/exponential_mechanism.h,
// internal::FirstPassKey; docs/privacy.md 2.11 step 4): the interval it
// returns must hold the true key gamma + log E for every uniform whose first
// 64 bits are the word, i.e. for X anywhere in [b, b + 1] 2^-64. The true key
// is computed in __float128 (113-bit significands; its own error, near
// 2^-110, is far below the margins of 2^-46 and up) at both ends of X's
// interval (the key is monotone in X). Words of every shape: uniform, with
// many leading zeros or ones (tiny X on either branch), and the smallest
// b that the first pass still bounds. It fails if the margin's rounding
// term is 2^-10 smaller, if its quantisation term has slope 0.5 instead of
// 1.5, or if it forgets the 1 / b of X's interval.

#include <quadmath.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/privacy/discrete_noise.h"
#include "core/privacy/exponential_mechanism.h"
#include "gtest/gtest.h"

namespace dpcurator::privacy {
namespace {

using Quad = __float128;

Quad KeyAt(Quad x, bool upper, Quad gamma) {
  const Quad e = upper ? -logq(x) : -log1pq(-x);
  return gamma + logq(e);
}

TEST(ExponentialRaceMarginTest, FirstPassIntervalsHoldTheKey) {
  // gamma per grid unit, eps_num / (2^31 (S + 1)), for S = 2^20 + 1 and
  // eps_num from 1 (eps = 2^-30) to 10^6 2^30, and S = 2^21.
  const uint128 den = uint128{(uint64_t{1} << 20) + 2} << 31;
  const uint128 den_max = uint128{(uint64_t{1} << 21) + 1} << 31;
  struct Plan {
    uint64_t eps_num;
    uint128 den;
  };
  const std::vector<Plan> plans = {{1, den},
                                   {uint64_t{1} << 30, den},
                                   {uint64_t{81920000}, den},
                                   {uint64_t{1000000} << 30, den},
                                   {uint64_t{3} << 29, den_max}};
  std::mt19937_64 rng(3737);
  int64_t checked = 0, bounded = 0;
  for (const Plan& plan : plans) {
    const double per_unit = static_cast<double>(plan.eps_num) / static_cast<double>(plan.den);
    // The gap at which gamma reaches 2048.5 (the gap clamp's bound).
    const uint64_t max_gap = static_cast<uint64_t>(
        std::min(4097.0 / per_unit / 2.0, static_cast<double>(uint64_t{1} << 62)));
    for (int t = 0; t < 120000; ++t) {
      uint64_t x = rng();
      switch (t % 6) {
        case 1: x >>= rng() % 64; break;                    // tiny X, V < 1/2
        case 2: x = ~(x >> (rng() % 64)); break;            // tiny X, V >= 1/2
        case 3: x = 256 + rng() % 1024; break;              // smallest bounded b
        case 4: x = ~(256 + rng() % 1024); break;
        default: break;
      }
      const uint64_t gap = t % 3 == 0 ? 0 : (t % 3 == 1 ? rng() % 64 : rng() % (max_gap + 1));
      const internal::KeyBounds bounds = internal::FirstPassKey(x, gap, per_unit);
      const bool upper = (x >> 63) != 0;
      const uint64_t b = upper ? ~x : x;
      ++checked;
      if (!std::isfinite(bounds.lo)) {
        // Only words that fix X to less than 2^-8 are left unbounded.
        EXPECT_LT(b, uint64_t{256});
        continue;
      }
      ++bounded;
      const Quad gamma =
          static_cast<Quad>(uint128{gap} * plan.eps_num) / static_cast<Quad>(plan.den);
      const Quad at_lo = KeyAt(ldexpq(static_cast<Quad>(b), -64), upper, gamma);
      const Quad at_hi = KeyAt(ldexpq(static_cast<Quad>(b) + 1, -64), upper, gamma);
      const Quad lo = at_lo < at_hi ? at_lo : at_hi;
      const Quad hi = at_lo < at_hi ? at_hi : at_lo;
      ASSERT_TRUE(static_cast<Quad>(bounds.lo) <= lo && hi <= static_cast<Quad>(bounds.hi))
          << "word " << std::hex << x << std::dec << " gap " << gap << " eps_num " << plan.eps_num
          << ": key in [" << static_cast<double>(lo) << ", " << static_cast<double>(hi)
          << "], bounds [" << bounds.lo << ", " << bounds.hi << "]";
    }
  }
  EXPECT_EQ(checked, 600000);
  EXPECT_GT(bounded, 550000);
}

}  // namespace
}  // namespace dpcurator::privacy
