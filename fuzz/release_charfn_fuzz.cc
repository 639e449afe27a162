// Totality fuzz target: the charfn_embedding release (PEARL), with a
// declared or a private length-scale, issue 23 0(e).
//
// Input (fuzz/engine_fuzz.h): dataset header, then privacy (epsilon or
// noise multiplier, any double), num_frequencies, an optional declared
// length-scale, private_length_scale, an optional numeric length-scale (any
// sign), the public seed byte and the noise seed byte, then the rows.
// Runs PlanRelease -> admission -> ComputeRelease and aborts unless an
// admitted release is OK, of the planned shape and finite (the released
// mean distance included).

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
  v1::CharfnEmbeddingParams& params = *request.mutable_charfn_embedding();
  params.set_num_frequencies(in.Count(release::kMaxNumFrequencies));
  if (in.Bool()) params.set_length_scale(in.Double());
  params.set_private_length_scale(in.Bool());
  if (in.Bool()) params.set_numeric_length_scale(in.Bool() ? in.Double() : -in.Double());
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
  DPC_FUZZ_CHECK(release->has_embedding(), "charfn release without an embedding\n  request: %s",
                 description.c_str());
  absl::StatusOr<server::ReleasePlan> plan = server::PlanRelease(request, ds->dataset, ds->schema);
  const v1::CharfnEmbeddingParams& resolved = plan->resolved_request.charfn_embedding();
  fuzz::CheckEmbeddingArtefact(release->embedding(),
                               fuzz::CharfnFeatureDim(resolved.num_frequencies()),
                               ds->schema.num_classes(), description);
  DPC_FUZZ_CHECK(release->embedding().length_scale_private() == resolved.private_length_scale(),
                 "the private length-scale was planned %d and released %d\n  request: %s",
                 resolved.private_length_scale(), release->embedding().length_scale_private(),
                 description.c_str());
  return 0;
}
