#include "server/service.h"

#include "absl/strings/str_cat.h"
#include "core/data/csv.h"
#include "core/privacy/noise_source.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"
#include "proto/convert.h"
#include "server/log.h"
#include "server/releases.h"

namespace dpcurator::server {
namespace {

// Rows in one upload message, at most; bigger messages are refused so that a
// single message cannot pin a large allocation.
constexpr int kMaxRowsPerMessage = 100000;

#define DPC_GRPC_RETURN_IF_ERROR(expr)                      \
  do {                                                      \
    ::absl::Status dpc_status_ = (expr);                    \
    if (!dpc_status_.ok()) return ToGrpcStatus(dpc_status_); \
  } while (0)

#define DPC_GRPC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)     \
  auto tmp = (expr);                                        \
  if (!tmp.ok()) return ToGrpcStatus(tmp.status());         \
  lhs = std::move(tmp).value()
#define DPC_GRPC_ASSIGN_OR_RETURN(lhs, expr) \
  DPC_GRPC_ASSIGN_OR_RETURN_IMPL_(DPC_STATUS_CONCAT_(dpc_grpc_or_, __LINE__), lhs, expr)

absl::Status ValidateBudget(const v1::Budget& budget) {
  auto status = ValidateFinitePositive(budget.epsilon(), "Budget epsilon");
  if (!status.ok()) return status;
  return ValidateInOpenUnitInterval(budget.delta(), "Budget delta");
}

}  // namespace

grpc::Status DatasetServiceImpl::CreateDataset(grpc::ServerContext* context,
                                               const v1::CreateDatasetRequest* request,
                                               v1::Dataset* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  (void)role;
  if (request->name().empty() || request->name().size() > 200) {
    return ToGrpcStatus(absl::InvalidArgumentError("dataset name must be 1 to 200 characters"));
  }
  DPC_GRPC_RETURN_IF_ERROR(ValidateBudget(request->budget()));
  DPC_GRPC_ASSIGN_OR_RETURN(*response, store_->CreateDataset(*request));
  authorizer_->NoteTarget(context, response->id());
  RefreshBudget(*ledger_, *metrics_, response->id());
  LogEvent(LogLevel::kInfo, "dataset_created")
      .Str("role", RoleName(role))
      .Str("dataset", response->id())
      .Str("relation", v1::NeighbouringRelation_Name(response->relation()));
  return grpc::Status::OK;
}

grpc::Status DatasetServiceImpl::UploadRows(grpc::ServerContext* context,
                                            grpc::ServerReader<v1::UploadRowsRequest>* reader,
                                            v1::UploadRowsResponse* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  (void)role;
  v1::UploadRowsRequest message;
  std::string dataset_id;
  std::optional<data::Schema> schema;
  int64_t total = 0;
  int64_t message_index = 0;
  while (reader->Read(&message)) {
    if (dataset_id.empty()) {
      dataset_id = message.dataset_id();
      authorizer_->NoteTarget(context, dataset_id);
      if (dataset_id.empty()) {
        return ToGrpcStatus(
            absl::InvalidArgumentError("the first upload message must name the dataset"));
      }
      DPC_GRPC_ASSIGN_OR_RETURN(v1::Dataset dataset, store_->GetDataset(dataset_id));
      DPC_GRPC_ASSIGN_OR_RETURN(schema, SchemaFromProto(dataset.schema()));
      total = dataset.row_count();
    } else if (!message.dataset_id().empty() && message.dataset_id() != dataset_id) {
      return ToGrpcStatus(
          absl::InvalidArgumentError("an upload stream carries rows of one dataset only"));
    }
    if (message.rows_size() > kMaxRowsPerMessage) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("upload message has ", message.rows_size(), " rows; send at most ",
                       kMaxRowsPerMessage, " per message")));
    }
    // A message is stored whole or not at all; the error names the row.
    data::TableBuilder builder(*schema);
    std::vector<std::string> cells;
    for (int i = 0; i < message.rows_size(); ++i) {
      const auto& row = message.rows(i);
      cells.assign(row.cells().begin(), row.cells().end());
      absl::Status status = builder.AddRow(cells);
      if (!status.ok()) {
        return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
            "upload message ", message_index, ", row ", i, " (", response->rows_accepted(),
            " rows of this upload were stored before it): ", status.message(),
            ". Nothing of this message was stored; fix the row and resend from it.")));
      }
    }
    data::Table chunk = builder.Finish();
    if (chunk.num_rows() > 0) {
      DPC_GRPC_ASSIGN_OR_RETURN(total, store_->AppendRows(dataset_id, chunk));
      response->set_rows_accepted(response->rows_accepted() + chunk.num_rows());
      response->set_cells_clamped(response->cells_clamped() + chunk.clamped_cells);
    }
    ++message_index;
  }
  if (dataset_id.empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("upload stream carried no messages"));
  }
  response->set_total_rows(total);
  // Counts only: never a cell (PRIVACY.md).
  LogEvent(LogLevel::kInfo, "rows_uploaded")
      .Str("role", RoleName(role))
      .Str("dataset", dataset_id)
      .Int("rows", response->rows_accepted())
      .Int("clamped_cells", response->cells_clamped());
  return grpc::Status::OK;
}

grpc::Status DatasetServiceImpl::ListDatasets(grpc::ServerContext* context,
                                              const v1::ListDatasetsRequest* request,
                                              v1::ListDatasetsResponse* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  DPC_GRPC_ASSIGN_OR_RETURN(auto datasets, store_->ListDatasets());
  for (auto& dataset : datasets) {
    // Under ADD_REMOVE the row count is private (PRIVACY.md): analysts get
    // noisy counts through releases, never this number.
    if (role != Role::kCurator && dataset.relation() != v1::REPLACE_ONE) {
      dataset.clear_row_count();
    }
    *response->add_datasets() = std::move(dataset);
  }
  return grpc::Status::OK;
}

grpc::Status DatasetServiceImpl::GetBudget(grpc::ServerContext* context,
                                           const v1::GetBudgetRequest* request,
                                           v1::BudgetReport* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->dataset_id());
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(*response, ledger_->Report(request->dataset_id()));
  metrics_->UpdateBudget(*response);  // free: the report is at hand
  return grpc::Status::OK;
}

grpc::Status ReleaseServiceImpl::RequestRelease(grpc::ServerContext* context,
                                                const v1::ReleaseRequest* request,
                                                v1::Release* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->dataset_id());
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(v1::Dataset dataset, store_->GetDataset(request->dataset_id()));
  DPC_GRPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(dataset.schema()));
  // Hop 1 -> 2: plan (calibration, defaults), then the ledger admits or
  // refuses durably before any row is read.
  DPC_GRPC_ASSIGN_OR_RETURN(ReleasePlan plan, PlanRelease(*request, dataset));
  // The idempotency check compares the analyst's request, not the resolved
  // one (the server-drawn seed differs between attempts).
  absl::StatusOr<Ledger::Admission> admitted =
      ledger_->Admit(dataset.id(), request->idempotency_key(), plan.kind,
                     request->SerializeAsString(), *plan.event);
  if (!admitted.ok()) {
    // Counted by the metrics interceptor (dpcurator_release_refusals_total).
    LogEvent(LogLevel::kInfo, "release_refused")
        .Str("role", RoleName(role))
        .Str("dataset", dataset.id())
        .Str("kind", plan.kind)
        .Code(admitted.status().code());
    return ToGrpcStatus(admitted.status());
  }
  Ledger::Admission admission = *std::move(admitted);
  if (admission.outcome == Ledger::Admission::Outcome::kReplay) {
    if (!response->ParseFromString(admission.artefact)) {
      return ToGrpcStatus(absl::DataLossError("stored release does not parse"));
    }
    response->set_replayed(true);
    response->set_epsilon_spent_total(admission.epsilon_spent);
    response->set_epsilon_remaining(admission.epsilon_remaining);
    LogEvent(LogLevel::kInfo, "release_replayed")
        .Str("role", RoleName(role))
        .Str("dataset", dataset.id())
        .Str("release", admission.release_id);
    return grpc::Status::OK;
  }
  // Audit: the charge this call made (a resumed admission was charged by
  // the call that crashed; a refund below takes it back).
  authorizer_->NoteDetail(context, absl::StrCat("release=", admission.release_id));
  if (admission.outcome == Ledger::Admission::Outcome::kAdmitted) {
    authorizer_->NoteEpsilon(context, admission.epsilon_alone);
  }
  // Hop 2 -> 3: the engine over the stored rows.
  auto noise = privacy::SecureNoiseSource::Create();
  auto computed = [&]() -> absl::StatusOr<v1::Release> {
    if (!noise.ok()) return noise.status();
    auto rows = store_->LoadRows(dataset.id(), schema);
    if (!rows.ok()) return rows.status();
    return ComputeRelease(plan, dataset, schema, *rows, admission.release_id,
                          admission.epsilon_alone, noise->get());
  }();
  if (!computed.ok()) {
    // Nothing was released: give the budget back with a refund event.
    absl::Status refund = ledger_->Refund(admission.release_id, std::string(computed.status().message()));
    if (refund.ok()) authorizer_->NoteEpsilon(context, 0.0);
    RefreshBudget(*ledger_, *metrics_, dataset.id());
    LogEvent(LogLevel::kError, "release_failed")
        .Str("role", RoleName(role))
        .Str("dataset", dataset.id())
        .Str("release", admission.release_id)
        .Code(computed.status().code())
        .Bool("refunded", refund.ok());
    return ToGrpcStatus(computed.status());
  }
  computed->set_created_unix(UnixNow());
  DPC_GRPC_ASSIGN_OR_RETURN(std::string delivered,
                            ledger_->Complete(admission.release_id, computed->SerializeAsString()));
  if (!response->ParseFromString(delivered)) {
    return ToGrpcStatus(absl::DataLossError("stored release does not parse"));
  }
  response->set_epsilon_spent_total(admission.epsilon_spent);
  response->set_epsilon_remaining(admission.epsilon_remaining);
  metrics_->RecordRelease(plan.kind, dataset.id());
  metrics_->SetEpsilon(dataset.id(), admission.epsilon_spent, admission.epsilon_remaining);
  LogEvent(LogLevel::kInfo, "release")
      .Str("role", RoleName(role))
      .Str("dataset", dataset.id())
      .Str("release", admission.release_id)
      .Str("kind", plan.kind)
      .Num("epsilon", admission.epsilon_alone)
      .Num("epsilon_spent", admission.epsilon_spent)
      .Num("epsilon_remaining", admission.epsilon_remaining);
  return grpc::Status::OK;
}

grpc::Status ReleaseServiceImpl::GetRelease(grpc::ServerContext* context,
                                            const v1::GetReleaseRequest* request,
                                            v1::Release* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->release_id());
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(std::string artefact,
                            ledger_->GetArtefact(request->release_id(), nullptr));
  if (!response->ParseFromString(artefact)) {
    return ToGrpcStatus(absl::DataLossError("stored release does not parse"));
  }
  response->set_replayed(true);
  return grpc::Status::OK;
}

grpc::Status ReleaseServiceImpl::ListReleases(grpc::ServerContext* context,
                                              const v1::ListReleasesRequest* request,
                                              v1::ListReleasesResponse* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->dataset_id());
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(*response, ledger_->ListReleases(request->dataset_id()));
  return grpc::Status::OK;
}

grpc::Status SessionServiceImpl::OpenSession(grpc::ServerContext* context,
                                             const v1::OpenSessionRequest* request,
                                             v1::Session* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->dataset_id());
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(v1::Dataset dataset, store_->GetDataset(request->dataset_id()));
  DPC_GRPC_ASSIGN_OR_RETURN(SessionPlan plan, PlanSession(*request, dataset));
  DPC_GRPC_ASSIGN_OR_RETURN(
      Ledger::SessionAdmission admission,
      ledger_->OpenSession(dataset.id(), request->idempotency_key(), request->SerializeAsString(),
                           plan.resolved_params, *plan.step_event, plan.steps,
                           plan.noise_multiplier));
  *response = admission.session;
  authorizer_->NoteDetail(context, absl::StrCat("session=", response->id()));
  if (!admission.replayed) authorizer_->NoteEpsilon(context, response->epsilon_reserved());
  RefreshBudget(*ledger_, *metrics_, dataset.id());
  LogEvent(LogLevel::kInfo, admission.replayed ? "session_replayed" : "session_opened")
      .Str("role", RoleName(role))
      .Str("dataset", dataset.id())
      .Str("session", response->id())
      .Int("steps", response->steps_reserved())
      .Num("epsilon", response->epsilon_reserved());
  return grpc::Status::OK;
}

grpc::Status SessionServiceImpl::Step(grpc::ServerContext* context,
                                      const v1::SessionStepRequest* request,
                                      v1::SessionStepResponse* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->session_id());
  authorizer_->NoteDetail(context, absl::StrCat("step=", request->step()));
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(Ledger::StepAdmission admission,
                            ledger_->BeginStep(request->session_id(), request->step()));
  std::string batch;
  if (admission.stored_batch.has_value()) {
    batch = *admission.stored_batch;
    response->set_replayed(true);
  } else {
    const v1::Session& session = admission.session;
    DPC_GRPC_ASSIGN_OR_RETURN(v1::Dataset dataset, store_->GetDataset(session.dataset_id()));
    DPC_GRPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(dataset.schema()));
    DPC_GRPC_ASSIGN_OR_RETURN(auto noise, privacy::SecureNoiseSource::Create());
    DPC_GRPC_ASSIGN_OR_RETURN(data::Table rows, store_->LoadRows(dataset.id(), schema));
    DPC_GRPC_ASSIGN_OR_RETURN(v1::EmbeddingArtefact computed,
                              ComputeSessionStep(session, dataset, schema, rows, noise.get()));
    computed.set_release_id(absl::StrCat(session.id(), "/", request->step()));
    // Stored before it is returned: a retry of this index replays it.
    DPC_GRPC_ASSIGN_OR_RETURN(batch, ledger_->RecordStep(session.id(), request->step(),
                                                         computed.SerializeAsString()));
  }
  if (!response->mutable_batch()->ParseFromString(batch)) {
    return ToGrpcStatus(absl::DataLossError("stored session step does not parse"));
  }
  DPC_GRPC_ASSIGN_OR_RETURN(*response->mutable_session(),
                            ledger_->GetSession(request->session_id()));
  return grpc::Status::OK;
}

grpc::Status SessionServiceImpl::CloseSession(grpc::ServerContext* context,
                                              const v1::CloseSessionRequest* request,
                                              v1::Session* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->session_id());
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(*response, ledger_->CloseSession(request->session_id()));
  RefreshBudget(*ledger_, *metrics_, response->dataset_id());  // the unused steps' refund
  LogEvent(LogLevel::kInfo, "session_closed")
      .Str("role", RoleName(role))
      .Str("dataset", response->dataset_id())
      .Str("session", response->id())
      .Int("steps_used", response->steps_used())
      .Int("steps_reserved", response->steps_reserved());
  return grpc::Status::OK;
}

grpc::Status SessionServiceImpl::GetSession(grpc::ServerContext* context,
                                            const v1::GetSessionRequest* request,
                                            v1::Session* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->session_id());
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(*response, ledger_->GetSession(request->session_id()));
  return grpc::Status::OK;
}

}  // namespace dpcurator::server
