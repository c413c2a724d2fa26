// Clock and Sleeper: the seams through which bridge-launch reads the time and waits.
//
// Executors and the CLI take them from the composition root (app/services.h) instead of
// calling std::chrono / std::this_thread themselves, so a test can run a retry loop or a
// poll loop without waiting for real (a fake Sleeper records the waits and returns at once).
// SystemClock and ThreadSleeper are the real ones; both are stateless and thread-safe.
#pragma once

#include <chrono>
#include <thread>

namespace bridge {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::system_clock::time_point now() const = 0;
  virtual std::chrono::steady_clock::time_point steady_now() const = 0;
};

class Sleeper {
 public:
  virtual ~Sleeper() = default;
  virtual void sleep_for(std::chrono::milliseconds duration) = 0;
};

class SystemClock : public Clock {
 public:
  std::chrono::system_clock::time_point now() const override {
    return std::chrono::system_clock::now();
  }
  std::chrono::steady_clock::time_point steady_now() const override {
    return std::chrono::steady_clock::now();
  }
};

class ThreadSleeper : public Sleeper {
 public:
  void sleep_for(std::chrono::milliseconds duration) override {
    std::this_thread::sleep_for(duration);
  }
};

}  // namespace bridge
