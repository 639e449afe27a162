#ifndef DPCURATOR_CORE_DATA_DISCRETIZE_H_
#define DPCURATOR_CORE_DATA_DISCRETIZE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/util/public_rng.h"

namespace dpcurator::data {

// The finite domain of every column for marginal methods (MST; docs/schema.md
// "Atoms and bins"), fixed by the public schema only:
//   * categorical: one cell per level (categories, then missing if nullable);
//   * numeric: one cell per declared atom, then one per bin. The bins are the
//     declared interior edges' intervals [lower, e_1), ..., [e_m, upper]; a
//     value equal to an atom goes to the atom's cell. Without declared edges
//     an integer column with at most kMaxDefaultIntegerCells integers gets
//     one bin per integer, any other column kDefaultNumericBins equal-width
//     bins (data-independent defaults: nothing is learned from rows).
//   * a nullable numeric column has one more cell, last, for "missing" (as a
//     nullable categorical's missing level): a NaN cell (core/data/table.h)
//     codes to it and decodes to NaN.
// Decoding a code gives the atom exactly, or a uniform draw inside its bin
// that avoids the atoms (an integer column draws among the bin's integers
// that are not atoms), from a public seeded generator.
inline constexpr int kMaxDefaultIntegerCells = 64;
inline constexpr int kDefaultNumericBins = 16;

class Discretizer {
 public:
  // Image columns have no discrete domain: refused (INVALID_ARGUMENT).
  static absl::StatusOr<Discretizer> Create(const Schema& schema);

  int num_columns() const { return static_cast<int>(columns_.size()); }
  // Number of cells of a column's domain.
  int domain_size(int column) const { return columns_[column].size; }
  // The cell of one stored value (Table::cells' convention: a categorical's
  // level index as a double). Always in [0, domain_size).
  int Code(int column, double value) const;
  // Codes of every row, num_rows x num_columns.
  Eigen::MatrixXi Encode(const Table& table) const;
  // The rows of `codes` (num_rows x num_columns, each in its domain) as a
  // Table: categorical levels, numeric atoms exactly, other bins drawn
  // uniformly from PublicRng(seed).
  Table Decode(const Eigen::MatrixXi& codes, uint64_t seed) const;
  // For people: "40", "[20, 25)", "Husband", "missing" (a nullable numeric's
  // last cell).
  std::string CellName(int column, int code) const;

 private:
  struct ColumnDomain {
    bool numeric = false;
    bool integer = false;
    // Numeric: the last cell holds missing (NaN) values.
    bool nullable = false;
    int size = 0;
    std::vector<double> atoms;
    // edges.size() == number of bins + 1: [edges[b], edges[b+1]), the last
    // closed at upper.
    std::vector<double> edges;
    // Categorical: the level names (missing last, as "").
    std::vector<std::string> levels;
  };
  Discretizer() = default;
  static double DecodeNumeric(const ColumnDomain& domain, int code, PublicRng* rng);

  std::vector<ColumnDomain> columns_;
};

}  // namespace dpcurator::data

#endif  // DPCURATOR_CORE_DATA_DISCRETIZE_H_
