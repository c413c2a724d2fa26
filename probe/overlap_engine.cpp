#include "probe/overlap_engine.h"

#include <chrono>
#include <utility>

#include "probe/probe_error.h"

namespace bridge::probe {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

CommStream::CommStream() : thread_([this] { loop(); }) {}

CommStream::~CommStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

uint64_t CommStream::submit(CommPart job) {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    ticket = ++submitted_;
  }
  work_cv_.notify_one();
  return ticket;
}

void CommStream::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return finished_ >= ticket; });
}

double CommStream::take_busy_ms() {
  std::lock_guard<std::mutex> lock(mu_);
  const double busy = busy_ms_;
  busy_ms_ = 0.0;
  return busy;
}

void CommStream::loop() {
  for (;;) {
    CommPart job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    const auto start = Clock::now();
    if (job) {
      // Nobody waits for this thread's result: a failure ends the process, as on the main thread.
      if (const ProbeStatus status = job(); !status.ok()) fatal(status);
    }
    const double ms = ms_since(start);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ms_ += ms;
      ++finished_;
    }
    done_cv_.notify_all();
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
void time_compute(const std::function<void()>& part, double& compute_ms) {
  if (!part) return;
  const auto start = Clock::now();
  part();
  compute_ms += ms_since(start);
}

}  // namespace

ScheduleTiming run_schedule(const std::vector<ScheduleItem>& items, bool overlap,
                            CommStream& comm) {
  ScheduleTiming timing;
  comm.take_busy_ms();
  const auto start = Clock::now();
  const size_t n = items.size();
  std::vector<uint64_t> before_done(n, 0);
  std::vector<uint64_t> after_done(n, 0);
  uint64_t last = 0;
  auto submit_before = [&](size_t i) {
    if (i < n && items[i].before) before_done[i] = last = comm.submit(items[i].before);
  };
  if (overlap) submit_before(0);
  for (size_t i = 0; i < n; ++i) {
    if (overlap) {
      submit_before(i + 1);  // Prefetch: in flight while item i computes.
    } else {
      submit_before(i);
    }
    comm.wait(before_done[i]);
    const int needs = items[i].waits_for;
    if (needs >= 0 && static_cast<size_t>(needs) < i)
      comm.wait(after_done[static_cast<size_t>(needs)]);
    time_compute(items[i].compute, timing.compute_ms);
    if (items[i].after) after_done[i] = last = comm.submit(items[i].after);
    time_compute(items[i].deferred, timing.compute_ms);
    if (!overlap) comm.wait(after_done[i]);
  }
  comm.wait(last);
  timing.wall_ms = ms_since(start);
  timing.comm_ms = comm.take_busy_ms();
  return timing;
}

void device_compute(double ms, const std::function<void()>& work) {
  const auto start = Clock::now();
  if (work) work();
  std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double, std::milli>(ms)));
}

}  // namespace bridge::probe
