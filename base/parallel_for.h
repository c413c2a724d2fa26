// parallel_for: runs body(0) .. body(n - 1) on up to kMaxParallelThreads threads (the calling
// thread is one of them), for work that is independent per index and large enough to be worth
// a thread: `why` over thousands of rank logs (reading them, classifying their lines).
//
// Contract: every index runs exactly once; each index's writes must touch only its own slot
// (the caller's vector, sized beforehand). With fewer than `min_per_thread` indices per thread
// fewer threads start, and with n < 2 * min_per_thread none: the caller's thread runs them all.
// A thread that cannot be started is no error; the threads already running share the rest.
// Returns once all indices ran. When a body throws, no further index starts, every thread is
// joined, and the first exception is rethrown on the calling thread.
#pragma once

#include <cstddef>
#include <functional>

namespace bridge {

inline constexpr unsigned kMaxParallelThreads = 8;

void parallel_for(std::size_t n, std::size_t min_per_thread,
                  const std::function<void(std::size_t)>& body);

}  // namespace bridge
