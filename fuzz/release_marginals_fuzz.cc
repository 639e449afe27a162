// Totality fuzz target: the marginals release, ordinary or partitioned by
// the label (issue 27 item 4; plan/partition.h).
//
// Input (fuzz/engine_fuzz.h): dataset header, privacy (any double), then
//   partition byte   bit 0: partition by the label column "y"; bit 1: name
//                    the values of the next byte's mask (y0, y1, y2; an
//                    empty mask: every one); bit 2: by column "c0" instead;
//                    bit 3: over release::FitGridSchema of every numeric
//                    column (issue 38's bin fit: the fine grid as bins); bit 4:
//                    instead a category_fit release (issue 38; below)
//   cliques          a count 0..3 (0: the default, every 1-way but the
//                    label), each a size 1..3 and that many column bytes
//   noise seed byte, then the rows.
// Runs PlanRelease -> admission -> ComputeMarginalsRelease and aborts
// unless an admitted release is OK with every part's tables (one part when
// ordinary) of the planned shape over the columns' domains, every number
// finite, an empty part included.
//
// category_fit (bit 4): then a column byte (its open flag: bit 7), a
// max_categories selector, a delta_0 (any double), a dictionary size (up to
// 255 x 6 entries, some repeating a value: many distinct values), a repeat
// exponent (each read index counts up to 1,024 times: huge counts),
// the noise seed, the rows (for the dataset record), and 64 index bytes
// (255: missing, 254: past the dictionary). Runs PlanRelease -> admission
// -> ComputeCategoryFitRelease and aborts unless an admitted release lists
// at most max_categories values, strictly sorted, each a value of the
// dictionary that some row holds, with finite scalars.

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/release/category_fit.h"

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

// The category_fit case (bit 4 of the partition byte).
void FuzzCategoryFit(const fuzz::DatasetHeader& header, fuzz::FuzzInput* in,
                     v1::ReleaseRequest request) {
  request.clear_marginals();
  v1::CategoryFitParams& params = *request.mutable_category_fit();
  const uint8_t column_byte = in->Byte();
  fuzz::DatasetHeader declared = header;
  v1::TableSchema& schema = *declared.dataset.mutable_schema();
  const int column = (column_byte & 0x7f) % schema.columns_size();
  // Open (the request's normal case) unless bit 7 says declared.
  if (!(column_byte & 0x80)) schema.mutable_columns(column)->set_open(true);
  params.set_column(schema.columns(column).name());
  constexpr int32_t kMaxCategories[] = {0, 1, 2, 5, 1000, 10000, 10001, -1};
  params.set_max_categories(kMaxCategories[in->Byte() % 8]);
  params.set_delta_0(in->Byte() % 2 == 0 ? 0.0 : in->Double());
  const int dictionary_size = in->Byte();  // up to 255 (x 6 below)
  const int repeat = 1 << (in->Byte() % 11);
  const uint64_t noise_seed = in->Byte();
  std::optional<fuzz::FuzzDataset> ds = fuzz::BuildRows(declared, in);
  if (!ds.has_value()) return;
  // The stored column: a dictionary (some entries repeat a value) and indices.
  release::OpenColumnValues values;
  for (int i = 0; i < 6 * dictionary_size; ++i) {
    values.dictionary.push_back(absl::StrCat("v", i % (1 + 5 * dictionary_size)));
  }
  const auto size = static_cast<int32_t>(values.dictionary.size());
  for (int read = 0; read < 64; ++read) {
    const uint8_t b = in->Byte();
    int32_t index = release::kMissingOpenValue;
    if (b == 254) {
      index = size + 3;
    } else if (b != 255 && size > 0) {
      index = static_cast<int32_t>((b * 131 + read * 7919) % size);
    }
    values.indices.insert(values.indices.end(), static_cast<size_t>(repeat), index);
  }
  const std::string description =
      request.ShortDebugString() + "\n  " + fuzz::DescribeDataset(*ds) +
      absl::StrFormat("\n  dictionary %d, indices %zu", size, values.indices.size());
  int64_t max_categories = 0;
  std::optional<v1::Release> release = fuzz::AdmitAndRun(
      request, *ds, description,
      [&](const server::ReleasePlan& plan, double epsilon) -> absl::StatusOr<v1::Release> {
        max_categories = plan.category_fit->params.max_categories;
        privacy::SeededNoiseSource noise(noise_seed);
        return plan::ComputeCategoryFitRelease(*plan.category_fit, ds->dataset, values,
                                               "rel_fuzz", "fuzz", epsilon, &noise);
      });
  if (!release.has_value()) return;
  DPC_FUZZ_CHECK(release->has_category_fit(), "category_fit release without its artefact\n  %s",
                 description.c_str());
  const v1::CategoryFitArtefact& fit = release->category_fit();
  DPC_FUZZ_CHECK(fit.categories_size() <= max_categories,
                 "category_fit published %d values, max_categories %lld\n  %s",
                 fit.categories_size(), static_cast<long long>(max_categories),
                 description.c_str());
  std::set<std::string> held;
  for (const int32_t index : values.indices) {
    if (index >= 0 && index < size) held.insert(values.dictionary[index]);
  }
  for (int i = 0; i < fit.categories_size(); ++i) {
    DPC_FUZZ_CHECK(i == 0 || fit.categories(i - 1) < fit.categories(i),
                   "category_fit list not strictly sorted at %d\n  %s", i, description.c_str());
    DPC_FUZZ_CHECK(held.count(fit.categories(i)) == 1,
                   "category_fit published a value no row holds\n  %s", description.c_str());
  }
  const double scalars[] = {fit.sigma(), fit.delta_0(), fit.epsilon(), fit.delta()};
  DPC_FUZZ_CHECK(fuzz::AllFinite(scalars) && fit.sigma() >= 1 && fit.threshold() >= 2 &&
                     fit.delta_0() > 0 && fit.delta_0() < fit.delta(),
                 "category_fit scalars: sigma %g tau %lld delta_0 %g delta %g\n  %s",
                 fit.sigma(), static_cast<long long>(fit.threshold()), fit.delta_0(),
                 fit.delta(), description.c_str());
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
  if (partition & 16) {
    FuzzCategoryFit(*header, &in, request);
    return 0;
  }
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
