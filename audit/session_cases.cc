#include "audit/session_cases.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "audit/plan_fixture.h"
#include "core/data/schema.h"
#include "core/nn/mlp.h"
#include "core/privacy/accounting.h"
#include "core/privacy/events.h"
#include "core/release/dp_sgd.h"
#include "core/release/kernel_witness.h"
#include "core/release/step_batch.h"
#include "core/util/status_macros.h"
#include "plan/partition.h"
#include "plan/releases.h"
#include "plan/session_part.h"

namespace dpcurator::audit {
namespace {

using privacy::NeighbouringRelation;

constexpr char kDatasetId[] = "audit_session";

// A step's answer as SetStepAnswer puts it in the response, read as the
// vector the distinguisher projects.
using AnswerReader =
    std::function<absl::StatusOr<Eigen::VectorXd>(const v1::SessionStepResponse& response)>;
// The L2 sensitivity Delta of that vector's noiseless statistic, from the
// public fields of an answer (its divisor, its public n), so the noise std
// per coordinate is s Delta.
using AnswerSensitivity = std::function<double(const v1::SessionStepResponse& response)>;

// One kind's game before planning: what a client would declare at open
// (the step kind's part of SessionParams), the public schema, and the rows
// of the neighbouring datasets, as cells in schema order.
struct KindGame {
  data::Schema schema;
  v1::SessionParams declared;  // the step oneof only
  FixtureRow null_row;         // ADD_REMOVE: D0's rows (orthogonal to the canary)
  FixtureRow other_part_row;   // partitioned: the other parts' rows
  FixtureRow replaced_row;     // REPLACE_ONE: D0's rows, one replaced in D1
  FixtureRow canary;
  int32_t canary_level = 0;    // partitioned: the canary's part (its label's level)
};

absl::StatusOr<data::Schema> OneNumericSchema(bool labelled, int classes = 2) {
  data::Schema::Builder builder;
  builder.AddNumeric("x", 0.0, 1.0);
  if (labelled) {
    std::vector<std::string> labels = {"a", "b", "c"};
    labels.resize(static_cast<size_t>(classes));
    builder.AddCategorical("y", labels);
    builder.SetLabel("y");
  }
  return builder.Build();
}

// rff_embedding session: x in [0, 1] with a label {a, b}. Null rows (and
// the replaced row) are (x = 0, a), the canary is (x = 1, b): its features
// and count land in class b's block, which no other row touches, so
// ||v|| = sqrt(||phi||^2 + 1) = sqrt(2) = Delta under ADD_REMOVE and, under
// REPLACE_ONE, v = [-phi(0); phi(1); -1; 1] / m with norm 2 / m = Delta
// (||phi|| = 1 for the cos/sin features).
absl::StatusOr<KindGame> RffGame() {
  KindGame game;
  DPC_ASSIGN_OR_RETURN(game.schema, OneNumericSchema(/*labelled=*/true));
  v1::RffEmbeddingParams& rff = *game.declared.mutable_rff_embedding();
  rff.set_num_frequencies(kRffCaseFrequencies);
  rff.set_seed(kRffCaseSeed);  // public and fixed: the canary direction is known
  game.null_row = {0.0, 0.0};
  game.replaced_row = {0.0, 0.0};
  game.canary = {1.0, 1.0};
  return game;
}

// dp_sgd session: x in [0, 1], no label (row width 1), the autoencoder loss
// (BCE of sigmoid(z) against x) on the network 1 -> relu(1) -> 1 with
// parameters W0 = 0, b0 = -1 (the hidden unit is dead: no gradient reaches
// the first layer), W1 = 0, b1 = 0 (the trainer's query, DpSgdParameters).
// So z = 0 for every row and the per-example gradient is
// (sigmoid(0) - x) e_{b1} = (0.5 - x) e_{b1}: exactly 0 for the null rows
// (x = 0.5), -0.5 e_{b1} for the canary (x = 1) and +0.5 e_{b1} for the
// replaced row (x = 0). With C = 0.5 the canary's clipped gradient has norm
// C (ADD_REMOVE) and the replacement moves the sum by 2C (REPLACE_ONE): the
// sensitivity bound, in a coordinate no null row uses. The divisor is what
// a client declares, q n (the server divides by it; any public divisor is
// post-processing of the noisy sum).
constexpr double kDpSgdClipNorm = 0.5;
absl::StatusOr<KindGame> DpSgdGame(double declared_divisor) {
  KindGame game;
  DPC_ASSIGN_OR_RETURN(game.schema, OneNumericSchema(/*labelled=*/false));
  v1::DpSgdParams& network = *game.declared.mutable_dp_sgd();
  network.add_hidden(1);
  network.set_activation("relu");
  network.set_loss(v1::RECONSTRUCTION_BCE);
  network.set_clip_norm(kDpSgdClipNorm);
  network.set_expected_batch_size(declared_divisor);
  game.null_row = {0.5};
  game.replaced_row = {0.0};
  game.canary = {1.0};
  return game;
}

// kernel_witness session: x in [0, 1], no label, one bandwidth 0.05. The
// canary sits at the query point w = 1; null and replaced rows at x = 0,
// where k(0, w) = exp(-200) (zero in double precision). The answer is read
// in the whitened coordinates of its public joint factor (post-processing
// of the release: there the noise is i.i.d. N(0, (s Delta)^2)). ADD_REMOVE
// queries w = 1 alone: v = L^{-1} [1/m; 0], norm 1/m = Delta. REPLACE_ONE
// also queries w = 0, where the replaced row's kernel bump is: v =
// L^{-1} [1/m; -1/m; 0; 0], norm sqrt(2)/m = Delta (docs/privacy.md 2.10).
// Under ADD_REMOVE the divisor is the client's declared q n; under
// REPLACE_ONE PlanSession sets it to the fixed batch.
//
// Partitioned (DP-kernel's parallel variant, docs/privacy.md 2.10 and 3.7):
// the same kernel on x with a label {a, b} as the public partition; every
// row of both parts at x = 0, the canary (x = 1, b) added to part b; each
// part's member queries w = 1.
constexpr double kWitnessBandwidth = 0.05;
absl::StatusOr<KindGame> KernelWitnessGame(double declared_divisor, bool partitioned) {
  KindGame game;
  DPC_ASSIGN_OR_RETURN(game.schema, OneNumericSchema(/*labelled=*/partitioned));
  v1::KernelWitnessParams& witness = *game.declared.mutable_kernel_witness();
  witness.add_bandwidths(kWitnessBandwidth);
  witness.set_conditional(false);
  witness.set_expected_batch_size(declared_divisor);
  witness.set_max_points(2);
  if (partitioned) {
    witness.set_parallel(true);  // as `dpcurator train kernel --variant parallel` sends
    game.null_row = {0.0, 1.0};
    game.other_part_row = {0.0, 0.0};
    game.canary = {1.0, 1.0};
    game.canary_level = 1;
  } else {
    game.null_row = {0.0};
    game.replaced_row = {0.0};
    game.canary = {1.0};
  }
  return game;
}

// The trainer's dp_sgd query: the dead-unit network of DpSgdGame, in the
// nn::Mlp::parameters() layout of the network the session declared.
absl::StatusOr<v1::SessionStepRequest> DpSgdQuery(const v1::SessionParams& resolved) {
  using Kind = release::DpSgdKind;
  Kind::Params network;
  network.hidden.assign(resolved.dp_sgd().hidden().begin(), resolved.dp_sgd().hidden().end());
  network.activation = nn::Activation::kRelu;
  network.loss = release::DpSgdLoss::kReconstructionBce;
  DPC_ASSIGN_OR_RETURN(nn::Mlp mlp,
                       nn::Mlp::Create(Kind::Network(network, resolved.dp_sgd().row_width())));
  mlp.weight(0).setZero();
  mlp.bias(0).setConstant(-1.0);
  mlp.weight(1).setZero();
  mlp.bias(1).setZero();
  v1::SessionStepRequest request;
  for (const float p : mlp.parameters()) request.mutable_dp_sgd()->add_parameters(p);
  return request;
}

// The step request each step sends, and how its answer is read. The
// kernel's whitening factor is built from the query points and the
// session's resolved bandwidths (public), as a client would.
struct StepReading {
  v1::SessionStepRequest request;
  AnswerReader read;
  AnswerSensitivity sensitivity;
};
absl::StatusOr<StepReading> ReadingFor(const v1::SessionParams& resolved,
                                       NeighbouringRelation relation) {
  StepReading out;
  switch (resolved.step_case()) {
    case v1::SessionParams::kRffEmbedding: {
      out.read = [](const v1::SessionStepResponse& response) -> absl::StatusOr<Eigen::VectorXd> {
        // The artefact's order: class_values column-major, then class_totals.
        const v1::EmbeddingArtefact& artefact = response.batch();
        Eigen::VectorXd flat(artefact.class_values_size() + artefact.class_totals_size());
        for (int j = 0; j < artefact.class_values_size(); ++j) flat(j) = artefact.class_values(j);
        for (int j = 0; j < artefact.class_totals_size(); ++j) {
          flat(artefact.class_values_size() + j) = artefact.class_totals(j);
        }
        return flat;
      };
      // docs/privacy.md 2.2: sqrt(1 + 1) for sums and counts; 2 / m for the
      // means of a public batch m under REPLACE_ONE.
      out.sensitivity = [relation](const v1::SessionStepResponse& response) {
        return relation == NeighbouringRelation::kReplaceOne
                   ? 2.0 / static_cast<double>(response.batch().public_n())
                   : std::sqrt(2.0);
      };
      return out;
    }
    case v1::SessionParams::kDpSgd: {
      DPC_ASSIGN_OR_RETURN(out.request, DpSgdQuery(resolved));
      out.read = [](const v1::SessionStepResponse& response) -> absl::StatusOr<Eigen::VectorXd> {
        const auto& g = response.gradient().gradient();
        return Eigen::Map<const Eigen::VectorXf>(g.data(), g.size()).cast<double>();
      };
      // C (ADD_REMOVE) or 2C (REPLACE_ONE) on the sum (docs/privacy.md 2.9),
      // over the answer's divisor.
      const double clip = resolved.dp_sgd().clip_norm();
      out.sensitivity = [relation, clip](const v1::SessionStepResponse& response) {
        const double sum = relation == NeighbouringRelation::kReplaceOne ? 2.0 * clip : clip;
        return sum / response.gradient().divisor();
      };
      return out;
    }
    case v1::SessionParams::kKernelWitness: {
      Eigen::MatrixXd points;
      if (relation == NeighbouringRelation::kReplaceOne) {
        points = Eigen::MatrixXd(2, 1);
        points << 1.0, 0.0;
      } else {
        points = Eigen::MatrixXd::Constant(1, 1, 1.0);
      }
      v1::KernelWitnessQuery& query = *out.request.mutable_kernel_witness();
      query.set_num_points(static_cast<int32_t>(points.rows()));
      for (Eigen::Index j = 0; j < points.rows(); ++j) {
        query.add_points(static_cast<float>(points(j, 0)));
      }
      const std::vector<double> bandwidths(resolved.kernel_witness().bandwidths().begin(),
                                           resolved.kernel_witness().bandwidths().end());
      DPC_ASSIGN_OR_RETURN(release::KernelJointFactor factor,
                           release::KernelJointFactor::Create(points, bandwidths));
      const int dimension = resolved.kernel_witness().dimension();
      out.read = [factor, dimension](
                     const v1::SessionStepResponse& response) -> absl::StatusOr<Eigen::VectorXd> {
        const v1::KernelWitnessValues& answer = response.witness();
        const Eigen::VectorXd values =
            Eigen::Map<const Eigen::VectorXf>(answer.values().data(), answer.values_size())
                .cast<double>();
        if (answer.gradients_size() != answer.values_size() * dimension) {
          return absl::InternalError("audit case: a witness answer of an unexpected shape");
        }
        const Eigen::MatrixXd gradients =
            Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic,
                                           Eigen::RowMajor>>(answer.gradients().data(),
                                                             answer.values_size(), dimension)
                .cast<double>();
        return factor.Whiten(values, gradients);
      };
      out.sensitivity = [relation](const v1::SessionStepResponse& response) {
        return release::KernelWitnessKind::Sensitivity(relation, response.witness().divisor());
      };
      return out;
    }
    case v1::SessionParams::STEP_NOT_SET:
      break;
  }
  return absl::InternalError("audit case: the plan resolved no step kind");
}

// One member of the game: an ordinary session (no part), or one session of
// a partitioned open (its part's level). The v1::Session as the ledger
// stores it and ComputeSessionStep reads it: the plan's resolved params and
// noise multiplier.
struct Member {
  v1::Session session;
  std::optional<int32_t> level;
  // plan::RowIndicesOfPart of each side's rows (what Step computes).
  std::vector<int64_t> part_rows[2];
  bool scored = false;  // the canary's session
};

v1::Session SessionOf(const std::string& id, const v1::SessionParams& resolved,
                      double noise_multiplier, int64_t steps) {
  v1::Session session;
  session.set_id(id);
  session.set_dataset_id(kDatasetId);
  *session.mutable_params() = resolved;
  session.set_state("OPEN");
  session.set_steps_reserved(steps);
  session.set_noise_multiplier(noise_multiplier);
  return session;
}

// One step exactly as SessionServiceImpl::Step runs it after admission:
// plan::ComputeSessionStep on the dataset's encoded rows (a member of a
// partitioned open: its part's row indices), then the stored answer put in
// the response by plan::SetStepAnswer, then read.
absl::StatusOr<Eigen::VectorXd> RunStep(const v1::Session& session, const PlanDataset& data,
                                        const v1::SessionStepRequest& request,
                                        const std::vector<int64_t>* part_rows,
                                        const AnswerReader& read, privacy::NoiseSource* noise,
                                        v1::SessionStepResponse* response) {
  DPC_ASSIGN_OR_RETURN(const std::string answer,
                       plan::ComputeSessionStep(session, data.dataset, data.rows,
                                                absl::StrCat(session.id(), "/", request.step()),
                                                request, noise, part_rows));
  response->Clear();
  DPC_RETURN_IF_ERROR(plan::SetStepAnswer(session.params(), answer, response));
  return read(*response);
}

// The canary direction from the noiseless statistic of chosen batches: the
// same ComputeSessionStep with ZeroNoiseSource (the grid layer returns the
// exact sum) at rate 1 over a dataset of exactly the batch's rows (so the
// batch is those rows). ADD_REMOVE: v = f(B + canary) - f(B) for a batch B
// of null rows, and the null rows must be orthogonal to v (checked on
// batches of 1 and 3, so c0 does not depend on the private batch size).
// REPLACE_ONE: v = f(m - 1 copies + canary) - f(m copies), m the plan's
// fixed batch (FixedBatchSize of the resolved rate, the expression the
// step's sampling draws). Also sigma = s Delta from the answer's public
// fields.
absl::StatusOr<CanaryDirection> CanaryDirectionOf(const KindGame& game,
                                                  const v1::Session& scored,
                                                  const StepReading& reading,
                                                  NeighbouringRelation relation,
                                                  int64_t public_rows) {
  v1::Session reference = scored;
  reference.mutable_params()->set_sampling_rate(1.0);
  privacy::ZeroNoiseSource zero;
  v1::SessionStepResponse response;
  auto noiseless = [&](const std::vector<FixtureRow>& batch) -> absl::StatusOr<Eigen::VectorXd> {
    const PlanDataset data =
        InMemoryDataset(game.schema, TableOfRows(game.schema, batch), relation, 0.5, kDatasetId);
    return RunStep(reference, data, reading.request, nullptr, reading.read, &zero, &response);
  };
  CanaryDirection canary;
  if (relation == NeighbouringRelation::kReplaceOne) {
    const int64_t m =
        plan::FixedBatchSize(scored.params().sampling_rate(), public_rows);
    std::vector<FixtureRow> d0 = Repeated(game.replaced_row, m);
    std::vector<FixtureRow> d1 = Repeated(game.replaced_row, m - 1);
    d1.push_back(game.canary);
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd f0, noiseless(d0));
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd f1, noiseless(d1));
    canary.sigma = scored.noise_multiplier() * reading.sensitivity(response);
    canary.v = f1 - f0;
    canary.offset = f0.dot(canary.v);
  } else {
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd f1, noiseless({game.null_row}));
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd f3, noiseless(Repeated(game.null_row, 3)));
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd fc, noiseless({game.null_row, game.canary}));
    canary.sigma = scored.noise_multiplier() * reading.sensitivity(response);
    canary.v = fc - f1;
    canary.offset = f1.dot(canary.v);
    if (std::abs(f3.dot(canary.v) - canary.offset) > 1e-9 * canary.v.squaredNorm()) {
      return absl::InternalError(
          "audit case: the null rows are not orthogonal to the canary's direction");
    }
  }
  if (!(canary.v.norm() > 0.0) || !(canary.sigma > 0.0)) {
    return absl::InternalError("audit case: the canary does not move the step's output");
  }
  return canary;
}

// The charge of a planned event on a fresh dataset at delta: the ledger's
// AccountantState and its Epsilon (what epsilon_reserved reports).
absl::StatusOr<double> ChargedEpsilon(const privacy::PrivacyEvent& event,
                                      NeighbouringRelation relation, double delta) {
  privacy::AccountantState state(relation);
  DPC_RETURN_IF_ERROR(state.Add(event));
  DPC_ASSIGN_OR_RETURN(const privacy::EpsilonReport report, state.Epsilon(delta));
  return report.epsilon;
}

}  // namespace

std::string_view SessionStepKindName(SessionStepKind kind) {
  switch (kind) {
    case SessionStepKind::kRffEmbedding:
      return "rff_embedding_session";
    case SessionStepKind::kDpSgd:
      return "dp_sgd_session";
    case SessionStepKind::kKernelWitness:
      return "kernel_witness_session";
    case SessionStepKind::kKernelWitnessPartitioned:
      return "kernel_witness_partitioned_session";
  }
  return "unknown";
}

absl::StatusOr<data::Schema> RffCaseSchema() { return OneNumericSchema(/*labelled=*/true); }

absl::StatusOr<CanaryDirection> RffCanaryDirection(privacy::NeighbouringRelation relation,
                                                   double noise_multiplier, int64_t batch_size) {
  // One step at rate 1 of the rff session case at this multiplier: under
  // REPLACE_ONE over batch_size rows (the batch is all of them).
  SessionAuditConfig config;
  config.kind = SessionStepKind::kRffEmbedding;
  config.relation = relation;
  config.steps = 1;
  config.sampling_rate = 1.0;
  config.rows = relation == privacy::NeighbouringRelation::kReplaceOne ? batch_size : 2;
  config.noise_multiplier = noise_multiplier;
  DPC_ASSIGN_OR_RETURN(const PreparedSessionAudit prepared, PrepareSessionAudit(config));
  return prepared.canary;
}

double ProjectionScore(const Eigen::Ref<const Eigen::VectorXd>& output,
                       const CanaryDirection& canary) {
  return (output.dot(canary.v) - canary.offset) / (canary.v.norm() * canary.sigma);
}

double MixtureLogLikelihoodRatio(absl::Span<const double> z, double q, double mu) {
  double total = 0.0;
  for (const double zt : z) {
    // log(1 - q + q e^a) with a = mu z - mu^2/2, without overflow:
    // log(q) + a + log1p((1 - q) e^{-a} / q) for a > 0.
    const double a = mu * zt - 0.5 * mu * mu;
    if (q >= 1.0) {
      total += a;
    } else if (a > 0.0) {
      total += std::log(q) + a + std::log1p((1.0 - q) / q * std::exp(-a));
    } else {
      total += std::log1p(q * std::expm1(a));
    }
  }
  return total;
}

double CltGaussianDpMu(double sampling_rate, int64_t steps, double noise_multiplier) {
  const double per_step = std::expm1(1.0 / (noise_multiplier * noise_multiplier));
  return sampling_rate * std::sqrt(static_cast<double>(steps) * per_step);
}

namespace {

// The open request a client sends for the game: the kind's declaration,
// T, q and the privacy level (an epsilon for all T steps, or a fixed
// noise multiplier).
v1::SessionParams RequestedParams(const KindGame& game, const SessionAuditConfig& config,
                                  double sampling_rate) {
  v1::SessionParams params = game.declared;
  params.set_steps(config.steps);
  params.set_sampling_rate(sampling_rate);
  if (config.noise_multiplier > 0.0) {
    params.set_noise_multiplier(config.noise_multiplier);
  } else {
    params.set_epsilon(config.epsilon);
  }
  return params;
}

// What the server's plan gives for one dataset: the members' sessions (one,
// or one per part in level order), their step events and steps, and the
// charged event (plan::SessionEvent, or plan::PartitionedSessionsEvent:
// the ledger's own functions at open).
struct PlannedGame {
  std::vector<Member> members;
  std::vector<privacy::PrivacyEvent> step_events;
  std::vector<int64_t> steps;
  std::optional<privacy::PrivacyEvent> charged;
};

absl::StatusOr<PlannedGame> PlanGame(const v1::SessionParams& params, bool partitioned,
                                     int32_t canary_level, const v1::Dataset& dataset) {
  PlannedGame planned;
  if (partitioned) {
    v1::OpenPartitionedSessionsRequest request;
    request.set_dataset_id(dataset.id());
    request.set_idempotency_key("audit");
    *request.mutable_params() = params;
    request.mutable_partition()->set_column("y");  // every declared class
    DPC_ASSIGN_OR_RETURN(const plan::PartitionedPlan plan,
                         plan::PlanPartitionedSessions(request, dataset));
    for (const plan::SessionPart& part : plan.parts) {
      Member member;
      member.session = SessionOf(absl::StrCat("ses_audit_part", part.level), part.params,
                                 part.noise_multiplier, part.steps);
      member.level = part.level;
      member.scored = part.level == canary_level;
      planned.members.push_back(std::move(member));
      if (!part.step_event.has_value()) {
        return absl::InternalError("audit case: a part was planned without a step event");
      }
      planned.step_events.push_back(*part.step_event);
      planned.steps.push_back(part.steps);
    }
    DPC_ASSIGN_OR_RETURN(planned.charged,
                         plan::PartitionedSessionsEvent(planned.step_events, planned.steps));
  } else {
    v1::OpenSessionRequest request;
    request.set_dataset_id(dataset.id());
    request.set_idempotency_key("audit");
    *request.mutable_params() = params;
    DPC_ASSIGN_OR_RETURN(const plan::SessionPlan plan, plan::PlanSession(request, dataset));
    if (!plan.step_event.has_value()) {
      return absl::InternalError("audit case: the session was planned without a step event");
    }
    Member member;
    member.session = SessionOf("ses_audit", plan.resolved_params, plan.noise_multiplier,
                               plan.steps);
    member.scored = true;
    planned.members.push_back(std::move(member));
    planned.step_events.push_back(*plan.step_event);
    planned.steps.push_back(plan.steps);
    DPC_ASSIGN_OR_RETURN(planned.charged, plan::SessionEvent(*plan.step_event, plan.steps));
  }
  return planned;
}

}  // namespace

absl::StatusOr<PreparedSessionAudit> PrepareSessionAudit(const SessionAuditConfig& config) {
  if (config.steps < 1 || config.rows < 2 ||
      !(config.sampling_rate > 0.0 && config.sampling_rate <= 1.0)) {
    return absl::InvalidArgumentError(
        "session audit needs steps >= 1, rows >= 2 and sampling rate in (0, 1]");
  }
  const NeighbouringRelation relation = config.relation;
  const int64_t n = config.rows;
  const bool partitioned = config.kind == SessionStepKind::kKernelWitnessPartitioned;
  // The divisor a client declares for dp_sgd and kernel_witness: the
  // expected batch q n (PlanSession replaces kernel_witness's by the fixed
  // batch under REPLACE_ONE).
  const double declared_divisor = std::max(1.0, config.sampling_rate * static_cast<double>(n));
  KindGame game;
  switch (config.kind) {
    case SessionStepKind::kRffEmbedding: {
      DPC_ASSIGN_OR_RETURN(game, RffGame());
      break;
    }
    case SessionStepKind::kDpSgd: {
      DPC_ASSIGN_OR_RETURN(game, DpSgdGame(declared_divisor));
      break;
    }
    case SessionStepKind::kKernelWitness:
    case SessionStepKind::kKernelWitnessPartitioned: {
      DPC_ASSIGN_OR_RETURN(game, KernelWitnessGame(declared_divisor, partitioned));
      break;
    }
  }

  // D0 and D1, held as the server holds them. ADD_REMOVE: n null rows, and
  // D1 adds the canary last (partitioned: n rows in each part, the canary
  // added to its part). REPLACE_ONE: n copies of r0, the first replaced.
  std::vector<FixtureRow> rows0;
  std::vector<FixtureRow> rows1;
  if (relation == NeighbouringRelation::kReplaceOne) {
    rows0 = Repeated(game.replaced_row, n);
    rows1 = rows0;
    rows1.front() = game.canary;
  } else {
    if (partitioned) rows0 = Repeated(game.other_part_row, n);
    const std::vector<FixtureRow> nulls = Repeated(game.null_row, n);
    rows0.insert(rows0.end(), nulls.begin(), nulls.end());
    rows1 = rows0;
    rows1.push_back(game.canary);
  }
  auto data = std::make_shared<std::array<PlanDataset, 2>>();
  (*data)[0] = InMemoryDataset(game.schema, TableOfRows(game.schema, rows0), relation,
                               config.delta, kDatasetId);
  (*data)[1] = InMemoryDataset(game.schema, TableOfRows(game.schema, rows1), relation,
                               config.delta, kDatasetId);

  // The server's plan, before any row is read. Planned on each side's
  // record: the plan may not depend on the rows (under ADD_REMOVE the two
  // records differ in their private row count).
  const v1::SessionParams requested = RequestedParams(game, config, config.sampling_rate);
  DPC_ASSIGN_OR_RETURN(PlannedGame run,
                       PlanGame(requested, partitioned, game.canary_level, (*data)[0].dataset));
  DPC_ASSIGN_OR_RETURN(const PlannedGame run1,
                       PlanGame(requested, partitioned, game.canary_level, (*data)[1].dataset));
  for (size_t k = 0; k < run.members.size(); ++k) {
    if (run1.members.size() != run.members.size() ||
        run1.members[k].session.SerializeAsString() !=
            run.members[k].session.SerializeAsString()) {
      return absl::InternalError("audit case: the session's plan differs between D0 and D1");
    }
  }
  // What the ledger charges: the plan's event, unless a mutant plants a
  // plan whose mechanism and charge disagree. kSamplingRateChargedAtHalf
  // re-plans the same request at q / 2 and keeps ITS event and noise
  // multiplier while the q plan's sampling runs: sigma calibrated for q / 2,
  // the batch drawn at q (issue 23 item 2).
  privacy::PrivacyEvent charged = *run.charged;
  double charged_rate = run.members.front().session.params().sampling_rate();
  if (config.mutant == SessionMutant::kSamplingRateChargedAtHalf) {
    const v1::SessionParams half = RequestedParams(game, config, 0.5 * config.sampling_rate);
    DPC_ASSIGN_OR_RETURN(const PlannedGame at_half,
                         PlanGame(half, partitioned, game.canary_level, (*data)[0].dataset));
    charged = *at_half.charged;
    charged_rate = at_half.members.front().session.params().sampling_rate();
    const double s_half = at_half.members.front().session.noise_multiplier();
    for (Member& member : run.members) {
      member.session.set_noise_multiplier(s_half);
      member.session.mutable_params()->set_noise_multiplier(s_half);
    }
  }

  auto members = std::make_shared<std::vector<Member>>(std::move(run.members));
  const Member* scored = nullptr;
  for (Member& member : *members) {
    if (member.level.has_value()) {
      for (int side = 0; side < 2; ++side) {
        member.part_rows[side] = plan::RowIndicesOfPart((*data)[side].rows, *member.level);
      }
    }
    if (member.scored) scored = &member;
  }
  if (scored == nullptr) {
    return absl::InternalError("audit case: no planned session reads the canary's part");
  }
  DPC_ASSIGN_OR_RETURN(const StepReading reading_value,
                       ReadingFor(scored->session.params(), relation));
  auto reading = std::make_shared<const StepReading>(reading_value);
  // The server checks the query before any row is read; so does the game.
  DPC_RETURN_IF_ERROR(plan::CheckStepQuery(scored->session.params(), reading->request));
  DPC_ASSIGN_OR_RETURN(const CanaryDirection canary,
                       CanaryDirectionOf(game, scored->session, *reading, relation,
                                         (*data)[0].dataset.row_count()));
  const double mu_step = canary.v.norm() / canary.sigma;
  const double s = scored->session.noise_multiplier();
  const double q = scored->session.params().sampling_rate();

  PreparedSessionAudit prepared;
  DPC_ASSIGN_OR_RETURN(prepared.accounted_epsilon, ChargedEpsilon(charged, relation, config.delta));
  prepared.delta = config.delta;
  prepared.accounted_mu = CltGaussianDpMu(charged_rate, config.steps, s);
  prepared.sampling_rate = q;
  prepared.charged_sampling_rate = charged_rate;
  prepared.noise_multiplier = s;
  prepared.canary_attainment = mu_step * s;
  prepared.canary = canary;
  const int64_t steps = config.steps;
  prepared.run_and_score = [data, members, reading, canary, mu_step, q, steps](
                               int side,
                               privacy::NoiseSource* noise) -> absl::StatusOr<double> {
    const PlanDataset& held = (*data)[side == 0 ? 0 : 1];
    std::vector<double> z;
    z.reserve(static_cast<size_t>(steps));
    v1::SessionStepRequest request = reading->request;
    v1::SessionStepResponse response;
    for (int64_t t = 0; t < steps; ++t) {
      request.set_step(t);
      // Every member's step t (a partitioned trainer steps each class in
      // turn); only the canary's member is scored: the others' rows and
      // draws carry nothing about the canary.
      for (const Member& member : *members) {
        request.set_session_id(member.session.id());
        const std::vector<int64_t>* part_rows =
            member.level.has_value() ? &member.part_rows[side == 0 ? 0 : 1] : nullptr;
        DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd out,
                             RunStep(member.session, held, request, part_rows, reading->read,
                                     noise, &response));
        if (member.scored) z.push_back(ProjectionScore(out, canary));
      }
    }
    return MixtureLogLikelihoodRatio(z, q, mu_step);
  };
  return prepared;
}

absl::StatusOr<SessionAuditResult> RunSessionAudit(const SessionAuditConfig& config) {
  const auto start = std::chrono::steady_clock::now();
  if (config.sessions < 8) {
    return absl::InvalidArgumentError("session audit needs at least 8 sessions per dataset");
  }
  DPC_ASSIGN_OR_RETURN(const PreparedSessionAudit prepared, PrepareSessionAudit(config));
  privacy::SeededNoiseSource noise(config.seed);
  std::vector<double> scores[2];
  for (int side = 0; side < 2; ++side) {
    scores[side].reserve(static_cast<size_t>(config.sessions));
    for (int64_t session = 0; session < config.sessions; ++session) {
      DPC_ASSIGN_OR_RETURN(const double score, prepared.run_and_score(side, &noise));
      scores[side].push_back(score);
    }
  }
  SessionAuditResult result;
  result.kind = std::string(SessionStepKindName(config.kind));
  result.relation = privacy::RelationName(config.relation);
  result.accounted_epsilon = prepared.accounted_epsilon;
  result.delta = prepared.delta;
  result.sampling_rate = prepared.sampling_rate;
  result.charged_sampling_rate = prepared.charged_sampling_rate;
  result.noise_multiplier = prepared.noise_multiplier;
  result.steps = config.steps;
  result.sessions = config.sessions;
  result.canary_attainment = prepared.canary_attainment;
  DPC_ASSIGN_OR_RETURN(result.bound, EmpiricalEpsilonLowerBound(scores[0], scores[1],
                                                                config.delta, config.alpha));
  DPC_ASSIGN_OR_RETURN(result.mu_emp, FittedGaussianDpMu(scores[0], scores[1]));
  result.mu_clt = prepared.accounted_mu;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::vector<SessionAuditConfig> SessionAuditCases(bool quick) {
  std::vector<SessionAuditConfig> cases;
  uint64_t seed = 23001;
  for (const SessionStepKind kind :
       {SessionStepKind::kRffEmbedding, SessionStepKind::kDpSgd, SessionStepKind::kKernelWitness}) {
    for (const NeighbouringRelation relation :
         {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
      SessionAuditConfig config;
      config.kind = kind;
      config.relation = relation;
      config.epsilon = 4.0;
      config.delta = 1e-5;
      config.steps = 10;
      config.rows = 20;
      config.sampling_rate = 0.5;
      config.sessions = quick ? 2000 : 20000;
      config.seed = seed++;
      cases.push_back(config);
    }
  }
  // Partitioned sessions (DP-kernel's parallel variant): ADD_REMOVE only
  // (PlanPartitionedSessions refuses REPLACE_ONE); n rows in each of the
  // two parts.
  SessionAuditConfig partitioned = cases.back();
  partitioned.kind = SessionStepKind::kKernelWitnessPartitioned;
  partitioned.relation = NeighbouringRelation::kAddRemove;
  partitioned.seed = seed++;
  cases.push_back(partitioned);
  return cases;
}

std::vector<AuditCase> SessionCases() {
  std::vector<AuditCase> cases;
  for (const SessionAuditConfig& base : SessionAuditCases(/*quick=*/true)) {
    AuditCase audit_case;
    audit_case.kind = std::string(SessionStepKindName(base.kind));
    audit_case.relation = privacy::RelationName(base.relation);
    audit_case.tightness = Tightness::kNone;
    audit_case.quick_runs = 2000;
    audit_case.full_runs = 20000;
    audit_case.prepare = [base](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
      SessionAuditConfig config = base;
      config.epsilon = target.epsilon;
      config.delta = target.delta;
      DPC_ASSIGN_OR_RETURN(PreparedSessionAudit prepared, PrepareSessionAudit(config));
      PreparedCase out;
      out.accounted_epsilon = prepared.accounted_epsilon;
      out.delta = prepared.delta;
      out.accounted_mu = prepared.accounted_mu;
      out.run_and_score = std::move(prepared.run_and_score);
      return out;
    };
    cases.push_back(std::move(audit_case));
  }
  return cases;
}

}  // namespace dpcurator::audit
