#include "core/privacy/event_codec.h"

#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/util/status_macros.h"

namespace dpcurator::privacy {
namespace {

// Shortest text that reads back to the same double.
std::string Num(double value) { return absl::StrFormat("%.17g", value); }

// Splits "a;b;c" at top-level separators (not inside parentheses).
std::vector<absl::string_view> SplitTopLevel(absl::string_view text, char separator) {
  std::vector<absl::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')') --depth;
    if (text[i] == separator && depth == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(text.substr(start));
  return parts;
}

absl::StatusOr<std::vector<double>> ParseNumbers(absl::string_view args, size_t expected) {
  std::vector<double> values;
  for (absl::string_view part : absl::StrSplit(args, ',')) {
    double value;
    if (!absl::SimpleAtod(part, &value)) {
      return absl::DataLossError(absl::StrCat("bad number '", part, "' in ledger event"));
    }
    values.push_back(value);
  }
  if (values.size() != expected) return absl::DataLossError("wrong arity in ledger event");
  return values;
}

}  // namespace

std::string EncodeEvent(const PrivacyEvent& event) {
  return std::visit(
      [](const auto& e) -> std::string {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, GaussianEvent>) {
          return absl::StrCat("gaussian(", Num(e.noise_multiplier), ")");
        } else if constexpr (std::is_same_v<T, DiscreteGaussianEvent>) {
          // Its own name: "gaussian(s)" rows written before the server drew
          // discrete noise keep their continuous meaning (and exact path).
          return absl::StrCat("discrete_gaussian(", Num(e.noise_multiplier), ")");
        } else if constexpr (std::is_same_v<T, GridGaussianEvent>) {
          // The versioned successor of discrete_gaussian (its own privacy
          // profile when alone); discrete_gaussian rows stay RDP-only.
          return absl::StrCat("grid_gaussian(", Num(e.noise_multiplier), ")");
        } else if constexpr (std::is_same_v<T, PoissonSampledGaussianEvent>) {
          return absl::StrCat("poisson(", Num(e.sampling_rate), ",", Num(e.noise_multiplier), ")");
        } else if constexpr (std::is_same_v<T, SampledWithoutReplacementGaussianEvent>) {
          return absl::StrCat("wor(", Num(e.sampling_rate), ",", Num(e.noise_multiplier), ")");
        } else if constexpr (std::is_same_v<T, PoissonSampledDiscreteGaussianEvent>) {
          // Their own names, as for discrete_gaussian: "poisson" and "wor"
          // rows keep their continuous-noise curves.
          return absl::StrCat("discrete_poisson(", Num(e.sampling_rate), ",",
                              Num(e.noise_multiplier), ")");
        } else if constexpr (std::is_same_v<T, SampledWithoutReplacementDiscreteGaussianEvent>) {
          return absl::StrCat("discrete_wor(", Num(e.sampling_rate), ",", Num(e.noise_multiplier),
                              ")");
        } else if constexpr (std::is_same_v<T, LaplaceEvent>) {
          return absl::StrCat("laplace(", Num(e.noise_multiplier), ")");
        } else if constexpr (std::is_same_v<T, RandomizedResponseEvent>) {
          return absl::StrCat("rr(", e.num_categories, ",", Num(e.epsilon), ")");
        } else if constexpr (std::is_same_v<T, ExponentialMechanismEvent>) {
          return absl::StrCat("exponential(", Num(e.epsilon), ")");
        } else if constexpr (std::is_same_v<T, ZcdpEvent>) {
          return absl::StrCat("zcdp(", Num(e.rho), ")");
        } else if constexpr (std::is_same_v<T, ComposedEvent>) {
          std::string out = "compose(";
          for (size_t i = 0; i < e.events.size(); ++i) {
            absl::StrAppend(&out, i ? ";" : "", EncodeEvent(e.events[i]));
          }
          return absl::StrCat(out, ")");
        } else if constexpr (std::is_same_v<T, PartitionedEvent>) {
          // partition(add_remove;a_1;...;a_K) or
          // partition(replace_one;a_1;...;a_K;r_1;...;r_K).
          std::string out = absl::StrCat(
              "partition(",
              e.relation == NeighbouringRelation::kAddRemove ? "add_remove" : "replace_one");
          for (const PrivacyEvent& part : e.add_remove) absl::StrAppend(&out, ";", EncodeEvent(part));
          for (const PrivacyEvent& part : e.replace_one) absl::StrAppend(&out, ";", EncodeEvent(part));
          return absl::StrCat(out, ")");
        } else if constexpr (std::is_same_v<T, ApproximateEvent>) {
          return absl::StrCat("approx(", Num(e.delta), ";", EncodeEvent(*e.event), ")");
        } else {
          static_assert(std::is_same_v<T, SelfComposedEvent>);
          return absl::StrCat("repeat(", e.count, ";", EncodeEvent(*e.event), ")");
        }
      },
      event.variant());
}

absl::StatusOr<PrivacyEvent> DecodeEvent(absl::string_view text) {
  const size_t open = text.find('(');
  if (open == absl::string_view::npos || text.back() != ')') {
    return absl::DataLossError(absl::StrCat("malformed ledger event '", text, "'"));
  }
  const absl::string_view name = text.substr(0, open);
  const absl::string_view args = text.substr(open + 1, text.size() - open - 2);
  if (name == "gaussian") {
    DPC_ASSIGN_OR_RETURN(auto v, ParseNumbers(args, 1));
    return PrivacyEvent::Gaussian(v[0]);
  }
  if (name == "discrete_gaussian") {
    DPC_ASSIGN_OR_RETURN(auto v, ParseNumbers(args, 1));
    return PrivacyEvent::DiscreteGaussian(v[0]);
  }
  if (name == "grid_gaussian") {
    DPC_ASSIGN_OR_RETURN(auto v, ParseNumbers(args, 1));
    return PrivacyEvent::GridGaussian(v[0]);
  }
  if (name == "poisson") {
    DPC_ASSIGN_OR_RETURN(auto v, ParseNumbers(args, 2));
    return PrivacyEvent::PoissonSampledGaussian(v[0], v[1]);
  }
  if (name == "wor") {
    DPC_ASSIGN_OR_RETURN(auto v, ParseNumbers(args, 2));
    return PrivacyEvent::SampledWithoutReplacementGaussian(v[0], v[1]);
  }
  if (name == "discrete_poisson") {
    DPC_ASSIGN_OR_RETURN(auto v, ParseNumbers(args, 2));
    return PrivacyEvent::PoissonSampledDiscreteGaussian(v[0], v[1]);
  }
  if (name == "discrete_wor") {
    DPC_ASSIGN_OR_RETURN(auto v, ParseNumbers(args, 2));
    return PrivacyEvent::SampledWithoutReplacementDiscreteGaussian(v[0], v[1]);
  }
  if (name == "laplace") {
    DPC_ASSIGN_OR_RETURN(auto v, ParseNumbers(args, 1));
    return PrivacyEvent::Laplace(v[0]);
  }
  if (name == "rr") {
    DPC_ASSIGN_OR_RETURN(auto v, ParseNumbers(args, 2));
    return PrivacyEvent::RandomizedResponse(static_cast<int64_t>(v[0]), v[1]);
  }
  if (name == "exponential") {
    DPC_ASSIGN_OR_RETURN(auto v, ParseNumbers(args, 1));
    return PrivacyEvent::ExponentialMechanism(v[0]);
  }
  if (name == "zcdp") {
    DPC_ASSIGN_OR_RETURN(auto v, ParseNumbers(args, 1));
    return PrivacyEvent::Zcdp(v[0]);
  }
  if (name == "compose") {
    std::vector<PrivacyEvent> parts;
    if (!args.empty()) {
      for (absl::string_view part : SplitTopLevel(args, ';')) {
        DPC_ASSIGN_OR_RETURN(auto event, DecodeEvent(part));
        parts.push_back(std::move(event));
      }
    }
    return PrivacyEvent::Compose(std::move(parts));
  }
  if (name == "repeat") {
    auto parts = SplitTopLevel(args, ';');
    int64_t count;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &count)) {
      return absl::DataLossError(absl::StrCat("malformed ledger event '", text, "'"));
    }
    DPC_ASSIGN_OR_RETURN(auto inner, DecodeEvent(parts[1]));
    return PrivacyEvent::SelfCompose(std::move(inner), count);
  }
  if (name == "approx") {
    auto parts = SplitTopLevel(args, ';');
    if (parts.size() != 2) {
      return absl::DataLossError(absl::StrCat("malformed ledger event '", text, "'"));
    }
    DPC_ASSIGN_OR_RETURN(auto delta, ParseNumbers(parts[0], 1));
    DPC_ASSIGN_OR_RETURN(auto inner, DecodeEvent(parts[1]));
    return PrivacyEvent::Approximate(std::move(inner), delta[0]);
  }
  if (name == "partition") {
    std::vector<absl::string_view> fields = SplitTopLevel(args, ';');
    if (fields.size() < 2) {
      return absl::DataLossError(absl::StrCat("malformed ledger event '", text, "'"));
    }
    const absl::string_view relation = fields.front();
    std::vector<PrivacyEvent> parts;
    parts.reserve(fields.size() - 1);
    for (size_t i = 1; i < fields.size(); ++i) {
      DPC_ASSIGN_OR_RETURN(auto part, DecodeEvent(fields[i]));
      parts.push_back(std::move(part));
    }
    if (relation == "add_remove") return PrivacyEvent::PartitionedAddRemove(std::move(parts));
    if (relation == "replace_one" && parts.size() % 2 == 0) {
      const auto half = static_cast<std::ptrdiff_t>(parts.size() / 2);
      std::vector<PrivacyEvent> add_remove(parts.begin(), parts.begin() + half);
      std::vector<PrivacyEvent> replace_one(parts.begin() + half, parts.end());
      return PrivacyEvent::PartitionedReplaceOne(std::move(add_remove), std::move(replace_one));
    }
    return absl::DataLossError(absl::StrCat("malformed ledger event '", text, "'"));
  }
  return absl::DataLossError(absl::StrCat("unknown ledger event '", name, "'"));
}

}  // namespace dpcurator::privacy
