// Totality fuzz target: the MST recipe (noisy 1-way marginals, n - 1
// exponential mechanisms choosing a tree, noisy 2-way marginals), issue 23
// 0(e).
//
// Input (fuzz/engine_fuzz.h): dataset header (numeric columns with 0 to 3
// bins; MST refuses a column without a discrete domain), then privacy (any
// double; only epsilon is accepted), the noise seed byte, then the rows.
// Runs PlanRelease -> admission -> ComputeMstRelease and aborts unless an
// admitted release is OK with n one-way tables over each column's domain,
// an n - 1 edge spanning tree, the two-way tables of its edges, every
// number finite.

#include <numeric>
#include <string>

#include "core/data/discretize.h"
#include "fuzz/engine_fuzz.h"

namespace {

using namespace dpcurator;

void CheckTable(const v1::NoisyMarginalTable& table, const std::vector<int>& clique,
                const data::Discretizer& domain, const std::string& description) {
  bool shape_ok = table.clique_size() == static_cast<int>(clique.size()) &&
                  table.shape_size() == static_cast<int>(clique.size());
  int64_t cells = 1;
  for (size_t i = 0; shape_ok && i < clique.size(); ++i) {
    shape_ok = table.clique(static_cast<int>(i)) == clique[i] &&
               table.shape(static_cast<int>(i)) == domain.domain_size(clique[i]);
    cells *= domain.domain_size(clique[i]);
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
  request.mutable_mst();
  const uint64_t noise_seed = in.Byte();
  const std::optional<fuzz::FuzzDataset> ds = fuzz::BuildRows(*header, &in);
  if (!ds.has_value()) return 0;
  const std::string description =
      request.ShortDebugString() + "\n  " + fuzz::DescribeDataset(*ds);
  std::optional<v1::Release> release = fuzz::AdmitAndRun(
      request, *ds, description, [&](const server::ReleasePlan& plan, double epsilon) {
        privacy::SeededNoiseSource noise(noise_seed);
        return server::ComputeMstRelease(plan, ds->dataset, ds->schema, ds->table, "rel_fuzz",
                                         epsilon, &noise);
      });
  if (!release.has_value()) return 0;
  DPC_FUZZ_CHECK(release->has_mst(), "mst release without an mst artefact\n  request: %s",
                 description.c_str());
  const v1::MstArtefact& mst = release->mst();
  absl::StatusOr<data::Discretizer> domain = data::Discretizer::Create(ds->schema);
  DPC_FUZZ_CHECK(domain.ok(), "admitted mst on a schema without a discrete domain\n  request: %s",
                 description.c_str());
  const int n = ds->schema.num_columns();
  DPC_FUZZ_CHECK(mst.one_way_size() == n && mst.edges_size() == n - 1 &&
                     mst.two_way_size() == n - 1 && mst.domain_sizes_size() == n,
                 "mst of the wrong shape: %d one-way, %d edges, %d two-way for %d columns\n"
                 "  request: %s",
                 mst.one_way_size(), mst.edges_size(), mst.two_way_size(), n,
                 description.c_str());
  for (int c = 0; c < n; ++c) CheckTable(mst.one_way(c), {c}, *domain, description);
  // The edges form a spanning tree: n - 1 edges joining n columns, no cycle.
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (int e = 0; e < n - 1; ++e) {
    const int i = mst.edges(e).first(), j = mst.edges(e).second();
    DPC_FUZZ_CHECK(i >= 0 && i < n && j >= 0 && j < n && find(i) != find(j),
                   "mst edge %d (%d, %d) is not a tree edge\n  request: %s", e, i, j,
                   description.c_str());
    parent[find(i)] = find(j);
    CheckTable(mst.two_way(e), {i, j}, *domain, description);
  }
  const double scalars[] = {mst.rho(), mst.one_way_noise_multiplier(), mst.selection_epsilon(),
                            mst.two_way_noise_multiplier(), mst.epsilon()};
  DPC_FUZZ_CHECK(fuzz::AllFinite(scalars), "mst scalar: %s\n  request: %s",
                 fuzz::FirstNonFinite(scalars).c_str(), description.c_str());
  return 0;
}
