#include "audit/plan_fixture.h"

#include <cmath>
#include <utility>
#include <vector>

#include "core/privacy/accounting.h"
#include "core/util/status_macros.h"
#include "proto/convert.h"

namespace dpcurator::audit {

v1::Dataset DatasetRecord(const data::Schema& schema, privacy::NeighbouringRelation relation,
                          double delta, int64_t row_count, const std::string& id) {
  v1::Dataset dataset;
  dataset.set_id(id);
  dataset.set_name(id);
  *dataset.mutable_schema() = SchemaToProto(schema);
  dataset.set_schema_fingerprint(schema.FingerprintHex());
  dataset.mutable_budget()->set_epsilon(kAuditBudgetEpsilon);
  dataset.mutable_budget()->set_delta(delta);
  dataset.set_relation(RelationToProto(relation));
  dataset.set_row_count(row_count);
  return dataset;
}

v1::Dataset ExternalDatasetRecord(const data::Schema& schema,
                                  privacy::NeighbouringRelation relation, double delta,
                                  int64_t public_row_bound, const std::string& id) {
  v1::Dataset dataset = DatasetRecord(schema, relation, delta, /*row_count=*/0, id);
  dataset.set_external(true);
  dataset.set_public_row_bound(public_row_bound);
  return dataset;
}

PlanDataset InMemoryDataset(const data::Schema& schema, data::Table table,
                            privacy::NeighbouringRelation relation, double delta,
                            const std::string& id) {
  PlanDataset side;
  side.dataset = DatasetRecord(schema, relation, delta, table.num_rows(), id);
  side.schema = schema;
  side.rows = release::EncodeRows(schema, table);
  side.table = std::move(table);
  return side;
}

std::array<PlanDataset, 2> InMemoryPair(const data::Schema& schema, data::Table d0,
                                        data::Table d1, privacy::NeighbouringRelation relation,
                                        double delta, const std::string& id) {
  return {InMemoryDataset(schema, std::move(d0), relation, delta, id),
          InMemoryDataset(schema, std::move(d1), relation, delta, id + "_1")};
}

absl::Status ChargePlanEvent(const privacy::PrivacyEvent& event,
                             privacy::NeighbouringRelation relation, double delta,
                             PreparedCase* prepared) {
  privacy::AccountantState state(relation);
  DPC_RETURN_IF_ERROR(state.Add(event));
  DPC_ASSIGN_OR_RETURN(const privacy::EpsilonReport report, state.Epsilon(delta));
  prepared->accounted_epsilon = report.epsilon;
  prepared->delta = delta;
  return absl::OkStatus();
}

double GaussianMu(const release::GaussianMechanismRecord& planned) {
  double inverse_variance = 0.0;
  for (const double s : planned.noise_multipliers) inverse_variance += 1.0 / (s * s);
  return std::sqrt(inverse_variance);
}

namespace {

void AppendMarginals(const v1::MarginalsArtefact& artefact, std::vector<double>* out) {
  for (const v1::NoisyMarginalTable& table : artefact.tables()) {
    out->insert(out->end(), table.counts().begin(), table.counts().end());
  }
}

}  // namespace

absl::StatusOr<Eigen::VectorXd> ReleasedValues(const v1::Release& release) {
  std::vector<double> out;
  switch (release.artefact_case()) {
    case v1::Release::kEmbedding:
      out.assign(release.embedding().class_values().begin(),
                 release.embedding().class_values().end());
      out.insert(out.end(), release.embedding().class_totals().begin(),
                 release.embedding().class_totals().end());
      break;
    case v1::Release::kMarginals:
      AppendMarginals(release.marginals(), &out);
      break;
    case v1::Release::kPartitioned:
      for (const v1::MarginalsArtefact& part : release.partitioned().marginals()) {
        AppendMarginals(part, &out);
      }
      break;
    default:
      return absl::InvalidArgumentError(
          "the audit reads embedding, marginals and partitioned artefacts only");
  }
  return Eigen::VectorXd(
      Eigen::Map<const Eigen::VectorXd>(out.data(), static_cast<Eigen::Index>(out.size())));
}

data::Table TableOfRows(const data::Schema& schema, const std::vector<FixtureRow>& rows) {
  data::Table table;
  table.cells.resize(static_cast<Eigen::Index>(rows.size()),
                     static_cast<Eigen::Index>(schema.num_columns()));
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) {
      table.cells(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = rows[i][j];
    }
  }
  return table;
}

std::vector<FixtureRow> Repeated(const FixtureRow& row, int64_t count) {
  return std::vector<FixtureRow>(static_cast<size_t>(count), row);
}

}  // namespace dpcurator::audit
