// A fixed pool for the byte-walking passes (the CPU load's check, the streaming load): the calling thread
// is worker 0, the first exception wins and tells the others to stop, every thread is joined before it
// goes up.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ckpt {

// A thread started before its work is known, to be worker 1 of a later run_threads: on a VM, a new
// thread may wait milliseconds for its first turn on a sleeping vCPU, and that wait then overlaps what the
// caller does in between (a sharded set's index is parsed while it wakes). Given no work, it ends when
// destroyed. The constructor throws std::system_error when no thread can be started.
class Standby {
 public:
  Standby() : thread_([this] { serve(); }) {}
  Standby(const Standby&) = delete;
  Standby& operator=(const Standby&) = delete;
  ~Standby() {
    give(nullptr);
    thread_.join();
  }
  // Runs `work` on the standby thread; only the first call counts (nullptr: nothing to run).
  void give(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> g(lock_);
      if (given_) return;
      given_ = true;
      work_ = std::move(work);
    }
    cv_.notify_all();
  }
  // Returns once the thread has run what it was given (call give first; nothing given returns as soon
  // as the thread has seen that).
  void wait() {
    std::unique_lock<std::mutex> g(lock_);
    cv_.wait(g, [&] { return done_; });
  }

 private:
  void serve() {
    std::function<void()> w;
    {
      std::unique_lock<std::mutex> g(lock_);
      cv_.wait(g, [&] { return given_; });
      w = std::move(work_);
    }
    if (w) w();
    {
      std::lock_guard<std::mutex> g(lock_);
      done_ = true;
    }
    cv_.notify_all();
  }
  std::mutex lock_;
  std::condition_variable cv_;
  std::function<void()> work_;
  bool given_ = false, done_ = false;
  std::thread thread_;  // last: started once the members it reads exist
};

// Runs work(j) for j in [0, threads) (j = 0 on the calling thread, j = 1 on `standby` when one is given).
// Workers poll `stop`, which is set on the first exception; that exception is rethrown once all have
// been joined.
template <typename Work>
void run_threads(unsigned threads, std::atomic<bool>& stop, Work&& work, Standby* standby = nullptr) {
  std::exception_ptr error;
  std::mutex lock;
  auto guarded = [&](unsigned j) {
    try {
      work(j);
    } catch (...) {
      std::lock_guard<std::mutex> g(lock);
      if (!error) error = std::current_exception();
      stop = true;
    }
  };
  std::vector<std::thread> pool;
  const unsigned from = standby && threads > 1 ? 2 : 1;
  if (standby) standby->give(threads > 1 ? std::function<void()>([&] { guarded(1); }) : nullptr);
  auto join = [&] {
    for (std::thread& t : pool) t.join();
    if (standby) standby->wait();
  };
  try {
    for (unsigned j = from; j < threads; ++j) pool.emplace_back(guarded, j);
  } catch (...) {  // a thread could not be started: the ones running stop, then the error goes up
    stop = true;
    join();
    throw;
  }
  guarded(0);
  join();
  if (error) std::rethrow_exception(error);
}

}  // namespace ckpt
