#include "runtime/overlap_engine.h"

#include <chrono>
#include <exception>
#include <utility>

#include "runtime/probe_error.h"

namespace bridge::probe {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

CommStream::CommStream() : thread_([this] { Loop(); }) {}

CommStream::~CommStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

uint64_t CommStream::Submit(std::function<void()> job) {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    ticket = ++submitted_;
  }
  work_cv_.notify_one();
  return ticket;
}

void CommStream::Wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return finished_ >= ticket; });
}

double CommStream::TakeBusyMs() {
  std::lock_guard<std::mutex> lock(mu_);
  const double busy = busy_ms_;
  busy_ms_ = 0.0;
  return busy;
}

void CommStream::Loop() {
  try {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      const auto start = Clock::now();
      if (job) job();
      const double ms = MsSince(start);
      {
        std::lock_guard<std::mutex> lock(mu_);
        busy_ms_ += ms;
        ++finished_;
      }
      done_cv_.notify_all();
    }
  } catch (const ProbeError& e) {
    Fatal(e.exit_code(), e.what());
  } catch (const std::exception& e) {
    Fatal(kExitInternal, e.what());
  }
}

ScheduleTiming& ScheduleTiming::operator+=(const ScheduleTiming& other) {
  wall_ms += other.wall_ms;
  compute_ms += other.compute_ms;
  comm_ms += other.comm_ms;
  return *this;
}

namespace {

// Runs `part` on the compute stream and adds its duration to `compute_ms`.
void Compute(const std::function<void()>& part, double& compute_ms) {
  if (!part) return;
  const auto start = Clock::now();
  part();
  compute_ms += MsSince(start);
}

}  // namespace

ScheduleTiming RunSchedule(const std::vector<ScheduleItem>& items, bool overlap, CommStream& comm) {
  ScheduleTiming timing;
  comm.TakeBusyMs();
  const auto start = Clock::now();
  const size_t n = items.size();
  std::vector<uint64_t> before_done(n, 0);
  std::vector<uint64_t> after_done(n, 0);
  uint64_t last = 0;
  auto submit_before = [&](size_t i) {
    if (i < n && items[i].before) before_done[i] = last = comm.Submit(items[i].before);
  };
  if (overlap) submit_before(0);
  for (size_t i = 0; i < n; ++i) {
    if (overlap) {
      submit_before(i + 1);  // Prefetch: in flight while item i computes.
    } else {
      submit_before(i);
    }
    comm.Wait(before_done[i]);
    const int needs = items[i].waits_for;
    if (needs >= 0 && static_cast<size_t>(needs) < i)
      comm.Wait(after_done[static_cast<size_t>(needs)]);
    Compute(items[i].compute, timing.compute_ms);
    if (items[i].after) after_done[i] = last = comm.Submit(items[i].after);
    Compute(items[i].deferred, timing.compute_ms);
    if (!overlap) comm.Wait(after_done[i]);
  }
  comm.Wait(last);
  timing.wall_ms = MsSince(start);
  timing.comm_ms = comm.TakeBusyMs();
  return timing;
}

void DeviceCompute(double ms, const std::function<void()>& work) {
  const auto start = Clock::now();
  if (work) work();
  std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double, std::milli>(ms)));
}

}  // namespace bridge::probe
