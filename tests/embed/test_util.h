#ifndef DPCURATOR_TESTS_EMBED_TEST_UTIL_H_
#define DPCURATOR_TESTS_EMBED_TEST_UTIL_H_

// Random public schemas and random rows for the embedding tests. All
// randomness here is public test randomness (PublicRng), never privacy noise.

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/util/public_rng.h"

namespace dpcurator::embed::testing {

struct SchemaSpec {
  int numeric_columns = 2;
  int categorical_columns = 2;
  // 0: unlabelled; otherwise the label column's number of classes.
  int num_classes = 2;
  // Numeric columns declare one to three public atoms (Column::atoms), which
  // RandomRow then hits often: each becomes a one-hot indicator block.
  bool atoms = false;
  // Numeric columns are nullable with probability 1/2 (issue 38), and
  // RandomRow then leaves their cells missing (NaN) often: each nullable
  // numeric adds a (present, missing) indicator block.
  bool nullable = false;
};

// A schema with the requested column counts, random bounds (widths from 1e-2
// to 1e4, offsets anywhere in [-1e3, 1e3]), random category counts (1 to 6,
// some columns nullable) and the columns in random order.
inline data::Schema RandomSchema(const SchemaSpec& spec, PublicRng* rng) {
  struct Pending {
    int kind;  // 0 numeric, 1 categorical, 2 label
    int index;
  };
  std::vector<Pending> order;
  for (int i = 0; i < spec.numeric_columns; ++i) order.push_back({0, i});
  for (int i = 0; i < spec.categorical_columns; ++i) order.push_back({1, i});
  if (spec.num_classes > 0) order.push_back({2, 0});
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng->UniformInt(i)]);
  data::Schema::Builder builder;
  for (const Pending& p : order) {
    if (p.kind == 0) {
      const double lower = -1e3 + 2e3 * rng->Uniform();
      const double width = std::pow(10.0, -2.0 + 6.0 * rng->Uniform());
      // An integer column must hold an integer within its bounds (the
      // schema refuses it otherwise).
      const bool integer = rng->Uniform() < 0.3 && std::ceil(lower) <= std::floor(lower + width);
      const std::string name = absl::StrCat("num", p.index);
      // Drawn only when asked for, so that the other schemas stay the same.
      const bool nullable = spec.nullable && rng->Uniform() < 0.5;
      builder.AddNumeric(name, lower, lower + width, integer, nullable);
      if (spec.atoms) {
        // Distinct values inside the bounds (integers for an integer
        // column), the lower bound itself among them at times.
        std::vector<double> atoms;
        const int wanted = 1 + static_cast<int>(rng->UniformInt(3));
        for (int a = 0; a < wanted; ++a) {
          double v = (a == 0 && rng->Uniform() < 0.5) ? lower : lower + width * rng->Uniform();
          if (integer) v = std::clamp(std::round(v), std::ceil(lower), std::floor(lower + width));
          if (std::find(atoms.begin(), atoms.end(), v) == atoms.end()) atoms.push_back(v);
        }
        std::sort(atoms.begin(), atoms.end());
        builder.SetAtoms(name, atoms);
      }
    } else if (p.kind == 1) {
      const int levels = 1 + static_cast<int>(rng->UniformInt(6));
      std::vector<std::string> categories;
      for (int l = 0; l < levels; ++l) categories.push_back(absl::StrCat("c", p.index, "_", l));
      builder.AddCategorical(absl::StrCat("cat", p.index), categories,
                             /*nullable=*/rng->Uniform() < 0.4);
    } else {
      std::vector<std::string> classes;
      for (int c = 0; c < spec.num_classes; ++c) classes.push_back(absl::StrCat("y", c));
      builder.AddCategorical("label", classes).SetLabel("label");
    }
  }
  return builder.Build().value();
}

// One random row as stored cells. Numeric values are drawn from
// [lower - w, upper + w] (so about a third fall outside the declared bounds
// and must be clamped by the encoder); with probability `extreme` a numeric
// cell is instead a bound itself or far outside (+-1e6 w); a column with
// atoms takes one of them with probability 0.3; a nullable column's cell is
// missing (NaN) with probability 0.3. Categorical cells
// are any level, the missing level of a nullable column included.
inline Eigen::RowVectorXd RandomRow(const data::Schema& schema, PublicRng* rng,
                                    double extreme = 0.1) {
  Eigen::RowVectorXd row(schema.num_columns());
  for (int c = 0; c < schema.num_columns(); ++c) {
    const data::Column& column = schema.column(c);
    if (column.type == data::ColumnType::kNumeric) {
      const double w = column.upper - column.lower;
      if (column.nullable && rng->Uniform() < 0.3) {
        row(c) = std::numeric_limits<double>::quiet_NaN();
      } else if (!column.atoms.empty() && rng->Uniform() < 0.3) {
        row(c) = column.atoms[rng->UniformInt(column.atoms.size())];
      } else if (rng->Uniform() < extreme) {
        const double choices[] = {column.lower, column.upper, column.lower - 1e6 * w,
                                  column.upper + 1e6 * w};
        row(c) = choices[rng->UniformInt(4)];
      } else {
        row(c) = column.lower - w + 3.0 * w * rng->Uniform();
      }
    } else {
      row(c) = static_cast<double>(rng->UniformInt(schema.NumLevels(c)));
    }
  }
  return row;
}

inline data::Table RandomTable(const data::Schema& schema, int rows, PublicRng* rng,
                               double extreme = 0.1) {
  data::Table table;
  table.cells.resize(rows, schema.num_columns());
  for (int i = 0; i < rows; ++i) table.cells.row(i) = RandomRow(schema, rng, extreme);
  return table;
}

}  // namespace dpcurator::embed::testing

#endif  // DPCURATOR_TESTS_EMBED_TEST_UTIL_H_
