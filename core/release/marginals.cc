#include "core/release/marginals.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/privacy/discrete_noise.h"
#include "core/util/status_macros.h"

namespace dpcurator::release {
namespace {

std::string CliqueText(const std::vector<int>& clique) {
  return absl::StrCat("(", absl::StrJoin(clique, ", "), ")");
}

std::vector<int> ShapeOf(const std::vector<int>& clique, const data::Discretizer& domain) {
  std::vector<int> shape;
  shape.reserve(clique.size());
  for (int column : clique) shape.push_back(domain.domain_size(column));
  return shape;
}

}  // namespace

int64_t MarginalCellIndex(const std::vector<int>& clique, const std::vector<int>& shape,
                          const Eigen::MatrixXi& codes, Eigen::Index row) {
  int64_t index = 0;
  for (size_t k = 0; k < clique.size(); ++k) index = index * shape[k] + codes(row, clique[k]);
  return index;
}

Eigen::VectorXd ExactMarginal(const std::vector<int>& clique, const std::vector<int>& shape,
                              const Eigen::MatrixXi& codes) {
  int64_t cells = 1;
  for (int size : shape) cells *= size;
  Eigen::VectorXd counts = Eigen::VectorXd::Zero(cells);
  for (Eigen::Index r = 0; r < codes.rows(); ++r) {
    counts[MarginalCellIndex(clique, shape, codes, r)] += 1.0;
  }
  return counts;
}

absl::StatusOr<MarginalsKind::Params> MarginalsKind::Resolve(Params params,
                                                             const data::Schema& schema) {
  if (params.cliques.empty() || params.cliques.size() > static_cast<size_t>(kMaxCliques)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a marginals release needs between 1 and ", kMaxCliques, " cliques (attribute subsets), got ",
        params.cliques.size()));
  }
  DPC_ASSIGN_OR_RETURN(data::Discretizer domain, data::Discretizer::Create(schema));
  int64_t total = 0;
  for (const std::vector<int>& clique : params.cliques) {
    if (clique.empty() || clique.size() > static_cast<size_t>(kMaxCliqueColumns)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "clique ", CliqueText(clique), " has ", clique.size(), " columns; a clique has 1 to ",
          kMaxCliqueColumns));
    }
    absl::flat_hash_set<int> seen;
    int64_t cells = 1;
    for (int column : clique) {
      if (column < 0 || column >= schema.num_columns()) {
        return absl::InvalidArgumentError(absl::StrCat("clique ", CliqueText(clique),
                                                       " names column index ", column,
                                                       "; the schema has columns 0 to ",
                                                       schema.num_columns() - 1));
      }
      if (!seen.insert(column).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "clique ", CliqueText(clique), " names column '", schema.column(column).name,
            "' twice; list each column once"));
      }
      cells *= domain.domain_size(column);
    }
    if (cells > kMaxCellsPerClique) {
      return absl::InvalidArgumentError(absl::StrCat(
          "clique ", CliqueText(clique), " has ", cells, " cells; at most ", kMaxCellsPerClique,
          " are accepted (declare coarser bins in the schema, or fewer columns)"));
    }
    total += cells;
  }
  if (total > kMaxMarginalCells) {
    return absl::InvalidArgumentError(absl::StrCat("the cliques have ", total,
                                                   " cells in all; at most ", kMaxMarginalCells,
                                                   " are accepted per release: split it"));
  }
  return params;
}

GaussianMechanismRecord MarginalsKind::Plan(const Params& /*resolved*/, double noise_multiplier) {
  return GaussianMechanismRecord{{noise_multiplier}};
}

double MarginalsKind::L2Sensitivity(const Params& resolved,
                                    privacy::NeighbouringRelation relation) {
  // docs/privacy.md 2.11: ||f(D) - f(D')||_2^2 = k (one cell per table moves
  // by 1) under ADD_REMOVE, at most 2k (one cell -1, one +1) under REPLACE_ONE.
  const double k = static_cast<double>(resolved.cliques.size());
  return relation == privacy::NeighbouringRelation::kReplaceOne ? std::sqrt(2.0 * k)
                                                                : std::sqrt(k);
}

absl::StatusOr<MarginalsKind::ExactCounts> MarginalsKind::Count(const Params& resolved,
                                                                 const data::Schema& schema,
                                                                 const data::Table& rows) {
  if (rows.cells.cols() != schema.num_columns()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the table has ", rows.cells.cols(), " columns and the schema ", schema.num_columns(),
        "; read the rows under the dataset's schema"));
  }
  DPC_ASSIGN_OR_RETURN(data::Discretizer domain, data::Discretizer::Create(schema));
  const Eigen::MatrixXi codes = domain.Encode(rows);
  // The rows' tables (RowsTableSource: ExactMarginal of each clique),
  // concatenated as from any other source.
  return CountFrom(resolved, domain, RowsTableSource(&codes));
}

absl::StatusOr<MarginalsKind::ExactCounts> MarginalsKind::CountFrom(
    const Params& resolved, const data::Discretizer& domain, const ExactTableSource& tables) {
  ExactCounts exact;
  std::vector<Eigen::VectorXd> parts;
  int64_t total = 0;
  for (const std::vector<int>& clique : resolved.cliques) {
    exact.shapes.push_back(ShapeOf(clique, domain));
    DPC_ASSIGN_OR_RETURN(Eigen::VectorXd table, tables.Table(clique, exact.shapes.back()));
    total += table.size();
    parts.push_back(std::move(table));
  }
  exact.counts.resize(total);
  int64_t offset = 0;
  for (const Eigen::VectorXd& table : parts) {
    exact.counts.segment(offset, table.size()) = table;
    offset += table.size();
  }
  return exact;
}

absl::StatusOr<MarginalsKind::Result> MarginalsKind::Run(const Params& resolved,
                                                         const data::Schema& schema,
                                                         const data::Table& rows,
                                                         privacy::NeighbouringRelation relation,
                                                         double noise_multiplier,
                                                         privacy::NoiseSource* noise) {
  DPC_ASSIGN_OR_RETURN(ExactCounts exact, Count(resolved, schema, rows));
  return Noise(resolved, std::move(exact), relation, noise_multiplier, noise);
}

absl::StatusOr<MarginalsKind::Result> MarginalsKind::Noise(const Params& resolved,
                                                           ExactCounts exact,
                                                           privacy::NeighbouringRelation relation,
                                                           double noise_multiplier,
                                                           privacy::NoiseSource* noise) {
  if (exact.shapes.size() != resolved.cliques.size()) {
    return absl::InternalError("the exact counts are of another list of cliques");
  }
  Result result;
  int64_t offset = 0;
  for (size_t k = 0; k < resolved.cliques.size(); ++k) {
    NoisyMarginal marginal;
    marginal.clique = resolved.cliques[k];
    marginal.shape = exact.shapes[k];
    int64_t cells = 1;
    for (int size : marginal.shape) cells *= size;
    if (offset + cells > exact.counts.size()) {
      return absl::InternalError("the exact counts are shorter than their cliques' tables");
    }
    marginal.counts = exact.counts.segment(offset, cells);
    offset += cells;
    result.marginals.push_back(std::move(marginal));
  }
  // One draw over the concatenation: the sensitivity is the whole vector's.
  Eigen::VectorXd& all = exact.counts;
  DPC_ASSIGN_OR_RETURN(privacy::GridNoise drawn,
                       privacy::AddGridGaussianNoise(all, noise_multiplier,
                                                     L2Sensitivity(resolved, relation), noise));
  offset = 0;
  for (NoisyMarginal& m : result.marginals) {
    m.counts = all.segment(offset, m.counts.size());
    m.noise_std = noise->adds_noise() ? drawn.scale() : 0.0;
    offset += m.counts.size();
  }
  result.ran.noise_multipliers = {noise_multiplier};
  return result;
}

absl::StatusOr<Eigen::VectorXd> RowsTableSource::Table(const std::vector<int>& clique,
                                                       const std::vector<int>& shape) const {
  return ExactMarginal(clique, shape, *codes_);
}

int64_t TotalCells(const std::vector<std::vector<int>>& cliques,
                   const std::vector<int>& domain_sizes) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  for (const std::vector<int>& clique : cliques) {
    int64_t cells = 1;
    for (int column : clique) {
      const int64_t size = domain_sizes[column];
      cells = size > 0 && cells > kMax / size ? kMax : cells * size;
    }
    total = total > kMax - cells ? kMax : total + cells;
  }
  return total;
}

absl::StatusOr<ListedTableSource> ListedTableSource::Create(
    std::vector<std::vector<int>> cliques, const std::vector<int>& domain_sizes,
    Eigen::VectorXd counts) {
  ListedTableSource source;
  source.offsets_.push_back(0);
  for (const std::vector<int>& clique : cliques) {
    for (int column : clique) {
      if (column < 0 || column >= static_cast<int>(domain_sizes.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("clique ", CliqueText(clique), " names a column outside the domain"));
      }
    }
    source.offsets_.push_back(source.offsets_.back() + TotalCells({clique}, domain_sizes));
  }
  if (source.offsets_.back() != counts.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the tables have ", counts.size(), " cells; their ", cliques.size(),
        " cliques have ", source.offsets_.back()));
  }
  for (size_t k = 0; k < cliques.size(); ++k) {
    if (!source.index_.emplace(std::move(cliques[k]), k).second) {
      return absl::InvalidArgumentError("a clique is listed twice among the tables");
    }
  }
  source.counts_ = std::move(counts);
  return source;
}

absl::StatusOr<Eigen::VectorXd> ListedTableSource::Table(const std::vector<int>& clique,
                                                         const std::vector<int>& shape) const {
  const auto found = index_.find(clique);
  if (found != index_.end()) {
    const size_t k = found->second;
    int64_t cells = 1;
    for (int size : shape) cells *= size;
    const int64_t length = offsets_[k + 1] - offsets_[k];
    if (length == cells) return Eigen::VectorXd(counts_.segment(offsets_[k], length));
  }
  return absl::InternalError(absl::StrCat(
      "clique ", CliqueText(clique), " is not among the tables the plan fixed"));
}

}  // namespace dpcurator::release
