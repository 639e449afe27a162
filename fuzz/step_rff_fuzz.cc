// Totality fuzz target: the rff_embedding session step (DP-MERF's minibatch
// variant), issue 23 0(e).
//
// Input (fuzz/engine_fuzz.h): dataset header, then steps, sampling rate,
// privacy (epsilon for all steps or a noise multiplier, any double), the rff
// parameters (as release_rff), the noise seed byte, then the rows. Runs
// PlanSession -> admission of the T steps -> CheckStepQuery ->
// ComputeSessionStep and aborts unless an admitted step is OK with a finite
// embedding of the planned shape.

#include <string>

#include "core/release/labelled_release.h"
#include "fuzz/engine_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dpcurator;
  fuzz::FuzzInput in(data, size);
  const std::optional<fuzz::DatasetHeader> header = fuzz::ReadDatasetHeader(&in);
  if (!header.has_value()) return 0;
  v1::OpenSessionRequest open;
  open.set_dataset_id(header->dataset.id());
  open.set_idempotency_key("fuzz");
  v1::SessionParams& params = *open.mutable_params();
  fuzz::ReadSessionCommon(&in, &params);
  v1::RffEmbeddingParams& rff = *params.mutable_rff_embedding();
  rff.set_num_frequencies(in.Count(release::kMaxNumFrequencies));
  if (in.Bool()) rff.set_length_scale(in.Double());
  if (in.Bool()) {
    rff.set_has_numeric_weight(true);
    rff.set_numeric_weight(in.Double());
  }
  rff.set_seed(in.Byte());
  const uint64_t noise_seed = in.Byte();
  v1::SessionStepRequest step;
  step.set_session_id("ses_fuzz");
  step.set_step(0);
  if (in.Bool()) step.mutable_rff_embedding();
  const std::optional<fuzz::FuzzDataset> ds = fuzz::BuildRows(*header, &in);
  if (!ds.has_value()) return 0;
  const std::string description = open.ShortDebugString() + "\n  " + fuzz::DescribeDataset(*ds);
  const std::optional<fuzz::StepOutcome> outcome =
      fuzz::AdmitAndStep(open, step, *ds, noise_seed, description);
  if (!outcome.has_value()) return 0;
  DPC_FUZZ_CHECK(outcome->response.has_batch(), "rff step without a batch\n  request: %s",
                 description.c_str());
  fuzz::CheckEmbeddingArtefact(
      outcome->response.batch(),
      fuzz::RffFeatureDim(outcome->session.params().rff_embedding().num_frequencies(),
                          ds->schema),
                               ds->schema.num_classes(), description);
  return 0;
}
