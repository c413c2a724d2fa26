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
#include "runtime/group_comm.h"
#include "runtime/knobs.h"
#include "runtime/layout.h"
#include "runtime/overlap_engine.h"
#include "runtime/phases.h"
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

// ---- set-up -----------------------------------------------------------------------------------

int DefaultMicrobatches(const Options& options, const Layout& layout) {
  if (options.microbatches) return *options.microbatches;
  const auto gbs = OverrideValue(options.runtime_overrides, "train.global_batch_size");
  const auto mbs = OverrideValue(options.runtime_overrides, "train.micro_batch_size");
  const auto global = gbs ? ParseInt64(*gbs) : std::nullopt;
  const auto micro = mbs ? ParseInt64(*mbs) : std::nullopt;
  if (!global || !micro || *micro < 1) return 1;
  return static_cast<int>(std::clamp<int64_t>(*global / (*micro * layout.dp), 1, 64));
}

int DefaultLayers(const Options& options, const Layout& layout) {
  if (options.layers) return *options.layers;
  const auto text = OverrideValue(options.runtime_overrides, "model.num_layers");
  const auto layers = text ? ParseInt64(*text) : std::nullopt;
  if (!layers || *layers < 1) return 2;
  return static_cast<int>(std::clamp<int64_t>(*layers / layout.pp, 1, 8));
}

// Megatron-Core refuses these flag combinations: the P2P pairs in its pipeline schedules at the
// first step, a negative wgrad_deferral_limit with the deferral on in its TransformerConfig.
void CheckPipelineFlags(const Layout& layout, const OverlapKnobs& knobs) {
  if (knobs.defer_embedding_wgrad_compute && knobs.wgrad_deferral_limit < 0) {
    throw ProbeError(kExitUsage,
                     StrPrintf("defer_embedding_wgrad_compute=true with wgrad_deferral_limit=%lld: "
                               "Megatron-Core's TransformerConfig refuses a negative limit when "
                               "the deferral is on; set 0 (every micro-batch) or N > 0",
                               static_cast<long long>(knobs.wgrad_deferral_limit)));
  }
  if (layout.pp == 1) return;
  if (knobs.overlap_p2p_comm && !layout.vpp) {
    throw ProbeError(kExitUsage,
                     "overlap_p2p_comm=true with pp > 1 needs the interleaved schedule "
                     "(model.virtual_pipeline_model_parallel_size set); Megatron-Core's "
                     "non-interleaved schedule refuses it");
  }
  if (knobs.overlap_p2p_comm && knobs.batch_p2p_comm) {
    throw ProbeError(kExitUsage,
                     "overlap_p2p_comm and batch_p2p_comm are both true; Megatron-Core's "
                     "interleaved schedule refuses the pair");
  }
}

bool PhaseActive(const std::string& kind, const Layout& l) {
  if (kind == "ep") return l.ep > 1;
  if (kind == "tp") return l.tp > 1;
  if (kind == "pp") return l.pp > 1;
  return true;  // "dp": the gradient all-reduce always runs, as before the other phases.
}

struct PhaseTable {
  PhaseSetup setup;
  RankGroups groups;
  PeerLinks links;
  BucketPlan buckets;
};

PhaseTable SetUpPhases(const Options& options, Cluster& cluster) {
  const LayoutResult read = ReadLayout(options.runtime_overrides, cluster.world_size);
  if (!read.layout) throw ProbeError(kExitUsage, "layout from the plan: " + read.error);
  PhaseTable t;
  t.setup.layout = *read.layout;
  t.setup.knobs = ReadKnobs(options.runtime_overrides);
  CheckPipelineFlags(t.setup.layout, t.setup.knobs);
  if (options.corrupt_rank >= 0 && !PhaseActive(options.corrupt_in, t.setup.layout)) {
    throw ProbeError(kExitUsage, "--corrupt-in " + options.corrupt_in +
                                     ": this layout has no such phase (its group size is 1)");
  }
  t.buckets = PlanBuckets(options.params,
                          options.buckets_flag ? std::optional<int>(options.buckets) : std::nullopt,
                          t.setup.knobs.bucket_size);
  t.setup.microbatches = DefaultMicrobatches(options, t.setup.layout);
  t.setup.layers = DefaultLayers(options, t.setup.layout);
  t.setup.layer_ms = options.layer_ms;
  t.setup.tokens = options.tokens;
  t.setup.hidden = options.hidden;
  t.setup.buckets = t.buckets.buckets;
  t.setup.params = options.params;
  t.setup.forward_ms = options.compute_ms / 2.0;
  t.setup.tp_chunks = PlanTpSplit(t.setup.knobs.tp_comm_overlap_cfg, t.setup.layout.tp).chunks;
  t.groups = GroupsOf(t.setup.layout, cluster.rank);
  t.links = ConnectPeers(cluster, PeersOf(t.setup.layout, cluster.rank));
  return t;
}

std::string RankList(const Group& group) {
  std::string out;
  for (const int r : group.ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return "[" + out + "]";
}

void PrintLayout(const PhaseTable& t, const Cluster& cluster) {
  const Layout& l = t.setup.layout;
  std::printf(
      "bridge-probe: layout: %d ranks = tp %d x cp %d x dp %d x pp %d (vpp %s), ep %d, etp %d, "
      "sequence parallel %s; rank order tp-cp-dp-pp, experts etp-ep-edp-pp\n",
      l.world, l.tp, l.cp, l.dp, l.pp, l.vpp ? std::to_string(*l.vpp).c_str() : "-", l.ep, l.etp,
      l.sequence_parallel ? "on" : "off");
  std::printf("bridge-probe: groups of rank %d: tp %s, pp %s, dp %s, ep %s\n", cluster.rank,
              RankList(t.groups.tp).c_str(), RankList(t.groups.pp).c_str(),
              RankList(t.groups.dp).c_str(), RankList(t.groups.ep).c_str());
  std::printf(
      "bridge-probe: phases: %d micro-batches x %d layers, %g ms device time per layer "
      "forward, %d tokens x %d floats per micro-batch\n",
      t.setup.microbatches, t.setup.layers, t.setup.layer_ms, t.setup.tokens, t.setup.hidden);
}

// Every rank's first wrong value goes to rank 0; the verdict comes back to all, so a wrong
// result seen by one rank stops every rank with exit 4 instead of leaving them waiting.
void CollectiveVerdict(Cluster& cluster, const ResultCheck& check) {
  WireWriter mine;
  mine.Bytes(check.first);
  mine.U64(static_cast<uint64_t>(check.wrong));
  std::string verdict;
  if (cluster.rank == 0) {
    const std::vector<std::string> all = GatherToRoot(cluster, mine.data(), "result check");
    for (size_t r = 0; r < all.size() && verdict.empty(); ++r) {
      WireReader reader(all[r]);
      const std::string first = reader.Bytes();
      const auto wrong = static_cast<long long>(reader.U64());
      if (!first.empty()) {
        verdict = StrPrintf("wrong collective result on rank %zu at %s (%lld wrong values there)",
                            r, first.c_str(), wrong);
      }
    }
  } else {
    GatherToRoot(cluster, mine.data(), "result check");
  }
  verdict = BroadcastFromRoot(cluster, verdict, "result check");
  if (!verdict.empty()) throw ProbeError(kExitWrongSum, verdict);
}

struct KindSeries {
  std::string name;  // "ep-a2a", "tp", "pp-p2p", "dp-param", "dp-grad"
  std::vector<ScheduleTiming> steps;
};

}  // namespace

TrainingReport RunTraining(const Options& options, Cluster& cluster) {
  const int rank = cluster.rank;
  PhaseTable table = SetUpPhases(options, cluster);
  const PhaseSetup& setup = table.setup;
  const Layout& layout = setup.layout;
  const OverlapKnobs& knobs = setup.knobs;
  std::vector<float> grads(static_cast<size_t>(options.params));
  std::vector<Bucket> buckets(static_cast<size_t>(table.buckets.buckets));
  for (size_t b = 0; b < buckets.size(); ++b) {
    buckets[b].begin = static_cast<int64_t>(b) * options.params / table.buckets.buckets;
    buckets[b].end = static_cast<int64_t>(b + 1) * options.params / table.buckets.buckets;
  }

  ComputeKernel kernel;
  const double ns_per_pass = kernel.CalibrateNsPerPass();
  const auto passes_per_bucket = static_cast<int64_t>(
      std::llround(options.compute_ms * 1e6 / table.buckets.buckets / ns_per_pass));
  if (rank == 0) {
    std::printf(
        "bridge-probe: training: %d steps (%s), %d buckets (%s), %lld params, compute %g ms/step "
        "(%lld passes/bucket), link %s, overlap %s (%s)\n",
        options.steps, options.steps_source.c_str(), table.buckets.buckets,
        table.buckets.source.c_str(), static_cast<long long>(options.params), options.compute_ms,
        static_cast<long long>(passes_per_bucket),
        options.link_gbps > 0 ? StrPrintf("%g Gbit/s", options.link_gbps).c_str() : "unlimited",
        options.overlap ? "on" : "off", options.overlap_source.c_str());
    for (const auto& o : options.runtime_overrides)
      std::printf("bridge-probe: runtime override: %s\n", o.c_str());
    PrintLayout(table, cluster);
    for (const std::string& line :
         DescribeKnobs(options.runtime_overrides, layout, knobs, table.buckets)) {
      std::printf("bridge-probe: overlap knob %s\n", line.c_str());
    }
    std::fflush(stdout);
    if (knobs.tp_comm_overlap && layout.tp > 1 && !layout.sequence_parallel) {
      LogWarning(
          "tp_comm_overlap=true refused: TP overlap needs sequence_parallel (Megatron-Bridge "
          "turns it off the same way); the tp phase runs without overlap. Set "
          "model.sequence_parallel: true");
    }
  }

  const bool param_gather = layout.dp > 1 && knobs.distributed_optimizer;
  GroupComm ep_comm(table.groups.ep, table.links, cluster.timeout_s, options.link_gbps);
  GroupComm tp_comm(table.groups.tp, table.links, cluster.timeout_s, options.link_gbps);
  GroupComm pp_comm(table.groups.pp, table.links, cluster.timeout_s, options.link_gbps);
  GroupComm dp_comm(table.groups.dp, table.links, cluster.timeout_s, options.link_gbps);
  std::vector<KindSeries> kinds;
  if (layout.ep > 1) kinds.push_back({"ep-a2a", {}});
  if (layout.tp > 1) kinds.push_back({"tp", {}});
  if (layout.pp > 1) kinds.push_back({"pp-p2p", {}});
  if (param_gather) kinds.push_back({"dp-param", {}});
  kinds.push_back({"dp-grad", {}});

  const int64_t corrupt_index = options.params / 2;
  const int dp_size = dp_comm.size();
  const int dp_index = dp_comm.index();
  RingAllReduce ring(dp_comm.Ring(), options.link_gbps);
  CommWorker worker(ring);
  CommStream stream;
  std::vector<double> compute_ms;
  std::vector<double> comm_ms;
  std::vector<double> step_ms;
  for (int step = 1; step <= options.steps; ++step) {
    if (rank == options.fail_rank && step == options.fail_at_step) {
      Fatal(kExitInjectedFault,
            StrPrintf("injected failure at the start of step %d (--fail-rank %d)", step, rank));
    }
    const bool hang = rank == options.hang_rank && step == options.hang_at_step;
    const bool corrupt_step = rank == options.corrupt_rank && step == options.corrupt_at_step;
    auto ctx_for = [&](const char* kind) {
      return StepContext{step, corrupt_step && options.corrupt_in == kind};
    };
    const auto step_start = Clock::now();
    ResultCheck check;
    size_t k = 0;
    if (layout.ep > 1)
      kinds[k++].steps.push_back(RunEpPhase(ep_comm, setup, ctx_for("ep"), stream, check));
    if (layout.tp > 1)
      kinds[k++].steps.push_back(RunTpPhase(tp_comm, setup, ctx_for("tp"), stream, check));
    if (layout.pp > 1)
      kinds[k++].steps.push_back(RunPpPhase(pp_comm, setup, ctx_for("pp"), stream, check));
    if (param_gather) {
      kinds[k++].steps.push_back(
          RunParamGatherPhase(dp_comm, setup, StepContext{step, false}, stream, check));
    }
    if (k > 0 && cluster.world_size > 1) CollectiveVerdict(cluster, check);

    // The gradient all-reduce, as before the other phases existed (CPU compute, bucketed).
    const bool corrupt = corrupt_step && options.corrupt_in == "dp";
    const auto grad_start = Clock::now();
    double compute = 0.0;
    for (size_t b = 0; b < buckets.size(); ++b) {
      const auto compute_start = Clock::now();
      kernel.Run(passes_per_bucket);
      for (int64_t i = buckets[b].begin; i < buckets[b].end; ++i) {
        grads[static_cast<size_t>(i)] = Contribution(i, step, dp_index);
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
    const double grad_wall = MsSince(grad_start);
    const double elapsed = MsSince(step_start);
    CheckStep(grads, buckets, step, dp_size);
    kinds.back().steps.push_back(ScheduleTiming{grad_wall, compute, comm});

    double step_compute = 0.0;
    double step_comm = 0.0;
    std::string exposed;
    for (const KindSeries& kind : kinds) {
      const ScheduleTiming& t = kind.steps.back();
      step_compute += t.compute_ms;
      step_comm += t.comm_ms;
      if (kinds.size() > 1)
        exposed += StrPrintf(" %s exposed (ms): %.1f |", kind.name.c_str(), t.exposed_ms());
    }
    compute_ms.push_back(step_compute);
    comm_ms.push_back(step_comm);
    step_ms.push_back(elapsed);
    if (rank == 0) {
      std::printf(
          " [%s] iteration %8d/%8d | consumed samples: %12lld | elapsed time per "
          "iteration (ms): %.1f | compute (ms): %.1f | comm (ms): %.1f |%s\n",
          Timestamp().c_str(), step, options.steps,
          static_cast<long long>(step) * static_cast<long long>(options.global_batch), elapsed,
          step_compute, step_comm, exposed.c_str());
      std::fflush(stdout);
    }
  }

  TrainingReport report;
  report.world_size = cluster.world_size;
  const size_t first = options.steps > 1 ? 1 : 0;
  report.first_steady_step = static_cast<int>(first) + 1;
  report.steady_steps = options.steps - static_cast<int>(first);
  report.compute_ms = Mean(compute_ms, first);
  report.comm_ms = Mean(comm_ms, first);
  report.step_ms = Mean(step_ms, first);
  for (const KindSeries& kind : kinds) {
    KindReport r;
    r.name = kind.name;
    std::vector<double> wall, compute, comm;
    for (const ScheduleTiming& t : kind.steps) {
      wall.push_back(t.wall_ms);
      compute.push_back(t.compute_ms);
      comm.push_back(t.comm_ms);
    }
    r.wall_ms = Mean(wall, first);
    r.compute_ms = Mean(compute, first);
    r.comm_ms = Mean(comm, first);
    report.kinds.push_back(r);
  }
  return report;
}

namespace {

// (compute + comm - wall) / min(compute, comm): 1 when the shorter one is fully hidden.
std::string Efficiency(double compute, double comm, double wall) {
  const double smaller = std::min(compute, comm);
  if (smaller <= 0.0)
    return StrPrintf("n/a (no %s time)", comm > 0.0 ? "compute" : "communication");
  double efficiency = (compute + comm - wall) / smaller;
  if (std::fabs(efficiency) < 0.005) efficiency = 0.0;  // Print 0.00, not -0.00.
  return StrPrintf("%.2f", efficiency);
}

}  // namespace

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
  // The gradient all-reduce's line keeps its historical form (scripts read it).
  const KindReport& grad = report.kinds.back();
  if (report.world_size == 1) {
    std::printf("overlap efficiency: n/a (single rank, no communication)\n");
  } else {
    std::printf("overlap efficiency: %s\n",
                Efficiency(grad.compute_ms, grad.comm_ms, grad.wall_ms).c_str());
  }
  if (report.world_size > 1) {
    for (const KindReport& kind : report.kinds) {
      std::printf(
          "overlap efficiency (%s): %s | compute (ms): %.1f | comm (ms): %.1f | exposed comm "
          "(ms): %.1f | phase (ms): %.1f |\n",
          kind.name.c_str(), Efficiency(kind.compute_ms, kind.comm_ms, kind.wall_ms).c_str(),
          kind.compute_ms, kind.comm_ms, std::max(0.0, kind.wall_ms - kind.compute_ms),
          kind.wall_ms);
    }
  }
  std::fflush(stdout);
}

}  // namespace bridge::probe
