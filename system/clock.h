// Clock, Sleeper and Random: the seams through which bridge-launch reads the time, waits and
// draws random bits.
//
// Executors, the job registry and the CLI take them from the composition root
// (launcher/services.h) instead of calling std::chrono, std::this_thread or std::random_device
// themselves, so a test can run a retry loop, a poll loop or a lock wait without waiting for
// real (a fake Sleeper records the waits and returns at once) and can predict job ids and
// time stamps (a fake Clock and a fake Random). SystemClock, ThreadSleeper and SystemRandom
// (system/clock.cpp) are the real ones and the only code that reads the system clock,
// sleeps or reads the system's random source; SystemClock and ThreadSleeper are stateless
// and thread-safe, SystemRandom serializes its draws.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>

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
  virtual void pause_for(std::chrono::milliseconds duration) = 0;
};

// Random bits for names that must differ between runs (job ids); not for secrets.
class Random {
 public:
  virtual ~Random() = default;
  virtual uint32_t next() = 0;
};

class SystemClock : public Clock {
 public:
  std::chrono::system_clock::time_point now() const override;
  std::chrono::steady_clock::time_point steady_now() const override;
};

class ThreadSleeper : public Sleeper {
 public:
  void pause_for(std::chrono::milliseconds duration) override;
};

// A Mersenne Twister seeded from the kernel's random source (getrandom; std::random_device
// where that fails) at the first draw, so a command that makes no job id never reads it.
class SystemRandom : public Random {
 public:
  uint32_t next() override;

 private:
  std::mutex mutex_;
  std::optional<std::mt19937> engine_;
};

}  // namespace bridge
