#include "core/release/bin_fit.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpcurator::release {

namespace {

// x rounded to 2 significant digits: to nearest (direction 0), down (-1) or
// up (+1). Scaling by a power of ten dividing rather than multiplying by its
// reciprocal keeps 0.2 printing as 0.2.
double RoundTwoDigits(double x, int direction) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int exponent = static_cast<int>(std::floor(std::log10(std::fabs(x)))) - 1;
  const double scale = std::pow(10.0, std::abs(exponent));
  const auto round = [direction](double v) {
    return direction < 0 ? std::floor(v) : direction > 0 ? std::ceil(v) : std::round(v);
  };
  return exponent >= 0 ? round(x / scale) * scale : round(x * scale) / scale;
}

}  // namespace

std::vector<double> FitGridEdges(const data::Column& column) {
  std::vector<double> edges;
  const double lower = column.lower;
  const double upper = column.upper;
  if (!(lower < upper) || !std::isfinite(lower) || !std::isfinite(upper)) return edges;
  // Divided first: upper - lower overflows for bounds near the largest double.
  const double width = upper / kFitGridEqualCells - lower / kFitGridEqualCells;
  for (int i = 1; i < kFitGridEqualCells; ++i) edges.push_back(lower + i * width);
  const double magnitude = std::max(std::fabs(lower), std::fabs(upper));
  for (int j = 0; j < kFitGridLogEdges; ++j) {
    const double g = magnitude * std::pow(10.0, -kFitGridDecades * (1.0 - static_cast<double>(j) /
                                                                             kFitGridLogEdges));
    edges.push_back(g);
    edges.push_back(-g);
  }
  edges.push_back(0.0);
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  edges.erase(std::remove_if(edges.begin(), edges.end(),
                             [&](double e) { return !(e > lower && e < upper); }),
              edges.end());
  return edges;
}

absl::StatusOr<data::Schema> FitGridSchema(const data::Schema& schema,
                                           const std::vector<int>& columns) {
  std::vector<bool> fitted(schema.num_columns(), false);
  for (int c : columns) {
    if (c < 0 || c >= schema.num_columns() ||
        schema.column(c).type != data::ColumnType::kNumeric) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bins can be fitted for numeric columns only; column ",
          c >= 0 && c < schema.num_columns() ? absl::StrCat("'", schema.column(c).name, "'")
                                             : absl::StrCat(c),
          " is not one"));
    }
    fitted[c] = true;
  }
  data::Schema::Builder builder;
  for (int c = 0; c < schema.num_columns(); ++c) {
    const data::Column& column = schema.column(c);
    switch (column.type) {
      case data::ColumnType::kNumeric:
        builder.AddNumeric(column.name, column.lower, column.upper, column.integer);
        if (!column.atoms.empty()) builder.SetAtoms(column.name, column.atoms);
        if (fitted[c]) {
          builder.SetBins(column.name, FitGridEdges(column));
        } else if (!column.bins.empty()) {
          builder.SetBins(column.name, column.bins);
        }
        break;
      case data::ColumnType::kCategorical:
        builder.AddCategorical(column.name, column.categories, column.nullable);
        for (const auto& [token, category] : column.aliases) {
          builder.AddAlias(column.name, token, category);
        }
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("bins are fitted on tables; column '", column.name, "' is an image"));
    }
  }
  if (schema.label_index().has_value()) {
    builder.SetLabel(schema.column(*schema.label_index()).name);
  }
  builder.SetMissingTokens(schema.missing_tokens());
  return builder.Build();
}

FittedBins FitBinsFromNoisyCounts(const data::Column& grid_column,
                                  const Eigen::VectorXd& noisy_counts, double noise_std,
                                  int bins) {
  FittedBins fitted;
  fitted.lower = grid_column.lower;
  fitted.upper = grid_column.upper;
  std::vector<double> edges = {grid_column.lower};
  edges.insert(edges.end(), grid_column.bins.begin(), grid_column.bins.end());
  edges.push_back(grid_column.upper);
  const int64_t atoms = static_cast<int64_t>(grid_column.atoms.size());
  const int64_t cells = static_cast<int64_t>(edges.size()) - 1;
  if (noisy_counts.size() != atoms + cells || bins < 1) return fitted;
  // Thresholded counts of the bins (the atoms have their own cells and are
  // no bin's mass), and their running sums: monotone since each term is >= 0.
  const double threshold = kFitCellThreshold * std::max(0.0, noise_std);
  std::vector<double> cumulative(cells + 1, 0.0);
  for (int64_t i = 0; i < cells; ++i) {
    const double count = noisy_counts(atoms + i);
    cumulative[i + 1] = cumulative[i] + (count >= threshold && count > 0 ? count : 0.0);
  }
  const double total = cumulative[cells];
  if (!(total > 0)) return fitted;
  // The value below which a share p of the bins' mass lies, linear inside
  // the cell that crosses it.
  const auto quantile = [&](double p) {
    const double target = p * total;
    const auto above = std::lower_bound(cumulative.begin() + 1, cumulative.end(), target);
    const int64_t cell = std::min<int64_t>(above - cumulative.begin() - 1, cells - 1);
    const double mass = cumulative[cell + 1] - cumulative[cell];
    const double share = mass > 0 ? (target - cumulative[cell]) / mass : 0.0;
    return edges[cell] + std::clamp(share, 0.0, 1.0) * (edges[cell + 1] - edges[cell]);
  };
  const auto whole = [&](double v) { return grid_column.integer ? std::round(v) : v; };
  fitted.lower =
      std::max(grid_column.lower, whole(RoundTwoDigits(quantile(kFitBoundQuantile), -1)));
  fitted.upper =
      std::min(grid_column.upper, whole(RoundTwoDigits(quantile(1 - kFitBoundQuantile), +1)));
  if (!(fitted.lower < fitted.upper)) {
    fitted.lower = grid_column.lower;
    fitted.upper = grid_column.upper;
  }
  for (int b = 1; b < bins; ++b) {
    const double edge = whole(RoundTwoDigits(quantile(static_cast<double>(b) / bins), 0));
    if (edge > fitted.lower && edge < fitted.upper &&
        (fitted.edges.empty() || edge > fitted.edges.back())) {
      fitted.edges.push_back(edge);
    }
  }
  return fitted;
}

std::vector<double> WithTailEdges(const data::Column& column, const std::vector<double>& edges) {
  if (edges.empty()) return edges;
  const double lower = column.lower;
  const double upper = column.upper;
  const double finest =
      std::max(std::fabs(lower), std::fabs(upper)) * std::pow(10.0, -kFitGridDecades);
  const auto whole = [&](double v) { return column.integer ? std::round(v) : v; };
  std::vector<double> out = edges;
  // At most 2 x (the grid's decades + the bounds' spread) edges a side: a
  // cap on the loop, never reached for finite bounds.
  constexpr int kMaxTail = 64;
  // Upwards from the top edge: towards +infinity a positive edge grows by
  // the ratio, a negative one shrinks towards 0 and then crosses it.
  double e = *std::max_element(edges.begin(), edges.end());
  for (int i = 0; i < kMaxTail; ++i) {
    if (e > 0) {
      e *= kFitTailRatio;
    } else {
      e /= kFitTailRatio;
      // No finer than the grid near 0: across it to +finest.
      if (!(e < -finest)) e = finest;
    }
    if (!(e < upper)) break;
    out.push_back(whole(RoundTwoDigits(e, 0)));
  }
  // Downwards from the bottom edge, mirrored.
  e = *std::min_element(edges.begin(), edges.end());
  for (int i = 0; i < kMaxTail; ++i) {
    if (e < 0) {
      e *= kFitTailRatio;
    } else {
      e /= kFitTailRatio;
      if (!(e > finest)) e = -finest;
    }
    if (!(e > lower)) break;
    out.push_back(whole(RoundTwoDigits(e, 0)));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](double v) { return !(v > lower && v < upper); }),
            out.end());
  return out;
}

}  // namespace dpcurator::release
