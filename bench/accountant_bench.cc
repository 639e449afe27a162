// Timings of the privacy accountant: RDP curves on the full default grid and
// the ledger's admission check (state copy + Add + Epsilon), which must not
// depend on how many events the dataset already has.
//
// Usage: accountant_bench   (prints an aligned table; times are per call)

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/privacy/accounting.h"
#include "core/privacy/calibration.h"
#include "core/privacy/rdp.h"

namespace {

using dpcurator::privacy::AccountantState;
using dpcurator::privacy::ComputeRdp;
using dpcurator::privacy::DefaultRdpOrders;
using dpcurator::privacy::EventCharge;
using dpcurator::privacy::NeighbouringRelation;
using dpcurator::privacy::PrivacyEvent;

// Runs fn until at least min_seconds have passed; returns seconds per call.
double TimePerCall(const std::function<void()>& fn, double min_seconds = 0.3) {
  using Clock = std::chrono::steady_clock;
  fn();  // warm-up
  int64_t calls = 0;
  const auto start = Clock::now();
  double elapsed = 0.0;
  int64_t batch = 1;
  while (elapsed < min_seconds) {
    for (int64_t i = 0; i < batch; ++i) fn();
    calls += batch;
    batch *= 2;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return elapsed / static_cast<double>(calls);
}

void Row(const std::string& name, double seconds) {
  const char* unit = "ns";
  double value = seconds * 1e9;
  if (value >= 1e6) {
    value /= 1e6;
    unit = "ms";
  } else if (value >= 1e3) {
    value /= 1e3;
    unit = "us";
  }
  std::printf("%-58s %10.2f %s\n", name.c_str(), value, unit);
}

}  // namespace

int main() {
  std::printf("%-58s %13s\n", "operation", "time/call");
  std::printf("%s\n", std::string(72, '-').c_str());

  const PrivacyEvent poisson = PrivacyEvent::PoissonSampledGaussian(0.01, 1.1).value();
  const PrivacyEvent wor =
      PrivacyEvent::SampledWithoutReplacementGaussian(0.01, 1.1).value();
  const PrivacyEvent gaussian = PrivacyEvent::Gaussian(3.0).value();
  volatile double sink = 0.0;

  Row("RDP, Poisson-sampled Gaussian (q=0.01,s=1.1), 156 orders", TimePerCall([&] {
        sink = sink + ComputeRdp(poisson, DefaultRdpOrders()).value().back();
      }));
  Row("RDP, sampled w/o replacement Gaussian, 156 orders", TimePerCall([&] {
        sink = sink + ComputeRdp(wor, DefaultRdpOrders()).value().back();
      }));
  Row("RDP, plain Gaussian, 156 orders", TimePerCall([&] {
        sink = sink + ComputeRdp(gaussian, DefaultRdpOrders()).value().back();
      }));

  const PrivacyEvent session = PrivacyEvent::SelfCompose(poisson, 10000).value();
  const EventCharge charge = EventCharge::Of(session).value();
  for (int64_t history : {0, 1000, 100000}) {
    AccountantState state(NeighbouringRelation::kAddRemove);
    const EventCharge small =
        EventCharge::Of(PrivacyEvent::PoissonSampledGaussian(0.001, 5.0).value()).value();
    for (int64_t i = 0; i < history; ++i) (void)state.Add(small);
    Row("admission (copy+Add+Epsilon), history " + std::to_string(history) + " events",
        TimePerCall([&] {
          AccountantState next = state;
          (void)next.Add(charge);
          sink = sink + next.Epsilon(1e-5).value().epsilon;
        }));
  }
  {
    AccountantState state(NeighbouringRelation::kAddRemove);
    (void)state.Add(gaussian);
    const EventCharge g = EventCharge::Of(gaussian).value();
    Row("admission, plain Gaussians (RDP + exact analytic)", TimePerCall([&] {
          sink = sink + state.EpsilonIfAdded(g, 1e-5).value().epsilon;
        }));
  }
  Row("EventCharge::Of(Poisson x 10000) (curve + quantise)", TimePerCall([&] {
        sink = sink + static_cast<double>(EventCharge::Of(session).ok());
      }));
  {
    AccountantState state(NeighbouringRelation::kAddRemove);
    (void)state.Add(session);
    const std::string bytes = state.Serialize();
    Row("Serialize (" + std::to_string(bytes.size()) + " bytes)", TimePerCall([&] {
          sink = sink + static_cast<double>(state.Serialize().size());
        }));
    Row("Deserialize", TimePerCall([&] {
          sink = sink + static_cast<double>(AccountantState::Deserialize(bytes).ok());
        }));
  }
  Row("calibrate s: 1 Gaussian, eps=1, delta=1e-5", TimePerCall([&] {
        sink = sink + dpcurator::privacy::CalibrateGaussianNoiseMultiplier(1, 1.0, 1e-5).value();
      }));
  Row("calibrate s: Poisson q=0.01, T=10000, eps=5", TimePerCall([&] {
        sink = sink + dpcurator::privacy::CalibrateSampledGaussianNoiseMultiplier(
                          dpcurator::privacy::SamplingScheme::kPoisson, 0.01, 10000,
                          5.0, 1e-5)
                          .value();
      }));
  return 0;
}
