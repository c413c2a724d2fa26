#include "probe/train_loop.h"

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

#include "probe/allreduce.h"
#include "probe/checkpoint.h"
#include "probe/group_comm.h"
#include "probe/knobs.h"
#include "probe/layout.h"
#include "probe/overlap_engine.h"
#include "probe/phases.h"
#include "probe/probe_error.h"

namespace bridge::probe {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double thread_cpu_ns() {
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

  void run(int64_t passes) {
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
  double calibrate_ns_per_pass() {
    int64_t passes = 4;
    for (;;) {
      const double start = thread_cpu_ns();
      run(passes);
      const double elapsed = thread_cpu_ns() - start;
      if (elapsed >= 20e6 || passes >= (int64_t{1} << 40)) {
        const double again_start = thread_cpu_ns();
        run(passes);
        const double again = thread_cpu_ns() - again_start;
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
// all-reduce is in flight. A failure ends the process through fatal().
class CommWorker {
 public:
  explicit CommWorker(RingAllReduce& ring) : ring_(ring), thread_([this] { loop(); }) {}

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

  void submit(const CommJob& job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(job);
      ++pending_;
    }
    work_cv_.notify_one();
  }

  // Waits until every submitted all-reduce has finished; returns their in-flight time (ms)
  // since the previous call.
  double wait_all() {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    const double busy = busy_ms_;
    busy_ms_ = 0.0;
    return busy;
  }

 private:
  void loop() {
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
        log_warning(
            str_printf("--hang-rank: sleeping forever instead of entering the "
                       "all-reduce of step %d",
                       job.step));
        sleep_until_terminated();
      }
      const std::string phase = "step " + std::to_string(job.step);
      const auto start = Clock::now();
      if (const ProbeStatus status = ring_.run(job.data, job.size, phase); !status.ok()) {
        fatal(status);  // Nobody waits for this thread's result.
      }
      const double ms = ms_since(start);
      {
        std::lock_guard<std::mutex> lock(mu_);
        busy_ms_ += ms;
        --pending_;
      }
      done_cv_.notify_all();
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
// is W * ((i + step) % 7) + rank_term(W): small integers, exact in float.
float contribution(int64_t index, int step, int rank) {
  return static_cast<float>((index + step) % 7 + rank % 8 + 1);
}

int64_t rank_term(int64_t world) {
  const int64_t m = world % 8;
  return world + 28 * (world / 8) + m * (m - 1) / 2;
}

float expected_sum(int64_t index, int step, int64_t world) {
  return static_cast<float>(world * ((index + step) % 7) + rank_term(world));
}

struct Bucket {
  int64_t begin = 0;
  int64_t end = 0;
};

// `count` contiguous buckets over `params` gradient values.
std::vector<Bucket> split_buckets(int64_t params, int count) {
  std::vector<Bucket> buckets(static_cast<size_t>(count));
  for (size_t b = 0; b < buckets.size(); ++b) {
    buckets[b].begin = static_cast<int64_t>(b) * params / count;
    buckets[b].end = static_cast<int64_t>(b + 1) * params / count;
  }
  return buckets;
}

ProbeStatus check_step(const std::vector<float>& grads, const std::vector<Bucket>& buckets,
                       int step, int world) {
  int64_t wrong = 0;
  std::string first;
  for (size_t b = 0; b < buckets.size(); ++b) {
    for (int64_t i = buckets[b].begin; i < buckets[b].end; ++i) {
      const float expected = expected_sum(i, step, world);
      const float got = grads[static_cast<size_t>(i)];
      if (got == expected) continue;
      if (wrong++ == 0) {
        first = str_printf(
            "step %d, bucket %zu, index %lld (parameter %lld): got %.9g, "
            "expected %.9g",
            step, b, static_cast<long long>(i - buckets[b].begin), static_cast<long long>(i),
            static_cast<double>(got), static_cast<double>(expected));
      }
    }
  }
  if (wrong > 0) {
    return ProbeStatus(kExitWrongSum,
                       str_printf("wrong all-reduce result at %s (%lld wrong values in this step)",
                                  first.c_str(), static_cast<long long>(wrong)));
  }
  return {};
}

std::string timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &local);
  return buf;
}

double mean(const std::vector<double>& values, size_t first) {
  double sum = 0.0;
  for (size_t i = first; i < values.size(); ++i) sum += values[i];
  return sum / static_cast<double>(values.size() - first);
}

// ---- set-up -----------------------------------------------------------------------------------

int default_microbatches(const Options& options, const Layout& layout) {
  if (options.microbatches) return *options.microbatches;
  const auto gbs = override_value(options.runtime_overrides, "train.global_batch_size");
  const auto mbs = override_value(options.runtime_overrides, "train.micro_batch_size");
  const auto global = gbs ? parse_int64(*gbs) : std::nullopt;
  // An unset micro batch is 1, as in Megatron-Core (a global batch of 16 at dp 8 is then two
  // micro-batches per step, not one).
  const auto micro = mbs ? parse_int64(*mbs) : std::optional<int64_t>(1);
  if (!global || !micro || *micro < 1) return 1;
  return static_cast<int>(std::clamp<int64_t>(*global / (*micro * layout.dp), 1, 64));
}

int default_layers(const Options& options, const Layout& layout) {
  if (options.layers) return *options.layers;
  const auto text = override_value(options.runtime_overrides, "model.num_layers");
  const auto layers = text ? parse_int64(*text) : std::nullopt;
  if (!layers || *layers < 1) return 2;
  return static_cast<int>(std::clamp<int64_t>(*layers / layout.pp, 1, 8));
}

// Megatron-Core refuses these flag combinations: the P2P pairs in its pipeline schedules at the
// first step, a negative wgrad_deferral_limit with the deferral on in its TransformerConfig.
ProbeStatus check_pipeline_flags(const Layout& layout, const OverlapKnobs& knobs) {
  if (knobs.defer_embedding_wgrad_compute && knobs.wgrad_deferral_limit < 0) {
    return ProbeStatus(
        kExitUsage, str_printf("defer_embedding_wgrad_compute=true with wgrad_deferral_limit=%lld: "
                               "Megatron-Core's TransformerConfig refuses a negative limit when "
                               "the deferral is on; set 0 (every micro-batch) or N > 0",
                               static_cast<long long>(knobs.wgrad_deferral_limit)));
  }
  if (layout.pp == 1) return {};
  if (knobs.overlap_p2p_comm && !layout.vpp) {
    return ProbeStatus(kExitUsage,
                       "overlap_p2p_comm=true with pp > 1 needs the interleaved schedule "
                       "(model.virtual_pipeline_model_parallel_size set); Megatron-Core's "
                       "non-interleaved schedule refuses it");
  }
  if (knobs.overlap_p2p_comm && knobs.batch_p2p_comm) {
    return ProbeStatus(kExitUsage,
                       "overlap_p2p_comm and batch_p2p_comm are both true; Megatron-Core's "
                       "interleaved schedule refuses the pair");
  }
  return {};
}

bool phase_active(const std::string& kind, const Layout& l) {
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

ProbeResult<PhaseTable> set_up_phases(const Options& options, Cluster& cluster) {
  const LayoutResult read = read_layout(options.runtime_overrides, cluster.world_size);
  if (!read.layout) return ProbeStatus(kExitUsage, "layout from the plan: " + read.error);
  PhaseTable t;
  t.setup.layout = *read.layout;
  t.setup.knobs = read_knobs(options.runtime_overrides);
  if (ProbeStatus status = check_pipeline_flags(t.setup.layout, t.setup.knobs); !status.ok()) {
    return status;
  }
  if (options.corrupt_rank >= 0 && !phase_active(options.corrupt_in, t.setup.layout)) {
    return ProbeStatus(kExitUsage, "--corrupt-in " + options.corrupt_in +
                                       ": this layout has no such phase (its group size is 1)");
  }
  t.buckets = plan_buckets(
      options.params, options.buckets_flag ? std::optional<int>(options.buckets) : std::nullopt,
      t.setup.knobs.bucket_size);
  t.setup.microbatches = default_microbatches(options, t.setup.layout);
  t.setup.layers = default_layers(options, t.setup.layout);
  t.setup.layer_ms = options.layer_ms;
  t.setup.tokens = options.tokens;
  t.setup.hidden = options.hidden;
  t.setup.buckets = t.buckets.buckets;
  t.setup.params = options.params;
  t.setup.forward_ms = options.compute_ms / 2.0;
  t.setup.tp_chunks = plan_tp_split(t.setup.knobs.tp_comm_overlap_cfg, t.setup.layout.tp).chunks;
  t.groups = groups_of(t.setup.layout, cluster.rank);
  ProbeResult<PeerLinks> links = connect_peers(cluster, peers_of(t.setup.layout, cluster.rank));
  if (!links.ok()) return links.status();
  t.links = std::move(*links);
  return t;
}

std::string rank_list(const Group& group) {
  std::string out;
  for (const int r : group.ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return "[" + out + "]";
}

void print_layout(const PhaseTable& t, const Cluster& cluster) {
  const Layout& l = t.setup.layout;
  std::printf(
      "bridge-probe: layout: %d ranks = tp %d x cp %d x dp %d x pp %d (vpp %s), ep %d, etp %d, "
      "sequence parallel %s; rank order tp-cp-dp-pp, experts etp-ep-edp-pp\n",
      l.world, l.tp, l.cp, l.dp, l.pp, l.vpp ? std::to_string(*l.vpp).c_str() : "-", l.ep, l.etp,
      l.sequence_parallel ? "on" : "off");
  std::printf("bridge-probe: groups of rank %d: tp %s, pp %s, dp %s, ep %s\n", cluster.rank,
              rank_list(t.groups.tp).c_str(), rank_list(t.groups.pp).c_str(),
              rank_list(t.groups.dp).c_str(), rank_list(t.groups.ep).c_str());
  std::printf(
      "bridge-probe: phases: %d micro-batches x %d layers, %g ms device time per layer "
      "forward, %d tokens x %d floats per micro-batch\n",
      t.setup.microbatches, t.setup.layers, t.setup.layer_ms, t.setup.tokens, t.setup.hidden);
}

// Rank 0's banner before the first step: the run's sizes, the overrides, the layout and what
// each forwarded overlap field changes.
void print_training_banner(const Options& options, const PhaseTable& table,
                           int64_t passes_per_bucket, const Cluster& cluster) {
  const Layout& layout = table.setup.layout;
  const OverlapKnobs& knobs = table.setup.knobs;
  std::printf(
      "bridge-probe: training: %d steps (%s), %d buckets (%s), %lld params, compute %g ms/step "
      "(%lld passes/bucket), link %s, overlap %s (%s)\n",
      options.steps, options.steps_source.c_str(), table.buckets.buckets,
      table.buckets.source.c_str(), static_cast<long long>(options.params), options.compute_ms,
      static_cast<long long>(passes_per_bucket),
      options.link_gbps > 0 ? str_printf("%g Gbit/s", options.link_gbps).c_str() : "unlimited",
      options.overlap ? "on" : "off", options.overlap_source.c_str());
  for (const auto& o : options.runtime_overrides)
    std::printf("bridge-probe: runtime override: %s\n", o.c_str());
  print_layout(table, cluster);
  for (const std::string& line :
       describe_knobs(options.runtime_overrides, layout, knobs, table.buckets)) {
    std::printf("bridge-probe: overlap knob %s\n", line.c_str());
  }
  std::fflush(stdout);
  if (knobs.tp_comm_overlap && layout.tp > 1 && !layout.sequence_parallel) {
    log_warning(
        "tp_comm_overlap=true refused: TP overlap needs sequence_parallel (Megatron-Bridge "
        "turns it off the same way); the tp phase runs without overlap. Set "
        "model.sequence_parallel: true");
  }
}

// Every rank's first wrong value goes to rank 0; the verdict comes back to all, so a wrong
// result seen by one rank stops every rank with exit 4 instead of leaving them waiting.
ProbeStatus collective_verdict(Cluster& cluster, const ResultCheck& check) {
  WireWriter mine;
  mine.bytes(check.first);
  mine.u64(static_cast<uint64_t>(check.wrong));
  std::string verdict;
  const ProbeResult<std::vector<std::string>> all =
      gather_to_root(cluster, mine.data(), "result check");
  if (!all.ok()) return all.status();
  for (size_t r = 0; r < all->size() && verdict.empty(); ++r) {  // Empty except on rank 0.
    WireReader reader((*all)[r]);
    const std::string first = reader.bytes();
    const auto wrong = static_cast<long long>(reader.u64());
    if (!reader.ok()) return reader.status();
    if (!first.empty()) {
      verdict = str_printf("wrong collective result on rank %zu at %s (%lld wrong values there)", r,
                           first.c_str(), wrong);
    }
  }
  const ProbeResult<std::string> shared = broadcast_from_root(cluster, verdict, "result check");
  if (!shared.ok()) return shared.status();
  if (!shared->empty()) return ProbeStatus(kExitWrongSum, *shared);
  return {};
}

struct KindSeries {
  std::string name;  // "ep-a2a", "tp", "pp-p2p", "dp-param", "dp-grad"
  std::vector<ScheduleTiming> steps;
};

// The groups of the emulated phases, each over the links of the phase table.
struct PhaseComms {
  GroupComm ep;
  GroupComm tp;
  GroupComm pp;
  GroupComm dp;
  bool param_gather;  // The dp-param phase runs (dp > 1 with the distributed optimizer).
};

// One series per active kind, in the order the step runs them; dp-grad last.
std::vector<KindSeries> active_kinds(const Layout& layout, bool param_gather) {
  std::vector<KindSeries> kinds;
  if (layout.ep > 1) kinds.push_back({"ep-a2a", {}});
  if (layout.tp > 1) kinds.push_back({"tp", {}});
  if (layout.pp > 1) kinds.push_back({"pp-p2p", {}});
  if (param_gather) kinds.push_back({"dp-param", {}});
  kinds.push_back({"dp-grad", {}});
  return kinds;
}

// The step's emulated phases besides the gradient all-reduce, then their collective verdict.
ProbeStatus run_phases(const Options& options, Cluster& cluster, const PhaseSetup& setup,
                       PhaseComms& comms, CommStream& stream, int step,
                       std::vector<KindSeries>& kinds) {
  const Layout& layout = setup.layout;
  const bool corrupt_step = cluster.rank == options.corrupt_rank && step == options.corrupt_at_step;
  auto ctx_for = [&](const char* kind) {
    return StepContext{step, corrupt_step && options.corrupt_in == kind};
  };
  ResultCheck check;
  size_t k = 0;
  if (layout.ep > 1)
    kinds[k++].steps.push_back(run_ep_phase(comms.ep, setup, ctx_for("ep"), stream, check));
  if (layout.tp > 1)
    kinds[k++].steps.push_back(run_tp_phase(comms.tp, setup, ctx_for("tp"), stream, check));
  if (layout.pp > 1)
    kinds[k++].steps.push_back(run_pp_phase(comms.pp, setup, ctx_for("pp"), stream, check));
  if (comms.param_gather) {
    kinds[k++].steps.push_back(
        run_param_gather_phase(comms.dp, setup, StepContext{step, false}, stream, check));
  }
  if (k > 0 && cluster.world_size > 1) return collective_verdict(cluster, check);
  return {};
}

// The gradient all-reduce, as before the other phases existed: this thread computes the buckets
// in order (CPU compute), `worker` all-reduces them.
class GradientPhase {
 public:
  // `grads` holds options.params values; all references must outlive this object.
  GradientPhase(const Options& options, const std::vector<Bucket>& buckets, ComputeKernel& kernel,
                int64_t passes, int dp_index, std::vector<float>& grads, CommWorker& worker)
      : options_(options),
        buckets_(buckets),
        kernel_(kernel),
        passes_(passes),
        dp_index_(dp_index),
        grads_(grads),
        worker_(worker) {}

  // Runs step `step`'s phase; with `hang` the first all-reduce never starts, with `corrupt`
  // one contribution is wrong.
  ScheduleTiming run(int step, bool hang, bool corrupt) {
    const int64_t corrupt_index = options_.params / 2;
    const auto start = Clock::now();
    double compute = 0.0;
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const auto compute_start = Clock::now();
      kernel_.run(passes_);
      for (int64_t i = buckets_[b].begin; i < buckets_[b].end; ++i) {
        grads_[static_cast<size_t>(i)] = contribution(i, step, dp_index_);
      }
      if (corrupt && corrupt_index >= buckets_[b].begin && corrupt_index < buckets_[b].end) {
        grads_[static_cast<size_t>(corrupt_index)] += 1.0F;
      }
      compute += ms_since(compute_start);
      if (options_.overlap) submit(b, step, hang);
    }
    if (!options_.overlap) {
      for (size_t b = 0; b < buckets_.size(); ++b) submit(b, step, hang);
    }
    const double comm = worker_.wait_all();
    return ScheduleTiming{ms_since(start), compute, comm};
  }

 private:
  void submit(size_t b, int step, bool hang) {
    worker_.submit(CommJob{grads_.data() + buckets_[b].begin,
                           static_cast<size_t>(buckets_[b].end - buckets_[b].begin), step,
                           hang && b == 0});
  }

  const Options& options_;
  const std::vector<Bucket>& buckets_;
  ComputeKernel& kernel_;
  int64_t passes_;
  int dp_index_;
  std::vector<float>& grads_;
  CommWorker& worker_;
};

// Per-step totals over all kinds.
struct StepSeries {
  std::vector<double> compute_ms;
  std::vector<double> comm_ms;
  std::vector<double> step_ms;
};

// Adds the finished step to `series`; rank 0 prints its Megatron-format line.
void record_step(const Options& options, int rank, int step, double elapsed,
                 const std::vector<KindSeries>& kinds, StepSeries& series) {
  double step_compute = 0.0;
  double step_comm = 0.0;
  std::string exposed;
  for (const KindSeries& kind : kinds) {
    const ScheduleTiming& t = kind.steps.back();
    step_compute += t.compute_ms;
    step_comm += t.comm_ms;
    if (kinds.size() > 1)
      exposed += str_printf(" %s exposed (ms): %.1f |", kind.name.c_str(), t.exposed_ms());
  }
  series.compute_ms.push_back(step_compute);
  series.comm_ms.push_back(step_comm);
  series.step_ms.push_back(elapsed);
  if (rank == 0) {
    std::printf(
        " [%s] iteration %8d/%8d | consumed samples: %12lld | elapsed time per "
        "iteration (ms): %.1f | compute (ms): %.1f | comm (ms): %.1f |%s\n",
        timestamp().c_str(), step, options.steps,
        static_cast<long long>(step) * static_cast<long long>(options.global_batch), elapsed,
        step_compute, step_comm, exposed.c_str());
    std::fflush(stdout);
  }
}

// The steady-state means (all steps this run made but its first, when there are several).
TrainingReport make_report(int first_step, int world_size, const std::vector<KindSeries>& kinds,
                           const StepSeries& series) {
  TrainingReport report;
  report.world_size = world_size;
  const int ran = static_cast<int>(series.step_ms.size());
  const size_t first = ran > 1 ? 1 : 0;
  report.first_steady_step = first_step + static_cast<int>(first);
  report.steady_steps = ran - static_cast<int>(first);
  report.compute_ms = mean(series.compute_ms, first);
  report.comm_ms = mean(series.comm_ms, first);
  report.step_ms = mean(series.step_ms, first);
  for (const KindSeries& kind : kinds) {
    KindReport r;
    r.name = kind.name;
    std::vector<double> wall, compute, comm;
    for (const ScheduleTiming& t : kind.steps) {
      wall.push_back(t.wall_ms);
      compute.push_back(t.compute_ms);
      comm.push_back(t.comm_ms);
    }
    r.wall_ms = mean(wall, first);
    r.compute_ms = mean(compute, first);
    r.comm_ms = mean(comm, first);
    report.kinds.push_back(r);
  }
  return report;
}

}  // namespace

ProbeResult<TrainingReport> run_training(const Options& options, Cluster& cluster) {
  const int rank = cluster.rank;
  ProbeResult<PhaseTable> set_up = set_up_phases(options, cluster);
  if (!set_up.ok()) return set_up.status();
  const PhaseTable& table = *set_up;
  std::vector<float> grads(static_cast<size_t>(options.params));
  const std::vector<Bucket> buckets = split_buckets(options.params, table.buckets.buckets);

  ComputeKernel kernel;
  const double ns_per_pass = kernel.calibrate_ns_per_pass();
  const auto passes_per_bucket = static_cast<int64_t>(
      std::llround(options.compute_ms * 1e6 / table.buckets.buckets / ns_per_pass));
  if (rank == 0) print_training_banner(options, table, passes_per_bucket, cluster);

  const Layout& layout = table.setup.layout;
  const double timeout_s = cluster.timeout_s;
  PhaseComms comms{GroupComm(table.groups.ep, table.links, timeout_s, options.link_gbps),
                   GroupComm(table.groups.tp, table.links, timeout_s, options.link_gbps),
                   GroupComm(table.groups.pp, table.links, timeout_s, options.link_gbps),
                   GroupComm(table.groups.dp, table.links, timeout_s, options.link_gbps),
                   layout.dp > 1 && table.setup.knobs.distributed_optimizer};
  std::vector<KindSeries> kinds = active_kinds(layout, comms.param_gather);
  const ProbeResult<RingView> dp_ring = comms.dp.ring();
  if (!dp_ring.ok()) return dp_ring.status();
  RingAllReduce ring(*dp_ring, options.link_gbps);
  CommWorker worker(ring);
  GradientPhase gradients(options, buckets, kernel, passes_per_bucket, comms.dp.index(), grads,
                          worker);
  CommStream stream;
  StepSeries series;
  ProbeResult<CheckpointSettings> checkpoints = checkpoint_settings(options);
  if (!checkpoints.ok()) return checkpoints.status();
  ProbeResult<int> resumed = newest_checkpoint(checkpoints->load, cluster.world_size);
  if (!resumed.ok()) return resumed.status();
  if (*resumed > 0) {
    std::printf("bridge-probe: rank %d resumes from checkpoint iteration %d (%s)\n", rank, *resumed,
                checkpoint_dir(checkpoints->load, *resumed).c_str());
    std::fflush(stdout);
  }
  const int first_step = *resumed + 1;
  for (int step = first_step; step <= options.steps; ++step) {
    end_if_terminated();
    if (rank == options.fail_rank && step == options.fail_at_step) {
      fatal(kExitInjectedFault,
            str_printf("injected failure at the start of step %d (--fail-rank %d)", step, rank));
    }
    const bool hang = rank == options.hang_rank && step == options.hang_at_step;
    const bool corrupt_step = rank == options.corrupt_rank && step == options.corrupt_at_step;
    const auto step_start = Clock::now();
    ProbeStatus phases = run_phases(options, cluster, table.setup, comms, stream, step, kinds);
    if (!phases.ok()) return phases;
    const ScheduleTiming grad =
        gradients.run(step, hang, corrupt_step && options.corrupt_in == "dp");
    const double elapsed = ms_since(step_start);
    ProbeStatus checked = check_step(grads, buckets, step, comms.dp.size());
    if (!checked.ok()) return checked;
    kinds.back().steps.push_back(grad);
    record_step(options, rank, step, elapsed, kinds, series);
    // Megatron saves every save_interval iterations and once more when training ends.
    const bool due = checkpoints->interval > 0 && step % checkpoints->interval == 0;
    if (!checkpoints->save.empty() && (due || step == options.steps)) {
      ProbeStatus saved = save_checkpoint(*checkpoints, step, cluster);
      if (!saved.ok()) return saved;
    }
  }
  return make_report(first_step, cluster.world_size, kinds, series);
}

namespace {

// (compute + comm - wall) / min(compute, comm): 1 when the shorter one is fully hidden.
std::string efficiency_text(double compute, double comm, double wall) {
  const double smaller = std::min(compute, comm);
  if (smaller <= 0.0)
    return str_printf("n/a (no %s time)", comm > 0.0 ? "compute" : "communication");
  double efficiency = (compute + comm - wall) / smaller;
  if (std::fabs(efficiency) < 0.005) efficiency = 0.0;  // Print 0.00, not -0.00.
  return str_printf("%.2f", efficiency);
}

}  // namespace

void print_training_summary(const Options& options, const TrainingReport& report) {
  const int last = report.first_steady_step + report.steady_steps - 1;
  const std::string steps = report.steady_steps > 1
                                ? str_printf("steps %d-%d", report.first_steady_step, last)
                                : str_printf("step %d", last);
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
                efficiency_text(grad.compute_ms, grad.comm_ms, grad.wall_ms).c_str());
  }
  if (report.world_size > 1) {
    for (const KindReport& kind : report.kinds) {
      std::printf(
          "overlap efficiency (%s): %s | compute (ms): %.1f | comm (ms): %.1f | exposed comm "
          "(ms): %.1f | phase (ms): %.1f |\n",
          kind.name.c_str(), efficiency_text(kind.compute_ms, kind.comm_ms, kind.wall_ms).c_str(),
          kind.compute_ms, kind.comm_ms, std::max(0.0, kind.wall_ms - kind.compute_ms),
          kind.wall_ms);
    }
  }
  std::fflush(stdout);
}

}  // namespace bridge::probe
