// The partitioned one-shot release through the gRPC service (issue 27 item
// 4; docs/privacy.md 3.7): ReleaseRequest.partition on a marginals release
// gives one artefact per part as ONE admission, charged as one part under
// ADD_REMOVE and as derived under REPLACE_ONE; each part's artefact is the
// ordinary release over that part's rows; an empty part is total; every
// refusal comes before admission with nothing charged; a retry replays.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/data/demo.h"
#include "core/data/discretize.h"
#include "core/data/table.h"
#include "core/privacy/calibration.h"
#include "core/privacy/conversion.h"
#include "core/privacy/noise_source.h"
#include "core/privacy/rdp.h"
#include "core/release/bin_fit.h"
#include "proto/convert.h"
#include "server/plans.h"
#include "tests/server/server_test_util.h"

namespace dpcurator::server::testing {
namespace {

constexpr int64_t kPartitionReleaseRows = 200;
constexpr uint64_t kPartitionReleaseRowSeed = 31;
constexpr int kLabel = 7;  // "churn", the demo schema's label: "no", "yes"

// eps(delta) of the RDP curve alpha * c on the ledger's order grid, by the
// conversion of PRIVACY.md "Accounting", written out here by hand.
double HandRdpEpsilon(double c) {
  double best = std::numeric_limits<double>::infinity();
  for (const double alpha : privacy::DefaultRdpOrders()) {
    if (alpha <= 1.01) continue;
    best = std::min(best, alpha * c + std::log1p(-1.0 / alpha) -
                              std::log(kDelta * alpha) / (alpha - 1.0));
  }
  return best;
}

std::vector<int> AsVector(const google::protobuf::RepeatedField<int32_t>& field) {
  return {field.begin(), field.end()};
}

// The demo rows whose label is `level`, selected here without server code.
data::Table DemoRowsWithLabel(const data::Table& table, int level) {
  data::Table part;
  std::vector<Eigen::Index> keep;
  for (Eigen::Index i = 0; i < table.cells.rows(); ++i) {
    if (table.cells(i, kLabel) == static_cast<double>(level)) keep.push_back(i);
  }
  part.cells.resize(static_cast<Eigen::Index>(keep.size()), table.cells.cols());
  for (size_t k = 0; k < keep.size(); ++k) {
    part.cells.row(static_cast<Eigen::Index>(k)) = table.cells.row(keep[k]);
  }
  return part;
}

class PartitionReleaseTest : public ServerTest {
 protected:
  void UseZeroNoise() {
    StopServer();
    noise_source_ = []() -> absl::StatusOr<std::unique_ptr<privacy::NoiseSource>> {
      return std::unique_ptr<privacy::NoiseSource>(new privacy::ZeroNoiseSource());
    };
    StartServer();
  }

  v1::Dataset MakeDataset(v1::NeighbouringRelation relation = v1::ADD_REMOVE) {
    v1::Dataset dataset;
    EXPECT_TRUE(CreateDataset(100.0, kDelta, relation, &dataset).ok());
    EXPECT_TRUE(UploadDemoRows(dataset.id(), kPartitionReleaseRows, kPartitionReleaseRowSeed).ok());
    return dataset;
  }

  // A dataset holding exactly `table`'s rows.
  v1::Dataset MakeDatasetOf(const data::Table& table, const std::string& name) {
    v1::Dataset dataset;
    EXPECT_TRUE(CreateDataset(100.0, kDelta, v1::ADD_REMOVE, &dataset, name).ok());
    v1::UploadRowsRequest message;
    message.set_dataset_id(dataset.id());
    for (auto& row : DemoRows(table)) *message.add_rows() = std::move(row);
    v1::UploadRowsResponse uploaded;
    EXPECT_TRUE(UploadMessages({message}, &uploaded).ok());
    return dataset;
  }

  // Marginals of (region), (education, plan) and (age) at multiplier s,
  // partitioned by the label unless `partitioned` is false.
  static v1::ReleaseRequest MarginalsRequest(const std::string& dataset_id,
                                             const std::string& key, bool partitioned = true) {
    v1::ReleaseRequest request;
    request.set_dataset_id(dataset_id);
    request.set_idempotency_key(key);
    request.set_noise_multiplier(2.0);
    v1::MarginalsParams& params = *request.mutable_marginals();
    params.add_cliques()->add_columns("region");
    v1::AimClique& pair = *params.add_cliques();
    pair.add_columns("education");
    pair.add_columns("plan");
    params.add_cliques()->add_columns("age");
    if (partitioned) request.mutable_partition()->set_column("churn");
    return request;
  }

  double EpsilonSpent(const std::string& dataset_id) {
    v1::BudgetReport budget;
    EXPECT_TRUE(GetBudget(dataset_id, &budget).ok());
    return budget.epsilon_spent();
  }
  int EventCount(const std::string& dataset_id) {
    v1::BudgetReport budget;
    EXPECT_TRUE(GetBudget(dataset_id, &budget).ok());
    return budget.events_size();
  }
};

// Done-when: a K-part release is charged as ONE part under add/remove: the
// RDP curve alpha / (2 s^2) of one grid Gaussian at s = 2 (by hand), not K
// times it, in one ledger event; K artefacts come back in declared order.
TEST_F(PartitionReleaseTest, OneChargeForEveryPartUnderAddRemove) {
  const v1::Dataset dataset = MakeDataset();
  v1::Release release;
  const grpc::Status status = RequestRelease(MarginalsRequest(dataset.id(), "k"), &release);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(release.kind(), v1::MARGINALS);
  ASSERT_EQ(release.artefact_case(), v1::Release::kPartitioned);
  const v1::PartitionedArtefact& parts = release.partitioned();
  EXPECT_EQ(parts.column(), "churn");
  ASSERT_EQ(parts.values_size(), 2);
  EXPECT_EQ(parts.values(0), "no");
  EXPECT_EQ(parts.values(1), "yes");
  ASSERT_EQ(parts.marginals_size(), 2);
  // One part's loss, judged (as one event alone) by the bare grid
  // Gaussian's privacy profile (docs/privacy.md 3.7, "One part's profile"):
  // the epsilon of one ordinary release at s = 2, below the RDP conversion
  // of one part's curve alpha / (2 s^2).
  const double one_part =
      privacy::ComputeEpsilonReport(privacy::PrivacyEvent::GridGaussian(2.0).value(), kDelta)
          ->epsilon;
  EXPECT_LT(one_part, HandRdpEpsilon(1.0 / (2.0 * 2.0 * 2.0)) - 0.1);
  EXPECT_NEAR(EpsilonSpent(dataset.id()), one_part, 1e-9);
  EXPECT_EQ(EventCount(dataset.id()), 1);
  for (int k = 0; k < 2; ++k) {
    const v1::MarginalsArtefact& part = parts.marginals(k);
    EXPECT_EQ(part.part_value(), parts.values(k));
    EXPECT_EQ(part.partition_column(), "churn");
    ASSERT_EQ(part.tables_size(), 3);
    EXPECT_EQ(part.noise_multiplier(), 2.0);
    EXPECT_DOUBLE_EQ(part.sensitivity(), std::sqrt(3.0));  // k = 3 tables, add/remove
    EXPECT_NEAR(part.epsilon(), one_part, 1e-9);
  }
  // Naming one part: the same charge again (one part's), so the two
  // releases compose (by RDP: the profile covers one event) to the curve
  // 2 alpha / (2 s^2), not 3 alpha / (2 s^2).
  v1::ReleaseRequest one = MarginalsRequest(dataset.id(), "one");
  one.mutable_partition()->add_values("yes");
  ASSERT_TRUE(RequestRelease(one, &release).ok());
  ASSERT_EQ(release.partitioned().marginals_size(), 1);
  EXPECT_EQ(release.partitioned().values(0), "yes");
  EXPECT_NEAR(EpsilonSpent(dataset.id()), HandRdpEpsilon(2.0 / 8.0), 1e-9);
}

// Under REPLACE_ONE the charge is the derived curve: a replaced row stays
// in its part (sensitivity sqrt(2k), multiplier s) or moves between parts
// (two add/remove neighbours at sqrt(k) each, multiplier ~ s sqrt(2)):
// max(alpha / (2 s^2), 2 alpha / (2 (s sqrt 2)^2)) = alpha / (2 s^2), up to
// the grid's rounding distance, which can only raise it.
TEST_F(PartitionReleaseTest, ReplaceOneIsChargedAsDerived) {
  const v1::Dataset dataset = MakeDataset(v1::REPLACE_ONE);
  v1::Release release;
  const grpc::Status status = RequestRelease(MarginalsRequest(dataset.id(), "r"), &release);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(release.partitioned().marginals_size(), 2);
  EXPECT_DOUBLE_EQ(release.partitioned().marginals(0).sensitivity(), std::sqrt(6.0));
  const double hand = HandRdpEpsilon(1.0 / 8.0);
  const double spent = EpsilonSpent(dataset.id());
  EXPECT_GE(spent, hand - 1e-12);
  EXPECT_LE(spent, hand * (1.0 + 1e-4));  // the rounding distance is ~2^-20 s
  EXPECT_EQ(EventCount(dataset.id()), 1);
}

// The comparison docs/privacy.md 3.7 reports: at epsilon 1 (delta 1e-5) on
// the demo label, the K per-class tables partitioned against the
// class-conditional tables (each clique with the label added) of one
// ordinary release. Both have L2 sensitivity sqrt(k) (add/remove) or
// sqrt(2k) (replace-one), so any difference is the accounting's: the
// ordinary release is one bare grid Gaussian, judged by its own privacy
// profile; the partitioned event is judged by RDP.
TEST_F(PartitionReleaseTest, SigmaAtEpsilonOneForBothForms) {
  const data::Schema schema = data::DemoSchema();
  for (const auto relation : {v1::ADD_REMOVE, v1::REPLACE_ONE}) {
    v1::Dataset dataset;
    dataset.set_id("d");
    dataset.set_row_count(kPartitionReleaseRows);
    dataset.set_relation(relation);
    dataset.mutable_budget()->set_delta(kDelta);
    v1::ReleaseRequest partitioned = MarginalsRequest("d", "p");
    partitioned.set_epsilon(1.0);
    v1::ReleaseRequest conditional = MarginalsRequest("d", "c", /*partitioned=*/false);
    conditional.set_epsilon(1.0);
    for (v1::AimClique& clique : *conditional.mutable_marginals()->mutable_cliques()) {
      clique.add_columns("churn");
    }
    auto p = PlanMarginalsRelease(partitioned, dataset, schema);
    auto c = PlanMarginalsRelease(conditional, dataset, schema);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE(c.ok()) << c.status();
    const auto r = RelationFromProto(relation);
    const double sens_p = release::MarginalsKind::L2Sensitivity(p->params, r);
    const double sens_c = release::MarginalsKind::L2Sensitivity(c->params, r);
    EXPECT_DOUBLE_EQ(sens_p, sens_c);  // same k cliques, one cell each per row
    const double sigma_p = p->noise_multiplier * sens_p;
    const double sigma_c = c->noise_multiplier * sens_c;
    std::printf("%s, k = 3, eps = 1: partitioned s = %.4f sigma = %.4f; class-conditional "
                "s = %.4f sigma = %.4f\n",
                relation == v1::ADD_REMOVE ? "ADD_REMOVE" : "REPLACE_ONE", p->noise_multiplier,
                sigma_p, c->noise_multiplier, sigma_c);
    // The ordinary one: one grid Gaussian's own profile.
    EXPECT_NEAR(c->noise_multiplier,
                privacy::CalibrateGridGaussianNoiseMultiplier(1, 1.0, kDelta).value(), 1e-6);
    if (relation == v1::ADD_REMOVE) {
      // K identical grid Gaussians under add/remove lose what one does, and
      // the ledger judges them by one grid Gaussian's profile
      // (docs/privacy.md 3.7): the same noise as the class-conditional form.
      EXPECT_NEAR(p->noise_multiplier, c->noise_multiplier, 1e-6);
      EXPECT_NEAR(sigma_p, sigma_c, 1e-5);
    } else {
      // Replace-one: the RDP conversion of alpha / (2 s^2), up to the
      // rounding distance (a moved row touches two parts).
      const double rdp_s =
          privacy::CalibrateDiscreteGaussianNoiseMultiplier(1, 1.0, kDelta).value();
      EXPECT_GE(p->noise_multiplier, rdp_s * (1.0 - 1e-6));
      EXPECT_LE(p->noise_multiplier, rdp_s * (1.0 + 1e-4));
      EXPECT_GT(sigma_p, sigma_c);
    }
  }
}

// Each part's artefact is the ordinary marginals release over that part's
// rows (zero noise: exact counts), and the parts' counts add up to the
// ordinary release over every row.
TEST_F(PartitionReleaseTest, EachPartIsTheOrdinaryReleaseOfItsRows) {
  UseZeroNoise();
  const v1::Dataset dataset = MakeDataset();
  v1::Release release;
  ASSERT_TRUE(RequestRelease(MarginalsRequest(dataset.id(), "k"), &release).ok());
  ASSERT_EQ(release.partitioned().marginals_size(), 2);
  const data::Table table = data::GenerateDemoTable(kPartitionReleaseRows, kPartitionReleaseRowSeed);
  v1::Release whole;
  ASSERT_TRUE(
      RequestRelease(MarginalsRequest(dataset.id(), "whole", /*partitioned=*/false), &whole)
          .ok());
  ASSERT_EQ(whole.artefact_case(), v1::Release::kMarginals);
  int64_t rows_seen = 0;
  for (int level = 0; level < 2; ++level) {
    const data::Table rows = DemoRowsWithLabel(table, level);
    rows_seen += rows.num_rows();
    const v1::Dataset alone = MakeDatasetOf(rows, "part" + std::to_string(level));
    v1::Release ordinary;
    ASSERT_TRUE(
        RequestRelease(MarginalsRequest(alone.id(), "o", /*partitioned=*/false), &ordinary).ok());
    const v1::MarginalsArtefact& part = release.partitioned().marginals(level);
    ASSERT_EQ(part.tables_size(), ordinary.marginals().tables_size());
    for (int t = 0; t < part.tables_size(); ++t) {
      SCOPED_TRACE(t);
      EXPECT_EQ(AsVector(part.tables(t).clique()),
                AsVector(ordinary.marginals().tables(t).clique()));
      EXPECT_EQ(AsVector(part.tables(t).shape()), AsVector(ordinary.marginals().tables(t).shape()));
      ASSERT_EQ(part.tables(t).counts_size(), ordinary.marginals().tables(t).counts_size());
      for (int c = 0; c < part.tables(t).counts_size(); ++c) {
        EXPECT_EQ(part.tables(t).counts(c), ordinary.marginals().tables(t).counts(c));
      }
    }
  }
  EXPECT_EQ(rows_seen, kPartitionReleaseRows);
  for (int t = 0; t < whole.marginals().tables_size(); ++t) {
    for (int c = 0; c < whole.marginals().tables(t).counts_size(); ++c) {
      EXPECT_EQ(release.partitioned().marginals(0).tables(t).counts(c) +
                    release.partitioned().marginals(1).tables(t).counts(c),
                whole.marginals().tables(t).counts(c));
    }
  }
}

// Totality: a part with no rows still gives its tables, of the planned
// shape: zeros without noise, finite noise with the production source.
TEST_F(PartitionReleaseTest, AnEmptyPartIsTotal) {
  const data::Table only_no = DemoRowsWithLabel(data::GenerateDemoTable(kPartitionReleaseRows, kPartitionReleaseRowSeed), 0);
  ASSERT_GT(only_no.num_rows(), 0);
  {
    const v1::Dataset dataset = MakeDatasetOf(only_no, "secure");
    v1::Release release;
    const grpc::Status status = RequestRelease(MarginalsRequest(dataset.id(), "e"), &release);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const v1::PartitionedArtefact& parts = release.partitioned();
    ASSERT_EQ(parts.marginals_size(), 2);
    ASSERT_EQ(parts.marginals(1).tables_size(), parts.marginals(0).tables_size());
    for (int t = 0; t < parts.marginals(1).tables_size(); ++t) {
      const v1::NoisyMarginalTable& empty = parts.marginals(1).tables(t);
      EXPECT_EQ(AsVector(empty.shape()), AsVector(parts.marginals(0).tables(t).shape()));
      EXPECT_EQ(empty.counts_size(), parts.marginals(0).tables(t).counts_size());
      EXPECT_GT(empty.noise_std(), 0.0);
      for (double v : empty.counts()) EXPECT_TRUE(std::isfinite(v));
    }
  }
  UseZeroNoise();
  const v1::Dataset dataset = MakeDatasetOf(only_no, "zero");
  v1::Release release;
  ASSERT_TRUE(RequestRelease(MarginalsRequest(dataset.id(), "e"), &release).ok());
  const v1::MarginalsArtefact& empty = release.partitioned().marginals(1);
  EXPECT_EQ(empty.part_value(), "yes");
  ASSERT_EQ(empty.tables_size(), 3);
  EXPECT_EQ(empty.tables(1).counts_size(), 5 * 3);  // education x plan
  for (const v1::NoisyMarginalTable& table : empty.tables()) {
    for (double v : table.counts()) EXPECT_EQ(v, 0.0);
  }
}

// A retry with the same key replays the stored release, uncharged.
TEST_F(PartitionReleaseTest, RetryReplaysUncharged) {
  const v1::Dataset dataset = MakeDataset();
  v1::Release first;
  ASSERT_TRUE(RequestRelease(MarginalsRequest(dataset.id(), "same"), &first).ok());
  const double spent = EpsilonSpent(dataset.id());
  v1::Release again;
  ASSERT_TRUE(RequestRelease(MarginalsRequest(dataset.id(), "same"), &again).ok());
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.id(), first.id());
  EXPECT_EQ(again.partitioned().SerializeAsString(), first.partitioned().SerializeAsString());
  EXPECT_EQ(EpsilonSpent(dataset.id()), spent);
  EXPECT_EQ(EventCount(dataset.id()), 1);
}

// Done-when: a column other than the declared label, an undeclared value,
// a value named twice, a dataset without a declared label, and a kind
// other than marginals are refused before admission, nothing charged.
TEST_F(PartitionReleaseTest, RefusalsComeBeforeAdmission) {
  const v1::Dataset dataset = MakeDataset();
  v1::Release release;
  auto refused = [&](const v1::ReleaseRequest& request, grpc::StatusCode code,
                     const std::string& says) {
    const grpc::Status status = RequestRelease(request, &release);
    EXPECT_EQ(status.error_code(), code) << says << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
  };
  v1::ReleaseRequest request = MarginalsRequest(dataset.id(), "bad");
  request.mutable_partition()->set_column("region");
  refused(request, grpc::StatusCode::INVALID_ARGUMENT, "only the declared label column");
  request = MarginalsRequest(dataset.id(), "bad");
  request.mutable_partition()->add_values("maybe");
  refused(request, grpc::StatusCode::INVALID_ARGUMENT, "'maybe' is not a declared category");
  request = MarginalsRequest(dataset.id(), "bad");
  request.mutable_partition()->add_values("no");
  request.mutable_partition()->add_values("no");
  refused(request, grpc::StatusCode::INVALID_ARGUMENT, "named twice");
  v1::ReleaseRequest rff = RffRequest(dataset.id(), 1.0, "bad");
  rff.mutable_partition()->set_column("churn");
  refused(rff, grpc::StatusCode::INVALID_ARGUMENT, "takes kind marginals");
  EXPECT_EQ(EpsilonSpent(dataset.id()), 0.0);
  EXPECT_EQ(EventCount(dataset.id()), 0);

  v1::CreateDatasetRequest create;
  create.set_name("unlabelled");
  *create.mutable_schema() = DemoSchemaProto();
  create.mutable_schema()->clear_label();
  create.mutable_budget()->set_epsilon(10.0);
  create.mutable_budget()->set_delta(kDelta);
  v1::Dataset unlabelled;
  {
    client::Connection curator = Curator();
    auto context = curator.NewContext();
    const grpc::Status created =
        curator.datasets().CreateDataset(context.get(), create, &unlabelled);
    ASSERT_TRUE(created.ok()) << created.error_message();
  }
  ASSERT_TRUE(UploadDemoRows(unlabelled.id(), 50, 3).ok());
  refused(MarginalsRequest(unlabelled.id(), "bad"), grpc::StatusCode::FAILED_PRECONDITION,
          "declares a label column");
  EXPECT_EQ(EpsilonSpent(unlabelled.id()), 0.0);
}

// Bin fitting (issue 38; docs/privacy.md 2.11.1): MarginalsParams.fit_grid
// measures the named numeric columns' 1-way tables over FitGridSchema, as
// ONE ledger event charged exactly as the ordinary marginals release of the
// same cliques; the artefact is marked and carries the grid. A column that
// is not numeric, an unknown column, a pair, and a partition are refused
// before admission, nothing charged.
// Issue 38's category fit over the wire: a request the plan refuses (a
// declared, unknown or numeric column, a partition) is INVALID_ARGUMENT
// with what to do, and the ledger has no event (plan/category_fit.h; the
// demo schema has no open column, so the parameter refusals behind the
// column's are tested at the plan, CategoryFitPlanTest in wire_test.cc).
TEST_F(PartitionReleaseTest, CategoryFitRefusalsChargeNothing) {
  const v1::Dataset dataset = MakeDataset();
  auto fit = [&](const std::string& column) {
    v1::ReleaseRequest request;
    request.set_dataset_id(dataset.id());
    request.set_idempotency_key("fit");
    request.set_epsilon(1.0);
    request.mutable_category_fit()->set_column(column);
    return request;
  };
  std::vector<std::pair<v1::ReleaseRequest, std::string>> cases = {
      {fit("region"), "is not open"},
      {fit("salary"), "it has no column 'salary' (it has none; declare one"},
      {fit("income"), "is not categorical"}};
  v1::ReleaseRequest partitioned = fit("region");
  partitioned.mutable_partition()->set_column("churn");
  cases.emplace_back(partitioned, "not partitioned");
  for (const auto& [request, says] : cases) {
    SCOPED_TRACE(says);
    v1::Release release;
    const grpc::Status status = RequestRelease(request, &release);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
    EXPECT_NE(status.error_message().find("Nothing was charged"), std::string::npos);
  }
  EXPECT_EQ(EpsilonSpent(dataset.id()), 0.0);
  EXPECT_EQ(EventCount(dataset.id()), 0);
}

TEST_F(PartitionReleaseTest, BinFitIsOneMarginalsChargeOverTheGrid) {
  const v1::Dataset dataset = MakeDataset();
  v1::Release release;
  auto refused = [&](const v1::ReleaseRequest& request, const std::string& says) {
    const grpc::Status status = RequestRelease(request, &release);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << says << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
  };
  auto fit_request = [&](const std::vector<std::string>& columns, const std::string& key) {
    v1::ReleaseRequest request;
    request.set_dataset_id(dataset.id());
    request.set_idempotency_key(key);
    request.set_noise_multiplier(2.0);
    request.mutable_marginals()->set_fit_grid(true);
    for (const std::string& column : columns) {
      request.mutable_marginals()->add_cliques()->add_columns(column);
    }
    return request;
  };
  refused(fit_request({"income", "region"}, "bad"), "numeric columns only; column 'region'");
  refused(fit_request({"salary"}, "bad"), "salary");
  v1::ReleaseRequest pair = fit_request({"income"}, "bad");
  pair.mutable_marginals()->mutable_cliques(0)->add_columns("age");
  refused(pair, "1-way cliques only");
  v1::ReleaseRequest partitioned = fit_request({"income"}, "bad");
  partitioned.mutable_partition()->set_column("churn");
  refused(partitioned, "takes no partition");
  EXPECT_EQ(EpsilonSpent(dataset.id()), 0.0);
  EXPECT_EQ(EventCount(dataset.id()), 0);

  const grpc::Status status = RequestRelease(fit_request({"income", "age"}, "fit"), &release);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(release.artefact_case(), v1::Release::kMarginals);
  const v1::MarginalsArtefact& artefact = release.marginals();
  EXPECT_TRUE(artefact.fit_grid());
  EXPECT_EQ(artefact.schema_fingerprint(), dataset.schema_fingerprint());
  // The artefact's schema is the grid, not the dataset's bins.
  const data::Schema declared = *SchemaFromProto(dataset.schema());
  const auto grid = release::FitGridSchema(declared, {3, 1});  // income, age
  ASSERT_TRUE(grid.ok()) << grid.status();
  const auto carried = SchemaFromProto(artefact.schema());
  ASSERT_TRUE(carried.ok()) << carried.status();
  EXPECT_EQ(carried->column(3).bins, grid->column(3).bins);
  EXPECT_EQ(carried->column(1).bins, grid->column(1).bins);
  EXPECT_GT(carried->column(3).bins.size(), 100u);
  ASSERT_EQ(artefact.tables_size(), 2);
  const auto domain = data::Discretizer::Create(*grid);
  ASSERT_TRUE(domain.ok());
  EXPECT_EQ(artefact.tables(0).counts_size(), domain->domain_size(3));
  EXPECT_EQ(artefact.tables(1).counts_size(), domain->domain_size(1));
  // Charged once, as the ordinary marginals release of the same two 1-way
  // cliques at the same s (the sensitivity does not see the cells).
  EXPECT_EQ(EventCount(dataset.id()), 1);
  const double fit_spent = EpsilonSpent(dataset.id());
  EXPECT_GT(fit_spent, 0.0);
  const v1::Dataset other = MakeDatasetOf(data::GenerateDemoTable(kPartitionReleaseRows, kPartitionReleaseRowSeed), "plain");
  v1::ReleaseRequest plain = fit_request({"income", "age"}, "plain");
  plain.set_dataset_id(other.id());
  plain.mutable_marginals()->set_fit_grid(false);
  v1::Release ordinary;
  ASSERT_TRUE(RequestRelease(plain, &ordinary).ok());
  EXPECT_FALSE(ordinary.marginals().fit_grid());
  EXPECT_DOUBLE_EQ(EpsilonSpent(other.id()), fit_spent);
  // A retry replays the stored release, uncharged.
  v1::Release again;
  ASSERT_TRUE(RequestRelease(fit_request({"income", "age"}, "fit"), &again).ok());
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(EventCount(dataset.id()), 1);
}

// `datasets set-bins` (issue 38; docs/privacy.md 2.11.1): a curator changes
// numeric columns' bins only; the fingerprint becomes the new schema's, the
// ledger continues, a release made before keeps (on replay) the fingerprint
// and bins it was made under, and one made after has the new bins. Any
// other change, a categorical column's bins, and an analyst are refused.
TEST_F(PartitionReleaseTest, SetBinsChangesOnlyNumericBins) {
  const v1::Dataset dataset = MakeDataset();
  v1::Release before;
  ASSERT_TRUE(
      RequestRelease(MarginalsRequest(dataset.id(), "before", /*partitioned=*/false), &before)
          .ok());
  client::Connection curator = Curator();
  auto set_bins = [&](const v1::TableSchema& schema, v1::Dataset* updated,
                      client::Connection& as) {
    v1::SetBinsRequest request;
    request.set_dataset_id(dataset.id());
    *request.mutable_schema() = schema;
    auto context = as.NewContext();
    return as.datasets().SetBins(context.get(), request, updated);
  };
  v1::Dataset updated;
  v1::TableSchema bad = dataset.schema();
  bad.mutable_columns(3)->set_upper(500);  // income's bound
  grpc::Status status = set_bins(bad, &updated, curator);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("'income') differs"), std::string::npos)
      << status.error_message();
  bad = dataset.schema();
  bad.mutable_columns(0)->add_bins(1.0);  // region is categorical
  status = set_bins(bad, &updated, curator);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("'region' is not numeric"), std::string::npos)
      << status.error_message();
  bad = dataset.schema();
  bad.clear_label();
  EXPECT_EQ(set_bins(bad, &updated, curator).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::TableSchema binned = dataset.schema();
  for (double edge : {20.0, 40.0, 80.0, 160.0}) binned.mutable_columns(3)->add_bins(edge);
  client::Connection analyst = Analyst();
  EXPECT_EQ(set_bins(binned, &updated, analyst).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  status = set_bins(binned, &updated, curator);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_NE(updated.schema_fingerprint(), dataset.schema_fingerprint());
  EXPECT_EQ(updated.schema().columns(3).bins_size(), 4);
  EXPECT_EQ(updated.row_count(), kPartitionReleaseRows);
  EXPECT_EQ(EventCount(dataset.id()), 1);  // the ledger continues, nothing added
  v1::Release replayed;
  ASSERT_TRUE(
      RequestRelease(MarginalsRequest(dataset.id(), "before", /*partitioned=*/false), &replayed)
          .ok());
  EXPECT_EQ(replayed.marginals().schema_fingerprint(), dataset.schema_fingerprint());
  EXPECT_EQ(replayed.marginals().schema().columns(3).bins_size(), 0);
  v1::Release after;
  ASSERT_TRUE(
      RequestRelease(MarginalsRequest(dataset.id(), "after", /*partitioned=*/false), &after)
          .ok());
  EXPECT_EQ(after.marginals().schema_fingerprint(), updated.schema_fingerprint());
  EXPECT_EQ(after.marginals().schema().columns(3).bins_size(), 4);
  EXPECT_EQ(EventCount(dataset.id()), 2);
}

}  // namespace
}  // namespace dpcurator::server::testing
