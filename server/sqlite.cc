#include "server/sqlite.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dpcurator::server {
namespace {

absl::Status SqliteError(sqlite3* db, absl::string_view what) {
  const int code = sqlite3_extended_errcode(db);
  const std::string message = absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db));
  if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED) {
    return absl::UnavailableError(absl::StrCat(message, " (database busy; retry)"));
  }
  if ((code & 0xff) == SQLITE_CONSTRAINT) return absl::AlreadyExistsError(message);
  return absl::InternalError(message);
}

}  // namespace

Statement& Statement::Bind(int index, int64_t value) {
  if (sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK && bind_status_.ok())
    bind_status_ = SqliteError(db_, "bind");
  return *this;
}
Statement& Statement::Bind(int index, double value) {
  if (sqlite3_bind_double(stmt_, index, value) != SQLITE_OK && bind_status_.ok())
    bind_status_ = SqliteError(db_, "bind");
  return *this;
}
Statement& Statement::Bind(int index, absl::string_view text) {
  if (sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()),
                        SQLITE_TRANSIENT) != SQLITE_OK &&
      bind_status_.ok())
    bind_status_ = SqliteError(db_, "bind");
  return *this;
}
Statement& Statement::BindBlob(int index, absl::string_view bytes) {
  if (sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()),
                        SQLITE_TRANSIENT) != SQLITE_OK &&
      bind_status_.ok())
    bind_status_ = SqliteError(db_, "bind");
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  if (!bind_status_.ok()) return bind_status_;
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, sqlite3_sql(stmt_));
}

absl::Status Statement::Run() {
  while (true) {
    auto row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

void Statement::CountWork() {
  if (work_ == nullptr || stmt_ == nullptr) return;
  work_->vm_steps += sqlite3_stmt_status(stmt_, SQLITE_STMTSTATUS_VM_STEP, /*resetFlg=*/1);
  work_->full_scan_steps +=
      sqlite3_stmt_status(stmt_, SQLITE_STMTSTATUS_FULLSCAN_STEP, /*resetFlg=*/1);
}

void Statement::Reset() {
  CountWork();
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_status_ = absl::OkStatus();
}

std::string Statement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  return text ? std::string(reinterpret_cast<const char*>(text),
                            sqlite3_column_bytes(stmt_, column))
              : std::string();
}

std::string Statement::ColumnBlob(int column) const {
  const void* blob = sqlite3_column_blob(stmt_, column);
  return blob ? std::string(static_cast<const char*>(blob), sqlite3_column_bytes(stmt_, column))
              : std::string();
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path,
                                                         int busy_timeout_ms) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    std::string message = raw ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    return absl::UnavailableError(
        absl::StrCat("cannot open database '", path, "': ", message));
  }
  std::unique_ptr<Database> db(new Database(raw));
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  // WAL for concurrent readers; synchronous=FULL so that a committed ledger
  // event survives power loss (PRIVACY.md, "Admission").
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                             "PRAGMA foreign_keys=ON"}) {
    auto status = db->Exec(pragma);
    if (!status.ok()) return status;
  }
  return db;
}

Database::~Database() { sqlite3_close_v2(db_); }

absl::Status Database::Exec(absl::string_view sql) {
  char* error = nullptr;
  const std::string statement(sql);
  if (sqlite3_exec(db_, statement.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    absl::Status status = SqliteError(db_, statement.substr(0, 80));
    sqlite3_free(error);
    return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<Statement> Database::Prepare(absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    return SqliteError(db_, absl::StrCat("prepare '", sql.substr(0, 80), "'"));
  }
  return Statement(db_, stmt, &work_);
}

absl::StatusOr<Transaction> Transaction::BeginImmediate(Database* db) {
  absl::Status status = db->Exec("BEGIN IMMEDIATE");
  if (!status.ok()) return status;
  return Transaction(db);
}

Transaction::~Transaction() {
  if (db_ != nullptr) db_->Exec("ROLLBACK").IgnoreError();
}

absl::Status Transaction::Commit() {
  absl::Status status = db_->Exec("COMMIT");
  if (status.ok()) db_ = nullptr;
  return status;
}

}  // namespace dpcurator::server
