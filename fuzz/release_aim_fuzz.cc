// Totality fuzz target: the AIM recipe (noisy 1-way marginals, then
// adaptive rounds of exponential-mechanism selections and Gaussian
// measurements until rho is spent), issue 26 item 4.
//
// Input (fuzz/engine_fuzz.h): dataset header (numeric columns with 0 to 3
// bins), then privacy (any double; only epsilon is accepted), three bytes of
// aim parameters (rounds: 0 default, else the byte; max_model_cells: 0
// default, else byte x 4; workload: 0 default, else one clique of the
// columns its bits name, bit 7 adding an unknown name), the noise seed byte,
// then the rows. Runs PlanRelease -> admission -> ComputeAimRelease and
// aborts unless an admitted release is OK with n one-way tables over each
// column's domain, at least one and at most rounds + 1 rounds, each a table
// over its clique's domain, the schedule's sum at most rho, every number
// finite.

#include <string>

#include "core/data/discretize.h"
#include "fuzz/engine_fuzz.h"

namespace {

using namespace dpcurator;

void CheckTable(const v1::NoisyMarginalTable& table, const data::Discretizer& domain,
                const std::string& description) {
  bool shape_ok = table.clique_size() >= 1 && table.shape_size() == table.clique_size();
  int64_t cells = 1;
  for (int i = 0; shape_ok && i < table.clique_size(); ++i) {
    const int c = table.clique(i);
    shape_ok = c >= 0 && c < domain.num_columns() && table.shape(i) == domain.domain_size(c);
    if (shape_ok) cells *= domain.domain_size(c);
  }
  DPC_FUZZ_CHECK(shape_ok && table.counts_size() == cells,
                 "marginal of the wrong shape: %s\n  request: %s",
                 table.ShortDebugString().c_str(), description.c_str());
  DPC_FUZZ_CHECK(fuzz::AllFinite(table.counts()) && std::isfinite(table.noise_std()),
                 "marginal counts: %s (noise_std %g)\n  request: %s",
                 fuzz::FirstNonFinite(table.counts()).c_str(), table.noise_std(),
                 description.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::FuzzInput in(data, size);
  const std::optional<fuzz::DatasetHeader> header = fuzz::ReadDatasetHeader(&in);
  if (!header.has_value()) return 0;
  v1::ReleaseRequest request;
  request.set_dataset_id(header->dataset.id());
  request.set_idempotency_key("fuzz");
  fuzz::ReadReleasePrivacy(&in, &request);
  v1::AimParams& params = *request.mutable_aim();
  params.set_rounds(in.Byte());
  params.set_max_model_cells(int64_t{in.Byte()} * 4);
  const uint8_t workload = in.Byte();
  const uint64_t noise_seed = in.Byte();
  const std::optional<fuzz::FuzzDataset> ds = fuzz::BuildRows(*header, &in);
  if (!ds.has_value()) return 0;
  if (workload != 0) {
    v1::AimClique& clique = *params.add_workload();
    for (int c = 0; c < 7 && c < ds->schema.num_columns(); ++c) {
      if (workload & (1 << c)) clique.add_columns(ds->schema.column(c).name);
    }
    if (workload & 0x80) clique.add_columns("no_such_column");
  }
  const std::string description =
      request.ShortDebugString() + "\n  " + fuzz::DescribeDataset(*ds);
  std::optional<v1::Release> release = fuzz::AdmitAndRun(
      request, *ds, description, [&](const server::ReleasePlan& plan, double epsilon) {
        privacy::SeededNoiseSource noise(noise_seed);
        return server::ComputeAimRelease(plan, ds->dataset, ds->schema, ds->table, "rel_fuzz",
                                         epsilon, &noise);
      });
  if (!release.has_value()) return 0;
  DPC_FUZZ_CHECK(release->has_aim(), "aim release without an aim artefact\n  request: %s",
                 description.c_str());
  const v1::AimArtefact& aim = release->aim();
  absl::StatusOr<data::Discretizer> domain = data::Discretizer::Create(ds->schema);
  DPC_FUZZ_CHECK(domain.ok(), "admitted aim on a schema without a discrete domain\n  request: %s",
                 description.c_str());
  const int n = ds->schema.num_columns();
  DPC_FUZZ_CHECK(aim.one_way_size() == n && aim.domain_sizes_size() == n &&
                     aim.rounds_size() >= 1 && aim.rounds_size() <= aim.planned_rounds() + 1,
                 "aim of the wrong shape: %d one-way, %d rounds of %d planned, %d columns\n"
                 "  request: %s",
                 aim.one_way_size(), aim.rounds_size(), aim.planned_rounds(), n,
                 description.c_str());
  for (int c = 0; c < n; ++c) {
    DPC_FUZZ_CHECK(aim.one_way(c).clique_size() == 1 && aim.one_way(c).clique(0) == c,
                   "aim 1-way table %d is not column %d's\n  request: %s", c, c,
                   description.c_str());
    CheckTable(aim.one_way(c), *domain, description);
  }
  for (const v1::AimRoundRecord& round : aim.rounds()) {
    CheckTable(round.measurement(), *domain, description);
    const double scalars[] = {round.noise_multiplier(), round.selection_epsilon(),
                              round.rho_used()};
    DPC_FUZZ_CHECK(fuzz::AllFinite(scalars) && round.rho_used() <= aim.rho(),
                   "aim round: %s (rho %g)\n  request: %s", round.ShortDebugString().c_str(),
                   aim.rho(), description.c_str());
  }
  const double scalars[] = {aim.rho(), aim.one_way_noise_multiplier(), aim.epsilon()};
  DPC_FUZZ_CHECK(fuzz::AllFinite(scalars), "aim scalar: %s\n  request: %s",
                 fuzz::FirstNonFinite(scalars).c_str(), description.c_str());
  return 0;
}
