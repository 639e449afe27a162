#ifndef DPCURATOR_CORE_UTIL_SHARD_POOL_H_
#define DPCURATOR_CORE_UTIL_SHARD_POOL_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dpcurator {

// The threads one release or session step of the server computes on, the
// caller's thread included (the machines we size for have two cores; more
// would oversubscribe concurrent steps). Each such computation starts at
// most kMaxStepThreads - 1 threads of its own and joins them before it
// returns, so the server's computing threads are bounded by its row readers
// (server/limits.h, max_row_readers) times this.
inline constexpr int kMaxStepThreads = 2;

// A fixed set of worker threads that run fn(0), ..., fn(shards - 1) of one
// call at a time, the caller's thread taking part: the trainers and the CNN
// judge split each batch into row shards, and a release its row blocks, one
// per core (issue 13). Threads are started once and parked between calls,
// since a step of the small generators takes about a millisecond and
// starting threads per step would cost a noticeable share of it.
class ShardPool {
 public:
  // threads <= 0: one per hardware thread. The caller counts as one.
  explicit ShardPool(int threads);
  ~ShardPool();
  ShardPool(const ShardPool&) = delete;
  ShardPool& operator=(const ShardPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(s) for s in [0, shards), each exactly once, and returns when all
  // have finished. Shards are taken in order by whichever thread is free.
  void Run(int shards, const std::function<void(int shard)>& fn);

 private:
  void WorkerLoop();
  // Takes and runs shards of the current call until none is left.
  void Drain();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int)>* fn_ = nullptr;
  int shards_ = 0;
  int next_shard_ = 0;
  int unfinished_ = 0;
  unsigned generation_ = 0;
  bool stopping_ = false;
};

}  // namespace dpcurator

#endif  // DPCURATOR_CORE_UTIL_SHARD_POOL_H_
