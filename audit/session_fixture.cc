#include "audit/session_fixture.h"

#include "core/data/table.h"
#include "proto/convert.h"

namespace dpcurator::audit {

InMemoryDataset MakeInMemoryDataset(const std::string& id, const data::Schema& schema,
                                    privacy::NeighbouringRelation relation,
                                    const std::vector<FixtureRow>& rows, double delta) {
  InMemoryDataset out;
  v1::Dataset& dataset = out.dataset;
  dataset.set_id(id);
  dataset.set_name(id);
  dataset.set_relation(RelationToProto(relation));
  *dataset.mutable_schema() = SchemaToProto(schema);
  dataset.set_row_count(static_cast<int64_t>(rows.size()));
  dataset.mutable_budget()->set_epsilon(1e6);
  dataset.mutable_budget()->set_delta(delta);
  data::Table table;
  table.cells.resize(static_cast<Eigen::Index>(rows.size()),
                     static_cast<Eigen::Index>(schema.num_columns()));
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) {
      table.cells(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = rows[i][j];
    }
  }
  out.rows = release::EncodeRows(schema, table);
  return out;
}

std::vector<FixtureRow> Repeated(const FixtureRow& row, int64_t count) {
  return std::vector<FixtureRow>(static_cast<size_t>(count), row);
}

}  // namespace dpcurator::audit
