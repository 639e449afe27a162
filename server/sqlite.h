#ifndef DPCURATOR_SERVER_SQLITE_H_
#define DPCURATOR_SERVER_SQLITE_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dpcurator::server {

// A thin RAII layer over the SQLite C API: statuses instead of return codes,
// messages that name the statement.
struct SqliteWork {
  int64_t vm_steps = 0;
  int64_t full_scan_steps = 0;
};

class Statement {
 public:
  // `work` (may be null) receives the statement's VM steps when it is reset
  // or finalized (Database::work()).
  Statement(sqlite3* db, sqlite3_stmt* stmt, SqliteWork* work = nullptr)
      : db_(db), stmt_(stmt), work_(work) {}
  Statement(Statement&& other) noexcept
      : db_(other.db_), stmt_(other.stmt_), work_(other.work_) {
    other.stmt_ = nullptr;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() {
    CountWork();
    sqlite3_finalize(stmt_);
  }

  // Parameters are 1-based, as in SQLite.
  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, double value);
  Statement& Bind(int index, absl::string_view text);
  Statement& BindBlob(int index, absl::string_view bytes);

  // Steps once: true when a row is available, false when done.
  absl::StatusOr<bool> Step();
  // Steps to completion (for statements that return no rows).
  absl::Status Run();
  void Reset();

  int64_t ColumnInt(int column) const { return sqlite3_column_int64(stmt_, column); }
  double ColumnDouble(int column) const { return sqlite3_column_double(stmt_, column); }
  std::string ColumnText(int column) const;
  std::string ColumnBlob(int column) const;
  bool ColumnIsNull(int column) const {
    return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
  }

 private:
  // Adds the VM steps run since the last count to *work_ and zeroes them.
  void CountWork();

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  SqliteWork* work_;
  absl::Status bind_status_;
};

class Database {
 public:
  // Opens (creating if needed) with WAL, synchronous=FULL, foreign keys and a
  // busy timeout, so a writer waits rather than failing under contention.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path,
                                                        int busy_timeout_ms = 10000);
  ~Database();

  absl::Status Exec(absl::string_view sql);
  absl::StatusOr<Statement> Prepare(absl::string_view sql);
  int64_t LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
  int Changes() const { return sqlite3_changes(db_); }
  sqlite3* raw() { return db_; }

  // The SQLite virtual-machine steps run by statements prepared here
  // (sqlite3_stmt_status SQLITE_STMTSTATUS_VM_STEP, summed when each is
  // reset or finalized), and the steps of full-table scans among them. A
  // measure of work that does not depend on timing: tests hold admission's
  // work independent of the ledger's history with it (issue 36, item 6).
  // Read under the SharedDatabase lock, like everything here.
  SqliteWork work() const { return work_; }

 private:
  explicit Database(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  SqliteWork work_;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back unless Commit() succeeds.
class Transaction {
 public:
  static absl::StatusOr<Transaction> BeginImmediate(Database* db);
  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction(const Transaction&) = delete;
  ~Transaction();
  absl::Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_SQLITE_H_
