// run_threads with a Standby thread (core/threads.h), and prefault (core/mapped_file.h).
#include <doctest/doctest.h>

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/mapped_file.h"
#include "core/threads.h"

using namespace ckpt;

TEST_CASE("threads: worker 1 runs on the standby thread, the others on their own, all joined before run_threads returns") {
  for (unsigned threads : {1u, 2u, 3u}) {
    CAPTURE(threads);
    Standby standby;
    std::atomic<bool> stop{false};
    std::vector<std::thread::id> ran(threads);
    std::vector<int> done(threads, 0);
    run_threads(
        threads, stop,
        [&](unsigned j) {
          ran[j] = std::this_thread::get_id();
          std::this_thread::sleep_for(std::chrono::milliseconds(j == 1 ? 20 : 0));  // the caller must wait for it
          done[j] = 1;
        },
        &standby);
    for (unsigned j = 0; j < threads; ++j) CHECK(done[j] == 1);
    CHECK(ran[0] == std::this_thread::get_id());
    for (unsigned j = 1; j < threads; ++j) CHECK(ran[j] != std::this_thread::get_id());
    if (threads == 3) CHECK(ran[1] != ran[2]);
  }
}

TEST_CASE("threads: an exception on the standby thread stops the others and is rethrown; an unused standby ends") {
  {
    Standby standby;
    std::atomic<bool> stop{false};
    std::atomic<int> polls{0};
    CHECK_THROWS_WITH_AS(run_threads(
                             2, stop,
                             [&](unsigned j) {
                               if (j == 1) throw std::runtime_error("worker 1 failed");
                               while (!stop) ++polls;  // worker 0 runs until told
                             },
                             &standby),
                         "worker 1 failed", std::runtime_error);
    CHECK(stop);
  }
  { Standby unused; }  // never given work: the destructor ends and joins it
  {
    Standby standby;
    standby.give(nullptr);
    standby.wait();  // nothing to wait for
  }
}

TEST_CASE("prefault: the pages of a range become resident, writable and zero; edges and empty ranges are left alone") {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t n = 64 * page;
  void* m = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  auto* b = static_cast<unsigned char*>(m);
  std::vector<unsigned char> in(n / page);
  REQUIRE(::mincore(m, n, in.data()) == 0);
  size_t resident = 0;
  for (unsigned char c : in) resident += c & 1;
  CHECK(resident == 0);
  prefault(b + 100, n - 200);  // whole pages only: the first and last stay out
  prefault(b, 0);
  prefault(b + 1, page / 2);
  REQUIRE(::mincore(m, n, in.data()) == 0);
  resident = 0;
  for (unsigned char c : in) resident += c & 1;
#ifdef MADV_POPULATE_WRITE
  // (Linux >= 5.14; an older kernel refuses the advice and nothing is mapped in)
  CHECK((resident == 62 || resident == 0));
  CHECK((in[0] & 1) == 0);
  CHECK((in[63] & 1) == 0);
#endif
  for (size_t k = 0; k < n; k += page / 4) CHECK(b[k] == 0);
  std::memset(b, 7, n);
  CHECK(b[n - 1] == 7);
  ::munmap(m, n);
}
