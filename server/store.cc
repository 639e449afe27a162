#include "server/store.h"

#include <openssl/sha.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/privacy/noise_source.h"
#include "core/util/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "proto/convert.h"
#include "server/limits.h"

namespace dpcurator::server {
namespace {

// Numbered migrations; never edit one that has shipped, add a new one.
constexpr const char* kMigrations[] = {
    // 1: datasets, rows, releases, ledger.
    R"sql(
CREATE TABLE datasets (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  schema BLOB NOT NULL,
  schema_fingerprint TEXT NOT NULL,
  epsilon_cap REAL NOT NULL,
  delta REAL NOT NULL,
  relation INTEGER NOT NULL,
  row_count INTEGER NOT NULL DEFAULT 0,
  sealed INTEGER NOT NULL DEFAULT 0,
  created_unix INTEGER NOT NULL
);
CREATE TABLE row_chunks (
  dataset_id TEXT NOT NULL REFERENCES datasets(id),
  chunk INTEGER NOT NULL,
  num_rows INTEGER NOT NULL,
  cells BLOB NOT NULL,
  PRIMARY KEY (dataset_id, chunk)
);
CREATE TABLE releases (
  id TEXT PRIMARY KEY,
  dataset_id TEXT NOT NULL REFERENCES datasets(id),
  idempotency_key TEXT NOT NULL,
  kind TEXT NOT NULL,
  request BLOB NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('PENDING', 'DONE', 'FAILED')),
  artefact BLOB,
  epsilon REAL NOT NULL,
  created_unix INTEGER NOT NULL,
  UNIQUE (dataset_id, idempotency_key)
);
CREATE TABLE ledger_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  dataset_id TEXT NOT NULL REFERENCES datasets(id),
  release_id TEXT,
  kind TEXT NOT NULL,
  description TEXT NOT NULL,
  relation INTEGER NOT NULL,
  rdp BLOB NOT NULL,
  plain_gaussian INTEGER NOT NULL,
  inverse_variance_sum REAL NOT NULL,
  epsilon_alone REAL NOT NULL,
  refund_of INTEGER REFERENCES ledger_events(id),
  created_unix INTEGER NOT NULL
);
CREATE INDEX ledger_events_by_dataset ON ledger_events(dataset_id, id);
-- The ledger is append-only: a refund is a new row, never an edit.
CREATE TRIGGER ledger_events_no_update BEFORE UPDATE ON ledger_events
  BEGIN SELECT RAISE(ABORT, 'ledger events are append-only'); END;
CREATE TRIGGER ledger_events_no_delete BEFORE DELETE ON ledger_events
  BEGIN SELECT RAISE(ABORT, 'ledger events are append-only'); END;
-- Running totals so that admission is O(grid), not O(history).
CREATE TABLE ledger_totals (
  dataset_id TEXT PRIMARY KEY REFERENCES datasets(id),
  state BLOB NOT NULL,
  event_count INTEGER NOT NULL
);
)sql",
    // 2: sessions (iterative releases with a reservation) and their steps.
    R"sql(
CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  dataset_id TEXT NOT NULL REFERENCES datasets(id),
  idempotency_key TEXT NOT NULL,
  request BLOB NOT NULL,
  params BLOB NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('OPEN', 'CLOSED', 'ABANDONED')),
  steps_reserved INTEGER NOT NULL,
  noise_multiplier REAL NOT NULL,
  step_event TEXT NOT NULL,
  reserve_event_id INTEGER NOT NULL REFERENCES ledger_events(id),
  epsilon_reserved REAL NOT NULL,
  created_unix INTEGER NOT NULL,
  last_activity_unix INTEGER NOT NULL,
  UNIQUE (dataset_id, idempotency_key)
);
CREATE INDEX sessions_open ON sessions(state, last_activity_unix);
CREATE TABLE session_steps (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  step INTEGER NOT NULL,
  artefact BLOB NOT NULL,
  created_unix INTEGER NOT NULL,
  PRIMARY KEY (session_id, step)
);
)sql",
    // 3: local-DP collections and their reports (one row per report, the
    // report's values as a blob of little-endian doubles).
    R"sql(
CREATE TABLE collections (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  params BLOB NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('OPEN', 'CLOSED')),
  dimension INTEGER NOT NULL,
  noise_scale REAL NOT NULL,
  regularizer REAL NOT NULL,
  cost_exponent INTEGER NOT NULL,
  report_count INTEGER NOT NULL DEFAULT 0,
  created_unix INTEGER NOT NULL
);
CREATE TABLE ldp_reports (
  collection_id TEXT NOT NULL REFERENCES collections(id),
  report_id BLOB NOT NULL,
  report BLOB NOT NULL,
  created_unix INTEGER NOT NULL,
  PRIMARY KEY (collection_id, report_id)
) WITHOUT ROWID;
)sql",
    // 4: bearer tokens (SHA-256 digests only, never the token) and the audit
    // log. A token row is never deleted, and only its revocation may be
    // written once; audit rows are append-only like ledger events.
    R"sql(
CREATE TABLE tokens (
  id TEXT PRIMARY KEY,
  role TEXT NOT NULL CHECK (role IN ('curator', 'analyst', 'device')),
  digest BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
  label TEXT NOT NULL,
  created_unix INTEGER NOT NULL,
  created_by TEXT NOT NULL,
  revoked_unix INTEGER,
  revoked_by TEXT
);
CREATE TRIGGER tokens_no_delete BEFORE DELETE ON tokens
  BEGIN SELECT RAISE(ABORT, 'tokens are revoked, never deleted'); END;
CREATE TRIGGER tokens_revoke_only BEFORE UPDATE ON tokens
  WHEN OLD.revoked_unix IS NOT NULL OR NEW.revoked_unix IS NULL OR NEW.id IS NOT OLD.id
    OR NEW.role IS NOT OLD.role OR NEW.digest IS NOT OLD.digest OR NEW.label IS NOT OLD.label
    OR NEW.created_unix IS NOT OLD.created_unix OR NEW.created_by IS NOT OLD.created_by
  BEGIN SELECT RAISE(ABORT, 'a token can only be revoked, once'); END;
CREATE TABLE audit_log (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  created_unix INTEGER NOT NULL,
  principal TEXT NOT NULL,
  role TEXT NOT NULL,
  method TEXT NOT NULL,
  target TEXT NOT NULL,
  code INTEGER NOT NULL,
  epsilon REAL NOT NULL,
  detail TEXT NOT NULL
);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
)sql",
    // 5: ownership and failures that keep their charge (docs/privacy.md 6).
    // A release or session belongs to the principal that created it ('' for
    // rows made before ownership existed). A FAILED release with
    // charged_failure = 1 failed after reading rows: its charge stands and
    // it is never refunded; `incident` names the log entry with the detail.
    // A session step with a non-empty incident failed and counts as used.
    R"sql(
ALTER TABLE releases ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE releases ADD COLUMN charged_failure INTEGER NOT NULL DEFAULT 0;
ALTER TABLE releases ADD COLUMN incident TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE session_steps ADD COLUMN incident TEXT NOT NULL DEFAULT '';
)sql",
    // 6: image datasets. An image chunk keeps its pixels compactly, one
    // 8-bit level per pixel (num_rows x pixels_per_image bytes, row-major),
    // beside the usual cells blob (the label level; the image column's cell
    // is a 0 placeholder). NULL for tabular chunks.
    R"sql(
ALTER TABLE row_chunks ADD COLUMN pixels BLOB;
)sql",
    // 7: per-token report quotas (docs/privacy.md 2.6 "Report bounds and
    // quotas"). A report records the device principal that sent it ('' for
    // reports stored before this migration, which count towards no token);
    // the index makes counting one token's reports in a collection cheap.
    R"sql(
ALTER TABLE ldp_reports ADD COLUMN principal TEXT NOT NULL DEFAULT '';
CREATE INDEX ldp_reports_by_principal ON ldp_reports(collection_id, principal);
)sql",
    // 8: deleted datasets (`dpcurator datasets delete`). Their rows are
    // deleted; the dataset row stays, marked, so that the ledger's events,
    // releases and audit records keep the id they name and the id is never
    // reused. A deleted dataset is listed by no call and takes no request.
    R"sql(
ALTER TABLE datasets ADD COLUMN deleted_unix INTEGER NOT NULL DEFAULT 0;
)sql",
    // 9: partitioned sessions (issue 27; docs/privacy.md 3.7). K sessions
    // opened by one admission, each reading only the rows whose label is its
    // part's level, share one reservation (a partitioned event, charged
    // once): session_partitions holds it, and each member names its group
    // and its part's level ('' and -1 for an ordinary session).
    R"sql(
CREATE TABLE session_partitions (
  id TEXT PRIMARY KEY,
  dataset_id TEXT NOT NULL REFERENCES datasets(id),
  idempotency_key TEXT NOT NULL,
  request BLOB NOT NULL,
  reserve_event_id INTEGER NOT NULL REFERENCES ledger_events(id),
  created_unix INTEGER NOT NULL,
  UNIQUE (dataset_id, idempotency_key)
);
ALTER TABLE sessions ADD COLUMN partition_id TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN part_level INTEGER NOT NULL DEFAULT -1;
CREATE INDEX sessions_by_partition ON sessions(partition_id, part_level);
)sql",
    // 10: external datasets and their pending jobs (issue 28;
    // docs/scale-out.md "External datasets"). An external dataset stores no
    // rows; public_row_bound is its declared public n (0: none). A release
    // on one has a release_jobs row, written in the admission's transaction:
    // its plan exactly as the runner gets it (the schema and the resolved
    // request, serialized) and their SHA-256, which a submission must carry.
    // The job's state is its release's status. The exact statistic a runner
    // submits is never stored.
    R"sql(
ALTER TABLE datasets ADD COLUMN external INTEGER NOT NULL DEFAULT 0;
ALTER TABLE datasets ADD COLUMN public_row_bound INTEGER NOT NULL DEFAULT 0;
CREATE TABLE release_jobs (
  release_id TEXT PRIMARY KEY REFERENCES releases(id),
  dataset_id TEXT NOT NULL REFERENCES datasets(id),
  kind INTEGER NOT NULL,
  schema BLOB NOT NULL,
  request BLOB NOT NULL,
  plan_digest BLOB NOT NULL CHECK (length(plan_digest) = 32),
  created_unix INTEGER NOT NULL
);
CREATE INDEX release_jobs_by_dataset ON release_jobs(dataset_id, created_unix);
)sql",
    // 11: the ledger's work independent of its history (issue 36, item 6).
    // The running totals (ledger_totals, migration 1) already make the
    // admission check O(grid); these indexes make the rest of each hot path
    // an index seek instead of a scan of every event or session: a refund
    // finds its release's charge (and whether it was refunded) by
    // release_id / refund_of, a job its charged event by release_id; the
    // open-session gauge counts a dataset's OPEN sessions, and GetBudget
    // and ListReleases page a dataset's sessions and releases in
    // (created_unix, id) order by seeking to the page's start. Indexes only:
    // existing databases need no rebuild of any state.
    R"sql(
CREATE INDEX ledger_events_by_release ON ledger_events(release_id, id);
CREATE INDEX ledger_events_by_refund ON ledger_events(refund_of);
CREATE INDEX sessions_by_dataset_state ON sessions(dataset_id, state);
CREATE INDEX sessions_by_dataset_created ON sessions(dataset_id, created_unix, id);
CREATE INDEX releases_by_dataset_created ON releases(dataset_id, created_unix, id);
)sql",
    // 12: the audit log in bounded space (issue 36, item 2; server/audit.h).
    // A row stands for `count` calls: a refused call's row counts the
    // repeats of its (peer, method, code) within an interval, and that count
    // is the only thing an update may change, upwards. Rows leave only by
    // the retention pass, which first moves audit_retention.below_id past
    // them in the same transaction; that mark only moves forward.
    R"sql(
ALTER TABLE audit_log ADD COLUMN count INTEGER NOT NULL DEFAULT 1 CHECK (count >= 1);
CREATE INDEX audit_log_by_time ON audit_log(created_unix);
CREATE TABLE audit_retention (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  below_id INTEGER NOT NULL
);
INSERT INTO audit_retention VALUES (1, 0);
CREATE TRIGGER audit_retention_forward BEFORE UPDATE ON audit_retention
  WHEN NEW.id IS NOT OLD.id OR NEW.below_id < OLD.below_id
  BEGIN SELECT RAISE(ABORT, 'the audit retention mark only moves forward'); END;
CREATE TRIGGER audit_retention_no_delete BEFORE DELETE ON audit_retention
  BEGIN SELECT RAISE(ABORT, 'the audit retention mark only moves forward'); END;
DROP TRIGGER audit_log_no_update;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
  WHEN OLD.code NOT IN (3, 7, 8, 16) OR NEW.count <= OLD.count OR NEW.id IS NOT OLD.id
    OR NEW.created_unix IS NOT OLD.created_unix OR NEW.principal IS NOT OLD.principal
    OR NEW.role IS NOT OLD.role OR NEW.method IS NOT OLD.method OR NEW.target IS NOT OLD.target
    OR NEW.code IS NOT OLD.code OR NEW.epsilon IS NOT OLD.epsilon OR NEW.detail IS NOT OLD.detail
  BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only (a refused call''s row counts repeats)');
  END;
DROP TRIGGER audit_log_no_delete;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
  WHEN OLD.id >= (SELECT below_id FROM audit_retention WHERE id = 1)
  BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only: rows leave only by the retention pass');
  END;
)sql",
    // 13: per-token quotas (issue 36 items 5, 7; server/quotas.h). A
    // token's stored artefact bytes (releases and session steps) are a
    // usage row kept by triggers, so every write that stores, blanks or
    // moves an artefact updates it in its own transaction and the check at
    // admission reads one row. The indexes let the other quotas count one
    // token's objects up to the quota (near-free releases and sessions,
    // open sessions, pending jobs) and give the runner its pending jobs,
    // and each job its charge event, without a scan of the dataset's
    // history (item 7); each job's charge event is found by migration 11's
    // ledger_events_by_release.
    R"sql(
CREATE TABLE token_usage (
  principal TEXT PRIMARY KEY,
  stored_bytes INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO token_usage (principal, stored_bytes)
  SELECT owner, SUM(bytes) FROM (
    SELECT owner, COALESCE(length(artefact), 0) AS bytes FROM releases
    UNION ALL
    SELECT s.owner, COALESCE(length(t.artefact), 0) FROM session_steps t
      JOIN sessions s ON s.id = t.session_id)
  GROUP BY owner;
CREATE TRIGGER token_usage_release_insert AFTER INSERT ON releases
  WHEN NEW.artefact IS NOT NULL BEGIN
  INSERT OR IGNORE INTO token_usage (principal) VALUES (NEW.owner);
  UPDATE token_usage SET stored_bytes = stored_bytes + length(NEW.artefact)
    WHERE principal = NEW.owner;
END;
CREATE TRIGGER token_usage_release_update AFTER UPDATE OF artefact, owner ON releases BEGIN
  UPDATE token_usage SET stored_bytes = stored_bytes - COALESCE(length(OLD.artefact), 0)
    WHERE principal = OLD.owner;
  INSERT OR IGNORE INTO token_usage (principal) VALUES (NEW.owner);
  UPDATE token_usage SET stored_bytes = stored_bytes + COALESCE(length(NEW.artefact), 0)
    WHERE principal = NEW.owner;
END;
CREATE TRIGGER token_usage_release_delete AFTER DELETE ON releases BEGIN
  UPDATE token_usage SET stored_bytes = stored_bytes - COALESCE(length(OLD.artefact), 0)
    WHERE principal = OLD.owner;
END;
CREATE TRIGGER token_usage_step_insert AFTER INSERT ON session_steps BEGIN
  INSERT OR IGNORE INTO token_usage (principal)
    VALUES (COALESCE((SELECT owner FROM sessions WHERE id = NEW.session_id), ''));
  UPDATE token_usage SET stored_bytes = stored_bytes + COALESCE(length(NEW.artefact), 0)
    WHERE principal = COALESCE((SELECT owner FROM sessions WHERE id = NEW.session_id), '');
END;
CREATE TRIGGER token_usage_step_update AFTER UPDATE OF artefact ON session_steps BEGIN
  UPDATE token_usage SET stored_bytes = stored_bytes + COALESCE(length(NEW.artefact), 0)
      - COALESCE(length(OLD.artefact), 0)
    WHERE principal = COALESCE((SELECT owner FROM sessions WHERE id = NEW.session_id), '');
END;
CREATE TRIGGER token_usage_step_delete AFTER DELETE ON session_steps BEGIN
  UPDATE token_usage SET stored_bytes = stored_bytes - COALESCE(length(OLD.artefact), 0)
    WHERE principal = COALESCE((SELECT owner FROM sessions WHERE id = OLD.session_id), '');
END;
-- A session given to another owner (--adopt-line-owners) takes its steps' bytes along.
CREATE TRIGGER token_usage_session_owner AFTER UPDATE OF owner ON sessions
  WHEN OLD.owner IS NOT NEW.owner BEGIN
  UPDATE token_usage SET stored_bytes = stored_bytes - (SELECT COALESCE(SUM(length(artefact)),
      0) FROM session_steps WHERE session_id = NEW.id) WHERE principal = OLD.owner;
  INSERT OR IGNORE INTO token_usage (principal) VALUES (NEW.owner);
  UPDATE token_usage SET stored_bytes = stored_bytes + (SELECT COALESCE(SUM(length(artefact)),
      0) FROM session_steps WHERE session_id = NEW.id) WHERE principal = NEW.owner;
END;
CREATE INDEX releases_by_owner_epsilon ON releases(owner, epsilon);
CREATE INDEX sessions_by_owner_epsilon ON sessions(owner, epsilon_reserved);
CREATE INDEX sessions_open_by_owner ON sessions(owner) WHERE state = 'OPEN';
CREATE INDEX releases_pending_by_owner ON releases(owner, dataset_id) WHERE status = 'PENDING';
CREATE INDEX releases_pending_by_dataset ON releases(dataset_id, created_unix, id)
  WHERE status = 'PENDING';
)sql",
    // 14: open categorical columns (issue 38; docs/schema.md "Open
    // columns"). Each open column of a dataset keeps its distinct values,
    // numbered in the order uploads first brought them (value_index from
    // 0); a row's cell of that column in row_chunks is its value's index as
    // a double (NaN: missing). The unique index finds a value's number
    // when a later upload repeats it. At most kMaxOpenValuesPerColumn a
    // column (server/limits.h), counted by AppendChunks.
    R"sql(
CREATE TABLE open_values (
  dataset_id TEXT NOT NULL REFERENCES datasets(id),
  column_index INTEGER NOT NULL,
  value_index INTEGER NOT NULL,
  value BLOB NOT NULL,
  PRIMARY KEY (dataset_id, column_index, value_index)
) WITHOUT ROWID;
CREATE UNIQUE INDEX open_values_by_value ON open_values(dataset_id, column_index, value);
)sql",
};

std::string EncodeCells(const data::Table& rows) {
  // Row-major little-endian doubles (x86-64 and aarch64 are little-endian).
  const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> row_major =
      rows.cells;
  std::string bytes(row_major.size() * sizeof(double), '\0');
  std::memcpy(bytes.data(), row_major.data(), bytes.size());
  return bytes;
}

v1::Dataset DatasetFromRow(const Statement& row) {
  v1::Dataset dataset;
  dataset.set_id(row.ColumnText(0));
  dataset.set_name(row.ColumnText(1));
  dataset.mutable_schema()->ParseFromString(row.ColumnBlob(2));
  dataset.set_schema_fingerprint(row.ColumnText(3));
  dataset.mutable_budget()->set_epsilon(row.ColumnDouble(4));
  dataset.mutable_budget()->set_delta(row.ColumnDouble(5));
  dataset.set_relation(static_cast<v1::NeighbouringRelation>(row.ColumnInt(6)));
  dataset.set_row_count(row.ColumnInt(7));
  dataset.set_sealed(row.ColumnInt(8) != 0);
  dataset.set_created_unix(row.ColumnInt(9));
  dataset.set_external(row.ColumnInt(10) != 0);
  dataset.set_public_row_bound(row.ColumnInt(11));
  return dataset;
}

constexpr const char* kDatasetColumns =
    "id, name, schema, schema_fingerprint, epsilon_cap, delta, relation, row_count, sealed, "
    "created_unix, external, public_row_bound";

// An open column's stored values, in value_index order (the dictionary of
// Store::LoadOpenColumn). Under the caller's lock.
absl::StatusOr<std::vector<std::string>> ReadOpenDictionary(const SharedDatabase::Locked& db,
                                                            const std::string& dataset_id,
                                                            int column) {
  DPC_ASSIGN_OR_RETURN(auto query, db->Prepare("SELECT value_index, value FROM open_values WHERE "
                                                "dataset_id = ? AND column_index = ? ORDER BY "
                                                "value_index"));
  query.Bind(1, dataset_id).Bind(2, int64_t{column});
  std::vector<std::string> dictionary;
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    if (query.ColumnInt(0) != static_cast<int64_t>(dictionary.size())) {
      return absl::DataLossError(absl::StrCat("the open values of dataset '", dataset_id,
                                              "' are not numbered 0, 1, ...; run the integrity "
                                              "check"));
    }
    dictionary.push_back(query.ColumnBlob(1));
  }
  return dictionary;
}

// A stored open cell's index into a dictionary of `size` values; nullopt for
// a missing cell (NaN). DATA_LOSS for anything else.
absl::StatusOr<std::optional<int32_t>> OpenCellIndex(double cell, size_t size,
                                                     const std::string& dataset_id) {
  if (std::isnan(cell)) return std::nullopt;
  if (!(cell >= 0 && cell < static_cast<double>(size)) || cell != std::floor(cell)) {
    return absl::DataLossError(absl::StrCat("an open cell of dataset '", dataset_id,
                                            "' names no stored value; run the integrity check"));
  }
  return static_cast<int32_t>(cell);
}

}  // namespace

UploadOpenValues::UploadOpenValues(const data::Schema& schema) : schema_(schema) {
  for (int c = 0; c < schema.num_columns(); ++c) {
    if (schema.column(c).open) columns_.push_back(Column{c, {}, {}, {}});
  }
}

absl::Status UploadOpenValues::AddRow(absl::Span<const std::string> cells) {
  for (Column& column : columns_) {
    if (column.index >= static_cast<int>(cells.size())) {
      return absl::InvalidArgumentError("row has fewer fields than the schema declares");
    }
    // Trimmed, as ParseCell reads it.
    const absl::string_view token = absl::StripAsciiWhitespace(cells[column.index]);
    bool missing = false;
    for (const std::string& m : schema_.missing_tokens()) missing = missing || token == m;
    if (missing) {
      column.pending.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    // Looked up by view first: a value seen before (most rows) costs no
    // string.
    auto it = column.lookup.find(token);
    if (it == column.lookup.end()) {
      if (static_cast<int64_t>(column.dictionary.size()) >= kMaxOpenValuesPerColumn) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "open column '", schema_.column(column.index).name, "' has more than ",
            kMaxOpenValuesPerColumn, " distinct values in this upload (kMaxOpenValuesPerColumn, "
            "docs/limits.md); a column with so many values identifies rows rather than "
            "categorising them: code or bucket it before upload"));
      }
      const auto next = static_cast<int32_t>(column.dictionary.size());
      it = column.lookup.emplace(std::string(token), next).first;
      column.dictionary.emplace_back(token);
    }
    column.pending.push_back(static_cast<double>(it->second));
  }
  return absl::OkStatus();
}

void UploadOpenValues::Fill(data::Table* chunk) {
  for (Column& column : columns_) {
    const int64_t rows = std::min<int64_t>(chunk->num_rows(),
                                           static_cast<int64_t>(column.pending.size()));
    for (int64_t r = 0; r < rows; ++r) chunk->cells(r, column.index) = column.pending[r];
    column.pending.clear();
  }
}

absl::Status ExternalUploadError(const std::string& dataset_id) {
  return absl::FailedPreconditionError(absl::StrCat(
      "dataset '", dataset_id,
      "' is external: its rows live in the curator's cluster and the server stores none; "
      "its releases are computed there by `python3 -m dpcurator.dask_runner` "
      "(docs/scale-out.md)"));
}

std::string NewId(const std::string& prefix) {
  return absl::StrFormat("%s_%016x%016x", prefix, privacy::SecureRandomU64(),
                         privacy::SecureRandomU64());
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(SharedDatabase* database,
                                                   const Clock* clock) {
  std::unique_ptr<Store> store(new Store(database, clock));
  DPC_RETURN_IF_ERROR(store->Migrate());
  return store;
}

absl::Status Store::Migrate() {
  auto db = database_->Lock();
  DPC_RETURN_IF_ERROR(db->Exec("CREATE TABLE IF NOT EXISTS schema_migrations ("
                                "version INTEGER PRIMARY KEY, applied_unix INTEGER NOT NULL)"));
  DPC_ASSIGN_OR_RETURN(auto query, db->Prepare("SELECT COALESCE(MAX(version), 0) FROM "
                                                "schema_migrations"));
  DPC_ASSIGN_OR_RETURN(bool has_row, query.Step());
  int version = has_row ? static_cast<int>(query.ColumnInt(0)) : 0;
  constexpr int kLatest = static_cast<int>(std::size(kMigrations));
  if (version > kLatest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database schema version ", version, " is newer than this server (", kLatest,
        "); upgrade the server"));
  }
  for (int next = version + 1; next <= kLatest; ++next) {
    DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db.get()));
    DPC_RETURN_IF_ERROR(db->Exec(kMigrations[next - 1]));
    DPC_ASSIGN_OR_RETURN(auto record, db->Prepare("INSERT INTO schema_migrations VALUES (?, ?)"));
    DPC_RETURN_IF_ERROR(record.Bind(1, int64_t{next}).Bind(2, clock_->UnixNow()).Run());
    DPC_RETURN_IF_ERROR(transaction.Commit());
    version = next;
  }
  schema_version_ = version;
  return absl::OkStatus();
}

absl::StatusOr<v1::Dataset> Store::CreateDataset(const v1::CreateDatasetRequest& request) {
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(request.schema()));
  if (request.external() && schema.has_open_columns()) {
    // An open column's values are kept by this server (issue 38); an
    // external dataset's rows never reach it.
    for (const data::Column& column : schema.columns()) {
      if (!column.open) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "column '", column.name, "' is open, and an external dataset's rows are never "
          "stored on this server, so its values cannot be kept or fitted: declare the "
          "column's categories (a public list, the last one a catch-all if you like)"));
    }
  }
  auto db = database_->Lock();
  const std::string id = NewId("ds");
  const int64_t now = clock_->UnixNow();
  const v1::TableSchema canonical = SchemaToProto(schema);
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db.get()));
  DPC_ASSIGN_OR_RETURN(
      auto insert,
      db->Prepare(absl::StrCat("INSERT INTO datasets (", kDatasetColumns,
                                ") VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?)")));
  const v1::NeighbouringRelation relation =
      request.relation() == v1::REPLACE_ONE ? v1::REPLACE_ONE : v1::ADD_REMOVE;
  DPC_RETURN_IF_ERROR(insert.Bind(1, id)
                          .Bind(2, request.name())
                          .BindBlob(3, canonical.SerializeAsString())
                          .Bind(4, schema.FingerprintHex())
                          .Bind(5, request.budget().epsilon())
                          .Bind(6, request.budget().delta())
                          .Bind(7, int64_t{relation})
                          .Bind(8, now)
                          .Bind(9, int64_t{request.external() ? 1 : 0})
                          .Bind(10, request.public_row_bound())
                          .Run());
  DPC_RETURN_IF_ERROR(transaction.Commit());
  return GetDatasetLocked(db, id);
}

absl::StatusOr<v1::Dataset> Store::GetDataset(const std::string& dataset_id) {
  auto db = database_->Lock();
  return GetDatasetLocked(db, dataset_id);
}

absl::StatusOr<v1::Dataset> Store::GetDatasetLocked(const SharedDatabase::Locked& db,
                                                    const std::string& dataset_id) {
  DPC_ASSIGN_OR_RETURN(auto query, db->Prepare(absl::StrCat("SELECT ", kDatasetColumns,
                                                             " FROM datasets WHERE id = ? AND deleted_unix = 0")));
  query.Bind(1, dataset_id);
  DPC_ASSIGN_OR_RETURN(bool found, query.Step());
  if (!found) {
    return absl::NotFoundError(absl::StrCat("no dataset '", dataset_id,
                                            "' (list them with `dpcurator datasets list`)"));
  }
  return DatasetFromRow(query);
}

absl::StatusOr<std::vector<v1::Dataset>> Store::ListDatasets() {
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto query, db->Prepare(absl::StrCat("SELECT ", kDatasetColumns,
                                                             " FROM datasets WHERE deleted_unix = 0 "
                                                             "ORDER BY created_unix, id")));
  std::vector<v1::Dataset> datasets;
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    datasets.push_back(DatasetFromRow(query));
  }
  return datasets;
}

absl::StatusOr<v1::ListDatasetsResponse> Store::ListDatasets(
    const PageRequest& page, const std::function<void(v1::Dataset&)>& redact) {
  DPC_ASSIGN_OR_RETURN(const int page_size, ResolvePageSize(page.page_size));
  DPC_ASSIGN_OR_RETURN(const std::optional<PageCursor> after, DecodePageToken(page.page_token));
  auto db = database_->Lock();
  // Keyset order: the page after the token's (created_unix, id).
  DPC_ASSIGN_OR_RETURN(
      auto query,
      db->Prepare(absl::StrCat("SELECT ", kDatasetColumns,
                               " FROM datasets WHERE deleted_unix = 0 AND (? = 0 OR "
                               "created_unix > ? OR (created_unix = ? AND id > ?)) "
                               "ORDER BY created_unix, id")));
  const int64_t after_time = after.has_value() ? after->created_unix : 0;
  query.Bind(1, int64_t{after.has_value()})
      .Bind(2, after_time)
      .Bind(3, after_time)
      .Bind(4, after.has_value() ? after->id : std::string());
  v1::ListDatasetsResponse response;
  PageBudget budget(page_size, page.max_bytes);
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    v1::Dataset dataset = DatasetFromRow(query);
    redact(dataset);
    const size_t bytes = dataset.ByteSizeLong();
    if (!budget.Fits(bytes)) {
      const v1::Dataset& last = response.datasets(response.datasets_size() - 1);
      response.set_next_page_token(EncodePageToken({last.created_unix(), last.id()}));
      break;
    }
    budget.Add(bytes);
    *response.add_datasets() = std::move(dataset);
  }
  return response;
}

absl::StatusOr<int64_t> Store::AppendRows(const std::string& dataset_id,
                                          const data::Table& rows, bool append) {
  return AppendChunks(dataset_id, absl::MakeConstSpan(&rows, 1), append);
}

namespace {

// A row's identity for the duplicate-upload check (issue 38): SHA-256 of
// the row as stored (its cells as row-major little-endian doubles, then its
// pixels), cut to 128 bits. Two different rows share a digest with
// probability about m n / 2^128 for m uploaded and n stored rows: never, in
// practice, so a refusal means a real repeat.
using RowDigest = std::pair<uint64_t, uint64_t>;

RowDigest DigestRow(absl::string_view cells, absl::string_view pixels, std::string* buffer) {
  buffer->assign(cells.data(), cells.size());
  buffer->append(pixels.data(), pixels.size());
  unsigned char hash[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(buffer->data()), buffer->size(), hash);
  RowDigest digest;
  std::memcpy(&digest.first, hash, sizeof(uint64_t));
  std::memcpy(&digest.second, hash + sizeof(uint64_t), sizeof(uint64_t));
  return digest;
}

// Calls `visit(digest)` for each row of a chunk as stored: `cells` its
// EncodeCells bytes, `pixels` num_rows x pixels_per_image levels.
template <typename Visit>
void ForEachRowDigest(absl::string_view cells, absl::string_view pixels, int64_t num_rows,
                      Visit visit) {
  if (num_rows <= 0) return;
  const size_t cell_bytes = cells.size() / static_cast<size_t>(num_rows);
  const size_t pixel_bytes = pixels.size() / static_cast<size_t>(num_rows);
  std::string buffer;
  for (int64_t i = 0; i < num_rows; ++i) {
    const auto row = static_cast<size_t>(i);
    visit(DigestRow(cells.substr(row * cell_bytes, cell_bytes),
                    pixels.substr(row * pixel_bytes, pixel_bytes), &buffer));
  }
}

absl::string_view PixelBytes(const data::Table& rows) {
  return absl::string_view(reinterpret_cast<const char*>(rows.pixels.data()), rows.pixels.size());
}

}  // namespace

absl::StatusOr<int64_t> Store::AppendChunks(const std::string& dataset_id,
                                            absl::Span<const data::Table> chunks,
                                            bool append, const UploadOpenValues* open) {
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db.get()));
  DPC_ASSIGN_OR_RETURN(v1::Dataset dataset, GetDatasetLocked(db, dataset_id));
  if (dataset.external()) return ExternalUploadError(dataset_id);
  if (dataset.sealed()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset '", dataset_id,
        "' is sealed: a release has been made from its rows; create a new dataset to add data"));
  }
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(dataset.schema()));
  DPC_ASSIGN_OR_RETURN(auto next_chunk,
                       db->Prepare("SELECT COALESCE(MAX(chunk), -1) + 1 FROM row_chunks "
                                    "WHERE dataset_id = ?"));
  next_chunk.Bind(1, dataset_id);
  DPC_ASSIGN_OR_RETURN(bool has_row, next_chunk.Step());
  int64_t chunk = has_row ? next_chunk.ColumnInt(0) : 0;
  // Open columns (issue 38): each upload value's index in the dataset's
  // dictionary, new values appended here, inside the transaction, so that
  // two uploads at once cannot number one value twice.
  std::vector<std::pair<int, std::vector<int32_t>>> open_indices;  // column, local -> stored
  if (schema.has_open_columns()) {
    const auto open_columns = std::count_if(schema.columns().begin(), schema.columns().end(),
                                            [](const data::Column& c) { return c.open; });
    if (open == nullptr || open->columns().size() != static_cast<size_t>(open_columns)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset '", dataset_id, "' has open columns, and this upload carries no values for "
          "them"));
    }
    DPC_ASSIGN_OR_RETURN(auto count, db->Prepare("SELECT COUNT(*) FROM open_values WHERE "
                                                  "dataset_id = ? AND column_index = ?"));
    DPC_ASSIGN_OR_RETURN(auto find, db->Prepare("SELECT value_index FROM open_values WHERE "
                                                 "dataset_id = ? AND column_index = ? AND "
                                                 "value = ?"));
    DPC_ASSIGN_OR_RETURN(auto insert_value,
                         db->Prepare("INSERT INTO open_values (dataset_id, column_index, "
                                      "value_index, value) VALUES (?, ?, ?, ?)"));
    for (const UploadOpenValues::Column& column : open->columns()) {
      if (column.index < 0 || column.index >= schema.num_columns() ||
          !schema.column(column.index).open) {
        return absl::InvalidArgumentError("an upload's open values name a column that is not "
                                          "open");
      }
      count.Reset();
      count.Bind(1, dataset_id).Bind(2, int64_t{column.index});
      DPC_ASSIGN_OR_RETURN(bool counted, count.Step());
      int64_t stored = counted ? count.ColumnInt(0) : 0;
      std::vector<int32_t> indices;
      indices.reserve(column.dictionary.size());
      for (const std::string& value : column.dictionary) {
        find.Reset();
        find.Bind(1, dataset_id).Bind(2, int64_t{column.index}).BindBlob(3, value);
        DPC_ASSIGN_OR_RETURN(bool found, find.Step());
        if (found) {
          indices.push_back(static_cast<int32_t>(find.ColumnInt(0)));
          continue;
        }
        if (stored >= kMaxOpenValuesPerColumn) {
          // Counts of values only, never a value (the curator's own rows).
          return absl::ResourceExhaustedError(absl::StrCat(
              "open column '", schema.column(column.index).name, "' of dataset '", dataset_id,
              "' would hold more than ", kMaxOpenValuesPerColumn,
              " distinct values (kMaxOpenValuesPerColumn, docs/limits.md); nothing of this "
              "upload was stored. A column with so many values identifies rows rather than "
              "categorising them: code or bucket it before upload"));
        }
        insert_value.Reset();
        DPC_RETURN_IF_ERROR(insert_value.Bind(1, dataset_id)
                                .Bind(2, int64_t{column.index})
                                .Bind(3, stored)
                                .BindBlob(4, value)
                                .Run());
        indices.push_back(static_cast<int32_t>(stored));
        ++stored;
      }
      open_indices.emplace_back(column.index, std::move(indices));
    }
  }
  std::vector<std::string> encoded;
  encoded.reserve(chunks.size());
  int64_t uploaded = 0;
  for (const data::Table& rows : chunks) {
    if (rows.num_rows() == 0) {
      encoded.emplace_back();  // kept in step with `chunks`
      continue;
    }
    if (rows.cells.cols() != dataset.schema().columns_size()) {
      return absl::InvalidArgumentError("row chunk does not match the dataset's schema");
    }
    if (rows.pixels.size() !=
        static_cast<size_t>(rows.num_rows() * schema.pixels_per_image())) {
      return absl::InvalidArgumentError(
          "row chunk's pixels do not match the dataset's image shape");
    }
    encoded.push_back(EncodeCells(rows));
    // The upload's codes become the dataset's indices in the stored bytes
    // (row-major doubles), before the duplicate check reads them.
    const int64_t columns = rows.cells.cols();
    for (const auto& [c, indices] : open_indices) {
      for (int64_t r = 0; r < rows.num_rows(); ++r) {
        double cell;
        char* at = encoded.back().data() + (r * columns + c) * sizeof(double);
        std::memcpy(&cell, at, sizeof(double));
        if (std::isnan(cell)) continue;  // missing
        if (!(cell >= 0 && cell < static_cast<double>(indices.size()))) {
          return absl::InvalidArgumentError("an open cell of the upload names no value of it");
        }
        cell = static_cast<double>(indices[static_cast<size_t>(cell)]);
        std::memcpy(at, &cell, sizeof(double));
      }
    }
    uploaded += rows.num_rows();
  }
  if (!append && uploaded > 0 && dataset.row_count() > 0) {
    // Inside the transaction, so two uploads of one file at once cannot
    // both pass. The upload's digests are held (it is in memory already, at
    // 8 bytes a cell), the stored rows are streamed past them chunk by chunk.
    absl::flat_hash_map<RowDigest, int64_t> upload_rows;  // digest -> rows of the upload
    upload_rows.reserve(static_cast<size_t>(uploaded));
    for (size_t k = 0; k < chunks.size(); ++k) {
      ForEachRowDigest(encoded[k], PixelBytes(chunks[k]), chunks[k].num_rows(),
                       [&](const RowDigest& digest) { ++upload_rows[digest]; });
    }
    DPC_ASSIGN_OR_RETURN(auto stored, db->Prepare("SELECT num_rows, cells, pixels FROM "
                                                  "row_chunks WHERE dataset_id = ?"));
    stored.Bind(1, dataset_id);
    int64_t repeated = 0;
    while (true) {
      DPC_ASSIGN_OR_RETURN(bool more, stored.Step());
      if (!more) break;
      ForEachRowDigest(stored.ColumnBlob(1), stored.ColumnBlob(2), stored.ColumnInt(0),
                       [&](const RowDigest& digest) {
                         auto found = upload_rows.find(digest);
                         if (found == upload_rows.end()) return;
                         repeated += found->second;
                         upload_rows.erase(found);  // each upload row counted once
                       });
    }
    if (repeated > 0) {
      const std::string which =
          repeated < uploaded ? absl::StrCat(repeated, " of the ", uploaded, " rows")
          : uploaded == 1     ? std::string("the row")
                              : absl::StrCat("all ", uploaded, " rows");
      return absl::FailedPreconditionError(absl::StrCat(
          which, " of this upload ", repeated == 1 ? "repeats a row" : "repeat rows",
          " already stored in dataset '", dataset_id, "'",
          repeated == uploaded ? " (the same file uploaded again?)" : "",
          "; nothing of this upload was stored. A person whose row is stored twice counts as "
          "two rows, so the guarantee protects them at half the strength (twice the epsilon). "
          "If these rows are different people who share the same values, upload again with "
          "--append"));
    }
  }
  int64_t added = 0;
  for (size_t k = 0; k < chunks.size(); ++k) {
    const data::Table& rows = chunks[k];
    if (rows.num_rows() == 0) continue;
    DPC_ASSIGN_OR_RETURN(auto insert,
                         db->Prepare("INSERT INTO row_chunks (dataset_id, chunk, num_rows, "
                                      "cells, pixels) VALUES (?, ?, ?, ?, ?)"));
    insert.Bind(1, dataset_id)
        .Bind(2, chunk)
        .Bind(3, static_cast<int64_t>(rows.num_rows()))
        .BindBlob(4, encoded[k]);
    if (schema.image_index().has_value()) {
      insert.BindBlob(5, PixelBytes(rows));
    }  // else NULL
    DPC_RETURN_IF_ERROR(insert.Run());
    ++chunk;
    added += rows.num_rows();
  }
  DPC_ASSIGN_OR_RETURN(auto update,
                       db->Prepare("UPDATE datasets SET row_count = row_count + ? WHERE id = ?"));
  DPC_RETURN_IF_ERROR(update.Bind(1, added).Bind(2, dataset_id).Run());
  DPC_RETURN_IF_ERROR(transaction.Commit());
  return dataset.row_count() + added;
}

namespace {

// Refused while a release is pending or a session is open on the dataset:
// they read (or will read) its rows as they were admitted, so a change
// under them would make their output depend on its timing. `action` ends
// the message ("delete", "set bins").
absl::Status RefuseWhileRowsAreInUse(const SharedDatabase::Locked& db,
                                     const std::string& dataset_id, absl::string_view action) {
  DPC_ASSIGN_OR_RETURN(auto busy,
                       db->Prepare("SELECT (SELECT COUNT(*) FROM releases WHERE dataset_id = ?1 "
                                    "AND status = 'PENDING'), (SELECT COUNT(*) FROM sessions "
                                    "WHERE dataset_id = ?1 AND state = 'OPEN')"));
  busy.Bind(1, dataset_id);
  DPC_ASSIGN_OR_RETURN(bool has_row, busy.Step());
  if (has_row && (busy.ColumnInt(0) > 0 || busy.ColumnInt(1) > 0)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset '", dataset_id, "' has ", busy.ColumnInt(0), " release(s) in progress and ",
        busy.ColumnInt(1), " open session(s); close the sessions (or let the releases finish) and ",
        action, " again"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Store::DeleteDataset(const std::string& dataset_id) {
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db.get()));
  DPC_ASSIGN_OR_RETURN(v1::Dataset dataset, GetDatasetLocked(db, dataset_id));
  (void)dataset;
  // A release or session step in flight reads the rows; deleting them under
  // it would make its output depend on the timing of the delete. Refused
  // until they end (a session is closed with `dpcurator session close`).
  DPC_RETURN_IF_ERROR(RefuseWhileRowsAreInUse(db, dataset_id, "delete"));
  DPC_ASSIGN_OR_RETURN(auto rows, db->Prepare("DELETE FROM row_chunks WHERE dataset_id = ?"));
  DPC_RETURN_IF_ERROR(rows.Bind(1, dataset_id).Run());
  // An open column's values are rows' data too (issue 38).
  DPC_ASSIGN_OR_RETURN(auto values, db->Prepare("DELETE FROM open_values WHERE dataset_id = ?"));
  DPC_RETURN_IF_ERROR(values.Bind(1, dataset_id).Run());
  DPC_ASSIGN_OR_RETURN(auto mark, db->Prepare("UPDATE datasets SET deleted_unix = ?, row_count "
                                              "= 0 WHERE id = ?"));
  DPC_RETURN_IF_ERROR(
      mark.Bind(1, std::max<int64_t>(1, clock_->UnixNow())).Bind(2, dataset_id).Run());
  DPC_RETURN_IF_ERROR(transaction.Commit());
  // The cached copy of a sealed dataset's rows goes with them.
  DropCachedRowsLocked(db, dataset_id);
  return absl::OkStatus();
}

absl::StatusOr<v1::Dataset> Store::SetBins(const std::string& dataset_id,
                                           const v1::TableSchema& requested) {
  // Only numeric columns' bins may change: they are public metadata of the
  // discretisation (docs/privacy.md 1.2, 2.11.1), read by marginal methods
  // only; bounds, atoms, categories and the label decided how the stored
  // rows were read (clamped, coded) and stay.
  SchemaChange change;
  change.what_may_change = "numeric columns' bins";
  change.action = "set bins";
  change.check_requested = [](const v1::ColumnSchema& column) {
    return column.type() != v1::ColumnSchema::NUMERIC && column.bins_size() > 0
               ? absl::InvalidArgumentError(absl::StrCat(
                     "column '", column.name(), "' is not numeric and takes no bins"))
               : absl::OkStatus();
  };
  change.check_column = [](int c, const v1::ColumnSchema& before,
                           const v1::ColumnSchema& after) {
    v1::ColumnSchema old_column = before;
    v1::ColumnSchema new_column = after;
    old_column.clear_bins();
    new_column.clear_bins();
    if (google::protobuf::util::MessageDifferencer::Equals(old_column, new_column)) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "column ", c + 1, " ('", before.name(),
        "') differs from the stored one in more than its bins; only numeric columns' bins "
        "can change (bounds, atoms and categories decided how the rows were stored)"));
  };
  return ChangeSchema(dataset_id, requested, change);
}

absl::StatusOr<v1::Dataset> Store::SetCategories(const std::string& dataset_id,
                                                 const v1::TableSchema& requested) {
  // Only open columns' categories may change (issue 38): a category fit's
  // published list, public once released, plus the catch-all. Every other
  // property decided how the rows were stored, or is the label.
  SchemaChange change;
  change.what_may_change = "open columns' categories";
  change.action = "set categories";
  change.check_requested = [](const v1::ColumnSchema& column) {
    return column.type() != v1::ColumnSchema::CATEGORICAL && column.categories_size() > 0
               ? absl::InvalidArgumentError(absl::StrCat(
                     "column '", column.name(), "' is not categorical and takes no categories"))
               : absl::OkStatus();
  };
  change.check_column = [](int c, const v1::ColumnSchema& before,
                           const v1::ColumnSchema& after) {
    v1::ColumnSchema old_column = before;
    v1::ColumnSchema new_column = after;
    const bool open = before.open();
    if (open) {
      old_column.clear_categories();
      new_column.clear_categories();
    }
    if (!google::protobuf::util::MessageDifferencer::Equals(old_column, new_column)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "column ", c + 1, " ('", before.name(), "') differs from the stored one",
          open ? " in more than its categories" : "",
          "; only open columns' categories can change (types, bounds, bins, aliases and "
          "closed columns' categories stay as stored)"));
    }
    const auto& old_list = before.categories();
    const auto& new_list = after.categories();
    const bool changed =
        !std::equal(old_list.begin(), old_list.end(), new_list.begin(), new_list.end());
    if (open && changed && new_list.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "open column '", before.name(), "' gets ", new_list.size(),
          " categories; give the published values then the catch-all (\"other\"), last: "
          "at least two"));
    }
    return absl::OkStatus();
  };
  return ChangeSchema(dataset_id, requested, change);
}

absl::StatusOr<v1::Dataset> Store::ChangeSchema(const std::string& dataset_id,
                                                const v1::TableSchema& requested,
                                                const SchemaChange& change) {
  // Checked on the request as sent: the canonical form drops what a column
  // of another type cannot have, and a change asked for must not be
  // dropped in silence.
  for (const v1::ColumnSchema& column : requested.columns()) {
    DPC_RETURN_IF_ERROR(change.check_requested(column));
  }
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(requested));
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto transaction, Transaction::BeginImmediate(db.get()));
  DPC_ASSIGN_OR_RETURN(v1::Dataset dataset, GetDatasetLocked(db, dataset_id));
  // Both canonical (SchemaToProto), so that only what the schema means is
  // compared, not how the request spelled it.
  DPC_ASSIGN_OR_RETURN(data::Schema stored, SchemaFromProto(dataset.schema()));
  const v1::TableSchema before = SchemaToProto(stored);
  const v1::TableSchema after = SchemaToProto(schema);
  if (after.columns_size() != before.columns_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the schema has ", after.columns_size(), " columns and the dataset ",
        before.columns_size(), "; only ", change.what_may_change, " can change"));
  }
  for (int c = 0; c < before.columns_size(); ++c) {
    DPC_RETURN_IF_ERROR(change.check_column(c, before.columns(c), after.columns(c)));
  }
  v1::TableSchema old_rest = before;
  v1::TableSchema new_rest = after;
  old_rest.clear_columns();
  new_rest.clear_columns();
  if (!google::protobuf::util::MessageDifferencer::Equals(old_rest, new_rest)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the schema differs from the stored one beyond its columns (label or missing-value "
        "tokens); only ", change.what_may_change, " can change"));
  }
  // A release or session in flight read (or will read) the rows under the
  // schema it was admitted with: refused until they end, as a delete.
  DPC_RETURN_IF_ERROR(RefuseWhileRowsAreInUse(db, dataset_id, change.action));
  DPC_ASSIGN_OR_RETURN(
      auto update,
      db->Prepare("UPDATE datasets SET schema = ?, schema_fingerprint = ? WHERE id = ?"));
  DPC_RETURN_IF_ERROR(update.BindBlob(1, after.SerializeAsString())
                          .Bind(2, schema.FingerprintHex())
                          .Bind(3, dataset_id)
                          .Run());
  DPC_RETURN_IF_ERROR(transaction.Commit());
  // The cached encoding of a sealed dataset's rows was made under the old
  // schema: dropped, re-read under the new one.
  DropCachedRowsLocked(db, dataset_id);
  return GetDatasetLocked(db, dataset_id);
}

void Store::DropCachedRowsLocked(const SharedDatabase::Locked& db,
                                 const std::string& dataset_id) {
  (void)db;  // proof that the caller holds the lock guarding the cache
  if (auto cached = sealed_rows_.find(dataset_id); cached != sealed_rows_.end()) {
    cached_row_bytes_ -= cached->second.bytes;
    sealed_rows_.erase(cached);
  }
}

absl::StatusOr<release::OpenColumnValues> Store::LoadOpenColumn(const std::string& dataset_id,
                                                                int column) {
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(v1::Dataset dataset, GetDatasetLocked(db, dataset_id));
  DPC_ASSIGN_OR_RETURN(data::Schema schema, SchemaFromProto(dataset.schema()));
  if (column < 0 || column >= schema.num_columns() || !schema.column(column).open) {
    return absl::InvalidArgumentError(absl::StrCat("column ", column, " of dataset '",
                                                   dataset_id, "' is not an open column"));
  }
  release::OpenColumnValues values;
  DPC_ASSIGN_OR_RETURN(values.dictionary, ReadOpenDictionary(db, dataset_id, column));
  DPC_ASSIGN_OR_RETURN(auto query, db->Prepare("SELECT num_rows, cells FROM row_chunks WHERE "
                                                "dataset_id = ? ORDER BY chunk"));
  query.Bind(1, dataset_id);
  const int64_t columns = schema.num_columns();
  values.indices.reserve(static_cast<size_t>(dataset.row_count()));
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    const int64_t num_rows = query.ColumnInt(0);
    const std::string blob = query.ColumnBlob(1);
    if (num_rows < 0 || blob.size() != static_cast<size_t>(num_rows * columns) * sizeof(double)) {
      return absl::DataLossError(absl::StrCat("row chunk of dataset '", dataset_id,
                                              "' has the wrong size; run the integrity check"));
    }
    for (int64_t r = 0; r < num_rows; ++r) {
      double cell;
      std::memcpy(&cell, blob.data() + (r * columns + column) * sizeof(double), sizeof(double));
      DPC_ASSIGN_OR_RETURN(std::optional<int32_t> index,
                           OpenCellIndex(cell, values.dictionary.size(), dataset_id));
      values.indices.push_back(index.value_or(release::kMissingOpenValue));
    }
  }
  return values;
}

absl::StatusOr<std::shared_ptr<const data::Table>> Store::LoadRows(const std::string& dataset_id,
                                                                   const data::Schema& schema) {
  auto db = database_->Lock();
  DPC_ASSIGN_OR_RETURN(auto query, db->Prepare("SELECT num_rows, cells, pixels FROM row_chunks "
                                                "WHERE dataset_id = ? ORDER BY chunk"));
  query.Bind(1, dataset_id);
  ++row_loads_;
  const int columns = schema.num_columns();
  const int64_t pixels_per_image = schema.pixels_per_image();
  std::vector<double> values;
  auto table = std::make_shared<data::Table>();
  int64_t total_rows = 0;
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, query.Step());
    if (!row) break;
    const int64_t num_rows = query.ColumnInt(0);
    const std::string blob = query.ColumnBlob(1);
    const std::string pixels = query.ColumnBlob(2);
    if (blob.size() != static_cast<size_t>(num_rows * columns) * sizeof(double) ||
        pixels.size() != static_cast<size_t>(num_rows * pixels_per_image)) {
      return absl::DataLossError(absl::StrCat("row chunk of dataset '", dataset_id,
                                              "' has the wrong size; run the integrity check"));
    }
    const size_t old_size = values.size();
    values.resize(old_size + num_rows * columns);
    std::memcpy(values.data() + old_size, blob.data(), blob.size());
    table->pixels.insert(table->pixels.end(), pixels.begin(), pixels.end());
    total_rows += num_rows;
  }
  // Open columns (issue 38): each stored index read as its value's level
  // under this schema. Public metadata decides the map (the list); the
  // values stay on the server.
  for (int c = 0; c < columns; ++c) {
    const data::Column& column = schema.column(c);
    if (!column.open) continue;
    DPC_ASSIGN_OR_RETURN(const std::vector<std::string> dictionary,
                         ReadOpenDictionary(db, dataset_id, c));
    const bool has_levels = !column.categories.empty();
    std::vector<double> levels(dictionary.size(), std::numeric_limits<double>::quiet_NaN());
    double missing_level = std::numeric_limits<double>::quiet_NaN();
    if (has_levels) {
      for (size_t i = 0; i < dictionary.size(); ++i) {
        absl::StatusOr<data::ParsedCell> cell = schema.ParseCell(c, dictionary[i]);
        if (!cell.ok()) {
          return absl::DataLossError(absl::StrCat("a stored value of open column '", column.name,
                                                  "' of dataset '", dataset_id,
                                                  "' does not parse; run the integrity check"));
        }
        levels[i] = cell->value;
      }
      if (column.nullable) missing_level = static_cast<double>(column.categories.size());
    }
    for (int64_t r = 0; r < total_rows; ++r) {
      double& cell = values[static_cast<size_t>(r * columns + c)];
      DPC_ASSIGN_OR_RETURN(std::optional<int32_t> index,
                           OpenCellIndex(cell, dictionary.size(), dataset_id));
      cell = index.has_value() ? levels[static_cast<size_t>(*index)] : missing_level;
    }
  }
  table->cells = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic,
                                                Eigen::RowMajor>>(values.data(), total_rows,
                                                                  columns);
  return table;
}

namespace {

// Asks for transparent huge pages over the whole 2 MiB pages of
// [data, data + bytes), before the first write (a kernel in "madvise" mode,
// as the development machine's is, gives them only on request). A step
// gathers its batch's cells a column apart in the column-major rows (480 KB
// at Fashion-MNIST's 60,000 rows), one 4 KiB page each, and those TLB
// misses were the largest single cost of a kernel_witness step on the
// server. Advice only: where the kernel declines, nothing changes.
void AdviseHugePages(void* data, size_t bytes) {
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const auto start = reinterpret_cast<uintptr_t>(data);
  const uintptr_t begin = (start + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (start + bytes) & ~(kHugePage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const release::EncodedRows>> Store::LoadEncodedImages(
    const std::string& dataset_id, const data::Schema& schema) {
  // The blobs are read under the lock (as LoadRows reads them); decoding
  // into doubles, eight times their size, happens after it is released.
  struct Chunk {
    int64_t num_rows;
    std::string cells;
    std::string pixels;
  };
  std::vector<Chunk> chunks;
  {
    auto db = database_->Lock();
    DPC_ASSIGN_OR_RETURN(auto query, db->Prepare("SELECT num_rows, cells, pixels FROM "
                                                  "row_chunks WHERE dataset_id = ? ORDER BY "
                                                  "chunk"));
    query.Bind(1, dataset_id);
    ++row_loads_;
    while (true) {
      DPC_ASSIGN_OR_RETURN(bool row, query.Step());
      if (!row) break;
      chunks.push_back(Chunk{query.ColumnInt(0), query.ColumnBlob(1), query.ColumnBlob(2)});
    }
  }
  const int columns = schema.num_columns();
  const int64_t pixels_per_image = schema.pixels_per_image();
  int64_t total_rows = 0;
  for (const Chunk& chunk : chunks) {
    if (chunk.num_rows < 0 ||
        chunk.cells.size() != static_cast<size_t>(chunk.num_rows * columns) * sizeof(double) ||
        chunk.pixels.size() != static_cast<size_t>(chunk.num_rows * pixels_per_image)) {
      return absl::DataLossError(absl::StrCat("row chunk of dataset '", dataset_id,
                                              "' has the wrong size; run the integrity check"));
    }
    total_rows += chunk.num_rows;
  }
  auto rows = std::make_shared<release::EncodedRows>();
  rows->layout = data::FeatureLayout::ForFeatures(schema);
  rows->num_classes = schema.num_classes();
  rows->features.resize(total_rows, rows->layout.total_dim());
  AdviseHugePages(rows->features.data(),
                  static_cast<size_t>(rows->features.size()) * sizeof(double));
  rows->labels = Eigen::VectorXi::Zero(total_rows);
  const std::optional<int> label = schema.label_index();
  int64_t next_row = 0;
  for (Chunk& chunk : chunks) {
    data::EncodePixels(rows->layout, reinterpret_cast<const uint8_t*>(chunk.pixels.data()),
                       next_row, chunk.num_rows, &rows->features);
    if (label.has_value()) {
      for (int64_t i = 0; i < chunk.num_rows; ++i) {
        double level;
        std::memcpy(&level, chunk.cells.data() + (i * columns + *label) * sizeof(double),
                    sizeof(double));
        rows->labels(next_row + i) = static_cast<int>(level);
      }
    }
    next_row += chunk.num_rows;
    chunk = Chunk{};  // free the blobs as they are decoded
  }
  return std::shared_ptr<const release::EncodedRows>(std::move(rows));
}

absl::StatusOr<std::shared_ptr<const release::EncodedRows>> Store::LoadEncodedRows(
    const std::string& dataset_id, const data::Schema& schema) {
  bool sealed = false;
  {
    auto db = database_->Lock();
    if (auto cached = sealed_rows_.find(dataset_id); cached != sealed_rows_.end()) {
      cached->second.last_use = ++use_clock_;
      return cached->second.rows;
    }
    DPC_ASSIGN_OR_RETURN(v1::Dataset dataset, GetDatasetLocked(db, dataset_id));
    sealed = dataset.sealed();
  }
  // Read and encode outside the lock: encoding a large table must not stall
  // every other call on the store. Two racing first loads of one dataset
  // both encode; the second insert below replaces the first (same rows).
  std::shared_ptr<const release::EncodedRows> rows;
  if (schema.image_index().has_value()) {
    // Pixels straight from their blobs to features: no Table in between.
    DPC_ASSIGN_OR_RETURN(rows, LoadEncodedImages(dataset_id, schema));
  } else {
    DPC_ASSIGN_OR_RETURN(std::shared_ptr<const data::Table> table, LoadRows(dataset_id, schema));
    rows = std::make_shared<const release::EncodedRows>(release::EncodeRows(schema, *table));
  }
  const size_t bytes = rows->bytes();
  if (sealed && bytes <= kMaxCachedRowBytes) {
    auto db = database_->Lock();
    if (auto previous = sealed_rows_.find(dataset_id); previous != sealed_rows_.end()) {
      cached_row_bytes_ -= previous->second.bytes;
      sealed_rows_.erase(previous);
    }
    // Least recently used out until the new rows fit.
    while (cached_row_bytes_ + bytes > kMaxCachedRowBytes && !sealed_rows_.empty()) {
      auto oldest = sealed_rows_.begin();
      for (auto it = sealed_rows_.begin(); it != sealed_rows_.end(); ++it) {
        if (it->second.last_use < oldest->second.last_use) oldest = it;
      }
      cached_row_bytes_ -= oldest->second.bytes;
      sealed_rows_.erase(oldest);
    }
    sealed_rows_[dataset_id] = CachedRows{rows, bytes, ++use_clock_};
    cached_row_bytes_ += bytes;
  }
  return rows;
}

absl::StatusOr<std::vector<std::string>> Store::CheckIntegrity() {
  auto db = database_->Lock();
  std::vector<std::string> problems;
  DPC_ASSIGN_OR_RETURN(auto check, db->Prepare("PRAGMA integrity_check"));
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, check.Step());
    if (!row) break;
    const std::string line = check.ColumnText(0);
    if (line != "ok") problems.push_back(absl::StrCat("sqlite: ", line));
  }
  // Every delivered artefact has its charge: a DONE release has a ledger event.
  DPC_ASSIGN_OR_RETURN(auto uncharged,
                       db->Prepare("SELECT r.id FROM releases r WHERE r.status = 'DONE' AND NOT "
                                    "EXISTS (SELECT 1 FROM ledger_events e WHERE e.release_id = "
                                    "r.id AND e.refund_of IS NULL)"));
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, uncharged.Step());
    if (!row) break;
    problems.push_back(absl::StrCat("release ", uncharged.ColumnText(0), " has no ledger event"));
  }
  // Row counts agree with the stored chunks.
  DPC_ASSIGN_OR_RETURN(auto counts,
                       db->Prepare("SELECT d.id, d.row_count, COALESCE((SELECT SUM(num_rows) "
                                    "FROM row_chunks c WHERE c.dataset_id = d.id), 0) FROM "
                                    "datasets d"));
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, counts.Step());
    if (!row) break;
    if (counts.ColumnInt(1) != counts.ColumnInt(2)) {
      // No counts in the text: it reaches the log, and row counts are
      // private under add/remove (docs/privacy.md 6.1).
      problems.push_back(absl::StrCat("dataset ", counts.ColumnText(0),
                                      ": row_count differs from the stored rows"));
    }
  }
  // Collection report counts agree with the stored reports.
  DPC_ASSIGN_OR_RETURN(auto reports,
                       db->Prepare("SELECT c.id, c.report_count, (SELECT COUNT(*) FROM "
                                    "ldp_reports r WHERE r.collection_id = c.id) FROM "
                                    "collections c"));
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, reports.Step());
    if (!row) break;
    if (reports.ColumnInt(1) != reports.ColumnInt(2)) {
      problems.push_back(absl::StrCat("collection ", reports.ColumnText(0),
                                      ": report_count differs from the stored reports"));
    }
  }
  // Each open column's values are numbered 0, 1, ... (the dictionary
  // LoadOpenColumn reads, which refuses anything else; the foreign key keeps
  // them to datasets that exist). No counts in the text (they are private).
  DPC_ASSIGN_OR_RETURN(auto numbering,
                       db->Prepare("SELECT dataset_id, column_index FROM open_values GROUP BY "
                                    "dataset_id, column_index HAVING MIN(value_index) != 0 OR "
                                    "MAX(value_index) != COUNT(*) - 1"));
  while (true) {
    DPC_ASSIGN_OR_RETURN(bool row, numbering.Step());
    if (!row) break;
    problems.push_back(absl::StrCat("dataset ", numbering.ColumnText(0), " column ",
                                    numbering.ColumnInt(1),
                                    ": open values are not numbered 0, 1, ..."));
  }
  return problems;
}

}  // namespace dpcurator::server
