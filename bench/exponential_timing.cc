// The exponential mechanism's time per selection against its scores (issue
// 37 item 4): median, p10 and p90 of ExponentialMechanismSelect on the
// CSPRNG for (a) flat scores, (b) one score far ahead (every other
// candidate 50 nats behind), (c) random scores (gaps uniform in [0, 20]
// nats), and each median's ratio to (a). The cases are measured round robin
// so that machine noise falls on each alike. A timing probe, not a test:
// its verdict is read by people (docs/benchmarks.md).
//
// Usage: exponential_timing [--candidates K] [--selections N] [--epsilon E]

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/privacy/exponential_mechanism.h"
#include "core/privacy/noise_source.h"

namespace {

struct Options {
  int candidates = 4000;
  int selections = 2000;
  double epsilon = 0.1;
};

bool Parse(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (flag == "--candidates") {
      options->candidates = std::atoi(value);
    } else if (flag == "--selections") {
      options->selections = std::atoi(value);
    } else if (flag == "--epsilon") {
      options->epsilon = std::atof(value);
    } else {
      return false;
    }
  }
  return options->candidates >= 1 && options->selections >= 1 && options->epsilon > 0.0;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t k = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!Parse(argc, argv, &options)) {
    std::fprintf(stderr,
                 "usage: exponential_timing [--candidates K] [--selections N] [--epsilon E]\n");
    return 2;
  }
  auto noise = dpcurator::privacy::SecureNoiseSource::Create();
  if (!noise.ok()) {
    std::fprintf(stderr, "%s\n", noise.status().ToString().c_str());
    return 1;
  }
  const int k = options.candidates;
  const double eps = options.epsilon;
  // Score units of one nat: gamma = eps q / 2 for sensitivity 1.
  const double nat = 2.0 / eps;
  struct Case {
    const char* name;
    std::vector<double> q;
    std::vector<double> micros;
  };
  std::vector<Case> cases(3);
  cases[0].name = "(a) flat";
  cases[0].q.assign(k, 0.0);
  cases[1].name = "(b) one far ahead";
  cases[1].q.assign(k, 0.0);
  cases[1].q[k / 3] = 50.0 * nat;
  cases[2].name = "(c) random";
  cases[2].q.resize(k);
  std::mt19937_64 rng(37);
  std::uniform_real_distribution<double> gap(0.0, 20.0 * nat);
  for (double& v : cases[2].q) v = gap(rng);
  int64_t checksum = 0;
  // One untimed round to fault in the pages and warm the caches.
  for (Case& c : cases) {
    checksum += dpcurator::privacy::ExponentialMechanismSelect(c.q, eps, 1.0, noise->get()).value();
  }
  for (int s = 0; s < options.selections; ++s) {
    for (Case& c : cases) {
      const auto start = std::chrono::steady_clock::now();
      const int pick =
          dpcurator::privacy::ExponentialMechanismSelect(c.q, eps, 1.0, noise->get()).value();
      const auto stop = std::chrono::steady_clock::now();
      checksum += pick;
      c.micros.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
    }
  }
  std::printf("exponential mechanism, time per selection (SecureNoiseSource)\n");
  std::printf("  K = %d candidates, eps = %g, sensitivity 1, %d selections per case, round robin\n",
              k, eps, options.selections);
  std::printf("  %-20s %12s %12s %12s %14s\n", "scores", "p10 us", "median us", "p90 us",
              "median / (a)");
  const double base = Quantile(cases[0].micros, 0.5);
  for (const Case& c : cases) {
    const double median = Quantile(c.micros, 0.5);
    std::printf("  %-20s %12.1f %12.1f %12.1f %13.2fx\n", c.name, Quantile(c.micros, 0.1), median,
                Quantile(c.micros, 0.9), median / base);
  }
  std::printf("  (checksum %lld)\n", static_cast<long long>(checksum));
  return 0;
}
