// Store methods for local-DP collections (migration 3 in store.cc).
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "proto/collection.h"
#include "server/store.h"

namespace dpcurator::server {
namespace {

constexpr const char* kCollectionColumns =
    "id, name, params, state, dimension, noise_scale, regularizer, cost_exponent, report_count, "
    "created_unix";

v1::Collection CollectionFromRow(const Statement& row) {
  v1::Collection collection;
  collection.set_id(row.ColumnText(0));
  collection.set_name(row.ColumnText(1));
  collection.mutable_params()->ParseFromString(row.ColumnBlob(2));
  collection.set_state(row.ColumnText(3) == "OPEN" ? v1::Collection::OPEN
                                                   : v1::Collection::CLOSED);
  collection.set_dimension(static_cast<int32_t>(row.ColumnInt(4)));
  collection.set_noise_scale(row.ColumnDouble(5));
  collection.set_regularizer(row.ColumnDouble(6));
  collection.set_cost_exponent(static_cast<int32_t>(row.ColumnInt(7)));
  collection.set_report_count(row.ColumnInt(8));
  collection.set_created_unix(row.ColumnInt(9));
  return collection;
}

}  // namespace

absl::StatusOr<v1::Collection> Store::CreateCollection(const std::string& name,
                                                       const v1::CollectionParams& resolved,
                                                       int dimension, double noise_scale,
                                                       double regularizer, int cost_exponent) {
  auto db = database_->Lock();
  const std::string id = NewId("col");
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db.get()));
  DPC_ASSIGN_OR_RETURN(auto insert,
                       db->Prepare(absl::StrCat("INSERT INTO collections (", kCollectionColumns,
                                                 ") VALUES (?, ?, ?, 'OPEN', ?, ?, ?, ?, 0, ?)")));
  DPC_RETURN_IF_ERROR(insert.Bind(1, id)
                          .Bind(2, name)
                          .BindBlob(3, resolved.SerializeAsString())
                          .Bind(4, int64_t{dimension})
                          .Bind(5, noise_scale)
                          .Bind(6, regularizer)
                          .Bind(7, int64_t{cost_exponent})
                          .Bind(8, clock_->UnixNow())
                          .Run());
  DPC_RETURN_IF_ERROR(transaction.Commit());
  return GetCollectionLocked(db, id);
}

absl::StatusOr<v1::Collection> Store::GetCollection(const std::string& collection_id) {
  auto db = database_->Lock();
  return GetCollectionLocked(db, collection_id);
}

absl::StatusOr<v1::Collection> Store::GetCollectionLocked(const SharedDatabase::Locked& db,
                                                          const std::string& collection_id) {
  DPC_ASSIGN_OR_RETURN(auto query,
                       db->Prepare(absl::StrCat("SELECT ", kCollectionColumns,
                                                 " FROM collections WHERE id = ?")));
  query.Bind(1, collection_id);
  DPC_ASSIGN_OR_RETURN(bool found, query.Step());
  if (!found) {
    return absl::NotFoundError(absl::StrCat("no collection '", collection_id, "'"));
  }
  return CollectionFromRow(query);
}

absl::StatusOr<v1::Collection> Store::CloseCollection(const std::string& collection_id) {
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db.get()));
  DPC_ASSIGN_OR_RETURN(v1::Collection collection, GetCollectionLocked(db, collection_id));
  DPC_ASSIGN_OR_RETURN(auto update,
                       db->Prepare("UPDATE collections SET state = 'CLOSED' WHERE id = ?"));
  DPC_RETURN_IF_ERROR(update.Bind(1, collection_id).Run());
  DPC_RETURN_IF_ERROR(transaction.Commit());
  collection.set_state(v1::Collection::CLOSED);
  return collection;
}

absl::StatusOr<v1::SubmitReportsAck> Store::IngestReports(const std::string& collection_id,
                                                          const v1::SubmitReportsRequest& batch,
                                                          int64_t batch_index,
                                                          const std::string& principal,
                                                          int64_t max_reports_per_token) {
  auto db = database_->Lock();
  v1::SubmitReportsAck ack;
  ack.set_batch_index(batch_index);
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db.get()));
  DPC_ASSIGN_OR_RETURN(v1::Collection collection, GetCollectionLocked(db, collection_id));
  if (collection.state() != v1::Collection::OPEN) {
    return absl::FailedPreconditionError(
        absl::StrCat("collection '", collection_id, "' is closed and accepts no more reports"));
  }
  const int dimension = collection.dimension();
  // The collection's own mechanism (public parameters) fixes the bound.
  DPC_ASSIGN_OR_RETURN(const ldp::LdpMechanism mechanism, MechanismFromCollection(collection));
  const double bound = ReportValueBound(mechanism);
  if (insert_report_ == nullptr) {
    DPC_ASSIGN_OR_RETURN(Statement insert,
                         db->Prepare("INSERT OR IGNORE INTO ldp_reports (collection_id, "
                                      "report_id, report, created_unix, principal) "
                                      "VALUES (?, ?, ?, ?, ?)"));
    insert_report_ = std::make_unique<Statement>(std::move(insert));
    DPC_ASSIGN_OR_RETURN(Statement count,
                         db->Prepare("UPDATE collections SET report_count = report_count + ? "
                                      "WHERE id = ?"));
    count_reports_ = std::make_unique<Statement>(std::move(count));
  }
  const int64_t now = clock_->UnixNow();
  int accepted = 0;
  int duplicates = 0;
  for (int i = 0; i < batch.reports_size(); ++i) {
    const v1::Report& report = batch.reports(i);
    // The same pure check the fuzz target runs (proto/collection.h).
    if (absl::Status valid = ValidateReport(report, dimension, bound); !valid.ok()) {
      v1::Rejection* rejection = ack.add_rejections();
      rejection->set_index(i);
      rejection->set_report_id_hex(absl::BytesToHexString(report.report_id().substr(0, 64)));
      rejection->set_reason(std::string(valid.message()));
      continue;
    }
    absl::string_view bytes(reinterpret_cast<const char*>(report.values().data()),
                            static_cast<size_t>(dimension) * sizeof(double));
    insert_report_->Reset();
    absl::Status status = insert_report_->Bind(1, collection_id)
                              .BindBlob(2, report.report_id())
                              .BindBlob(3, bytes)
                              .Bind(4, now)
                              .Bind(5, principal)
                              .Run();
    insert_report_->Reset();
    DPC_RETURN_IF_ERROR(status);
    if (db->Changes() == 1) {
      ++accepted;
    } else {
      ++duplicates;
    }
  }
  if (accepted > 0) {
    // The quota, counted in this transaction after the inserts: the count
    // includes this batch and nothing can slip in between (issue 24, item
    // 3). Over it, returning rolls the whole batch back. The counts are the
    // caller's own, so saying them reveals nothing about other devices.
    int64_t stored = 0;
    {  // The statement is finalized before the commit below.
      DPC_ASSIGN_OR_RETURN(auto count, db->Prepare("SELECT COUNT(*) FROM ldp_reports WHERE "
                                                    "collection_id = ? AND principal = ?"));
      count.Bind(1, collection_id).Bind(2, principal);
      DPC_ASSIGN_OR_RETURN(bool counted, count.Step());
      if (counted) stored = count.ColumnInt(0);
    }
    if (stored > max_reports_per_token) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "this device token may store at most ", max_reports_per_token,
          " reports in collection '", collection_id, "' and has ", stored - accepted,
          "; batch ", batch_index, " would add ", accepted,
          ". Nothing of this batch was stored."));
    }
    count_reports_->Reset();
    absl::Status status =
        count_reports_->Bind(1, int64_t{accepted}).Bind(2, collection_id).Run();
    count_reports_->Reset();
    DPC_RETURN_IF_ERROR(status);
  }
  DPC_RETURN_IF_ERROR(transaction.Commit());
  ack.set_accepted(accepted);
  ack.set_duplicates(duplicates);
  return ack;
}

absl::StatusOr<int> Store::ReadReportPage(const std::string& collection_id, int dimension,
                                          const std::string& after_report_id, int max_rows,
                                          std::vector<double>* values,
                                          std::string* last_report_id) {
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto query,
                       db->Prepare("SELECT report_id, report FROM ldp_reports WHERE "
                                    "collection_id = ? AND report_id > ? ORDER BY report_id "
                                    "LIMIT ?"));
  query.Bind(1, collection_id).BindBlob(2, after_report_id).Bind(3, int64_t{max_rows});
  int rows = 0;
  const size_t row_bytes = static_cast<size_t>(dimension) * sizeof(double);
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    const std::string blob = query.ColumnBlob(1);
    if (blob.size() != row_bytes) {
      return absl::DataLossError(absl::StrCat("a report of collection '", collection_id,
                                              "' has the wrong size; run the integrity check"));
    }
    const size_t old_size = values->size();
    values->resize(old_size + dimension);
    std::memcpy(values->data() + old_size, blob.data(), row_bytes);
    *last_report_id = query.ColumnBlob(0);
    ++rows;
  }
  return rows;
}

}  // namespace dpcurator::server
