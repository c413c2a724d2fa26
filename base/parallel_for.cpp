#include "base/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace bridge {

void parallel_for(std::size_t n, std::size_t min_per_thread,
                  const std::function<void(std::size_t)>& body) {
  std::atomic<std::size_t> next{0};
  std::mutex failed_mutex;
  std::exception_ptr failed;  // the first exception a body threw; rethrown once all joined
  auto run_some = [&]() {
    try {
      for (std::size_t i = next++; i < n; i = next++) body(i);
    } catch (...) {
      next = n;  // the others stop taking indices
      std::lock_guard<std::mutex> lock(failed_mutex);
      if (!failed) failed = std::current_exception();
    }
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
  if (failed) std::rethrow_exception(failed);
}

}  // namespace bridge
