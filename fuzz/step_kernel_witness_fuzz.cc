// Totality fuzz target: the kernel_witness session step (DP-kernel), issue
// 23 0(e).
//
// Input (fuzz/engine_fuzz.h): dataset header, then steps, sampling rate,
// privacy, 0..3 bandwidths (any double; none: the default), conditional,
// expected batch size (any double; REPLACE_ONE: the server's floor(q n)),
// parallel (refused), max_points, the noise seed byte, the number of query
// points, the points as a FloatPattern, one label byte per point, then the
// rows. Runs PlanSession -> admission -> CheckStepQuery ->
// ComputeSessionStep and aborts unless an admitted step answers OK with M
// finite values, M x d finite gradients and a finite divisor.

#include <string>

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
  v1::KernelWitnessParams& kernel = *params.mutable_kernel_witness();
  const int bandwidths = in.Byte() % 4;
  for (int b = 0; b < bandwidths; ++b) kernel.add_bandwidths(in.Double());
  kernel.set_conditional(in.Bool());
  kernel.set_expected_batch_size(in.Double());
  kernel.set_parallel(in.Byte() % 16 == 15);
  kernel.set_max_points(in.Count(64));
  const uint64_t noise_seed = in.Byte();
  const int num_points = in.Count(64);
  fuzz::FloatPattern points(&in);
  std::vector<uint8_t> label_bytes;
  for (int i = 0; i < std::clamp(num_points, 0, 1024); ++i) label_bytes.push_back(in.Byte());
  const std::optional<fuzz::FuzzDataset> ds = fuzz::BuildRows(*header, &in);
  if (!ds.has_value()) return 0;
  absl::StatusOr<server::SessionPlan> plan = server::PlanSession(open, ds->dataset);
  if (!plan.ok()) return 0;
  const int dimension = plan->resolved_params.kernel_witness().dimension();
  const int classes = std::max(1, ds->schema.num_classes());
  v1::SessionStepRequest step;
  step.set_session_id("ses_fuzz");
  step.set_step(0);
  v1::KernelWitnessQuery& query = *step.mutable_kernel_witness();
  query.set_num_points(num_points);
  const int64_t coordinates = int64_t{std::clamp(num_points, 0, 1024)} * dimension;
  for (int64_t i = 0; i < coordinates; ++i) query.add_points(points.At(i));
  if (kernel.conditional()) {
    // Now and then a label out of range (refused before the rows).
    for (const uint8_t b : label_bytes) query.add_labels(b % 32 == 31 ? classes : b % classes);
  }
  const std::string description = open.ShortDebugString() + "\n  points: " +
                                  absl::StrFormat("%d x %d, ", num_points, dimension) +
                                  points.Describe() + "\n  " + fuzz::DescribeDataset(*ds);
  const std::optional<fuzz::StepOutcome> outcome =
      fuzz::AdmitAndStep(open, step, *ds, noise_seed, description);
  if (!outcome.has_value()) return 0;
  DPC_FUZZ_CHECK(outcome->response.has_witness(),
                 "kernel_witness step without a witness\n  request: %s", description.c_str());
  const v1::KernelWitnessValues& witness = outcome->response.witness();
  DPC_FUZZ_CHECK(witness.values_size() == num_points &&
                     witness.gradients_size() == int64_t{num_points} * dimension,
                 "kernel_witness answer has %d values and %d gradients for %d points of "
                 "dimension %d\n  request: %s",
                 witness.values_size(), witness.gradients_size(), num_points, dimension,
                 description.c_str());
  DPC_FUZZ_CHECK(fuzz::AllFinite(witness.values()), "kernel_witness values: %s\n  request: %s",
                 fuzz::FirstNonFinite(witness.values()).c_str(), description.c_str());
  DPC_FUZZ_CHECK(fuzz::AllFinite(witness.gradients()),
                 "kernel_witness gradients: %s\n  request: %s",
                 fuzz::FirstNonFinite(witness.gradients()).c_str(), description.c_str());
  DPC_FUZZ_CHECK(std::isfinite(witness.divisor()) && witness.divisor() > 0,
                 "kernel_witness divisor %g\n  request: %s", witness.divisor(),
                 description.c_str());
  return 0;
}
