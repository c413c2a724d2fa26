#include "base/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

namespace bridge {

void parallel_for(std::size_t n, std::size_t min_per_thread,
                  const std::function<void(std::size_t)>& body) {
  std::atomic<std::size_t> next{0};
  auto run_some = [&]() {
    for (std::size_t i = next++; i < n; i = next++) body(i);
  };
  std::size_t by_size = n / std::max<std::size_t>(min_per_thread, 1);
  std::size_t threads = std::min<std::size_t>(
      {std::max(1u, std::thread::hardware_concurrency()), kMaxParallelThreads, by_size});
  std::vector<std::thread> helpers;
  for (std::size_t t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(run_some);
    } catch (const std::system_error&) {
      break;  // no thread to be had: the running ones share the rest
    }
  }
  run_some();
  for (auto& h : helpers) h.join();
}

}  // namespace bridge
