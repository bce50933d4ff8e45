// A fixed pool for the byte-walking passes (the CPU load's check, the streaming load): the calling thread
// is worker 0, the first exception wins and tells the others to stop, every thread is joined before it
// goes up.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ckpt {

// Runs work(j) for j in [0, threads) (j = 0 on the calling thread). Workers poll `stop`, which is set on
// the first exception; that exception is rethrown once all have been joined.
template <typename Work>
void run_threads(unsigned threads, std::atomic<bool>& stop, Work&& work) {
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
  try {
    for (unsigned j = 1; j < threads; ++j) pool.emplace_back(guarded, j);
  } catch (...) {  // a thread could not be started: the ones running stop, then the error goes up
    stop = true;
    for (std::thread& t : pool) t.join();
    throw;
  }
  guarded(0);
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace ckpt
