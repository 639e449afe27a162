#include "core/util/shard_pool.h"

#include <algorithm>

namespace dpcurator {

ShardPool::ShardPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ShardPool::~ShardPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ShardPool::Drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (next_shard_ < shards_) {
    const int shard = next_shard_++;
    const std::function<void(int)>& fn = *fn_;
    lock.unlock();
    fn(shard);
    lock.lock();
    if (--unfinished_ == 0) work_done_.notify_all();
  }
}

void ShardPool::WorkerLoop() {
  unsigned seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    Drain();
  }
}

void ShardPool::Run(int shards, const std::function<void(int shard)>& fn) {
  if (shards <= 0) return;
  if (workers_.empty() || shards == 1) {
    for (int s = 0; s < shards; ++s) fn(s);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    shards_ = shards;
    next_shard_ = 0;
    unfinished_ = shards;
    ++generation_;
  }
  work_ready_.notify_all();
  Drain();
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [&] { return unfinished_ == 0; });
  fn_ = nullptr;
  shards_ = 0;
}

}  // namespace dpcurator
