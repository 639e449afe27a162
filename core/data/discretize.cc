#include "core/data/discretize.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/data/encoder.h"

namespace dpcurator::data {
namespace {

std::string Number(double value) { return absl::StrFormat("%.6g", value); }

}  // namespace

absl::StatusOr<Discretizer> Discretizer::Create(const Schema& schema) {
  Discretizer discretizer;
  for (int c = 0; c < schema.num_columns(); ++c) {
    const Column& column = schema.column(c);
    ColumnDomain domain;
    if (column.type == ColumnType::kImage) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Column '", column.name, "' is an image column; marginal methods need a tabular schema "
          "(numeric and categorical columns only)"));
    }
    if (column.type == ColumnType::kCategorical) {
      domain.size = schema.NumLevels(c);
      for (int level = 0; level < domain.size; ++level) {
        domain.levels.push_back(schema.LevelName(c, level));
      }
    } else {
      domain.numeric = true;
      domain.integer = column.integer;
      domain.atoms = column.atoms;
      domain.edges.push_back(column.lower);
      if (!column.bins.empty()) {
        domain.edges.insert(domain.edges.end(), column.bins.begin(), column.bins.end());
      } else if (column.integer &&
                 std::floor(column.upper) - std::ceil(column.lower) + 1 <= kMaxDefaultIntegerCells) {
        // One bin per integer: edges halfway between them.
        for (double v = std::ceil(column.lower) + 0.5; v < column.upper; v += 1.0) {
          if (v > column.lower) domain.edges.push_back(v);
        }
      } else {
        const double width = (column.upper - column.lower) / kDefaultNumericBins;
        for (int b = 1; b < kDefaultNumericBins; ++b) {
          domain.edges.push_back(column.lower + b * width);
        }
      }
      domain.edges.push_back(column.upper);
      domain.nullable = column.nullable;
      domain.size = static_cast<int>(domain.atoms.size() + domain.edges.size() - 1) +
                    (column.nullable ? 1 : 0);
    }
    discretizer.columns_.push_back(std::move(domain));
  }
  return discretizer;
}

int Discretizer::Code(int column, double value) const {
  const ColumnDomain& domain = columns_[column];
  if (!domain.numeric) {
    // A level index; anything else (a hand-built table) goes to the last cell.
    if (value >= 0 && value < domain.size) return static_cast<int>(value);
    return domain.size - 1;
  }
  // Missing first: NaN must reach no comparison below. A non-nullable
  // column never stores NaN (Schema::ParseCell); a hand-built table's NaN
  // there goes to the last bin, as before.
  if (std::isnan(value) && domain.nullable) return domain.size - 1;
  // An atom's own cell, by the encoder's rule (exact equality).
  const int atom = AtomLevel(domain.atoms, value);
  if (atom < static_cast<int>(domain.atoms.size())) return atom;
  const int num_bins = static_cast<int>(domain.edges.size()) - 1;
  // First edge > value, among the interior ones: bin b holds [e_b, e_{b+1}).
  const auto upper = std::upper_bound(domain.edges.begin() + 1, domain.edges.end() - 1, value);
  const int bin = std::clamp(static_cast<int>(upper - domain.edges.begin()) - 1, 0, num_bins - 1);
  return static_cast<int>(domain.atoms.size()) + bin;
}

Eigen::MatrixXi Discretizer::Encode(const Table& table) const {
  Eigen::MatrixXi codes(table.num_rows(), num_columns());
  for (int c = 0; c < num_columns(); ++c) {
    for (Eigen::Index r = 0; r < table.num_rows(); ++r) codes(r, c) = Code(c, table.cells(r, c));
  }
  return codes;
}

double Discretizer::DecodeNumeric(const ColumnDomain& domain, int code, PublicRng* rng) {
  if (domain.nullable && code == domain.size - 1) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const int num_atoms = static_cast<int>(domain.atoms.size());
  if (code < num_atoms) return domain.atoms[code];
  const int bin = code - num_atoms;
  const double lo = domain.edges[bin];
  const double hi = domain.edges[bin + 1];
  const bool last = bin + 2 == static_cast<int>(domain.edges.size());
  if (!domain.integer) {
    // Atoms have measure zero under a uniform draw; redraw the (impossible
    // in practice) exact hits anyway so that an atom's cell alone holds it.
    for (;;) {
      const double v = lo + (hi - lo) * rng->Uniform();
      if (!std::binary_search(domain.atoms.begin(), domain.atoms.end(), v)) return v;
    }
  }
  // Integers of the bin that are not atoms, drawn uniformly.
  const double first = std::ceil(lo);
  const double end = last ? std::floor(hi) + 1 : std::ceil(hi);  // one past the last
  const auto atoms_begin = std::lower_bound(domain.atoms.begin(), domain.atoms.end(), first);
  const auto atoms_end = std::lower_bound(domain.atoms.begin(), domain.atoms.end(), end);
  const double count = (end - first) - static_cast<double>(atoms_end - atoms_begin);
  if (count < 1) return std::min(std::max(first, domain.edges.front()), domain.edges.back());
  double v = first + static_cast<double>(rng->UniformInt(static_cast<uint64_t>(count)));
  // Skip the atoms at or below v, in order: the k-th non-atom integer.
  for (auto a = atoms_begin; a != atoms_end && *a <= v; ++a) v += 1;
  return v;
}

Table Discretizer::Decode(const Eigen::MatrixXi& codes, uint64_t seed) const {
  PublicRng rng(seed);
  Table table;
  table.cells.resize(codes.rows(), num_columns());
  for (Eigen::Index r = 0; r < codes.rows(); ++r) {
    for (int c = 0; c < num_columns(); ++c) {
      const ColumnDomain& domain = columns_[c];
      const int code = std::clamp(codes(r, c), 0, domain.size - 1);
      table.cells(r, c) = domain.numeric ? DecodeNumeric(domain, code, &rng) : code;
    }
  }
  return table;
}

std::string Discretizer::CellName(int column, int code) const {
  const ColumnDomain& domain = columns_[column];
  if (!domain.numeric) return domain.levels[code];
  if (domain.nullable && code == domain.size - 1) return "missing";
  const int num_atoms = static_cast<int>(domain.atoms.size());
  if (code < num_atoms) return Number(domain.atoms[code]);
  const int bin = code - num_atoms;
  const bool last = bin + 2 == static_cast<int>(domain.edges.size());
  return absl::StrCat("[", Number(domain.edges[bin]), ", ", Number(domain.edges[bin + 1]),
                      last ? "]" : ")");
}

}  // namespace dpcurator::data
