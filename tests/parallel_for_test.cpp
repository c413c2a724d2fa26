// parallel_for (base/parallel_for.h): every index runs exactly once, small counts stay on the
// calling thread, large ones spread over threads.
#include "base/parallel_for.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace bridge {
namespace {

TEST(ParallelFor, EveryIndexRunsExactlyOnce) {
  for (size_t n : {0u, 1u, 63u, 128u, 5000u}) {
    std::vector<std::atomic<int>> runs(n);
    parallel_for(n, 64, [&](size_t i) { ++runs[i]; });
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << "n " << n << " index " << i;
  }
}

TEST(ParallelFor, FewIndicesRunOnTheCallingThread) {
  std::set<std::thread::id> seen;
  std::mutex m;
  parallel_for(100, 64, [&](size_t) {
    std::lock_guard<std::mutex> lock(m);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(seen, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(ParallelFor, ManyIndicesUseTheOtherCoresWhenThereAreAny) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core";
  std::set<std::thread::id> seen;
  std::mutex m;
  std::condition_variable another_came;
  parallel_for(4096, 64, [&](size_t i) {
    std::unique_lock<std::mutex> lock(m);
    seen.insert(std::this_thread::get_id());
    another_came.notify_all();
    // Index 0 waits (at most 10 s) until a second thread has run an index: with helpers there,
    // one takes the next index meanwhile.
    if (i == 0)
      another_came.wait_for(lock, std::chrono::seconds(10), [&] { return seen.size() > 1; });
  });
  EXPECT_GE(seen.size(), 2u);
  EXPECT_LE(seen.size(), kMaxParallelThreads);
}

TEST(ParallelFor, AThrowingBodyStopsTheRestAndRethrowsOnTheCaller) {
  std::atomic<int> ran{0};
  // Every other index takes a millisecond, so the rest would take seconds: a thread that took
  // index 10 and was descheduled before running it cannot see the others finish meanwhile.
  EXPECT_THROW(parallel_for(4096, 64,
                            [&](size_t i) {
                              ++ran;
                              if (i == 10) throw std::runtime_error("index 10");
                              std::this_thread::sleep_for(std::chrono::milliseconds(1));
                            }),
               std::runtime_error);
  EXPECT_LT(ran.load(), 4096) << "no index starts after the throw, bar those already taken";
}

}  // namespace
}  // namespace bridge
