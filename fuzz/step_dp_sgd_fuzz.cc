// Totality fuzz target: the dp_sgd session step, issue 23 0(e) and the row
// oracle of its first item.
//
// Input (fuzz/engine_fuzz.h): dataset header, then steps, sampling rate,
// privacy, the network (0..9 hidden layers of widths 1..64 or the edges 0,
// 4096, 4097, -1; activation ""/relu/leaky_relu/tanh/unknown; any slope;
// loss unset/BCE/WGAN critic), clip norm and expected batch size (any
// double), the noise seed byte, the weights as a FloatPattern (palettes of
// 3e38, -3e38, denormals, mixed signs, raw floats), then the rows. Runs
// PlanSession -> admission -> CheckStepQuery (finite parameters of the
// declared count) -> ComputeSessionStep and aborts unless an admitted step
// answers OK with num_parameters finite floats and a finite divisor.

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
  v1::DpSgdParams& net = *params.mutable_dp_sgd();
  const int layers = in.Byte() % 10;
  for (int l = 0; l < layers; ++l) {
    const uint8_t w = in.Byte();
    net.add_hidden(w == 0 ? 0 : w == 1 ? 4096 : w == 2 ? 4097 : w == 3 ? -1 : 1 + (w - 4) % 64);
  }
  constexpr const char* kActivations[] = {"", "relu", "leaky_relu", "tanh", "softmax"};
  net.set_activation(kActivations[in.Byte() % 5]);
  if (in.Bool()) net.set_leaky_relu_slope(in.Double());
  net.set_loss(static_cast<v1::DpSgdLoss>(in.Byte() % 3));
  net.set_clip_norm(in.Double());
  net.set_expected_batch_size(in.Double());
  const uint64_t noise_seed = in.Byte();
  // One more or one fewer parameter than declared now and then (refused).
  const int count_error = static_cast<int>(in.Byte() % 16) == 15 ? 1 : 0;
  fuzz::FloatPattern weights(&in);
  const std::optional<fuzz::FuzzDataset> ds = fuzz::BuildRows(*header, &in);
  if (!ds.has_value()) return 0;
  // The declared count is the server's (PlanSession resolves it); the
  // trainer sends that many values.
  absl::StatusOr<server::SessionPlan> plan = server::PlanSession(open, ds->dataset);
  if (!plan.ok()) return 0;
  const int64_t count = plan->resolved_params.dp_sgd().num_parameters() + count_error;
  v1::SessionStepRequest step;
  step.set_session_id("ses_fuzz");
  step.set_step(0);
  auto& values = *step.mutable_dp_sgd()->mutable_parameters();
  values.Reserve(static_cast<int>(count));
  for (int64_t i = 0; i < count; ++i) values.Add(weights.At(i));
  const std::string description = open.ShortDebugString() + "\n  weights: " +
                                  weights.Describe() + "\n  " + fuzz::DescribeDataset(*ds);
  const std::optional<fuzz::StepOutcome> outcome =
      fuzz::AdmitAndStep(open, step, *ds, noise_seed, description);
  if (!outcome.has_value()) return 0;
  DPC_FUZZ_CHECK(outcome->response.has_gradient(), "dp_sgd step without a gradient\n  request: %s",
                 description.c_str());
  const v1::DpSgdGradient& gradient = outcome->response.gradient();
  DPC_FUZZ_CHECK(gradient.gradient_size() == count,
                 "dp_sgd gradient has %d values for %d parameters\n  request: %s",
                 gradient.gradient_size(), static_cast<int>(count), description.c_str());
  DPC_FUZZ_CHECK(fuzz::AllFinite(gradient.gradient()), "dp_sgd gradient: %s\n  request: %s",
                 fuzz::FirstNonFinite(gradient.gradient()).c_str(), description.c_str());
  DPC_FUZZ_CHECK(std::isfinite(gradient.divisor()) && gradient.divisor() > 0,
                 "dp_sgd divisor %g\n  request: %s", gradient.divisor(), description.c_str());
  return 0;
}
