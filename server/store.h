#ifndef DPCURATOR_SERVER_STORE_H_
#define DPCURATOR_SERVER_STORE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/release/category_fit.h"
#include "core/release/encoded_rows.h"
#include "dpcurator/v1/dpcurator.pb.h"
#include "server/clock.h"
#include "server/paging.h"
#include "server/shared_database.h"
#include "server/sqlite.h"

namespace dpcurator::server {

// One upload's values of the schema's open categorical columns (issue 38;
// docs/schema.md "Open columns"). Each open column gets the upload's own
// dictionary of distinct values, first seen first, and the upload's cells
// of that column hold an index into it (NaN for a missing cell).
// Store::AppendChunks maps those indices to the dataset's dictionary inside
// its transaction. Used by UploadRows beside data::TableBuilder, whose
// ParseCell has already checked each cell (its length, a missing value of a
// column that is not nullable).
class UploadOpenValues {
 public:
  explicit UploadOpenValues(const data::Schema& schema);
  // Whether the schema has no open column (nothing to code).
  bool empty() const { return columns_.empty(); }
  // Codes one row's open cells (the row's text cells in schema order, as
  // TableBuilder::AddRow took them); call after AddRow accepted the row.
  // RESOURCE_EXHAUSTED, naming the column and the limit, when a column's
  // dictionary would pass kMaxOpenValuesPerColumn (server/limits.h).
  absl::Status AddRow(absl::Span<const std::string> cells);
  // Writes the codes of the rows added since the last call into `chunk`'s
  // open columns: `chunk` holds exactly those rows, in order (the builder's
  // Finish after them).
  void Fill(data::Table* chunk);

  struct Column {
    int index = 0;  // the schema column
    std::vector<std::string> dictionary;
    absl::flat_hash_map<std::string, int32_t> lookup;
    std::vector<double> pending;  // codes not yet written into a chunk
  };
  const std::vector<Column>& columns() const { return columns_; }

 private:
  const data::Schema& schema_;
  std::vector<Column> columns_;
};

// The server's durable state in one SQLite file: datasets and their rows
// (stored encoded: one blob of doubles per uploaded chunk, and for an image
// dataset one blob of 8-bit pixel levels beside it), collections,
// tokens and the audit log. Releases and the ledger live in the same file
// but belong to Ledger (server/ledger.h); both reach the connection through
// one SharedDatabase. Schema changes (the ledger's tables included) are
// numbered migrations applied at open. Every method is safe to call from
// several threads: each holds the SharedDatabase lock for its whole run;
// SQLite's own locking (BEGIN IMMEDIATE, busy timeout) orders writers across
// processes.
class Store {
 public:
  // Applies the migrations. `database` and `clock` must outlive the store.
  static absl::StatusOr<std::unique_ptr<Store>> Open(SharedDatabase* database,
                                                     const Clock* clock);

  // The schema version after migrations.
  int schema_version() const { return schema_version_; }

  absl::StatusOr<v1::Dataset> CreateDataset(const v1::CreateDatasetRequest& request);
  absl::StatusOr<v1::Dataset> GetDataset(const std::string& dataset_id);
  // Every dataset (start-up: metrics).
  absl::StatusOr<std::vector<v1::Dataset>> ListDatasets();
  // One page of datasets in (created_unix, id) order, bounded by rows and
  // bytes (server/paging.h), each passed through `redact` (what the caller
  // may not see, e.g. an analyst's row counts) before its size is counted.
  absl::StatusOr<v1::ListDatasetsResponse> ListDatasets(
      const PageRequest& page, const std::function<void(v1::Dataset&)>& redact);

  // Appends parsed rows as one chunk, in one transaction. Refused once the
  // dataset is sealed (its first release fixes the data that was released).
  // An image dataset's rows carry their pixels (rows.pixels, num_rows x
  // pixels_per_image levels); a tabular dataset's carry none. Rows equal to
  // stored ones are refused as AppendChunks does, unless `append`.
  absl::StatusOr<int64_t> AppendRows(const std::string& dataset_id, const data::Table& rows,
                                     bool append = false);
  // Appends the chunks of one upload in ONE transaction: all of them or none
  // (an upload that fails part-way leaves the dataset as it was). Returns the
  // dataset's row count after.
  //
  // Unless `append`, an upload any of whose rows equals a row already stored
  // in the dataset (cells and pixels bit for bit) is FAILED_PRECONDITION and
  // stores nothing: the usual cause is the same file uploaded twice, and a
  // person stored twice is protected at half the strength (issue 38). The
  // message counts the repeated rows (the curator's own rows; UploadRows is
  // curator-only). Rows repeated within one upload are distinct records and
  // pass. Cost (docs/limits.md): one read of the stored rows inside the
  // transaction, and a 16-byte digest per row of the upload held meanwhile.
  //
  // A dataset with open columns (issue 38) needs `open`: the upload's
  // dictionaries (UploadOpenValues, whose codes the chunks' open columns
  // hold). Inside the transaction each value gets its index in the
  // dataset's dictionary (the open_values table), new values appended in
  // first-seen order; the stored cell is that index. An upload that would
  // bring a column past kMaxOpenValuesPerColumn distinct values is
  // RESOURCE_EXHAUSTED and stores nothing. The duplicate check above
  // compares the dataset's indices, so equal values are equal cells.
  absl::StatusOr<int64_t> AppendChunks(const std::string& dataset_id,
                                       absl::Span<const data::Table> chunks,
                                       bool append = false,
                                       const UploadOpenValues* open = nullptr);
  // Deletes the dataset's rows, in one transaction, and marks it deleted:
  // it is listed no more and takes no upload, release or session, but its
  // row stays so that the ledger's events, releases and audit records keep
  // naming it (the budget spent is history, never returned, and the id is
  // never reused). FAILED_PRECONDITION while a release is in progress or a
  // session is open on it; NOT_FOUND for an unknown or deleted id.
  absl::Status DeleteDataset(const std::string& dataset_id);
  // Issue 38 (docs/privacy.md 2.11.1): replaces the numeric columns' bins
  // with `schema`'s, refusing any other difference from the stored schema
  // (INVALID_ARGUMENT naming the column) and, as DeleteDataset, a dataset
  // with a release in progress or a session open. The rows, the ledger and
  // the earlier releases (with the fingerprint they were made under) stay;
  // the dataset's fingerprint becomes the new schema's.
  absl::StatusOr<v1::Dataset> SetBins(const std::string& dataset_id,
                                      const v1::TableSchema& schema);
  // Issue 38 (docs/schema.md "Open columns"): replaces the open columns'
  // categories with `schema`'s, as SetBins does bins: any other difference
  // from the stored schema is INVALID_ARGUMENT naming the column; each open
  // column's new list is non-empty, its last entry the catch-all (at least
  // two entries); refused while a release or session is in flight. The
  // stored values stay; LoadRows reads them under the new list.
  absl::StatusOr<v1::Dataset> SetCategories(const std::string& dataset_id,
                                            const v1::TableSchema& schema);
  // Every stored row of the dataset, in upload order, read from SQLite. An
  // open column's stored index is read through the dataset's dictionary by
  // `schema`'s ParseCell: with categories, a listed value (or alias) is its
  // level, any other value the catch-all, a missing one the missing level;
  // without categories the cell stays NaN (no level exists, and every
  // reader but the category fit is refused before: PlanRelease,
  // PlanSession).
  absl::StatusOr<std::shared_ptr<const data::Table>> LoadRows(const std::string& dataset_id,
                                                              const data::Schema& schema);
  // The same rows encoded as the release kinds read them
  // (core/release/encoded_rows.h). A sealed dataset's rows never change
  // again (AppendRows refuses them), so they are read and encoded once and
  // shared: releases and session steps on it reuse one in-memory copy (at
  // most kMaxCachedRowBytes in all, least recently used out first). An
  // unsealed dataset is read and encoded afresh every time.
  absl::StatusOr<std::shared_ptr<const release::EncodedRows>> LoadEncodedRows(
      const std::string& dataset_id, const data::Schema& schema);
  // Issue 38: an open categorical column's stored values (ColumnSchema.open;
  // the dictionary and each row's index, release::OpenColumnValues), for
  // the category fit. INVALID_ARGUMENT when `column` is not an open column
  // of the dataset's schema.
  absl::StatusOr<release::OpenColumnValues> LoadOpenColumn(const std::string& dataset_id,
                                                           int column);
  // The memory the cache of sealed, encoded rows may hold.
  static constexpr size_t kMaxCachedRowBytes = size_t{1} << 30;
  // Reads of row chunks from SQLite since the store opened (cache misses).
  int64_t row_loads() const { return row_loads_.load(); }

  // Runs PRAGMA integrity_check and the ledger's own invariants; returns the
  // problems found (empty when clean).
  absl::StatusOr<std::vector<std::string>> CheckIntegrity();

  // Local-DP collections (server/collection_store.cc). `resolved` holds the
  // validated parameters with the radius filled in.
  absl::StatusOr<v1::Collection> CreateCollection(const std::string& name,
                                                  const v1::CollectionParams& resolved,
                                                  int dimension, double noise_scale,
                                                  double regularizer, int cost_exponent);
  absl::StatusOr<v1::Collection> GetCollection(const std::string& collection_id);
  absl::StatusOr<v1::Collection> CloseCollection(const std::string& collection_id);
  // Validates and stores one batch of reports in ONE transaction (committed
  // before this returns): bad reports are listed as rejections, the good ones
  // stored, a report id already stored is counted as a duplicate and kept
  // once. FAILED_PRECONDITION when the collection is closed, NOT_FOUND when
  // it does not exist. `batch_index` is copied into the ack. Each stored
  // report records `principal` (the device token's id); when the batch would
  // bring that principal's reports in the collection above
  // `max_reports_per_token`, nothing of it is stored and RESOURCE_EXHAUSTED
  // says so (docs/privacy.md 2.6 "Report bounds and quotas").
  absl::StatusOr<v1::SubmitReportsAck> IngestReports(const std::string& collection_id,
                                                     const v1::SubmitReportsRequest& batch,
                                                     int64_t batch_index,
                                                     const std::string& principal,
                                                     int64_t max_reports_per_token);
  // One page of stored reports in report-id order after `after_report_id`
  // (empty: from the start): at most `max_rows` rows appended row-major to
  // `values`; returns the rows read and sets `last_report_id`.
  absl::StatusOr<int> ReadReportPage(const std::string& collection_id, int dimension,
                                     const std::string& after_report_id, int max_rows,
                                     std::vector<double>* values, std::string* last_report_id);

  // Bearer tokens and the audit log (server/admin_store.cc). Tokens are
  // kept as SHA-256 digests; `info.revoked_unix` 0 means valid.
  struct StoredToken {
    v1::TokenInfo info;
    std::string digest;  // 32 bytes
  };
  // ALREADY_EXISTS when the id or the digest is taken.
  absl::Status InsertToken(const v1::TokenInfo& info, const std::string& digest);
  absl::StatusOr<std::vector<StoredToken>> ListTokens(bool include_revoked);
  // NOT_FOUND for an unknown id, FAILED_PRECONDITION when already revoked.
  absl::StatusOr<v1::TokenInfo> RevokeToken(const std::string& token_id,
                                            const std::string& revoked_by);
  // One row standing for `count` calls, in its own (autocommit)
  // transaction; returns its id.
  absl::StatusOr<int64_t> AppendAudit(const v1::AuditRecord& record, int64_t count = 1);
  // Adds repeats to refused calls' rows: (row id, calls) pairs, in one
  // transaction (AuditLog; the audit table allows no other update).
  absl::Status AddAuditRepeats(const std::vector<std::pair<int64_t, int64_t>>& counts);
  // The retention pass: deletes the audit rows created before
  // `created_before_unix` (0: none for age) and the oldest beyond the
  // newest `max_rows` (0: no cap), in batches of bounded size, each its own
  // transaction. Returns the rows deleted.
  absl::StatusOr<int64_t> PruneAudit(int64_t created_before_unix, int64_t max_rows);
  // Newest first: at most `limit` rows with id < before_id (0: no bound),
  // fewer when the page reaches max_bytes (server/paging.h);
  // next_before_id is set when older rows may follow.
  absl::StatusOr<v1::ListAuditResponse> ListAudit(int limit, int64_t before_id,
                                                  size_t max_bytes = kMaxPageBytes);

  // The clock this store dates rows with (the server's, ServerOptions).
  const Clock& clock() const { return *clock_; }

 private:
  Store(SharedDatabase* database, const Clock* clock) : database_(database), clock_(clock) {}
  absl::Status Migrate();
  // LoadEncodedRows' read of an image dataset: the pixel blobs, read under
  // the lock, are decoded after it straight into the features
  // (data::EncodePixels), with no Table between.
  absl::StatusOr<std::shared_ptr<const release::EncodedRows>> LoadEncodedImages(
      const std::string& dataset_id, const data::Schema& schema);
  // The *Locked helpers run inside a caller's Lock(): they take it as proof.
  absl::StatusOr<v1::Dataset> GetDatasetLocked(const SharedDatabase::Locked& db,
                                               const std::string& dataset_id);

  // SetBins' and SetCategories' shared path: every column of the request
  // as sent through `check_requested`; then, in one transaction, both
  // schemas in canonical form, the same column count, each (stored,
  // requested) column pair through `check_column`, nothing else changed
  // (INVALID_ARGUMENT saying that only `what_may_change` can change) and,
  // as a delete, no rows in use (`action` ends that message); then the new
  // schema and fingerprint are stored and the cached encoding made under
  // the old schema is dropped.
  struct SchemaChange {
    std::string what_may_change;  // e.g. "numeric columns' bins"
    std::string action;           // e.g. "set bins"
    std::function<absl::Status(const v1::ColumnSchema& requested)> check_requested;
    std::function<absl::Status(int column, const v1::ColumnSchema& stored,
                               const v1::ColumnSchema& requested)>
        check_column;
  };
  absl::StatusOr<v1::Dataset> ChangeSchema(const std::string& dataset_id,
                                           const v1::TableSchema& requested,
                                           const SchemaChange& change);
  // Forgets a dataset's cached encoded rows (deleted, or read under an old
  // schema).
  void DropCachedRowsLocked(const SharedDatabase::Locked& db, const std::string& dataset_id);
  absl::StatusOr<v1::Collection> GetCollectionLocked(const SharedDatabase::Locked& db,
                                                     const std::string& collection_id);

  SharedDatabase* database_;
  const Clock* clock_;
  // The members below are guarded by the SharedDatabase lock (held by every
  // method), not a mutex of their own: one lock, as before the split, so
  // no lock-order question arises between Store and Ledger.
  // Sealed datasets' encoded rows: id -> rows, and the use order.
  struct CachedRows {
    std::shared_ptr<const release::EncodedRows> rows;
    size_t bytes = 0;
    uint64_t last_use = 0;
  };
  absl::flat_hash_map<std::string, CachedRows> sealed_rows_;
  size_t cached_row_bytes_ = 0;
  uint64_t use_clock_ = 0;
  // Atomic: counted while reading, read by tests without the lock.
  std::atomic<int64_t> row_loads_ = 0;
  // Prepared once and reused across rows and batches (ingestion speed).
  std::unique_ptr<Statement> insert_report_;
  std::unique_ptr<Statement> count_reports_;
  int schema_version_ = 0;
};

// The refusal of an upload to an external dataset (no rows are stored for
// it): FAILED_PRECONDITION saying where its rows are computed.
absl::Status ExternalUploadError(const std::string& dataset_id);

// Random identifier with a prefix, e.g. "ds_3f9a..." (128 bits, OpenSSL).
std::string NewId(const std::string& prefix);

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_STORE_H_
