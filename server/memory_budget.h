#ifndef DPCURATOR_SERVER_MEMORY_BUDGET_H_
#define DPCURATOR_SERVER_MEMORY_BUDGET_H_

// The server's memory budget (issue 36, item 3; ../shared/design/limits.md
// "memory of one request"). Linux overcommits: a large allocation does not
// fail with bad_alloc, the OOM killer ends the process. So every release and
// session step states its projected peak from public parameters before
// admission (plan/releases.h, PlanFootprint), takes a Reservation of it
// here, and is refused (nothing charged) when what it projects plus what
// running work holds would pass the budget. The reservation is held until
// the release or step has finished and is returned by its destructor.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "plan/footprint.h"

namespace dpcurator::server {


// "8G", "512M", "64K", "1T" (powers of 1024, case-insensitive, an optional
// trailing "B" or "iB") or a plain byte count; INVALID_ARGUMENT otherwise.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// Bytes for people: "1.5 GiB", "730 MiB", "12 KiB", "100 bytes".
std::string FormatBytes(int64_t bytes);

// What the process may hold besides the budget: the store's cache of
// encoded rows (Store::kMaxCachedRowBytes, 1 GiB), gRPC's threads and
// message buffers, SQLite's page cache and the code itself. Measured idle
// RSS is about 25 MB; the rest is the row cache and the buffers of calls
// in flight (64 MiB messages).
inline constexpr int64_t kMemoryBaselineBytes = int64_t{3} << 29;  // 1.5 GiB
// The share of what is left after the baseline that work may reserve: the
// projections are upper bounds of the large buffers only (Eigen temporaries,
// protobuf copies of an artefact and allocator slack are not itemised), so a
// quarter is kept back for them.
inline constexpr double kMemoryBudgetFraction = 0.75;
// The smallest default, for tiny machines: enough for the README's quick
// starts (demo tables, Adult AIM at its default model size).
inline constexpr int64_t kMinDefaultMemoryBudget = int64_t{1} << 30;

// The default --memory-budget for a machine with `available` bytes:
// max(kMinDefaultMemoryBudget, (available - baseline) * fraction). On a
// 24 GiB machine about 16.9 GiB.
int64_t DefaultMemoryBudgetFor(int64_t available);
// What this process may use: the cgroup v2 limit
// (/sys/fs/cgroup/memory.max; "max" means none) when there is one and it
// is below physical memory, else physical memory (sysconf).
int64_t AvailableMemory();
// DefaultMemoryBudgetFor(AvailableMemory()).
int64_t DefaultMemoryBudget();

// RESOURCE_EXHAUSTED when the footprint's artefact could pass the server's
// send limit (ServerOptions::max_message_bytes, which the client also
// receives under): such an answer would be charged, stored and never
// deliverable. Names the bound, the limit and the hint; nothing charged.
absl::Status CheckSendLimit(const plan::PlanFootprint& footprint, int64_t max_message_bytes);

// Releases and session steps that may hold a copy of a dataset's rows at
// once (--max-row-readers; 0: DefaultRowReaders()). Row bytes are private
// under ADD_REMOVE, so they never decide a refusal (Reserve says why);
// instead at most this many row-reading works run, the others wait for a
// slot before admission. Rows in memory are then at most this many copies
// of the largest dataset the curator stored, a bound the curator sets and
// no caller can move.
inline constexpr int kMinRowReaders = 2;
// max(kMinRowReaders, the machine's hardware threads): more concurrent
// readers than cores buy no throughput.
int DefaultRowReaders();

class MemoryBudget {
 public:
  // `budget_bytes` > 0, `row_readers` >= 1.
  explicit MemoryBudget(int64_t budget_bytes, int row_readers = DefaultRowReaders())
      : budget_(budget_bytes), row_readers_(row_readers) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Bytes held for one release or step; returned to the budget when
  // destroyed (or Release()d). Move-only; a default one holds nothing.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { Release(); }
    // The public bytes it holds (row bytes are not counted, see Reserve).
    int64_t bytes() const { return bytes_; }
    // Whether it holds one of the row-reader slots.
    bool reads_rows() const { return reads_rows_; }
    void Release();

   private:
    friend class MemoryBudget;
    Reservation(MemoryBudget* budget, int64_t bytes, bool reads_rows)
        : budget_(budget), bytes_(bytes), reads_rows_(reads_rows) {}
    MemoryBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
    bool reads_rows_ = false;
  };

  // Reserves `public_bytes` for `what` ("aim release", "session step"):
  // the projection from the request's public parameters (its model,
  // tables, buffers, artefact). RESOURCE_EXHAUSTED when it plus what
  // running work has reserved would pass the budget: the message names
  // what, its projection, how many running releases and steps hold memory,
  // the budget and the --memory-budget flag. `hint` (may be empty) ends the
  // message: which parameter to lower. Thread-safe.
  //
  // `row_bytes`, the dataset's rows as the work reads them, never decides a
  // refusal: under ADD_REMOVE the row count is private, and a refusal that
  // depended on it would be a free oracle (an analyst moves public_bytes
  // until the answer flips and reads the row count off the threshold,
  // nothing charged). A work with row_bytes > 0 instead takes one of the
  // public number of row-reader slots, waiting for one before admission;
  // `cancelled` (may be null) is polled while it waits, and a cancelled
  // wait is CANCELLED with nothing charged.
  absl::StatusOr<Reservation> Reserve(int64_t public_bytes, int64_t row_bytes,
                                      absl::string_view what, absl::string_view hint = "",
                                      const std::function<bool()>& cancelled = nullptr);

  // Reserve's first check alone: RESOURCE_EXHAUSTED when `public_bytes`
  // is over the whole budget (it could never run here). For a session's
  // open, whose steps reserve later.
  absl::Status CheckAlone(int64_t public_bytes, absl::string_view what,
                          absl::string_view hint = "") const;
  // Reserve(footprint.public_bytes, footprint.row_bytes, what, hint).
  absl::StatusOr<Reservation> Reserve(const plan::PlanFootprint& footprint,
                                      const std::function<bool()>& cancelled = nullptr) {
    return Reserve(footprint.public_bytes, footprint.row_bytes, footprint.what, footprint.hint,
                   cancelled);
  }

  int64_t budget() const { return budget_; }
  int row_readers() const { return row_readers_; }
  // Public bytes reserved now, by how many reservations, and the row-reader
  // slots taken.
  int64_t held() const;
  int64_t holders() const;
  int readers() const;

 private:
  void Return(int64_t bytes, bool reads_rows);
  const int64_t budget_;
  const int row_readers_;
  mutable std::mutex mutex_;
  std::condition_variable reader_freed_;
  int64_t held_ = 0;     // guarded by mutex_
  int64_t holders_ = 0;  // guarded by mutex_
  int readers_ = 0;      // guarded by mutex_
};

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_MEMORY_BUDGET_H_
