// Totality fuzz target: the marginals release, ordinary or partitioned by
// the label (issue 27 item 4; plan/partition.h).
//
// Input (fuzz/engine_fuzz.h): dataset header, privacy (any double), then
//   partition byte   bit 0: partition by the label column "y"; bit 1: name
//                    the values of the next byte's mask (y0, y1, y2; an
//                    empty mask: every one); bit 2: by column "c0" instead;
//                    bit 3: over release::FitGridSchema of every numeric
//                    column (issue 38's bin fit: the fine grid as bins)
//   cliques          a count 0..3 (0: the default, every 1-way but the
//                    label), each a size 1..3 and that many column bytes
//   noise seed byte, then the rows.
// Runs PlanRelease -> admission -> ComputeMarginalsRelease and aborts
// unless an admitted release is OK with every part's tables (one part when
// ordinary) of the planned shape over the columns' domains, every number
// finite, an empty part included.

#include <string>
#include <vector>

#include "core/data/discretize.h"
#include "core/release/bin_fit.h"
#include "fuzz/engine_fuzz.h"
#include "server/plans.h"

namespace {

using namespace dpcurator;

void CheckArtefact(const v1::MarginalsArtefact& artefact, const data::Discretizer& domain,
                   int num_columns, const std::string& description) {
  DPC_FUZZ_CHECK(artefact.tables_size() > 0, "marginals artefact without tables\n  request: %s",
                 description.c_str());
  for (const v1::NoisyMarginalTable& table : artefact.tables()) {
    bool shape_ok = table.clique_size() > 0 && table.clique_size() == table.shape_size();
    int64_t cells = 1;
    for (int i = 0; shape_ok && i < table.clique_size(); ++i) {
      shape_ok = table.clique(i) >= 0 && table.clique(i) < num_columns &&
                 table.shape(i) == domain.domain_size(table.clique(i));
      if (shape_ok) cells *= table.shape(i);
    }
    DPC_FUZZ_CHECK(shape_ok && table.counts_size() == cells,
                   "marginal of the wrong shape: %s\n  request: %s",
                   table.ShortDebugString().c_str(), description.c_str());
    DPC_FUZZ_CHECK(fuzz::AllFinite(table.counts()) && std::isfinite(table.noise_std()),
                   "marginal counts: %s (noise_std %g)\n  request: %s",
                   fuzz::FirstNonFinite(table.counts()).c_str(), table.noise_std(),
                   description.c_str());
  }
  const double scalars[] = {artefact.epsilon(), artefact.noise_multiplier(),
                            artefact.sensitivity()};
  DPC_FUZZ_CHECK(fuzz::AllFinite(scalars), "marginals scalar: %s\n  request: %s",
                 fuzz::FirstNonFinite(scalars).c_str(), description.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::FuzzInput in(data, size);
  const std::optional<fuzz::DatasetHeader> header = fuzz::ReadDatasetHeader(&in);
  if (!header.has_value()) return 0;
  const v1::TableSchema& schema_proto = header->dataset.schema();
  v1::ReleaseRequest request;
  request.set_dataset_id(header->dataset.id());
  request.set_idempotency_key("fuzz");
  fuzz::ReadReleasePrivacy(&in, &request);
  v1::MarginalsParams& params = *request.mutable_marginals();
  const uint8_t partition = in.Byte();
  if (partition & 1) {
    request.mutable_partition()->set_column((partition & 4) ? "c0" : "y");
    if (partition & 2) {
      const uint8_t mask = in.Byte();
      constexpr const char* kValues[] = {"y0", "y1", "y2"};
      for (int l = 0; l < 3; ++l) {
        if (mask & (1 << l)) request.mutable_partition()->add_values(kValues[l]);
      }
    }
  }
  const int cliques = in.Byte() % 4;
  for (int k = 0; k < cliques; ++k) {
    v1::AimClique& clique = *params.add_cliques();
    const int columns = 1 + in.Byte() % 3;
    for (int c = 0; c < columns; ++c) {
      clique.add_columns(schema_proto.columns(in.Byte() % schema_proto.columns_size()).name());
    }
  }
  const uint64_t noise_seed = in.Byte();
  std::optional<fuzz::FuzzDataset> ds = fuzz::BuildRows(*header, &in);
  if (!ds.has_value()) return 0;
  if (partition & 8) {
    std::vector<int> numeric;
    for (int c = 0; c < ds->schema.num_columns(); ++c) {
      if (ds->schema.column(c).type == data::ColumnType::kNumeric) numeric.push_back(c);
    }
    absl::StatusOr<data::Schema> grid = release::FitGridSchema(ds->schema, numeric);
    DPC_FUZZ_CHECK(grid.ok(), "no fine grid for a valid schema: %s",
                   grid.status().ToString().c_str());
    ds->schema = *std::move(grid);
  }
  const std::string description =
      request.ShortDebugString() + "\n  " + fuzz::DescribeDataset(*ds);
  std::optional<v1::Release> release = fuzz::AdmitAndRun(
      request, *ds, description, [&](const server::ReleasePlan& plan, double epsilon) {
        privacy::SeededNoiseSource noise(noise_seed);
        return server::ComputeMarginalsRelease(*plan.marginals, ds->dataset, ds->schema,
                                               ds->table, "rel_fuzz", "fuzz", epsilon, &noise);
      });
  if (!release.has_value()) return 0;
  absl::StatusOr<data::Discretizer> domain = data::Discretizer::Create(ds->schema);
  DPC_FUZZ_CHECK(domain.ok(), "admitted marginals without a discrete domain\n  request: %s",
                 description.c_str());
  const int n = ds->schema.num_columns();
  if (!request.has_partition()) {
    DPC_FUZZ_CHECK(release->has_marginals(), "marginals release without its artefact\n  %s",
                   description.c_str());
    CheckArtefact(release->marginals(), *domain, n, description);
    return 0;
  }
  DPC_FUZZ_CHECK(release->has_partitioned(), "partitioned release without its artefact\n  %s",
                 description.c_str());
  const v1::PartitionedArtefact& parts = release->partitioned();
  const int expected = request.partition().values_size() > 0
                           ? request.partition().values_size()
                           : ds->schema.num_classes();
  DPC_FUZZ_CHECK(parts.marginals_size() == expected && parts.values_size() == expected,
                 "partitioned release of %d parts (%d values), planned %d\n  request: %s",
                 parts.marginals_size(), parts.values_size(), expected, description.c_str());
  for (const v1::MarginalsArtefact& part : parts.marginals()) {
    DPC_FUZZ_CHECK(part.tables_size() == parts.marginals(0).tables_size(),
                   "parts of different shapes\n  request: %s", description.c_str());
    CheckArtefact(part, *domain, n, description);
  }
  return 0;
}
