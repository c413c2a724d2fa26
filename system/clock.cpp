#include "system/clock.h"

#include <thread>

namespace bridge {

std::chrono::system_clock::time_point SystemClock::now() const {
  return std::chrono::system_clock::now();
}

std::chrono::steady_clock::time_point SystemClock::steady_now() const {
  return std::chrono::steady_clock::now();
}

void ThreadSleeper::pause_for(std::chrono::milliseconds duration) {
  std::this_thread::sleep_for(duration);
}

uint32_t SystemRandom::next() {
  std::lock_guard<std::mutex> hold(mutex_);
  if (!engine_) {
    std::random_device device;
    engine_.emplace(device());
  }
  return static_cast<uint32_t>((*engine_)());
}

}  // namespace bridge
