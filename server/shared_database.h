#ifndef DPCURATOR_SERVER_SHARED_DATABASE_H_
#define DPCURATOR_SERVER_SHARED_DATABASE_H_

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "server/sqlite.h"

namespace dpcurator::server {

// The server's one SQLite connection and the mutex that serialises it.
// Store (datasets, rows, collections, tokens, audit) and Ledger (releases,
// events, sessions) each hold a pointer to the same SharedDatabase, so the
// ledger no longer borrows Store's handle, and the connection is reachable
// only through Lock(): there is no way to name the Database without holding
// the mutex. One connection (not one per component) keeps what the code
// relied on before the split: one SQLite file, a BEGIN IMMEDIATE in one
// component never waits on a busy timeout for the other, and a Store call
// and a Ledger call never interleave on the connection.
//
// Owned by whoever wires the components (CuratorServer); it must outlive
// every Store and Ledger that points at it.
class SharedDatabase {
 public:
  // Opens (creating if needed) with Database::Open's pragmas. No schema:
  // Store::Open applies the migrations.
  static absl::StatusOr<std::unique_ptr<SharedDatabase>> Open(const std::string& path);

  explicit SharedDatabase(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  SharedDatabase(const SharedDatabase&) = delete;
  SharedDatabase& operator=(const SharedDatabase&) = delete;

  // Access to the connection for as long as it lives: holds the mutex.
  // Statements prepared through it (and transactions begun on it) must not
  // be used after it is gone.
  class Locked {
   public:
    Locked(Locked&& other) noexcept
        : lock_(std::move(other.lock_)), db_(std::exchange(other.db_, nullptr)) {}
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;
    Locked& operator=(Locked&&) = delete;

    Database* operator->() const { return db_; }
    Database& operator*() const { return *db_; }
    // For helpers that take a Database* (Transaction::BeginImmediate, the
    // ledger's *Locked functions): only while this object lives.
    Database* get() const { return db_; }

   private:
    friend class SharedDatabase;
    Locked(std::mutex& mutex, Database* db) : lock_(mutex), db_(db) {}
    std::unique_lock<std::mutex> lock_;
    Database* db_;
  };

  // Blocks until no other thread holds the connection. Not reentrant: a
  // function that already holds a Locked passes it on instead of locking
  // again.
  [[nodiscard]] Locked Lock() { return Locked(mutex_, db_.get()); }

 private:
  std::unique_ptr<Database> db_;
  std::mutex mutex_;
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_SHARED_DATABASE_H_
