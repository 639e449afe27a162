// Totality fuzz target: the rff_embedding release (DP-MERF), issue 23 0(e).
//
// Input (fuzz/engine_fuzz.h): dataset header, then privacy (epsilon or
// noise multiplier, any double), num_frequencies (edge counts: 0, the
// maximum, one past it, -1, INT_MAX, or 1..64), an optional length-scale,
// an optional numeric weight, the public seed byte and the noise seed
// byte, then the rows. Runs PlanRelease -> admission -> ComputeRelease and
// aborts unless an admitted release is OK, of the planned shape (2k
// features per class, one total per class) and finite.

#include <string>

#include "core/release/labelled_release.h"
#include "fuzz/engine_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dpcurator;
  fuzz::FuzzInput in(data, size);
  const std::optional<fuzz::DatasetHeader> header = fuzz::ReadDatasetHeader(&in);
  if (!header.has_value()) return 0;
  v1::ReleaseRequest request;
  request.set_dataset_id(header->dataset.id());
  request.set_idempotency_key("fuzz");
  fuzz::ReadReleasePrivacy(&in, &request);
  v1::RffEmbeddingParams& params = *request.mutable_rff_embedding();
  params.set_num_frequencies(in.Count(release::kMaxNumFrequencies));
  if (in.Bool()) params.set_length_scale(in.Double());
  if (in.Bool()) {
    params.set_has_numeric_weight(true);
    params.set_numeric_weight(in.Double());
  }
  params.set_seed(in.Byte());
  const uint64_t noise_seed = in.Byte();
  const std::optional<fuzz::FuzzDataset> ds = fuzz::BuildRows(*header, &in);
  if (!ds.has_value()) return 0;
  const std::string description =
      request.ShortDebugString() + "\n  " + fuzz::DescribeDataset(*ds);
  std::optional<v1::Release> release = fuzz::AdmitAndRun(
      request, *ds, description, [&](const server::ReleasePlan& plan, double epsilon) {
        privacy::SeededNoiseSource noise(noise_seed);
        return server::ComputeRelease(plan, ds->dataset, ds->rows, "rel_fuzz", epsilon, &noise);
      });
  if (!release.has_value()) return 0;
  DPC_FUZZ_CHECK(release->has_embedding(), "rff release without an embedding\n  request: %s",
                 description.c_str());
  // The planned k: the resolved request's (PlanRelease fills the default).
  absl::StatusOr<server::ReleasePlan> plan = server::PlanRelease(request, ds->dataset, ds->schema);
  const int k = plan->resolved_request.rff_embedding().num_frequencies();
  fuzz::CheckEmbeddingArtefact(release->embedding(), fuzz::RffFeatureDim(k, ds->schema),
                               ds->schema.num_classes(), description);
  return 0;
}
