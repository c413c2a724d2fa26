#include "system/clock.h"

#include <sys/random.h>

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
    // getrandom(2) first: std::random_device's default source asks the CPU what it offers
    // (CPUID, trapped by the hypervisor on a VM: tens of microseconds per submission).
    uint32_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof seed))
      seed = std::random_device()();
    engine_.emplace(seed);
  }
  return static_cast<uint32_t>((*engine_)());
}

}  // namespace bridge
