// `dpcurator privacy epsilon|calibrate|delta`: the offline accountant, the
// same code the server's ledger runs.
#include <cmath>
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "core/privacy/analytic_gaussian.h"
#include "core/privacy/calibration.h"
#include "core/privacy/conversion.h"
#include "core/privacy/events.h"
#include "core/privacy/grid_gaussian.h"
#include "core/privacy/rdp.h"
#include "core/privacy/relation.h"
#include "core/privacy/sampled_gaussian.h"
#include "core/util/status_macros.h"

namespace dpcurator::client {
namespace {

using privacy::PrivacyEvent;

std::vector<OptionSpec> MechanismOptions() {
  return {
      {"mechanism", "gaussian", "gaussian | laplace | randomized-response"},
      {"noise", "discrete",
       "discrete (grid noise, what the server draws: one plain Gaussian gets the discrete "
       "Gaussian's own profile, anything more RDP) | continuous (plain Gaussians also get the "
       "exact analytic Gaussian bound)"},
      {"noise-multiplier", "", "Gaussian: noise std / L2 sensitivity; Laplace: scale / L1 sensitivity"},
      {"sampling-rate", "", "per-step sampling rate q in [0,1] (Gaussian; omit for no subsampling)"},
      {"steps", "1", "number of repetitions T"},
      {"count", "1", "plain Gaussians composed per step (e.g. DP-MERF's C+1)"},
      {"relation", "add-remove",
       "add-remove (Poisson sampling) | replace-one (sampling without replacement)"},
      {"categories", "", "randomized response: number of categories k"},
      {"rr-epsilon", "", "randomized response: its local epsilon"},
      {"json", "", "print JSON", true},
  };
}

absl::StatusOr<privacy::NeighbouringRelation> RelationArg(const ParsedArgs& args) {
  auto relation = privacy::ParseRelation(args.Get("relation"));
  if (!relation.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--relation must be add-remove or replace-one, got '", args.Get("relation"), "'"));
  }
  return *relation;
}

// --noise: whether Gaussians are the server's discrete (grid) noise (one
// release alone gets the discrete Gaussian's profile, docs/privacy.md 4.6;
// anything more RDP) or continuous noise, whose plain Gaussians also have the
// exact analytic bound (docs/privacy.md 3.2, 4.2).
absl::StatusOr<bool> DiscreteNoiseArg(const ParsedArgs& args) {
  const std::string noise = args.Get("noise");
  if (noise == "discrete") return true;
  if (noise == "continuous") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("--noise must be discrete or continuous, got '", noise, "'"));
}

// The event described by the flags, with noise multiplier `s` (for calibrate);
// plain Gaussians are GridGaussian events (what the server charges its
// releases as) when `discrete`.
absl::StatusOr<PrivacyEvent> EventFromArgs(const ParsedArgs& args, std::optional<double> s,
                                           bool discrete) {
  DPC_ASSIGN_OR_RETURN(auto relation, RelationArg(args));
  DPC_ASSIGN_OR_RETURN(int64_t steps, args.GetInt("steps"));
  DPC_ASSIGN_OR_RETURN(int64_t count, args.GetInt("count"));
  if (steps < 1 || count < 1) {
    return absl::InvalidArgumentError("--steps and --count must be at least 1");
  }
  const std::string mechanism = args.Get("mechanism");
  std::optional<PrivacyEvent> step_event;
  if (mechanism == "gaussian") {
    double noise = 0;
    if (s.has_value()) {
      noise = *s;
    } else {
      if (!args.Has("noise-multiplier")) {
        return absl::InvalidArgumentError("--noise-multiplier is required");
      }
      DPC_ASSIGN_OR_RETURN(noise, args.GetDouble("noise-multiplier"));
    }
    if (args.Has("sampling-rate")) {
      DPC_ASSIGN_OR_RETURN(double q, args.GetDouble("sampling-rate"));
      // Discrete noise: the bounds proven for the grid's discrete Gaussian
      // (docs/privacy.md 4.7), what the server charges its session steps.
      DPC_ASSIGN_OR_RETURN(step_event, privacy::SampledGaussianEvent(
                                           privacy::SamplingSchemeFor(relation), q, noise,
                                           discrete ? privacy::SampledNoise::kDiscrete
                                                    : privacy::SampledNoise::kContinuous));
    } else if (discrete) {
      DPC_ASSIGN_OR_RETURN(step_event, PrivacyEvent::GridGaussian(noise));
    } else {
      DPC_ASSIGN_OR_RETURN(step_event, PrivacyEvent::Gaussian(noise));
    }
  } else if (mechanism == "laplace") {
    double noise = 0;
    if (s.has_value()) {
      noise = *s;
    } else {
      DPC_ASSIGN_OR_RETURN(noise, args.GetDouble("noise-multiplier"));
    }
    DPC_ASSIGN_OR_RETURN(step_event, PrivacyEvent::Laplace(noise));
  } else if (mechanism == "randomized-response") {
    DPC_ASSIGN_OR_RETURN(int64_t k, args.GetInt("categories"));
    DPC_ASSIGN_OR_RETURN(double rr_epsilon, args.GetDouble("rr-epsilon"));
    DPC_ASSIGN_OR_RETURN(step_event, PrivacyEvent::RandomizedResponse(k, rr_epsilon));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mechanism must be gaussian, laplace or randomized-response, got '", mechanism, "'"));
  }
  if (count > 1) {
    DPC_ASSIGN_OR_RETURN(step_event, PrivacyEvent::SelfCompose(*step_event, count));
  }
  PrivacyEvent event = *step_event;
  if (steps > 1) {
    DPC_ASSIGN_OR_RETURN(event, PrivacyEvent::SelfCompose(event, steps));
  }
  DPC_RETURN_IF_ERROR(privacy::CheckRelation(event, relation));
  return event;
}

// For --noise discrete: the exact analytic bound the same multipliers would
// have with continuous noise. Shown for comparison only, never charged: it is
// not proven for the discrete noise the server draws (docs/privacy.md 4.2).
std::optional<double> ContinuousExactEpsilon(const ParsedArgs& args, std::optional<double> s,
                                             double delta) {
  auto twin = EventFromArgs(args, s, /*discrete=*/false);
  if (!twin.ok()) return std::nullopt;
  auto report = privacy::ComputeEpsilonReport(*twin, delta);
  if (!report.ok()) return std::nullopt;
  return report->epsilon_exact;
}

nlohmann::json ReportJson(const privacy::EpsilonReport& report,
                          const std::optional<double>& continuous_exact) {
  nlohmann::json out;
  out["epsilon"] = report.epsilon;
  out["epsilon_rdp"] = report.epsilon_rdp;
  if (report.epsilon_exact.has_value()) out["epsilon_exact"] = *report.epsilon_exact;
  if (report.epsilon_grid_exact.has_value()) {
    out["epsilon_discrete_exact"] = *report.epsilon_grid_exact;
  }
  if (continuous_exact.has_value()) out["epsilon_exact_if_continuous"] = *continuous_exact;
  out["optimal_order"] = report.optimal_order;
  out["order_at_grid_edge"] = report.order_at_grid_edge;
  return out;
}

void PrintReport(const PrivacyEvent& event, double delta, const privacy::EpsilonReport& report,
                 std::optional<double> noise_multiplier,
                 const std::optional<double>& continuous_exact) {
  std::printf("event            %s\n", privacy::Describe(event).c_str());
  if (noise_multiplier.has_value()) std::printf("noise multiplier %.6f\n", *noise_multiplier);
  std::printf("delta            %g\n", delta);
  std::printf("epsilon          %.6f   (what the ledger charges: the smallest valid bound)\n",
              report.epsilon);
  std::printf("  RDP conversion %.6f   at order %g\n", report.epsilon_rdp, report.optimal_order);
  if (report.epsilon_exact.has_value()) {
    std::printf("  exact Gaussian %.6f   (analytic Gaussian, Balle & Wang 2018; continuous "
                "noise only)\n",
                *report.epsilon_exact);
  }
  if (report.epsilon_grid_exact.has_value()) {
    std::printf("  exact discrete %.6f   (the grid's discrete Gaussian, one release alone; "
                "docs/privacy.md 4.6)\n",
                *report.epsilon_grid_exact);
  }
  if (continuous_exact.has_value()) {
    std::printf("  if continuous  %.6f   (analytic Gaussian for continuous noise: not a bound "
                "for\n                            the discrete noise the server draws; not "
                "charged)\n",
                *continuous_exact);
  }
  if (report.order_at_grid_edge) {
    std::printf("warning: the optimal order is at the edge of the order grid; the bound is "
                "valid but may be loose\n");
  }
}

absl::Status RunEpsilon(const ParsedArgs& args) {
  auto discrete = DiscreteNoiseArg(args);
  if (!discrete.ok()) return discrete.status();
  auto event = EventFromArgs(args, std::nullopt, *discrete);
  if (!event.ok()) return event.status();
  auto delta = args.GetDouble("delta");
  if (!delta.ok()) return delta.status();
  auto report = privacy::ComputeEpsilonReport(*event, *delta);
  if (!report.ok()) return report.status();
  std::optional<double> continuous_exact;
  if (*discrete) continuous_exact = ContinuousExactEpsilon(args, std::nullopt, *delta);
  if (args.Flag("json")) {
    nlohmann::json out = ReportJson(*report, continuous_exact);
    out["delta"] = *delta;
    out["event"] = privacy::Describe(*event);
    if (args.Has("noise-multiplier")) out["noise_multiplier"] = *args.GetDouble("noise-multiplier");
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    PrintReport(*event, *delta, *report, std::nullopt, continuous_exact);
  }
  return absl::OkStatus();
}

absl::Status RunCalibrate(const ParsedArgs& args) {
  auto epsilon = args.GetDouble("epsilon");
  auto delta = args.GetDouble("delta");
  if (!epsilon.ok()) return epsilon.status();
  if (!delta.ok()) return delta.status();
  auto relation = RelationArg(args);
  if (!relation.ok()) return relation.status();
  auto discrete = DiscreteNoiseArg(args);
  if (!discrete.ok()) return discrete.status();
  auto steps = args.GetInt("steps");
  auto count = args.GetInt("count");
  if (!steps.ok() || !count.ok()) return absl::InvalidArgumentError("bad --steps/--count");
  if (args.Get("mechanism") != "gaussian") {
    return absl::InvalidArgumentError(
        "calibrate supports --mechanism gaussian (Laplace: b = sensitivity / epsilon)");
  }
  const std::string solve = args.Get("solve");
  if (solve == "steps" || solve == "sampling-rate") {
    // The other unknowns: the largest steps or sampling rate within target.
    auto s = args.GetDouble("noise-multiplier");
    if (!s.ok()) return s.status();
    const privacy::SamplingScheme scheme = privacy::SamplingSchemeFor(*relation);
    privacy::CalibrationOptions options;
    options.sampled_noise =
        *discrete ? privacy::SampledNoise::kDiscrete : privacy::SampledNoise::kContinuous;
    nlohmann::json out;
    if (solve == "steps") {
      auto q = args.GetDouble("sampling-rate");
      if (!q.ok()) return q.status();
      auto max_steps = privacy::MaxSteps(scheme, *q, *s, *epsilon, *delta, options);
      if (!max_steps.ok()) return max_steps.status();
      out["steps"] = *max_steps;
      out["sampling_rate"] = *q;
    } else {
      auto max_rate = privacy::MaxSamplingRate(scheme, *s, *steps, *epsilon, *delta, options);
      if (!max_rate.ok()) return max_rate.status();
      out["sampling_rate"] = *max_rate;
      out["steps"] = *steps;
    }
    out["noise_multiplier"] = *s;
    out["target_epsilon"] = *epsilon;
    out["delta"] = *delta;
    if (args.Flag("json")) {
      std::printf("%s\n", out.dump(2).c_str());
    } else if (solve == "steps") {
      std::printf("at most %lld steps at q=%g, s=%g stay within epsilon %g (delta %g)\n",
                  static_cast<long long>(out["steps"].get<int64_t>()),
                  out["sampling_rate"].get<double>(), *s, *epsilon, *delta);
    } else {
      std::printf("sampling rate at most %.6g for %lld steps at s=%g within epsilon %g (delta %g)\n",
                  out["sampling_rate"].get<double>(), static_cast<long long>(*steps), *s,
                  *epsilon, *delta);
    }
    return absl::OkStatus();
  }
  if (solve != "noise-multiplier") {
    return absl::InvalidArgumentError(
        "--solve must be noise-multiplier, steps or sampling-rate");
  }
  absl::StatusOr<double> noise_multiplier;
  // For --noise discrete, the continuous calibration too, for comparison.
  std::optional<double> continuous_multiplier;
  if (args.Has("sampling-rate")) {
    auto q = args.GetDouble("sampling-rate");
    if (!q.ok()) return q.status();
    if (*count != 1) {
      return absl::InvalidArgumentError("--count applies to plain Gaussians only");
    }
    // Subsampled Gaussians are RDP-only for either kind of noise; discrete
    // noise is judged by its own (discrete_poisson / discrete_wor) curves.
    privacy::CalibrationOptions options;
    options.sampled_noise =
        *discrete ? privacy::SampledNoise::kDiscrete : privacy::SampledNoise::kContinuous;
    noise_multiplier = privacy::CalibrateSampledGaussianNoiseMultiplier(
        privacy::SamplingSchemeFor(*relation), *q, *steps, *epsilon, *delta, options);
  } else if (*discrete) {
    noise_multiplier =
        privacy::CalibrateGridGaussianNoiseMultiplier(*steps * *count, *epsilon, *delta);
    auto continuous =
        privacy::CalibrateGaussianNoiseMultiplier(*steps * *count, *epsilon, *delta);
    if (continuous.ok()) continuous_multiplier = *continuous;
  } else {
    noise_multiplier =
        privacy::CalibrateGaussianNoiseMultiplier(*steps * *count, *epsilon, *delta);
  }
  if (!noise_multiplier.ok()) return noise_multiplier.status();
  auto event = EventFromArgs(args, *noise_multiplier, *discrete);
  if (!event.ok()) return event.status();
  auto report = privacy::ComputeEpsilonReport(*event, *delta);
  if (!report.ok()) return report.status();
  std::optional<double> continuous_exact;
  if (*discrete) continuous_exact = ContinuousExactEpsilon(args, *noise_multiplier, *delta);
  if (args.Flag("json")) {
    nlohmann::json out = ReportJson(*report, continuous_exact);
    out["noise_multiplier"] = *noise_multiplier;
    if (continuous_multiplier.has_value()) {
      out["noise_multiplier_if_continuous"] = *continuous_multiplier;
    }
    out["target_epsilon"] = *epsilon;
    out["delta"] = *delta;
    out["event"] = privacy::Describe(*event);
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("target epsilon   %g (calibration never overshoots)\n", *epsilon);
    PrintReport(*event, *delta, *report, *noise_multiplier, continuous_exact);
    if (continuous_multiplier.has_value()) {
      std::printf("continuous noise would need s = %.6f (analytic Gaussian); the server draws\n"
                  "discrete noise and calibrates as above\n",
                  *continuous_multiplier);
    }
  }
  return absl::OkStatus();
}

absl::Status RunDelta(const ParsedArgs& args) {
  auto discrete = DiscreteNoiseArg(args);
  if (!discrete.ok()) return discrete.status();
  auto event = EventFromArgs(args, std::nullopt, *discrete);
  if (!event.ok()) return event.status();
  auto epsilon = args.GetDouble("epsilon");
  if (!epsilon.ok()) return epsilon.status();
  auto rdp = privacy::ComputeRdp(*event, privacy::DefaultRdpOrders());
  if (!rdp.ok()) return rdp.status();
  auto delta = privacy::RdpToDelta(privacy::DefaultRdpOrders(), *rdp, *epsilon);
  if (!delta.ok()) return delta.status();
  std::optional<double> exact;
  // Continuous plain Gaussians only (IsPlainGaussian is false for discrete).
  if (auto inverse_variance = privacy::PlainGaussianInverseVarianceSum(*event)) {
    auto d = privacy::AnalyticGaussianDelta(*epsilon, std::sqrt(*inverse_variance));
    if (d.ok()) exact = *d;
  }
  // One grid Gaussian release alone: the discrete Gaussian's profile.
  if (auto grid = privacy::SingleGridGaussianInverseVariance(*event)) {
    auto d = privacy::GridGaussianLogDelta(*epsilon, std::sqrt(*grid));
    if (d.ok()) exact = std::exp(*d);
  }
  const double best = exact.has_value() ? std::min(*exact, delta->delta) : delta->delta;
  if (args.Flag("json")) {
    nlohmann::json out;
    out["delta"] = best;
    out["delta_rdp"] = delta->delta;
    if (exact.has_value()) out["delta_exact"] = *exact;
    out["optimal_order"] = delta->optimal_order;
    out["epsilon"] = *epsilon;
    out["event"] = privacy::Describe(*event);
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("event            %s\nepsilon          %g\n", privacy::Describe(*event).c_str(),
                *epsilon);
    std::printf("delta            %.6g\n  RDP conversion %.6g at order %g\n", best, delta->delta,
                delta->optimal_order);
    if (exact.has_value()) std::printf("  exact          %.6g\n", *exact);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> PrivacyCommands() {
  std::vector<Command> commands;
  {
    Command c;
    c.name = "privacy epsilon";
    c.summary = "epsilon of a mechanism at a delta (offline accountant)";
    c.description =
        "Composes the mechanism's RDP curve on the ledger's order grid and converts it to\n"
        "(epsilon, delta) by the improved RDP conversion; 'epsilon' is what the ledger charges.\n"
        "The server draws discrete (grid) Gaussian noise: that is --noise discrete, the default.\n"
        "One release alone is charged the smaller of the RDP conversion and the discrete\n"
        "Gaussian's own privacy profile ('exact discrete', docs/privacy.md 4.6); several, or\n"
        "sampled steps, by RDP. --noise continuous is a continuous Gaussian, which also has the\n"
        "exact analytic bound (Balle & Wang 2018); with discrete noise that bound is shown for\n"
        "comparison only ('if continuous'), never charged.\n\n"
        "  dpcurator privacy epsilon --noise-multiplier 1 --delta 1e-5\n"
        "  dpcurator privacy epsilon --noise-multiplier 1 --delta 1e-5 --noise continuous\n"
        "  dpcurator privacy epsilon --noise-multiplier 1.1 --sampling-rate 0.01 --steps 10000 "
        "--delta 1e-5";
    c.options = MechanismOptions();
    c.options.push_back({"delta", "", "target delta", false, true});
    c.run = RunEpsilon;
    commands.push_back(c);
  }
  {
    Command c;
    c.name = "privacy calibrate";
    c.summary = "smallest noise multiplier for a target (epsilon, delta)";
    c.description =
        "Finds the noise multiplier conservatively: the returned value always gives epsilon\n"
        "<= target under the ledger's accountant. By default (--noise discrete) plain Gaussians\n"
        "are calibrated as the server calibrates its releases: one release by the discrete\n"
        "Gaussian's privacy profile (s = 3.7443 at epsilon 1, delta 1e-5; 4.0454 by RDP alone),\n"
        "several by RDP; the continuous analytic value (3.7306) is printed for comparison.\n"
        "--noise continuous calibrates a continuous Gaussian.\n\n"
        "  dpcurator privacy calibrate --epsilon 1 --delta 1e-5\n"
        "  dpcurator privacy calibrate --solve steps --epsilon 3 --delta 1e-5 "
        "--noise-multiplier 1.1 --sampling-rate 0.01";
    c.options = MechanismOptions();
    c.options.push_back({"epsilon", "", "target epsilon", false, true});
    c.options.push_back({"delta", "", "target delta", false, true});
    c.options.push_back({"solve", "noise-multiplier",
                         "what to find: noise-multiplier | steps (largest T; needs "
                         "--noise-multiplier, --sampling-rate) | sampling-rate (largest q; needs "
                         "--noise-multiplier, --steps)"});
    c.run = RunCalibrate;
    commands.push_back(c);
  }
  {
    Command c;
    c.name = "privacy delta";
    c.summary = "delta of a mechanism at an epsilon";
    c.description = "The smallest delta the accountant can certify at the given epsilon.";
    c.options = MechanismOptions();
    c.options.push_back({"epsilon", "", "epsilon", false, true});
    c.run = RunDelta;
    commands.push_back(c);
  }
  return commands;
}

}  // namespace dpcurator::client
