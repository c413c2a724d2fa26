#include "runtime/train_loop.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/allreduce.h"
#include "runtime/probe_error.h"

namespace bridge::probe {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double ThreadCpuNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Keeps the compiler from discarding the emulated compute.
volatile float g_sink = 0.0F;

// Real float arithmetic over a small activation buffer (fits in L2, so the cost per pass is
// stable). One pass = kActivations multiply-adds.
class ComputeKernel {
 public:
  ComputeKernel() : activations_(kActivations, 1.0F) {}

  void Run(int64_t passes) {
    float* a = activations_.data();
    for (int64_t p = 0; p < passes; ++p) {
      for (size_t i = 0; i < kActivations; ++i) a[i] = a[i] * 0.999F + 0.001F;
    }
    float sum = 0.0F;
    for (size_t i = 0; i < kActivations; ++i) sum += a[i];
    g_sink = sum;
  }

  // CPU time of one pass on this thread in ns (CPU time, so other processes sharing the core
  // do not distort it). Takes roughly 60 ms of CPU.
  double CalibrateNsPerPass() {
    int64_t passes = 4;
    for (;;) {
      const double start = ThreadCpuNs();
      Run(passes);
      const double elapsed = ThreadCpuNs() - start;
      if (elapsed >= 20e6 || passes >= (int64_t{1} << 40)) {
        const double again_start = ThreadCpuNs();
        Run(passes);
        const double again = ThreadCpuNs() - again_start;
        return std::max(std::min(elapsed, again), 1.0) / static_cast<double>(passes);
      }
      passes *= 2;
    }
  }

 private:
  static constexpr size_t kActivations = 16384;
  std::vector<float> activations_;
};

struct CommJob {
  float* data = nullptr;
  size_t size = 0;
  int step = 0;
  bool hang = false;  // --hang-rank: never start this all-reduce.
};

// The communication thread: all-reduces submitted buckets in order and accounts the time an
// all-reduce is in flight. A failure ends the process through Fatal().
class CommWorker {
 public:
  explicit CommWorker(RingAllReduce& ring) : ring_(ring), thread_([this] { Loop(); }) {}

  ~CommWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    thread_.join();
  }

  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  void Submit(const CommJob& job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(job);
      ++pending_;
    }
    work_cv_.notify_one();
  }

  // Waits until every submitted all-reduce has finished; returns their in-flight time (ms)
  // since the previous call.
  double WaitAll() {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    const double busy = busy_ms_;
    busy_ms_ = 0.0;
    return busy;
  }

 private:
  void Loop() {
    try {
      for (;;) {
        CommJob job;
        {
          std::unique_lock<std::mutex> lock(mu_);
          work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
          if (queue_.empty()) return;
          job = queue_.front();
          queue_.pop_front();
        }
        if (job.hang) {
          LogWarning(
              StrPrintf("--hang-rank: sleeping forever instead of entering the "
                        "all-reduce of step %d",
                        job.step));
          for (;;) ::pause();
        }
        const std::string phase = "step " + std::to_string(job.step);
        const auto start = Clock::now();
        ring_.Run(job.data, job.size, phase);
        const double ms = MsSince(start);
        {
          std::lock_guard<std::mutex> lock(mu_);
          busy_ms_ += ms;
          --pending_;
        }
        done_cv_.notify_all();
      }
    } catch (const ProbeError& e) {
      Fatal(e.exit_code(), e.what());
    } catch (const std::exception& e) {
      Fatal(kExitInternal, e.what());
    }
  }

  RingAllReduce& ring_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<CommJob> queue_;
  int pending_ = 0;
  double busy_ms_ = 0.0;
  bool stop_ = false;
  std::thread thread_;  // Last: starts after the members above exist.
};

// Rank r contributes (i + step) % 7 + r % 8 + 1 to gradient element i, so the sum over W ranks
// is W * ((i + step) % 7) + RankTerm(W): small integers, exact in float.
float Contribution(int64_t index, int step, int rank) {
  return static_cast<float>((index + step) % 7 + rank % 8 + 1);
}

int64_t RankTerm(int64_t world) {
  const int64_t m = world % 8;
  return world + 28 * (world / 8) + m * (m - 1) / 2;
}

float ExpectedSum(int64_t index, int step, int64_t world) {
  return static_cast<float>(world * ((index + step) % 7) + RankTerm(world));
}

struct Bucket {
  int64_t begin = 0;
  int64_t end = 0;
};

void CheckStep(const std::vector<float>& grads, const std::vector<Bucket>& buckets, int step,
               int world) {
  int64_t wrong = 0;
  std::string first;
  for (size_t b = 0; b < buckets.size(); ++b) {
    for (int64_t i = buckets[b].begin; i < buckets[b].end; ++i) {
      const float expected = ExpectedSum(i, step, world);
      const float got = grads[static_cast<size_t>(i)];
      if (got == expected) continue;
      if (wrong++ == 0) {
        first = StrPrintf(
            "step %d, bucket %zu, index %lld (parameter %lld): got %.9g, "
            "expected %.9g",
            step, b, static_cast<long long>(i - buckets[b].begin), static_cast<long long>(i),
            static_cast<double>(got), static_cast<double>(expected));
      }
    }
  }
  if (wrong > 0) {
    throw ProbeError(kExitWrongSum,
                     StrPrintf("wrong all-reduce result at %s (%lld wrong values in this step)",
                               first.c_str(), static_cast<long long>(wrong)));
  }
}

std::string Timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &local);
  return buf;
}

double Mean(const std::vector<double>& values, size_t first) {
  double sum = 0.0;
  for (size_t i = first; i < values.size(); ++i) sum += values[i];
  return sum / static_cast<double>(values.size() - first);
}

}  // namespace

TrainingReport RunTraining(const Options& options, const Cluster& cluster) {
  const int world = cluster.world_size;
  const int rank = cluster.rank;
  std::vector<float> grads(static_cast<size_t>(options.params));
  std::vector<Bucket> buckets(static_cast<size_t>(options.buckets));
  for (size_t b = 0; b < buckets.size(); ++b) {
    buckets[b].begin = static_cast<int64_t>(b) * options.params / options.buckets;
    buckets[b].end = static_cast<int64_t>(b + 1) * options.params / options.buckets;
  }

  ComputeKernel kernel;
  const double ns_per_pass = kernel.CalibrateNsPerPass();
  const auto passes_per_bucket =
      static_cast<int64_t>(std::llround(options.compute_ms * 1e6 / options.buckets / ns_per_pass));
  if (rank == 0) {
    std::printf(
        "bridge-probe: training: %d steps (%s), %d buckets, %lld params, compute %g ms/step "
        "(%lld passes/bucket), link %s, overlap %s (%s)\n",
        options.steps, options.steps_source.c_str(), options.buckets,
        static_cast<long long>(options.params), options.compute_ms,
        static_cast<long long>(passes_per_bucket),
        options.link_gbps > 0 ? StrPrintf("%g Gbit/s", options.link_gbps).c_str() : "unlimited",
        options.overlap ? "on" : "off", options.overlap_source.c_str());
    for (const auto& o : options.runtime_overrides)
      std::printf("bridge-probe: runtime override: %s\n", o.c_str());
    std::fflush(stdout);
  }

  const int64_t corrupt_index = options.params / 2;
  RingAllReduce ring(cluster, options.link_gbps);
  CommWorker worker(ring);
  std::vector<double> compute_ms;
  std::vector<double> comm_ms;
  std::vector<double> step_ms;
  for (int step = 1; step <= options.steps; ++step) {
    if (rank == options.fail_rank && step == options.fail_at_step) {
      Fatal(kExitInjectedFault,
            StrPrintf("injected failure at the start of step %d (--fail-rank %d)", step, rank));
    }
    const bool hang = rank == options.hang_rank && step == options.hang_at_step;
    const bool corrupt = rank == options.corrupt_rank && step == options.corrupt_at_step;
    const auto step_start = Clock::now();
    double compute = 0.0;
    for (size_t b = 0; b < buckets.size(); ++b) {
      const auto compute_start = Clock::now();
      kernel.Run(passes_per_bucket);
      for (int64_t i = buckets[b].begin; i < buckets[b].end; ++i) {
        grads[static_cast<size_t>(i)] = Contribution(i, step, rank);
      }
      if (corrupt && corrupt_index >= buckets[b].begin && corrupt_index < buckets[b].end) {
        grads[static_cast<size_t>(corrupt_index)] += 1.0F;
      }
      compute += MsSince(compute_start);
      if (options.overlap) {
        worker.Submit(CommJob{grads.data() + buckets[b].begin,
                              static_cast<size_t>(buckets[b].end - buckets[b].begin), step,
                              hang && b == 0});
      }
    }
    if (!options.overlap) {
      for (size_t b = 0; b < buckets.size(); ++b) {
        worker.Submit(CommJob{grads.data() + buckets[b].begin,
                              static_cast<size_t>(buckets[b].end - buckets[b].begin), step,
                              hang && b == 0});
      }
    }
    const double comm = worker.WaitAll();
    const double elapsed = MsSince(step_start);
    CheckStep(grads, buckets, step, world);
    compute_ms.push_back(compute);
    comm_ms.push_back(comm);
    step_ms.push_back(elapsed);
    if (rank == 0) {
      std::printf(
          " [%s] iteration %8d/%8d | consumed samples: %12lld | elapsed time per "
          "iteration (ms): %.1f | compute (ms): %.1f | comm (ms): %.1f |\n",
          Timestamp().c_str(), step, options.steps,
          static_cast<long long>(step) * static_cast<long long>(options.global_batch), elapsed,
          compute, comm);
      std::fflush(stdout);
    }
  }

  TrainingReport report;
  report.world_size = world;
  const size_t first = options.steps > 1 ? 1 : 0;
  report.first_steady_step = static_cast<int>(first) + 1;
  report.steady_steps = options.steps - static_cast<int>(first);
  report.compute_ms = Mean(compute_ms, first);
  report.comm_ms = Mean(comm_ms, first);
  report.step_ms = Mean(step_ms, first);
  return report;
}

void PrintTrainingSummary(const Options& options, const TrainingReport& report) {
  const int last = report.first_steady_step + report.steady_steps - 1;
  const std::string steps = report.steady_steps > 1
                                ? StrPrintf("steps %d-%d", report.first_steady_step, last)
                                : StrPrintf("step %d", last);
  std::printf(
      "summary (mean over %s, overlap %s): compute (ms): %.1f | comm (ms): %.1f | "
      "step (ms): %.1f |\n",
      steps.c_str(), options.overlap ? "on" : "off", report.compute_ms, report.comm_ms,
      report.step_ms);
  const double smaller = std::min(report.compute_ms, report.comm_ms);
  if (report.world_size == 1) {
    std::printf("overlap efficiency: n/a (single rank, no communication)\n");
  } else if (smaller > 0.0) {
    double efficiency = (report.compute_ms + report.comm_ms - report.step_ms) / smaller;
    if (std::fabs(efficiency) < 0.005) efficiency = 0.0;  // Print 0.00, not -0.00.
    std::printf("overlap efficiency: %.2f\n", efficiency);
  } else {
    std::printf("overlap efficiency: n/a (no %s time)\n",
                report.comm_ms > 0.0 ? "compute" : "communication");
  }
  std::fflush(stdout);
}

}  // namespace bridge::probe
