#include "server/service.h"

#include <chrono>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/data/csv.h"
#include "core/privacy/noise_source.h"
#include "core/release/encoded_rows.h"
#include "core/util/status_macros.h"
#include "core/util/validation.h"
#include "proto/convert.h"
#include "server/log.h"
#include "server/plans.h"
#include "server/step_rate.h"
#include "server/runner_service.h"

namespace dpcurator::server {
namespace {

// Rows in one upload message, at most; bigger messages are refused so that a
// single message cannot pin a large allocation.
constexpr int kMaxRowsPerMessage = 100000;
// Images in one upload message, at most (the client sends 1000 of 28 x 28,
// under gRPC's 4 MB default; the message size limit bounds the bytes).
constexpr int kMaxImagesPerMessage = 100000;

// Checks one image batch against the dataset's image schema and turns it
// into a chunk (label levels in the label column, pixels kept as bytes).
// Every refusal names the image and says what was expected; the caller adds
// the message index.
absl::StatusOr<data::Table> ImageChunk(const data::Schema& schema, const v1::ImageBatch& batch) {
  const int64_t per_image = schema.pixels_per_image();
  const data::Column& image = schema.column(*schema.image_index());
  if (batch.count() < 0 || batch.count() > kMaxImagesPerMessage) {
    return absl::InvalidArgumentError(absl::StrCat("the batch declares ", batch.count(),
                                                   " images; send 1 to ", kMaxImagesPerMessage,
                                                   " per message"));
  }
  const int64_t count = batch.count();
  if (static_cast<int64_t>(batch.pixels().size()) != count * per_image) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the batch of ", count, " images carries ", batch.pixels().size(),
        " pixel bytes; images of column '", image.name, "' are ", image.image_height, " x ",
        image.image_width, ", so it must carry exactly ", count * per_image,
        " (one 8-bit level per pixel)"));
  }
  const std::optional<int> label = schema.label_index();
  const int64_t labels_expected = label.has_value() ? count : 0;
  if (batch.label_levels_size() != labels_expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the batch of ", count, " images carries ", batch.label_levels_size(),
        " labels; it must carry ", labels_expected,
        label.has_value() ? " (one per image)" : " (the dataset has no label column)"));
  }
  data::Table chunk;
  chunk.cells = Eigen::MatrixXd::Zero(count, schema.num_columns());
  if (label.has_value()) {
    const uint32_t classes = static_cast<uint32_t>(schema.NumLevels(*label));
    for (int64_t i = 0; i < count; ++i) {
      const uint32_t level = batch.label_levels(static_cast<int>(i));
      if (level >= classes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "image ", i, " has label level ", level, ", outside the ", classes,
            " classes of column '", schema.column(*label).name, "' (levels 0 to ",
            classes - 1, ")"));
      }
      chunk.cells(i, *label) = level;
    }
  }
  chunk.pixels.assign(batch.pixels().begin(), batch.pixels().end());
  return chunk;
}

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

// The caller of a call that passed Authorizer::Check, as the ledger's
// ownership checks see it.
absl::StatusOr<Caller> CallerOf(Authorizer& authorizer, const grpc::ServerContext* context) {
  DPC_ASSIGN_OR_RETURN(Principal principal, authorizer.Caller(context));
  return Caller{principal.id, principal.role == Role::kCurator};
}

absl::Status Hit(const Failpoint& failpoint, absl::string_view point) {
  return failpoint ? failpoint(point) : absl::OkStatus();
}

// A status message with every digit and every quoted span blanked out: the
// curator's log gets the shape of a failure (which check, which stage), never
// a value, an index or a count (docs/privacy.md 6.1).
std::string RedactedDetail(absl::string_view message) {
  std::string out;
  out.reserve(message.size());
  bool quoted = false;
  for (char c : message) {
    if (c == '\'') {
      quoted = !quoted;
      out += quoted ? "'..." : "'";
    } else if (quoted) {
      continue;
    } else {
      out += (c >= '0' && c <= '9') ? '#' : c;
    }
  }
  return out;
}

// The one answer to a failure after private rows were read (docs/privacy.md
// 6.1): the client gets a generic error with an incident id and nothing
// else; the curator's log gets the incident, the object, the stage and the
// redacted detail. The caller has kept the charge.
grpc::Status FailureAfterRowsRead(absl::string_view object, const std::string& object_id,
                                  const std::string& dataset_id, const std::string& incident,
                                  const absl::Status& cause) {
  LogEvent(LogLevel::kError, "failed_after_rows_read")
      .Str("incident", incident)
      .Str("dataset", dataset_id)
      .Str(std::string(object), object_id)
      .Code(cause.code())
      .Str("detail", RedactedDetail(cause.message()));
  return IncidentStatus(object, object_id, incident);
}

// An external dataset (docs/scale-out.md "External datasets"): tabular
// (the curator's partials have no image reader), and under REPLACE_ONE its
// public n declared, since the released means divide by it.
absl::Status ValidateExternalDataset(const v1::CreateDatasetRequest& request) {
  if (request.public_row_bound() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "public_row_bound must be at least 0 (0: none declared), got ",
        request.public_row_bound()));
  }
  if (!request.external()) {
    if (request.public_row_bound() != 0) {
      return absl::InvalidArgumentError(
          "public_row_bound is declared for external datasets only; a dataset with uploaded "
          "rows counts them");
    }
    return absl::OkStatus();
  }
  for (const v1::ColumnSchema& column : request.schema().columns()) {
    if (column.type() == v1::ColumnSchema::IMAGE) {
      return absl::InvalidArgumentError(
          "an external dataset takes a tabular schema for now (column '" + column.name() +
          "' is an image); upload image datasets to the server");
    }
  }
  if (request.relation() == v1::REPLACE_ONE && request.public_row_bound() < 1) {
    return absl::InvalidArgumentError(
        "an external REPLACE_ONE dataset needs its public row count: pass public_row_bound "
        "(`datasets create --external --public-row-bound N`); under REPLACE_ONE the released "
        "means divide by it, and every submitted statistic must be of exactly N rows");
  }
  return absl::OkStatus();
}

absl::Status ValidateBudget(const v1::Budget& budget) {
  auto status = ValidateFinitePositive(budget.epsilon(), "Budget epsilon");
  if (!status.ok()) return status;
  return ValidateInOpenUnitInterval(budget.delta(), "Budget delta");
}

// One limiter for the process: dp_sgd step rates are per session id, and
// session ids are unique across servers sharing a process (tests).
StepRateLimiter& DpSgdRateLimiter() {
  static StepRateLimiter* const limiter =
      new StepRateLimiter(kDpSgdStepsPerSecond, kDpSgdStepBurst);
  return *limiter;
}

// Issue 36, before admission (a refusal charges nothing): the answer within
// the send limit, then the projected peak reserved from the memory budget,
// held by the caller until the release or step has finished.
absl::StatusOr<MemoryBudget::Reservation> ReserveFootprint(
    const PlanFootprint& footprint, MemoryBudget* budget, int64_t max_message_bytes,
    const grpc::ServerContextBase* context) {
  if (max_message_bytes > 0) DPC_RETURN_IF_ERROR(CheckSendLimit(footprint, max_message_bytes));
  if (budget == nullptr) return MemoryBudget::Reservation();
  // A call whose client went away while it waited for a row-reader slot
  // stops there, before admission.
  return budget->Reserve(footprint, [context] { return context->IsCancelled(); });
}

// A session's open: every step it reserves must be able to run, so its
// answer must fit the send limit and its public peak the whole budget
// (each step reserves its footprint when it runs).
absl::Status CheckStepsCanRun(const v1::SessionParams& params, const v1::Dataset& dataset,
                              MemoryBudget* budget, int64_t max_message_bytes) {
  DPC_ASSIGN_OR_RETURN(const data::Schema schema, SchemaFromProto(dataset.schema()));
  const PlanFootprint step = SessionStepFootprint(params, dataset, schema);
  if (max_message_bytes > 0) DPC_RETURN_IF_ERROR(CheckSendLimit(step, max_message_bytes));
  if (budget == nullptr) return absl::OkStatus();
  return budget->CheckAlone(step.public_bytes, step.what, step.hint);
}

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

NoiseSourceFactory SecureNoiseSourceFactory() {
  return []() -> absl::StatusOr<std::unique_ptr<privacy::NoiseSource>> {
    DPC_ASSIGN_OR_RETURN(std::unique_ptr<privacy::SecureNoiseSource> source,
                         privacy::SecureNoiseSource::Create());
    return std::unique_ptr<privacy::NoiseSource>(std::move(source));
  };
}

grpc::Status IncidentStatus(absl::string_view object, const std::string& object_id,
                            const std::string& incident) {
  return grpc::Status(
      grpc::StatusCode::INTERNAL,
      absl::StrCat(object, " '", object_id, "' failed after the server read the dataset's rows "
                   "(incident ", incident, "). Its charge stands: a failure that may depend "
                   "on the data is never refunded and its cause is not returned. The curator "
                   "finds the incident in the server log."));
}

grpc::Status DatasetServiceImpl::CreateDataset(grpc::ServerContext* context,
                                               const v1::CreateDatasetRequest* request,
                                               v1::Dataset* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  (void)role;
  if (request->name().empty() || request->name().size() > 200) {
    return ToGrpcStatus(absl::InvalidArgumentError("dataset name must be 1 to 200 characters"));
  }
  DPC_GRPC_RETURN_IF_ERROR(ValidateBudget(request->budget()));
  DPC_GRPC_RETURN_IF_ERROR(ValidateExternalDataset(*request));
  DPC_GRPC_ASSIGN_OR_RETURN(*response, store_->CreateDataset(*request));
  authorizer_->NoteTarget(context, response->id());
  RefreshBudget(*ledger_, *metrics_, response->id());
  LogEvent(LogLevel::kInfo, "dataset_created")
      .Str("role", RoleName(role))
      .Str("dataset", response->id())
      .Str("relation", v1::NeighbouringRelation_Name(response->relation()))
      .Bool("external", response->external());
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
  int64_t message_index = 0;
  // An upload is one transaction: every message is checked as it arrives
  // and kept here, and the whole upload is stored at the end in one
  // transaction (Store::AppendChunks), or nothing is. A bad row anywhere
  // leaves the dataset as it was, so a retry of the fixed file starts from
  // a clean slate. The held chunks are the encoded rows (8 bytes a cell),
  // the size they will have in the database.
  std::vector<data::Table> chunks;
  // Open columns (issue 38): the upload's own dictionary of each one's
  // values; the chunks' open cells hold indices into it.
  std::optional<UploadOpenValues> open_values;
  int64_t rows_held = 0;
  int64_t cells_clamped = 0;
  // Whether rows equal to stored ones are meant (Store::AppendChunks).
  bool append = false;
  while (reader->Read(&message)) {
    // A token revoked during the stream stops it here (issue 24, item 4);
    // the upload is one transaction, so none of it is stored.
    if (absl::Status valid = authorizer_->StillAuthorized(context, message_index);
        !valid.ok()) {
      return ToGrpcStatus(absl::Status(
          valid.code(), "the token was revoked during the stream; nothing of this upload was "
                        "stored"));
    }
    if (dataset_id.empty()) {
      dataset_id = message.dataset_id();
      append = message.append();
      authorizer_->NoteTarget(context, dataset_id);
      if (dataset_id.empty()) {
        return ToGrpcStatus(
            absl::InvalidArgumentError("the first upload message must name the dataset"));
      }
      DPC_GRPC_ASSIGN_OR_RETURN(v1::Dataset dataset, store_->GetDataset(dataset_id));
      if (dataset.external()) return ToGrpcStatus(ExternalUploadError(dataset_id));
      if (dataset.sealed()) {  // refused at once, not after the whole stream
        return ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
            "dataset '", dataset_id,
            "' is sealed: a release has been made from its rows; create a new dataset to add "
            "data")));
      }
      DPC_GRPC_ASSIGN_OR_RETURN(schema, SchemaFromProto(dataset.schema()));
      open_values.emplace(*schema);
      // Everything that needs no row has passed (the role in Check above,
      // the dataset, its seal): said at once, so that a client waits for
      // this before reading its file, and a refusal costs it no pass over
      // the file (issue 38). The key is client/connection.h's
      // kUploadReadyMetadata.
      context->AddInitialMetadata("dpc-upload-ready", "1");
      reader->SendInitialMetadata();
    } else if (!message.dataset_id().empty() && message.dataset_id() != dataset_id) {
      return ToGrpcStatus(
          absl::InvalidArgumentError("an upload stream carries rows of one dataset only"));
    }
    if (message.has_images()) {
      auto refuse = [&](absl::string_view why) {
        return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
            "upload message ", message_index, " (image batch): ", why,
            ". Nothing of this upload was stored; fix the batch and upload again.")));
      };
      if (!schema->image_index().has_value()) {
        return refuse("this dataset has no image column; upload its rows as CSV or ARFF");
      }
      if (message.rows_size() > 0) {
        return refuse("a message carries rows or an image batch, not both");
      }
      absl::StatusOr<data::Table> chunk = ImageChunk(*schema, message.images());
      if (!chunk.ok()) return refuse(chunk.status().message());
      rows_held += chunk->num_rows();
      if (chunk->num_rows() > 0) chunks.push_back(*std::move(chunk));
      ++message_index;
      continue;
    }
    if (message.rows_size() > kMaxRowsPerMessage) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("upload message has ", message.rows_size(), " rows; send at most ",
                       kMaxRowsPerMessage, " per message")));
    }
    // The error names the first bad row (the client checks every row before
    // sending and lists them all; this is the server's own check).
    data::TableBuilder builder(*schema);
    std::vector<std::string> cells;
    for (int i = 0; i < message.rows_size(); ++i) {
      const auto& row = message.rows(i);
      cells.assign(row.cells().begin(), row.cells().end());
      absl::Status status = builder.AddRow(cells);
      if (!status.ok()) {
        return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
            "upload message ", message_index, ", row ", i, ": ", status.message(),
            ". Nothing of this upload was stored; fix the row and upload again.")));
      }
      // An open column's value joins the upload's dictionary; past its
      // limit the refusal keeps its code (RESOURCE_EXHAUSTED).
      if (absl::Status open = open_values->AddRow(cells); !open.ok()) {
        return ToGrpcStatus(absl::Status(
            open.code(), absl::StrCat("upload message ", message_index, ", row ", i, ": ",
                                      open.message(), ". Nothing of this upload was stored.")));
      }
    }
    data::Table chunk = builder.Finish();
    open_values->Fill(&chunk);
    rows_held += chunk.num_rows();
    cells_clamped += chunk.clamped_cells;
    if (chunk.num_rows() > 0) chunks.push_back(std::move(chunk));
    ++message_index;
  }
  if (dataset_id.empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("upload stream carried no messages"));
  }
  // A client that gives up mid-file cancels the call; the stream then ends
  // like a finished one, so the cancellation is what says not to commit.
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "the upload was cancelled; nothing of it was stored");
  }
  // A message refused by the input-limits interceptor reaches this handler
  // cleared and the call's final status is rewritten; the refusal shows in
  // Check(), which must then commit nothing either.
  DPC_GRPC_ASSIGN_OR_RETURN(Role still_allowed, authorizer_->Check(context));
  (void)still_allowed;
  DPC_GRPC_ASSIGN_OR_RETURN(int64_t total, store_->AppendChunks(dataset_id, chunks, append,
                                                                     &*open_values));
  response->set_rows_accepted(rows_held);
  response->set_cells_clamped(cells_clamped);
  response->set_total_rows(total);
  // Counts only: never a cell (PRIVACY.md).
  LogEvent(LogLevel::kInfo, "rows_uploaded")
      .Str("role", RoleName(role))
      .Str("dataset", dataset_id)
      .Int("rows", response->rows_accepted())
      .Int("clamped_cells", response->cells_clamped())
      .Bool("append", append);
  return grpc::Status::OK;
}

grpc::Status DatasetServiceImpl::DeleteDataset(grpc::ServerContext* context,
                                               const v1::DeleteDatasetRequest* request,
                                               v1::DeleteDatasetResponse* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->dataset_id());
  DPC_GRPC_ASSIGN_OR_RETURN(v1::Dataset dataset, store_->GetDataset(request->dataset_id()));
  DPC_GRPC_RETURN_IF_ERROR(store_->DeleteDataset(request->dataset_id()));
  response->set_dataset_id(dataset.id());
  response->set_rows_deleted(dataset.row_count());
  LogEvent(LogLevel::kInfo, "dataset_deleted")
      .Str("role", RoleName(role))
      .Str("dataset", dataset.id())
      .Int("rows", dataset.row_count());
  return grpc::Status::OK;
}

grpc::Status DatasetServiceImpl::SetBins(grpc::ServerContext* context,
                                         const v1::SetBinsRequest* request,
                                         v1::Dataset* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->dataset_id());
  DPC_GRPC_ASSIGN_OR_RETURN(*response, store_->SetBins(request->dataset_id(), request->schema()));
  // Public metadata only: the ids, never the edges.
  LogEvent(LogLevel::kInfo, "dataset_bins_set")
      .Str("role", RoleName(role))
      .Str("dataset", response->id())
      .Str("schema_fingerprint", response->schema_fingerprint());
  return grpc::Status::OK;
}

grpc::Status DatasetServiceImpl::SetCategories(grpc::ServerContext* context,
                                               const v1::SetCategoriesRequest* request,
                                               v1::Dataset* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->dataset_id());
  DPC_GRPC_ASSIGN_OR_RETURN(*response,
                            store_->SetCategories(request->dataset_id(), request->schema()));
  // Public metadata only: the ids, never a category (a published one is
  // public, but the log is no place for values).
  LogEvent(LogLevel::kInfo, "dataset_categories_set")
      .Str("role", RoleName(role))
      .Str("dataset", response->id())
      .Str("schema_fingerprint", response->schema_fingerprint());
  return grpc::Status::OK;
}

grpc::Status DatasetServiceImpl::ListDatasets(grpc::ServerContext* context,
                                              const v1::ListDatasetsRequest* request,
                                              v1::ListDatasetsResponse* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  // One page, by rows and bytes (server/paging.h).
  PageRequest page;
  page.page_size = request->page_size();
  page.page_token = request->page_token();
  DPC_GRPC_ASSIGN_OR_RETURN(*response, store_->ListDatasets(page, [role](v1::Dataset& dataset) {
    // Under ADD_REMOVE the row count is private (PRIVACY.md): analysts get
    // noisy counts through releases, never this number.
    if (role != Role::kCurator && dataset.relation() != v1::REPLACE_ONE) {
      dataset.clear_row_count();
      // Said outright, so that a client does not read the cleared count as
      // an empty dataset, nor a curator's empty dataset as a hidden count.
      dataset.set_row_count_hidden(true);
    }
  }));
  return grpc::Status::OK;
}

grpc::Status DatasetServiceImpl::GetBudget(grpc::ServerContext* context,
                                           const v1::GetBudgetRequest* request,
                                           v1::BudgetReport* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->dataset_id());
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(Caller caller, CallerOf(*authorizer_, context));
  PageRequest page;
  page.page_size = request->page_size();
  page.page_token = request->page_token();
  DPC_GRPC_ASSIGN_OR_RETURN(*response, ledger_->Report(request->dataset_id(), caller, page));
  // Free: the totals are at hand (the open-session gauge is kept by the
  // calls that open and close sessions).
  metrics_->SetEpsilon(response->dataset_id(), response->epsilon_spent(),
                       response->epsilon_remaining());
  return grpc::Status::OK;
}

// The path of one release in three hops, each found by its name:
//   AdmitRelease      plan (every parameter against data-independent bounds,
//                     calibration, defaults), then the ledger admits or
//                     refuses, durably, before any row is read;
//   RunReleaseEngine  the kind's engine over the stored rows, under the
//                     failure principle (docs/privacy.md 6.1);
//   DeliverRelease    the artefact stored once (a retry replays it).
grpc::Status ReleaseServiceImpl::RequestRelease(grpc::ServerContext* context,
                                                const v1::ReleaseRequest* request,
                                                v1::Release* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->dataset_id());
  DPC_GRPC_ASSIGN_OR_RETURN(Caller caller, CallerOf(*authorizer_, context));
  DPC_GRPC_ASSIGN_OR_RETURN(AdmittedRelease admitted,
                            AdmitRelease(role, caller, *request, context));
  const Ledger::Admission& admission = admitted.admission;
  if (admission.outcome == Ledger::Admission::Outcome::kReplay) {
    if (!response->ParseFromString(admission.artefact)) {
      return ToGrpcStatus(absl::DataLossError("stored release does not parse"));
    }
    response->set_replayed(true);
    response->set_epsilon_spent_total(admission.epsilon_spent);
    response->set_epsilon_remaining(admission.epsilon_remaining);
    LogEvent(LogLevel::kInfo, "release_replayed")
        .Str("role", RoleName(role))
        .Str("dataset", admitted.dataset.id())
        .Str("release", admission.release_id);
    return grpc::Status::OK;
  }
  // This attempt holds the release's lease until it returns.
  ReleaseAttempt attempt(ledger_, admission.release_id);
  // Audit: the charge this call made (a resumed admission was charged by
  // the call that crashed).
  authorizer_->NoteDetail(context, absl::StrCat("release=", admission.release_id));
  if (admission.outcome == Ledger::Admission::Outcome::kAdmitted) {
    authorizer_->NoteEpsilon(context, admission.epsilon_alone);
  }
  if (admitted.dataset.external()) {
    // Charged (now or by an earlier call with this key); the curator's
    // runner computes it. Nothing is read here.
    PendingRelease(admitted, response);
    RefreshBudget(*ledger_, *metrics_, admitted.dataset.id());
    LogEvent(LogLevel::kInfo, "release_pending")
        .Str("role", RoleName(role))
        .Str("dataset", admitted.dataset.id())
        .Str("release", admission.release_id)
        .Str("kind", admitted.plan.kind_name())
        .Bool("replayed", response->replayed());
    return grpc::Status::OK;
  }
  bool refunded = false;
  std::string incident;
  absl::StatusOr<v1::Release> computed = RunReleaseEngine(admitted, &refunded, &incident);
  if (refunded) authorizer_->NoteEpsilon(context, 0.0);
  if (!computed.ok()) return ToGrpcStatus(computed.status());
  // Still after the read: a throw while storing or answering is an
  // incident like any other.
  absl::Status delivered =
      Guarded([&] { return DeliverRelease(role, admitted, *std::move(computed), response); });
  if (!delivered.ok() && !incident.empty()) {
    return ToGrpcStatus(ReleaseFailedAfterRowsRead(admitted, incident, delivered));
  }
  return ToGrpcStatus(delivered);
}

absl::StatusOr<ReleaseServiceImpl::AdmittedRelease> ReleaseServiceImpl::AdmitRelease(
    Role role, const Caller& caller, const v1::ReleaseRequest& request,
    const grpc::ServerContextBase* context) {
  AdmittedRelease admitted;
  DPC_ASSIGN_OR_RETURN(admitted.dataset, store_->GetDataset(request.dataset_id()));
  DPC_ASSIGN_OR_RETURN(admitted.schema, SchemaFromProto(admitted.dataset.schema()));
  DPC_ASSIGN_OR_RETURN(admitted.plan, PlanRelease(request, admitted.dataset, admitted.schema));
  // Before admission: an answer over the send limit, or a peak over what
  // the memory budget has left, is refused with nothing charged.
  DPC_ASSIGN_OR_RETURN(admitted.memory,
                       ReserveFootprint(admitted.plan.footprint, memory_budget_,
                                        max_message_bytes_, context));
  // An external dataset's release is charged with its plan, which the
  // curator's runner computes (docs/scale-out.md "External datasets").
  std::optional<Ledger::JobPlan> job;
  if (admitted.dataset.external()) {
    job.emplace();
    job->kind = admitted.plan.kind();
    job->schema = admitted.dataset.schema().SerializeAsString();
    job->request = admitted.plan.resolved_request.SerializeAsString();
    job->digest = PlanDigest(job->schema, job->request);
  }
  // The idempotency check compares the analyst's request, not the resolved
  // one (the server-drawn seed differs between attempts).
  absl::StatusOr<Ledger::Admission> admission =
      ledger_->Admit(admitted.dataset.id(), caller, request.idempotency_key(),
                     admitted.plan.kind_name(), request.SerializeAsString(), *admitted.plan.event,
                     job.has_value() ? &*job : nullptr);
  if (!admission.ok()) {
    // Counted by the metrics interceptor (dpcurator_release_refusals_total).
    LogEvent(LogLevel::kInfo, "release_refused")
        .Str("role", RoleName(role))
        .Str("dataset", admitted.dataset.id())
        .Str("kind", admitted.plan.kind_name())
        .Code(admission.status().code());
    return admission.status();
  }
  admitted.admission = *std::move(admission);
  return admitted;
}

absl::StatusOr<v1::Release> ReleaseServiceImpl::RunReleaseEngine(const AdmittedRelease& admitted,
                                                                  bool* refunded,
                                                                  std::string* incident) {
  const Ledger::Admission& admission = admitted.admission;
  const v1::Dataset& dataset = admitted.dataset;
  // Before any row is read: the noise source, the engine's allocations
  // sized by the request (the frequency matrix; docs/privacy.md 6.4), and
  // the durable "rows read" mark. Failing here is the one failure that may
  // be refunded, and only when this attempt made the charge (a resumed
  // charge's earlier attempt may have read rows).
  auto noise = noise_source_();
  absl::Status before_rows = noise.ok() ? Hit(failpoint_, "release.before_rows_read")
                                        : noise.status();
  std::unique_ptr<PreparedEngine> engine;
  if (before_rows.ok() && !admitted.plan.mst.has_value() && !admitted.plan.aim.has_value() &&
      !admitted.plan.marginals.has_value() && !admitted.plan.category_fit.has_value()) {
    before_rows = Guarded([&]() -> absl::Status {
      DPC_ASSIGN_OR_RETURN(engine, PrepareRelease(admitted.plan, admitted.schema));
      return absl::OkStatus();
    });
  }
  if (before_rows.ok()) {
    // From here on a crash leaves a release that a retry makes FAILED with
    // this incident, never one it recomputes (docs/privacy.md 6.3).
    const std::string marked = NewId("inc");
    before_rows = ledger_->MarkRowsRead(admission.release_id, marked);
    if (before_rows.ok()) *incident = marked;
  }
  if (!before_rows.ok()) {
    if (admission.outcome == Ledger::Admission::Outcome::kAdmitted) {
      *refunded = ledger_
                     ->Refund(admission.release_id,
                              "the server could not start the release before any row was read")
                     .ok();
      RefreshBudget(*ledger_, *metrics_, dataset.id());
    }
    LogEvent(LogLevel::kError, "release_not_started")
        .Str("dataset", dataset.id())
        .Str("release", admission.release_id)
        .Code(before_rows.code())
        .Bool("refunded", *refunded);
    return absl::UnavailableError(absl::StrCat(
        "the server could not start release '", admission.release_id,
        "' (its noise source or the memory for its parameters was unavailable) before reading "
        "any row; ",
        *refunded ? "the charge was refunded. " : "", "Retry later with the same idempotency key."));
  }
  // From the first row read on, a failure (returned or thrown) keeps its
  // charge and says nothing data-dependent (docs/privacy.md 6.1).
  auto computed = Guarded([&]() -> absl::StatusOr<v1::Release> {
    if (admitted.plan.mst.has_value()) {
      // MST discretises the stored values, not the encoded features.
      DPC_ASSIGN_OR_RETURN(std::shared_ptr<const data::Table> table,
                           store_->LoadRows(dataset.id(), admitted.schema));
      DPC_RETURN_IF_ERROR(Hit(failpoint_, "release.after_rows_read"));
      return ComputeMstRelease(admitted.plan, dataset, admitted.schema, *table,
                               admission.release_id, admission.epsilon_alone, noise->get());
    }
    if (admitted.plan.aim.has_value()) {
      // AIM too discretises the stored values.
      DPC_ASSIGN_OR_RETURN(std::shared_ptr<const data::Table> table,
                           store_->LoadRows(dataset.id(), admitted.schema));
      DPC_RETURN_IF_ERROR(Hit(failpoint_, "release.after_rows_read"));
      return ComputeAimRelease(admitted.plan, dataset, admitted.schema, *table,
                               admission.release_id, admission.epsilon_alone, noise->get());
    }
    if (admitted.plan.marginals.has_value()) {
      // Marginals (ordinary or partitioned) discretise the stored values.
      DPC_ASSIGN_OR_RETURN(std::shared_ptr<const data::Table> table,
                           store_->LoadRows(dataset.id(), admitted.schema));
      DPC_RETURN_IF_ERROR(Hit(failpoint_, "release.after_rows_read"));
      return ComputeMarginalsRelease(*admitted.plan.marginals, dataset, admitted.schema, *table,
                                     admission.release_id,
                                     admitted.plan.resolved_request.idempotency_key(),
                                     admission.epsilon_alone, noise->get());
    }
    if (admitted.plan.category_fit.has_value()) {
      // The category fit counts an open column's stored values (issue 38);
      // its engine never fails, and logs nothing of the values.
      const plan::CategoryFitPlan& fit = *admitted.plan.category_fit;
      DPC_ASSIGN_OR_RETURN(const release::OpenColumnValues values,
                           store_->LoadOpenColumn(dataset.id(), fit.column));
      DPC_RETURN_IF_ERROR(Hit(failpoint_, "release.after_rows_read"));
      return plan::ComputeCategoryFitRelease(fit, dataset, values, admission.release_id,
                                             admitted.plan.resolved_request.idempotency_key(),
                                             admission.epsilon_alone, noise->get());
    }
    DPC_ASSIGN_OR_RETURN(std::shared_ptr<const release::EncodedRows> rows,
                         store_->LoadEncodedRows(dataset.id(), admitted.schema));
    DPC_RETURN_IF_ERROR(Hit(failpoint_, "release.after_rows_read"));
    return ComputeRelease(admitted.plan, *engine, dataset, *rows, admission.release_id,
                          admission.epsilon_alone, noise->get());
  });
  if (computed.ok()) return computed;
  return ReleaseFailedAfterRowsRead(admitted, *incident, computed.status());
}

absl::Status ReleaseServiceImpl::ReleaseFailedAfterRowsRead(const AdmittedRelease& admitted,
                                                            const std::string& incident,
                                                            const absl::Status& cause) {
  const std::string& release_id = admitted.admission.release_id;
  metrics_->RecordFailureAfterRowsRead("release");
  absl::Status marked = ledger_->FailAfterRowsRead(release_id, incident);
  if (!marked.ok()) {
    // The "rows read" mark stands: a retry makes the release FAILED with
    // this incident instead of recomputing it.
    LogEvent(LogLevel::kError, "release_failure_not_recorded")
        .Str("incident", incident)
        .Str("release", release_id)
        .Code(marked.code());
  }
  return FromGrpcStatus(
      FailureAfterRowsRead("release", release_id, admitted.dataset.id(), incident, cause));
}

void ReleaseServiceImpl::PendingRelease(const AdmittedRelease& admitted, v1::Release* response) {
  const Ledger::Admission& admission = admitted.admission;
  response->set_id(admission.release_id);
  response->set_dataset_id(admitted.dataset.id());
  response->set_idempotency_key(admitted.plan.resolved_request.idempotency_key());
  response->set_kind(admitted.plan.kind());
  response->set_created_unix(clock_->UnixNow());
  response->set_state(v1::RELEASE_STATE_PENDING);
  response->set_replayed(admission.outcome == Ledger::Admission::Outcome::kWaiting);
  response->set_epsilon_spent_total(admission.epsilon_spent);
  response->set_epsilon_remaining(admission.epsilon_remaining);
}

absl::Status ReleaseServiceImpl::DeliverRelease(Role role, const AdmittedRelease& admitted,
                                                v1::Release computed, v1::Release* response) {
  const Ledger::Admission& admission = admitted.admission;
  computed.set_created_unix(clock_->UnixNow());
  computed.set_state(v1::RELEASE_STATE_DONE);
  DPC_ASSIGN_OR_RETURN(std::string delivered,
                       ledger_->Complete(admission.release_id, computed.SerializeAsString()));
  if (!response->ParseFromString(delivered)) {
    return absl::DataLossError("stored release does not parse");
  }
  response->set_epsilon_spent_total(admission.epsilon_spent);
  response->set_epsilon_remaining(admission.epsilon_remaining);
  metrics_->RecordRelease(admitted.plan.kind_name(), admitted.dataset.id());
  metrics_->SetEpsilon(admitted.dataset.id(), admission.epsilon_spent,
                       admission.epsilon_remaining);
  LogEvent(LogLevel::kInfo, "release")
      .Str("role", RoleName(role))
      .Str("dataset", admitted.dataset.id())
      .Str("release", admission.release_id)
      .Str("kind", admitted.plan.kind_name())
      .Num("epsilon", admission.epsilon_alone)
      .Num("epsilon_spent", admission.epsilon_spent)
      .Num("epsilon_remaining", admission.epsilon_remaining);
  return absl::OkStatus();
}

grpc::Status ReleaseServiceImpl::GetRelease(grpc::ServerContext* context,
                                            const v1::GetReleaseRequest* request,
                                            v1::Release* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->release_id());
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(Caller caller, CallerOf(*authorizer_, context));
  DPC_GRPC_ASSIGN_OR_RETURN(std::string artefact,
                            ledger_->GetArtefact(request->release_id(), caller, nullptr));
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
  DPC_GRPC_ASSIGN_OR_RETURN(Caller caller, CallerOf(*authorizer_, context));
  PageRequest page;
  page.page_size = request->page_size();
  page.page_token = request->page_token();
  DPC_GRPC_ASSIGN_OR_RETURN(*response,
                            ledger_->ListReleases(request->dataset_id(), caller, page));
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
  DPC_GRPC_RETURN_IF_ERROR(
      CheckStepsCanRun(plan.resolved_params, dataset, memory_budget_, max_message_bytes_));
  DPC_GRPC_ASSIGN_OR_RETURN(Caller caller, CallerOf(*authorizer_, context));
  DPC_GRPC_ASSIGN_OR_RETURN(
      Ledger::SessionAdmission admission,
      ledger_->OpenSession(dataset.id(), caller, request->idempotency_key(),
                           request->SerializeAsString(),
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

grpc::Status SessionServiceImpl::OpenPartitionedSessions(
    grpc::ServerContext* context, const v1::OpenPartitionedSessionsRequest* request,
    v1::PartitionedSessions* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->dataset_id());
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(v1::Dataset dataset, store_->GetDataset(request->dataset_id()));
  // Every refusal is here, before admission: nothing is charged by one.
  DPC_GRPC_ASSIGN_OR_RETURN(PartitionedPlan plan, PlanPartitionedSessions(*request, dataset));
  for (const Ledger::SessionPart& part : plan.parts) {
    DPC_GRPC_RETURN_IF_ERROR(
        CheckStepsCanRun(part.params, dataset, memory_budget_, max_message_bytes_));
  }
  DPC_GRPC_ASSIGN_OR_RETURN(Caller caller, CallerOf(*authorizer_, context));
  const std::vector<std::string> values = plan.values;  // by level, as the sessions come back
  DPC_GRPC_ASSIGN_OR_RETURN(
      Ledger::PartitionedAdmission admission,
      ledger_->OpenPartitionedSessions(dataset.id(), caller, request->idempotency_key(),
                                       request->SerializeAsString(), std::move(plan.parts)));
  if (admission.sessions.size() != values.size()) {
    // The same key and bytes name the same parts, so a replay has them all.
    return ToGrpcStatus(absl::InternalError("the partitioned sessions do not match the request"));
  }
  response->set_dataset_id(dataset.id());
  response->set_column(plan.column);
  response->set_replayed(admission.replayed);
  for (size_t k = 0; k < values.size(); ++k) {
    response->add_values(values[k]);
    *response->add_sessions() = admission.sessions[k];
  }
  const v1::Session& first = admission.sessions.front();
  authorizer_->NoteDetail(context, absl::StrCat("partition=", plan.column, " parts=",
                                                values.size(), " session=", first.id()));
  // One charge for the group: each member carries it as its epsilon_reserved.
  if (!admission.replayed) authorizer_->NoteEpsilon(context, first.epsilon_reserved());
  RefreshBudget(*ledger_, *metrics_, dataset.id());
  LogEvent(LogLevel::kInfo,
           admission.replayed ? "partitioned_sessions_replayed" : "partitioned_sessions_opened")
      .Str("role", RoleName(role))
      .Str("dataset", dataset.id())
      .Str("column", plan.column)
      .Int("parts", static_cast<int64_t>(values.size()))
      .Int("steps", first.steps_reserved())
      .Num("epsilon", first.epsilon_reserved());
  return grpc::Status::OK;
}

grpc::Status SessionServiceImpl::Step(grpc::ServerContext* context,
                                      const v1::SessionStepRequest* request,
                                      v1::SessionStepResponse* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->session_id());
  authorizer_->NoteDetail(context, absl::StrCat("step=", request->step()));
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(Caller caller, CallerOf(*authorizer_, context));
  DPC_GRPC_ASSIGN_OR_RETURN(Ledger::StepAdmission admission,
                            ledger_->BeginStep(request->session_id(), caller, request->step()));
  DPC_GRPC_RETURN_IF_ERROR(CheckStepQuery(admission.session.params(), *request));
  const std::string step_id = absl::StrCat(request->session_id(), "/", request->step());
  Ledger::StoredStep outcome;
  if (admission.stored.has_value()) {
    outcome = *admission.stored;
    response->set_replayed(true);
  } else {
    const v1::Session& session = admission.session;
    // dp_sgd: in order (one stored answer per session) and at a bounded
    // rate per session, both refused before any row is read (no charge).
    DPC_GRPC_RETURN_IF_ERROR(CheckStepOrder(session, request->step()));
    if (KeepsOnlyLatestAnswer(session.params())) {
      DPC_GRPC_RETURN_IF_ERROR(DpSgdRateLimiter().Take(session.id(), MonotonicSeconds()));
    }
    DPC_GRPC_ASSIGN_OR_RETURN(v1::Dataset dataset, store_->GetDataset(session.dataset_id()));
    DPC_GRPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(dataset.schema()));
    // Before any row is read: a failure here leaves the step unused.
    DPC_GRPC_ASSIGN_OR_RETURN(std::unique_ptr<privacy::NoiseSource> noise, noise_source_());
    // A member of a partitioned open reads only its part's rows (public:
    // fixed at open; docs/privacy.md 3.7).
    DPC_GRPC_ASSIGN_OR_RETURN(const std::optional<int32_t> part,
                              ledger_->SessionPartLevel(session.id()));
    // Before any row is read: the step's peak from the memory budget, held
    // until it has run; a refusal leaves the step unused.
    DPC_GRPC_ASSIGN_OR_RETURN(
        const MemoryBudget::Reservation memory,
        ReserveFootprint(SessionStepFootprint(session.params(), dataset, schema),
                         memory_budget_, max_message_bytes_, context));
    // From the first row read on, a failure is the step's outcome: stored,
    // counted as used (its reservation is never returned), and answered
    // with an incident id only (docs/privacy.md 6.1).
    // A throw (std::bad_alloc included) is such a failure too (docs/privacy.md 6.4).
    auto computed = Guarded([&]() -> absl::StatusOr<std::string> {
      DPC_ASSIGN_OR_RETURN(std::shared_ptr<const release::EncodedRows> rows,
                           store_->LoadEncodedRows(dataset.id(), schema));
      DPC_RETURN_IF_ERROR(Hit(failpoint_, "session_step.after_rows_read"));
      if (part.has_value()) {
        const std::vector<int64_t> part_rows = RowIndicesOfPart(*rows, *part);
        return ComputeSessionStep(session, dataset, *rows, step_id, *request, noise.get(),
                                  &part_rows);
      }
      return ComputeSessionStep(session, dataset, *rows, step_id, *request, noise.get());
    });
    Ledger::StoredStep attempt;
    if (computed.ok()) {
      attempt.artefact = *std::move(computed);
    } else {
      metrics_->RecordFailureAfterRowsRead("session_step");
      attempt.incident = NewId("inc");
      LogEvent(LogLevel::kError, "failed_after_rows_read")
          .Str("incident", attempt.incident)
          .Str("dataset", dataset.id())
          .Str("session", session.id())
          .Int("step", request->step())
          .Code(computed.status().code())
          .Str("detail", RedactedDetail(computed.status().message()));
    }
    // Stored before it is returned: a retry of this index replays it, and
    // only the first outcome stored for an index is ever delivered.
    DPC_GRPC_ASSIGN_OR_RETURN(outcome,
                              ledger_->RecordStep(session.id(), request->step(), attempt,
                                                  KeepsOnlyLatestAnswer(session.params())));
  }
  if (outcome.failed()) return IncidentStatus("session step", step_id, outcome.incident);
  DPC_GRPC_RETURN_IF_ERROR(SetStepAnswer(admission.session.params(), outcome.artefact, response));
  DPC_GRPC_ASSIGN_OR_RETURN(*response->mutable_session(),
                            ledger_->GetSession(request->session_id(), caller));
  return grpc::Status::OK;
}

grpc::Status SessionServiceImpl::CloseSession(grpc::ServerContext* context,
                                              const v1::CloseSessionRequest* request,
                                              v1::Session* response) {
  DPC_GRPC_ASSIGN_OR_RETURN(Role role, authorizer_->Check(context));
  authorizer_->NoteTarget(context, request->session_id());
  (void)role;
  DPC_GRPC_ASSIGN_OR_RETURN(Caller caller, CallerOf(*authorizer_, context));
  DPC_GRPC_ASSIGN_OR_RETURN(*response, ledger_->CloseSession(request->session_id(), caller));
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
  DPC_GRPC_ASSIGN_OR_RETURN(Caller caller, CallerOf(*authorizer_, context));
  DPC_GRPC_ASSIGN_OR_RETURN(*response, ledger_->GetSession(request->session_id(), caller));
  return grpc::Status::OK;
}

}  // namespace dpcurator::server
